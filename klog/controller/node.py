"""The controller role of a ``klog-broker`` in a multi-node quorum: a Raft member over
``<metadata.log.dir>/__cluster_metadata-0`` whose committed log is applied to a metadata image.

IO only: the Raft driver (:mod:`klog.controller.raft`) owns the node and the peer connections, the decisions
(what to propose, when to snapshot, which cluster id) are in :mod:`klog.controller.applier`.

Cluster id: ``meta.properties`` (Kafka's file: version, node.id, cluster.id, directory.id) in the metadata log's
parent directory and in every log dir of a combined node. ``klog-broker format -t <id>`` writes it ahead; without
it, the first leader of a new quorum picks one and commits it with the bootstrap records, and each member writes
its ``meta.properties`` when it applies them. A member whose ``meta.properties`` names another cluster stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid

from klog.controller.applier import (
    ClusterIdMismatch,
    MetadataApplier,
    SnapshotPolicy,
    bootstrap_batches,
    new_cluster_id,
    read_bootstrap_records,
)
from klog.controller.applied import AppliedMetadata
from klog.controller.auto_join import (
    AddSelf,
    AutoJoinState,
    RemoveStaleSelf,
    auto_join_backoff_ms,
    decide_auto_join,
)
from klog.controller.meta_properties import (
    META_PROPERTIES,
    read_meta_properties,
    stored_cluster_id,
    stored_directory_id,
    write_meta_properties,
)
from klog.controller.metadata_feed import FeedEntry, FeedRequest, FeedResponse, FeedSnapshot, MetadataFeed
from klog.controller.quorum import QuorumConfig, Voter, replaced_voter
from klog.controller.observer import MetadataObserver, ObserverConfig, serve_observer
from klog.controller.partition_change import MIN_INSYNC_REPLICAS
from klog.controller.raft import ListenerPort, NotLeaderError, RaftDriver, RaftError
from klog.controller.result import ControllerResult
from klog.controller.single_voter import transaction_abort
from klog.controller.writer import MetadataWriter, RaftAppends, RaftQuorumWriter
from klog.metadata.features import supported_features
from klog.metadata.records import encode_batch, record
from klog.metadata.storage import METADATA_PARTITION, METADATA_TOPIC, read_snapshot, snapshot_ids
from klog.protocol.errors import ErrorCode

__all__ = ["META_PROPERTIES", "AppliedMetadata", "ControllerNode", "read_meta_properties", "stored_cluster_id",
           "stored_directory_id", "write_meta_properties"]

log = logging.getLogger("klog.controller")

#: How often the controller's housekeeping (no-op records, snapshots) looks at the clock.
DUTY_INTERVAL_MS = 100
#: KIP-853: a voter whose controller endpoint differs from the one the quorum's log records tells the leader
#: (UpdateRaftVoter) at most this often until the log records the new one.
UPDATE_VOTER_RETRY_MS = 2000


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ControllerNode(AppliedMetadata):
    """``await start()``; ``image`` is the applied metadata; ``await stop()``. ``failed`` completes with the
    reason when the member stopped on its own (a storage error, another cluster's log)."""

    quorum: QuorumConfig
    driver: RaftDriver

    def __init__(self, quorum: QuorumConfig, metadata_log_dir: str, meta_dirs: list[str], *,
                 noop_interval_ms: int = 500, snapshot_policy: SnapshotPolicy | None = None,
                 port: ListenerPort | None = None, min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> None:
        """``port``: the controller port's non-Raft connections (the node serves its observers there; its
        controller listener, made after it, its Kafka clients); None: a port of its own. ``min_insync_replicas``:
        this node's static ``min.insync.replicas``, the cluster-level one it writes into a new cluster's bootstrap
        records (ELR on)."""
        self.quorum = quorum
        self.min_insync_replicas = min_insync_replicas
        self.partition_dir = os.path.join(metadata_log_dir, f"{METADATA_TOPIC}-{METADATA_PARTITION}")
        self.meta_dirs = list(dict.fromkeys([metadata_log_dir, *meta_dirs]))
        self.noop_interval_ms = noop_interval_ms
        cluster_id = stored_cluster_id(self.meta_dirs, quorum.node_id)
        self.applier = MetadataApplier(cluster_id, snapshot_policy or SnapshotPolicy(), _now_ms())
        self.driver = RaftDriver(quorum, self.partition_dir, port, cluster_id=cluster_id)
        self.driver.add_committed_listener(self._on_committed)
        self.driver.add_snapshot_listener(self._on_snapshot_installed)
        #: the latest committed entries, for the quorum's observers (broker-only nodes; klog.controller.observer)
        self.feed = MetadataFeed(quorum.max_observer_feed_bytes)
        #: serializes this member's metadata decisions (klog.controller.writer.MetadataWriter): shared by its
        #: ControllerApis, its BrokerLifecycleService and its own writes, so each decision is made on the image with
        #: the one before
        self.decisions = asyncio.Lock()
        #: the only appends to the Raft log (a decision's records under ``decisions``; no-ops; the bootstrap records)
        self.appends = RaftAppends(self.driver, self.decisions, quorum.node_id, quorum.max_records_per_batch)
        #: the Raft term in which this member applied its own LeaderChange as leader (None: not yet)
        self._activated_term: int | None = None
        #: the member's own metadata writes (RegisterControllerRecord of KIP-853 voter changes), while it leads
        self.writer = MetadataWriter(RaftQuorumWriter(self, quorum.node_id), self.decisions)
        self._fed = asyncio.Event()   # set (and replaced) whenever the feed or the image moved

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sender: int) -> None:
            login = self.driver.port.login
            await serve_observer(self, reader, writer, sender, quorum.max_frame_bytes,
                                 session_end=login.session_end(writer) if login is not None else None)

        self.driver.port.serve_observers(serve)
        self._duties_task: asyncio.Task[None] | None = None
        self._last_noop_ms = 0.0
        self._snapshotting = False
        self._synced_controllers: object = None
        #: KIP-853: a controller waiting to be added as a voter fetches the log as an observer meanwhile (the leader
        #: admits only a caught-up one); stopped once it is a voter
        self.joining_observer: MetadataObserver | None = None
        self._endpoint_update: asyncio.Task[None] | None = None
        self._endpoint_update_ms = -float(UPDATE_VOTER_RETRY_MS)
        #: controller.quorum.auto.join.enable: the request to the leader in flight, when the next may go, and how many
        #: in a row went unanswered (the backoff doubles with them)
        self._auto_join: asyncio.Task[None] | None = None
        self._auto_join_next_ms = _now_ms() + quorum.fetch_timeout_ms
        self._auto_join_failures = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.failed = loop.create_future()
        self._cluster_id_known = asyncio.Event()
        if self.cluster_id is not None:
            self._cluster_id_known.set()
        await self.driver.start()
        if self.quorum.joining:
            await self._observe_until_voter()
        self._duties_task = loop.create_task(self._duties(), name=f"controller-{self.quorum.node_id}")
        log.info("controller %d: quorum member on %s:%s, voters %s, metadata log %s, cluster %s",
                 self.quorum.node_id, self.quorum.bind_host, self.quorum.bind_port,
                 ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in self.quorum.voters.values()),
                 self.partition_dir, self.cluster_id or "(not yet established)")

    async def stop(self) -> None:
        if self._duties_task is not None:
            self._duties_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._duties_task
        await self._stop_observing()
        for task in (self._endpoint_update, self._auto_join):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.driver.stop()

    async def _observe_until_voter(self) -> None:
        """KIP-853: a controller formatted --no-initial-controllers follows the committed log from the leader as an
        observer, with its directory id (as Kafka's does), until AddRaftVoter made it a voter."""
        driver = self.driver
        if driver.node is None or self.quorum.node_id in driver.voters:
            return
        voters = {i: v for i, v in driver.endpoints.items() if i in set(driver.voters)}
        cfg = ObserverConfig(self.quorum.node_id, voters, self.quorum.bootstrap_servers,
                             fetch_timeout_ms=self.quorum.fetch_timeout_ms,
                             retry_backoff_ms=self.quorum.reconnect_backoff_ms,
                             max_frame_bytes=self.quorum.max_frame_bytes)
        self.joining_observer = MetadataObserver(cfg, self.meta_dirs)
        await self.joining_observer.start()

    async def _stop_observing(self) -> None:
        observer, self.joining_observer = self.joining_observer, None
        if observer is not None:
            await observer.stop()

    # -- committed log -> image ------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        log.error("controller %d: %s", self.quorum.node_id, reason)
        if self.failed is not None and not self.failed.done():
            self.failed.set_result(reason)

    def _on_committed(self, index: int, term: int, kind: str, data: bytes, base: int, nxt: int) -> None:
        try:
            learnt = self.applier.apply(index, kind, data)
        except ClusterIdMismatch as e:
            self._fail(str(e))
            raise
        self.feed.append(FeedEntry(index, term, kind, bytes(data)))
        self._feed_moved()
        self._sync_controller_endpoints()
        if learnt is not None:
            self._learnt_cluster_id(learnt, f"committed at index {index}")
        driver = self.driver   # its soft state (refreshed before the ready cycle's entries are delivered)
        if kind == "leader_change" and driver.node is not None:
            is_leader = driver.role == "leader"
            own = is_leader and term == driver.term
            if own:
                self._activate(term)
            if self.applier.needs_bootstrap(is_leader=is_leader, own_leader_change_applied=own):
                cid = self.applier.cluster_id or new_cluster_id()
                log.info("controller %d: leader of a new quorum: proposing the bootstrap records (cluster %s)",
                         self.quorum.node_id, cid)
                extra = read_bootstrap_records(os.path.dirname(self.partition_dir))
                for batch in bootstrap_batches(cid, extra=extra, max_records=self.quorum.max_records_per_batch,
                                               static_min_insync_replicas=self.min_insync_replicas):
                    self.appends.propose_bootstrap(batch)

    def _activate(self, term: int) -> None:
        """This member applied its own LeaderChange: every entry of earlier terms is applied, so its image shows
        whether the log ends inside a metadata transaction a previous leader left unfinished (it died between the
        transaction's batches). Then, as Kafka's controller on activation, it writes an AbortTransactionRecord
        before anything else; it decides nothing until that is applied (:attr:`may_decide`)."""
        self._activated_term = term
        start = self.applier.loader.transaction_start
        abort = transaction_abort(start)
        if abort:
            log.warning("controller %d: active in term %d; the metadata log ends inside the transaction begun at "
                        "offset %d by a previous controller: aborting it", self.quorum.node_id, term, start)
            self.appends.propose_abort(encode_batch(abort))

    def applied_before_start(self) -> int | None:
        """The commit index its raft log had when it opened."""
        return self.driver.commit_at_start

    def high_watermark(self) -> int | None:
        """A leader knows it once it applied its own LeaderChange (every entry before it is committed and
        applied then); a follower from the commit index the current leader's appends carried (the native
        ``RaftNode.leader_commit``, recorded as each message is stepped)."""
        driver = self.driver
        if driver.role == "leader":
            return self.applier.applied_index + 1 if self._activated_term == driver.term else None
        commit = driver.leader_commit
        return None if commit is None else commit + 1

    @property
    def may_decide(self) -> bool:
        """Whether this member may decide metadata changes: it leads, applied its own LeaderChange in this term,
        and its image has no metadata transaction open (a previous leader's is aborted first; its own are never
        open between decisions, which each wait for all of theirs)."""
        driver = self.driver   # its soft state: the raft node's getters wait for a ready cycle's fsync
        return (driver.node is not None and driver.role == "leader" and self._activated_term == driver.term
                and not self.applier.loader.in_transaction)

    def _sync_controller_endpoints(self) -> None:
        """Voter changes (KIP-853) announce a new voter's endpoints in a RegisterControllerRecord: every member
        reaches it from then on (the record stays in the image, so a restart from a snapshot knows it too)."""
        controllers = self.applier.image.controllers
        if controllers is self._synced_controllers:
            return
        self._synced_controllers = controllers
        for cid, c in controllers.items():
            for ep in c.endpoints:
                if ep.name == self.quorum.listener_name:
                    self.driver.add_peer(Voter(cid, ep.host, ep.port))

    async def register_controller(self, voter: Voter, directory_id: uuid.UUID) -> None:
        """Commit a RegisterControllerRecord with ``voter``'s controller endpoint (its directory id as the
        incarnation id) through the member's write path; returns once committed. Raises NotLeaderError when this
        member does not lead the quorum, RaftError when the record was not committed."""
        rec = record("RegisterControllerRecord", controller_id=voter.node_id, incarnation_id=directory_id,
                     zk_migration_ready=False,
                     end_points=[{"name": self.quorum.listener_name, "host": voter.host, "port": voter.port,
                                  "security_protocol": 0}],
                     features=[{"name": name, "min_supported_version": lo, "max_supported_version": hi}
                               for name, lo, hi in supported_features()])
        decision = await self.writer.decide(lambda image: ControllerResult([rec], None))
        if decision.refusal is not None:   # not leading: NotLeaderError; records lost to a new leader: RaftError
            error = NotLeaderError if decision.not_active else RaftError
            raise error(f"registration of controller {voter.node_id} not committed: {decision.refusal.message}")

    def controller_addresses(self) -> list[tuple[str, int]]:
        """Where this node's broker finds the active controller: the leader first when known, the other quorum
        members, then the bootstrap servers (voter changes add members, so this is read at each connection)."""
        leader = self.leader_address()
        out = [leader] if leader is not None else []
        out += [(v.host, v.port) for _, v in sorted(self.driver.endpoints.items())]
        out += list(self.quorum.bootstrap_servers)
        return list(dict.fromkeys(out))

    def voter_directory_ids(self) -> dict[int, uuid.UUID]:
        """The voters' directory ids (KIP-853 voter keys): the formatted initial voters', then those voter changes
        added or updated (their RegisterControllerRecord's incarnation id)."""
        known = {i: d for i, d in self.driver.initial_directory_ids.items() if d != uuid.UUID(int=0)}
        return {**known, **{cid: c.incarnation_id for cid, c in self.applier.image.controllers.items()}}

    def _learnt_cluster_id(self, cluster_id: str, where: str) -> None:
        for d in self.meta_dirs:
            write_meta_properties(d, self.quorum.node_id, cluster_id)
        self.driver.cluster_id = cluster_id
        assert self._cluster_id_known is not None
        self._cluster_id_known.set()
        log.info("controller %d: cluster id %s established by the quorum (%s)", self.quorum.node_id, cluster_id,
                 where)

    def _on_snapshot_installed(self, index: int, term: int, data: bytes) -> None:
        self._load_latest_snapshot(index)

    def _load_latest_snapshot(self, index: int) -> None:
        ids = snapshot_ids(self.partition_dir)
        if not ids:
            return
        sid = ids[-1]
        snap = read_snapshot(os.path.join(self.partition_dir, sid.filename))
        try:
            learnt = self.applier.load_snapshot(index, snap.batches, sid.end_offset, sid.epoch,
                                                snap.last_contained_log_time_ms, _now_ms())
        except ClusterIdMismatch as e:
            self._fail(str(e))
            raise
        self.feed.reset(index)
        self._feed_moved()
        self._sync_controller_endpoints()
        if learnt is not None:
            self._learnt_cluster_id(learnt, f"from the leader's snapshot at index {index}")

    # -- observers -------------------------------------------------------------------------------
    def _feed_moved(self) -> None:
        self._fed.set()
        self._fed = asyncio.Event()

    async def observer_fetch(self, request: FeedRequest, max_bytes: int) -> FeedResponse:
        """The committed entries after ``request.after_index`` (waiting up to its ``max_wait_ms`` for one), or a
        snapshot of this member's image when they are no longer kept (never inside a metadata transaction: the
        entries after it would start mid-transaction)."""
        deadline = time.monotonic() + request.max_wait_ms / 1000
        # the driver's soft state: the raft node's getters wait for a ready cycle's fsync (every observer's fetch)
        members = set(self.driver.voters) if self.driver.node is not None else set(self.quorum.voters)
        voters = tuple((v.node_id, v.host, v.port) for v in sorted(self.driver.endpoints.values(),
                                                                     key=lambda v: v.node_id) if v.node_id in members)
        while True:
            entries = self.feed.after(request.after_index, max_bytes)
            if entries is None and not self.applier.loader.in_transaction:
                image = self.applier.image
                snap = FeedSnapshot(self.applier.applied_index, image.highest_offset + 1, image.epoch,
                                    image.last_contained_log_time_ms, self.applier.snapshot_content())
                return FeedResponse(self.driver.leader_id, self.driver.term, voters, snapshot=snap,
                                    committed_index=self.applier.applied_index)
            remaining = deadline - time.monotonic()
            if entries or remaining <= 0:
                return FeedResponse(self.driver.leader_id, self.driver.term, voters, entries=tuple(entries or ()),
                                    committed_index=self.applier.applied_index)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._fed.wait(), remaining)

    # -- housekeeping ----------------------------------------------------------------------------
    async def _duties(self) -> None:
        run_task = self.driver._run_task
        while True:
            await asyncio.sleep(DUTY_INTERVAL_MS / 1000)
            if run_task is not None and run_task.done():
                exc = None if run_task.cancelled() else run_task.exception()
                self._fail(f"the raft member stopped: {exc!r}")
                return
            now = _now_ms()
            driver = self.driver   # its soft state: the raft node's getters wait for a ready cycle's fsync
            if driver.node is None:
                continue
            if self.joining_observer is not None and self.quorum.node_id in driver.voters:
                log.info("controller %d: a voter now (AddRaftVoter): no longer fetching as an observer",
                         self.quorum.node_id)
                await self._stop_observing()
            observer = self.joining_observer
            if observer is not None and driver.observing_only and self._no_other_disk_votes(observer):
                driver.observing_only = False   # a voter with its node id is this disk's (or is added as this disk)
                log.info("controller %d: no voter holds its node id under another directory id: it answers raft "
                         "messages", self.quorum.node_id)
            if observer is not None and self.quorum.auto_join:
                self._maybe_auto_join(now)
            # a voter by its log (a member restarted before it learnt that its addition committed is one too: it
            # cannot hear from the others until they know its new endpoint)
            if (self.quorum.dynamic_voters and self.quorum.node_id in driver.log_voters
                    and (self._endpoint_update is None or self._endpoint_update.done())
                    and now - self._endpoint_update_ms >= UPDATE_VOTER_RETRY_MS):
                mine = self.quorum.voters[self.quorum.node_id]
                recorded = self._recorded_endpoint()   # None: its registration not applied here yet
                if recorded is None or (recorded.host, recorded.port) != (mine.host, mine.port):
                    self._endpoint_update_ms = now
                    self._endpoint_update = asyncio.get_running_loop().create_task(self._update_endpoint(mine))
            if (self.noop_interval_ms > 0 and driver.role == "leader" and self.applier.bootstrapped
                    and now - self._last_noop_ms >= self.noop_interval_ms and self.appends.propose_noop()):
                self._last_noop_ms = now
            if not self._snapshotting and self.applier.snapshot_due(now):
                await self._snapshot(now)

    def _observed_directory_ids(self, observer: MetadataObserver) -> dict[int, uuid.UUID]:
        """The voters' directory ids as this joining controller knows them: learnt when it joined, then the
        RegisterControllerRecords its observer fetched."""
        return {**self.driver.initial_directory_ids,
                **{cid: c.incarnation_id for cid, c in observer.image.controllers.items()}}

    def _no_other_disk_votes(self, observer: MetadataObserver) -> bool:
        """Whether the observer, caught up with the leader, sees no voter holding this node id under another
        directory id (its disk's old one): raft messages for this node id are then this disk's."""
        hw = observer.high_watermark()
        if observer.leader_id <= 0 or not observer.cfg.voters or hw is None or observer.applier.applied_index + 1 < hw:
            return False
        return not replaced_voter(self.quorum.node_id, observer.cfg.voters, self._observed_directory_ids(observer),
                                  stored_directory_id(self.meta_dirs[0]))

    def _maybe_auto_join(self, now: float) -> None:
        """controller.quorum.auto.join.enable: what :func:`decide_auto_join` says to send the leader, from the quorum
        as this controller's observer last learnt it."""
        observer = self.joining_observer
        assert observer is not None
        directory = stored_directory_id(self.meta_dirs[0]) or uuid.UUID(int=0)
        known = self._observed_directory_ids(observer)
        state = AutoJoinState(node_id=self.quorum.node_id, directory_id=directory, enabled=self.quorum.auto_join,
                              dynamic=self.quorum.dynamic_voters, leader_id=observer.leader_id,
                              voters=frozenset(observer.cfg.voters), directory_ids=known,
                              in_flight=self._auto_join is not None and not self._auto_join.done(), now_ms=now,
                              next_attempt_ms=self._auto_join_next_ms)
        decided = decide_auto_join(state)
        if decided is not None:
            leader = observer.cfg.voters[decided.leader_id]
            self._auto_join = asyncio.get_running_loop().create_task(self._send_auto_join(decided, leader, directory))

    async def _send_auto_join(self, decided: AddSelf | RemoveStaleSelf, leader: Voter, directory: uuid.UUID) -> None:
        """One auto-join request to the leader (bounded by the request timeout); the next waits the period after an
        answer Kafka's observer expects (none, REQUEST_TIMED_OUT: not caught up yet, DUPLICATE_VOTER), longer after
        no answer or another error."""
        from klog.controller.describe_quorum import FORWARD_TIMEOUT_S, controller_request
        from klog.protocol import ProtocolError

        me = self.quorum.voters[self.quorum.node_id]
        request: dict[str, object]
        if isinstance(decided, RemoveStaleSelf):
            what = f"RemoveRaftVoter for its old directory {decided.stale_directory_id}"
            api_key, request = 81, {"cluster_id": self.cluster_id, "voter_id": me.node_id,
                                    "voter_directory_id": decided.stale_directory_id}
        else:
            what = f"AddRaftVoter (directory {directory}, {me.host}:{me.port})"
            api_key, request = 80, {"cluster_id": self.cluster_id, "timeout_ms": int(FORWARD_TIMEOUT_S * 1000) - 1000,
                                    "voter_id": me.node_id, "voter_directory_id": directory,
                                    "listeners": [{"name": self.quorum.listener_name, "host": me.host,
                                                   "port": me.port}]}
        code: int | None = None
        try:
            answer = await controller_request(leader, api_key, 0, request, security=self.driver.cfg.client_security)
            code = int(answer.error_code)
            message = answer.error_message or ErrorCode(code).name
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as e:
            message = repr(e)
        expected = code in (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.DUPLICATE_VOTER)
        self._auto_join_failures = 0 if expected else self._auto_join_failures + 1
        wait = auto_join_backoff_ms(self.quorum.fetch_timeout_ms, self._auto_join_failures)
        self._auto_join_next_ms = _now_ms() + wait
        if code == ErrorCode.NONE:
            log.info("controller %d: auto-join: leader %d took its %s", me.node_id, leader.node_id, what)
        else:
            log.info("controller %d: auto-join: leader %d did not take its %s: %s; asking again in %d ms",
                     me.node_id, leader.node_id, what, message, wait)

    def _recorded_endpoint(self) -> Voter | None:
        """Where the quorum's log says this voter is: its latest RegisterControllerRecord, else the voter set
        ``format`` wrote."""
        me = self.quorum.node_id
        registered = self.applier.image.controllers.get(me)
        for ep in registered.endpoints if registered is not None else []:
            if ep.name == self.quorum.listener_name:
                return Voter(me, ep.host, ep.port)
        return self.quorum.formatted_voters.get(me)

    async def _update_endpoint(self, mine: Voter) -> None:
        """KIP-853 UpdateRaftVoter: this voter's controller endpoint moved; the leader records the new one (the
        leader itself proposes it). Sent to the leader if known, else to each voter, following the current leader
        a refusal names; retried by the duties loop until the log records it."""
        from klog.controller.describe_quorum import controller_request
        from klog.protocol import ProtocolError

        directory = stored_directory_id(self.meta_dirs[0]) or uuid.UUID(int=0)
        if self.driver.is_leader:
            try:
                await asyncio.wait_for(self.register_controller(mine, directory), UPDATE_VOTER_RETRY_MS / 1000)
            except (RaftError, asyncio.TimeoutError) as e:   # the duties loop retries
                log.info("controller %d: its new endpoint %s:%d not recorded yet: %r", mine.node_id, mine.host,
                         mine.port, e)
            return
        driver = self.driver
        request = {"cluster_id": self.cluster_id, "current_leader_epoch": driver.term if driver.node is not None else -1,
                   "voter_id": mine.node_id, "voter_directory_id": directory,
                   "listeners": [{"name": self.quorum.listener_name, "host": mine.host, "port": mine.port}],
                   "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}}
        others = [v for i, v in sorted(self.driver.endpoints.items()) if i != mine.node_id]
        leader = self.driver.endpoints.get(self.driver.leader_id)
        targets = list(dict.fromkeys(([leader] if leader is not None and leader.node_id != mine.node_id else [])
                                     + others))
        for _ in range(len(others) + 2):   # each voter, and a leader a refusal named
            if not targets:
                break
            target = targets.pop(0)
            try:
                answer = await controller_request(target, 82, 0, request,
                                                  security=self.driver.cfg.client_security)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as e:
                log.debug("controller %d: UpdateRaftVoter to %s:%d: %r", mine.node_id, target.host, target.port, e)
                continue
            if answer.error_code == ErrorCode.NONE:
                log.info("controller %d: told leader %d its controller endpoint moved to %s:%d (UpdateRaftVoter)",
                         mine.node_id, target.node_id, mine.host, mine.port)
                return
            named = answer.current_leader
            if named is not None and named.leader_id > 0 and named.host and named.port > 0:
                targets.append(Voter(named.leader_id, named.host, named.port))
        log.info("controller %d: no leader took UpdateRaftVoter (endpoint %s:%d) yet; retrying", mine.node_id,
                 mine.host, mine.port)

    async def _snapshot(self, now: float) -> None:
        index = self.applier.applied_index
        self._snapshotting = True
        try:
            path = await self.driver.create_snapshot(index, self.applier.snapshot_content())
        except RaftError as e:
            log.warning("controller %d: snapshot at index %d failed: %s", self.quorum.node_id, index, e)
        else:
            self.applier.snapshot_taken(index, now)
            self.feed.compact_through(index)
            log.info("controller %d: snapshot of the metadata image at index %d: %s", self.quorum.node_id, index, path)
        finally:
            self._snapshotting = False


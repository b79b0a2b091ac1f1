"""The quorum's observers: ``process.roles=broker`` nodes that follow a separate controller quorum (IO).

- :func:`serve_observer`: a quorum member's side, for a controller-listener connection that starts with
  :data:`~klog.controller.metadata_feed.OBSERVER_PREAMBLE`: answers fetches from the member's
  :class:`~klog.controller.metadata_feed.MetadataFeed` of committed entries, or with a snapshot of its image;
- :class:`MetadataObserver`: a broker-only node's side. It fetches from the leader (any voter while no leader is
  known: each names the leader it knows, and the observer moves there), applies what it gets through the same
  :class:`~klog.controller.applier.MetadataApplier` the members use, and exposes what a broker reads of a
  quorum member (``applier``, ``image``, ``cluster_id``, ``quorum.voters``, ``driver.leader_id`` /
  ``is_leader`` / ``cfg.voters``), so :class:`klog.broker.server.BrokerServer` serves it unchanged. It never
  proposes: the broker forwards controller requests to the leader's controller listener, registers and
  heartbeats there.

The observer keeps no metadata log of its own (a Kafka broker does): every start fetches a snapshot of the
leader's image first, then the entries after it; ``meta.properties`` in its log dirs pins the cluster id.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import struct
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from klog.controller.applier import ClusterIdMismatch, MetadataApplier, SnapshotPolicy
from klog.controller.metadata_feed import (
    OBSERVER_PREAMBLE,
    FeedEntry,
    FeedProtocolError,
    FeedRequest,
    FeedResponse,
    FeedSnapshot,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from klog.controller.applied import AppliedMetadata
from klog.controller.meta_properties import stored_cluster_id, stored_directory_id, write_meta_properties
from klog.client.stream_login import open_session
from klog.controller.quorum import QuorumConfigError, Voter, parse_voters
from klog.metadata.records import decode_batches

if TYPE_CHECKING:
    from klog.client.security import ClientSecurity
    from klog.metadata.config import BrokerConfig

__all__ = ["MetadataObserver", "ObserverConfig", "serve_observer"]

log = logging.getLogger("klog.controller.observer")

_SIZE = struct.Struct(">i")
_HELLO = struct.Struct(f">{len(OBSERVER_PREAMBLE)}si")
_CLUSTER_ID_LEN = struct.Struct(">h")
ZERO_UUID = uuid.UUID(int=0)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclasses.dataclass(frozen=True)
class ObserverConfig:
    """A broker-only node's view of the controller quorum (Kafka's keys where Kafka has them)."""

    node_id: int
    #: the quorum (``controller.quorum.voters``); empty when it is learnt from ``bootstrap``
    voters: Mapping[int, Voter]
    #: ``controller.quorum.bootstrap.servers`` (KIP-853): controller listeners that name the voters
    bootstrap: tuple[tuple[str, int], ...] = ()
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms: a silent controller is left after this
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms, doubling ...
    retry_backoff_max_ms: int = 1000  # ... up to this
    #: klog's own bounds: how long one fetch waits for new entries, and the bytes of entries in one answer
    max_wait_ms: int = 500
    max_fetch_bytes: int = 1 << 20
    #: the largest answer read (a snapshot of the whole image comes in one)
    max_frame_bytes: int = 128 << 20
    #: TLS and SASL login of connections to the controller listener (a klog.client.security.ClientSecurity;
    #: None: PLAINTEXT)
    client_security: ClientSecurity | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def from_broker_config(cls, config: BrokerConfig, *,
                           dynamic_ssl: Callable[[], Mapping[str, str]] | None = None) -> ObserverConfig:
        """The settings of a ``process.roles=broker`` node (``dynamic_ssl()``: the controller listener's dynamic
        ssl.* settings of this node, which its connections follow); a misconfiguration names the key."""
        from klog.controller.quorum import controller_listener_security, quorum_endpoints

        voters, bootstrap = quorum_endpoints(config)
        if config.node_id in voters:
            raise QuorumConfigError(f"process.roles: node.id {config.node_id} is a voter in controller.quorum.voters "
                                    "but process.roles has no controller role")
        if config.controller_listeners:
            raise QuorumConfigError(f"listeners: a broker-only node has no controller listener, but "
                                    f"{config.controller_listeners[0].name} is in controller.listener.names")
        return cls(config.node_id, voters, bootstrap, fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                   retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
                   client_security=controller_listener_security(config, server=False, dynamic_of=dynamic_ssl).client)


# -- the member's side -------------------------------------------------------------------------------------------
class ObserverNoting(Protocol):
    """A member's raft driver as :func:`serve_observer` uses it (:class:`klog.controller.raft.RaftDriver`)."""

    def note_observer(self, node_id: int, applied_index: int, directory_id: uuid.UUID = ...) -> None: ...


class ObservedMember(Protocol):
    """The quorum member :func:`serve_observer` answers for (:class:`klog.controller.node.ControllerNode`, which
    imports this module)."""

    @property
    def cluster_id(self) -> str | None: ...

    @property
    def driver(self) -> ObserverNoting: ...

    async def observer_fetch(self, request: FeedRequest, max_bytes: int) -> FeedResponse: ...


async def serve_observer(member: ObservedMember, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sender: int,
                         max_frame_bytes: int, *, session_end: float | None = None) -> None:
    """Answer one observer's fetches (``member``: the :class:`klog.controller.node.ControllerNode`; the hello's
    preamble and node id are read already). ``session_end``: when the connection's SASL session ends (monotonic
    seconds, KIP-368; None: never): a fetch after it closes the connection, as Kafka closes a connection whose
    session ended at its next request (the observer logs in on a new connection before the end)."""
    peer = writer.get_extra_info("peername")
    try:
        (n,) = _CLUSTER_ID_LEN.unpack(await reader.readexactly(_CLUSTER_ID_LEN.size))
        theirs = (await reader.readexactly(n)).decode(errors="replace") if n > 0 else None
        directory_id = uuid.UUID(bytes=await reader.readexactly(16))
        if theirs and member.cluster_id and theirs != member.cluster_id:
            log.error("observer %d (%s) belongs to cluster %s, this controller to cluster %s: refused", sender, peer,
                      theirs, member.cluster_id)
            writer.write(encode_response(FeedResponse(-1, -1, refused=f"this controller belongs to cluster "
                                                                      f"{member.cluster_id}, not {theirs}")))
            await writer.drain()
            return
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
            if not 0 < size <= 64:
                log.warning("observer %d (%s) sent a %d-byte request; closing", sender, peer, size)
                return
            request = decode_request(await reader.readexactly(size))
            if session_end is not None and time.monotonic() >= session_end:
                log.warning("observer %d (%s): closing its connection: its SASL session ended "
                            "(connections.max.reauth.ms) and it did not log in again", sender, peer)
                return
            member.driver.note_observer(sender, request.after_index, directory_id)
            answer = await member.observer_fetch(request, min(request.max_bytes, max_frame_bytes))
            writer.write(encode_response(answer))
            await writer.drain()
    except FeedProtocolError as e:
        log.warning("observer %d (%s): %s; closing", sender, peer, e)
    except (asyncio.IncompleteReadError, ConnectionError, OSError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


# -- the observer's side -----------------------------------------------------------------------------------------
class MetadataObserver(AppliedMetadata):
    """``await start()``; ``image`` is the quorum's committed metadata as fetched so far; ``await stop()``.
    ``failed`` completes with the reason when it stopped on its own (another cluster's quorum)."""

    role = "observer"
    is_leader = False

    @property
    def endpoints(self) -> Mapping[int, Voter]:
        """The voters' controller listeners, as a raft driver's ``endpoints`` (the quorum as last learnt)."""
        return self.cfg.voters

    def __init__(self, cfg: ObserverConfig, meta_dirs: list[str], *, snapshot_policy: SnapshotPolicy | None = None
                 ) -> None:
        self.cfg = self.quorum = cfg
        self.driver = self   # what a broker reads of a raft driver: leader_id, is_leader, endpoints
        self.meta_dirs = list(dict.fromkeys(meta_dirs))
        cluster_id = stored_cluster_id(self.meta_dirs, cfg.node_id)
        self.applier = MetadataApplier(cluster_id, snapshot_policy or SnapshotPolicy(), _now_ms())
        #: the active controller as the last answering member named it (0: not known)
        self.leader_id = 0
        self.term = 0
        #: (snapshots loaded, entries applied, connections made): figures for tests and logs
        self.snapshots_loaded = 0
        self.entries_applied = 0
        self.connections = 0
        self._task: asyncio.Task[None] | None = None
        self._rotation = 0
        #: the leader's committed index + 1 as its last answer said (None: no answer from the leader yet)
        self._high_watermark: int | None = None
        #: the last connection was left to renew its SASL session (KIP-368): the next login is its renewal
        self._renewing = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.failed = loop.create_future()
        self._cluster_id_known = asyncio.Event()
        self._maybe_ready()
        self._task = loop.create_task(self._run(), name=f"observer-{self.cfg.node_id}")
        log.info("observer %d: following controller quorum %s (process.roles=broker), cluster %s", self.cfg.node_id,
                 ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in self.cfg.voters.values()),
                 self.cluster_id or "(learnt from the quorum)")

    def _maybe_ready(self) -> None:
        if self.cluster_id is not None and self.cfg.voters and self._cluster_id_known is not None:
            self._cluster_id_known.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _fail(self, reason: str) -> None:
        log.error("observer %d: %s", self.cfg.node_id, reason)
        if self.failed is not None and not self.failed.done():
            self.failed.set_result(reason)

    def _target(self) -> Voter:
        """The leader when known, else the next voter (or bootstrap server) in turn."""
        leader = self.cfg.voters.get(self.leader_id)
        if leader is not None:
            return leader
        self._rotation += 1
        if not self.cfg.voters:
            host, port = self.cfg.bootstrap[self._rotation % len(self.cfg.bootstrap)]
            return Voter(-1, host, port)
        ids = sorted(self.cfg.voters)
        return self.cfg.voters[ids[self._rotation % len(ids)]]

    def _learn_voters(self, answer: FeedResponse) -> None:
        """Take the voters a controller names: an observer bootstrapped by ``controller.quorum.bootstrap.servers``
        learns them (before its broker starts: the broker reaches the controllers through them), and every observer
        follows KIP-853 voter changes (a leader among added voters is fetched from, as Kafka's observers do)."""
        if not answer.voters:
            return
        voters = {i: Voter(i, host, port) for i, host, port in answer.voters}
        if voters == dict(self.cfg.voters):
            return
        how = "a voter change" if self.cfg.voters else "from controller.quorum.bootstrap.servers"
        self.cfg = self.quorum = dataclasses.replace(self.cfg, voters=voters)
        log.info("observer %d: the controller quorum is %s (%s)", self.cfg.node_id,
                 ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in voters.values()), how)

    async def _run(self) -> None:
        backoff = self.cfg.retry_backoff_ms
        while True:
            target = self._target()
            try:
                moved = await self._follow(target)
                backoff = self.cfg.retry_backoff_ms
                if moved:
                    continue
            except ClusterIdMismatch as e:
                self._fail(str(e))
                return
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, FeedProtocolError) as e:
                if self._renewing:
                    log.warning("observer %d: could not renew its SASL session with controller %d at %s:%d "
                                "(connections.max.reauth.ms): %s; it fetches no metadata until a login succeeds",
                                self.cfg.node_id, target.node_id, target.host, target.port, e)
                else:
                    log.debug("observer %d: controller %d at %s:%d: %r", self.cfg.node_id, target.node_id,
                              target.host, target.port, e)
                self._renewing = False
                if self.leader_id == target.node_id:
                    self.leader_id = 0   # it went silent: ask the others who leads now
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.cfg.retry_backoff_max_ms)

    async def _follow(self, target: Voter) -> bool:
        """Fetch from ``target`` until it fails, or names another leader, or the connection's SASL session is near
        its end (KIP-368: the controller closes it then) (True: fetch again at once, from the leader on a new
        connection)."""
        timeout_s = (self.cfg.max_wait_ms + self.cfg.fetch_timeout_ms) / 1000
        reader, writer, renew_at = await open_session(target.host, target.port, self.cfg.client_security, timeout_s,
                                                      client_id=f"klog-observer-{self.cfg.node_id}")
        if self._renewing:
            log.info("observer %d: renewed its SASL session with controller %d", self.cfg.node_id, target.node_id)
            self._renewing = False
        try:
            cid = (self.cluster_id or "").encode()
            directory = stored_directory_id(self.meta_dirs[0]) or ZERO_UUID
            writer.write(_HELLO.pack(OBSERVER_PREAMBLE, self.cfg.node_id) + _CLUSTER_ID_LEN.pack(len(cid)) + cid
                         + directory.bytes)
            self.connections += 1
            while True:
                writer.write(encode_request(FeedRequest(self.applier.applied_index, self.cfg.max_wait_ms,
                                                        self.cfg.max_fetch_bytes)))
                await writer.drain()
                (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(_SIZE.size), timeout_s))
                if not 0 < size <= self.cfg.max_frame_bytes:
                    raise FeedProtocolError(f"controller {target.node_id} answered a {size}-byte frame "
                                            f"(max {self.cfg.max_frame_bytes})")
                answer = decode_response(await asyncio.wait_for(reader.readexactly(size), timeout_s))
                if answer.refused is not None:
                    raise ClusterIdMismatch(f"controller {target.node_id} refused this observer: {answer.refused}")
                self._learn_voters(answer)
                self._apply(target.node_id, answer)
                self._learn_high_watermark(target.node_id, answer)
                self._maybe_ready()
                if answer.leader_id > 0 and answer.leader_id != self.leader_id:
                    log.info("observer %d: the active controller is %d (term %d)", self.cfg.node_id,
                             answer.leader_id, answer.term)
                    self.leader_id, self.term = answer.leader_id, answer.term
                if self.leader_id in self.cfg.voters and self.leader_id != target.node_id:
                    return True
                if renew_at is not None and time.monotonic() >= renew_at:
                    self._renewing = True
                    return True
        finally:
            writer.close()

    def high_watermark(self) -> int | None:
        """As the leader last answered (Kafka's observer reads it in each fetch response from the leader)."""
        return self._high_watermark

    def _learn_high_watermark(self, source: int, answer: FeedResponse) -> None:
        """The leader's committed index (an answer from another member does not count); from a leader of an older
        klog, which does not send it, an answer with nothing new says this observer holds all it has."""
        if answer.leader_id != source:
            return
        if answer.committed_index is not None:
            known = answer.committed_index + 1
        elif not answer.entries and answer.snapshot is None:
            known = self.applier.applied_index + 1
        else:
            return
        self._high_watermark = max(known, self._high_watermark or 0)

    def _apply(self, source: int, answer: FeedResponse) -> None:
        if answer.snapshot is not None:
            self._load_snapshot(source, answer.snapshot)
        for e in answer.entries:
            if e.index <= self.applier.applied_index:
                continue
            self._apply_entry(e)

    def _load_snapshot(self, source: int, s: FeedSnapshot) -> None:
        learnt = self.applier.load_snapshot(s.index, decode_batches(s.data), s.end_offset, s.epoch,
                                            s.last_contained_log_time_ms, _now_ms())
        self.snapshots_loaded += 1
        log.info("observer %d: loaded controller %d's image at index %d (offset %d)", self.cfg.node_id, source,
                 s.index, s.end_offset - 1)
        if learnt is not None:
            self._learnt_cluster_id(learnt)

    def _apply_entry(self, e: FeedEntry) -> None:
        learnt = self.applier.apply(e.index, e.kind, e.data)
        self.entries_applied += 1
        if learnt is not None:
            self._learnt_cluster_id(learnt)

    def _learnt_cluster_id(self, cluster_id: str) -> None:
        for d in self.meta_dirs:
            write_meta_properties(d, self.cfg.node_id, cluster_id)
        log.info("observer %d: cluster id %s learnt from the quorum", self.cfg.node_id, cluster_id)

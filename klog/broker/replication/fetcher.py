"""Replica fetchers: the follower side's IO (Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread``).

One asyncio task per (source broker, fetcher index), ``num.replica.fetchers`` per source broker; a partition goes
to fetcher ``hash(topic, partition) % num.replica.fetchers`` of its leader. Each task keeps one klog client
connection (:class:`klog.client.connection.BrokerConnection`) to the leader's listener and loops: ask every
partition's :class:`.follower.FollowerPartition` what to send, send one Fetch as a replica (v15 ``ReplicaState``
with this broker's epoch, or the top-level ``replica_id`` before), and carry out each partition's answer on the
native log: an answer of up to ``klog.replica.append.inline.bytes`` is appended on the event loop (as a leader
appends produced batches), larger ones and truncations in a worker thread (``append_as_follower`` /
``truncate_to`` release the GIL), the partitions of one answer side by side; then mirror the follower high
watermark into the log. Limits: ``replica.fetch.max.bytes`` per partition,
``replica.fetch.response.max.bytes`` per response, ``replica.fetch.wait.max.ms`` and ``replica.fetch.min.bytes``
for the leader's long poll, ``replica.fetch.backoff.ms`` after an error. Partitions a topic lists in
``follower.replication.throttled.replicas`` for this broker share ``follower.replication.throttled.rate``
(:mod:`.throttle`): a round leaves them out while the rate's bucket is used up and asks at most what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from klog.broker.security import InterBrokerConnector
from klog.client.connection import BrokerConnection
from klog.client.errors import KafkaError
from klog.client.fetch_session import FETCH_SESSION_ERRORS, FETCH_SESSION_VERSION, FetchSessionHandler, SessionRequest
from klog.protocol import ApiKey, Struct
from klog.protocol.errors import ErrorCode

from .epochs import EpochEndOffset
from .follower import Action, ActionKind, FetchPosition
from .replica import FollowedPartition, Key, monotonic_ms
from .throttle import ReplicationThrottle

__all__ = ["FETCH_VERSION", "FollowedReplicas", "ReplicaFetcher", "ReplicaFetcherManager"]

log = logging.getLogger("klog.broker.replication")

#: The Fetch version replicas send when the leader has it (ReplicaState, KIP-903); older leaders get their highest.
FETCH_VERSION = 15
#: a partition in the fetch session: (topic, partition, topic id)
SessionKey = tuple[str, int, Any]
#: The ListOffsets version asking a leader for its log start and end as a replica.
LIST_OFFSETS_VERSION = 4
CONNECT_TIMEOUT_MS = 5000
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
EARLIEST, LATEST = -2, -1
#: How soon a fetcher looks again at a partition another fetcher is still appending to (a leader change mid-append).
APPENDING_RECHECK_MS = 10


async def _failed(exc: BaseException) -> None:
    raise exc


class FollowedReplicas(Protocol):
    """What the fetchers tell the owner of the replicas they follow (the replica manager that made them)."""

    def broker_epoch(self) -> int:
        """This broker's epoch, sent with each replica fetch (KIP-903)."""
        ...

    def follower_high_watermark(self, followed: FollowedPartition) -> None:
        """``followed``'s follower state was moved by an append or a truncation: its high watermark may have."""
        ...

    def on_follower_append_done(self, key: Key) -> None:
        """An append (and its replay) or a truncation of ``key`` ended, whether or not it is still followed."""
        ...

    def on_follower_write_failed(self, followed: FollowedPartition, exc: OSError) -> None:
        """The append or truncation of ``followed``'s log failed with a storage error (its log dir may go offline)."""
        ...


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader (``leader_id``)."""

    def __init__(self, owner: ReplicaFetcherManager, leader_id: int, index: int) -> None:
        self.owner = owner
        self.leader_id = leader_id
        self.index = index
        self.parts: dict[Key, FollowedPartition] = {}
        self._wake = asyncio.Event()
        #: while a Fetch is out, resolved when a partition is added (followed anew or in a new leader epoch): the
        #: Fetch the leader may hold (up to ``replica.fetch.wait.max.ms``) does not name it
        self._joined: asyncio.Future[None] | None = None
        self._conn: BrokerConnection | None = None
        #: the KIP-227 fetch session with the leader: a round names only the partitions whose position changed
        self._session: FetchSessionHandler[SessionKey] = FetchSessionHandler()
        self.task: asyncio.Task[None] | None = None

    def add(self, followed: FollowedPartition) -> None:
        self.parts[followed.key] = followed
        self._wake.set()
        if self._joined is not None and not self._joined.done():
            self._joined.set_result(None)

    def remove(self, key: Key) -> None:
        self.parts.pop(key, None)
        self._wake.set()

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(
                self.run(), name=f"replica-fetcher-{self.leader_id}-{self.index}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None
        self._drop_connection()

    # ---- the loop -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.owner.config
        backoff_s = cfg["replica.fetch.backoff.ms"] / 1000
        while True:
            if not self.parts:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                conn = await self._connection()
                if conn is None:
                    await self._sleep(backoff_s)
                    continue
                delay = await self._fetch_once(conn)
            except asyncio.CancelledError:
                raise
            except (KafkaError, OSError) as exc:
                log.info("replica fetcher %d-%d: fetch from broker %d failed: %s", self.leader_id, self.index,
                         self.leader_id, exc)
                self._drop_connection()
                await self._sleep(backoff_s)
                continue
            except Exception:
                log.exception("replica fetcher %d-%d failed", self.leader_id, self.index)
                self._drop_connection()
                await self._sleep(backoff_s)
                continue
            if delay is not None:
                await self._sleep(delay)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0))

    async def _fetch_once(self, conn: BrokerConnection) -> float | None:
        """One round: the requests the partitions ask for; returns how long to wait before the next (None: at
        once)."""
        now = self.owner.clock()
        positions: dict[Key, tuple[FollowedPartition, FetchPosition]] = {}
        wake_at: int | None = None
        for key, fp in list(self.parts.items()):
            if key in self.owner.appending:   # moved here from another leader's fetcher mid-append: soon again
                until = now + APPENDING_RECHECK_MS
                wake_at = until if wake_at is None else min(wake_at, until)
                continue
            nxt = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, now)
            if isinstance(nxt, FetchPosition):
                positions[key] = (fp, nxt)
            elif nxt.kind is ActionKind.BACKOFF:
                wake_at = nxt.until_ms if wake_at is None else min(wake_at, nxt.until_ms)
            elif nxt.kind is ActionKind.LIST_LEADER_OFFSETS:
                await self._leader_offsets(conn, fp)
                return None
            elif nxt.kind is ActionKind.OFFSETS_FOR_LEADER_EPOCH:
                await self._epoch_end_offset(conn, fp, nxt.epoch)
                return None
        cfg = self.owner.config
        max_bytes: dict[Key, int] = {}
        throttle = self.owner.throttle
        if throttle is not None and positions:
            allowance, wait_ms = throttle.allowance(now)
            for key in [k for k in positions if throttle.is_throttled(*k)]:
                if allowance <= 0:   # follower.replication.throttled.rate used up: these wait for the bucket
                    del positions[key]
                    wake_at = now + wait_ms if wake_at is None else min(wake_at, now + wait_ms)
                else:
                    max_bytes[key] = max(1, min(cfg["replica.fetch.max.bytes"], int(allowance)))
        if not positions:   # every partition backs off or waits for metadata (fenced) or for the throttle
            return max(0, wake_at - now) / 1000 if wake_at is not None else cfg["replica.fetch.backoff.ms"] / 1000
        version = min(FETCH_VERSION, conn.broker_versions.get(ApiKey.FETCH, (0, 12))[1])
        default_max = cfg["replica.fetch.max.bytes"]
        session = self._session.build({
            (key[0], key[1], fp.topic_id): (pos, max_bytes.get(key, default_max))
            for key, (fp, pos) in positions.items()}) if version >= FETCH_SESSION_VERSION else None
        # A partition left out of this round (backing off after an error, such as a leader that has not yet
        # applied its leadership, or another fetcher's append under way) is asked again when its wait ends: the
        # leader may hold this Fetch no longer than that, or the partition would wait out the whole hold.
        max_wait_ms = cfg["replica.fetch.wait.max.ms"]
        if wake_at is not None:
            max_wait_ms = max(0, min(max_wait_ms, wake_at - now))
        body = self._fetch_request(positions, version, max_bytes, session, max_wait_ms)
        try:
            response = await self._unless_joined(conn, body, version, max_wait_ms)
        except BaseException:
            self._session.on_failure()
            raise
        if response is None:
            # A partition joined while the leader holds this fetch (a new leader after a failover, whose other
            # partitions this fetcher already follows, waited up to replica.fetch.wait.max.ms for its first fetch,
            # and acks=all writes with it). A connection answers in order: the next fetch, which names the
            # partition, goes on a new one.
            log.info("replica fetcher %d-%d: a partition joined while broker %d held a fetch: fetching again at "
                     "once on a new connection", self.leader_id, self.index, self.leader_id)
            self._drop_connection()
            return None
        if session is not None and not self._session.on_response(session, response.error_code,
                                                                 response.session_id):
            if response.error_code in FETCH_SESSION_ERRORS:   # the next request, a full one, goes at once
                log.info("replica fetcher %d-%d: fetch session %d answered error %d: fetching in full",
                         self.leader_id, self.index, session.session_id, response.error_code)
                return None
        if response.error_code:
            log.info("replica fetcher %d-%d: Fetch answered error %d", self.leader_id, self.index,
                     response.error_code)
            return cfg["replica.fetch.backoff.ms"] / 1000
        answers = self._answer(response, positions, version, max_bytes)
        # The partitions side by side: appends too large to run inline go to worker threads at once rather than
        # one after another, so the next fetch (which tells the leader what this replica has: its high watermark
        # and acks=all wait for it) goes out a round trip to the worker pool later, not one per partition.
        if len(answers) == 1:
            await answers[0]
        elif answers:
            results = await asyncio.gather(*answers, return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
        return None

    async def _unless_joined(self, conn: BrokerConnection, body: Struct, version: int, max_wait_ms: int) -> Any:
        """The answer to the Fetch ``body`` (which the leader may hold ``max_wait_ms``), or None (the request
        abandoned) if a partition joins before it comes."""
        await conn.drain()
        answer = conn.send(ApiKey.FETCH, body, version=version, timeout=max_wait_ms / 1000)
        self._joined = joined = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((answer, joined), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._joined = None
            if not answer.done():
                answer.cancel()
        return None if answer.cancelled() else answer.result()

    def _answer(self, response: Any, positions: dict[Key, tuple[FollowedPartition, FetchPosition]], version: int,
                max_bytes: dict[Key, int]) -> list[Awaitable[None]]:
        """The leader's answer, partition by partition, decided now, with no await between the checks that the
        partition is still followed from this leader in the epoch the request was sent in and the claim of the
        partitions it appends to or truncates (:attr:`ReplicaFetcherManager.appending`): a leadership that
        arrives before that work's first step must wait for it. Returns the work still to wait for."""
        by_id = {fp.topic_id: key[0] for key, (fp, _) in positions.items()}
        throttle = self.owner.throttle
        answers: list[Awaitable[None]] = []
        answered: set[Key] = set()
        for topic in response.responses:
            name = by_id.get(topic.topic_id) if version >= 13 else topic.topic
            if name is None:
                continue
            for p in topic.partitions:
                key = (name, p.partition_index)
                sent = positions.get(key)
                if sent is None or not self._still_follows(sent[0], sent[1].current_leader_epoch) \
                        or key in answered:
                    # removed, followed anew or in a newer epoch while the request was out (an answer to the old
                    # epoch, such as FENCED_LEADER_EPOCH, says nothing of the new one), or named twice
                    continue
                answered.add(key)
                if key in max_bytes and p.records:
                    throttle.moved(len(p.records), self.owner.clock())   # type: ignore[union-attr]
                try:
                    answer = self._on_partition(sent[0], sent[1], p)
                except Exception as exc:   # this partition's inline append failed: the others go on
                    answer = _failed(exc)
                if answer is not None:
                    answers.append(answer)
        return answers

    def _still_follows(self, fp: FollowedPartition, leader_epoch: int) -> bool:
        """``fp`` is this fetcher's still, and in ``leader_epoch`` (Kafka's fetcher drops an answer whose
        partition's leader epoch changed while the request was out)."""
        return self.parts.get(fp.key) is fp and fp.state.leader_epoch == leader_epoch

    def _fetch_request(self, positions: dict[Key, tuple[FollowedPartition, FetchPosition]], version: int,
                       max_bytes: dict[Key, int], session: SessionRequest[SessionKey] | None,
                       max_wait_ms: int) -> Struct:
        """The Fetch for ``positions``: all of them, or (in a fetch session) those ``session`` names, and the
        partitions it forgets."""
        cfg = self.owner.config
        topics: dict[str, Struct] = {}
        named: Iterable[Key] = positions.keys() if session is None else [(k[0], k[1]) for k in session.to_send]
        for key in named:
            fp, pos = positions[key]
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = Struct(topic=key[0], topic_id=fp.topic_id, partitions=[])
            topic.partitions.append(Struct(
                partition=key[1], current_leader_epoch=pos.current_leader_epoch, fetch_offset=pos.fetch_offset,
                last_fetched_epoch=pos.last_fetched_epoch, log_start_offset=pos.log_start_offset,
                partition_max_bytes=max_bytes.get(key, cfg["replica.fetch.max.bytes"]), high_watermark=2**63 - 1))
        forgotten: dict[tuple[str, Any], Struct] = {}
        for name, index, topic_id in session.to_forget if session is not None else []:
            entry = forgotten.get((name, topic_id))
            if entry is None:
                entry = forgotten[(name, topic_id)] = Struct(topic=name, topic_id=topic_id, partitions=[])
            entry.partitions.append(index)
        node = self.owner.node_id
        return Struct(
            cluster_id=None, replica_id=node if version < 15 else -1,
            replica_state=Struct(replica_id=node, replica_epoch=self.owner.replicas.broker_epoch()),
            max_wait_ms=max_wait_ms, min_bytes=cfg["replica.fetch.min.bytes"],
            max_bytes=cfg["replica.fetch.response.max.bytes"], isolation_level=0,
            session_id=session.session_id if session is not None else 0,
            session_epoch=session.session_epoch if session is not None else -1,
            topics=list(topics.values()), forgotten_topics_data=list(forgotten.values()), rack_id="")

    def _on_partition(self, fp: FollowedPartition, pos: FetchPosition, p: Any) -> Awaitable[None] | None:
        """The follower state's verdict on one partition's answer, and its append or truncation started (claimed
        now, carried out on a task of its own); the work to wait for, if any."""
        diverging = getattr(p, "diverging_epoch", None)
        diverging_epoch = None
        if diverging is not None and diverging.epoch >= 0:
            diverging_epoch = EpochEndOffset(diverging.epoch, diverging.end_offset)
        action = fp.state.on_fetch_response(
            p.error_code, high_watermark=p.high_watermark, log_start_offset=p.log_start_offset,
            diverging_epoch=diverging_epoch, log_end_offset=pos.fetch_offset, epochs=fp.log.epochs,
            now_ms=self.owner.clock())
        if action.kind is ActionKind.APPEND:
            appending = self._start_append(fp, p.records) if p.records else None
            return self._appended(fp, appending, p.high_watermark, p.log_start_offset)
        if p.error_code:
            log.info("replica fetcher %d-%d: %s-%d answered error %d (%s)", self.leader_id, self.index,
                     fp.key[0], fp.key[1], p.error_code, action.kind.value)
        return self._start_truncation(fp, action)

    def _claim(self, fp: FollowedPartition) -> None:
        """The partition counts as appending from now, before any await (Kafka's makeLeader waits for the
        fetcher); the work claimed ends the claim, whatever happens."""
        assert fp.key not in self.owner.appending, fp.key
        self.owner.appending[fp.key] = fp.log.native.log_end_offset

    def _start_append(self, fp: FollowedPartition, records: Any) -> Awaitable[None] | None:
        """The append claimed now and done at once on the event loop (a small answer: a thread hop costs the loop
        more than the append), or started on a worker thread (None: done)."""
        self._claim(fp)
        if len(records) <= self.owner.config["klog.replica.append.inline.bytes"]:
            self._append_records_now(fp, records)
            return None
        # a task started now (shield wraps the coroutine in one): it runs, and ends the claim, even if this
        # fetcher is cancelled before or while it appends (the worker thread appends anyway)
        return asyncio.shield(self._append_records(fp, records))

    def _append_records_now(self, fp: FollowedPartition, records: Any) -> None:
        """:meth:`_append_records` on the event loop."""
        try:
            fp.log.native.append_as_follower(records)
        except BaseException as exc:
            self.owner.write_failed(fp, exc)
            self._append_ended(fp, records, appended=False)
            raise
        self._append_ended(fp, records, appended=True)

    async def _appended(self, fp: FollowedPartition, appending: Awaitable[None] | None, leader_hw: int,
                        leader_log_start: int) -> None:
        """After the append (if any): the follower high watermark and log start the leader's answer gives."""
        native = fp.log.native
        if appending is not None:
            await appending
        if self.parts.get(fp.key) is not fp:
            return   # this broker leads it now (or follows another leader): that leader's HW is not ours
        start = fp.state.on_appended(leader_hw, leader_log_start, native.log_end_offset)
        self.owner.replicas.follower_high_watermark(fp)   # consumers reading from this follower (KIP-392) see more
        if start > native.log_start_offset:
            try:
                await asyncio.to_thread(native.delete_records_before, start)
            except OSError as exc:   # a segment below the new start could not be retired: the dir goes offline
                self.owner.write_failed(fp, exc)
                raise

    async def _append(self, fp: FollowedPartition, records: Any, leader_hw: int, leader_log_start: int) -> None:
        """One answer's append and high watermark, claimed at the call."""
        await self._appended(fp, self._start_append(fp, records) if records else None, leader_hw,
                             leader_log_start)

    async def _append_records(self, fp: FollowedPartition, records: Any) -> None:
        """The leader's batches appended off the event loop, then their producers replayed. Until both are done
        the partition counts as appending (:attr:`ReplicaFetcherManager.appending`): if it becomes the leader
        meanwhile it takes no produce request (a retry of a batch being appended would look new to producer
        state that does not know it yet: a duplicate, found by the fault suite) and no fetcher appends to it.
        The caller has marked it appending; this ends that, whatever happens."""
        try:
            await asyncio.to_thread(fp.log.native.append_as_follower, records)
        except BaseException as exc:
            self.owner.write_failed(fp, exc)
            self._append_ended(fp, records, appended=False)
            raise
        self._append_ended(fp, records, appended=True)

    def _append_ended(self, fp: FollowedPartition, records: Any, *, appended: bool) -> None:
        """The producer state follows what the log holds (the batches replayed, or cut back to the log end a
        failed append left), and the claim ends, whatever happens."""
        owner = self.owner
        try:
            if appended:
                fp.log.refresh_epochs()
                owner.on_appended(fp.key, records)
            else:
                owner.on_truncated(fp.key, fp.log.native.log_end_offset)
        finally:
            del owner.appending[fp.key]
            owner.replicas.on_follower_append_done(fp.key)

    def _start_truncation(self, fp: FollowedPartition, action: Action) -> Awaitable[None] | None:
        """A TRUNCATE / TRUNCATE_FULLY verdict claimed now and started (None for BACKOFF / STOP / NONE: the next
        round asks the partition again). A truncation counts as appending: a leadership that arrives meanwhile
        waits for it, so that its epoch starts at the log end the truncation leaves, not at one it cuts off."""
        if action.kind not in (ActionKind.TRUNCATE, ActionKind.TRUNCATE_FULLY):
            return None
        self._claim(fp)
        return asyncio.shield(self._truncate(fp, action))

    async def _apply(self, fp: FollowedPartition, action: Action) -> None:
        truncation = self._start_truncation(fp, action)
        if truncation is not None:
            await truncation

    async def _truncate(self, fp: FollowedPartition, action: Action) -> None:
        native = fp.log.native
        try:
            if action.kind is ActionKind.TRUNCATE:
                log.info("partition %s-%d: truncating to offset %d (log end %d) to follow broker %d", fp.key[0],
                         fp.key[1], action.offset, native.log_end_offset, self.leader_id)
                await asyncio.to_thread(native.truncate_to, action.offset)
                fp.log.refresh_epochs()
                self.owner.on_truncated(fp.key, native.log_end_offset)
                self.owner.replicas.follower_high_watermark(fp)
            else:
                log.info("partition %s-%d: the leader's log starts at %d, past this log's end %d: restarting it "
                         "there", fp.key[0], fp.key[1], action.offset, native.log_end_offset)
                # Kafka's truncateFullyAndStartAt: nothing this log holds is kept. (Cutting it to its own start and
                # then deleting records up to the leader's start could not work: no high watermark is past the log
                # end, and the follower asked again at every round, never catching up.)
                held_from = native.log_start_offset
                await asyncio.to_thread(native.truncate_fully_and_start_at, action.offset)
                fp.log.refresh_epochs()
                self.owner.on_truncated(fp.key, held_from)   # the producer state drops all the log held
                self.owner.replicas.follower_high_watermark(fp)
        except BaseException as exc:
            self.owner.write_failed(fp, exc)
            raise
        finally:
            del self.owner.appending[fp.key]
            self.owner.replicas.on_follower_append_done(fp.key)

    async def _leader_offsets(self, conn: BrokerConnection, fp: FollowedPartition) -> None:
        """OFFSET_OUT_OF_RANGE: the leader's log start and end, asked as a replica (ListOffsets replica_id)."""
        offsets = []
        sent_in = fp.state.leader_epoch
        for timestamp in (EARLIEST, LATEST):
            body = Struct(replica_id=self.owner.node_id, isolation_level=0, topics=[Struct(
                name=fp.key[0], partitions=[Struct(partition_index=fp.key[1],
                                                   current_leader_epoch=fp.state.leader_epoch,
                                                   timestamp=timestamp, max_num_offsets=1)])])
            response = await conn.request(ApiKey.LIST_OFFSETS, body, version=LIST_OFFSETS_VERSION)
            p = response.topics[0].partitions[0]
            if p.error_code:
                fp.state.delayed_until_ms = self.owner.clock() + self.owner.config["replica.fetch.backoff.ms"]
                return
            offsets.append(p.offset)
        if not self._still_follows(fp, sent_in):
            return   # led here now, or followed elsewhere or anew, while the requests were out
        action = fp.state.on_leader_offsets(offsets[0], offsets[1], fp.log.log_end_offset, fp.log.epochs)
        if action.kind is ActionKind.TRUNCATE and action.offset < min(fp.log.log_end_offset, offsets[1]):
            log.warning("partition %s-%d: the local log holds leader epoch %s, above the leader's %d (a damaged "
                        "batch header): truncating to offset %d to fetch those batches again", fp.key[0], fp.key[1],
                        fp.log.epochs.latest_epoch, fp.state.leader_epoch, action.offset)
        await self._apply(fp, action)

    async def _epoch_end_offset(self, conn: BrokerConnection, fp: FollowedPartition, epoch: int) -> None:
        """The old truncation path (leaders before Fetch v12): OffsetsForLeaderEpoch for our latest epoch."""
        body = Struct(replica_id=self.owner.node_id, topics=[Struct(topic=fp.key[0], partitions=[Struct(
            partition=fp.key[1], current_leader_epoch=fp.state.leader_epoch, leader_epoch=epoch)])])
        sent_in = fp.state.leader_epoch
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
        if not self._still_follows(fp, sent_in):
            return
        p = response.topics[0].partitions[0]
        action = fp.state.on_epoch_end_offset(p.error_code, EpochEndOffset(p.leader_epoch, p.end_offset),
                                              fp.log.log_end_offset, fp.log.epochs, self.owner.clock())
        await self._apply(fp, action)

    # ---- connection -----------------------------------------------------------------------------------------

    async def _connection(self) -> BrokerConnection | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = self.owner.address(self.leader_id)
        if address is None:
            return None
        cfg = self.owner.config
        self._conn = await self.owner.connector.open(
            address[0], address[1], self.leader_id,
            client_id=f"klog-replica-fetcher-{self.owner.node_id}-{self.leader_id}-{self.index}",
            # Kafka's replica fetchers time out on replica.socket.timeout.ms; unset, klog's keep request.timeout.ms
            request_timeout_ms=cfg["replica.socket.timeout.ms" if cfg.is_set("replica.socket.timeout.ms")
                                   else "request.timeout.ms"],
            max_response_bytes=cfg["replica.fetch.response.max.bytes"] + (1 << 20),
            connect_timeout_ms=CONNECT_TIMEOUT_MS)
        return self._conn

    def _drop_connection(self) -> None:
        self._session.on_failure()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class ReplicaFetcherManager:
    """The fetchers of one broker, by (source broker, fetcher index), made by the replica manager (``replicas``) as
    Kafka's ``ReplicaManager`` makes its fetcher manager. ``address(broker_id)``: the leader's (host, port) on the
    inter-broker listener (None while unknown)."""

    def __init__(self, node_id: int, config: Any, address: Callable[[int], tuple[str, int] | None],
                 replicas: FollowedReplicas, *, clock: Callable[[], int] = monotonic_ms,
                 on_appended: Callable[[Key, Any], None] = lambda key, records: None,
                 on_truncated: Callable[[Key, int], None] = lambda key, end: None,
                 throttle: ReplicationThrottle | None = None,
                 connector: InterBrokerConnector | None = None) -> None:
        self.node_id = node_id
        #: told of this broker's epoch, of follower high watermarks, of appends and truncations that ended
        self.replicas = replicas
        #: follower.replication.throttled.rate for the replicas topics list (None: never throttled)
        self.throttle = throttle
        #: the batches a follower appended / the log end it truncated to (the idempotent-producer state follows,
        #: so a new leader recognises retries of batches it replicated)
        self.on_appended = on_appended
        self.on_truncated = on_truncated
        self.config = config
        #: opens the connections to the leaders' inter-broker listener (its TLS and SASL)
        self.connector = connector if connector is not None else InterBrokerConnector(config)
        self.address = address
        self.clock = clock
        #: partitions whose fetched batches are being appended and replayed, or whose log is being truncated to
        #: follow its leader, now (at most one such operation each) -> the
        #: log end where that append started: the producer state covers the log only up to there until
        #: on_appended replayed the batches (a producer-state snapshot taken meanwhile stops there)
        self.appending: dict[Key, int] = {}
        self.num_fetchers: int = config["num.replica.fetchers"]
        assert self.num_fetchers >= 1
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._started = False

    def write_failed(self, fp: FollowedPartition, exc: BaseException) -> None:
        """``fp``'s append or truncation raised ``exc``: a storage error goes to the replica manager, which takes its
        log dir offline as a leader's failed append does (else the fetcher retried it, failing at every round for
        ever). Not once the fetchers stopped: a log the broker's stop closed under an append has not failed."""
        if self._started and isinstance(exc, OSError):
            self.replicas.on_follower_write_failed(fp, exc)

    def _index(self, key: Key) -> int:
        return zlib.crc32(f"{key[0]}-{key[1]}".encode()) % self.num_fetchers

    def add(self, followed: FollowedPartition) -> None:
        ident = (followed.state.leader_id, self._index(followed.key))
        fetcher = self.fetchers.get(ident)
        if fetcher is None:
            fetcher = self.fetchers[ident] = ReplicaFetcher(self, *ident)
            if self._started:
                fetcher.start()
        fetcher.add(followed)

    def remove(self, key: Key, leader_id: int) -> None:
        fetcher = self.fetchers.get((leader_id, self._index(key)))
        if fetcher is not None:
            fetcher.remove(key)

    def start(self) -> None:
        self._started = True
        for fetcher in self.fetchers.values():
            fetcher.start()

    async def stop(self) -> None:
        self._started = False
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()

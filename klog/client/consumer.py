"""The consumer's asyncio core: subscription state, fetcher with prefetch, offsets, and the drain paths.

Threading: the fetcher, group membership and all requests run on the event loop. Draining fetched data into
records (``drain_records``) or Arrow (``drain_arrow``) is thread-agnostic: the blocking :class:`klog.Consumer`
calls it from the user's thread, so native decoding overlaps with the loop's network work. State shared
between the two (the queue of completed fetches and each partition's position) is guarded by ``self.lock``.

Pipelining: one Fetch per broker is in flight at any time. When its response arrives, each partition's fetch
position moves past the returned batches and the next Fetch goes out at once, while the user is still
processing the previous data, until ``fetch.buffer.bytes`` of undelivered data are buffered.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from klog._native import _core
from klog.protocol import ApiKey, Struct

from .cluster import STALE_METADATA_ERRORS, Backoff, ClusterClient
from .config import CONSUMER_CONFIG, resolve_config
from .fetch_session import FETCH_SESSION_ERRORS, FETCH_SESSION_VERSION, FetchSessionHandler, SessionRequest
from .group import commit_offsets, fetch_committed, make_group_member
from .list_offsets import list_offsets
from .errors import (
    ClientClosedError,
    ConfigError,
    ErrorCode,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LogTruncationError,
    for_code,
)
from .types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["ConsumerCore", "PartitionState"]

log = logging.getLogger("klog.client.consumer")

_OFFSET_OUT_OF_RANGE = ErrorCode.OFFSET_OUT_OF_RANGE
#: Fetched responses per partition that may wait undelivered while the next fetch is already in flight.
PREFETCH_DEPTH = 2
#: poll_batch stops gathering ready fetches once it has this many rows or this many record bytes: joining
#: pieces copies them, and batches this large already amortize the per-call cost (a few tens of microseconds).
POLL_BATCH_ROWS = 65536
POLL_BATCH_BYTES = 4 << 20
_EARLIEST = -2
_LATEST = -1
#: OffsetForLeaderEpoch v3+ asks only Describe on the topic (older ones ClusterAction): Kafka's consumer validates
#: positions with it only from v3 and skips validation with older brokers
_VALIDATION_MIN_VERSION = 3
_BATCH_HEAD = struct.Struct(">qi")  # base offset, length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_PARTITION_LEADER_EPOCH = struct.Struct(">i")
_new_record = tuple.__new__
_monotonic = time.monotonic

_decode_to_arrow: Any
try:  # native columnar decoding (klog.records.decode_to_arrow)
    from klog.records import decode_to_arrow as _decode_to_arrow
except ImportError:  # pragma: no cover - without pyarrow: see _arrow_fallback
    _decode_to_arrow = None


class PartitionState:
    """Consumption state of one assigned partition."""

    __slots__ = ("position", "fetch_offset", "version", "paused", "reset", "high_watermark", "last_stable_offset",
                 "log_start_offset", "leader_epoch", "current_leader_epoch", "awaiting_validation", "in_flight",
                 "error", "retry_at")

    def __init__(self) -> None:
        #: Offset of the next record to return to the user (None until known).
        self.position: int | None = None
        #: Offset the next Fetch asks for (ahead of ``position`` while fetched data is buffered).
        self.fetch_offset: int | None = None
        #: Bumped on every seek/reset: fetched data for an older version is dropped.
        self.version = 0
        self.paused = False
        #: Pending reset strategy: "earliest", "latest", or None.
        self.reset: str | None = None
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        #: Leader epoch of the record before ``position`` (-1 unknown): committed with it, validated on a new leader.
        self.leader_epoch = -1
        #: The partition leader's epoch (metadata) the position was validated against and Fetch names (-1 unknown).
        self.current_leader_epoch = -1
        #: KIP-320: the position waits for OffsetForLeaderEpoch to tell whether the leader's log still holds it.
        self.awaiting_validation = False
        self.in_flight = False
        #: An error to raise from the next poll (e.g. OFFSET_OUT_OF_RANGE with auto.offset.reset=none).
        self.error: BaseException | None = None
        self.retry_at = 0.0

    def fetchable(self) -> bool:
        return (self.position is not None and not self.paused and self.error is None and self.reset is None
                and not self.awaiting_validation)


class _CompletedFetch:
    """Record data fetched for one partition, not yet (fully) delivered."""

    __slots__ = ("tp", "version", "data", "aborted", "size", "next_offset", "records", "index", "high_watermark",
                 "leader_epoch")

    def __init__(self, tp: TopicPartition, version: int, data: Any, aborted: list[Any] | None, size: int,
                 next_offset: int, high_watermark: int) -> None:
        self.tp = tp
        self.version = version
        self.data = data
        self.aborted = aborted
        self.size = size
        self.next_offset = next_offset
        #: Decoded records (per-record path) and how many were delivered.
        self.records: list[ConsumerRecord] | None = None
        self.index = 0
        self.high_watermark = high_watermark
        self.leader_epoch = -1


def _scan_batches(data: memoryview) -> tuple[int, int]:
    """(bytes of complete batches, offset after the last complete batch or -1)."""
    pos = 0
    end = len(data)
    next_offset = -1
    while end - pos >= 61:
        base, length = _BATCH_HEAD.unpack_from(data, pos)
        size = 12 + length
        if length < 49 or pos + size > end:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + 23)
        next_offset = base + delta + 1
        pos += size
    return pos, next_offset


def _batch_leader_epoch(data: memoryview, offset: int) -> int:
    """The partition leader epoch of the batch in ``data`` that holds ``offset`` (-1 when none does)."""
    pos = 0
    end = len(data)
    while end - pos >= 61:
        base, length = _BATCH_HEAD.unpack_from(data, pos)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + 23)
        if base <= offset <= base + delta:
            return int(_PARTITION_LEADER_EPOCH.unpack_from(data, pos + 12)[0])
        pos += 12 + length
    return -1


class ConsumerCore:
    """Everything a consumer does, on one event loop. Wrapped by ``klog.aio.Consumer`` and ``klog.Consumer``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = resolve_config(CONSUMER_CONFIG, config, kind="consumer")
        self.config = cfg
        self.loop = asyncio.get_running_loop()
        self.cluster = ClusterClient(cfg, allow_auto_create_topics=cfg["allow.auto.create.topics"])
        self.group_id: str | None = cfg["group.id"]
        self.auto_offset_reset: str = cfg["auto.offset.reset"]
        self.isolation_level = 1 if cfg["isolation.level"] == "read_committed" else 0
        self.max_poll_records: int = cfg["max.poll.records"]
        self.check_crcs: bool = cfg["check.crcs"]
        self.fetch_buffer_bytes: int = cfg["fetch.buffer.bytes"]
        self.retry_backoff = Backoff(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"])
        self.default_timeout = cfg["default.api.timeout.ms"] / 1000.0
        #: Guards ``assignment`` positions and the ready queue (shared with the user thread).
        self.lock = threading.Lock()
        self.data_ready = threading.Condition(self.lock)
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.ready: collections.deque[_CompletedFetch] = collections.deque()
        self.buffered = 0
        self._async_data = asyncio.Event()
        self._fetch_wakeup = asyncio.Event()
        self._fetch_throttled = False
        self._fetching_nodes: set[int] = set()
        #: the KIP-227 fetch session with each broker fetched from
        self._fetch_sessions: dict[int, FetchSessionHandler[TopicPartition]] = {}
        self._fetch_task: asyncio.Task[None] | None = None
        self._closed = False
        # Subscription.
        self.subscribed_topics: set[str] = set()
        self.subscribed_pattern: re.Pattern[str] | None = None
        self.manual_assignment = False
        self.group: Any = None  # klog.client.group.GroupMember when group.id is set and subscribe() was used
        self.listener: Any = None
        self._last_poll = _monotonic()
        self._auto_commit_at = _monotonic() + cfg["auto.commit.interval.ms"] / 1000.0
        #: Positions that need a committed offset lookup before they can be reset.
        self._needs_committed: set[TopicPartition] = set()
        self._positions_task: asyncio.Task[None] | None = None
        self._wake_user: Callable[[], None] | None = None
        self._thread_id = threading.get_ident()
        if cfg["group.instance.id"] is not None and self.group_id is None:
            raise ConfigError("group.instance.id requires group.id")

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        await self.cluster.start(timeout=self.default_timeout)
        self.cluster.add_metadata_listener(self._on_metadata)
        self._fetch_task = self.loop.create_task(self._fetch_loop())

    async def close(self, *, commit: bool = True) -> None:
        if self._closed:
            return
        try:
            if self.group is not None:
                if commit and self.config["enable.auto.commit"]:
                    try:
                        await self.commit(None, timeout=self.default_timeout)
                    except KafkaError as e:
                        log.warning("final auto-commit failed: %s", e)
                await self.group.leave("the consumer is being closed")
        finally:
            self._closed = True
            if self._fetch_task is not None:
                self._fetch_task.cancel()
                try:
                    await self._fetch_task
                except (asyncio.CancelledError, Exception):
                    pass
            if self.group is not None:
                await self.group.stop()
            await self.cluster.close()
            self._notify_data()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer closed")

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str], listener: Any = None) -> None:
        """Subscribe to topics (list) or a regex pattern (``re.Pattern`` or a string starting with ``^``)."""
        self._check_open()
        if self.manual_assignment and self.assignment:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^")):
            self.subscribed_pattern = re.compile(topics) if isinstance(topics, str) else topics
            self.subscribed_topics = set()
            self.cluster.track_all_topics = True
        else:
            names = [topics] if isinstance(topics, str) else list(topics)
            for t in names:
                if not isinstance(t, str) or not t:
                    raise ValueError(f"invalid topic name {t!r}")
            self.subscribed_pattern = None
            self.subscribed_topics = set(names)
            self.cluster.track_all_topics = False
            self.cluster.tracked_topics.update(names)
        self.manual_assignment = False
        if listener is not None:
            self.listener = listener
        if self.group_id is None:
            # No group (kafka-python's group_id=None): every partition of the subscribed topics, followed as
            # the metadata changes, with positions from auto.offset.reset and no commits.
            self._assign_all_subscribed()
        else:
            if self.group is None:
                self.group = make_group_member(self)
            self.group.subscription_changed()
        self.cluster.request_update()

    def _assign_all_subscribed(self) -> None:
        md = self.cluster.metadata
        self.set_assignment([TopicPartition(t, p) for t in self.matching_topics()
                             for p in (md.partitions_for(t) or ())])

    def matching_topics(self) -> list[str]:
        """Subscribed topics that exist (pattern: every matching topic in the metadata)."""
        md = self.cluster.metadata
        if self.subscribed_pattern is not None:
            exclude_internal = self.config["exclude.internal.topics"]
            return sorted(t for t, info in md.topics.items()
                          if self.subscribed_pattern.match(t) and not (exclude_internal and info.is_internal))
        return sorted(self.subscribed_topics)

    def subscription(self) -> set[str]:
        if self.subscribed_pattern is not None:
            return set(self.matching_topics())
        return set(self.subscribed_topics)

    def _on_metadata(self, md: Any) -> None:
        # Leaders may now be known (or have moved): let the fetcher look again.
        self._fetch_wakeup.set()
        if self.group is not None:
            self.group.metadata_updated(md)
        elif self.group_id is None and not self.manual_assignment and (self.subscribed_topics or
                                                                       self.subscribed_pattern):
            self._assign_all_subscribed()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manually assign partitions (no group membership; commits still work with a group.id)."""
        self._check_open()
        if self.group is not None and not self.manual_assignment and (self.subscribed_topics or
                                                                        self.subscribed_pattern):
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        self.manual_assignment = True
        self.set_assignment(tps)
        self.cluster.track_topics(tp.topic for tp in tps)

    def unsubscribe(self) -> None:
        self._check_open()
        self.subscribed_topics = set()
        self.subscribed_pattern = None
        self.cluster.track_all_topics = False
        self.manual_assignment = False
        self.set_assignment([])

    def set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions that stay (group or manual)."""
        new = set(tps)
        with self.lock:
            for tp in list(self.assignment):
                if tp not in new:
                    del self.assignment[tp]
            for tp in new:
                if tp not in self.assignment:
                    self.assignment[tp] = PartitionState()
                    self._needs_committed.add(tp)
            self._drop_ready(lambda cf: cf.tp not in new)
            self._needs_committed &= new
        self._fetch_wakeup.set()

    def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        self.set_assignment(set(self.assignment) | set(tps))

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        gone = set(tps)
        self.set_assignment(set(self.assignment) - gone)

    def _drop_ready(self, pred: Callable[[_CompletedFetch], bool]) -> None:
        # Lock held.
        if not self.ready:
            return
        keep: collections.deque[_CompletedFetch] = collections.deque()
        for cf in self.ready:
            if pred(cf):
                self.buffered -= cf.size
            else:
                keep.append(cf)
        self.ready = keep

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    # ------------------------------------------------------------------ positions
    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        with self.lock:
            st = self._state(tp)
            self._set_position(tp, st, offset)
        self._fetch_wakeup.set()

    def _set_position(self, tp: TopicPartition, st: PartitionState, offset: int, leader_epoch: int = -1) -> None:
        # Lock held. ``leader_epoch``: the epoch of the record before ``offset`` when known (a committed offset's,
        # ListOffsets'), else -1: a seek to a bare offset keeps no epoch of the old position (as Kafka's Java client).
        st.position = offset
        st.leader_epoch = leader_epoch
        # the next fetch round compares the leader's epoch anew: a position with an epoch is validated first
        st.current_leader_epoch = -1
        st.awaiting_validation = False
        st.fetch_offset = offset
        st.version += 1
        st.reset = None
        st.error = None
        self._needs_committed.discard(tp)
        self._drop_ready(lambda cf: cf.tp == tp)
        self.wake_fetcher_threadsafe()

    def request_reset(self, tps: Iterable[TopicPartition], strategy: str) -> None:
        with self.lock:
            for tp in tps:
                st = self._state(tp)
                st.reset = strategy
                st.version += 1
                st.error = None
                self._needs_committed.discard(tp)
                tp_ = tp
                self._drop_ready(lambda cf: cf.tp == tp_)
        self._fetch_wakeup.set()

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            for tp in tps:
                self._state(tp).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            for tp in tps:
                self._state(tp).paused = False
        self._fetch_wakeup.set()

    # The readers below run on the user's thread (a blocking Consumer's poll and accessors) while the loop thread
    # changes the assignment (a subscription without a group follows the metadata): they read it under the lock
    # its writers hold, else a change during the iteration raises "dictionary changed size during iteration".
    def assigned(self) -> set[TopicPartition]:
        with self.lock:
            return set(self.assignment)

    def paused(self) -> set[TopicPartition]:
        with self.lock:
            return {tp for tp, st in self.assignment.items() if st.paused}

    def needs_positions(self) -> bool:
        with self.lock:
            if self._needs_committed:
                return True
            return any(st.position is None or st.reset is not None for st in self.assignment.values())

    async def update_positions(self, timeout: float | None = None) -> None:
        """Give every assigned partition a position: committed offset, else auto.offset.reset (ListOffsets)."""
        if self._needs_committed:
            need = sorted(self._needs_committed)
            if self.group_id is not None:
                committed = await self.fetch_committed(need, timeout=timeout)
            else:
                committed = {}
            with self.lock:
                for tp in need:
                    st = self.assignment.get(tp)
                    if st is None or tp not in self._needs_committed:
                        continue
                    self._needs_committed.discard(tp)
                    c = committed.get(tp)
                    if c is not None and c.offset >= 0:
                        self._set_position(tp, st, c.offset, c.leader_epoch)
                    elif st.position is None:
                        if self.auto_offset_reset == "none":
                            st.error = for_code(_OFFSET_OUT_OF_RANGE, f"no committed offset for {tp.topic}-"
                                                f"{tp.partition} and auto.offset.reset=none")
                        else:
                            st.reset = self.auto_offset_reset
        resets: dict[TopicPartition, str] = {}
        with self.lock:
            for tp, st in self.assignment.items():
                if st.reset is not None:
                    resets[tp] = st.reset
        if not resets:
            return
        by_strategy: dict[str, list[TopicPartition]] = collections.defaultdict(list)
        for tp, strategy in resets.items():
            by_strategy[strategy].append(tp)
        for strategy, tps in by_strategy.items():
            ts = _EARLIEST if strategy == "earliest" else _LATEST
            offsets = await self.list_offsets({tp: ts for tp in tps}, timeout=timeout)
            with self.lock:
                for tp in tps:
                    st = self.assignment.get(tp)
                    found = offsets.get(tp)
                    if st is None or st.reset != strategy or found is None:
                        continue
                    self._set_position(tp, st, found[0], found[2])
        self._fetch_wakeup.set()

    async def list_offsets(self, query: Mapping[TopicPartition, int], *, timeout: float | None = None
                           ) -> dict[TopicPartition, tuple[int, int, int]]:
        """ListOffsets per leader: tp -> timestamp (-2 earliest, -1 latest, -3 max timestamp, else ms).

        Returns tp -> (offset, timestamp, leader_epoch); partitions without an answer (offset -1) are omitted.
        """
        return await list_offsets(self.cluster, query, isolation_level=self.isolation_level,
                                  retry_backoff=self.retry_backoff,
                                  timeout=self.default_timeout if timeout is None else timeout)

    # ------------------------------------------------------------------ commits
    async def fetch_committed(self, tps: Iterable[TopicPartition], *, timeout: float | None = None
                              ) -> dict[TopicPartition, OffsetAndMetadata]:
        if self.group_id is None:
            raise IllegalStateError("committed offsets need group.id")
        return await fetch_committed(self, list(tps), timeout=timeout)

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions to commit: every assigned partition's next offset."""
        with self.lock:
            return {tp: OffsetAndMetadata(st.position, "", st.leader_epoch)
                    for tp, st in self.assignment.items() if st.position is not None}

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None, *,
                     timeout: float | None = None) -> None:
        if self.group_id is None:
            raise IllegalStateError("commit() needs group.id")
        if offsets is None:
            offsets = self.consumed_offsets()
        normalized = {TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)))
                      for tp, o in offsets.items()}
        if not normalized:
            return
        await commit_offsets(self, normalized, timeout=timeout)

    def maybe_auto_commit(self) -> None:
        """Fire an asynchronous commit of the consumed positions when auto-commit is due (from poll)."""
        if not self.config["enable.auto.commit"] or self.group_id is None:
            return
        if self.group is not None and not self.manual_assignment and (self.group.joining or self.group.needs_join()):
            return  # positions are committed on revocation instead (as Kafka's Java client does)
        now = _monotonic()
        if now < self._auto_commit_at:
            return
        self._auto_commit_at = now + self.config["auto.commit.interval.ms"] / 1000.0
        offsets = self.consumed_offsets()
        if offsets:
            self.spawn(self._auto_commit, offsets)

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Start coroutine ``fn(*args)`` as a task on the loop, from any thread."""
        if threading.get_ident() == self._thread_id:
            self.loop.create_task(fn(*args))
        else:
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(fn(*args)))

    async def _auto_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.commit(offsets)
        except (KafkaError, asyncio.CancelledError) as e:
            log.warning("auto-commit failed: %s", e)

    # ------------------------------------------------------------------ fetcher (event loop)
    def wake_fetcher_threadsafe(self) -> None:
        if threading.get_ident() == self._thread_id:
            self._fetch_wakeup.set()
        else:
            try:
                self.loop.call_soon_threadsafe(self._fetch_wakeup.set)
            except RuntimeError:
                pass

    async def _fetch_loop(self) -> None:
        while not self._closed:
            self._fetch_wakeup.clear()
            try:
                next_retry = self._send_fetches()
            except Exception:  # pragma: no cover - a bug; keep fetching
                log.exception("fetcher error")
                next_retry = _monotonic() + self.retry_backoff.delay(0)
            if next_retry is None:
                await self._fetch_wakeup.wait()
            else:
                try:
                    await asyncio.wait_for(self._fetch_wakeup.wait(), max(0.0, next_retry - _monotonic()))
                except asyncio.TimeoutError:
                    pass

    def _send_fetches(self) -> float | None:
        """Send a Fetch to each leader (and OffsetForLeaderEpoch where positions wait for validation); returns
        the earliest end of a backoff that held a partition back (None: none), judged by the same clock reading
        as the skip itself: a backoff ending between two readings would otherwise wake nobody."""
        if self.buffered >= self.fetch_buffer_bytes:
            self._fetch_throttled = True
            return None   # a drain wakes the fetcher
        self._fetch_throttled = False
        md = self.cluster.metadata
        now = _monotonic()
        by_node: dict[int, list[tuple[TopicPartition, PartitionState]]] = collections.defaultdict(list)
        to_validate: dict[int, list[tuple[TopicPartition, PartitionState]]] = collections.defaultdict(list)
        need_metadata = False
        next_retry: float | None = None
        with self.lock:
            buffered_tps = collections.Counter(cf.tp for cf in self.ready)
            for tp, st in self.assignment.items():
                if st.in_flight:
                    continue
                if st.retry_at > now:
                    if next_retry is None or st.retry_at < next_retry:
                        next_retry = st.retry_at
                    continue
                if st.position is None or st.paused or st.error is not None or st.reset is not None:
                    continue
                leader = md.leader_for(tp.topic, tp.partition)
                if leader is None:
                    need_metadata = True
                    continue
                self._note_leader_epoch(st, md.topics[tp.topic].partitions[tp.partition].leader_epoch)
                if st.awaiting_validation:
                    to_validate[leader].append((tp, st))
                    continue
                # Prefetch: up to PREFETCH_DEPTH undelivered responses per partition.
                if buffered_tps[tp] >= PREFETCH_DEPTH:
                    continue
                if leader in self._fetching_nodes:
                    continue
                by_node[leader].append((tp, st))
        if need_metadata:
            self.cluster.request_update()
        for node, parts in by_node.items():
            self._fetching_nodes.add(node)
            for _tp, st in parts:
                st.in_flight = True
            self.loop.create_task(self._fetch(node, parts))
        for node, parts in to_validate.items():
            for _tp, st in parts:
                st.in_flight = True
            self.loop.create_task(self._validate_positions(node, parts))
        return next_retry

    @staticmethod
    def _note_leader_epoch(st: PartitionState, leader_epoch: int) -> None:
        """The partition's leader epoch in the metadata (lock held): when it is not the one the position was
        validated against, a position with an epoch waits for validation (Kafka's
        ``SubscriptionState.maybeValidatePositionForCurrentLeader``); without epochs (old brokers) nothing waits."""
        if leader_epoch != st.current_leader_epoch:
            st.current_leader_epoch = leader_epoch
            st.awaiting_validation = st.leader_epoch >= 0 and leader_epoch >= 0

    async def _validate_positions(self, node: int, parts: list[tuple[TopicPartition, PartitionState]]) -> None:
        """KIP-320: ask the leader where each position's epoch ends (OffsetForLeaderEpoch); a position past it was
        truncated away (an unclean election): it moves to that end, the first offset known to diverge (Kafka's
        ``SubscriptionState.maybeCompleteValidation``), or fails with LogTruncationError with
        auto.offset.reset=none."""
        with self.lock:
            sent = {tp: (st.version, st.position, st.leader_epoch, st.current_leader_epoch) for tp, st in parts}
        need_metadata = False
        try:
            try:
                conn = await self.cluster.connection(node)
                if not conn.supports(ApiKey.OFFSET_FOR_LEADER_EPOCH, minimum=_VALIDATION_MIN_VERSION):
                    with self.lock:
                        for tp, st in parts:
                            if self.assignment.get(tp) is st and st.version == sent[tp][0]:
                                st.awaiting_validation = False
                    return
                topics: dict[str, list[Any]] = collections.defaultdict(list)
                for tp, (_version, _position, epoch, current) in sent.items():
                    topics[tp.topic].append(Struct(partition=tp.partition, current_leader_epoch=current,
                                                   leader_epoch=epoch))
                body = Struct(replica_id=-1, topics=[Struct(topic=t, partitions=ps) for t, ps in topics.items()])
                response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body, version=conn.version(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH, minimum=_VALIDATION_MIN_VERSION))
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("OffsetForLeaderEpoch to broker %d failed: %s", node, e)
                need_metadata = True
                with self.lock:
                    for _tp, st in parts:
                        st.retry_at = _monotonic() + self.retry_backoff.delay(0)
                return
            with self.lock:
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.topic, p.partition)
                        now_st = self.assignment.get(tp)
                        if (now_st is None or tp not in sent or not now_st.awaiting_validation
                                or (now_st.version, now_st.position, now_st.leader_epoch,
                                    now_st.current_leader_epoch) != sent[tp]):
                            continue   # moved meanwhile: the next round validates what it is now
                        code = p.error_code
                        if code:
                            if code in STALE_METADATA_ERRORS or for_code(code).retriable:
                                need_metadata = True
                                now_st.retry_at = _monotonic() + self.retry_backoff.delay(0)
                            else:
                                now_st.error = for_code(code, f"validating the position of {tp.topic}-"
                                                              f"{tp.partition}")
                            continue
                        self._complete_validation(tp, now_st, p.leader_epoch, p.end_offset)
        except asyncio.CancelledError:
            raise
        except ClientClosedError:
            return
        except Exception as e:
            self._fail_unchanged(parts, {tp: version for tp, (version, *_) in sent.items()}, e,
                                 "position validation failed")
        finally:
            for _tp, st in parts:
                st.in_flight = False
            if need_metadata:
                self.cluster.request_update()
            self._notify_data()
            self._fetch_wakeup.set()

    def _complete_validation(self, tp: TopicPartition, st: PartitionState, end_epoch: int, end_offset: int) -> None:
        # Lock held. The leader's log ends the position's epoch at ``end_offset`` (in ``end_epoch``).
        position = st.position
        assert position is not None
        if end_offset < 0 or end_epoch < 0:   # the leader knows no epoch at or before the position's
            if self.auto_offset_reset != "none":
                log.info("truncation detected for %s-%d at offset %d: resetting to %s", tp.topic, tp.partition,
                         position, self.auto_offset_reset)
                st.reset = self.auto_offset_reset
                st.version += 1
                st.awaiting_validation = False
                self._drop_ready(lambda cf: cf.tp == tp)
            else:
                st.error = LogTruncationError(
                    f"truncation detected for {tp.topic}-{tp.partition} at offset {position} (epoch "
                    f"{st.leader_epoch}) and auto.offset.reset=none", {tp: position}, {})
        elif end_offset < position:
            if self.auto_offset_reset != "none":
                log.info("truncation detected for %s-%d at offset %d (epoch %d): resuming at the first offset "
                         "known to diverge, %d (epoch %d)", tp.topic, tp.partition, position, st.leader_epoch,
                         end_offset, end_epoch)
                current = st.current_leader_epoch
                self._set_position(tp, st, end_offset, end_epoch)
                st.current_leader_epoch = current   # validated: Kafka's seekValidated
            else:
                st.error = LogTruncationError(
                    f"truncation detected for {tp.topic}-{tp.partition} at offset {position} (epoch "
                    f"{st.leader_epoch}): the leader's log diverges from offset {end_offset} (epoch {end_epoch}) "
                    f"and auto.offset.reset=none", {tp: position},
                    {tp: OffsetAndMetadata(end_offset, "", end_epoch)})
        else:
            st.awaiting_validation = False

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, PartitionState]]) -> None:
        cfg = self.config
        versions = {tp: st.version for tp, st in parts}
        partition_max_bytes = cfg["max.partition.fetch.bytes"]
        session = self._fetch_sessions.setdefault(node, FetchSessionHandler())
        request: SessionRequest[TopicPartition] | None = None
        try:
            try:
                conn = await self.cluster.connection(node)
                version = conn.version(ApiKey.FETCH, minimum=4)
                positions = {tp: st.fetch_offset for tp, st in parts}
                # KIP-320: a leader whose epoch is older than this answers FENCED_LEADER_EPOCH, a newer one
                # UNKNOWN_LEADER_EPOCH (both: refresh the metadata and fetch again)
                leader_epochs = {tp: st.current_leader_epoch for tp, st in parts}
                if version >= FETCH_SESSION_VERSION:   # KIP-227: name only what changed since the last fetch
                    request = session.build({tp: (offset, partition_max_bytes, leader_epochs[tp])
                                             for tp, offset in positions.items()})
                    named: Iterable[Any] = request.to_send
                else:
                    named = positions
                topics: dict[str, list[Any]] = collections.defaultdict(list)
                for tp in named:
                    topics[tp.topic].append(Struct(partition=tp.partition, current_leader_epoch=leader_epochs[tp],
                                                   fetch_offset=positions[tp], last_fetched_epoch=-1,
                                                   log_start_offset=-1, partition_max_bytes=partition_max_bytes))
                forgotten: dict[str, list[int]] = collections.defaultdict(list)
                for tp in request.to_forget if request is not None else ():
                    forgotten[tp.topic].append(tp.partition)
                body = Struct(replica_id=-1, max_wait_ms=cfg["fetch.max.wait.ms"], min_bytes=cfg["fetch.min.bytes"],
                              max_bytes=cfg["fetch.max.bytes"], isolation_level=self.isolation_level,
                              session_id=request.session_id if request is not None else 0,
                              session_epoch=request.session_epoch if request is not None else -1,
                              topics=[Struct(topic=t, partitions=ps) for t, ps in topics.items()],
                              forgotten_topics_data=[Struct(topic=t, partitions=ps) for t, ps in forgotten.items()],
                              rack_id=cfg["client.rack"])
                response = await conn.request(ApiKey.FETCH, body, version=version,
                                              timeout=cfg["fetch.max.wait.ms"] / 1000.0)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                session.on_failure()
                log.debug("fetch from broker %d failed: %s", node, e)
                self.cluster.request_update()
                now = _monotonic()
                for _tp, st in parts:
                    st.retry_at = now + self.retry_backoff.delay(0)
                return
            except BaseException:
                session.on_failure()
                raise
            if request is not None and not session.on_response(request, response.error_code, response.session_id):
                if response.error_code in FETCH_SESSION_ERRORS:   # the next fetch, a full one, goes at once
                    log.debug("fetch session with broker %d: %s", node, for_code(response.error_code))
                    return
            if response.error_code:
                log.warning("fetch from broker %d failed: %s", node, for_code(response.error_code))
                self.cluster.request_update()
                return
            self._handle_fetch_response(response, versions)
        except asyncio.CancelledError:
            raise
        except ClientClosedError:
            return
        except Exception as e:
            self._fail_unchanged(parts, versions, e, "fetch failed")
            self._notify_data()
        finally:
            for _tp, st in parts:
                st.in_flight = False
            self._fetching_nodes.discard(node)
            self._fetch_wakeup.set()

    def _fail_unchanged(self, parts: list[tuple[TopicPartition, PartitionState]], versions: dict[TopicPartition, int],
                        e: Exception, what: str) -> None:
        """A request of ``parts`` failed with ``e``: each partition whose state did not change since (its
        ``versions`` entry) is told so at the next poll."""
        log.exception(what)
        with self.lock:
            for tp, st in parts:
                if st.version == versions[tp]:
                    st.error = e if isinstance(e, KafkaError) else KafkaError(f"{what}: {e}")

    def _handle_fetch_response(self, response: Any, versions: dict[TopicPartition, int]) -> None:
        added = False
        need_metadata = False
        with self.lock:
            for t in response.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition_index)
                    st = self.assignment.get(tp)
                    if st is None or st.version != versions.get(tp):
                        continue  # revoked or seeked meanwhile
                    code = p.error_code
                    if code:
                        if code == _OFFSET_OUT_OF_RANGE:
                            if self.auto_offset_reset == "none":
                                st.error = for_code(code, f"fetch offset {st.fetch_offset} is out of range for "
                                                          f"{tp.topic}-{tp.partition} and auto.offset.reset=none")
                            else:
                                log.info("fetch offset %s out of range for %s-%d: resetting to %s",
                                         st.fetch_offset, tp.topic, tp.partition, self.auto_offset_reset)
                                st.reset = self.auto_offset_reset
                                st.version += 1
                        elif code in STALE_METADATA_ERRORS or for_code(code).retriable:
                            need_metadata = True
                            st.retry_at = _monotonic() + self.retry_backoff.delay(0)
                        else:
                            st.error = for_code(code, f"fetch {tp.topic}-{tp.partition}")
                        continue
                    st.high_watermark = p.high_watermark
                    st.last_stable_offset = p.last_stable_offset
                    st.log_start_offset = p.log_start_offset
                    records = p.records
                    if records is None or len(records) == 0:
                        continue
                    complete, next_offset = _scan_batches(records)
                    if complete == 0:
                        # A batch larger than max.partition.fetch.bytes cannot happen with KIP-74 brokers.
                        st.error = for_code(ErrorCode.MESSAGE_TOO_LARGE,
                                            f"{tp.topic}-{tp.partition}: a record batch at offset "
                                            f"{st.fetch_offset} exceeds the fetch size")
                        continue
                    data = records[:complete] if complete < len(records) else records
                    cf = _CompletedFetch(tp, st.version, data, p.aborted_transactions or None, complete,
                                         next_offset, p.high_watermark)
                    st.fetch_offset = max(next_offset, st.fetch_offset or 0)
                    self.ready.append(cf)
                    self.buffered += complete
                    added = True
        if need_metadata:
            self.cluster.request_update()
        if added or need_metadata:
            self._notify_data()

    def _notify_data(self) -> None:
        with self.data_ready:
            self.data_ready.notify_all()
        self._async_data.set()
        if self._wake_user is not None:
            self._wake_user()

    async def wait_for_data(self, timeout: float) -> None:
        if self.ready:
            return
        self._async_data.clear()
        if self.ready:
            return
        try:
            await asyncio.wait_for(self._async_data.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # ------------------------------------------------------------------ draining (any thread)
    def raise_partition_errors(self) -> None:
        with self.lock:
            for tp, st in self.assignment.items():
                if st.error is not None:
                    err, st.error = st.error, None
                    if isinstance(err, KafkaError) and err.code == _OFFSET_OUT_OF_RANGE:
                        st.error = err  # stays until the user seeks
                    break
            else:
                return
        if st.error is None:
            self.wake_fetcher_threadsafe()   # reported once: the partition fetches again
        raise err

    def _take(self) -> _CompletedFetch | None:
        """Pop the next usable completed fetch (lock held); stale ones are dropped."""
        while self.ready:
            cf = self.ready[0]
            st = self.assignment.get(cf.tp)
            if st is None or st.version != cf.version or st.position is None:
                self.ready.popleft()
                self.buffered -= cf.size
                continue
            if st.paused:
                return None
            return cf
        return None

    def drain_records(self, max_records: int) -> list[ConsumerRecord]:
        """Decode and return up to ``max_records`` records, advancing positions."""
        out: list[ConsumerRecord] = []
        woke = False
        while len(out) < max_records:
            with self.lock:
                cf = self._take()
                if cf is None:
                    break
                st = self.assignment[cf.tp]
                position = st.position
                if cf.records is not None:
                    recs = cf.records
                    i = cf.index
                    take = recs[i:i + (max_records - len(out))]
                    cf.index = i + len(take)
                    out.extend(take)
                    if cf.index >= len(recs):
                        self._delivered(cf, st, st.position or 0)
                        woke = True
                    else:
                        st.position = take[-1].offset + 1
                    if take:
                        st.leader_epoch = take[-1].leader_epoch
                    continue
            # Decoded without the lock: the event loop thread keeps taking in the next fetch meanwhile.
            records = self._decode_records(cf, position)  # type: ignore[arg-type]
            with self.lock:
                if self._still_next(cf, st, position):
                    cf.records = records
                    cf.index = 0
        if woke:
            self.wake_fetcher_threadsafe()
        return out

    def _still_next(self, cf: _CompletedFetch, st: PartitionState, position: int | None) -> bool:
        """After decoding ``cf`` outside the lock (lock held again): nothing moved its partition meanwhile (no
        seek, revocation or pause), so the decoded data is still what the caller should deliver next."""
        return self._take() is cf and self.assignment.get(cf.tp) is st and st.position == position

    def _decode_records(self, cf: _CompletedFetch, position: int) -> list[ConsumerRecord]:
        if not cf.aborted:
            return self._decode_records_columnar(cf, position)
        batches = _core.decode_batches(cf.data, verify_crc=self.check_crcs, allow_partial_trailing=True,
                                       allow_compacted=True)
        topic, partition = cf.tp
        aborted = self._aborted_filter(cf) if cf.aborted else None
        out: list[ConsumerRecord] = []
        cr = ConsumerRecord
        for b in batches:
            if b.is_control:
                if aborted is not None:
                    aborted.control(b)
                continue
            if aborted is not None and b.is_transactional and aborted.is_aborted(b):
                continue
            if b.base_offset + b.last_offset_delta < position:
                continue
            tstype = 1 if b.timestamp_type == "log_append" else 0
            epoch = b.partition_leader_epoch
            recs = b.records
            if b.base_offset < position:
                recs = [r for r in recs if r.offset >= position]
            out.extend([_new_record(cr, (topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers,
                                         tstype, epoch)) for r in recs])
        return out

    def _decode_records_columnar(self, cf: _CompletedFetch, position: int) -> list[ConsumerRecord]:
        """Records decoded and built as ConsumerRecord tuples in one native pass (no per-record Python code)."""
        topic, partition = cf.tp
        return _core.decode_records(cf.data, ConsumerRecord, topic, partition, min_offset=position,  # type: ignore[no-any-return]
                                    verify_crc=self.check_crcs)

    def _aborted_filter(self, cf: _CompletedFetch) -> _AbortedFilter:
        return _AbortedFilter(cf.aborted or [])

    def drain_arrow(self, max_records: int | None) -> Any:
        """Return the next ready data as one ``pyarrow.RecordBatch`` (None when nothing is ready).

        Columns: topic (dictionary), partition (int32), offset (int64), timestamp (timestamp[ms]), key, value
        (binary), headers. Decoded natively by :func:`klog.records.decode_to_arrow`.
        """
        import pyarrow as pa

        pieces: list[Any] = []
        rows = 0
        fetched_bytes = 0
        limit = max_records if max_records is not None else 1 << 62
        woke = False
        while rows < limit:
            with self.lock:
                cf = self._take()
                if cf is None:
                    break
                st = self.assignment[cf.tp]
                position = st.position
                assert position is not None
                partly_delivered = cf.records is not None
                if partly_delivered:
                    # Partly delivered by poll(): hand out the rest of the already-decoded records.
                    rest = cf.records[cf.index:cf.index + (limit - rows)]  # type: ignore[index]
                    table = _records_to_arrow(rest)
                    cf.index += len(rest)
                    new_position = rest[-1].offset + 1 if rest else position
                    if rest:
                        st.leader_epoch = rest[-1].leader_epoch
                    if cf.index >= len(cf.records):  # type: ignore[arg-type]
                        self._delivered(cf, st, new_position)
                        woke = True
                    else:
                        st.position = new_position
            if not partly_delivered:
                # Decoded without the lock: the event loop thread keeps taking in the next fetch meanwhile.
                table = self._arrow(cf, position)
                with self.lock:
                    if not self._still_next(cf, st, position):
                        continue
                    if table.num_rows > limit - rows:
                        table = table.slice(0, limit - rows)
                        # The undelivered tail stays queued; the next call decodes it from the new position.
                        st.position = int(table.column(0)[-1].as_py()) + 1
                    else:
                        self._delivered(cf, st, position)
                        woke = True
                    if table.num_rows:
                        # the position carries the epoch of the last delivered record (committed with it)
                        st.leader_epoch = _batch_leader_epoch(cf.data, int(table.column(0)[-1].as_py()))
            if table.num_rows:
                pieces.append(_with_partition_columns(table, cf.tp))
                rows += table.num_rows
                fetched_bytes += cf.size
                if rows >= POLL_BATCH_ROWS or fetched_bytes >= POLL_BATCH_BYTES:
                    break  # large enough: more pieces would only be copied into one by concatenation
        if woke:
            self.wake_fetcher_threadsafe()
        if not pieces:
            return None
        if len(pieces) == 1:
            return pieces[0]
        if hasattr(pa, "concat_batches"):
            return pa.concat_batches(pieces)
        return pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]  # pragma: no cover - pyarrow < 19

    def _delivered(self, cf: _CompletedFetch, st: PartitionState, position: int) -> None:
        """``cf`` is fully handed out: drop it from the queue and move its partition past it (lock held)."""
        self.ready.popleft()
        self.buffered -= cf.size
        st.position = max(cf.next_offset, position)

    def _arrow(self, cf: _CompletedFetch, position: int) -> Any:
        if cf.aborted or _decode_to_arrow is None:
            return _arrow_fallback(self, cf, position)
        return _decode_to_arrow(cf.data, min_offset=position, skip_control=True,
                                allow_partial_trailing=True, allow_compacted=True, verify_crc=self.check_crcs)


class _AbortedFilter:
    """read_committed: skip batches of aborted transactions (Fetch's aborted_transactions + abort markers)."""

    def __init__(self, aborted: list[Any]) -> None:
        self.pending = sorted((a.first_offset, a.producer_id) for a in aborted)
        self.active: set[int] = set()

    def _advance(self, offset: int) -> None:
        while self.pending and self.pending[0][0] <= offset:
            self.active.add(self.pending.pop(0)[1])

    def is_aborted(self, b: Any) -> bool:
        self._advance(b.base_offset + b.last_offset_delta)
        return b.producer_id in self.active

    def control(self, b: Any) -> None:
        self._advance(b.base_offset)
        if b.control_type == 0:  # abort marker ends the aborted transaction
            self.active.discard(b.producer_id)


_ARROW_SCHEMA: Any = None


def _records_to_arrow(records: list[ConsumerRecord]) -> Any:
    import pyarrow as pa

    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.RecordBatch.from_arrays(
        [pa.array([r.offset for r in records], pa.int64()),
         pa.array([r.timestamp for r in records], pa.timestamp("ms", tz="UTC")),
         pa.array([r.key for r in records], pa.binary()),
         pa.array([r.value for r in records], pa.binary()),
         pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], header_type)],
        names=["offset", "timestamp", "key", "value", "headers"])


def _arrow_fallback(core: ConsumerCore, cf: _CompletedFetch, position: int) -> Any:
    """Arrow via per-record decoding: used for read_committed fetches with aborted transactions (and codecs
    without decode_to_arrow)."""
    return _records_to_arrow(core._decode_records(cf, position))


#: (topic, partition, rows) whose topic and partition columns are kept for reuse: Arrow arrays are immutable, and a
#: consumer's batches keep the same few shapes (a share consumer's 1,000-record batches), so building them once
#: saves ~15 us per batch
PARTITION_COLUMNS_CACHED = 256


@functools.lru_cache(maxsize=PARTITION_COLUMNS_CACHED)
def _partition_columns(topic: str, partition: int, n: int) -> tuple[Any, Any]:
    """The topic (dictionary-encoded) and partition columns of ``n`` rows of one partition."""
    import pyarrow as pa

    return (pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([topic])),
            pa.array(np.full(n, partition, dtype=np.int32)))


def _with_partition_columns(batch: Any, tp: TopicPartition, **after: Any) -> Any:
    """``batch`` with its topic (dictionary-encoded) and partition columns first, and the ``after`` columns
    (name=Arrow array) last, in one RecordBatch."""
    import pyarrow as pa

    topic, partition = _partition_columns(tp.topic, tp.partition, batch.num_rows)
    cols = [topic, partition, *batch.columns, *after.values()]
    names = ["topic", "partition", *batch.schema.names, *after]
    return pa.RecordBatch.from_arrays(cols, names=names)

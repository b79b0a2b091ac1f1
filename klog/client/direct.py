"""Partition-level requests for callers that plan their own offset ranges and encode their own record batches
(klog's Spark source and sink): Metadata, ListOffsets, a Fetch at an explicit offset that hands back the raw
record batches, and Produce of record batches already encoded.

No consumer group, no record accumulator, no background fetching: each call sends one request per partition
leader, over the connections and metadata of a :class:`~klog.client.cluster.ClusterClient`, and answers that
say the metadata was stale (a leader moved, an election is running) are retried with fresh metadata up to
``retries`` times. :class:`AsyncDirectClient` is the asyncio core; :class:`DirectClient` runs it on a private
event-loop thread for blocking callers, and its ``start_*`` methods return futures, so that a caller can have
its next request on the wire while it decodes the previous answer.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import struct
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from klog.protocol import ApiKey, Struct

from .cluster import Backoff, ClusterClient, ClusterMetadata
from .config import COMMON_CONFIG, ConfigDef, resolve_config
from .connection import BrokerConnection
from .errors import ErrorCode, KafkaConnectionError, KafkaError, KafkaTimeoutError, error_info, for_code
from .loop_thread import BlockingClient
from .types import OffsetAndTimestamp, TopicPartition

__all__ = ["AsyncDirectClient", "DirectClient", "FetchedPartition", "DIRECT_CONFIG", "scan_batches", "drop_aborted"]

DIRECT_CONFIG: tuple[ConfigDef, ...] = COMMON_CONFIG + (
    ConfigDef("retries", 7, "int", "how many times a request answered with a retriable error is sent again",
              minimum=0),
    ConfigDef("isolation.level", "read_uncommitted", "choice",
              "read_committed: Fetch and ListOffsets below the last stable offset, aborted transactions dropped",
              choices=("read_uncommitted", "read_committed")),
)

#: Lowest versions whose requests and answers carry record batches of format v2.
_MIN_FETCH_VERSION = 4
_MIN_PRODUCE_VERSION = 3
_BATCH_HEAD = struct.Struct(">qi")  # base offset, length of the rest of the batch
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_LOG_OVERHEAD = 12
_BATCH_HEADER_BYTES = 61
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

T = TypeVar("T")
R = TypeVar("R")
#: The caller's partition objects: results are keyed by them (a TopicPartition or a subclass of it).
P = TypeVar("P", bound=TopicPartition)
#: One partition's part of an answer: the partition, its error (None: none) and what it got.
_Answer = tuple[TopicPartition, "KafkaError | None", R]


def scan_batches(records: memoryview) -> tuple[int, int]:
    """``(bytes of the whole record batches at the start of records, offset after the last of them)``; the offset
    is -1 when there is none. A fetched records section may end inside a batch (cut at a byte limit)."""
    pos = 0
    end = len(records)
    next_offset = -1
    while end - pos >= _BATCH_HEADER_BYTES:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        size = _LOG_OVERHEAD + length
        if length < _BATCH_HEADER_BYTES - _LOG_OVERHEAD or pos + size > end:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)
        next_offset = base + delta + 1
        pos += size
    return pos, next_offset


def drop_aborted(records: memoryview, aborted: Iterable[tuple[int, int]]) -> memoryview:
    """The whole record batches of ``records`` without those of aborted transactions, as Kafka's consumer
    (``Fetcher``) drops them for read_committed: ``aborted`` is the Fetch answer's AbortedTransactions as
    ``(producer_id, first_offset)``; a producer's transactional batches are dropped from its aborted
    transaction's first offset until its ABORT marker. Control batches are kept (decoders skip them)."""
    pending = sorted((first, pid) for pid, first in aborted)
    if not pending:
        return records
    from klog._native import _core

    active: set[int] = set()
    keep: list[memoryview] = []
    dropped = False
    pos = 0
    end = len(records)
    while end - pos >= _BATCH_HEADER_BYTES:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        size = _LOG_OVERHEAD + length
        if pos + size > end:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)
        (attributes,) = _ATTRIBUTES.unpack_from(records, pos + _ATTRIBUTES_AT)
        (pid,) = _PRODUCER_ID.unpack_from(records, pos + _PRODUCER_ID_AT)
        batch = records[pos:pos + size]
        pos += size
        if pid >= 0:
            while pending and pending[0][0] <= base + delta:
                active.add(pending.pop(0)[1])
            if attributes & _CONTROL:
                decoded = _core.decode_batches(batch, verify_crc=False, allow_compacted=True)
                if decoded and decoded[0].control_type == 0 and pid in active:  # ABORT ends it
                    active.discard(pid)
            elif attributes & _TRANSACTIONAL and pid in active:
                dropped = True
                continue
        keep.append(batch)
    if not dropped:
        return records
    return memoryview(b"".join(keep))


def _error(code: int, what: str, tp: TopicPartition, message: str | None = None) -> KafkaError:
    """The exception for Kafka error ``code`` (not 0), its message naming the request and the partition."""
    detail = f" ({message})" if message else ""
    return for_code(code, f"{what} {tp.topic}-{tp.partition}: {error_info(code).name}{detail}")


def _partition_error(code: int, what: str, tp: TopicPartition, message: str | None = None) -> KafkaError | None:
    return _error(code, what, tp, message) if code else None


@dataclass(frozen=True)
class FetchedPartition:
    """One partition's answer to :meth:`AsyncDirectClient.fetch`."""

    tp: TopicPartition
    fetch_offset: int
    #: 0, or the partition's Kafka error code (OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, ...).
    error_code: int
    high_watermark: int
    log_start_offset: int
    #: The whole record batches of the answer, raw: views of the response frame, for a native decoder.
    records: memoryview
    #: The offset after the last batch in ``records`` (``fetch_offset`` when there is none).
    next_offset: int
    #: The answer held only the start of its first batch: that batch is larger than the partition's byte limit
    #: and the broker cut it (brokers without KIP-74 do). Ask again with a larger limit.
    truncated: bool
    #: The last stable offset (read_committed reads below it); -1 when the broker did not say.
    last_stable_offset: int = -1

    @property
    def error(self) -> KafkaError | None:
        """The partition's error as an exception (None when it has none)."""
        return _partition_error(self.error_code, f"Fetch at offset {self.fetch_offset} of", self.tp)


class AsyncDirectClient:
    """Metadata, ListOffsets, Fetch and Produce by partition (asyncio).

    ``AsyncDirectClient(bootstrap_servers="host:9092", client_id=..., request_timeout_ms=..., retries=7)`` takes
    the configs every klog client shares (Kafka's names, dotted or with underscores) plus ``retries``. Connects
    on first use; :meth:`close` (or ``async with``) closes its connections.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        if bootstrap_servers is not None:
            config = {**config, "bootstrap.servers": bootstrap_servers}
        self.config = resolve_config(DIRECT_CONFIG, config, kind="client")
        self.cluster = ClusterClient(self.config)
        self.attempts: int = self.config["retries"] + 1
        self.request_timeout_ms: int = self.config["request.timeout.ms"]
        self.isolation_level = 1 if self.config["isolation.level"] == "read_committed" else 0
        self._backoff = Backoff(self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"])

    async def close(self) -> None:
        await self.cluster.close()

    async def __aenter__(self) -> AsyncDirectClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ metadata
    async def metadata(self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
                       ) -> ClusterMetadata:
        """Metadata of exactly ``topics`` (None: every topic), as the broker answered. Asked again, up to
        ``retries`` times, while a partition has no leader (an election is running; the last answer is returned
        then) or no broker answers (then the last error is raised). ``allow_auto_create`` lets the broker create
        missing topics, as a producer's lookup does: a topic it answers UNKNOWN_TOPIC_OR_PARTITION is then asked
        for again as well (the broker answers before the creation it started is applied, as Kafka's does)."""
        wanted = None if topics is None else sorted(set(topics))
        last: KafkaError | None = None
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self._backoff.delay(attempt - 1))
            try:
                # One pass over the known brokers per attempt: the attempts are the retries.
                md = await self.cluster.refresh_topics(wanted, allow_auto_create=allow_auto_create, timeout=0)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                last = e
                continue
            electing = ErrorCode.LEADER_NOT_AVAILABLE in md.topic_errors.values() or any(
                p.leader < 0 for t in md.topics.values() for p in t.partitions.values()) or (
                allow_auto_create and ErrorCode.UNKNOWN_TOPIC_OR_PARTITION in md.topic_errors.values())
            if not electing or attempt == self.attempts - 1:
                return md
        assert last is not None
        raise _after_attempts(last, f"Metadata failed after {self.attempts} attempts")

    async def _leader(self, tp: TopicPartition) -> int:
        """The broker leading ``tp`` (the metadata is asked again when it names none)."""
        leader = self._known_leader(tp)
        if leader is None:
            await self.metadata([tp.topic])
            leader = self._known_leader(tp)
        if leader is None:
            md = self.cluster.metadata
            topic = md.topics.get(tp.topic)
            code: int = md.topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if topic is not None and tp.partition in topic.partitions:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            raise _error(code, "partition", tp)
        return leader

    def _known_leader(self, tp: TopicPartition) -> int | None:
        md = self.cluster.metadata
        leader = md.leader_for(tp.topic, tp.partition)
        return leader if leader in md.brokers else None

    async def _to_leaders(self, items: Mapping[P, T],
                          send: Callable[[BrokerConnection, dict[P, T]], Awaitable[list[_Answer[R]]]],
                          what: str) -> dict[P, R]:
        """``send`` each leader its partitions' items in one request (all leaders at once). Partitions answered
        with a retriable error, or whose leader is unknown or unreachable, are sent again after a back-off and a
        metadata refresh, up to ``retries`` times; other errors are raised at once."""
        pending = dict(items)
        # Answers name partitions with new tuples: results are keyed by the caller's own objects.
        own: dict[TopicPartition, P] = {tp: tp for tp in items}
        out: dict[P, R] = {}
        last: KafkaError | None = None
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self._backoff.delay(attempt - 1))
                await self.metadata({tp.topic for tp in pending})
            by_leader: dict[int, dict[P, T]] = collections.defaultdict(dict)
            for tp, item in pending.items():
                try:
                    by_leader[await self._leader(tp)][tp] = item
                except KafkaError as e:
                    if not e.retriable:
                        raise
                    last = e
            answers = await asyncio.gather(*(self._send_to(node, part, send) for node, part in by_leader.items()),
                                           return_exceptions=True)
            for answer in answers:
                if isinstance(answer, (KafkaConnectionError, KafkaTimeoutError)):
                    last = answer
                    continue
                if isinstance(answer, BaseException):
                    raise answer
                for answered, error, result in answer:
                    mine = own.get(answered)
                    if mine is None or mine not in pending:
                        continue
                    if error is None:
                        out[mine] = result
                        del pending[mine]
                    elif error.retriable:
                        last = error
                    else:
                        raise error
            if not pending:
                return out
        assert last is not None
        raise _after_attempts(last, f"{what} failed after {self.attempts} attempts")

    async def _send_to(self, node: int, items: dict[P, T],
                       send: Callable[[BrokerConnection, dict[P, T]], Awaitable[list[_Answer[R]]]]
                       ) -> list[_Answer[R]]:
        return await send(await self.cluster.connection(node), items)

    # ------------------------------------------------------------------ offsets
    async def list_offsets(self, query: Mapping[P, int]) -> dict[P, OffsetAndTimestamp]:
        """ListOffsets from each partition's leader, for a timestamp in ms (or -2 earliest, -1 latest): the first
        offset whose timestamp is at or after it, with that record's timestamp. The offset is -1 where no record
        is that late. An unknown partition raises ``UnknownTopicOrPartitionError`` once the retries are spent."""

        async def send(conn: BrokerConnection, items: dict[P, int]) -> list[_Answer[OffsetAndTimestamp]]:
            topics: dict[str, list[Any]] = collections.defaultdict(list)
            for tp, timestamp in items.items():
                topics[tp.topic].append(Struct(partition_index=tp.partition, current_leader_epoch=-1,
                                               timestamp=timestamp, max_num_offsets=1))
            body = Struct(replica_id=-1, isolation_level=self.isolation_level, timeout_ms=self.request_timeout_ms,
                          topics=[Struct(name=t, partitions=ps) for t, ps in topics.items()])
            response = await conn.request(ApiKey.LIST_OFFSETS, body, version=conn.version(
                ApiKey.LIST_OFFSETS, minimum=2 if self.isolation_level else 1))
            return [(tp, _partition_error(p.error_code, "ListOffsets for", tp),
                     OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch))
                    for t in response.topics for p in t.partitions
                    for tp in (TopicPartition(t.name, p.partition_index),)]

        return await self._to_leaders(query, send, "ListOffsets")

    # ------------------------------------------------------------------ fetch
    async def fetch(self, tp: TopicPartition, offset: int, *, max_wait_ms: int = 500, max_bytes: int = 52428800,
                    partition_max_bytes: int = 1048576) -> FetchedPartition:
        """One Fetch of ``tp`` from ``offset``, sent to its leader (no fetch session): the whole record batches
        it returns, raw. With ``isolation.level=read_committed`` only data below the last stable offset comes
        back and the batches of aborted transactions are left out (``next_offset`` still moves past them). The
        partition's own error comes back in the result; an error of the whole request, a partition without a
        leader and connection failures raise."""
        conn = await self.cluster.connection(await self._leader(tp))
        body = Struct(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                      isolation_level=self.isolation_level,
                      session_id=0, session_epoch=-1,
                      topics=[Struct(topic=tp.topic, partitions=[Struct(
                          partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                          log_start_offset=-1, partition_max_bytes=partition_max_bytes)])],
                      forgotten_topics_data=[], rack_id=self.config["client.rack"])
        response = await conn.request(ApiKey.FETCH, body, version=conn.version(ApiKey.FETCH, minimum=_MIN_FETCH_VERSION),
                                      timeout=max_wait_ms / 1000.0)
        if response.error_code:
            raise _error(response.error_code, f"Fetch at offset {offset} of", tp)
        p = response.responses[0].partitions[0]
        records = memoryview(p.records if p.records is not None else b"")
        complete, next_offset = scan_batches(records)
        whole = records[:complete]
        if self.isolation_level and p.aborted_transactions:
            whole = drop_aborted(records[:complete],
                                 [(a.producer_id, a.first_offset) for a in p.aborted_transactions])
        return FetchedPartition(tp, offset, p.error_code, p.high_watermark, p.log_start_offset,
                                whole, next_offset if complete else offset,
                                truncated=complete == 0 and len(records) > 0,
                                last_stable_offset=getattr(p, "last_stable_offset", -1))

    # ------------------------------------------------------------------ produce
    async def produce(self, batches: Mapping[P, bytes | bytearray | memoryview], *, acks: int = -1,
                      timeout_ms: int | None = None) -> None:
        """Produce one encoded record batch per partition to its leader, and wait until they are acknowledged
        (with ``acks=0``: written to the socket). A batch refused with a retriable error is sent again, so it may
        be written twice (the batches carry no producer id). ``timeout_ms``: how long the leader may wait for
        its followers (default ``request.timeout.ms``)."""
        wait_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms

        async def send(conn: BrokerConnection, items: dict[P, bytes | bytearray | memoryview]
                       ) -> list[_Answer[None]]:
            topics: dict[str, list[Any]] = collections.defaultdict(list)
            for tp, batch in items.items():
                topics[tp.topic].append(Struct(index=tp.partition, records=batch))
            body = Struct(transactional_id=None, acks=acks, timeout_ms=wait_ms,
                          topic_data=[Struct(name=t, partition_data=ps) for t, ps in topics.items()])
            version = conn.version(ApiKey.PRODUCE, minimum=_MIN_PRODUCE_VERSION)
            if acks == 0:
                await conn.send(ApiKey.PRODUCE, body, version=version, expect_response=False)
                return [(tp, None, None) for tp in items]
            response = await conn.request(ApiKey.PRODUCE, body, version=version)
            return [(tp, _partition_error(p.error_code, "Produce to", tp, getattr(p, "error_message", None)), None)
                    for t in response.responses for p in t.partition_responses
                    for tp in (TopicPartition(t.name, p.index),)]

        await self._to_leaders(batches, send, "Produce")


def _after_attempts(error: KafkaError, context: str) -> KafkaError:
    """``error`` (its class and code kept) with ``context`` in front of its message."""
    error.args = (f"{context}: {error.args[0] if error.args else error.name}",)
    return error


class DirectClient(BlockingClient):
    """:class:`AsyncDirectClient` with a blocking API (its asyncio core runs on a private event-loop thread).

    ``start_fetch`` and ``start_produce`` send at once and return a :class:`concurrent.futures.Future`; the
    other calls wait for their answer. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._core: AsyncDirectClient = self._start_thread("klog-direct", self._create(bootstrap_servers, config))

    @staticmethod
    async def _create(bootstrap_servers: str | Sequence[str] | None, config: dict[str, Any]) -> AsyncDirectClient:
        return AsyncDirectClient(bootstrap_servers, **config)

    @property
    def config(self) -> dict[str, Any]:
        """The effective configuration (Kafka names)."""
        return dict(self._core.config)

    def metadata(self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False) -> ClusterMetadata:
        """See :meth:`AsyncDirectClient.metadata`."""
        return self._thread.run(self._core.metadata(topics, allow_auto_create=allow_auto_create))

    def list_offsets(self, query: Mapping[P, int]) -> dict[P, OffsetAndTimestamp]:
        """See :meth:`AsyncDirectClient.list_offsets`."""
        return self._thread.run(self._core.list_offsets(query))

    def start_fetch(self, tp: TopicPartition, offset: int, **limits: int) -> concurrent.futures.Future[FetchedPartition]:
        """Send a Fetch now (see :meth:`AsyncDirectClient.fetch` for ``limits``); the future holds its answer."""
        return self._thread.submit(self._core.fetch(tp, offset, **limits))

    def fetch(self, tp: TopicPartition, offset: int, **limits: int) -> FetchedPartition:
        """See :meth:`AsyncDirectClient.fetch`."""
        return self._thread.run(self._core.fetch(tp, offset, **limits))

    def start_produce(self, batches: Mapping[P, bytes | bytearray | memoryview], *, acks: int = -1,
                      timeout_ms: int | None = None) -> concurrent.futures.Future[None]:
        """Send the batches now (see :meth:`AsyncDirectClient.produce`); the future completes when they are
        acknowledged, or holds the error."""
        return self._thread.submit(self._core.produce(batches, acks=acks, timeout_ms=timeout_ms))

    def produce(self, batches: Mapping[P, bytes | bytearray | memoryview], *, acks: int = -1,
                timeout_ms: int | None = None) -> None:
        """See :meth:`AsyncDirectClient.produce`."""
        self._thread.run(self._core.produce(batches, acks=acks, timeout_ms=timeout_ms))

    def close(self) -> None:
        self._close_with(self._core.close())

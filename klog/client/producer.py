"""The producer's asyncio core: record accumulator, partitioner, sender and idempotence.

Data flow::

    send() -> partition -> RecordAccumulator (per-partition batches, thread-safe)
           -> Sender (event loop): drain ready batches per leader, assign sequence numbers, encode natively,
              one ProduceRequest per broker -> responses complete the batches' futures

The accumulator may be fed from any thread (the sync :class:`klog.Producer` calls it from the user's thread);
everything else runs on the event loop. Records are encoded into their partition's open batch natively as they
come (:class:`klog._native._core.RecordAppender`); draining a batch only writes its header.

Idempotence (on by default): the producer gets a producer id and epoch (InitProducerId) and numbers each
partition's batches; a retried batch keeps its producer id, epoch and sequence numbers, so the broker drops
duplicates. A chain error (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) breaks its partition's sequence
chain; the producer then waits for its in-flight requests, bumps the epoch (InitProducerId with the current
id/epoch, KIP-360) and renumbers that partition's unacknowledged batches from 0. A batch that fails for good
leaves its partition's chain in doubt (the broker may have appended it): new batches wait for the partition's
earlier ones, and only a gap left then asks for a bump. Other partitions keep their chains under the old epoch;
each starts at 0 under the new one once nothing of the old is outstanding there (Kafka's TransactionManager).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from klog._native import _core
from klog.protocol import ApiKey, Struct

from .accumulator import BATCH_HEADER, RECORD_OVERHEAD, ProducerBatch, RecordAccumulator
from .batch_buffers import POOL_MAX_BYTES, BatchBufferPool, LazyBatch
from .cluster import STALE_METADATA_ERRORS, Backoff, ClusterClient
from .config import PRODUCER_CONFIG, resolve_config
from .errors import (
    ClientClosedError,
    ConfigError,
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    UnsupportedFeatureError,
    for_code,
    is_retriable,
)
from .futures import BatchOutcome
from .transactions import TransactionManager
from .types import RecordMetadata

__all__ = ["ProducerCore", "ProducerBatch", "BatchMetadata"]

log = logging.getLogger("klog.client.producer")

_murmur2 = _core.murmur2
_monotonic = time.monotonic


# Error codes handled specially by the sender.
_OUT_OF_ORDER_SEQUENCE = 45
_DUPLICATE_SEQUENCE = 46
_INVALID_PRODUCER_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH
_UNKNOWN_PRODUCER_ID = ErrorCode.UNKNOWN_PRODUCER_ID
_MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE
_CHAIN_ERRORS = frozenset({_OUT_OF_ORDER_SEQUENCE, _UNKNOWN_PRODUCER_ID, _INVALID_PRODUCER_EPOCH})


class BatchMetadata:
    """Result of one batch written by ``send_batch``: ``record_count`` records from ``base_offset`` on."""

    __slots__ = ("topic", "partition", "base_offset", "record_count", "timestamp")

    def __init__(self, topic: str, partition: int, base_offset: int, record_count: int, timestamp: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.record_count = record_count
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"BatchMetadata(topic={self.topic!r}, partition={self.partition}, base_offset={self.base_offset}, "
                f"record_count={self.record_count}, timestamp={self.timestamp})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchMetadata):
            return NotImplemented
        return (self.topic, self.partition, self.base_offset, self.record_count, self.timestamp) == (
            other.topic, other.partition, other.base_offset, other.record_count, other.timestamp)


class _PartitionSequence:
    """Idempotence state of one partition (event loop only)."""

    __slots__ = ("producer_id", "producer_epoch", "next_sequence", "last_acked", "in_flight", "ordered_retry",
                 "unresolved")

    def __init__(self) -> None:
        #: The producer id and epoch this partition's chain is under (the producer's may be newer after a bump).
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence = 0
        #: The last sequence the broker acknowledged in this chain (-1: none).
        self.last_acked = -1
        #: Batches of this partition in flight, in sequence order.
        self.in_flight: list[ProducerBatch] = []
        #: A retried batch waits at the head of the queue: send nothing else until in_flight drains.
        self.ordered_retry = False
        #: A numbered batch failed without knowing whether the broker appended it: number no new batch until
        #: the earlier ones are done, then bump the epoch only if the chain has a gap (Kafka's unresolved
        #: sequences).
        self.unresolved = False


class ProducerCore:
    """Everything a producer does, on one event loop. Wrapped by ``klog.aio.Producer`` and ``klog.Producer``."""

    def __init__(self, config: Mapping[str, Any], *, asyncio_futures: bool) -> None:
        cfg = resolve_config(PRODUCER_CONFIG, config, kind="producer")
        explicit_idempotence = any(k.replace("_", ".") == "enable.idempotence" for k in config)
        if cfg["transactional.id"] is not None:
            if explicit_idempotence and not cfg["enable.idempotence"]:
                raise ConfigError("transactional.id requires enable.idempotence=true")
            cfg["enable.idempotence"] = True
            explicit_idempotence = True
        if cfg["enable.idempotence"]:
            problems = []
            if cfg["acks"] != -1:
                problems.append("acks must be all")
            if cfg["max.in.flight.requests.per.connection"] > 5:
                problems.append("max.in.flight.requests.per.connection must be <= 5")
            if cfg["retries"] == 0:
                problems.append("retries must be > 0")
            if problems:
                if explicit_idempotence:
                    raise ConfigError(f"enable.idempotence=true requires: {'; '.join(problems)}")
                cfg["enable.idempotence"] = False
        if cfg["batch.size"] > cfg["max.request.size"]:
            cfg["batch.size"] = cfg["max.request.size"]
        self.config = cfg
        self.loop = asyncio.get_running_loop()
        self.cluster = ClusterClient(cfg, allow_auto_create_topics=cfg["allow.auto.create.topics"])
        self.idempotent: bool = cfg["enable.idempotence"]
        self.acks: int = cfg["acks"]
        self.compression: str = cfg["compression.type"]
        self.compression_level: int | None = cfg["compression.level"]
        self.max_in_flight: int = cfg["max.in.flight.requests.per.connection"]
        self.request_timeout_ms: int = cfg["request.timeout.ms"]
        self.delivery_timeout = cfg["delivery.timeout.ms"] / 1000.0
        self.max_block = cfg["max.block.ms"] / 1000.0
        self.retries: int = cfg["retries"]
        self.retry_backoff = Backoff(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"])
        self.ignore_keys: bool = cfg["partitioner.ignore.keys"]
        self.random_partitioner = cfg["partitioner"] == "random"
        self.accumulator = RecordAccumulator(
            batch_size=cfg["batch.size"], buffer_memory=cfg["buffer.memory"],
            max_request_size=cfg["max.request.size"], linger_ms=cfg["linger.ms"],
            asyncio_futures=asyncio_futures, wake=self._threadsafe_wake,
            compression=cfg["compression.type"], compression_level=cfg["compression.level"])
        #: Buffers of finished send_batch batches, rewritten by the next ones (no fresh pages per batch).
        self.batch_buffers = BatchBufferPool(max_bytes=min(POOL_MAX_BYTES, cfg["buffer.memory"]))
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[tuple[str, int], _PartitionSequence] = {}
        self._bump_needed = False
        #: Partitions whose sequence chain is broken: the next epoch bump renumbers their batches from 0.
        self._partitions_to_rewrite: set[tuple[str, int]] = set()
        self._node_in_flight: dict[int, int] = collections.defaultdict(int)
        self._connecting: set[int] = set()
        #: Batches put back for another attempt (retriable errors, lost connections).
        self.retried_batches = 0
        self._total_in_flight = 0
        self._wakeup = asyncio.Event()
        self._sender_task: asyncio.Task[None] | None = None
        self._idempotence_task: asyncio.Task[None] | None = None
        self._fatal: BaseException | None = None
        self._closing = False
        self._thread_id = threading.get_ident()
        #: topic -> (all partitions, partitions with a leader), rebuilt on every metadata refresh.
        self.partitions: dict[str, tuple[list[int], list[int]]] = {}
        self.cluster.add_metadata_listener(self._on_metadata)
        #: The transaction state machine when ``transactional.id`` is set.
        self.txn: TransactionManager | None = None
        if cfg["transactional.id"] is not None:
            self.txn = TransactionManager(self, cfg["transactional.id"], cfg["transaction.timeout.ms"])

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        await self.cluster.start(timeout=self.max_block)
        self._sender_task = self.loop.create_task(self._run_sender())

    def _threadsafe_wake(self) -> None:
        if threading.get_ident() == self._thread_id:
            self._wakeup.set()
        else:
            try:
                self.loop.call_soon_threadsafe(self._wakeup.set)
            except RuntimeError:  # loop closed
                pass

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait for it to complete (or ``timeout`` seconds)."""
        acc = self.accumulator
        with acc.lock:
            pending = list(acc.incomplete)
            acc.flushing += 1
        try:
            if not pending:
                return
            self._wakeup.set()
            remaining = len(pending)
            done = self.loop.create_future()

            def one_done(_o: BatchOutcome) -> None:
                nonlocal remaining
                remaining -= 1
                if remaining == 0 and not done.done():
                    done.set_result(None)

            for b in pending:
                b.outcome.add_batch_callback(one_done)
            try:
                await asyncio.wait_for(asyncio.shield(done), timeout)
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"flush did not complete in {timeout} s") from None
        finally:
            with acc.lock:
                acc.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), then stop the sender and close connections; unsent records fail."""
        if self._closing:
            if self._sender_task is not None:
                await asyncio.wait([self._sender_task])
            return
        self._closing = True
        try:
            await self.flush(timeout)
        except KafkaError as e:
            log.warning("close: flush did not complete: %s", e)
        self._fail_all(ClientClosedError("producer closed before the record was sent"))
        if self._sender_task is not None:
            self._wakeup.set()
            self._sender_task.cancel()
            try:
                await self._sender_task
            except (asyncio.CancelledError, Exception):
                pass
        await self.cluster.close()

    def _fail_all(self, error: BaseException) -> None:
        acc = self.accumulator
        with acc.lock:
            acc.closed = error
            batches = [b for q in acc.queues.values() for b in q]
            for b in batches:
                self._close_batch(b)
            acc.queues.clear()
            acc.space.notify_all()
        for b in batches:
            self._complete(b, error=error)

    # ------------------------------------------------------------------ sending (any thread)
    def partition_for(self, topic: str, key: bytes | None, num_partitions: int) -> int | None:
        """Partition of a keyed record, or None for keyless (sticky) partitioning."""
        if key is None or self.ignore_keys:
            return None
        if self.random_partitioner:
            return None
        return (_murmur2(key) & 0x7FFFFFFF) % num_partitions

    def record_size(self, key: bytes | None, value: bytes | None, headers: Any) -> int:
        size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        if headers:
            for hk, hv in headers:
                size += len(hk) + (len(hv) if hv is not None else 0) + 2
        if size + BATCH_HEADER > self.accumulator.max_request_size:
            raise RecordTooLargeError(
                f"record of {size} bytes exceeds max.request.size={self.accumulator.max_request_size}")
        if size > self.accumulator.buffer_memory:
            raise RecordTooLargeError(f"record of {size} bytes exceeds buffer.memory={self.accumulator.buffer_memory}")
        return size

    def _on_metadata(self, md: Any) -> None:
        cache = {}
        for name, info in md.topics.items():
            parts = sorted(info.partitions)
            cache[name] = (parts, [p for p in parts if info.partitions[p].leader >= 0])
        self.partitions = cache

    async def wait_for_partitions(self, topic: str, timeout: float) -> tuple[list[int], list[int]]:
        """(all partitions, partitions with a leader) of ``topic``, waiting for metadata up to ``timeout``."""
        parts = self.partitions.get(topic)
        if parts is None:
            await self.cluster.wait_for_topic(topic, timeout)
            self._on_metadata(self.cluster.metadata)
            parts = self.partitions[topic]
        return parts

    def check_partition(self, topic: str, partition: int, parts: tuple[list[int], list[int]]) -> None:
        if partition not in parts[0]:
            raise for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           f"partition {partition} of topic {topic!r} does not exist "
                           f"(the topic has {len(parts[0])} partitions)")

    def wait_for_space_sync(self, size: int, deadline: float) -> None:
        """Block the calling thread until ``size`` bytes fit in buffer.memory (max.block.ms back-pressure)."""
        acc = self.accumulator
        with acc.space:
            while acc.used + size > acc.buffer_memory and acc.used > 0 and acc.closed is None:
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"buffer.memory ({acc.buffer_memory} bytes) stayed full for max.block.ms")
                acc.space_wanted = min(acc.space_wanted, size)
                acc.space.wait(remaining)

    async def wait_for_space(self, size: int, deadline: float) -> None:
        """Await until ``size`` bytes fit in buffer.memory (max.block.ms back-pressure)."""
        acc = self.accumulator
        while True:
            with acc.lock:
                if acc.used + size <= acc.buffer_memory or acc.used == 0 or acc.closed is not None:
                    return
                w = self.loop.create_future()
                acc.space_waiters.append(w)
            remaining = deadline - _monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"buffer.memory ({acc.buffer_memory} bytes) stayed full for max.block.ms")
            try:
                await asyncio.wait_for(w, remaining)
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------ sender (event loop)
    async def _run_sender(self) -> None:
        try:
            while True:
                self._wakeup.clear()
                with self.accumulator.lock:
                    self.accumulator.wake_sent = False
                if self.idempotent and self.txn is None and (self.producer_id < 0 or self._bump_needed) and \
                        self._total_in_flight == 0:
                    if self._has_queued():
                        await self._init_producer_id()
                        continue
                deadline = self._send_ready()
                if self._closing and not self._has_queued() and self._total_in_flight == 0:
                    return
                if deadline is None:
                    with self.accumulator.lock:
                        idle = not self.accumulator.queues and not self.accumulator.wake_sent
                        if idle:
                            self.accumulator.sender_idle = True
                    await self._wakeup.wait()
                else:
                    timeout = deadline - _monotonic()
                    if timeout > 0:
                        try:
                            await asyncio.wait_for(self._wakeup.wait(), timeout)
                        except asyncio.TimeoutError:
                            pass
                    else:
                        await asyncio.sleep(0)  # more is ready: let I/O run, then send it
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # pragma: no cover - a bug: fail loudly, never hang senders
            log.exception("producer sender crashed")
            self._fatal = e
            self._fail_all(e)

    def _has_queued(self) -> bool:
        with self.accumulator.lock:
            return any(self.accumulator.queues.values())

    def _sequence_state(self, tp: tuple[str, int]) -> _PartitionSequence:
        s = self._sequences.get(tp)
        if s is None:
            s = self._sequences[tp] = _PartitionSequence()
        return s

    def _send_ready(self) -> float | None:
        """Drain ready batches into one request per leader; returns the next time anything becomes ready."""
        acc = self.accumulator
        now = _monotonic()
        md = self.cluster.metadata
        next_deadline: float | None = None
        by_node: dict[int, list[ProducerBatch]] = {}
        node_bytes: dict[int, int] = {}
        expired: list[ProducerBatch] = []
        connect_nodes: set[int] = set()
        need_metadata = False
        txn = self.txn
        blocked_by_idempotence = self.idempotent and txn is None and (self.producer_id < 0 or self._bump_needed)
        rejected: list[tuple[ProducerBatch, BaseException]] = []
        with acc.lock:
            flushing = acc.flushing > 0 or self._closing
            for tp, q in list(acc.queues.items()):
                if not q:
                    del acc.queues[tp]
                    continue
                # Batches past delivery.timeout.ms fail (never once in flight: those wait for their response).
                while q and now - q[0].created >= self.delivery_timeout:
                    self._close_batch(q[0])
                    expired.append(q.popleft())
                if not q:
                    del acc.queues[tp]
                    continue
                head = q[0]
                if head.retry_at > now:
                    next_deadline = head.retry_at if next_deadline is None else min(next_deadline, head.retry_at)
                    continue
                ready = len(q) > 1 or head.filled() >= acc.batch_size or flushing or head.attempts > 0 or \
                    now - head.created >= acc.linger
                if not ready:
                    t = head.created + acc.linger
                    next_deadline = t if next_deadline is None else min(next_deadline, t)
                    continue
                if blocked_by_idempotence:
                    continue
                if txn is not None:
                    gate = txn.gate(tp)
                    if gate is False:
                        continue
                    if gate is not True:
                        # Not in a transaction (or it failed): the partition's queued batches fail.
                        while q and q[0].base_sequence < 0:
                            self._close_batch(q[0])
                            rejected.append((q.popleft(), gate))  # type: ignore[arg-type]
                        if not q:
                            del acc.queues[tp]
                            continue
                        head = q[0]
                seq = None
                if self.idempotent:
                    seq = self._sequence_state(tp)
                    if seq.ordered_retry and seq.in_flight:
                        continue
                    if head.base_sequence < 0 and not self._may_number_new_batch(tp, seq):
                        if txn is None and self._bump_needed:
                            blocked_by_idempotence = True
                            if self._total_in_flight == 0:
                                next_deadline = now  # bump at once (a response wakes the sender otherwise)
                        continue
                topic_md = md.topics.get(tp[0])
                part = topic_md.partitions.get(tp[1]) if topic_md is not None else None
                leader = part.leader if part is not None else -1
                if leader < 0:
                    need_metadata = True
                    continue
                if seq is not None and seq.in_flight and not self._same_pipeline(seq.in_flight, leader):
                    # Earlier batches of this partition are in flight on a connection that failed (or to an
                    # old leader): their failures must be requeued first, else a later sequence could reach
                    # the broker before them.
                    continue
                if self._node_in_flight[leader] >= self.max_in_flight:
                    continue
                conn = self.cluster._conns.get(leader)
                if conn is None or conn.closed:
                    connect_nodes.add(leader)
                    continue
                if conn.write_paused:
                    # The socket buffer is full: wait until the transport drains.
                    if self._wakeup.set not in conn.on_writable:
                        conn.on_writable.append(self._wakeup.set)
                    continue
                size = node_bytes.get(leader, 0)
                if size and size + head.filled() > acc.max_request_size:
                    next_deadline = now if next_deadline is None else min(next_deadline, now)
                    continue
                q.popleft()
                if not q:
                    del acc.queues[tp]
                else:
                    # One batch per partition goes into a request: look again at once, so that the partition's
                    # next batch goes out in another request (pipelined up to max.in.flight) instead of
                    # waiting for this one's response.
                    next_deadline = now if next_deadline is None else min(next_deadline, now)
                self._close_batch(head)
                if seq is not None:
                    if head.base_sequence < 0:
                        head.base_sequence = seq.next_sequence
                        head.producer_id, head.producer_epoch = seq.producer_id, seq.producer_epoch
                        seq.next_sequence += head.count
                    seq.ordered_retry = False
                    seq.in_flight.append(head)
                    seq.in_flight.sort(key=lambda b: b.base_sequence)
                by_node.setdefault(leader, []).append(head)
                node_bytes[leader] = size + head.size
        for b in expired:
            err = KafkaTimeoutError(
                f"{b.count} record(s) for {b.topic}-{b.partition} expired after "
                f"{self.delivery_timeout * 1000:.0f} ms (delivery.timeout.ms) without being sent")
            self._complete(b, error=err)
            if self.idempotent and b.base_sequence >= 0:
                self._chain_in_doubt(b)
            if txn is not None:
                txn.produce_failed(err)
        for b, e in rejected:
            self._complete(b, error=e)
        if need_metadata:
            self.cluster.request_update()
            t = now + self.retry_backoff.delay(0)
            next_deadline = t if next_deadline is None else min(next_deadline, t)
        for node in connect_nodes:
            self._ensure_connecting(node)
        for node, batches in by_node.items():
            self._send_produce(node, batches)
        return next_deadline

    def _may_number_new_batch(self, tp: tuple[str, int], seq: _PartitionSequence) -> bool:
        """May a batch without sequence numbers be numbered in ``tp``'s chain now? (Kafka's
        shouldStopDrainBatchesForPartition and maybeUpdateProducerIdAndEpoch.) Numbered batches are the head of a
        partition's queue, so when the head has none, the numbered ones left are those in flight."""
        stale = seq.producer_id != self.producer_id or seq.producer_epoch != self.producer_epoch
        if seq.in_flight:
            # After a bump, a new epoch's sequence 0 must not reach the broker before the old epoch's batches.
            return not stale and not seq.unresolved
        if seq.unresolved:
            seq.unresolved = False
            if seq.last_acked + 1 != seq.next_sequence:
                # A batch in doubt was not appended after all (no later one was acknowledged): a gap.
                self._request_bump(tp)
                return False
        if stale:
            seq.producer_id, seq.producer_epoch = self.producer_id, self.producer_epoch
            seq.next_sequence, seq.last_acked = 0, -1
        return True

    def _request_bump(self, tp: tuple[str, int]) -> None:
        self._bump_needed = True
        self._partitions_to_rewrite.add(tp)

    def _chain_in_doubt(self, b: ProducerBatch) -> None:
        """Numbered batch ``b`` failed for good: the broker may or may not have appended it."""
        if self.txn is not None:
            self._bump_needed = True  # the transaction is aborted, then the epoch bumped
            return
        seq = self._sequences.get((b.topic, b.partition))
        if seq is not None:
            seq.unresolved = True

    def _close_batch(self, b: ProducerBatch) -> None:
        self.accumulator.close_batch(b)

    @staticmethod
    def _same_pipeline(in_flight: list[ProducerBatch], leader: int) -> bool:
        for x in in_flight:
            if x.sent_node != leader or (x.sent_on is not None and x.sent_on.closed):
                return False
        return True

    def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        """Encode and write one ProduceRequest now (on the open connection to ``node``), in drain order: no
        await happens between draining and writing, so a partition's batches reach the broker in sequence."""
        topics: dict[str, list[Any]] = {}
        try:
            for b in batches:
                data = b.encode(b.producer_id, b.producer_epoch, self.compression, self.compression_level,
                                self.batch_buffers)
                if self.txn is not None and not data[22] & _TRANSACTIONAL_BIT:
                    data = b.encoded = _mark_transactional(data)
                topics.setdefault(b.topic, []).append(Struct(index=b.partition, records=data))
        except Exception as e:  # bad record content (e.g. wrong types): fail just these batches
            for b in batches:
                self._batch_failed(b, e if isinstance(e, KafkaError) else KafkaError(f"cannot encode batch: {e}"))
            return
        body = Struct(
            transactional_id=self.txn.transactional_id if self.txn is not None else None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[Struct(name=t, partition_data=parts) for t, parts in topics.items()],
        )
        conn = self.cluster._conns.get(node)
        for b in batches:
            b.attempts += 1
            b.sent_node = node
            b.sent_on = conn
        if conn is None or conn.closed:
            for b in batches:
                self._batch_retry_or_fail(b, KafkaConnectionError(f"connection to broker {node} lost"))
            return
        if self.acks == 0:
            conn.send(ApiKey.PRODUCE, body, expect_response=False)
            for b in batches:
                self._batch_succeeded(b, -1, -1)
            return
        self._node_in_flight[node] += 1
        self._total_in_flight += 1
        fut = conn.send(ApiKey.PRODUCE, body)
        fut.add_done_callback(lambda f: self._on_produce_response(node, batches, f))

    def _ensure_connecting(self, node: int) -> None:
        """Start connecting to ``node`` (once); the sender is woken when that finished either way."""
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def connect() -> None:
            try:
                await self.cluster.connection(node)
            except KafkaError as e:
                log.debug("connecting to broker %d failed: %s", node, e)
                self.cluster.request_update()
            finally:
                self._connecting.discard(node)
                self._wakeup.set()

        self.loop.create_task(connect())

    def _on_produce_response(self, node: int, batches: list[ProducerBatch], fut: asyncio.Future[Any]) -> None:
        try:
            if fut.cancelled():
                raise KafkaConnectionError("produce request cancelled")
            err = fut.exception()
            if isinstance(err, (KafkaConnectionError, KafkaTimeoutError)):
                self.cluster.request_update()
                for b in batches:
                    self._batch_retry_or_fail(b, err)
                return
            if err is not None:
                e = err if isinstance(err, KafkaError) else KafkaError(f"produce failed: {err}")
                for b in batches:
                    self._batch_failed(b, e)
                return
            response = fut.result()
            index = {(b.topic, b.partition): b for b in batches}
            for t in response.responses:
                for p in t.partition_responses:
                    key = (t.name, p.index)
                    answered = index.pop(key) if key in index else None
                    if answered is not None:
                        self._handle_partition_response(answered, p)
            for b in index.values():
                self._batch_retry_or_fail(b, KafkaError(f"broker {node} did not answer for {b.topic}-{b.partition}"))
        finally:
            self._node_in_flight[node] -= 1
            self._total_in_flight -= 1
            self._wakeup.set()

    def _handle_partition_response(self, b: ProducerBatch, p: Any) -> None:
        code = p.error_code
        if code == ErrorCode.NONE:
            self._batch_succeeded(b, p.base_offset, p.log_append_time_ms)
            return
        if code == _DUPLICATE_SEQUENCE:
            # Already written by an earlier attempt whose answer was lost; the broker no longer knows the offset.
            self._batch_succeeded(b, -1, -1)
            return
        message = getattr(p, "error_message", None)
        err = for_code(code, message)
        if code in STALE_METADATA_ERRORS:
            self.cluster.request_update()
        if self.txn is not None and (code in _CHAIN_ERRORS or code == ErrorCode.PRODUCER_FENCED or
                                     code == ErrorCode.TRANSACTION_ABORTABLE or code == ErrorCode.INVALID_TXN_STATE):
            if code == _OUT_OF_ORDER_SEQUENCE and self._earlier_pending(b):
                self._requeue(b, backoff=False)
                return
            # In a transaction a broken sequence chain or a fenced epoch is not repaired in place: the record
            # fails and the transaction must be aborted (fenced: the producer is done).
            self._batch_failed(b, err)
            return
        if self.idempotent and code in _CHAIN_ERRORS:
            if code == _OUT_OF_ORDER_SEQUENCE and self._earlier_pending(b):
                # An earlier batch of this partition is still unacknowledged; resend this one after it, in order.
                self._requeue(b, backoff=False)
                return
            # The broker lost or rejected this partition's sequence chain: bump the epoch and resend its batches
            # with fresh sequences.
            log.info("producer %d: %s on %s-%d; bumping the epoch", self.producer_id, err.name, b.topic, b.partition)
            self._request_bump((b.topic, b.partition))
            self._requeue(b, backoff=False)
            return
        if is_retriable(code):
            self._batch_retry_or_fail(b, err)
            return
        self._batch_failed(b, err)

    def _earlier_pending(self, b: ProducerBatch) -> bool:
        """Is a batch of the same partition with a lower sequence still unacknowledged?"""
        tp = (b.topic, b.partition)
        seq = self._sequences.get(tp)
        if seq is not None and any(x is not b and 0 <= x.base_sequence < b.base_sequence for x in seq.in_flight):
            return True
        with self.accumulator.lock:
            q = self.accumulator.queues.get(tp)
            return bool(q) and any(0 <= x.base_sequence < b.base_sequence for x in q)  # type: ignore[union-attr]

    def _batch_retry_or_fail(self, b: ProducerBatch, err: KafkaError) -> None:
        if b.attempts > self.retries or _monotonic() - b.created >= self.delivery_timeout:
            self._batch_failed(b, err)
            return
        self._requeue(b, backoff=True)

    def _requeue(self, b: ProducerBatch, *, backoff: bool) -> None:
        """Put a batch back at the head of its partition's queue (in sequence order)."""
        self.retried_batches += 1
        tp = (b.topic, b.partition)
        seq = self._sequences.get(tp)
        if seq is not None:
            try:
                seq.in_flight.remove(b)
            except ValueError:
                pass
            seq.ordered_retry = True
        b.retry_at = _monotonic() + (self.retry_backoff.delay(b.attempts - 1) if backoff else 0.0)
        if b.retry_at == 0.0:
            b.retry_at = 1e-9  # marks "is being retried"
        acc = self.accumulator
        with acc.lock:
            q = acc.queues.get(tp)
            if q is None:
                q = acc.queues[tp] = collections.deque()
            # Keep retried batches in sequence order ahead of newer ones.
            i = 0
            while i < len(q) and q[i].attempts > 0 and 0 <= q[i].base_sequence < b.base_sequence:
                i += 1
            q.insert(i, b)
            acc.sender_idle = False

    def _batch_failed(self, b: ProducerBatch, err: BaseException) -> None:
        if self.idempotent and b.base_sequence >= 0:
            seq = self._sequences.get((b.topic, b.partition))
            if seq is not None and b in seq.in_flight:
                seq.in_flight.remove(b)
            self._chain_in_doubt(b)
        if self.txn is not None:
            self.txn.produce_failed(err)
        self._complete(b, error=err)

    def _batch_succeeded(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.idempotent:
            seq = self._sequences.get((b.topic, b.partition))
            if seq is not None:
                try:
                    seq.in_flight.remove(b)
                except ValueError:
                    pass
                if b.base_sequence >= 0 and (b.producer_id, b.producer_epoch) == (seq.producer_id, seq.producer_epoch):
                    seq.last_acked = max(seq.last_acked, b.base_sequence + b.count - 1)
        self._complete(b, base_offset=base_offset, log_append_time=log_append_time)

    def _complete(self, b: ProducerBatch, *, base_offset: int = -1, log_append_time: int = -1,
                  error: BaseException | None = None) -> None:
        o = b.outcome
        if o.done:
            return
        if error is None:
            # The appender answers timestamps[i] with record i's timestamp.
            timestamps = b.appender if b.appender is not None and log_append_time == -1 else None
            if b.futures is not None:
                topic, partition = b.topic, b.partition
                for i, f in enumerate(b.futures):
                    if not f.done():
                        ts = log_append_time if log_append_time != -1 else (timestamps[i] if timestamps else -1)
                        f.set_result(RecordMetadata(topic, partition, base_offset + i if base_offset >= 0 else -1, ts))
            o.succeed(base_offset, log_append_time, timestamps)  # type: ignore[arg-type]  # indexable
        else:
            if b.futures is not None:
                for f in b.futures:
                    if not f.done():
                        f.set_exception(error)
            o.fail(error)
        b.appender = None
        raw, b.raw = b.raw, None
        b.encoded = None
        # Done for good (acknowledged or failed): its bytes may be rewritten by a later batch once nothing
        # references them (the encoder checks).
        if isinstance(raw, LazyBatch):
            buf, raw.raw = raw.raw, b""
            del raw
            self.batch_buffers.give(buf)
        elif type(raw) is bytearray:
            self.batch_buffers.give(raw)
            del raw
        if b.on_done is not None:
            b.on_done(b, error)
        self.accumulator.release(b)

    # ------------------------------------------------------------------ transactions (event loop)
    def wake_sender(self) -> None:
        self._wakeup.set()

    def bump_needed(self) -> bool:
        return self._bump_needed

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch (a transactional InitProducerId, once nothing is in flight): every
        partition's sequence starts again at 0 (Kafka's resetSequenceNumbers). A batch numbered already keeps its
        producer id, epoch and sequence: renumbered, an attempt the broker appended would be appended again."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._bump_needed = False
        self._partitions_to_rewrite.clear()
        self._sequences.clear()

    def drop_queued(self, error: BaseException) -> None:
        """Fail every batch still queued (not in flight): an aborted transaction's records are never sent. A
        dropped batch that already had sequence numbers (a retry) breaks its chain: the epoch is bumped."""
        acc = self.accumulator
        with acc.lock:
            batches = [b for q in acc.queues.values() for b in q]
            for b in batches:
                self._close_batch(b)
            acc.queues.clear()
        for b in batches:
            if b.base_sequence >= 0:
                self._bump_needed = True
            self._complete(b, error=error)

    # ------------------------------------------------------------------ idempotence
    def _start_sequences_at_beginning(self, tp: tuple[str, int]) -> None:
        """Renumber ``tp``'s unacknowledged numbered batches (in flight or queued for a retry) from 0 under the
        producer's id and epoch: its chain broke, so the broker appended none of them (Kafka's
        startSequencesAtBeginning)."""
        seq = self._sequence_state(tp)
        with self.accumulator.lock:
            q = self.accumulator.queues.get(tp)
            queued = [b for b in q if b.base_sequence >= 0] if q else []
        next_sequence = 0
        for b in sorted(seq.in_flight + queued, key=lambda b: b.base_sequence):
            b.base_sequence, b.producer_id, b.producer_epoch = next_sequence, self.producer_id, self.producer_epoch
            b.encoded = None
            next_sequence += b.count
        seq.producer_id, seq.producer_epoch = self.producer_id, self.producer_epoch
        seq.next_sequence, seq.last_acked, seq.unresolved = next_sequence, -1, False

    async def _init_producer_id(self) -> None:
        attempt = 0
        while True:
            try:
                conn = await self.cluster.any_connection(self.max_block)
                v = conn.version(ApiKey.INIT_PRODUCER_ID)
                bump = self.producer_id >= 0 and v >= 3
                body = Struct(transactional_id=None, transaction_timeout_ms=2147483647,
                              producer_id=self.producer_id if bump else -1,
                              producer_epoch=self.producer_epoch if bump else -1)
                r = await conn.request(ApiKey.INIT_PRODUCER_ID, body, version=v)
                if r.error_code:
                    err = for_code(r.error_code)
                    if not err.retriable and r.error_code != _INVALID_PRODUCER_EPOCH:
                        raise err
                    raise KafkaConnectionError(str(err))
                self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch
                break
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                if self._closing:
                    raise ClientClosedError("producer closed") from e
                log.debug("InitProducerId failed (%s); retrying", e)
                await asyncio.sleep(self.retry_backoff.delay(attempt))
                attempt += 1
            except UnsupportedFeatureError:
                log.warning("broker does not support InitProducerId: idempotence disabled")
                self.idempotent = False
                self.producer_id = self.producer_epoch = -1
                break
            except KafkaError as e:
                log.error("InitProducerId failed: %s; failing buffered records", e)
                self._fail_all(e)
                return
        # New epoch (or a first id): only the partitions whose chain broke are renumbered from 0 now (Kafka's
        # bumpIdempotentProducerEpoch); the others keep their chains until nothing of the old epoch is outstanding.
        self._bump_needed = False
        for tp in self._partitions_to_rewrite:
            self._start_sequences_at_beginning(tp)
        self._partitions_to_rewrite.clear()
        log.debug("producer id %d epoch %d", self.producer_id, self.producer_epoch)


_TRANSACTIONAL_BIT = 0x10  # attributes bit 4 (low byte of the int16 at offset 21)


def _mark_transactional(data: Any) -> bytearray:
    """A copy of one record batch with its transactional attribute set (and its CRC, which covers the
    attributes onwards, recomputed)."""
    buf = bytearray(data)
    buf[22] |= _TRANSACTIONAL_BIT
    buf[17:21] = _core.crc32c(memoryview(buf)[21:]).to_bytes(4, "big")
    return buf


def normalize_headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    """Headers as ``[(str, bytes | None), ...]`` from a list of pairs or a mapping; str values are UTF-8."""
    if not headers:
        return None
    items: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for k, v in items:
        if isinstance(k, bytes):
            k = k.decode("utf-8")
        if isinstance(v, str):
            v = v.encode("utf-8")
        out.append((k, v))
    return out


def to_bytes(x: Any, what: str) -> Optional[bytes]:
    if x is None or type(x) is bytes:
        return x  # type: ignore[no-any-return]
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"{what} must be bytes, str or None, not {type(x).__name__}")

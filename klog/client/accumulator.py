"""The producer's record accumulator: per-partition queues of open batches, bounded by ``buffer.memory``.

:class:`RecordAccumulator` is fed from any thread (the blocking :class:`klog.Producer` appends from the user's
thread); :class:`~klog.client.producer.ProducerCore`'s sender drains it on the event loop. A
:class:`ProducerBatch` is one partition's records on their way to the broker, from the first append to the
acknowledgement.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from klog._native import _core

from .batch_buffers import BatchBufferPool, LazyBatch
from .errors import ClientClosedError, KafkaError
from .futures import BatchOutcome, RecordFuture
from .types import RecordMetadata

__all__ = ["RecordAccumulator", "ProducerBatch", "BufferFull", "BATCH_HEADER", "RECORD_OVERHEAD"]

_monotonic = time.monotonic
_RecordAppender = _core.RecordAppender
_RecordFuture = RecordFuture
_new_future = tuple.__new__
_monotonic = time.monotonic
#: time.sleep(0) releases the GIL and takes it back: a thread waiting for it runs first.
_yield_gil = functools.partial(time.sleep, 0)
#: The blocking producer's user thread hands the GIL to the loop thread after opening this many batch bytes.
_YIELD_EVERY_BYTES = 512 * 1024

#: RecordAccumulator.space_wanted when no thread waits for buffer.memory.
_NOBODY_WAITS = 1 << 62

#: Per-record overhead estimate (record framing varints) used for batch sizing and buffer accounting.
RECORD_OVERHEAD = 16
#: Record batch v2 header size.
BATCH_HEADER = 61


class ProducerBatch:
    """Records bound for one partition, sent together as one record batch."""

    __slots__ = ("topic", "partition", "appender", "raw", "raw_for", "count", "size", "created", "outcome",
                 "futures", "attempts", "retry_at", "base_sequence", "producer_id", "producer_epoch", "encoded",
                 "encoded_for", "drained", "on_done", "sent_node", "sent_on", "sticky")

    def __init__(self, topic: str, partition: int, outcome: BatchOutcome, now: float) -> None:
        self.topic = topic
        self.partition = partition
        #: The natively encoded open batch records are appended to (per-record sends); None for send_batch.
        #: Kept after encoding: it holds the records' timestamps for their metadata.
        self.appender: _RecordAppender | None = None
        #: The encoded record batch (send_batch, or a per-record batch once encoded) with the producer fields
        #: ``raw_for`` written in it, or a LazyBatch encoded when drained.
        self.raw: bytes | bytearray | memoryview | LazyBatch | None = None
        self.raw_for: tuple[int, int, int] = (-1, -1, -1)
        self.count = 0
        #: Bytes of buffer.memory this batch holds: its reservation while open, its encoded size once drained.
        self.size = BATCH_HEADER
        self.created = now
        self.outcome = outcome
        #: asyncio futures of the records (asyncio producer), None for RecordFuture batches.
        self.futures: list[asyncio.Future[RecordMetadata]] | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.base_sequence = -1
        #: The producer id and epoch its sequence numbers were given under (an idempotent producer's): a retry
        #: goes out with the same three, never renumbered under a later epoch (the broker would append it again).
        self.producer_id = -1
        self.producer_epoch = -1
        self.encoded: bytes | bytearray | memoryview | None = None
        self.encoded_for: tuple[int, int, int] | None = None
        #: Set once the batch left the accumulator for the first time: it never takes more records, even when
        #: a retry puts it back in the queue (its sequence numbers and encoding are fixed).
        self.drained = False
        #: The keyless sticky-partition state this batch was opened under (None for keyed batches).
        self.sticky: list[Any] | None = None
        #: Where the current attempt went: broker node and (once connected) the connection.
        self.sent_node = -1
        self.sent_on: Any = None
        #: Extra completion hook (send_batch aggregates several batches into one future).
        self.on_done: Callable[[ProducerBatch, BaseException | None], None] | None = None

    def filled(self) -> int:
        """Bytes of records in the batch so far (encoded, uncompressed, header included)."""
        a = self.appender
        if a is not None and not self.drained:
            return a.size  # type: ignore[no-any-return]
        return self.size

    def encode(self, producer_id: int, producer_epoch: int, compression: str, level: int | None,
               buffers: BatchBufferPool | None = None) -> bytes | bytearray | memoryview:
        """The batch with these producer fields; a per-record batch is finished into a free buffer of
        ``buffers`` when it has one."""
        key = (producer_id, producer_epoch, self.base_sequence)
        if self.encoded is not None and self.encoded_for == key:
            return self.encoded
        if isinstance(self.raw, LazyBatch):
            data: bytes | bytearray | memoryview = self.raw.encode(producer_id, producer_epoch, self.base_sequence)
        elif self.raw is None and self.appender is not None:
            # First encoding of a per-record batch: the header (and the codec) is all that is left to do.
            with buffers.lent() if buffers is not None else contextlib.nullcontext(None) as free:
                data = self.raw = self.appender.finish(producer_id, producer_epoch, self.base_sequence, free)
            self.raw_for = key
        elif self.raw is not None and key == self.raw_for:
            data = self.raw  # encoded with these producer fields already: nothing to patch
        elif self.raw is not None:
            # New producer fields (an epoch bump before a retry): into a copy, an earlier attempt may hold raw.
            data = _core.with_producer_fields(self.raw, producer_id, producer_epoch, self.base_sequence)
        else:
            raise KafkaError(f"batch for {self.topic}-{self.partition} has no records to encode")
        self.encoded, self.encoded_for = data, key
        return data


class RecordAccumulator:
    """Per-partition queues of open batches, bounded by ``buffer.memory``. Thread-safe.

    Each open batch of per-record sends is a native :class:`RecordAppender`: a record is encoded into it by one
    call. ``fast`` (keyless records, per topic) and ``fast_keyed`` (per topic and partition) point at the open
    appenders so that ``Producer.send`` can append without taking the lock: an append and the sender's seal are
    each one native call made holding the GIL, so they never interleave, and a sealed or full appender refuses
    (the caller then takes the general path, :meth:`append`).

    Memory: opening a batch reserves its capacity from buffer.memory (as Java's producer allocates batch.size);
    the unused part is given back when the batch is drained, the rest when it completes.
    """

    def __init__(self, *, batch_size: int, buffer_memory: int, max_request_size: int, linger_ms: int,
                 asyncio_futures: bool, wake: Callable[[], None], compression: str = "none",
                 compression_level: int | None = None) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.linger = linger_ms / 1000.0
        self.asyncio_futures = asyncio_futures
        self.compression = compression
        self.compression_level = compression_level
        self._wake = wake
        self.lock = threading.Lock()
        self.space = threading.Condition(self.lock)
        self.queues: dict[tuple[str, int], collections.deque[ProducerBatch]] = {}
        self.used = 0
        #: Keyless records: topic -> [sticky partition, bytes of its earlier batches since the switch, its
        #: current batch]. Guarded by ``lock``.
        self.sticky: dict[str, list[Any]] = {}
        #: Lock-free send() fast path: the open appender of each topic's sticky partition and of each keyed
        #: partition (appender.append_future returns the record's RecordFuture).
        self.fast: dict[str, _RecordAppender] = {}
        self.fast_keyed: dict[tuple[str, int], _RecordAppender] = {}
        #: The sender sleeps without a deadline: the next append must wake it.
        self.sender_idle = True
        #: A wakeup was requested and not yet seen by the sender.
        self.wake_sent = False
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closed: BaseException | None = None
        self.space_waiters: list[asyncio.Future[None]] = []
        #: The fewest bytes a thread blocked in wait_for_space_sync waits for (_NOBODY_WAITS: none waits).
        self.space_wanted = _NOBODY_WAITS
        #: Bytes of batches opened by send() since the user thread last handed the GIL to the loop thread.
        self._since_yield = 0

    # ------------------------------------------------------------------ partitioning
    def sticky_partition(self, topic: str, partitions: Sequence[int], available: Sequence[int]) -> int:
        """Switch ``topic``'s sticky partition for keyless records (KIP-794: after batch.size bytes; with the
        lock held)."""
        s = self.sticky.get(topic)
        choices = available or partitions
        p = random.choice(choices)
        if s is not None and len(choices) > 1:
            while p == s[0]:
                p = random.choice(choices)
        self.sticky[topic] = [p, 0, None]
        self.fast.pop(topic, None)
        return p

    # ------------------------------------------------------------------ appending
    def append(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None, timestamp: int,
               headers: list[tuple[str, bytes | None]] | None, size: int,
               partitions: tuple[list[int], list[int]], loop: asyncio.AbstractEventLoop | None) -> Any:
        """Add one record (``timestamp`` -1: now); returns its future. ``partition`` None picks the topic's
        sticky partition among ``partitions`` (all, with a leader). ``size`` is the record's size estimate.
        Raises BufferFull when buffer.memory cannot hold a new batch for it."""
        wake = opened = False
        reserve = 0
        with self.lock:
            if self.closed is not None:
                raise ClientClosedError("producer closed") from self.closed
            s = None
            if partition is None:
                s = self.sticky.get(topic)
                # Switch once this record would take the partition past batch.size bytes (KIP-794). Switching
                # only after the partition had batch.size bytes opened, past the full batch, a batch of what
                # was left (one record): every other Produce request carried a single record.
                if s is None or s[1] + (s[2].filled() + size if s[2] is not None else 0) > self.batch_size:
                    partition = self.sticky_partition(topic, partitions[0], partitions[1])
                    s = self.sticky[topic]
                else:
                    partition = s[0]
            tp = (topic, partition)
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = collections.deque()
            b = q[-1] if q else None
            index = -1
            if b is not None and not b.drained and b.appender is not None:
                index = b.appender.append(key, value, timestamp, headers)
            if index < 0:
                room = self.batch_size
                if s is not None:
                    prev = s[2]
                    if prev is not None:
                        s[1] += prev.filled()
                    room = max(BATCH_HEADER + RECORD_OVERHEAD, self.batch_size - s[1])
                # Reserve the batch's full room (as Java's BufferPool allocates batch.size): when buffer.memory is
                # short, wait for that much rather than open a batch of what is left, which under steady
                # back-pressure opened every other batch with one record and doubled the Produce requests.
                reserve = max(min(room, self.buffer_memory), size + BATCH_HEADER)
                if self.used + reserve > self.buffer_memory and self.used > 0:
                    raise BufferFull(reserve)
                if not q:
                    if self.sender_idle:
                        self.sender_idle = False
                        wake = not self.wake_sent
                else:
                    wake = not self.wake_sent  # the batch before this one is full: ready to send
                b = self._new_batch(topic, partition, q, reserve)
                opened = True
                appender = b.appender
                assert appender is not None
                try:
                    index = appender.append(key, value, timestamp, headers)  # a first record always fits
                except BaseException:
                    q.pop()
                    self.incomplete.discard(b)
                    self.used -= b.size
                    raise
                if s is not None:
                    s[2] = b
                    b.sticky = s
                    self.fast[topic] = appender
                else:
                    self.fast_keyed[tp] = appender
            assert b is not None
            if self.asyncio_futures:
                fut: Any = loop.create_future()  # type: ignore[union-attr]
                b.futures.append(fut)  # type: ignore[union-attr]
            else:
                fut = _new_future(_RecordFuture, (b.outcome, index))
            if wake:
                self.wake_sent = True
        if wake:
            self._wake()
        if opened and not self.asyncio_futures:
            # The blocking producer, on the user's thread, opened a batch (so the one before is ready): hand
            # the GIL to the event-loop thread, so that it sends what is ready at once. Otherwise a busy send()
            # loop keeps the GIL up to the interpreter's switch interval (5 ms) at every step the loop thread
            # takes, capping the producer near one batch per switch interval. At most once per
            # _YIELD_EVERY_BYTES: with small batches a handover per batch costs more than it gains.
            self._since_yield += reserve
            if self._since_yield >= _YIELD_EVERY_BYTES:
                self._since_yield = 0
                _yield_gil()
        return fut

    def append_raw(self, topic: str, partition: int, raw: bytes | memoryview | LazyBatch, count: int, timestamp: int,
                   on_done: Callable[[ProducerBatch, BaseException | None], None]) -> ProducerBatch:
        """Queue a pre-encoded record batch (send_batch) as its own batch. Raises BufferFull."""
        size = len(raw)
        wake = False
        with self.lock:
            if self.closed is not None:
                raise ClientClosedError("producer closed") from self.closed
            if self.used + size > self.buffer_memory and self.used > 0:
                raise BufferFull(size)
            self.used += size
            q = self.queues.get((topic, partition))
            if q is None:
                q = self.queues[(topic, partition)] = collections.deque()
            b = ProducerBatch(topic, partition, BatchOutcome(topic, partition), _monotonic())
            b.raw = raw
            b.count = count
            b.size = size
            b.on_done = on_done
            b.outcome.timestamps = None
            b.outcome.log_append_time = -1
            b.encoded_for = None
            b.created = _monotonic() - self.linger  # ready at once
            q.append(b)
            self.incomplete.add(b)
            if not self.wake_sent:
                self.wake_sent = True
                wake = True
            self.sender_idle = False
        if wake:
            self._wake()
        return b

    def _new_batch(self, topic: str, partition: int, q: collections.deque[ProducerBatch],
                   reserve: int) -> ProducerBatch:
        outcome = BatchOutcome(topic, partition)
        b = ProducerBatch(topic, partition, outcome, _monotonic())
        if self.asyncio_futures:
            b.futures = []
            b.appender = _RecordAppender(reserve - BATCH_HEADER, self.compression, self.compression_level)
        else:
            b.appender = _RecordAppender(reserve - BATCH_HEADER, self.compression, self.compression_level,
                                         _RecordFuture, outcome)
        b.size = reserve
        self.used += reserve
        q.append(b)
        self.incomplete.add(b)
        return b

    def close_batch(self, b: ProducerBatch) -> None:
        """The batch leaves the accumulator (lock held): no more appends, its record count is final and the
        unused part of its memory reservation goes back to the pool."""
        if not b.drained:
            b.drained = True
            a = b.appender
            if a is not None:
                a.seal()
                b.count = len(a)
                actual = a.size
                if actual < b.size:
                    self.used -= b.size - actual
                    b.size = actual
                    self._space_freed()

    def _space_freed(self) -> None:
        """Wake threads blocked in wait_for_space_sync once the smallest size one of them waits for fits (lock
        held): a wakeup per freed fragment would cost a thread switch and GIL handover each for nothing."""
        if self.used + self.space_wanted <= self.buffer_memory or self.used == 0:
            self.space_wanted = _NOBODY_WAITS
            self.space.notify_all()

    def release(self, batch: ProducerBatch) -> None:
        """Return a completed batch's memory to the pool (event loop)."""
        with self.lock:
            self.used -= batch.size
            self.incomplete.discard(batch)
            self._space_freed()
            waiters, self.space_waiters = self.space_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)


class BufferFull(Exception):
    """Internal: buffer.memory cannot take ``wanted`` more bytes; the caller waits for that much and retries."""

    def __init__(self, wanted: int) -> None:
        super().__init__(wanted)
        self.wanted = wanted

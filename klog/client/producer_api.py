"""The public producers: :class:`Producer` (blocking API, background event loop) and :class:`AsyncProducer`
(asyncio), both over :class:`~klog.client.producer.ProducerCore`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from klog._native import _core

from .accumulator import BufferFull, ProducerBatch
from .batch_encode import encode_value_batches
from .errors import ClientClosedError, TransactionStateError
from .loop_thread import BlockingClient, blocking, on_loop
from .producer import BatchMetadata, ProducerCore, normalize_headers, to_bytes
from .transactions import TransactionManager
from .types import PreparedTransaction, RecordMetadata

__all__ = ["Producer", "AsyncProducer", "DeliveryCallback"]

DeliveryCallback = Callable[[Any, Any], None]
"""``on_delivery(error, metadata)``: ``error`` is None on success, else the exception; ``metadata`` is the
:class:`RecordMetadata` on success, else None. Runs on the client's event loop: keep it short, and never block
on the producer inside it."""

T = TypeVar("T")
_murmur2 = _core.murmur2
_time_ns = time.time_ns
_monotonic = time.monotonic


def _config(bootstrap_servers: Any, config: dict[str, Any]) -> dict[str, Any]:
    if bootstrap_servers is not None:
        config = {**config, "bootstrap.servers": bootstrap_servers}
    return config


def _attach_delivery(fut: Any, on_delivery: DeliveryCallback) -> None:
    def done(f: Any) -> None:
        err = f.exception()
        on_delivery(err, None if err is not None else f.result())

    fut.add_done_callback(done)


class _SendBatchCollector:
    """Completes one future when all batches of a ``send_batch`` call are done."""

    def __init__(self, resolve: Callable[[list[BatchMetadata] | None, BaseException | None], None]) -> None:
        self.results: list[BatchMetadata | None] = []
        self.remaining = 0
        self.error: BaseException | None = None
        self.sealed = False
        self._resolve = resolve

    def slot(self) -> Callable[[ProducerBatch, BaseException | None], None]:
        i = len(self.results)
        self.results.append(None)
        self.remaining += 1

        def done(b: ProducerBatch, err: BaseException | None) -> None:
            if err is not None:
                self.error = self.error or err
            else:
                self.results[i] = BatchMetadata(b.topic, b.partition, b.outcome.base_offset, b.count,
                                                b.outcome.log_append_time)
            self.remaining -= 1
            self._maybe_resolve()

        return done

    def seal(self) -> None:
        self.sealed = True
        self._maybe_resolve()

    def _maybe_resolve(self) -> None:
        if self.sealed and self.remaining == 0:
            if self.error is not None:
                self._resolve(None, self.error)
            else:
                self._resolve([r for r in self.results if r is not None], None)


class _Space(NamedTuple):
    """Wait until ``wanted`` bytes fit in buffer.memory, or raise KafkaTimeoutError at ``deadline``."""

    wanted: int
    deadline: float


#: What the sending steps below yield: a core coroutine to run (its result is sent back), or _Space to wait for.
_SendSteps = Generator["Coroutine[Any, Any, Any] | _Space", Any, T]


def _send_batch(core: ProducerCore, topic: str, values: Any, keys: Any, headers: Any, partition: int | None,
                timestamp: int | None, result: Any, record_headers: Any = None) -> _SendSteps[None]:
    """The body of ``send_batch`` for both APIs: encode the records into batches and queue each one; ``result``
    (a concurrent or asyncio future) gets the batches' metadata once every one of them completed."""
    parts = core.partitions.get(topic)
    if parts is None:
        parts = yield core.wait_for_partitions(topic, core.max_block)
    if partition is not None and not 0 <= partition < len(parts[0]):
        core.check_partition(topic, partition, parts)

    def resolve(value: list[BatchMetadata] | None, err: BaseException | None) -> None:
        if result.done():
            return
        if err is not None:
            result.set_exception(err)
        else:
            result.set_result(value)

    collector = _SendBatchCollector(resolve)
    ts = _time_ns() // 1_000_000 if timestamp is None else int(timestamp)
    acc = core.accumulator
    deadline = _monotonic() + core.max_block
    for part, raw, count in encode_value_batches(
            core, topic, values, keys, normalize_headers(headers), partition, parts, ts, record_headers):
        on_done = collector.slot()
        while True:
            try:
                acc.append_raw(topic, part, raw, count, ts, on_done)
                break
            except BufferFull as full:
                yield _Space(full.wanted, deadline)
    collector.seal()


class AsyncProducer:
    """The asyncio producer (``klog.aio.Producer``).

    ::

        async with klog.aio.Producer(bootstrap_servers="host:9092") as p:
            fut = await p.send("topic", b"value")   # queued; fut resolves when acknowledged
            md = await fut
            md = await p.send_and_wait("topic", b"value")

    Construct inside a running loop, then ``await start()`` (or use ``async with``).
    """

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._config = _config(bootstrap_servers, config)
        self._core: ProducerCore | None = None
        self._closed = False

    #: Records complete asyncio futures; the blocking Producer built on this one sets False (RecordFutures).
    _asyncio_futures = True

    async def start(self) -> None:
        """Connect and load cluster metadata."""
        if self._core is None:
            core = ProducerCore(self._config, asyncio_futures=self._asyncio_futures)
            try:
                await core.start()
            except BaseException:
                await core.cluster.close()
                raise
            self._core = core

    @property
    def _c(self) -> ProducerCore:
        if self._core is None:
            raise ClientClosedError("producer not started: await producer.start() or use 'async with'")
        return self._core

    async def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                   partition: int | None = None, timestamp: int | None = None,
                   on_delivery: DeliveryCallback | None = None) -> asyncio.Future[RecordMetadata]:
        """Queue one record (waiting for buffer space or metadata if needed); returns its future."""
        # Written out here and in Producer.send rather than shared: driving shared steps (a generator, its
        # StopIteration, a driver) costs about 1 us per call, a third or more of this path's CPU per record.
        core = self._c
        if value is not None and type(value) is not bytes:
            value = to_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = to_bytes(key, "key")
        if headers:
            headers = normalize_headers(headers)
        parts = core.partitions.get(topic)
        if parts is None:
            parts = await core.wait_for_partitions(topic, core.max_block)
        if partition is None:
            if key is not None and not core.ignore_keys and not core.random_partitioner:
                partition = (_murmur2(key) & 0x7FFFFFFF) % len(parts[0])
        elif not 0 <= partition < len(parts[0]):
            core.check_partition(topic, partition, parts)
        size = core.record_size(key, value, headers)
        ts = -1 if timestamp is None else int(timestamp)
        deadline = _monotonic() + core.max_block
        while True:
            try:
                fut = core.accumulator.append(topic, partition, key, value, ts, headers or None, size, parts,
                                              core.loop)
                break
            except BufferFull as full:
                await core.wait_for_space(full.wanted, deadline)
        if on_delivery is not None:
            _attach_delivery(fut, on_delivery)
        return fut  # type: ignore[no-any-return]

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                            partition: int | None = None, timestamp: int | None = None) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        fut = await self.send(topic, value, key, headers, partition, timestamp)
        return await fut

    async def send_batch(self, topic: str, values: Any, keys: Any = None, headers: Any = None,
                         partition: int | None = None, timestamp: int | None = None, *, record_headers: Any = None
                         ) -> asyncio.Future[list[BatchMetadata]]:
        """Queue many records, encoded natively (see :meth:`Producer.send_batch`); returns a future of the
        written batches' :class:`BatchMetadata`."""
        core = self._c
        result: asyncio.Future[list[BatchMetadata]] = core.loop.create_future()
        await self._drive(_send_batch(core, topic, values, keys, headers, partition, timestamp, result,
                                      record_headers))
        return result

    async def _drive(self, steps: _SendSteps[T]) -> T:
        """Run the sending steps, awaiting buffer space and metadata."""
        try:
            step = next(steps)
            while True:
                if type(step) is _Space:
                    await self._c.wait_for_space(step.wanted, step.deadline)
                    step = steps.send(None)
                else:
                    step = steps.send(await step)  # type: ignore[misc]
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]

    async def flush(self, timeout: float | None = None) -> None:
        """Send all buffered records and wait until each is acknowledged or failed."""
        await self._c.flush(timeout)

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (fetching its metadata if needed)."""
        core = self._c
        return list((await core.wait_for_partitions(topic, core.max_block))[0])

    # -- transactions (``transactional.id``), with confluent-kafka's semantics
    @property
    def _txn(self) -> TransactionManager:
        txn = self._c.txn
        if txn is None:
            raise TransactionStateError("transactional calls need a producer with transactional.id set")
        return txn

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator (once, before the first transaction):
        completes or aborts what an earlier producer with this id left open and fences that producer.
        ``timeout`` in seconds (default max.block.ms); a :class:`KafkaTimeoutError` may be retried."""
        await self._txn.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: records sent from now until commit/abort belong to it."""
        self._txn.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                          timeout: float | None = None) -> None:
        """Commit a consumer group's offsets (``{TopicPartition: offset or OffsetAndMetadata}``, the next offset
        to read) as part of the transaction: they take effect only if it commits. ``group_metadata`` is the
        consumer's ``consumer_group_metadata()``."""
        await self._txn.send_offsets_to_transaction(offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit the transaction. Raises :class:`TransactionAbortableError` when a record or an
        offset commit of it failed (abort it then), :class:`TransactionFatalError` when fenced."""
        await self._txn.commit_transaction(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: queued records fail, records already written are never visible to
        read_committed consumers, offsets sent with it are not committed."""
        await self._txn.abort_transaction(timeout)

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Flush and hand the open transaction over instead of committing it (the first phase of a two-phase
        commit, which Kafka's producer API lacks): returns its :class:`PreparedTransaction` (transactional id,
        producer id, epoch) for another process to end with :meth:`commit_prepared_transaction` or
        :meth:`abort_prepared_transaction`. Only :meth:`close` is left to do on this producer; closing leaves the
        transaction open. Unended, the coordinator aborts it after ``transaction.timeout.ms``, and a new producer
        with the same ``transactional.id`` aborts it in ``init_transactions``."""
        return await self._txn.prepare_transaction(timeout)

    async def commit_prepared_transaction(self, prepared: PreparedTransaction, timeout: float | None = None) -> None:
        """Commit a transaction another producer prepared (:meth:`prepare_transaction`), by its transactional id,
        producer id and epoch; any producer can do it, transactional or not. Committing it again succeeds; raises
        :class:`TransactionFatalError` when the coordinator aborted it meanwhile (timeout, fenced)."""
        await self._end_prepared(prepared, True, timeout)

    async def abort_prepared_transaction(self, prepared: PreparedTransaction, timeout: float | None = None) -> None:
        """Abort a transaction another producer prepared (see :meth:`commit_prepared_transaction`)."""
        await self._end_prepared(prepared, False, timeout)

    async def _end_prepared(self, prepared: PreparedTransaction, commit: bool, timeout: float | None) -> None:
        core = self._c
        prepared = PreparedTransaction(*prepared)
        await TransactionManager(core, prepared.transactional_id, 0).end_prepared(prepared, commit, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds) and close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._core is not None:
            await self._core.close(timeout)

    stop = close

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Producer(BlockingClient):
    """A Kafka producer with a blocking API.

    ``Producer(bootstrap_servers="host:9092", linger_ms=5, compression_type="zstd", ...)`` takes Kafka's producer
    configs (dotted or with underscores). The protocol work runs on a private event-loop thread; :meth:`send`
    only appends to an in-memory batch and returns a :class:`concurrent.futures.Future`.

    Use as a context manager or call :meth:`close` to flush and release the connection threads.
    """

    _kind = "producer"

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._aio = AsyncProducer(bootstrap_servers, **config)
        self._aio._asyncio_futures = False  # records complete RecordFutures, which any thread may wait on
        self._start_thread("klog-producer", self._aio.start())
        self._core: ProducerCore = self._aio._c
        self._acc = self._core.accumulator
        self._fast = self._acc.fast
        self._fast_keyed = self._acc.fast_keyed

    @property
    def config(self) -> dict[str, Any]:
        """The effective configuration (Kafka names)."""
        return dict(self._core.config)

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
             partition: int | None = None, timestamp: int | None = None,
             on_delivery: DeliveryCallback | None = None) -> concurrent.futures.Future[RecordMetadata]:
        """Queue one record; returns a future resolving to its :class:`RecordMetadata`.

        ``value``/``key`` are bytes (str is encoded as UTF-8) or None; ``headers`` a list of ``(str, bytes)`` or a
        dict; ``partition`` overrides the partitioner (murmur2 of the key, else sticky); ``timestamp`` is in
        milliseconds since the epoch (default: now). Blocks up to ``max.block.ms`` while the buffer is full or
        the topic's metadata is unknown.
        """
        if headers is None and partition is None and timestamp is None and on_delivery is None and \
                type(value) is bytes:
            # Fast path: one native append to the partition's open batch, no lock (see RecordAccumulator).
            if key is None:
                appender = self._fast.get(topic)
                if appender is not None:
                    fut = appender.append_future(None, value)
                    if fut is not None:
                        return fut  # type: ignore[no-any-return]
            elif type(key) is bytes:
                core = self._core
                parts = core.partitions.get(topic)
                if parts is not None and not core.ignore_keys and not core.random_partitioner:
                    appender = self._fast_keyed.get((topic, (_murmur2(key) & 0x7FFFFFFF) % len(parts[0])))
                    if appender is not None:
                        fut = appender.append_future(key, value)
                        if fut is not None:
                            return fut  # type: ignore[no-any-return]
        core = self._core
        if value is not None and type(value) is not bytes:
            value = to_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = to_bytes(key, "key")
        if headers:
            headers = normalize_headers(headers)
        else:
            headers = None
        parts = core.partitions.get(topic)
        if parts is None:
            parts = self._run(core.wait_for_partitions(topic, core.max_block))
        if partition is None:
            if key is not None and not core.ignore_keys and not core.random_partitioner:
                partition = (_murmur2(key) & 0x7FFFFFFF) % len(parts[0])
        elif not 0 <= partition < len(parts[0]):
            core.check_partition(topic, partition, parts)
        size = core.record_size(key, value, headers)
        ts = -1 if timestamp is None else int(timestamp)
        acc = self._acc
        try:
            fut = acc.append(topic, partition, key, value, ts, headers, size, parts, None)
        except BufferFull as full:
            deadline = _monotonic() + core.max_block
            while True:
                core.wait_for_space_sync(full.wanted, deadline)
                try:
                    fut = acc.append(topic, partition, key, value, ts, headers, size, parts, None)
                    break
                except BufferFull as again:
                    full = again
        if on_delivery is not None:
            _attach_delivery(fut, on_delivery)
        return fut  # type: ignore[no-any-return]

    def send_batch(self, topic: str, values: Any, keys: Any = None, headers: Any = None,
                   partition: int | None = None, timestamp: int | None = None, *, record_headers: Any = None
                   ) -> concurrent.futures.Future[list[BatchMetadata]]:
        """Queue many records at once, encoded natively into record batches.

        ``values`` (and optional ``keys``) are lists of bytes, numpy arrays (fixed-width ``S``/``uint8`` rows)
        or Arrow binary/string arrays; ``headers`` one header list applied to every record, or ``record_headers``
        one per record (an Arrow ``list<struct<key: string, value: binary>>`` column, Spark's Kafka layout, or a
        list of header lists; null = none). Keyed records go
        to their murmur2 partitions, keyless ones to one sticky partition (or ``partition``). Returns a future
        resolving to one :class:`BatchMetadata` per written batch.
        """
        result: concurrent.futures.Future[list[BatchMetadata]] = concurrent.futures.Future()
        self._drive(_send_batch(self._core, topic, values, keys, headers, partition, timestamp, result,
                                record_headers))
        return result

    def _drive(self, steps: _SendSteps[T]) -> T:
        """Run the sending steps on the caller's thread, blocking for buffer space and metadata."""
        try:
            step = next(steps)
            while True:
                if type(step) is _Space:
                    self._core.wait_for_space_sync(step.wanted, step.deadline)
                    step = steps.send(None)
                else:
                    step = steps.send(self._run(step))  # type: ignore[arg-type]
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]

    def flush(self, timeout: float | None = None) -> None:
        """Send all buffered records and wait until each is acknowledged or failed (nothing to do once
        closed)."""
        if not self._closed:
            self._run(self._aio.flush(timeout))

    partitions_for = blocking(AsyncProducer.partitions_for)
    init_transactions = blocking(AsyncProducer.init_transactions)
    begin_transaction = on_loop(AsyncProducer.begin_transaction)
    send_offsets_to_transaction = blocking(AsyncProducer.send_offsets_to_transaction)
    commit_transaction = blocking(AsyncProducer.commit_transaction)
    abort_transaction = blocking(AsyncProducer.abort_transaction)
    prepare_transaction = blocking(AsyncProducer.prepare_transaction)
    commit_prepared_transaction = blocking(AsyncProducer.commit_prepared_transaction)
    abort_prepared_transaction = blocking(AsyncProducer.abort_prepared_transaction)

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), then close connections and the loop thread. Idempotent."""
        if not self._closed:
            self._close_with(self._aio.close(timeout))

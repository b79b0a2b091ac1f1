"""The public consumers: :class:`Consumer` (blocking, background event loop) and :class:`AsyncConsumer`
(asyncio), both over :class:`~klog.client.consumer.ConsumerCore`.

Rebalance callbacks (``on_assign``, ``on_revoke``, ``on_lost``; each called as ``fn(consumer, partitions)``) run
inside ``poll``/``poll_batch`` on the caller's thread (or task), between the protocol steps, as in Kafka's Java
client: ``on_revoke`` before partitions are given up (commit there if you commit manually), ``on_assign`` after
the new assignment is in place (``seek`` there to choose where to start), ``on_lost`` when the group took the
partitions away without a clean handover (defaults to ``on_revoke``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import re
import time
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from .consumer import ConsumerCore
from .errors import ClientClosedError, KafkaError
from .list_offsets import offsets_for_times_result
from .loop_thread import BlockingClient, blocking, direct, on_loop
from .types import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = ["Consumer", "AsyncConsumer", "RebalanceCallback"]

RebalanceCallback = Callable[[Any, list[TopicPartition]], Any]

log = logging.getLogger("klog.client.consumer")
_monotonic = time.monotonic
#: Upper bound of one JoinGroup/SyncGroup round (the coordinator holds JoinGroup up to the rebalance timeout).
_JOIN_TIMEOUT_S = 600.0
#: Longest a blocking poll sleeps before re-checking group state (rebalances, heartbeat failures).
_POLL_SLICE_S = 0.5
T = TypeVar("T")


def _topics_arg(topics: tuple[Any, ...]) -> Any:
    if len(topics) == 1 and (isinstance(topics[0], (list, tuple, set, frozenset, re.Pattern))):
        return topics[0]
    return list(topics)


def _tps(partitions: Iterable[TopicPartition | tuple[str, int]]) -> list[TopicPartition]:
    return [TopicPartition(*tp) for tp in partitions]


class _Callbacks:
    def __init__(self, on_assign: RebalanceCallback | None, on_revoke: RebalanceCallback | None,
                 on_lost: RebalanceCallback | None) -> None:
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.on_lost = on_lost

    def update(self, on_assign: RebalanceCallback | None, on_revoke: RebalanceCallback | None,
               on_lost: RebalanceCallback | None) -> None:
        if on_assign is not None:
            self.on_assign = on_assign
        if on_revoke is not None:
            self.on_revoke = on_revoke
        if on_lost is not None:
            self.on_lost = on_lost


# ---------------------------------------------------------------------- the poll loop, written once
# The poll loop (rebalance, positions, waiting for data) is written once, as generators on AsyncConsumer that
# yield the steps below and take back each step's result: AsyncConsumer._drive awaits them on the caller's
# event loop; Consumer._drive performs them on the caller's thread, running the core's coroutines on the loop
# thread (so rebalance callbacks run on the thread that called poll, as in Kafka's Java client).


class _Run(NamedTuple):
    """Run a coroutine of the core; the result is its result."""

    coro: Coroutine[Any, Any, Any]


class _OnLoop(NamedTuple):
    """Call a core method that changes state the event loop owns."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


class _Invoke(NamedTuple):
    """Call a rebalance callback (if set) with the consumer and the partitions."""

    fn: RebalanceCallback | None
    partitions: list[TopicPartition]


class _StartJoin(NamedTuple):
    """Start a JoinGroup/SyncGroup round in the background; the result is its future."""

    coro: Coroutine[Any, Any, Any]


class _WaitJoin(NamedTuple):
    """Wait up to ``timeout`` seconds (None: no limit) for the join round's future; the result: is it done?"""

    join: Any
    timeout: float | None


class _WaitData(NamedTuple):
    """Wait up to ``timeout`` seconds for fetched data."""

    timeout: float


_Steps = Generator[Any, Any, T]


def _advance(steps: _Steps[T], result: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Resume ``steps`` with the last step's result (or raise its error there): ``(True, return value)`` once
    they finished, else ``(False, next step)``."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(result))
    except StopIteration as finished:
        return True, finished.value


def _poll_slice(deadline: float | None) -> float:
    """How long a poll waits for data before it looks at the group again (<= 0: its timeout is over)."""
    return _POLL_SLICE_S if deadline is None else min(_POLL_SLICE_S, deadline - _monotonic())


def _empty_batch() -> Any:
    import pyarrow as pa

    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    schema = pa.schema([("topic", pa.dictionary(pa.int32(), pa.string())), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")),
                        ("key", pa.binary()), ("value", pa.binary()), ("headers", header_type)])
    return pa.RecordBatch.from_pylist([], schema=schema)


class AsyncConsumer:
    """The asyncio consumer (``klog.aio.Consumer``): the same API as :class:`Consumer` with coroutines.

    ::

        async with klog.aio.Consumer("topic", bootstrap_servers=..., group_id="g") as c:
            async for record in c:
                ...
            batch = await c.poll_batch(timeout=1.0)
    """

    def __init__(self, *topics: Any, bootstrap_servers: str | Sequence[str] | None = None,
                 group_id: str | None = None, auto_offset_reset: str = "latest",
                 on_assign: RebalanceCallback | None = None, on_revoke: RebalanceCallback | None = None,
                 on_lost: RebalanceCallback | None = None, **config: Any) -> None:
        cfg = dict(config)
        if bootstrap_servers is not None:
            cfg["bootstrap.servers"] = bootstrap_servers
        cfg["group.id"] = group_id
        cfg["auto.offset.reset"] = auto_offset_reset
        self._cfg = cfg
        self._topics = topics
        self._callbacks = _Callbacks(on_assign, on_revoke, on_lost)
        self._core_: ConsumerCore | None = None
        self._closed = False
        #: The JoinGroup/SyncGroup round in progress: an asyncio task, or a concurrent future when the blocking
        #: Consumer drives the poll loop.
        self._join: Any = None

    async def start(self) -> None:
        if self._core_ is None:
            core = ConsumerCore(self._cfg)
            try:
                await core.start()
            except BaseException:
                await core.cluster.close()
                raise
            self._core_ = core
            if self._topics:
                self.subscribe(_topics_arg(self._topics))

    @property
    def _core(self) -> ConsumerCore:
        if self._core_ is None:
            raise ClientClosedError("consumer not started: await consumer.start() or use 'async with'")
        if self._closed:
            raise ClientClosedError("consumer closed")
        return self._core_

    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str], *, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None, on_lost: RebalanceCallback | None = None) -> None:
        """Subscribe to a list of topics or a regex (``re.Pattern`` or a string starting with ``^``)."""
        self._callbacks.update(on_assign, on_revoke, on_lost)
        self._core.subscribe(topics)

    def unsubscribe(self) -> None:
        self._core.unsubscribe()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group membership)."""
        self._core.assign(_tps(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._core.assigned()

    def subscription(self) -> set[str]:
        return self._core.subscription()

    # ------------------------------------------------------------------ the poll loop (see _advance)
    def _poll(self, timeout: float | None, max_records: int | None) -> _Steps[list[ConsumerRecord]]:
        core = self._core
        limit = max_records or core.max_poll_records
        deadline = None if timeout is None else _monotonic() + timeout
        while True:
            yield from self._prepare(deadline)
            records = core.drain_records(limit)
            if records:
                return records
            remaining = _poll_slice(deadline)
            if remaining <= 0:
                return []
            yield _WaitData(remaining)

    def _poll_batch(self, timeout: float | None, max_records: int | None) -> _Steps[Any]:
        core = self._core
        deadline = None if timeout is None else _monotonic() + timeout
        while True:
            yield from self._prepare(deadline)
            batch = core.drain_arrow(max_records)
            if batch is not None:
                return batch
            remaining = _poll_slice(deadline)
            if remaining <= 0:
                return _empty_batch()
            yield _WaitData(remaining)

    def _prepare(self, deadline: float | None) -> _Steps[None]:
        core = self._core
        core._last_poll = _monotonic()
        core.raise_partition_errors()
        g = core.group
        if g is not None:
            g.raise_error()   # a fatal heartbeat error (Java's ErrorEvent): before the member joins again
        if g is not None and not core.manual_assignment and (self._join is not None or g.needs_join()):
            yield from self._rebalance(deadline)
        if core.needs_positions():
            yield _Run(core.update_positions(None if deadline is None else max(0.1, deadline - _monotonic())))
        core.maybe_auto_commit()

    def _rebalance(self, deadline: float | None) -> _Steps[None]:
        """Advance a rebalance: callbacks run where poll runs, between the protocol steps; JoinGroup/SyncGroup
        run in the background, and a poll whose timeout ends first returns while the join continues (as Kafka's
        Java client)."""
        core = self._core
        g = core.group
        while True:
            if self._join is None:
                if not g.needs_join() or core.manual_assignment:
                    return
                step = yield _Run(g.before_join())
                if step.lost:
                    yield _Invoke(self._callbacks.on_lost or self._callbacks.on_revoke, step.lost)
                    yield _OnLoop(core.remove_partitions, (step.lost,))
                if step.revoked:
                    yield from self._revoke(step.revoked)
                self._join = yield _StartJoin(g.join(_JOIN_TIMEOUT_S))
            remaining = None if deadline is None else max(0.0, deadline - _monotonic())
            if not (yield _WaitJoin(self._join, remaining)):
                return  # still joining; the next poll picks it up
            join, self._join = self._join, None
            step = join.result()
            if step.revoked:
                yield from self._revoke(step.revoked)
            if step.assigned:
                yield _OnLoop(core.add_partitions, (step.assigned,))
            if step.joined:
                yield _Invoke(self._callbacks.on_assign, step.assigned)
            yield _OnLoop(g.reconciled, (step,))

    def _revoke(self, revoked: list[TopicPartition]) -> _Steps[None]:
        core = self._core
        if core.config["enable.auto.commit"]:
            offsets = {tp: om for tp, om in core.consumed_offsets().items() if tp in set(revoked)}
            try:
                yield _Run(core.commit(offsets))
            except KafkaError as e:  # the rebalance proceeds; the new owner starts from the last commit
                log.warning("commit before revoking partitions failed: %s", e)
        yield _Invoke(self._callbacks.on_revoke, revoked)
        yield _OnLoop(core.remove_partitions, (revoked,))

    async def _drive(self, steps: _Steps[T]) -> T:
        finished, step = _advance(steps, None, None)
        while not finished:
            try:
                result, error = await self._perform(step), None
            except BaseException as e:  # raised in the steps, where the step was yielded
                result, error = None, e
            finished, step = _advance(steps, result, error)
        return step  # type: ignore[no-any-return]

    async def _perform(self, step: Any) -> Any:
        kind = type(step)
        if kind is _Run:
            return await step.coro
        if kind is _OnLoop:
            return step.fn(*step.args)
        if kind is _Invoke:
            if step.fn is not None:
                r = step.fn(self, list(step.partitions))
                if inspect.isawaitable(r):
                    await r
            return None
        if kind is _StartJoin:
            return self._core.loop.create_task(step.coro)
        if kind is _WaitJoin:
            done, _ = await asyncio.wait([step.join], timeout=step.timeout)
            return bool(done)
        assert kind is _WaitData
        await self._core.wait_for_data(step.timeout)
        return None

    async def poll(self, timeout: float | None = None, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions (see :meth:`Consumer.poll`)."""
        return await self._drive(self._poll(timeout, max_records))

    getmany = poll

    async def poll_batch(self, timeout: float | None = None, max_records: int | None = None) -> Any:
        """One ``pyarrow.RecordBatch`` of fetched records (see :meth:`Consumer.poll_batch`)."""
        return await self._drive(self._poll_batch(timeout, max_records))

    async def getone(self) -> ConsumerRecord:
        records = await self.poll(timeout=None, max_records=1)
        return records[0]

    def __aiter__(self) -> AsyncConsumer:
        self._buffer: list[ConsumerRecord] = []
        return self

    async def __anext__(self) -> ConsumerRecord:
        buf = getattr(self, "_buffer", None)
        if buf is None:
            buf = self._buffer = []
        while not buf:
            if self._closed:
                raise StopAsyncIteration
            buf.extend(await self.poll(timeout=None))
        return buf.pop(0)

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Consume ``partition`` from ``offset`` at the next poll."""
        self._core.seek(TopicPartition(*partition), offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        self._core.request_reset(_tps(partitions) if partitions is not None else list(self._core.assigned()),
                                 "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        self._core.request_reset(_tps(partitions) if partitions is not None else list(self._core.assigned()),
                                 "latest")

    async def position(self, partition: TopicPartition | tuple[str, int], timeout: float | None = None) -> int:
        """Offset of the next record this consumer returns for ``partition``."""
        tp = TopicPartition(*partition)
        st = self._core._state(tp)
        if st.position is None or st.reset is not None:
            await self._core.update_positions(timeout)
        pos = self._core._state(tp).position
        assert pos is not None
        return pos

    async def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        tps = _tps(partitions)
        found = await self._core.fetch_committed(tps, timeout=timeout)
        return {tp: found.get(tp) for tp in tps}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition | tuple[str, int], int],
                                timeout: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the given one (ms), or None."""
        query = {TopicPartition(*tp): int(ts) for tp, ts in timestamps.items()}
        for ts in query.values():
            if ts < 0:
                raise ValueError(f"timestamps must be >= 0, not {ts}")
        found = await self._core.list_offsets(query, timeout=timeout)
        return offsets_for_times_result(found, query)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                                timeout: float | None = None) -> dict[TopicPartition, int]:
        tps = _tps(partitions)
        found = await self._core.list_offsets({tp: -2 for tp in tps}, timeout=timeout)
        return {tp: found[tp][0] for tp in tps if tp in found}

    async def end_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        tps = _tps(partitions)
        found = await self._core.list_offsets({tp: -1 for tp in tps}, timeout=timeout)
        return {tp: found[tp][0] for tp in tps if tp in found}

    def pause(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._core.pause(_tps(partitions))

    def resume(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._core.resume(_tps(partitions))

    def paused(self) -> set[TopicPartition]:
        return self._core.paused()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group identity (group id, generation or member epoch, member id, instance id) for a
        transactional producer's ``send_offsets_to_transaction``."""
        core = self._core
        group_id = core.config["group.id"]
        if not group_id:
            from .errors import IllegalStateError

            raise IllegalStateError("consumer_group_metadata() needs a consumer with group.id")
        if core.group is None:
            return ConsumerGroupMetadata(group_id, -1, "", core.config["group.instance.id"])
        generation, member_id, instance_id = core.group.commit_identity()
        return ConsumerGroupMetadata(group_id, generation, member_id, instance_id)

    async def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], OffsetAndMetadata | int] | None = None,
                     *, timeout: float | None = None) -> None:
        offs = None if offsets is None else {TopicPartition(*tp): o for tp, o in offsets.items()}
        await self._core.commit(offs, timeout=timeout)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[Any, Any], None] | None = None) -> asyncio.Task[None]:
        core = self._core
        snapshot = dict(offsets) if offsets is not None else core.consumed_offsets()
        task = core.loop.create_task(core.commit(snapshot))
        if callback is not None:
            task.add_done_callback(lambda t: callback(t.exception(), snapshot))
        return task

    async def list_topics(self, timeout: float | None = None) -> dict[str, list[int]]:
        """All topics in the cluster with their partition ids."""
        r = await self._core.cluster.fetch_metadata(None, timeout=timeout)
        return {t.name: sorted(p.partition_index for p in t.partitions) for t in r.topics if not t.error_code}

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        info = await self._core.cluster.wait_for_topic(topic, timeout or self._core.default_timeout)
        return sorted(info.partitions)

    async def close(self, *, autocommit: bool = True) -> None:
        """Commit (when auto-commit is on), leave the group and close connections. Idempotent."""
        if self._closed or self._core_ is None:
            self._closed = True
            return
        try:
            await self._core_.close(commit=autocommit)
        finally:
            self._closed = True

    stop = close

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Consumer(BlockingClient):
    """A Kafka consumer with a blocking API.

    ``Consumer("topic", bootstrap_servers="host:9092", group_id="g", auto_offset_reset="earliest")`` subscribes
    to the topics given positionally (or call :meth:`subscribe`/:meth:`assign`). Iterating yields records;
    :meth:`poll` returns a list of :class:`ConsumerRecord`; :meth:`poll_batch` returns a ``pyarrow.RecordBatch``
    decoded natively. Not thread-safe: use one consumer per thread.

    Each operation is :class:`AsyncConsumer`'s, run on a private event-loop thread; ``poll`` drives the asyncio
    consumer's poll loop from the caller's thread, where the rebalance callbacks run.
    """

    _kind = "consumer"

    def __init__(self, *topics: Any, bootstrap_servers: str | Sequence[str] | None = None,
                 group_id: str | None = None, auto_offset_reset: str = "latest",
                 on_assign: RebalanceCallback | None = None, on_revoke: RebalanceCallback | None = None,
                 on_lost: RebalanceCallback | None = None, **config: Any) -> None:
        self._aio = AsyncConsumer(*topics, bootstrap_servers=bootstrap_servers, group_id=group_id,
                                  auto_offset_reset=auto_offset_reset, on_assign=on_assign, on_revoke=on_revoke,
                                  on_lost=on_lost, **config)
        self._start_thread("klog-consumer", self._aio.start())
        self._core: ConsumerCore = self._aio._core

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._core.config)

    # ------------------------------------------------------------------ subscription
    subscribe = on_loop(AsyncConsumer.subscribe)
    unsubscribe = on_loop(AsyncConsumer.unsubscribe)
    assign = on_loop(AsyncConsumer.assign)
    assignment = direct(AsyncConsumer.assignment)
    subscription = direct(AsyncConsumer.subscription)

    # ------------------------------------------------------------------ polling
    def poll(self, timeout: float | None = None, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions: waits up to ``timeout`` seconds (None: until some
        arrive) and returns at most ``max_records`` (default ``max.poll.records``)."""
        if self._closed:
            raise ClientClosedError("consumer closed")
        return self._drive(self._aio._poll(timeout, max_records))

    def poll_batch(self, timeout: float | None = None, max_records: int | None = None) -> Any:
        """Like :meth:`poll` but returns one ``pyarrow.RecordBatch`` (columns topic, partition, offset,
        timestamp, key, value, headers), decoded natively without per-record Python objects. Returns an empty
        batch when nothing arrived within ``timeout``."""
        if self._closed:
            raise ClientClosedError("consumer closed")
        return self._drive(self._aio._poll_batch(timeout, max_records))

    def _drive(self, steps: _Steps[T]) -> T:
        finished, step = _advance(steps, None, None)
        while not finished:
            try:
                result, error = self._perform(step), None
            except BaseException as e:  # raised in the steps, where the step was yielded
                result, error = None, e
            finished, step = _advance(steps, result, error)
        return step  # type: ignore[no-any-return]

    def _perform(self, step: Any) -> Any:
        kind = type(step)
        if kind is _Run:
            return self._run(step.coro)
        if kind is _OnLoop:
            return self._run_on_loop(step.fn, *step.args)
        if kind is _Invoke:
            if step.fn is not None:
                step.fn(self, list(step.partitions))
            return None
        if kind is _StartJoin:
            return self._thread.submit(step.coro)
        if kind is _WaitJoin:
            done, _ = concurrent.futures.wait([step.join], step.timeout)
            return bool(done)
        assert kind is _WaitData
        core = self._core
        with core.data_ready:
            if not core.ready and not core.closed:
                core.data_ready.wait(step.timeout)
        if core.closed:
            raise ClientClosedError("consumer closed")
        return None

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(timeout=None)

    # ------------------------------------------------------------------ positions
    seek = on_loop(AsyncConsumer.seek)
    seek_to_beginning = on_loop(AsyncConsumer.seek_to_beginning)
    seek_to_end = on_loop(AsyncConsumer.seek_to_end)
    position = blocking(AsyncConsumer.position)
    committed = blocking(AsyncConsumer.committed)
    offsets_for_times = blocking(AsyncConsumer.offsets_for_times)
    beginning_offsets = blocking(AsyncConsumer.beginning_offsets)
    end_offsets = blocking(AsyncConsumer.end_offsets)
    pause = on_loop(AsyncConsumer.pause)
    resume = on_loop(AsyncConsumer.resume)
    paused = direct(AsyncConsumer.paused)
    consumer_group_metadata = on_loop(AsyncConsumer.consumer_group_metadata)

    # ------------------------------------------------------------------ commits
    def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], OffsetAndMetadata | int] | None = None,
               *, asynchronous: bool = False, timeout: float | None = None
               ) -> concurrent.futures.Future[None] | None:
        """Commit ``offsets`` (default: the current positions). Blocks unless ``asynchronous``, which returns a
        future instead."""
        if asynchronous:
            return self.commit_async(None if offsets is None else {TopicPartition(*tp): o for tp, o in offsets.items()})
        self._run(self._aio.commit(offsets, timeout=timeout))
        return None

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[Any, Any], None] | None = None) -> concurrent.futures.Future[None]:
        """Commit without waiting; ``callback(error, offsets)`` runs on completion (on the client's loop)."""
        if self._closed:
            raise ClientClosedError("consumer closed")
        snapshot = dict(offsets) if offsets is not None else self._core.consumed_offsets()
        fut = self._thread.submit(self._core.commit(snapshot))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(f.exception(), snapshot))
        return fut

    # ------------------------------------------------------------------ metadata
    list_topics = blocking(AsyncConsumer.list_topics)
    partitions_for = blocking(AsyncConsumer.partitions_for)

    # ------------------------------------------------------------------ lifecycle
    def close(self, *, autocommit: bool = True) -> None:
        """Commit (when auto-commit is on), leave the group and close connections. Idempotent."""
        if not self._closed:
            self._close_with(self._aio.close(autocommit=autocommit))

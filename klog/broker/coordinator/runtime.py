"""The log-backed coordinator runtime (Kafka's ``CoordinatorRuntime``) that the group and the transaction
coordinators run on.

A coordinator keeps state machines keyed by a string (a group id, a transactional id); each key lives in one
partition of a compacted internal topic (``__consumer_offsets``, ``__transaction_state``), chosen as Kafka does
(``abs(key.hashCode()) % partitions``). The runtime owns what is the same for every coordinator:

- **the log** (:class:`CoordinatorLog`): creating the internal topic on first use, appending a key's records as
  one acks=all batch to its partition, and reading a partition back, oldest first;
- **leadership** (Kafka's onElection / onResignation): on a single node this broker coordinates every partition;
  on a quorum it coordinates the partitions it leads, and after each metadata image it calls the coordinator's
  ``load`` for the partitions it gained (replaying their records) and ``unload`` for those it lost;
- **replicated writes**: the writes a request makes are collected per asyncio task, and its answer waits until
  the ISR has them (a write that does not reach the ISR turns every success of the answer into the error);
- **timers** (:class:`~klog.broker.coordinator.timer.Timer`) run by one background task per coordinator;
- **FindCoordinator**'s answer for a key: the live leader of the key's partition, on the client's listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from klog.controller.topics import InternalTopicSpec
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode
from klog.protocol.errors import error_info
from klog.records import decode_batches, encode_batch

from .timer import Clock, Timer, wall_clock_ms

log = logging.getLogger("klog.coordinator")

#: Upper bound of the timer task's sleep, so a clock jump or a missed wake-up costs at most this.
MAX_TIMER_SLEEP_MS = 1000
#: How long FindCoordinator waits for the internal topic to be created before it answers
#: COORDINATOR_NOT_AVAILABLE (the creation goes on; the client asks again). Kafka answers at once; a short wait
#: spares clients a round trip in the usual case, where the controller creates it in milliseconds, and a lost
#: quorum must not hold the connection's later requests (Fetch, Produce) behind it.
INTERNAL_TOPIC_CREATE_WAIT_S = 1.0
#: Kafka's codec ids (offsets.topic.compression.codec, transaction.state.log has none: uncompressed).
COMPRESSION_BY_ID = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

Records = Sequence[tuple[bytes, bytes | None]]
T = TypeVar("T")


@functools.lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, int32 overflow). Cached: every coordinator write and lookup
    hashes its key (a transactional id, a group id), in pure Python."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (groups and transactional ids alike)."""
    h = java_string_hash(key)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


class AppendRefused(Exception):
    """The broker context's coordinator ``append`` refused a write before appending it: ``code`` is the Kafka
    error a producer would get (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


def storage_error_code(exc: BaseException) -> int:
    """The error a client sees when appending to a coordinator's log failed (Kafka's
    ``appendGroupMetadataErrorToResponseError``: storage failures read as NOT_COORDINATOR, so the client
    looks the coordinator up again; anything else is an unknown server error)."""
    if isinstance(exc, KeyError):  # partition missing: the topic is not available
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, AppendRefused):
        return replication_error_code(exc.code)
    if isinstance(exc, OSError):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def replication_error_code(code: int) -> int:
    """The error a client sees when a coordinator write was refused before its append or did not reach the ISR
    (Kafka's ``CoordinatorService.normalizeException``): the client retries COORDINATOR_NOT_AVAILABLE at
    the same coordinator and looks the coordinator up again after NOT_COORDINATOR."""
    if code in _RETRY_SAME_COORDINATOR:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in _FIND_COORDINATOR_AGAIN:
        return ErrorCode.NOT_COORDINATOR
    return code


_RETRY_SAME_COORDINATOR = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT})
_FIND_COORDINATOR_AGAIN = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})


class CoordinatorLog:
    """Appends coordinator records to, and replays them from, one compacted internal topic via the broker context.

    The topic is compacted (``cleanup.policy=compact``): the broker's log cleaner keeps the latest record of
    each key (and a tombstone for delete.retention.ms), so a load replays about the live state plus the active
    segment, not the whole history.
    """

    TOPIC = ""

    def __init__(self, context: Any, spec: InternalTopicSpec, compression_codec: int, load_buffer_bytes: int) -> None:
        self.TOPIC = spec.name
        self.context = context
        #: how the topic is created (klog.controller.topics.internal_topic_spec: the one place deciding it)
        self.spec = spec
        self.num_partitions = spec.num_partitions
        self.compression = COMPRESSION_BY_ID.get(compression_codec, "none")
        self.load_buffer_bytes = load_buffer_bytes
        #: the topic's creation FindCoordinator started, shared by the requests that come meanwhile
        self._topic_creation: asyncio.Future[None] | None = None

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def configs(self) -> dict[str, str]:
        return dict(self.spec.configs)

    def ensure_topic(self) -> None:
        """OSError while the topic does not exist (:meth:`ensure_topic_async` creates it)."""
        self.context.ensure_internal_topic(self.TOPIC, self.num_partitions, self.configs())

    async def ensure_topic_async(self) -> None:
        """Create the topic if missing, through the controller (raises OSError when it could not be created
        yet)."""
        await self.context.ensure_internal_topic_async(self.TOPIC, self.num_partitions, self.configs(),
                                                       replication_factor=self.spec.replication_factor)

    async def leader_of(self, key: str, listener: str) -> tuple[int, str | None, tuple[int, str, int]]:
        """FindCoordinator's answer for ``key`` on a quorum: (error, message, (node id, host, port)) of the leader of
        its partition on ``listener``. The topic is created through the active controller on first use, one creation
        shared by the requests meanwhile, each waiting for it at most ``INTERNAL_TOPIC_CREATE_WAIT_S`` (then
        COORDINATOR_NOT_AVAILABLE: the client asks again); COORDINATOR_NOT_AVAILABLE while the partition has no
        live leader."""
        none = (-1, "", -1)
        topic = self.TOPIC
        if self.context.partition_count(topic) is None:
            if self._topic_creation is None or self._topic_creation.done():
                self._topic_creation = asyncio.ensure_future(self.ensure_topic_async())
                # its failure is read here even when no FindCoordinator waits for it any more
                self._topic_creation.add_done_callback(lambda t: t.cancelled() or t.exception())
            try:
                await asyncio.wait_for(asyncio.shield(self._topic_creation), INTERNAL_TOPIC_CREATE_WAIT_S)
            except asyncio.TimeoutError:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created", none
            except OSError as exc:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), none
        partition = self.partition_for(key)
        found = self.context.partition_leader_endpoint(topic, partition, listener)
        if found is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no live leader", none
        return ErrorCode.NONE, None, found

    def cancel_topic_creation(self) -> None:
        """The broker stops: a creation :meth:`leader_of` started is not waited for."""
        if self._topic_creation is not None:
            self._topic_creation.cancel()

    def write(self, key: str, records: Records, now_ms: int, producer: tuple[int, int] | None = None,
              verification: object | None = None) -> tuple[int, int] | None:
        """Appends ``records`` (key, value-or-None) as one batch to ``key``'s partition; returns (partition, last
        offset) of the batch, which the caller waits for the ISR to have before it answers. ``producer``: (id,
        epoch) of a transactional producer whose transaction the batch joins (TxnOffsetCommit); a COMMIT or ABORT
        marker ends it. ``verification``: that producer's verification guard on the partition (the append
        refuses the batch once a marker ended it). Raises on failure."""
        if not records:
            return None
        self.ensure_topic()
        partition = self.partition_for(key)
        rows = [{"key": k, "value": v, "timestamp": now_ms} for k, v in records]
        if producer is None:
            batch = encode_batch(rows, compression=self.compression)
            return partition, self.context.append(self.TOPIC, partition, batch).last_offset
        batch = encode_batch(rows, compression=self.compression, producer_id=producer[0], producer_epoch=producer[1],
                             is_transactional=True)
        return partition, self.context.append(self.TOPIC, partition, batch, producer=producer,
                                              verification=verification).last_offset

    def read_partition(self, partition: int, start: int | None = None,
                       end: int | None = None) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Every (offset, key, value) of one partition, oldest first (control batches skipped); ``start``/``end``:
        only those in [start, end)."""
        for offset, key, value, _producer, control in self.read_partition_records(partition, start, end):
            if control is None:
                yield offset, key, value

    def read_partition_records(self, partition: int, start: int | None = None, end: int | None = None
                               ) -> Iterator[tuple[int, bytes | None, bytes | None, int, int | None]]:
        """Every (offset, key, value, producer id of a transactional batch or -1, None) of one partition, and each
        transaction marker as (offset, None, None, producer id, control type: 0 abort, 1 commit), oldest first;
        ``start``/``end``: only those in [start (at least the log start), end (at most the log end))."""
        plog = self.context.partition_log(self.TOPIC, partition)
        if plog is None:
            return
        offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
        end = plog.log_end_offset if end is None else min(end, plog.log_end_offset)
        while offset < end:
            result = plog.read(offset, self.load_buffer_bytes, max_offset=end, min_one_batch=True)
            data = result.to_bytes()
            if not data:
                break
            batches = decode_batches(data, allow_partial_trailing=True, allow_compacted=True)
            if not batches:
                break
            for batch in batches:
                last = batch.base_offset + batch.last_offset_delta
                if batch.base_offset >= end:
                    return
                if batch.is_control:
                    if batch.base_offset >= offset and batch.control_type is not None:
                        yield batch.base_offset, None, None, batch.producer_id, batch.control_type
                    offset = max(offset, last + 1)
                    continue
                producer = batch.producer_id if batch.is_transactional else -1
                for record in batch.records:
                    if offset <= record.offset < end:
                        yield record.offset, record.key, record.value, producer, None
                offset = max(offset, last + 1)


def fail_every_success(response: Any, code: int) -> None:
    """Sets every error code of ``response`` that says NONE (top level, per partition, per member, per group) to
    ``code``: the write behind them did not reach the ISR, so none of it is acknowledged."""
    if isinstance(response, Struct):
        for name, value in response.__dict__.items():
            if name == "error_code" and value == ErrorCode.NONE:
                response.__dict__[name] = int(code)
            else:
                fail_every_success(value, code)
    elif isinstance(response, dict):
        for name, value in response.items():
            if name == "error_code" and value == ErrorCode.NONE:
                response[name] = int(code)
            else:
                fail_every_success(value, code)
    elif isinstance(response, list):
        for item in response:
            fail_every_success(item, code)


class CoordinatorRuntime:
    """Leadership, replicated writes, timers and FindCoordinator answers for one coordinator (see the module
    docstring). The coordinator passes ``load(partitions)`` (replay those partitions' records into its state;
    None: every partition, a single node) and ``unload(partitions)`` (forget them, answer parked requests)."""

    def __init__(self, context: Any, log_: CoordinatorLog | None, *, name: str, commit_timeout_ms: int,
                 load: Callable[[set[int] | None], None], unload: Callable[[set[int]], None],
                 clock: Clock | None = None) -> None:
        self.context = context
        self.log = log_
        self.name = name
        self.commit_timeout_ms = commit_timeout_ms
        self._load = load
        self._unload = unload
        self.timer = Timer(clock or wall_clock_ms, on_earlier_deadline=self._on_earlier_deadline)
        self.active = False
        #: the partitions whose state this coordinator has loaded and serves; None: every partition (a single node
        #: leads them all). On a quorum, those this broker leads.
        self.owned_partitions: set[int] | None = None
        #: (partition, last offset) of the writes the request being handled made: its answer waits until the ISR
        #: has them. Per asyncio task, so concurrent requests on other connections keep their own.
        self._unreplicated: ContextVar[list[tuple[int, int]] | None] = ContextVar(f"{name}_unreplicated",
                                                                                   default=None)
        self._timer_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        #: records written to the log (tests and benchmarks read it)
        self.records_written = 0

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self, *, run_timers: bool = True) -> None:
        """Loads the partitions this broker coordinates and starts the timer task (``run_timers=False`` leaves
        timers to the caller, ``timer.poll()``, for deterministic tests with a fake clock)."""
        led = self.led_partitions()
        if led is not None:   # a quorum member: the partitions it leads now (more and fewer as leaders move)
            self.owned_partitions = set()
            self.move_leadership(led)
        elif self.log is not None:
            # the topic itself is created on first use (FindCoordinator or a first write), as Kafka does
            self._load(None)
        self.active = True
        self._wake = asyncio.Event()
        if run_timers:
            self._timer_task = asyncio.get_running_loop().create_task(self._run_timers(),
                                                                      name=f"klog-{self.name}-timers")

    async def stop(self) -> None:
        self.active = False
        if self.log is not None:
            self.log.cancel_topic_creation()
        if self._timer_task is not None:
            self._timer_task.cancel()
            try:
                await self._timer_task
            except asyncio.CancelledError:
                pass
            self._timer_task = None

    # -- leadership of the log's partitions (a quorum member) -------------------------------------------------
    def led_partitions(self) -> set[int] | None:
        fn = getattr(self.context, "led_partitions", None)
        if fn is None or self.log is None:
            return None
        led = fn(self.log.TOPIC)
        return None if led is None else {p for p in led if p < self.log.num_partitions}

    def on_metadata_published(self) -> None:
        """The broker applied a new metadata image: load the partitions it now leads, unload those it stopped
        leading."""
        if self.owned_partitions is None:
            return
        led = self.led_partitions()
        if led is not None:
            self.move_leadership(led)

    def move_leadership(self, led: set[int]) -> None:
        assert self.owned_partitions is not None and self.log is not None
        lost = self.owned_partitions - led
        gained = led - self.owned_partitions
        if lost:
            self._unload(lost)
            self.owned_partitions -= lost
        if gained:
            self._load(gained)
            self.owned_partitions |= gained
        if lost or gained:
            log.info("%s: coordinating %d %s partition(s) (gained %s, resigned %s)", self.name,
                     len(self.owned_partitions), self.log.TOPIC, sorted(gained), sorted(lost))

    def owns(self, key: str) -> bool:
        return self.owned_partitions is None or self.log is None \
            or self.log.partition_for(key) in self.owned_partitions

    def unavailable(self, key: str | None) -> int:
        """The error a request about ``key`` gets: COORDINATOR_NOT_AVAILABLE before ``start``, NOT_COORDINATOR
        when another broker leads the key's partition (the client looks the coordinator up again), else 0."""
        if not self.active:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if key is not None and not self.owns(key):
            return int(ErrorCode.NOT_COORDINATOR)
        return 0

    # -- timers -----------------------------------------------------------------------------------------------
    def _on_earlier_deadline(self, _deadline: int) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run_timers(self) -> None:
        assert self._wake is not None
        while True:
            self._wake.clear()
            try:
                self.timer.poll()
            except Exception:  # noqa: BLE001 - one failing timer must not stop the others
                log.exception("%s timer failed", self.name)
            nxt = self.timer.next_deadline()
            now = self.timer.now()
            sleep_ms = MAX_TIMER_SLEEP_MS if nxt is None else min(max(nxt - now, 0), MAX_TIMER_SLEEP_MS)
            if sleep_ms > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), sleep_ms / 1000)
                except (asyncio.TimeoutError, TimeoutError):
                    pass
            else:
                await asyncio.sleep(0)

    # -- replicated writes ------------------------------------------------------------------------------------
    def write(self, key: str, records: Records, *, producer: tuple[int, int] | None = None,
              verification: object | None = None) -> None:
        """Appends ``records`` to ``key``'s partition (raises when the append fails); the answer of the request
        being handled waits for the ISR to have them (:meth:`await_writes`, :meth:`run`). ``producer``: the
        transactional producer (id, epoch) whose transaction they join; ``verification``: its verification guard
        on the partition."""
        if self.log is not None:
            written = self.log.write(key, records, self.timer.now(), producer, verification)
            unreplicated = self._unreplicated.get()
            if written is not None and unreplicated is not None:
                unreplicated.append(written)
        self.records_written += len(records)

    async def await_writes(self) -> int:
        """Waits until the ISR has every write the current request made so far (a coordinator answers only then,
        so an acknowledged change survives the leader's loss); the error to answer with, or NONE."""
        unreplicated = self._unreplicated.get()
        if not unreplicated:
            return ErrorCode.NONE
        last: dict[int, int] = {}
        for partition, offset in unreplicated:
            last[partition] = max(offset, last.get(partition, -1))
        unreplicated.clear()
        if self.log is None:
            return ErrorCode.NONE
        for partition, offset in last.items():
            future = self.context.wait_replicated(self.log.TOPIC, partition, offset, self.commit_timeout_ms)
            code = ErrorCode.NONE if future is None else await future
            if code:
                log.info("a write to %s-%d (offset %d) did not reach the ISR: %s", self.log.TOPIC, partition,
                         offset, error_info(code).name)
                return replication_error_code(code)
        return ErrorCode.NONE

    async def ensure_log(self) -> None:
        """Before a request that may write first records: a single node creates its log's topic, as Kafka does on
        first use (a write that waits, its controller commits it); when it cannot, the write answers the storage
        error. A quorum member's topic is created through FindCoordinator."""
        if self.log is not None and self.owned_partitions is None \
                and self.context.partition_count(self.log.TOPIC) is None:
            with contextlib.suppress(OSError):
                await self.log.ensure_topic_async()

    async def run(self, handle: Callable[[], Awaitable[T]]) -> T:
        """Runs one request's handling with its own write list; its answer is returned once the ISR has its writes
        (else every success in it becomes the replication error)."""
        token = self._unreplicated.set([])
        try:
            response = await handle()
            code = await self.await_writes()
        finally:
            self._unreplicated.reset(token)
        if code:
            fail_every_success(response, code)
        return response

    # -- FindCoordinator --------------------------------------------------------------------------------------
    async def coordinator_for(self, key: str, listener: str | None) -> tuple[int, str | None, tuple[int, str, int]]:
        """FindCoordinator's answer for ``key``: (error, message, (node id, host, port)). A single node answers
        itself; a quorum member the leader of the key's partition (the topic created through the active
        controller on first use), or COORDINATOR_NOT_AVAILABLE while it has none."""
        none = (-1, "", -1)
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, none
        host, port = self.context.host, self.context.port
        if listener is not None:   # this node's address on the listener the client came through
            host, port = getattr(self.context, "endpoints", {}).get(listener, (host, port))
        myself = (self.context.node_id, host, port)
        if self.log is None:
            return ErrorCode.NONE, None, myself
        if self.owned_partitions is None:
            try:
                await self.log.ensure_topic_async()
            except OSError as exc:  # the topic cannot be made (its log dir is offline)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), none
            return ErrorCode.NONE, None, myself
        return await self.log.leader_of(key, listener or self.context.listener_name)

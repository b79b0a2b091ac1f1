"""``TransactionCoordinator``: Kafka's transaction coordinator on the shared coordinator runtime.

Every transactional id lives in one ``__transaction_state`` partition (``abs(id.hashCode()) % partitions``); the
broker leading that partition coordinates it. Its state (:class:`~.records.TxnMetadata`) changes only after the
new state is in the ISR (acks=all through :class:`~klog.broker.coordinator.runtime.CoordinatorRuntime`), as
Kafka's ``TransactionStateManager`` appends before it completes a transition; a transition in flight answers
CONCURRENT_TRANSACTIONS to any other request about the id.

The state machine and answers follow Kafka 4.3's ``TransactionCoordinator``, for transaction protocol v1 (the
client adds partitions with AddPartitionsToTxn v0-3 and ends with EndTxn v0-4) and v2 (KIP-890 part 2, with
``transaction.version`` 2 finalized: partition leaders add a transactional batch's partition with AddPartitionsToTxn
v4+ and the producer ends with EndTxn v5):

- InitProducerId: a new id gets a producer id and epoch 0; a known one a bumped epoch (a new producer id when the
  epoch is exhausted), which fences the previous producer; an ongoing transaction is aborted first (the producer
  gets CONCURRENT_TRANSACTIONS and retries).
- AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added (the offsets partition of the group).
- EndTxn: PrepareCommit / PrepareAbort in the log, answered once replicated; then COMMIT or ABORT markers to
  every partition's leader (WriteTxnMarkers, retried until each is written), then CompleteCommit /
  CompleteAbort.
- Protocol v2: every EndTxn bumps the producer epoch (PrepareCommit/PrepareAbort carry epoch + 1, the markers are
  written with it, EndTxn v5 answers it), so a delayed marker, produce or EndTxn of transaction N is refused once
  transaction N+1 runs (a partition refuses a v2 marker whose epoch is not above the producer's, a batch whose epoch
  is below it); an epoch bump that exhausts the epochs moves the producer to a new producer id (epoch 0). A retried
  EndTxn is recognised by its epoch (one below the bumped one), as Kafka's table of Empty/CompleteCommit/
  CompleteAbort answers says.
- A transaction open longer than its ``transaction.timeout.ms`` is aborted with a bumped epoch (the producer is
  fenced), checked every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``; an id unused for
  ``transactional.id.expiration.ms`` is removed (a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from klog.broker.run_now import finish_in, start_now
from klog.broker.coordinator.runtime import CoordinatorLog, CoordinatorRuntime, partition_for, storage_error_code
from klog.broker.coordinator.timer import Clock
from klog.controller.topics import internal_topic_spec, is_internal
from klog.metadata.features import TRANSACTION_VERSION
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode

from . import records as R
from .operations import (  # noqa: F401  (also imported from here)
    ADD_PARTITION,
    DEFAULT_ERROR,
    GENERIC_ERROR_SUPPORTED,
    SUPPORTED_APIS,
    produce_operation,
    txn_offset_commit_operation,
)
from .records import TxnMetadata, TxnState

log = logging.getLogger("klog.transactions")

TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's ``isProducerEpochExhausted``: an epoch this high gets a new producer id at the next bump
MAX_EPOCH = 32767 - 1
#: the highest epoch a producer id has (Short.MaxValue): a v2 transaction ended at MAX_EPOCH writes its markers
#: with it, then moves to its next producer id
LAST_EPOCH = 32767
#: transaction.version 2: transaction protocol v2 (KIP-890 part 2)
TV2 = 2
#: Pause between attempts to write a transaction's markers to a partition that refused them (no leader, a
#: leader change, an ISR too small): Kafka's marker channel retries until the partition takes them.
MARKER_RETRY_BACKOFF_S = 0.1
#: The largest pause between marker attempts (doubling from MARKER_RETRY_BACKOFF_S).
MARKER_RETRY_MAX_BACKOFF_S = 2.0

#: FindCoordinator's key type for transactional ids
KEY_TYPE_TRANSACTION = 1

PRODUCER_FENCED = ErrorCode.PRODUCER_FENCED
INVALID_PRODUCER_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH

#: (node id, host, port, markers [(topic, partition)], producer id, epoch, commit, coordinator epoch, transaction
#: version) -> error per partition
MarkerSender = Callable[[int, str, int, list[tuple[str, int]], int, int, bool, int, int],
                        Awaitable[dict[tuple[str, int], int]]]


#: (node id, host, port, transactional id, producer id, epoch, partitions, verify only) -> error per partition: an
#: AddPartitionsToTxn (v5) from a partition leader to the coordinator on another broker
VerificationSender = Callable[[int, str, int, str, int, int, list[tuple[str, int]], bool],
                              Awaitable[dict[tuple[str, int], int]]]

#: the coordinator's retriable answers a partition leader turns into NOT_ENOUGH_REPLICAS (retried by every client
#: without a metadata refresh; Kafka's ReplicaManager); CONCURRENT_TRANSACTIONS only before ADD_PARTITION
_RETRIABLE_VERIFICATION_ERRORS = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                            ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                            ErrorCode.REQUEST_TIMED_OUT})


def leader_verification_error(code: int, operation: int) -> int:
    """The error a partition leader answers for a batch its transaction coordinator did not add or verify, as
    Kafka's AddPartitionsToTxnManager and ReplicaManager translate the coordinator's: fencing reads
    INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE reads INVALID_TXN_STATE to old clients, the coordinator's
    retriable errors read NOT_ENOUGH_REPLICAS (CONCURRENT_TRANSACTIONS stays itself under protocol v2, where it is
    common while the previous transaction's markers are written)."""
    if code == PRODUCER_FENCED:
        return int(INVALID_PRODUCER_EPOCH)
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return int(ErrorCode.INVALID_TXN_STATE)
    if code == ErrorCode.TRANSACTION_ABORTABLE and operation == DEFAULT_ERROR:
        return int(ErrorCode.INVALID_TXN_STATE)
    if code in _RETRIABLE_VERIFICATION_ERRORS or (code == ErrorCode.CONCURRENT_TRANSACTIONS
                                                  and operation != ADD_PARTITION):
        return int(ErrorCode.NOT_ENOUGH_REPLICAS)
    return int(code)


def describe_error(tid: str, code: int) -> dict[str, Any]:
    """A DescribeTransactions answer of ``tid`` that only carries ``code`` (Kafka leaves every other field at its
    schema default: 0)."""
    return {"error_code": int(code), "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}


def _fenced(code: int, version: int, first_version_with_fenced: int) -> int:
    """PRODUCER_FENCED reads INVALID_PRODUCER_EPOCH for the versions before it existed (KafkaApis does this)."""
    if code == PRODUCER_FENCED and version < first_version_with_fenced:
        return int(INVALID_PRODUCER_EPOCH)
    return int(code)


class TransactionCoordinator:
    #: api key -> (min, max) version implemented
    SUPPORTED_APIS: ClassVar[dict[int, tuple[int, int]]] = SUPPORTED_APIS

    def __init__(self, context: Any, *, allocate_producer_id: Callable[[], Awaitable[int]],
                 send_markers: MarkerSender, send_verification: VerificationSender | None = None,
                 clock: Clock | None = None, persist: bool = True) -> None:
        self.context = context
        config = context.config
        self.config = config
        self.max_timeout_ms = int(config["transaction.max.timeout.ms"])
        self.expiration_ms = int(config["transactional.id.expiration.ms"])
        self.abort_check_ms = int(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.expire_check_ms = int(config["transaction.remove.expired.transaction.cleanup.interval.ms"])
        self.completion_wait_s = int(config["klog.transaction.completion.wait.ms"]) / 1000
        self.offsets_partitions = int(config["offsets.topic.num.partitions"])
        self.topic: CoordinatorLog | None = None
        if persist:
            self.topic = CoordinatorLog(context, internal_topic_spec(TOPIC, config), 0,
                                        int(config["transaction.state.log.load.buffer.size"]))
        self.runtime = CoordinatorRuntime(context, self.topic, name="transaction-coordinator",
                                          commit_timeout_ms=int(config["offsets.commit.timeout.ms"]),
                                          load=self._load, unload=self._unload, clock=clock)
        self.timer = self.runtime.timer
        self.allocate_producer_id = allocate_producer_id
        self.send_markers = send_markers
        self.send_verification = send_verification
        #: transactional id -> its state
        self.txns: dict[str, TxnMetadata] = {}
        #: transactional id -> the task writing its markers and completing its transaction
        self._completing: dict[str, asyncio.Future[None]] = {}
        #: transactional ids whose next state is being written (`_transition`: one write of an id at a time)
        self._writing: set[str] = set()
        self._handlers = {22: self._init_producer_id, 24: self._add_partitions, 25: self._add_offsets,
                          26: self._end_txn}
        #: the metadata image server_transaction_version last read, and what it read there
        self._version_image: object | None = None
        self._version = 0

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def start(self, *, run_timers: bool = True) -> None:
        self.start_now(run_timers=run_timers)

    def start_now(self, *, run_timers: bool = True) -> None:
        """:meth:`start` without an await (on the event loop): a coordinator made on first use starts there."""
        self.runtime.start(run_timers=run_timers)
        self.timer.schedule(("txn-abort-timed-out",), self.abort_check_ms, self._abort_timed_out_and_reschedule)
        self.timer.schedule(("txn-expire-ids",), self.expire_check_ms, self._expire_ids_and_reschedule)

    async def stop(self) -> None:
        await self.runtime.stop()
        for task in list(self._completing.values()):
            task.cancel()
        for task in list(self._completing.values()):
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
        self._completing.clear()

    def on_metadata_published(self) -> None:
        self.runtime.on_metadata_published()

    def server_transaction_version(self) -> int:
        """The finalized ``transaction.version``: the protocol the coordinator's own aborts (timeouts, a re-init
        fencing an open transaction) use, as Kafka's ``txnManager.transactionVersionLevel()``. Read once per
        metadata image (images are immutable; every state record asks)."""
        image = getattr(getattr(self.context, "metadata", None), "image", None)
        if image is None or image is not self._version_image:
            features = getattr(image, "features", None)
            self._version = int(features.get(TRANSACTION_VERSION, 0)) if isinstance(features, Mapping) else 0
            self._version_image = image
        return self._version

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.topic.num_partitions if self.topic is not None else 1)

    def _coordinator_epoch(self, transactional_id: str) -> int:
        if self.topic is None:
            return 0
        fn = getattr(getattr(self.context, "partitions", None), "leader_epoch", None)
        epoch = fn(TOPIC, self.partition_for(transactional_id)) if fn is not None else None
        return max(int(epoch), 0) if isinstance(epoch, int) else 0

    def _load(self, partitions: set[int] | None) -> None:
        """Rebuild the transactional ids of ``partitions`` (None: all) from ``__transaction_state``, and finish
        the transactions that were between their prepare and complete states (their markers are written again:
        a partition ignores a marker it has)."""
        if self.topic is None:
            return
        loaded: dict[str, TxnMetadata | None] = {}
        wanted = sorted(partitions) if partitions is not None else range(self.topic.num_partitions)
        for partition in wanted:
            for offset, key, value in self.topic.read_partition(partition):
                try:
                    tid, meta = R.decode(key, value)
                except R.TxnRecordError as exc:
                    log.error("%s-%d offset %d: skipping unreadable record: %s", TOPIC, partition, offset, exc)
                    continue
                loaded[tid] = meta
        count = 0
        for tid, meta in loaded.items():
            if meta is None:
                self.txns.pop(tid, None)
                continue
            self.txns[tid] = meta
            count += 1
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._start_completion(tid)
        if count:
            log.info("loaded %d transactional ids from %s", count, TOPIC)

    def _unload(self, partitions: set[int]) -> None:
        for tid in [t for t in self.txns if self.partition_for(t) in partitions]:
            task = self._completing.pop(tid, None)
            if task is not None:
                task.cancel()
            del self.txns[tid]

    # -- requests ---------------------------------------------------------------------------------------------
    async def handle(self, header: Any, request: Any) -> Any:
        handler = self._handlers[header.api_key]
        if header.api_key == 22:   # a new id's first record: a single node creates __transaction_state first
            await self.runtime.ensure_log()
        return await self.runtime.run(lambda: handler(header.api_version, request))

    async def _transition(self, current: TxnMetadata | None, new: TxnMetadata) -> int:
        """Writes ``new`` (the next state of its id) and waits for the ISR; only then it becomes the state. A
        compare-and-set: ``current`` must still be the id's state (None: the id has none), with no other write of
        it in flight, else nothing is written (CONCURRENT_TRANSACTIONS): a decision taken from a state that
        another request or the timer has since replaced (a timed-out abort scheduled before the client's commit
        was written, a decision made before an await) would overwrite that newer state, and a commit the client
        was told of could end aborted."""
        tid = new.transactional_id
        if self.txns.get(tid) is not current or tid in self._writing:
            return int(ErrorCode.CONCURRENT_TRANSACTIONS)
        self._writing.add(tid)
        if current is not None:
            current.pending = True
        try:
            # as Kafka: value v1 from transaction.version 1, the producer id before the transition as the previous
            self.runtime.write(tid, [R.record(new, 1 if self.server_transaction_version() >= 1 else 0,
                                              current.producer_id if current is not None else new.producer_id)])
            code = await self.runtime.await_writes()
        except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
            log.warning("transactional id %s: writing its state failed: %s", tid, exc)
            code = storage_error_code(exc)
        finally:
            self._writing.discard(tid)
            if current is not None:
                current.pending = False
        if code:
            return int(code)
        if unavailable := self.runtime.unavailable(tid):
            return unavailable   # resigned meanwhile: the new coordinator loads what was written
        if self.txns.get(tid) is not current:   # unloaded and loaded again meanwhile: the log's state is the id's
            return int(ErrorCode.NOT_COORDINATOR)
        new.pending = False
        self.txns[tid] = new
        return 0

    async def _await_completion(self, tid: str) -> None:
        """Waits up to ``klog.transaction.completion.wait.ms`` while ``tid``'s previous transaction has its markers
        and complete state written, so that a request arriving meanwhile is answered for the completed transaction
        instead of with CONCURRENT_TRANSACTIONS. (A producer that begins its next transaction at once sends its
        AddPartitionsToTxn while the markers are written; the clients retry CONCURRENT_TRANSACTIONS after 20 ms,
        librdkafka's and the Java client's backoff, which made about one commit in a hundred take 22 ms.)"""
        task = self._completing.get(tid)
        if task is not None and self.completion_wait_s > 0:
            await asyncio.wait({task}, timeout=self.completion_wait_s)

    def _in_transition(self, tid: str, meta: TxnMetadata) -> bool:
        """A state change of ``tid`` in flight (Kafka's ``pendingTransitionInProgress``): a write not yet in the ISR,
        or a prepared transaction whose markers and complete state are being written."""
        return meta.pending or tid in self._completing

    def _validate(self, tid: str, producer_id: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        """Kafka's checks before a transaction's partitions change or it ends: the coordinator, the id, the
        producer id and epoch, and no transition in flight."""
        if not tid:
            return ErrorCode.INVALID_REQUEST, None
        if unavailable := self.runtime.unavailable(tid):
            return unavailable, None
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != epoch:
            return PRODUCER_FENCED, None
        if meta.pending or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                          TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return 0, meta

    # -- InitProducerId ---------------------------------------------------------------------------------------
    async def _init_producer_id(self, version: int, request: Any) -> Struct:
        def answer(code: int, pid: int = -1, epoch: int = -1) -> Struct:
            return Struct(throttle_time_ms=0, error_code=_fenced(code, version, 4), producer_id=pid,
                          producer_epoch=epoch, ongoing_txn_producer_id=-1, ongoing_txn_producer_epoch=-1)

        tid = request.transactional_id
        if not tid:
            return answer(ErrorCode.INVALID_REQUEST)
        timeout = request.transaction_timeout_ms
        if timeout <= 0 or timeout > self.max_timeout_ms:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if unavailable := self.runtime.unavailable(tid):
            return answer(unavailable)
        given_pid = request.producer_id if version >= 3 else -1
        given_epoch = request.producer_epoch if version >= 3 else -1
        await self._await_completion(tid)
        if unavailable := self.runtime.unavailable(tid):   # resigned while waiting: the client finds the new one
            return answer(unavailable)
        now = self.timer.now()
        meta = self.txns.get(tid)
        if meta is None:
            try:
                pid = await self.allocate_producer_id()
            except Exception as exc:  # noqa: BLE001 - no producer id block: the client retries
                log.info("no producer id for transactional id %s: %s", tid, exc)
                return answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            meta = self.txns.get(tid)   # another request may have made it meanwhile
            if meta is None:
                fresh = TxnMetadata(tid, pid, 0, timeout, TxnState.EMPTY, set(), -1, now)
                code = await self._transition(None, fresh)
                if code:
                    return answer(code)
                return answer(ErrorCode.NONE, pid, 0)
        if meta.pending:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected = given_pid != -1
        # KIP-360, Kafka's isValidProducerId: a producer that knows its id (the current one, or the previous one
        # when its epoch was exhausted: a retry of the rotation it never got the answer of); its epoch is checked
        # only when no transaction is open (an Ongoing one is fenced whatever epoch the request names)
        if expected and given_pid != meta.producer_id and not (
                given_pid == meta.previous_producer_id and given_epoch >= MAX_EPOCH):
            return answer(PRODUCER_FENCED)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == TxnState.ONGOING:
            # the producer's transaction is aborted first, with a bumped epoch that fences its old instance
            code = await self._begin_end(meta, commit=False, fence=True, tv=self.server_transaction_version())
            return answer(code or ErrorCode.CONCURRENT_TRANSACTIONS)
        new = meta.replace(partitions=set(), state=TxnState.EMPTY, timeout_ms=timeout, start_ms=-1,
                           last_update_ms=now, pending=False)
        if meta.producer_epoch >= MAX_EPOCH and (not expected or given_epoch == meta.producer_epoch):
            try:
                new.producer_id = await self.allocate_producer_id()
            except Exception:  # noqa: BLE001
                return answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            new.previous_producer_id = meta.producer_id
            new.producer_epoch = 0
            new.last_producer_epoch = meta.producer_epoch if expected else -1
        elif not expected or given_epoch == meta.producer_epoch:
            # Kafka's prepareIncrementProducerEpoch: a new producer (no expected epoch) leaves no last epoch, so
            # only the producer that asked for this bump may retry it
            new.producer_epoch = meta.producer_epoch + 1
            new.last_producer_epoch = meta.producer_epoch if expected else -1
        elif given_epoch == meta.last_producer_epoch:   # a retry of the bump it already got
            return answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        else:
            return answer(PRODUCER_FENCED)
        code = await self._transition(meta, new)
        if code:
            return answer(code)
        return answer(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    # -- KIP-890: a partition leader verifies (part 1) or adds (part 2) a transactional batch's partitions --------
    async def add_or_verify(self, tid: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]],
                            operation: int) -> dict[tuple[str, int], int]:
        """Asks ``tid``'s coordinator (this broker's, or another's with AddPartitionsToTxn v5) to add
        ``partitions`` to the producer's transaction (``operation`` ADD_PARTITION: transaction protocol v2) or to
        verify they are in it: the error a Produce / TxnOffsetCommit answers per partition (see
        :func:`leader_verification_error`)."""
        add = operation == ADD_PARTITION
        code, _, found = await self.runtime.coordinator_for(tid, self.context.listener_name)
        codes: dict[tuple[str, int], int]
        if code:
            codes = {tp: int(code) for tp in partitions}
        elif found[0] == self.context.node_id:
            topics: dict[str, list[int]] = {}
            for topic, partition in partitions:
                topics.setdefault(topic, []).append(partition)
            results = await self.runtime.run(lambda: self._add(tid, producer_id, epoch, list(topics.items()), 5,
                                                               verify_only=not add))
            codes = {(t.name, p.partition_index): p.partition_error_code for t in results
                     for p in t.results_by_partition}
        elif self.send_verification is None:
            codes = {tp: int(ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        else:
            try:
                codes = await self.send_verification(found[0], found[1], found[2], tid, producer_id, epoch,
                                                     partitions, not add)
            except Exception as exc:  # noqa: BLE001 - the coordinator is unreachable: the producer retries
                log.info("transactional id %s: AddPartitionsToTxn at broker %d failed: %s", tid, found[0], exc)
                codes = {tp: int(ErrorCode.NETWORK_EXCEPTION) for tp in partitions}
        return {tp: leader_verification_error(int(codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)), operation)
                for tp in partitions}

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------------------
    async def _add_partitions(self, version: int, request: Any) -> Struct:
        if version < 4:
            topics = [(t.name, list(t.partitions)) for t in request.v3_and_below_topics]
            results = await self._add(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                      request.v3_and_below_producer_epoch, topics, version, verify_only=False)
            return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=[],
                          results_by_topic_v3_and_below=results)
        out = []
        for txn in request.transactions:
            topics = [(t.name, list(t.partitions)) for t in txn.topics]
            results = await self._add(txn.transactional_id, txn.producer_id, txn.producer_epoch, topics, version,
                                      verify_only=txn.verify_only)
            out.append(Struct(transactional_id=txn.transactional_id, topic_results=results))
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=out,
                      results_by_topic_v3_and_below=[])

    async def _add(self, tid: str, producer_id: int, epoch: int, topics: list[tuple[str, list[int]]], version: int,
                   *, verify_only: bool) -> list[Struct]:
        codes: dict[tuple[str, int], int] = {}
        bad = False
        for name, partitions in topics:
            count = self.context.partition_count(name)
            # Kafka's KafkaApis: a client (v0-3) may write to no internal topic (__transaction_state's markers
            # would corrupt the coordinator's own log)
            refused = version < 4 and is_internal(name)
            for p in partitions:
                known = count is not None and 0 <= p < count
                codes[(name, p)] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED) if refused else \
                    0 if known else int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                bad = bad or refused or not known
        if bad:   # Kafka adds none of them: the others were not attempted
            for key, code in codes.items():
                if not code:
                    codes[key] = int(ErrorCode.OPERATION_NOT_ATTEMPTED)
        elif verify_only:
            code = self._verify(tid, producer_id, epoch)
            meta = self.txns.get(tid)
            for key in codes:
                if code:
                    codes[key] = int(code)
                elif meta is None or key not in meta.partitions:
                    codes[key] = int(ErrorCode.TRANSACTION_ABORTABLE)
        else:
            await self._await_completion(tid)
            code, meta = self._validate(tid, producer_id, epoch)
            if not code:   # Kafka: AddPartitionsToTxn v4+ (from a partition leader) is transaction protocol v2
                code = await self._add_to(meta, set(codes), TV2 if version >= 4 else 0)
            for key in codes:
                codes[key] = _fenced(code, version, 2)
        return self._by_topic(topics, codes)

    @staticmethod
    def _by_topic(topics: list[tuple[str, list[int]]], codes: dict[tuple[str, int], int]) -> list[Struct]:
        return [Struct(name=name, results_by_partition=[
            Struct(partition_index=p, partition_error_code=codes[(name, p)]) for p in partitions])
            for name, partitions in topics]

    def verified_now(self, tid: str, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
        """Whether :meth:`add_or_verify` would verify ``topic``-``partition`` (NONE) for a Produce, known without an
        await: this node coordinates ``tid`` (it leads the id's ``__transaction_state`` partition, loaded) and the
        checks of the verify-only AddPartitionsToTxn pass with the partition in the producer's transaction at
        ``epoch``. False is no refusal: the caller asks :meth:`add_or_verify` (which answers the refusal, or asks
        another broker). The native Produce path asks this on the event loop, in the same turn as its append."""
        if self._verify(tid, producer_id, epoch):
            return False
        meta = self.txns.get(tid)
        return meta is not None and (topic, partition) in meta.partitions

    def added_now(self, tid: str, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
        """Transaction protocol v2 (Produce v12+): adds ``topic``-``partition`` to the producer's transaction without
        an await, as :meth:`add_or_verify` with ADD_PARTITION would, when that needs no wait: this node coordinates
        ``tid``, the checks of the adding AddPartitionsToTxn pass (no transition in flight, no completion being
        written), and the Ongoing record is in the ISR as soon as it is appended (``__transaction_state``'s
        partition is not replicated: one node, or replication factor 1). True: the partition is in the transaction,
        its new state written and applied, so the batch may be appended. False is no refusal and changes nothing:
        the caller asks :meth:`add_or_verify`, which waits, answers the refusal, or asks another broker. The native
        Produce path asks this on the event loop, in the same turn as its append."""
        if tid in self._completing or self._verify(tid, producer_id, epoch):
            return False
        meta = self.txns.get(tid)
        if meta is None or meta.pending or meta.state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return False
        if meta.state == TxnState.ONGOING and (topic, partition) in meta.partitions:
            return True
        count = self.context.partition_count(topic)
        if count is None or not 0 <= partition < count:
            return False
        if self.topic is not None:
            at_once = getattr(self.context, "replicated_at_once", None)
            if at_once is None or not at_once(TOPIC, self.partition_for(tid)):
                return False
        now = self.timer.now()
        start = meta.start_ms if meta.state == TxnState.ONGOING else now
        new = meta.replace(state=TxnState.ONGOING, partitions=meta.partitions | {(topic, partition)},
                           start_ms=start, last_update_ms=now, client_transaction_version=TV2, pending=False)
        try:
            self.runtime.write(tid, [R.record(new, 1 if self.server_transaction_version() >= 1 else 0,
                                              meta.producer_id)])
        except Exception as exc:  # noqa: BLE001 - the Python path writes it again and answers the error
            log.warning("transactional id %s: writing its state failed: %s", tid, exc)
            return False
        self.txns[tid] = new
        return True

    def _verify(self, tid: str, producer_id: int, epoch: int) -> int:
        """Kafka's ``handleVerifyPartitionsInTransaction`` checks (no pending-transition check: the append is
        checked again against the partition's producer state)."""
        if not tid:
            return int(ErrorCode.INVALID_REQUEST)
        if unavailable := self.runtime.unavailable(tid):
            return int(unavailable)
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != epoch:
            return int(PRODUCER_FENCED)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return int(ErrorCode.CONCURRENT_TRANSACTIONS)
        return 0

    async def _add_to(self, meta: TxnMetadata | None, partitions: set[tuple[str, int]], tv: int) -> int:
        assert meta is not None
        if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
            return 0
        now = self.timer.now()
        start = meta.start_ms if meta.state == TxnState.ONGOING else now
        new = meta.replace(state=TxnState.ONGOING, partitions=meta.partitions | partitions,
                           start_ms=start, last_update_ms=now, client_transaction_version=tv, pending=False)
        return await self._transition(meta, new)

    async def _add_offsets(self, version: int, request: Any) -> Struct:
        await self._await_completion(request.transactional_id)
        code, meta = self._validate(request.transactional_id, request.producer_id, request.producer_epoch)
        if not code:   # Kafka adds the partition of any group id, "" too (no group is looked at)
            code = await self._add_to(meta, {(OFFSETS_TOPIC, partition_for(request.group_id,
                                                                           self.offsets_partitions))}, 0)
        return Struct(throttle_time_ms=0, error_code=_fenced(code, version, 2))

    # -- EndTxn -----------------------------------------------------------------------------------------------
    async def _end_txn(self, version: int, request: Any) -> Struct:
        if version >= 5:   # Kafka: EndTxn v5+ is transaction protocol v2
            return await self._end_txn_v2(request)

        def answer(code: int) -> Struct:
            return Struct(throttle_time_ms=0, error_code=_fenced(code, version, 2), producer_id=-1,
                          producer_epoch=-1)

        tid = request.transactional_id
        commit = bool(request.committed)
        if not tid:
            return answer(ErrorCode.INVALID_REQUEST)
        if unavailable := self.runtime.unavailable(tid):
            return answer(unavailable)
        await self._await_completion(tid)
        if unavailable := self.runtime.unavailable(tid):   # resigned while waiting: the client finds the new one
            return answer(unavailable)
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != request.producer_id:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != request.producer_epoch:
            return answer(PRODUCER_FENCED)
        if self._in_transition(tid, meta):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state == TxnState.ONGOING:
            return answer(await self._begin_end(meta, commit=commit, fence=False, tv=0))
        if state == TxnState.COMPLETE_COMMIT:
            return answer(0 if commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.COMPLETE_ABORT:
            return answer(0 if not commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.PREPARE_COMMIT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.PREPARE_ABORT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.PREPARE_EPOCH_FENCE:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)   # Empty, Dead

    async def _end_txn_v2(self, request: Any) -> Struct:
        """EndTxn under transaction protocol v2 (Kafka's ``endTransaction`` with TV2): the request's epoch is the
        current one (a new end) or the one below it (a retry of an end that bumped it); the answer carries the
        producer id and epoch the producer continues with."""
        def answer(code: int, meta: TxnMetadata | None = None) -> Struct:
            pid, epoch = -1, -1
            if meta is not None and not code:
                # an end that exhausted the epochs answers the next producer id, epoch 0 (the Java client's
                # EndTxnHandler takes it as is)
                pid, epoch = (meta.next_producer_id, 0) if meta.next_producer_id >= 0 else \
                    (meta.producer_id, meta.producer_epoch)
            return Struct(throttle_time_ms=0, error_code=int(code), producer_id=pid, producer_epoch=epoch)

        tid = request.transactional_id
        pid, epoch, commit = request.producer_id, request.producer_epoch, bool(request.committed)
        if not tid:
            return answer(ErrorCode.INVALID_REQUEST)
        if unavailable := self.runtime.unavailable(tid):
            return answer(unavailable)
        await self._await_completion(tid)
        if unavailable := self.runtime.unavailable(tid):   # resigned while waiting: the client finds the new one
            return answer(unavailable)
        meta = self.txns.get(tid)
        if meta is None:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if self._in_transition(tid, meta):
            # Kafka checks its pending transition first: from PrepareCommit/PrepareAbort on, it is the complete
            # state while the markers are written (its prepareComplete), so the next transaction's EndTxn (the
            # bumped epoch, Kafka's PrepareCommit rule would say fenced) and a retry are both told to retry
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        # a retry of an end whose bump exhausted the epochs: the id moved on to its next producer id
        retry_on_overflow = meta.previous_producer_id == pid and epoch == MAX_EPOCH and meta.producer_epoch == 0
        retry_on_bump = meta.producer_epoch == epoch + 1
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid = retry_on_bump
        elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        else:   # Ongoing, Empty: the same epoch is the next end, never a retry
            valid = epoch == meta.producer_epoch
        retry = retry_on_bump or retry_on_overflow
        if meta.producer_id != pid and not retry_on_overflow:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return answer(PRODUCER_FENCED)

        async def begin(*, commit: bool, nothing_added: bool = False) -> Struct:
            code = await self._begin_end(meta, commit=commit, fence=False, tv=TV2, nothing_added=nothing_added)
            return answer(code, self.txns.get(tid))

        if state == TxnState.ONGOING:
            return await begin(commit=commit)
        if state == TxnState.COMPLETE_COMMIT:
            if commit:
                return answer(ErrorCode.NONE if retry else ErrorCode.INVALID_TXN_STATE, meta)
            return answer(ErrorCode.INVALID_TXN_STATE) if retry else await begin(commit=False, nothing_added=True)
        if state == TxnState.COMPLETE_ABORT:
            if commit:
                return answer(ErrorCode.INVALID_TXN_STATE)
            return answer(ErrorCode.NONE, meta) if retry else await begin(commit=False, nothing_added=True)
        if state == TxnState.PREPARE_COMMIT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.PREPARE_ABORT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE)
        if state == TxnState.EMPTY and not commit:   # v2 may abort a transaction that added nothing
            return await begin(commit=False, nothing_added=True)
        return answer(ErrorCode.INVALID_TXN_STATE)   # Empty (commit), Dead, PrepareEpochFence

    async def _begin_end(self, meta: TxnMetadata, *, commit: bool, fence: bool, tv: int,
                         nothing_added: bool = False) -> int:
        """Ongoing -> PrepareCommit/PrepareAbort in the log; then the markers and the complete state in the
        background. ``fence``: the coordinator aborts on its own (a timeout, a re-init), bumping the epoch so the
        producer is fenced; else ``tv`` 2 (transaction protocol v2) bumps it for every end, allocating the next
        producer id when that exhausts the epochs (Kafka's ``prepareAbortOrCommit``)."""
        now = self.timer.now()
        new = meta.replace(state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                           last_update_ms=now, client_transaction_version=tv, pending=False)
        if nothing_added:   # an end with no partition added: the start time is the end's (Kafka does the same)
            new.start_ms = now
        if fence and meta.producer_epoch < MAX_EPOCH:
            new.last_producer_epoch = meta.producer_epoch
            new.producer_epoch = meta.producer_epoch + 1
        if tv >= TV2 and not fence and new.producer_epoch < LAST_EPOCH:
            # (a fence's bump is the abort's: Kafka 4.3 ends a fenced v2 transaction one epoch up, not two)
            if new.producer_epoch >= MAX_EPOCH:
                try:
                    new.next_producer_id = await self.allocate_producer_id()
                except Exception as exc:  # noqa: BLE001 - no producer id block: the client retries
                    log.info("no next producer id for transactional id %s: %s", meta.transactional_id, exc)
                    return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            new.last_producer_epoch = new.producer_epoch
            new.producer_epoch += 1
        code = await self._transition(meta, new)
        if code:
            return code
        self._start_completion(meta.transactional_id)
        return 0

    def _start_completion(self, tid: str) -> None:
        """Writes the markers and the complete state of ``tid``'s prepared transaction (:meth:`_complete`), from the
        loop's turn after next: started by EndTxn before its answer is sent, it lets the answer leave first (its
        send is queued on the loop for the next turn), which saves the producer the markers' time (~0.1 ms a
        commit). It is run there at once (``klog.broker.run_now``), in a task only from where it has to wait (the
        ISR of a replicated partition, another broker's markers, a retry's backoff): a task for every
        transaction cost the broker more CPU than the markers' own Python. ``_completing[tid]`` is done once it
        has ended; cancelling it (unload, stop) cancels it."""
        if tid in self._completing:
            return
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        self._completing[tid] = started
        loop.call_soon(loop.call_soon, self._run_completion, tid, started)

    def _run_completion(self, tid: str, started: asyncio.Future[None]) -> None:
        if started.done() or self._completing.get(tid) is not started:
            return   # cancelled meanwhile (unloaded, stopping)
        coroutine = self._complete(tid)
        try:
            finished, waiting, context = start_now(coroutine)
        except Exception:  # noqa: BLE001 - as a task's exception: logged, the id's next request is answered
            log.exception("transactional id %s: writing its markers failed", tid)
            finished, waiting = True, None
        if finished:
            del self._completing[tid]
            started.set_result(None)
            return
        task = asyncio.get_running_loop().create_task(finish_in(context, coroutine, waiting),
                                                      name=f"klog-txn-markers-{tid}")
        self._completing[tid] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._completing.get(tid) is t:
                del self._completing[tid]
            if not started.done():
                started.set_result(None)

        task.add_done_callback(done)

    async def _complete(self, tid: str) -> None:
        """Writes the markers of ``tid``'s prepared transaction to every partition, then its complete state."""
        backoff = MARKER_RETRY_BACKOFF_S
        while True:
            meta = self.txns.get(tid)
            if meta is None or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) \
                    or self.runtime.unavailable(tid):
                return
            commit = meta.state == TxnState.PREPARE_COMMIT
            remaining = set(meta.partitions)
            while remaining:
                remaining = await self._write_markers(tid, meta, remaining, commit)
                if not remaining:
                    break
                if self.txns.get(tid) is not meta or self.runtime.unavailable(tid):
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_MAX_BACKOFF_S)
            now = self.timer.now()
            done = meta.replace(state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                            partitions=set(), last_update_ms=now, pending=False)
            if meta.client_transaction_version >= TV2 and meta.next_producer_id >= 0:
                # the end exhausted the producer id's epochs: the producer continues with the next id, epoch 0
                done.previous_producer_id, done.producer_id = meta.producer_id, meta.next_producer_id
                done.producer_epoch, done.next_producer_id = 0, -1
            code = await self.runtime.run(lambda: self._transition(meta, done))
            if not code:
                log.debug("transactional id %s: %s", tid, done.state.kafka_name)
                return
            if self.runtime.unavailable(tid):
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MARKER_RETRY_MAX_BACKOFF_S)

    async def _write_markers(self, tid: str, meta: TxnMetadata, partitions: set[tuple[str, int]],
                             commit: bool) -> set[tuple[str, int]]:
        """One attempt at every partition still without its marker; the partitions left."""
        by_leader: dict[tuple[int, str, int], list[tuple[str, int]]] = {}
        left: set[tuple[str, int]] = set()
        for topic, partition in partitions:
            if self.context.partition_count(topic) is None:
                continue   # deleted: nothing to mark (Kafka skips it too)
            found = self.context.partition_leader_endpoint(topic, partition, self.context.listener_name)
            if found is None:
                left.add((topic, partition))
                continue
            by_leader.setdefault(found, []).append((topic, partition))
        epoch = self._coordinator_epoch(tid)

        async def send(node: tuple[int, str, int], tps: list[tuple[str, int]]) -> None:
            try:
                codes = await self.send_markers(node[0], node[1], node[2], tps, meta.producer_id,
                                                meta.producer_epoch, commit, epoch,
                                                meta.client_transaction_version)
            except Exception as exc:  # noqa: BLE001 - the broker is unreachable: retried
                log.info("transactional id %s: markers to broker %d failed: %s", tid, node[0], exc)
                left.update(tps)
                return
            for tp in tps:
                code = codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    continue
                if code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    # the partition has a later epoch of the producer: this marker is stale there (Kafka logs it
                    # and considers the partition done)
                    log.warning("transactional id %s: %s-%d refused a stale marker", tid, tp[0], tp[1])
                    continue
                left.add(tp)

        if len(by_leader) == 1:   # the usual case: one leader (no task per leader for gather to make)
            [(node, tps)] = by_leader.items()
            await send(node, tps)
        else:
            await asyncio.gather(*(send(node, tps) for node, tps in by_leader.items()))
        return left

    # -- DescribeTransactions / ListTransactions (kafka-transactions describe / list) -------------------------
    def describe(self, tid: str) -> dict[str, Any]:
        """One transactional id's state as DescribeTransactions answers it."""
        answer = describe_error(tid, ErrorCode.NONE)
        code = ErrorCode.INVALID_REQUEST if not tid else self.runtime.unavailable(tid)
        meta = self.txns.get(tid) if not code else None
        if not code and meta is None:
            code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if code or meta is None:
            answer["error_code"] = int(code)
            return answer
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        answer.update(transaction_state=meta.state.kafka_name, transaction_timeout_ms=meta.timeout_ms,
                      transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                      producer_epoch=meta.producer_epoch,
                      topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        return answer

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int,
                          pattern: str | None) -> tuple[list[str], list[dict[str, Any]]]:
        """ListTransactions on this coordinator: (the state filters no state is named, the transactions that
        pass every filter: states, producer ids, started more than ``duration_ms`` ago (-1: any; Kafka's filter,
        which every state passes whose start time is older, an Empty id's -1 too), id regex). An invalid regex
        raises ``re.error`` (INVALID_REGULAR_EXPRESSION)."""
        names = {s.kafka_name: s for s in TxnState}
        unknown = [name for name in dict.fromkeys(states) if name not in names]   # Kafka: each name once
        wanted = {names[name] for name in states if name in names}
        regex = re.compile(pattern) if pattern else None
        now = self.timer.now()
        out = []
        for tid, meta in self.txns.items():
            if self.runtime.unavailable(tid) or meta.state == TxnState.DEAD:
                continue
            if states and meta.state not in wanted:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if duration_ms >= 0 and now - meta.start_ms <= duration_ms:
                continue
            if regex is not None and regex.fullmatch(tid) is None:
                continue
            out.append({"transactional_id": tid, "producer_id": meta.producer_id,
                        "transaction_state": meta.state.kafka_name})
        return unknown, out

    # -- timers -----------------------------------------------------------------------------------------------
    def _abort_timed_out_and_reschedule(self) -> None:
        try:
            self.abort_timed_out()
        finally:
            self.timer.schedule(("txn-abort-timed-out",), self.abort_check_ms, self._abort_timed_out_and_reschedule)

    def abort_timed_out(self, now: int | None = None) -> int:
        """Aborts (in the background) every ongoing transaction open longer than its timeout; how many."""
        now = self.timer.now() if now is None else now
        count = 0
        for tid, meta in list(self.txns.items()):
            if meta.state != TxnState.ONGOING or meta.pending or self.runtime.unavailable(tid):
                continue
            if meta.start_ms + meta.timeout_ms >= now:
                continue
            log.info("transactional id %s: aborting its transaction (open for %d ms, timeout %d ms)", tid,
                     now - meta.start_ms, meta.timeout_ms)
            asyncio.get_running_loop().create_task(self._abort_in_background(meta))
            count += 1
        return count

    async def _abort_in_background(self, meta: TxnMetadata) -> None:
        async def abort() -> int:
            # scheduled from the state the timer saw: the client may have ended the transaction (or another
            # request changed it) before this task ran; then there is nothing to abort (Kafka's
            # abortTimedOutTransactions checks the same under the transaction's lock)
            tid = meta.transactional_id
            if self.txns.get(tid) is not meta or meta.state != TxnState.ONGOING or self._in_transition(tid, meta):
                return 0
            return await self._begin_end(meta, commit=False, fence=True, tv=self.server_transaction_version())

        code = await self.runtime.run(abort)
        if code:
            log.info("transactional id %s: aborting its timed-out transaction failed (%d); retried at the next "
                     "check", meta.transactional_id, code)

    def _expire_ids_and_reschedule(self) -> None:
        try:
            self.expire_ids()
        finally:
            self.timer.schedule(("txn-expire-ids",), self.expire_check_ms, self._expire_ids_and_reschedule)

    def expire_ids(self, now: int | None = None) -> int:
        """Removes the ids whose last transaction ended longer than transactional.id.expiration.ms ago."""
        now = self.timer.now() if now is None else now
        expired = 0
        for tid, meta in list(self.txns.items()):
            if meta.pending or self.runtime.unavailable(tid) or meta.state not in (
                    TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                continue
            if meta.last_update_ms + self.expiration_ms > now:
                continue
            try:
                self.runtime.write(tid, [R.tombstone(tid)])
            except Exception as exc:  # noqa: BLE001 - retried at the next check
                log.warning("transactional id %s: writing its tombstone failed: %s", tid, exc)
                continue
            del self.txns[tid]
            expired += 1
        if expired:
            log.info("removed %d expired transactional ids", expired)
        return expired

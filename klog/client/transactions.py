"""The transactional producer's state machine (Kafka's ``TransactionManager``), on the producer's event loop.

Sequencing, as Apache Kafka's Java producer and librdkafka do it:

* ``init_transactions``: FindCoordinator (key type 1) for the ``transactional.id``, then InitProducerId with it
  (the coordinator completes or aborts a transaction left open by an earlier incarnation and bumps the epoch,
  fencing it).
* ``begin_transaction`` is local. The sender holds back a partition's first batch of the transaction until
  AddPartitionsToTxn for that partition succeeded (one request at a time, for all partitions waiting).
* ``send_offsets_to_transaction``: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the
  group's coordinator with the consumer's generation and member id (KIP-447).
* ``commit_transaction``: flush, then EndTxn(commit); a record that failed makes the transaction abortable
  instead. ``abort_transaction``: drop queued batches, wait for those in flight, EndTxn(abort).
* Two-phase use (not in Kafka's producer API; Flink's KafkaSink does it by reflection): ``prepare_transaction``
  flushes and hands out the transactional id, producer id and epoch, leaving the transaction open; any process
  then ends it with EndTxn for that id and epoch (``end_prepared``), which is all the coordinator checks.
* CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and lost
  connections are retried (a coordinator lookup again where it moved) until the call's timeout.
* PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, authorization failures and INVALID_TXN_STATE are fatal; other
  failures of a transaction make it abortable (:class:`TransactionAbortableError`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Mapping
from typing import Any

from klog.protocol import ApiKey, Struct

from .errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    TransactionAbortableError,
    TransactionError,
    TransactionFatalError,
    TransactionStateError,
    for_code,
)
from .group import find_coordinator
from .types import ConsumerGroupMetadata, OffsetAndMetadata, PreparedTransaction, TopicPartition

__all__ = ["TxnState", "TransactionManager"]

log = logging.getLogger("klog.client.transactions")

_monotonic = time.monotonic

#: Errors after which the request goes to a freshly looked-up coordinator.
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
#: Errors after which the same request is sent again after a short wait.
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_FATAL = _FENCED | {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE,
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                    ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT}
#: Client versions used: the classic (KIP-98) protocol, which both klog and Apache Kafka 4.x serve.
_ADD_PARTITIONS_MAX = 3
_END_TXN_MAX = 4
#: Kafka's TransactionManager retries CONCURRENT_TRANSACTIONS on AddPartitionsToTxn after 20 ms.
_ADD_PARTITIONS_RETRY_S = 0.02


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    #: prepare_transaction() handed the open transaction over: only close() is left.
    PREPARED = "prepared"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class TransactionManager:
    """Transaction state of one producer (event loop only, except :meth:`gate` which the sender calls)."""

    def __init__(self, core: Any, transactional_id: str, timeout_ms: int) -> None:
        #: The ProducerCore (not imported: producer.py imports this module).
        self.core = core
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = TxnState.UNINITIALIZED
        #: Partitions the coordinator knows are in the current transaction.
        self.partitions: set[tuple[str, int]] = set()
        #: Partitions with a batch waiting for AddPartitionsToTxn.
        self.pending: set[tuple[str, int]] = set()
        self._adding: asyncio.Task[None] | None = None
        self.error: TransactionError | None = None
        self.coordinator: int | None = None
        #: AddOffsetsToTxn succeeded in the current transaction (it must end with EndTxn then).
        self._offsets_added = False
        self._busy = False

    # ------------------------------------------------------------------ state
    def _fatal(self, message: str, cause: BaseException | None = None) -> TransactionFatalError:
        err = TransactionFatalError(f"transactional producer {self.transactional_id!r}: {message}", cause)
        self.state = TxnState.FATAL_ERROR
        self.error = err
        return err

    def _abortable(self, message: str, cause: BaseException | None = None) -> TransactionError:
        if self.state is TxnState.FATAL_ERROR and self.error is not None:
            return self.error
        err = TransactionAbortableError(
            f"transaction of {self.transactional_id!r} must be aborted: {message}", cause)
        if self.state is not TxnState.ABORTABLE_ERROR:
            self.state = TxnState.ABORTABLE_ERROR
            self.error = err
        return err

    def _classify(self, code: int, what: str, message: str | None = None) -> TransactionError:
        cause = for_code(code, message)
        if code in _FENCED:
            return self._fatal(f"{what}: fenced by a newer producer with the same transactional.id ({cause.name})",
                               cause)
        if code in _FATAL:
            return self._fatal(f"{what}: {cause.name}: {cause}", cause)
        return self._abortable(f"{what}: {cause.name}: {cause}", cause)

    def _check_not_failed(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise self.error

    def _begin_op(self, name: str) -> None:
        if self._busy:
            raise TransactionStateError(f"{name}: another transactional call of this producer is in progress")
        self._busy = True

    def produce_failed(self, err: BaseException) -> None:
        """A record of the transaction was not written (sender): the transaction can only be aborted."""
        code = getattr(err, "code", None)
        if isinstance(err, KafkaError) and code in _FENCED:
            self._fatal("a produce request was fenced by a newer producer with the same transactional.id", err)
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self._abortable(f"a record was not written: {err}", err)

    def gate(self, tp: tuple[str, int]) -> BaseException | None | bool:
        """May the sender drain a batch of ``tp`` now? True: yes; False: not yet (AddPartitionsToTxn pending);
        an exception: fail the batch with it."""
        st = self.state
        if st is TxnState.IN_TRANSACTION or st is TxnState.COMMITTING:
            # (Records sent before commit_transaction() may still be queued while it flushes.)
            if tp in self.partitions:
                return True
            self.pending.add(tp)
            if self._adding is None:
                self._adding = self.core.loop.create_task(self._add_partitions())
            return False
        if st in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            return self.error
        if st is TxnState.ABORTING:
            return TransactionAbortableError("the transaction was aborted before the record was sent")
        if st is TxnState.PREPARED:
            return TransactionStateError("send() after prepare_transaction(): the transaction was handed over")
        return TransactionStateError(
            "send() outside a transaction: call init_transactions() once, then begin_transaction()")

    # ------------------------------------------------------------------ coordinator requests
    async def _coordinator_request(self, api_key: int, make_body: Any, version_cap: int, deadline: float,
                                   error_of: Any, *, group: str | None = None) -> tuple[Any, int]:
        """Send to the transaction coordinator (or ``group``'s coordinator) until an answer that is not a
        retriable coordinator error; returns (response, error code)."""
        core = self.core
        attempt = 0
        node: int | None = None
        while True:
            last: BaseException | None = None
            try:
                if group is None:
                    if self.coordinator is None:
                        self.coordinator = await find_coordinator(
                            core, self.transactional_id, timeout=max(0.0, deadline - _monotonic()), key_type=1)
                    node = self.coordinator
                elif node is None:
                    node = await find_coordinator(core, group, timeout=max(0.0, deadline - _monotonic()))
                conn = await core.cluster.connection(node)
                v = min(conn.version(api_key), version_cap)
                r = await asyncio.wait_for(conn.request(api_key, make_body(), version=v),
                                           max(0.001, deadline - _monotonic()))
                code = error_of(r)
                if code in _COORDINATOR_MOVED:
                    last = for_code(code)
                    if group is None:
                        self.coordinator = None
                    else:
                        node = None
                elif code in _RETRY:
                    last = for_code(code)
                else:
                    return r, code
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.TimeoutError) as e:
                last = e
                if group is None:
                    self.coordinator = None
                else:
                    node = None
            if _monotonic() >= deadline:
                raise KafkaTimeoutError(f"{ApiKey(api_key).name} for transactional id {self.transactional_id!r} "
                                        f"did not complete in time (last: {last})")
            if isinstance(last, KafkaError) and last.code == ErrorCode.CONCURRENT_TRANSACTIONS and \
                    api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
                delay = _ADD_PARTITIONS_RETRY_S
            else:
                delay = core.retry_backoff.delay(attempt)
            await asyncio.sleep(min(delay, max(0.0, deadline - _monotonic())))
            attempt += 1

    def _deadline(self, timeout: float | None) -> float:
        return _monotonic() + (timeout if timeout is not None else self.core.max_block)

    async def _init_producer_id(self, deadline: float, bump: bool) -> None:
        core = self.core

        def body() -> Any:
            return Struct(transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
                          producer_id=core.producer_id if bump else -1,
                          producer_epoch=core.producer_epoch if bump else -1)

        r, code = await self._coordinator_request(ApiKey.INIT_PRODUCER_ID, body, 5, deadline,
                                                  lambda r: r.error_code)
        if code:
            raise self._classify(code, "InitProducerId")
        core.set_producer_id(r.producer_id, r.producer_epoch)

    # ------------------------------------------------------------------ the API
    async def init_transactions(self, timeout: float | None) -> None:
        if self.state not in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            raise TransactionStateError(f"init_transactions() already called (state: {self.state.value})")
        self._begin_op("init_transactions")
        try:
            self.state = TxnState.INITIALIZING
            await self._init_producer_id(self._deadline(timeout), bump=False)
            self.state = TxnState.READY
            log.info("transactional id %r: producer id %d epoch %d", self.transactional_id,
                     self.core.producer_id, self.core.producer_epoch)
        finally:
            self._busy = False

    def begin_transaction(self) -> None:
        if self.state is TxnState.READY:
            self.partitions.clear()
            self.pending.clear()
            self.error = None
            self.state = TxnState.IN_TRANSACTION
            return
        self._check_not_failed()
        if self.state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            raise TransactionStateError("begin_transaction() before init_transactions()")
        raise TransactionStateError(f"begin_transaction() while the producer is {self.state.value}")

    async def _add_partitions(self) -> None:
        """AddPartitionsToTxn for the partitions waiting (again while more came meanwhile)."""
        try:
            while self.pending and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                adding = sorted(self.pending - self.partitions)
                if not adding:
                    self.pending.clear()
                    break
                by_topic: dict[str, list[int]] = {}
                for t, p in adding:
                    by_topic.setdefault(t, []).append(p)
                core = self.core

                def body() -> Any:
                    return Struct(v3_and_below_transactional_id=self.transactional_id,
                                  v3_and_below_producer_id=core.producer_id,
                                  v3_and_below_producer_epoch=core.producer_epoch,
                                  v3_and_below_topics=[Struct(name=t, partitions=ps) for t, ps in by_topic.items()])

                def worst(r: Any) -> int:
                    codes: list[int] = [p.partition_error_code for t in r.results_by_topic_v3_and_below
                             for p in t.results_by_partition]
                    bad = [c for c in codes if c and c != ErrorCode.OPERATION_NOT_ATTEMPTED]
                    # Retry the whole request on a retriable error (as Kafka's client does).
                    for c in bad:
                        if c in _COORDINATOR_MOVED or c in _RETRY:
                            return c
                    return bad[0] if bad else 0

                try:
                    r, code = await self._coordinator_request(
                        ApiKey.ADD_PARTITIONS_TO_TXN, body, _ADD_PARTITIONS_MAX,
                        _monotonic() + core.max_block, worst)
                except KafkaTimeoutError as e:
                    self._abortable(f"AddPartitionsToTxn timed out: {e}", e)
                    break
                if code:
                    self._classify(code, f"AddPartitionsToTxn {adding}")
                    break
                self.partitions.update(adding)
                self.pending.difference_update(adding)
        except TransactionError:
            pass
        except Exception as e:  # pragma: no cover - a bug: make it visible on the records
            log.exception("AddPartitionsToTxn failed")
            self._abortable(f"AddPartitionsToTxn failed: {e}", e)
        finally:
            self._adding = None
            self.core.wake_sender()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any,
                                          timeout: float | None) -> None:
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must be the consumer's consumer_group_metadata() (or a group id)")
        self._check_not_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise TransactionStateError(
                f"send_offsets_to_transaction() outside a transaction (producer is {self.state.value})")
        by_topic: dict[str, list[Any]] = {}
        for tp, o in offsets.items():
            topic, partition = TopicPartition(*tp)
            if isinstance(o, OffsetAndMetadata):
                off, meta, epoch = o.offset, o.metadata, o.leader_epoch
            else:
                off, meta, epoch = int(o), "", -1
            if off < 0:
                raise ValueError(f"offset of {topic}-{partition} must be >= 0, not {off}")
            by_topic.setdefault(topic, []).append(Struct(partition_index=partition, committed_offset=off,
                                                         committed_leader_epoch=epoch, committed_metadata=meta))
        self._begin_op("send_offsets_to_transaction")
        core = self.core
        deadline = self._deadline(timeout)
        gm = group_metadata
        try:
            r, code = await self._coordinator_request(
                ApiKey.ADD_OFFSETS_TO_TXN,
                lambda: Struct(transactional_id=self.transactional_id, producer_id=core.producer_id,
                               producer_epoch=core.producer_epoch, group_id=gm.group_id),
                4, deadline, lambda r: r.error_code)
            if code:
                raise self._classify(code, f"AddOffsetsToTxn(group {gm.group_id!r})")
            self._offsets_added = True

            def commit_body() -> Any:
                return Struct(transactional_id=self.transactional_id, group_id=gm.group_id,
                              producer_id=core.producer_id, producer_epoch=core.producer_epoch,
                              generation_id=gm.generation_id, member_id=gm.member_id,
                              group_instance_id=gm.group_instance_id,
                              topics=[Struct(name=t, partitions=ps) for t, ps in by_topic.items()])

            def worst(r: Any) -> int:
                codes: list[int] = [p.error_code for t in r.topics for p in t.partitions if p.error_code]
                for c in codes:
                    if c in _COORDINATOR_MOVED or c in _RETRY or c == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        return c if c != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                return codes[0] if codes else 0

            r, code = await self._coordinator_request(ApiKey.TXN_OFFSET_COMMIT, commit_body, 5, deadline, worst,
                                                      group=gm.group_id)
            if code:
                raise self._classify(code, f"TxnOffsetCommit(group {gm.group_id!r})")
        except KafkaTimeoutError as e:
            # Kafka's producer leaves the call to be retried; the transaction can still be aborted.
            raise TransactionError(f"send_offsets_to_transaction timed out: {e}", e) from e
        finally:
            self._busy = False

    async def commit_transaction(self, timeout: float | None) -> None:
        self._check_not_failed()
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            raise TransactionStateError(f"commit_transaction() without a transaction (producer is "
                                        f"{self.state.value})")
        self._begin_op("commit_transaction")
        deadline = self._deadline(timeout)
        try:
            self.state = TxnState.COMMITTING
            try:
                await self.core.flush(max(0.0, deadline - _monotonic()))
            except KafkaTimeoutError as e:
                raise TransactionError(f"commit_transaction: records not all sent in time ({e}); call "
                                       f"commit_transaction() again or abort_transaction()", e) from e
            if self.state is not TxnState.COMMITTING:
                self._check_not_failed()
            await self._end_txn(True, deadline)
        finally:
            self._busy = False

    async def prepare_transaction(self, timeout: float | None) -> PreparedTransaction:
        """Flush and hand the open transaction over (first phase of a two-phase commit): every record of it is
        acknowledged and its partitions and offsets are known to the coordinator; another process commits or
        aborts it with :meth:`end_prepared`. This producer can only be closed afterwards (closing does not abort)."""
        self._check_not_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise TransactionStateError(f"prepare_transaction() without a transaction (producer is "
                                        f"{self.state.value})")
        self._begin_op("prepare_transaction")
        deadline = self._deadline(timeout)
        try:
            try:
                await self.core.flush(max(0.0, deadline - _monotonic()))
            except KafkaTimeoutError as e:
                raise TransactionError(f"prepare_transaction: records not all sent in time ({e})", e) from e
            self._check_not_failed()
            self.state = TxnState.PREPARED
            return PreparedTransaction(self.transactional_id, self.core.producer_id, self.core.producer_epoch)
        finally:
            self._busy = False

    async def end_prepared(self, prepared: PreparedTransaction, commit: bool, timeout: float | None) -> None:
        """EndTxn for a transaction another producer instance prepared (this manager only lends its
        ``transactional_id``'s coordinator lookup and retries). Ending it again the same way succeeds (the coordinator
        answers a repeated EndTxn of a completed transaction with success); a transaction the coordinator aborted
        meanwhile (timeout, a newer instance's InitProducerId) raises :class:`TransactionFatalError`."""
        await self._end_txn(commit, self._deadline(timeout), prepared)

    async def abort_transaction(self, timeout: float | None) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING,
                              TxnState.COMMITTING):
            raise TransactionStateError(f"abort_transaction() without a transaction (producer is "
                                        f"{self.state.value})")
        self._begin_op("abort_transaction")
        deadline = self._deadline(timeout)
        try:
            self.state = TxnState.ABORTING
            core = self.core
            core.drop_queued(TransactionAbortableError("the transaction was aborted before the record was sent"))
            try:
                await core.flush(max(0.0, deadline - _monotonic()))  # what is in flight completes
            except KafkaTimeoutError as e:
                raise TransactionError(f"abort_transaction: requests in flight did not complete in time ({e}); "
                                       f"call abort_transaction() again", e) from e
            if self.state is TxnState.FATAL_ERROR:
                assert self.error is not None
                raise self.error
            await self._end_txn(False, deadline)
            if core.bump_needed():
                # A batch failed for good: its partition's sequence chain is broken, so get a new epoch (KIP-360).
                await self._init_producer_id(deadline, bump=True)
        finally:
            self._busy = False

    async def _end_txn(self, commit: bool, deadline: float, prepared: PreparedTransaction | None = None) -> None:
        """EndTxn for this producer's transaction (its state follows the answer), or for ``prepared``, a transaction
        another instance handed over (this manager's state is left alone; any failure is fatal to that
        transaction)."""
        core = self.core
        what = "commit" if commit else "abort"
        if prepared is None:
            if not self.partitions and not self._offsets_added:
                # Nothing was added on the coordinator: Kafka's client completes locally as well.
                self._completed()
                return
            name, again = f"EndTxn({what})", f"; call {what}_transaction() again"
        else:
            name, again = f"EndTxn({what}) of prepared transaction {prepared}", ""

        def body() -> Any:
            if prepared is not None:
                return Struct(transactional_id=prepared.transactional_id, producer_id=prepared.producer_id,
                              producer_epoch=prepared.producer_epoch, committed=commit)
            return Struct(transactional_id=self.transactional_id, producer_id=core.producer_id,
                          producer_epoch=core.producer_epoch, committed=commit)

        try:
            _, code = await self._coordinator_request(ApiKey.END_TXN, body, _END_TXN_MAX, deadline,
                                                      lambda r: r.error_code)
        except KafkaTimeoutError as e:
            raise TransactionError(f"{name} did not complete in time: {e}{again}", e) from e
        if code and prepared is not None:
            cause = for_code(code)
            if code in _FENCED:
                raise TransactionFatalError(
                    f"{name}: the coordinator no longer has it open (aborted on transaction.timeout.ms or fenced by "
                    f"a newer instance: {cause.name})", cause)
            raise TransactionFatalError(f"{name}: {cause.name}: {cause}", cause)
        if code:
            if commit and code == ErrorCode.TRANSACTION_ABORTABLE:
                raise self._abortable(f"{name}: {for_code(code)}", for_code(code))
            raise self._classify(code, name)
        if prepared is None:
            self._completed()

    def _completed(self) -> None:
        self.partitions.clear()
        self.pending.clear()
        self._offsets_added = False
        self.error = None
        self.state = TxnState.READY

"""The native Produce path (issue 38): the broker's side of ``klog._native.native_produce``.

A connection hands a Produce frame to :func:`serve` before decoding it (``klog/broker/network/connection.py``). One
native call decodes the request, checks and appends every partition's batch and encodes the answer, or returns
None having appended nothing, and the Python path (``klog/broker/handlers/produce.py``) serves the frame
unchanged. The native call serves only what the Python path has already judged: the partitions in
``PartitionManager.native_routes``, each learned right after a Python-path append as its leader
(``klog/broker/handlers/produce.py::_route_natively``) and forgotten at every change that could alter that
judgement (any metadata image a broker applies, a config, a leader epoch, a log dir going offline). Everything
else is left to Python: unrouted partitions, any batch the checks refuse, malformed frames, and
connections under a client quota, an unfinished SASL login, or request tracing. Produce v13 names topics by id
(KIP-516): the routes know the id of each routed topic, and a request naming any other id is the Python path's
(UNKNOWN_TOPIC_ID). Idempotent producers' batches are
served when their partition's producer table (``klog._native.ProducerTable``, which the broker's
``klog/broker/producer_state.py::ProducerStateManager`` sets on the log) takes them as next in sequence: the native
call locks the request's tables, checks every batch, appends and records them under the locks (as Kafka checks,
appends and records under the log's lock), so no other path appends the same sequence meanwhile; errors, retried
duplicates, a table the Python path holds between its check and its record, and an idempotent batch on a partition
that may have a transaction open (Kafka's INVALID_TXN_STATE rule) are the Python path's to answer. The native front
(``klog/broker/network/front.py``) serves them the same way, without Python.

Transactional batches (:func:`transaction_check`) are served when, besides being next in sequence, they belong to
a transaction the partition already knows: the producer has one open on the partition at the batch's epoch, or,
under transaction protocol v1 with ``transaction.partition.verification.enable`` (KIP-890 part 1), this broker is
the transactional id's coordinator and its state has the partition in the producer's ongoing transaction, read
synchronously (``TransactionCoordinator.verified_now``: the checks of the coordinator's verify-only answer, on the
same event-loop turn as the append, so no transition can come between them), or, under transaction protocol v2
(Produce v12+), the partition added to the producer's transaction by the check itself when that needs no wait
(``TransactionCoordinator.added_now``: this broker coordinates the id, no transition or completion is in flight, and
the Ongoing record is in the ISR once appended to an unreplicated ``__transaction_state`` partition; it is written
and applied before the batch is appended). Everything else stays the Python path's: an add that must wait (a
replicated ``__transaction_state``, the previous transaction's markers being written), a verification that needs
another broker or is refused (answered with Kafka's codes), a request with a transactional id under an authorizer
(the id's Write ACL). Their appends are recorded as transactional, which opens the partition's transaction (its
first offset holds the last stable offset).

acks=all on a replicated partition: before anything is appended the native call asks :func:`replicated_check` once
per request whether every such partition is still led here with enough in-sync replicas (the replica manager's
``leader_error`` and ``check_acks_all``, as the Python path asks per partition; a refusal sends the request to the
Python path, which answers NOT_ENOUGH_REPLICAS or NOT_LEADER_OR_FOLLOWER). After the appends :func:`answer` registers
the request's waits on the high watermark with the replica manager in one call (``ReplicaManager.wait_for_acks``,
the same delayed-produce queue as the Python path's) and the native outcome encodes the answer when they end, with
the codes they ended with (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER) as the Python path's ``_await_acks`` does.

Authorization: with an authorizer the native call asks the same hook as the handlers
(``klog/broker/access.py::AccessControl``) once per topic of the request, through the connection's ``allow``
callable, without counting a denial (the Python path then answers TOPIC_AUTHORIZATION_FAILED and counts it).

After the call, :func:`account` tells Python what was done, exactly as the Python path would have: the replica
manager's high watermark and follower wake-ups per appended batch, the metrics (bytes in, records, produce
requests per topic), the log dir failures, the rejection log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple

from klog import _native
from klog.broker import errors
from klog.broker.handlers.produce import _rejections
from klog.broker.transactions.operations import ADD_PARTITION, produce_operation

if TYPE_CHECKING:
    from klog.broker.context import BrokerState

log = logging.getLogger("klog.broker.produce")

PRODUCE_KEY = 0


def transaction_check(state: BrokerState) -> Callable[[str, int, str, int, int, int, int, int], bool]:
    """The transactional producers' check the native call asks once per transactional batch (made once per
    broker): the Python path's rules (``klog/broker/handlers/produce.py::_needs_verification``), answered
    without an await or False."""
    producers = state.producers
    config = state.config

    def in_transaction(transactional_id: str, version: int, topic: str, partition: int, producer_id: int,
                       epoch: int, first_seq: int, last_seq: int) -> bool:
        code, duplicate = producers.check(topic, partition, producer_id, epoch, first_seq, last_seq)
        if code != errors.NONE or duplicate is not None:
            return False
        if producers.in_transaction(topic, partition, producer_id, epoch):
            return True
        if produce_operation(version) == ADD_PARTITION:
            # protocol v2: the leader adds it (a coordinator write), here only when that needs no wait
            return state.transactions.added_now(transactional_id, producer_id, epoch, topic, partition)
        if not config["transaction.partition.verification.enable"]:
            return True
        if producers.verifying(topic, partition, producer_id):
            return False   # another request of the producer is verifying it: the Python path orders the two
        return state.transactions.verified_now(transactional_id, producer_id, epoch, topic, partition)

    return in_transaction


def replicated_check(state: BrokerState) -> Callable[[list[tuple[str, int]]], bool]:
    """The acks=all check the native call asks once per request with its replicated partitions (made once per
    broker): each still led here, not being appended by a fetcher, with an ISR that satisfies
    min.insync.replicas. False: the Python path serves the request (and answers the refusal)."""
    replicas = state.replicas

    def may_append(keys: list[tuple[str, int]]) -> bool:
        for topic, partition in keys:
            if replicas.leader_error(topic, partition) or replicas.check_acks_all(topic, partition)[0]:
                return False
        return True

    return may_append


class ProduceChecks(NamedTuple):
    """The checks the native call asks, closures over the broker's state: made once per broker and shared by its
    connections (a set of its own cost each connection about 0.6 KiB)."""

    replicated: Callable[[list[tuple[str, int]]], bool]
    in_transaction: Callable[[str, int, str, int, int, int, int, int], bool]


def produce_checks(state: BrokerState) -> ProduceChecks:
    return ProduceChecks(replicated_check(state), transaction_check(state))


def serve(state: BrokerState, frame: Any, allow: Callable[[str], bool] | None,
          replicated: Callable[[list[tuple[str, int]]], bool] | None = None,
          in_transaction: Callable[[str, int, str, int, int, int, int, int], bool] | None = None) -> Any:
    """The native path's outcome for ``frame`` (a ``klog._native.NativeProduceOutcome``), or None: the Python
    path serves it (nothing was appended). ``replicated``:
    :func:`replicated_check`'s (None: acks=all on a replicated partition is the Python path's);
    ``in_transaction``: :func:`transaction_check`'s (None: transactional requests are the Python path's)."""
    routes = state.partitions.native_routes
    advertised = state.api_versions.get(PRODUCE_KEY)
    if routes is None or advertised is None:
        return None
    now_ms = int(time.time() * 1000)
    outcome = _native.native_produce(frame, routes, now_ms=now_ms, max_version=advertised[1], allow=allow,
                                     check_replicated=replicated,
                                     check_transaction=in_transaction)
    if outcome is not None:
        _record_producers(state, outcome)
    return outcome


def _record_producers(state: BrokerState, outcome: Any) -> None:
    """A transactional batch the native call appended opens its producer's transaction on the partition (the native
    call recorded its sequence in the partition's producer table itself, as it does every producer's batch)."""
    producers = state.producers
    for topic, partition, _, _, producer_id, *_, base_offset, _, _, _, transactional in outcome.appended:
        if transactional:
            producers.txn_appended(topic, partition, producer_id, base_offset)


def account(state: BrokerState, outcome: Any) -> str | None:
    """Drive what the Python path drives after its appends, for what the native call did; the reason to close
    the connection (an acks=0 produce that failed, as Kafka closes it), else None."""
    replicas = state.replicas
    metrics = state.metrics
    for topic, partition, size, records, *_ in outcome.appended:
        replicas.appended_natively(topic, partition)
        if metrics is not None:
            metrics.produced(topic, size, records)
    failures = outcome.failures
    if not failures:
        return None
    for topic, partition, code, message, errno_, log_dir in failures:
        if code == errors.KAFKA_STORAGE_ERROR:
            exc = OSError(errno_, message) if errno_ is not None else OSError(message)
            state.partitions.note_log_write_failure(topic, partition, exc, log_dir=log_dir)
            log.error("append to %s-%d failed: %s", topic, partition, message)
        elif code == errors.CORRUPT_MESSAGE:
            _rejections.log(topic, partition, code, message, outcome.client_id)
    if outcome.acks == 0:
        failed = [f"{t}-{p}: error {code}" for t, p, code, _, _, _ in failures]
        return f"acks=0 produce failed ({', '.join(failed[:3])})"
    return None


class EncodedResponse:
    """A response frame the native Produce path encoded: the connection sends it as it is."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


def answer(state: BrokerState, outcome: Any) -> bytes | Coroutine[Any, Any, EncodedResponse]:
    """An acks=all outcome with replicated partitions (``outcome.waits``), after :func:`account`: register its
    batches' waits on the high watermark (one call) and return the response frame, at once when none has to wait,
    else a coroutine of it (an :class:`EncodedResponse`) that ends when every wait has (the ISR has the batch, ``timeout_ms`` passed, leadership
    moved)."""
    appended = outcome.appended
    futures = state.replicas.wait_for_acks([(a[0], a[1], a[9]) for a in appended], outcome.timeout_ms)
    pending = [(i, f) for i, f in enumerate(futures)
               if f is not None and not (f.done() and f.result() == errors.NONE)]
    if not pending:
        return outcome.respond([errors.NONE] * len(appended))  # type: ignore[no-any-return]
    return _answer_when_replicated(outcome, len(appended), pending)


async def _answer_when_replicated(outcome: Any, count: int, pending: list[tuple[int, Any]]) -> EncodedResponse:
    codes = [errors.NONE] * count
    for i, future in pending:
        code = await future
        if code:
            codes[i] = code
    return EncodedResponse(outcome.respond(codes))

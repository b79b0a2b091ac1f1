"""Transactions: the coordinator's APIs (AddPartitionsToTxn 24, AddOffsetsToTxn 25, EndTxn 26; InitProducerId
with a transactional id comes through ``producer_ids.py``), the partition leader's WriteTxnMarkers (27) and the
group coordinator's TxnOffsetCommit (28).

WriteTxnMarkers appends a COMMIT or ABORT control batch (Kafka's ``EndTransactionMarker``) for a producer to each
partition this broker leads, as an acks=all write, ends the producer's transaction there (the last stable offset
moves, an aborted one joins the aborted-transaction index) and answers once the ISR has the marker. The
transaction coordinator sends it: to this broker in process, to another broker over the wire.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any, cast

from klog.broker import errors
from klog.broker.handlers import RequestContext, answer_now, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.topic_answers import TopicAnswers, known_partitions
from klog.protocol.struct import field_of
from klog.broker.handlers.leaders import not_led
from klog.broker.coordinator.runtime import partition_for
from klog.broker.transactions.operations import ADD_PARTITION, txn_offset_commit_operation
from klog.broker.transactions.operations import SUPPORTED_APIS as COORDINATOR_APIS
from klog.client.connection import BrokerConnection
from klog.controller.topics import TopicError, is_internal, validate_topic_name
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode
from klog.protocol.errors import KafkaError, exception_class
from klog.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, encode_control_batch

if TYPE_CHECKING:
    from klog.broker.producer_state import VerificationGuard
    from klog.broker.transactions import TransactionCoordinator
    from klog.protocol.message_types import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        EndTxnRequest,
        InitProducerIdRequest,
        InitProducerIdResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
        TxnOffsetCommitRequest,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

    #: the transaction coordinator's requests (InitProducerId with a transactional id comes from producer_ids.py)
    CoordinatorRequest = (InitProducerIdRequest | AddPartitionsToTxnRequest | AddOffsetsToTxnRequest
                          | EndTxnRequest)

log = logging.getLogger("klog.transactions")

#: How long InitProducerId waits for a producer id block from the active controller (as for idempotent producers)
PRODUCER_ID_BLOCK_WAIT_S = 5.0
#: Bound on one WriteTxnMarkers to another broker (its answer waits for that partition's ISR).
MARKER_REQUEST_TIMEOUT_MS = 30000
CONNECT_TIMEOUT_MS = 5000
OFFSETS_TOPIC = "__consumer_offsets"
#: v2 carries the transaction version (a protocol v2 marker must be above the producer's epoch on the partition)
WRITE_TXN_MARKERS_VERSION = 2
#: the AddPartitionsToTxn version a partition leader sends its coordinator (batched; verify-only for protocol v1,
#: adding for v2; v5 knows TRANSACTION_ABORTABLE), as Kafka's AddPartitionsToTxnManager does
BROKER_ADD_PARTITIONS_VERSION = 5


def create_transaction_coordinator(state: HandlerBroker) -> TransactionCoordinator:
    """The broker's transaction coordinator: producer ids from the broker's producer-id blocks, markers written
    in process to the partitions this broker leads and over WriteTxnMarkers to the others. The broker state makes
    it while it is being built (it reads only the config until it starts) and tells it of each published image."""
    connections: dict[tuple[int, str, int], BrokerConnection] = {}

    async def allocate() -> int:
        if state.producer_id_manager is not None:
            return int(await state.producer_id_manager.generate(PRODUCER_ID_BLOCK_WAIT_S))
        return int(await state.local_producer_ids.generate())

    async def request(node: int, host: str, port: int, api_key: int, body: dict[str, Any], version: int) -> Any:
        """One request to another broker, on a connection kept per broker (dropped after a failure)."""
        key = (node, host, port)
        conn = connections.get(key)
        if conn is None or conn.closed:
            conn = await state.inter_broker.open(host, port, node, client_id=f"klog-txn-{state.node_id}",
                                                 request_timeout_ms=MARKER_REQUEST_TIMEOUT_MS + 5000,
                                                 max_response_bytes=1 << 20, connect_timeout_ms=CONNECT_TIMEOUT_MS)
            connections[key] = conn
        try:
            return await conn.request(api_key, body, version=version)
        except Exception:
            conn.close()
            connections.pop(key, None)
            raise

    def by_topic(partitions: list[tuple[str, int]]) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        return topics

    async def send_markers(node: int, host: str, port: int, partitions: list[tuple[str, int]], producer_id: int,
                           epoch: int, commit: bool, coordinator_epoch: int,
                           transaction_version: int) -> dict[tuple[str, int], int]:
        if node == state.node_id:
            return await write_markers(state, partitions, producer_id, epoch, commit, coordinator_epoch,
                                       MARKER_REQUEST_TIMEOUT_MS, transaction_version)
        response = await request(node, host, port, 27, {"markers": [{
            "producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic(partitions).items()],
            "coordinator_epoch": coordinator_epoch, "transaction_version": transaction_version}]},
            WRITE_TXN_MARKERS_VERSION)
        codes: dict[tuple[str, int], int] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    codes[(topic.name, p.partition_index)] = p.error_code
        return codes

    async def send_verification(node: int, host: str, port: int, tid: str, producer_id: int, epoch: int,
                                partitions: list[tuple[str, int]], verify_only: bool) -> dict[tuple[str, int], int]:
        response = await request(node, host, port, 24, {"transactions": [{
            "transactional_id": tid, "producer_id": producer_id, "producer_epoch": epoch, "verify_only": verify_only,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic(partitions).items()]}]},
            BROKER_ADD_PARTITIONS_VERSION)
        if response.error_code:
            return {tp: int(response.error_code) for tp in partitions}
        return {(t.name, p.partition_index): p.partition_error_code for r in response.results_by_transaction
                for t in r.topic_results for p in t.results_by_partition}

    from klog.broker.transactions.coordinator import TransactionCoordinator

    coordinator = TransactionCoordinator(state, allocate_producer_id=allocate, send_markers=send_markers,
                                         send_verification=send_verification)
    return coordinator


async def write_markers(broker: HandlerBroker, partitions: list[tuple[str, int]], producer_id: int, epoch: int,
                        commit: bool, coordinator_epoch: int, timeout_ms: int,
                        transaction_version: int = 0) -> dict[tuple[str, int], int]:
    """Appends one producer's COMMIT/ABORT marker to each of ``partitions`` this broker leads; the error per
    partition once the ISR has it (or not). ``transaction_version`` 2: a protocol v2 marker, refused unless its
    epoch is above the producer's on the partition."""
    codes: dict[tuple[str, int], int] = {}
    waits: list[tuple[tuple[str, int], Any]] = []
    now_ms = int(time.time() * 1000)
    for topic, partition in partitions:
        code, future = _write_marker(broker, topic, partition, producer_id, epoch, commit, coordinator_epoch,
                                     timeout_ms, now_ms, transaction_version)
        codes[(topic, partition)] = code
        if future is not None:
            waits.append(((topic, partition), future))
    for key, future in waits:
        code = await future
        if code:
            codes[key] = int(code)
    return codes


def _write_marker(broker: HandlerBroker, topic: str, partition: int, producer_id: int, epoch: int, commit: bool,
                  coordinator_epoch: int, timeout_ms: int, now_ms: int, transaction_version: int) -> tuple[int, Any]:
    log_ = broker.partitions.get(topic, partition)
    if log_ is None:
        count = broker.partition_count(topic) if hasattr(broker, "partition_count") else None
        known = count is not None and 0 <= partition < count
        return (errors.NOT_LEADER_OR_FOLLOWER if known else errors.UNKNOWN_TOPIC_OR_PARTITION), None
    code = broker.replicas.leader_error(topic, partition)
    if code:
        return int(code), None
    code = broker.producers.check_marker(topic, partition, producer_id, epoch, coordinator_epoch,
                                         transaction_version)
    if code:
        return int(code), None
    code, _ = broker.replicas.check_acks_all(topic, partition)
    if code:
        return int(code), None
    batch = encode_control_batch(CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT, producer_id=producer_id,
                                 producer_epoch=epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms)
    try:
        result = broker.replicas.append(topic, partition, batch, now_ms=now_ms, required_acks=-1)
    except KafkaError as exc:   # refused before the append (the checks above make it unlikely)
        return int(exc.code), None
    except KeyError:
        return int(errors.UNKNOWN_TOPIC_OR_PARTITION), None
    except OSError as exc:
        log.error("marker append to %s-%d failed: %s", topic, partition, exc)
        return int(errors.KAFKA_STORAGE_ERROR), None
    broker.producers.complete_txn(topic, partition, producer_id, epoch, result.base_offset, commit, now_ms,
                                  coordinator_epoch)
    if topic == OFFSETS_TOPIC and broker.coordinator is not None:
        complete = getattr(broker.coordinator, "complete_transaction", None)
        if complete is not None:
            complete(partition, producer_id, commit)
    future = broker.replicas.wait_for_ack(topic, partition, result.last_offset, timeout_ms)
    return 0, future


@handler(27, 1, 2)
async def handle_write_txn_markers(broker: HandlerBroker, ctx: RequestContext, request: WriteTxnMarkersRequest
                                  ) -> WriteTxnMarkersResponse:
    markers: list[Any] = []   # WriteTxnMarkersResponseWritableTxnMarkerResult dicts
    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION):   # brokers only, as in Kafka
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED}
                                            for p in t.partition_indexes]} for t in m.topics]}
            for m in request.markers]}
    for marker in request.markers:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        transaction_version = marker.transaction_version if ctx.api_version >= 2 else 0
        codes = await write_markers(broker, partitions, marker.producer_id, marker.producer_epoch,
                                    marker.transaction_result, marker.coordinator_epoch, MARKER_REQUEST_TIMEOUT_MS,
                                    transaction_version)
        markers.append({"producer_id": marker.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": codes[(t.name, p)]}
                                            for p in t.partition_indexes]} for t in marker.topics]})
    return {"markers": markers}


async def _route(broker: HandlerBroker, ctx: RequestContext, request: CoordinatorRequest) -> Any:
    coordinator = broker.transactions
    if coordinator is None:
        raise ValueError("this broker runs no transaction coordinator")
    if broker.access is not None:
        denied = _denied(broker, ctx, request)
        if denied is not None:
            return denied
    return await coordinator.handle(ctx.header, request)


def _denied(broker: HandlerBroker, ctx: RequestContext, request: CoordinatorRequest) -> dict[str, Any] | None:
    """Kafka's authorization of the coordinator's APIs: Write on the TransactionalId (AddPartitionsToTxn also
    Write on each topic; its batched v4+ form, from brokers, ClusterAction); AddOffsetsToTxn also Read on the
    group. The answer when something is refused, else None."""
    key, version = ctx.header.api_key, ctx.api_version
    tid_failed = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    write, tid = authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID
    if key == 24 and version >= 4:
        if authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION):
            return None
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": [], "results_by_topic_v3_and_below": []}
    if key == 24:
        add = cast("AddPartitionsToTxnRequest", request)
        topics = add.v3_and_below_topics
        if not authz.allowed(broker, ctx, write, tid, add.v3_and_below_transactional_id):
            codes = {t.name: tid_failed for t in topics}
        else:
            refused = {t.name for t in topics if is_internal(t.name) or not authz.allowed(
                broker, ctx, write, authz.ResourceType.TOPIC, t.name)}   # Kafka: no client writes an internal one
            if not refused:
                return None
            codes = {t.name: errors.TOPIC_AUTHORIZATION_FAILED if t.name in refused
                     else ErrorCode.OPERATION_NOT_ATTEMPTED for t in topics}
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "results_by_transaction": [],
                "results_by_topic_v3_and_below": [
                    {"name": t.name, "results_by_partition": [
                        {"partition_index": p, "partition_error_code": codes[t.name]} for p in t.partitions]}
                    for t in topics]}
    # InitProducerId reaches here only with a transactional id (producer_ids.py routes the idempotent ones)
    named = cast("InitProducerIdRequest | AddOffsetsToTxnRequest | EndTxnRequest", request)
    if not authz.allowed(broker, ctx, write, tid, named.transactional_id or ""):
        code = tid_failed
    elif key == 25 and not authz.allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.GROUP,
                                         cast("AddOffsetsToTxnRequest", request).group_id):
        code = errors.GROUP_AUTHORIZATION_FAILED
    else:
        return None
    if key == 22:
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": code}


def _route_now(broker: HandlerBroker, ctx: RequestContext, request: CoordinatorRequest) -> Any:
    """AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, answered in the read callback when the coordinator waits for
    nothing (its state write is in the ISR at once), else awaited by the connection (``answer_now``)."""
    return answer_now(_route(broker, ctx, request))


for _key, (_low, _high) in COORDINATOR_APIS.items():
    if _key != 22:   # InitProducerId: producer_ids.py routes the transactional ones here
        handler(_key, _low, _high)(_route_now)


async def init_transactional_producer_id(broker: HandlerBroker, ctx: RequestContext,
                                         request: InitProducerIdRequest) -> InitProducerIdResponse:
    answer: Struct = await _route(broker, ctx, request)
    return cast("InitProducerIdResponse", answer.to_dict())


@handler(28, 0, 5)
async def handle_txn_offset_commit(broker: HandlerBroker, ctx: RequestContext, request: TxnOffsetCommitRequest
                                  ) -> Any:
    """TxnOffsetCommit as Kafka's KafkaApis: Write on the TransactionalId, then Read on the group (every partition
    answers the error); then per topic TOPIC_AUTHORIZATION_FAILED without Read on it, UNKNOWN_TOPIC_OR_PARTITION
    for a topic or partition that does not exist, one entry per topic in the order first named; the rest is
    verified (or added, v5) and goes to the group coordinator (none: neither is asked, so no transaction or group
    error either), its answers merged after these refusals."""
    if broker.access is not None:
        code: int = errors.NONE
        if not authz.allowed(broker, ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                             request.transactional_id):
            code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not authz.allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
            code = errors.GROUP_AUTHORIZATION_FAILED
        if code:
            return _every_partition(request.topics, code)
    allowed = authz.filter_allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                   (t.name for t in request.topics))
    answers = TopicAnswers(by_id=False)
    asked: list[Struct] = []
    for t in request.topics:
        if t.name not in allowed:
            answers.add(t, [p.partition_index for p in t.partitions], errors.TOPIC_AUTHORIZATION_FAILED)
            continue
        kept = known_partitions(answers, t, broker.metadata.topic(t.name))
        if kept:
            asked.append(Struct(name=t.name, partitions=kept))
    if not asked:
        return {"throttle_time_ms": 0, "topics": answers.topics}
    request = cast("TxnOffsetCommitRequest", Struct(**{**request.__dict__, "topics": asked}))
    # the asked topics' offsets are verified (or added, v5) and guarded like any others: written unverified, they
    # could join no transaction the coordinator knows, and no marker would close them
    code, guard = await _add_offsets_partition(broker, ctx.api_version, request)
    try:
        if code:
            answer: Any = _every_partition(request.topics, code)
        else:
            verification = None if guard is None else guard[1]
            answer = await broker.coordinator.handle(ctx.header, request, client_host=ctx.client_host,
                                                     listener=ctx.listener, verification=verification)
    finally:
        if guard is not None:
            broker.producers.end_verification(OFFSETS_TOPIC, guard[0], request.producer_id, guard[1])
    topics = answer["topics"] if isinstance(answer, dict) else answer.topics
    answers.merge([{"name": field_of(t, "name"), "partitions": field_of(t, "partitions")} for t in topics])
    return {"throttle_time_ms": 0, "topics": answers.topics}


def _every_partition(topics: list[Any], code: int) -> dict[str, Any]:
    """The TxnOffsetCommit answer giving every partition of ``topics`` ``code``."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                        for p in t.partitions]} for t in topics]}


#: how the group coordinator answers what its write path was refused (Kafka's GroupCoordinatorService
#: ``handleOperationException``)
_OFFSET_WRITE_ERRORS: dict[int, int] = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR}


async def _add_offsets_partition(broker: HandlerBroker, version: int, request: TxnOffsetCommitRequest
                                 ) -> tuple[int, tuple[int, VerificationGuard] | None]:
    """Before a TxnOffsetCommit writes to the group's ``__consumer_offsets`` partition: from v5 (transaction
    protocol v2, no AddOffsetsToTxn) the partition is added to the producer's transaction, before it verified
    (with ``transaction.partition.verification.enable``), as Kafka's coordinator runtime asks the transaction
    coordinator (``maybeStartTransactionVerification``) when the producer has no transaction open there yet.
    (0, or the error every partition of the request answers; when verified, the partition and the
    verification guard its write must still hold, which the caller ends once the write is done.)"""
    transactions = broker.transactions
    if transactions is None or not request.group_id:
        return 0, None   # (an empty transactional id is asked too: the coordinator answers INVALID_REQUEST)
    operation = txn_offset_commit_operation(version)
    if operation != ADD_PARTITION and not broker.config["transaction.partition.verification.enable"]:
        return 0, None
    partition = partition_for(request.group_id, transactions.offsets_partitions)
    # a single node creates __consumer_offsets at the group coordinator's first write: before this check, or the
    # offsets would be written unverified, in a transaction no marker ends (the partition unstable for ever)
    await broker.coordinator.ensure_log()
    if broker.partitions.get(OFFSETS_TOPIC, partition) is None:
        return 0, None   # not led here: the group coordinator answers NOT_COORDINATOR
    if broker.producers.in_transaction(OFFSETS_TOPIC, partition, request.producer_id, request.producer_epoch):
        return 0, None
    # Protocol 1 only, as the produce path's guard (see klog/broker/handlers/produce.py): its abort keeps the
    # epoch, so offsets verified for a transaction whose marker lands during the ask would be written after it
    guard = None if operation == ADD_PARTITION else \
        (partition, broker.producers.start_verification(OFFSETS_TOPIC, partition, request.producer_id))
    codes = await transactions.add_or_verify(request.transactional_id, request.producer_id,
                                             request.producer_epoch, [(OFFSETS_TOPIC, partition)], operation)
    code = int(codes.get((OFFSETS_TOPIC, partition), ErrorCode.UNKNOWN_SERVER_ERROR))
    return _OFFSET_WRITE_ERRORS.get(code, code), guard


@handler(65, 0, 0)
async def handle_describe_transactions(broker: HandlerBroker, ctx: RequestContext,
                                      request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    """DescribeTransactions (kafka-transactions describe): Describe on each TransactionalId."""
    states: list[Any] = []   # DescribeTransactionsResponseTransactionState dicts
    for tid in request.transactional_ids:
        if not authz.allowed(broker, ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TRANSACTIONAL_ID, tid):
            from klog.broker.transactions.coordinator import describe_error

            states.append(describe_error(tid, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        else:
            states.append(broker.transactions.describe(tid))
    return {"throttle_time_ms": 0, "transaction_states": states}


@handler(66, 0, 2)
async def handle_list_transactions(broker: HandlerBroker, ctx: RequestContext, request: ListTransactionsRequest
                                  ) -> ListTransactionsResponse:
    """ListTransactions (kafka-transactions list, find-hanging): this broker's coordinator's transactions the
    principal may Describe (the admin client asks every broker)."""
    version = ctx.api_version
    duration = request.duration_filter if version >= 1 else -1
    pattern = request.transactional_id_pattern if version >= 2 else None
    try:
        unknown, listed = broker.transactions.list_transactions(list(request.state_filters),
                                                                list(request.producer_id_filters), duration, pattern)
    except re.error:   # Kafka: nothing else is answered
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION, "unknown_state_filters": [],
                "transaction_states": []}
    listed = [t for t in listed if authz.allowed(broker, ctx, authz.AclOperation.DESCRIBE,
                                                 authz.ResourceType.TRANSACTIONAL_ID, t["transactional_id"],
                                                 count=False)]
    states: list[Any] = listed   # ListTransactionsResponseTransactionState dicts
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "unknown_state_filters": unknown,
            "transaction_states": states}


@handler(61, 0, 0)
async def handle_describe_producers(broker: HandlerBroker, ctx: RequestContext, request: DescribeProducersRequest
                                   ) -> DescribeProducersResponse:
    """DescribeProducers (kafka-transactions describe-producers, find-hanging, abort): the producers in each
    partition's producer state, from any replica of it (Kafka answers on followers too: the admin client's
    ``brokerId`` option asks one). Read on the topic; an illegal name INVALID_TOPIC_EXCEPTION, an unknown topic or
    partition UNKNOWN_TOPIC_OR_PARTITION, a partition this broker holds no replica of NOT_LEADER_OR_FOLLOWER."""
    topics: list[Any] = []   # DescribeProducersResponseTopicResponse dicts
    for topic in request.topics:
        refused: int = errors.NONE
        message: str | None = None
        try:
            validate_topic_name(topic.name)
        except TopicError as exc:
            refused, message = int(exc.code), str(exc)
        if not refused and not authz.allowed(broker, ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                             topic.name):
            refused = errors.TOPIC_AUTHORIZATION_FAILED
        elif not refused and broker.metadata.topic(topic.name) is None:
            refused = errors.UNKNOWN_TOPIC_OR_PARTITION
        if refused and message is None:   # Kafka's ApiError of a topic's error: the error's own message
            message = exception_class(refused).default_message
        partitions: list[Any] = []
        for index in topic.partition_indexes:
            code = refused
            if not code and broker.partitions.get(topic.name, index) is None:
                code = not_led(broker, topic.name, index)[0]
            if code:
                partitions.append({"partition_index": index, "error_code": code, "error_message": message,
                                   "active_producers": []})
            else:
                partitions.append({"partition_index": index, "error_code": errors.NONE, "error_message": None,
                                   "active_producers": broker.producers.active_producers(topic.name, index)})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}

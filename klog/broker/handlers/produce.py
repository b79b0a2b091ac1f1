"""Produce (0): Kafka's request validation, idempotent-producer sequence checks, native appends.

Per partition, one native call (``klog._native.validate_produce_batch``) checks the batch once for everything
done with it: Kafka's request-level rules (one magic-2 batch, zstd from v7, ``max.message.bytes``), then the
records like Kafka's LogValidator (CRC, counts, every record's structure, offset deltas, keys on compacted
topics, timestamps, decompressing as a bounded stream). It returns a ``ProducedBatch`` holding the header
fields the idempotent-producer check, the response and the metrics read, which the native log appends without
parsing the header again. Nothing here reads batch bytes. A batch whose records take more than
``klog.produce.validation.inline.bytes`` to walk is validated on a worker thread with the GIL released:
the handler then returns a coroutine, and other connections are served meanwhile.

Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER elsewhere). acks=all on a replicated partition is
refused NOT_ENOUGH_REPLICAS before the append when the ISR is smaller than ``min.insync.replicas``; after it the
response waits (the replica manager's bounded delayed-produce queue) until the ISR has the batch, or the request's
``timeout_ms`` passes (REQUEST_TIMED_OUT); the handler then returns ``AnswerWhenReplicated``, and the connection
may append its next produce requests while the answer waits (``klog.produce.pipeline.depth``). acks=0/1 answer
at once, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from klog._native import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    ProducedBatch,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    validate_produce_batch,
)
from klog.broker import errors
from klog.broker.config import COMPRESSION_CODEC_IDS
from klog.broker.handlers import AnswerWhenReplicated, CloseConnection, RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.leaders import current_leader, leader_endpoints
from klog.broker.partitions import LogDirOfflineError
from klog.broker.producer_state import BatchMetadata
from klog.broker.transactions.operations import ADD_PARTITION, produce_operation
from klog.protocol.errors import KafkaError

if TYPE_CHECKING:
    from klog.broker.config import BrokerConfig
    from klog.broker.partitions import Topic
    from klog.protocol.message_types import (
        ProduceRequest,
        ProduceResponse,
        ProduceResponseBatchIndexAndErrorMessage,
        ProduceResponseNodeEndpoint,
        ProduceResponsePartitionProduceResponse,
        ProduceResponseTopicProduceResponse,
        RequestRecords,
    )

    #: a partition's answer, and the future of its error code (acks=all answers waiting for the ISR)
    AckWait = tuple[ProduceResponsePartitionProduceResponse, asyncio.Future[int]]
    #: a batch too large to validate on the event loop: (topic, partition, records, the topic's policy)
    DeferredCheck = tuple[str, int, "RequestRecords | bytes", "_ProducePolicy"]

log = logging.getLogger("klog.broker.produce")

#: one rejection log line per this many seconds at most (plus a count of those left out)
REJECTION_LOG_INTERVAL_S = 1.0
#: the client id Kafka's own tools use when they may write internal topics (AdminUtils.ADMIN_CLIENT_ID)
ADMIN_CLIENT_ID = "__admin_client"


class _ProducePolicy:
    """A topic's configs that every Produce checks, read once per config change instead of per partition."""

    # min.insync.replicas is not here: the leader's replication state owns that rule (check_acks_all)
    __slots__ = ("max_message_bytes", "segment_bytes", "create_time", "before_max_ms", "after_max_ms", "compacted",
                 "compression", "compression_level")

    def __init__(self, config: dict[str, Any]) -> None:
        self.max_message_bytes: int = config["max.message.bytes"]
        #: a stored batch larger than this is RECORD_LIST_TOO_LARGE, as on Kafka (no segment could hold it); None
        #: for the segment.bytes below Kafka's 1 MiB minimum klog also takes: a large batch fills a segment alone
        self.segment_bytes: int | None = config["segment.bytes"] \
            if config["segment.bytes"] >= KAFKA_MIN_SEGMENT_BYTES else None
        self.create_time: bool = config["message.timestamp.type"] == "CreateTime"
        self.before_max_ms: int = config["message.timestamp.before.max.ms"]
        self.after_max_ms: int = config["message.timestamp.after.max.ms"]
        self.compacted: bool = "compact" in config["cleanup.policy"]
        #: the codec id batches are stored with (None: as the producer sent them) and its level
        self.compression: int | None = COMPRESSION_CODEC_IDS[config["compression.type"]]
        self.compression_level: int | None = _codec_level(config, self.compression)


def _codec_level(config: dict[str, Any], codec: int | None) -> int | None:
    """The level a batch recompressed to ``codec`` is written at (None: the codec's default; lz4 has one)."""
    if codec == COMPRESSION_CODEC_IDS["gzip"]:
        level: int = config["compression.gzip.level"]
        return None if level == -1 else level
    if codec == COMPRESSION_CODEC_IDS["zstd"]:
        return int(config["compression.zstd.level"])
    return None


def _policy(topic: Topic) -> _ProducePolicy:
    policy: _ProducePolicy | None = topic.derived.get("produce")
    if policy is None:
        policy = topic.derived["produce"] = _ProducePolicy(topic.effective)
    return policy


def _partition_error(index: int, code: int, message: str | None = None) -> ProduceResponsePartitionProduceResponse:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}


class _Rejections:
    """One log line per rejected batch, at most one per REJECTION_LOG_INTERVAL_S (a hostile client must not
    flood the log); the lines left out are counted in the next one."""

    __slots__ = ("last", "suppressed")

    def __init__(self) -> None:
        self.last = 0.0
        self.suppressed = 0

    def log(self, topic: str, index: int, code: int, message: str, client_id: str | None) -> None:
        now = time.monotonic()
        if now - self.last < REJECTION_LOG_INTERVAL_S:
            self.suppressed += 1
            return
        more = f" ({self.suppressed} more rejections not logged)" if self.suppressed else ""
        self.last, self.suppressed = now, 0
        log.warning("produce to %s-%d from client %r rejected with error %d: %.300s%s", topic, index, client_id,
                    code, message, more)


_rejections = _Rejections()


#: a refused batch: (error code, message (None: Kafka sends none), record_errors)
Refusal = tuple[int, str | None, list["ProduceResponseBatchIndexAndErrorMessage"]]
#: how the refusals of Kafka's ProduceRequest.validateRecords begin (answered by KafkaApis, before the log)
REQUEST_RULES_WORDS = "Produce requests with version "
#: Kafka 4's smallest segment.bytes (LogConfig's atLeast(1024 * 1024))
KAFKA_MIN_SEGMENT_BYTES = 1 << 20


def _check(records: RequestRecords | bytes, version: int, policy: _ProducePolicy, limits: _ValidationLimits, now_ms: int,
           work_budget: int | None, topic: str, partition: int) -> ProducedBatch | Refusal | None:
    """Check one partition's batch natively, once for all that is done with it: Kafka's request rules, then
    its records unless record validation is switched off. The accepted batch, a refusal, or None when the
    records are over ``work_budget`` and must be checked again without one (off the event loop)."""
    # the topic's codec only when it has one: a 'producer' topic's call is the one every native core answers
    recompress = {} if policy.compression is None else {
        "compression": policy.compression, "compression_level": policy.compression_level}
    try:
        batch = validate_produce_batch(
            records, version=version, max_message_bytes=policy.max_message_bytes, compacted=policy.compacted,
            topic_partition=f"{topic}-{partition}", create_time=policy.create_time, now_ms=now_ms,
            before_max_ms=policy.before_max_ms, after_max_ms=policy.after_max_ms,
            max_decompressed_bytes=limits.max_decompressed_bytes, check_records=limits.enabled, work_budget=work_budget,
            verify_crc=False,  # the log's append verifies the CRC of what it accepts: computed once
            **recompress)
    except CorruptRecordError as exc:
        return errors.CORRUPT_MESSAGE, str(exc), []
    except InvalidRecordError as exc:  # InvalidTimestampError included
        message, record_errors = exc.args
        code = errors.INVALID_TIMESTAMP if isinstance(exc, InvalidTimestampError) else errors.INVALID_RECORD
        return code, message, [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors]
    except UnsupportedCompressionTypeError as exc:
        return errors.UNSUPPORTED_COMPRESSION_TYPE, str(exc), []
    except RecordTooLargeError as exc:
        return errors.MESSAGE_TOO_LARGE, str(exc), []
    if batch is not None and policy.segment_bytes is not None and batch.size > policy.segment_bytes:
        return errors.RECORD_LIST_TOO_LARGE, None, []   # Kafka's UnifiedLog.append, after the batch's checks
    return batch


class _ValidationLimits:
    """The broker's bounds on validating one batch, read from its config once."""

    __slots__ = ("enabled", "max_decompressed_bytes", "inline_bytes", "threads", "_executor")

    def __init__(self, config: BrokerConfig) -> None:
        self.enabled: bool = config["klog.produce.record.validation.enable"]
        self.max_decompressed_bytes: int = config["klog.message.max.decompressed.bytes"]
        self.inline_bytes: int = config["klog.produce.validation.inline.bytes"]
        self.threads: int = config["klog.produce.validation.threads"]
        self._executor: ThreadPoolExecutor | None = None

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The workers validating large batches: their number bounds the memory held by validations in flight
        (one record each, at most ``max_decompressed_bytes``), whatever the number of connections."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="klog-validate")
        return self._executor


def _limits(broker: HandlerBroker) -> _ValidationLimits:
    limits: _ValidationLimits | None = getattr(broker, "_produce_validation_limits", None)
    if limits is None:
        # cached on the broker state object, outside what HandlerBroker names
        limits = _ValidationLimits(broker.config)
        setattr(broker, "_produce_validation_limits", limits)
    return limits


def _not_leader(broker: HandlerBroker, name: str, index: int, version: int, leaders: set[int]) -> ProduceResponsePartitionProduceResponse:
    """A partition this broker does not lead: NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION), naming the
    current leader from v10 (KIP-951)."""
    code, leader = current_leader(broker, name, index, leaders if version >= 10 else set())
    answer = _partition_error(index, code)
    if leader is not None and version >= 10:
        answer["current_leader"] = leader
    return answer


#: a batch's magic byte, the end of its attributes (int16 at 21) and their transactional flag (Kafka's
#: DefaultRecordBatch layout)
_MAGIC_AT = 16
_ATTRIBUTES_END = 23
_TRANSACTIONAL_BIT = 0x10


#: the first Produce version naming topics by id instead of by name (KIP-516)
FIRST_TOPIC_ID_VERSION = 13

#: a topic as a Produce names it: by name before v13, by id from v13
TopicKey = str | uuid.UUID


def _partitions(request: ProduceRequest, version: int
                ) -> list[tuple[TopicKey, list[tuple[int, RequestRecords | bytes | None]]]]:
    """The request's topics (names, ids from v13) and their partitions' records, in request order, each partition
    once: Kafka keys a Produce's partitions by topic and partition (``KafkaApis.handleProduceRequest``), so a
    partition named again, in its topic's entry or in another entry of the topic, is appended once, with the
    records of its last entry, and answered once, in its topic's first entry (the topic's entries then answered as
    one, as Kafka does)."""
    by_id = version >= FIRST_TOPIC_ID_VERSION
    entries: list[tuple[TopicKey, list[tuple[int, RequestRecords | bytes | None]]]] = [
        (t.topic_id if by_id else t.name, [(p.index, p.records) for p in t.partition_data]) for t in request.topic_data]
    if len(entries) == 1 and len(entries[0][1]) == 1:
        return entries   # the common request: one partition
    topics: dict[TopicKey, dict[int, RequestRecords | bytes | None]] = {}
    count = 0
    for name, partitions in entries:
        named = topics.setdefault(name, {})
        named.update(partitions)
        count += len(partitions)
    if count == sum(map(len, topics.values())):
        return entries   # no partition named twice: the request's entries as they are (a topic may have two)
    return [(name, list(partitions.items())) for name, partitions in topics.items()]


def _has_transactional_records(
        topics: list[tuple[TopicKey, list[tuple[int, RequestRecords | bytes | None]]]]) -> bool:
    """Kafka's ``ProduceRequest.hasTransactionalRecords``: the first batch of any partition is a magic v2 batch
    marked transactional (a request without a transactional id sending one is refused whole with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, every partition of it, before any other check). Kafka looks at each
    partition's first batch only: a partition with more than one batch is refused INVALID_RECORD anyway."""
    return any(records is not None and len(records) >= _ATTRIBUTES_END and records[_MAGIC_AT] == 2
               and records[_ATTRIBUTES_END - 1] & _TRANSACTIONAL_BIT
               for _, partitions in topics for _, records in partitions)


def _named(broker: HandlerBroker, key: TopicKey) -> tuple[str | None, uuid.UUID | None]:
    """A request's topic as (its name, its id from v13): the name of a v13 topic id is the metadata image's (None:
    no topic has that id, the zero id, a deleted topic's, answered UNKNOWN_TOPIC_ID as Kafka does)."""
    if isinstance(key, str):
        return key, None
    known = broker.metadata.topic_by_id(key)
    return (known.name if known is not None else None), key


@handler(0, 0, 13)
def handle_produce(broker: HandlerBroker, ctx: RequestContext, request: ProduceRequest
                   ) -> ProduceResponse | None | AnswerWhenReplicated | Coroutine[Any, Any, ProduceResponse | None]:
    """The response; None for acks=0 (nothing is sent); AnswerWhenReplicated when acks=all answers wait for the
    ISR; a coroutine when batches are validated off the event loop."""
    version = ctx.api_version
    acks = request.acks
    manager = broker.partitions
    limits = _limits(broker)
    now_ms = int(time.time() * 1000)
    responses: list[ProduceResponseTopicProduceResponse] = []
    #: partitions whose batch is too large to validate on the event loop: (responses list, slot, arguments)
    deferred: list[tuple[list[ProduceResponsePartitionProduceResponse], int, DeferredCheck]] = []
    #: leaders named in NOT_LEADER_OR_FOLLOWER answers (KIP-951: their endpoints go in the response)
    leaders: set[int] = set()
    #: acks=all answers waiting for the ISR: (partition response, future of its error code)
    waits: list[AckWait] = []
    #: the authorization error of every partition (Write on the TransactionalId), or of each topic (Write)
    refused_all = 0
    topics = _partitions(request, version)
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is None:
        if _has_transactional_records(topics):   # Kafka: the whole request, before any other check
            refused_all = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif broker.access is not None and not authz.allowed(
            broker, ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, transactional_id):
        refused_all = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    #: a producer's first transactional batches on partitions: appended once the coordinator says they are in its
    #: transaction (KIP-890): (responses list, slot, topic, partition, batch)
    unverified: list[tuple[list[ProduceResponsePartitionProduceResponse], int, str, int, ProducedBatch]] = []
    for key, partition_data in topics:
        known_name, topic_id = _named(broker, key)
        name = known_name or ""
        topic = manager.topics.get(name)
        partition_responses: list[ProduceResponsePartitionProduceResponse] = []
        responses.append({"name": name, "partition_responses": partition_responses} if topic_id is None else
                         {"name": name, "topic_id": topic_id, "partition_responses": partition_responses})
        refused = refused_all
        if not refused and known_name is None:
            refused = errors.UNKNOWN_TOPIC_ID   # v13: before authorization, as Kafka's handleProduceRequest
        if not refused and broker.access is not None and not authz.allowed(
                broker, ctx, authz.AclOperation.WRITE, authz.ResourceType.TOPIC, name):
            refused = errors.TOPIC_AUTHORIZATION_FAILED   # whether or not the topic exists
        for index, records in partition_data:
            if refused:
                partition_responses.append(_partition_error(index, refused))
                continue
            if version < 3:
                # Kafka 4 (KIP-896) removed message formats v0/v1 and Produce v0-2; versions stay advertised
                # because old librdkafka probes Produce 0 to enable compression at all.
                partition_responses.append(_partition_error(index, errors.UNSUPPORTED_VERSION,
                                                            "Produce v0-2 are not supported; use v3+"))
                continue
            if topic is None or manager.get(name, index) is None:
                partition_responses.append(_not_leader(broker, name, index, version, leaders))
                continue
            if topic.internal and ctx.header.client_id != ADMIN_CLIENT_ID:
                # Kafka: only its own admin tooling may write internal topics (__consumer_offsets)
                partition_responses.append(_partition_error(index, errors.INVALID_TOPIC_EXCEPTION,
                                                            f"Cannot append to internal topic {name}"))
                continue
            if acks not in (-1, 0, 1):
                partition_responses.append(_partition_error(index, errors.INVALID_REQUIRED_ACKS))
                continue
            if broker.replicas.leader_error(name, index):   # a follower of it: re-route to the leader
                partition_responses.append(_not_leader(broker, name, index, version, leaders))
                continue
            policy = _policy(topic)
            if acks == -1:
                code, message = broker.replicas.check_acks_all(name, index)
                if code:
                    partition_responses.append(_partition_error(index, code, message))
                    continue
            if records is None:
                records = b""
            verdict = _check(records, version, policy, limits, now_ms, limits.inline_bytes, name, index)
            if verdict is None:
                deferred.append((partition_responses, len(partition_responses), (name, index, records, policy)))
                partition_responses.append({})  # filled in once validated off the loop
                continue
            if not isinstance(verdict, tuple) and _needs_verification(broker, request, name, index, verdict,
                                                                      version):
                unverified.append((partition_responses, len(partition_responses), name, index, verdict))
                partition_responses.append({})  # filled in once the coordinator has answered
                continue
            partition_responses.append(_append_checked(broker, ctx, request, name, index, verdict, now_ms, waits,
                                                       leaders, route=True))
    if deferred or unverified:
        return _finish_deferred(broker, ctx, request, responses, deferred, limits, now_ms, leaders, waits,
                                unverified)
    endpoints = leader_endpoints(broker, ctx.listener, leaders) if leaders else None
    if waits:   # every batch is appended: only the answer waits for the ISR
        return AnswerWhenReplicated(_await_acks(acks, responses, waits, endpoints))
    return _produce_response(acks, responses, endpoints)


async def _await_acks(acks: int, responses: list[ProduceResponseTopicProduceResponse], waits: list[AckWait],
                      endpoints: list[ProduceResponseNodeEndpoint] | None) -> ProduceResponse | None:
    """acks=all: answer once every waiting partition's batch is in the whole ISR (or its wait ended)."""
    for entry, future in waits:
        code = await future
        if code:
            entry.update({"error_code": code, "base_offset": -1, "error_message": None})
    return _produce_response(acks, responses, endpoints)


async def _finish_deferred(broker: HandlerBroker, ctx: RequestContext, request: ProduceRequest,
                           responses: list[ProduceResponseTopicProduceResponse],
                           deferred: list[tuple[list[ProduceResponsePartitionProduceResponse], int, DeferredCheck]],
                           limits: _ValidationLimits, now_ms: int, leaders: set[int], waits: list[AckWait],
                           unverified: list[tuple[list[ProduceResponsePartitionProduceResponse], int, str, int,
                                                  ProducedBatch]] | None = None) -> ProduceResponse | None:
    """Validate the large batches on a worker thread (the native call releases the GIL), then append them on
    the loop in request order; a producer's first transactional batches on a partition once its transaction
    coordinator has verified the partition is in its transaction. Each append after an await checks again that
    this broker leads the partition (see :func:`_append_checked`)."""
    loop = asyncio.get_running_loop()
    unverified = list(unverified or [])
    for partition_responses, slot, (name, index, records, policy) in deferred:
        verdict = await loop.run_in_executor(limits.executor, _check, records, ctx.api_version, policy, limits,
                                             now_ms, None, name, index)
        assert verdict is not None  # no budget: always decided
        if not isinstance(verdict, tuple) and _needs_verification(broker, request, name, index, verdict,
                                                                  ctx.api_version):
            unverified.append((partition_responses, slot, name, index, verdict))
            continue
        partition_responses[slot] = _append_checked(broker, ctx, request, name, index, verdict, now_ms, waits,
                                                    leaders)
    if unverified:
        first = unverified[0][4]
        producers = broker.producers
        operation = produce_operation(ctx.api_version)
        # Transaction protocol 1 only: there a client's abort keeps the epoch, and nothing else refuses a batch
        # verified for the transaction it ended. Under protocol 2 every end bumps the epoch (the batch is then
        # fenced), and the coordinator's add may wait for the previous transaction's markers, which land on the
        # partition during the wait: a guard would refuse the new transaction's first batch.
        guards = {(name, index): producers.start_verification(name, index, verdict.producer_id,
                                                              verdict.producer_epoch, verdict.base_sequence)
                  for _, _, name, index, verdict in unverified} if operation != ADD_PARTITION else {}
        codes = await broker.transactions.add_or_verify(request.transactional_id or "", first.producer_id,
                                                        first.producer_epoch,
                                                        [(name, index) for _, _, name, index, _ in unverified],
                                                        operation)
        for partition_responses, slot, name, index, verdict in unverified:
            code = codes.get((name, index), errors.UNKNOWN_SERVER_ERROR)
            why = _VERIFICATION_MESSAGES.get(code)
            guard = guards.get((name, index))
            if code or guard is None:
                pass
            elif producers.verification_holds(name, index, verdict.producer_id, guard):
                if guard.out_of_order(verdict.base_sequence):
                    # a batch of a lower sequence of the producer is being verified by another request: this one
                    # must not open the transaction ahead of it (Kafka: the verification entry's lowest sequence)
                    code, why = errors.OUT_OF_ORDER_SEQUENCE_NUMBER, (
                        f"Out of order sequence number for producer {verdict.producer_id} in partition "
                        f"{name}-{index}: {verdict.base_sequence} (incoming seq. number), "
                        f"{guard.lowest_sequence} (earliest seen sequence)")
            elif not producers.in_transaction(name, index, verdict.producer_id, verdict.producer_epoch):
                # a marker of the producer landed while its coordinator answered (the transaction it verified
                # ended): appended now, the batch would open a transaction no marker closes (Kafka's
                # VerificationGuard refuses it so). (Another request's batch of the same verification may have
                # opened the transaction since, which ended the guard: then it is still open.)
                code, why = errors.INVALID_TXN_STATE, "Record was not part of an ongoing transaction"
            if code:
                partition_responses[slot] = _partition_error(index, code, why)
            else:
                partition_responses[slot] = _append_checked(broker, ctx, request, name, index, verdict, now_ms,
                                                            waits, leaders, learn_route=True)
            if guard is not None:
                producers.end_verification(name, index, verdict.producer_id, guard)
    endpoints = leader_endpoints(broker, ctx.listener, leaders) if leaders else None
    if waits:
        return await _await_acks(request.acks, responses, waits, endpoints)
    return _produce_response(request.acks, responses, endpoints)


#: the messages Kafka's ReplicaManager gives the errors of a batch its coordinator did not add or verify
_VERIFICATION_MESSAGES: dict[int, str] = {
    errors.INVALID_TXN_STATE: "Partition was not added to the transaction",
    errors.NOT_ENOUGH_REPLICAS: "Unable to verify the partition has been added to the transaction",
}


def _needs_verification(broker: HandlerBroker, request: ProduceRequest, name: str, index: int,
                        verdict: ProducedBatch, version: int) -> bool:
    """A transactional batch of a producer with no transaction open on the partition at its epoch: from Produce
    v12 (transaction protocol v2) the leader adds the partition to the producer's transaction (KIP-890 part 2);
    before, with ``transaction.partition.verification.enable``, its coordinator must say the partition is in the
    transaction (part 1). Either way a late batch of an ended transaction cannot open a hanging one."""
    if not verdict.is_transactional or request.transactional_id is None or broker.transactions is None:
        return False
    if produce_operation(version) != ADD_PARTITION and not broker.config["transaction.partition.verification.enable"]:
        return False
    return not broker.producers.in_transaction(name, index, verdict.producer_id, verdict.producer_epoch)


def _append_checked(broker: HandlerBroker, ctx: RequestContext, request: ProduceRequest, name: str, index: int,
                    verdict: ProducedBatch | Refusal, now_ms: int, waits: list[AckWait], leaders: set[int], *,
                    route: bool = False, learn_route: bool = False) -> ProduceResponsePartitionProduceResponse:
    """The partition response for a batch the native checks have judged: its refusal, or the idempotence
    checks and the append. ``route``: the partition's checks ran just now, without an await since (the native
    path may learn it); otherwise leadership and min.insync.replicas are checked again, as the replica manager's
    append does too (Kafka's appendRecordsToLeader): a broker that lost the partition while it waited for the
    transaction coordinator would stamp the batch with the new leader's epoch. ``leaders``: the leaders named in
    NOT_LEADER_OR_FOLLOWER answers (KIP-951). ``learn_route``: without ``route``, the native path may learn the
    partition all the same once the checks made again here pass and the batch is appended (a transactional batch
    after its coordinator's verification: a partition written only in transactions of one Produce each has no other
    append to learn it from)."""
    if isinstance(verdict, tuple):
        code, message, record_errors = verdict
        answer = _rejected(name, index, code, message, record_errors, ctx.header.client_id)
        # Kafka's LogValidator refusals (its RecordValidationException, and its other InvalidRecordExceptions,
        # which ReplicaManager's catch-all answers) carry the partition's log start offset; the request's own rules
        # (KafkaApis: "Produce requests with version ...") and a corrupt or too large batch do not
        by_validator = record_errors or (code == errors.INVALID_RECORD and not (message or "").startswith(
            REQUEST_RULES_WORDS))
        log_ = broker.partitions.get(name, index) if by_validator else None
        if log_ is not None:
            answer["log_start_offset"] = log_.log_start_offset
        return answer
    if not route:
        if broker.replicas.leader_error(name, index):
            return _not_leader(broker, name, index, ctx.api_version, leaders)
        if request.acks == -1:
            refused, why = broker.replicas.check_acks_all(name, index)
            if refused:
                return _partition_error(index, refused, why)
    batch = verdict
    if batch.is_transactional and request.transactional_id is None:
        # Kafka: transactional records in a request without a transactional id are an authorization failure
        return _partition_error(index, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                "transactional records require a transactional id")
    manager = broker.partitions
    producers = broker.producers
    producer_id = batch.producer_id
    if producer_id >= 0:
        epoch, first_seq, last_seq = batch.producer_epoch, batch.base_sequence, batch.last_sequence
        # a new batch holds the partition's producer table until it is recorded (or released): the native paths
        # leave the partition's producers' batches to this path meanwhile
        code, duplicate = producers.check(name, index, producer_id, epoch, first_seq, last_seq, hold=True)
        if not code and duplicate is None:
            code = producers.check_transactional(name, index, producer_id, batch.is_transactional)
            if code:
                producers.release(name, index)
        if code:
            return _partition_error(index, code)
        if duplicate is not None:
            if not batch.has_valid_crc():
                # the validator left the CRC to the append; Kafka checks it before looking for duplicates
                return _rejected(name, index, errors.CORRUPT_MESSAGE, "Record is corrupt (CRC mismatch)", [],
                                 ctx.header.client_id)
            log.debug("duplicate batch from producer %d seq %d-%d on %s-%d: answering with offset %d",
                      producer_id, first_seq, last_seq, name, index, duplicate.base_offset)
            log_ = manager.get(name, index)
            # a retry of a batch still waiting for the ISR waits too: its first answer may have been lost
            return _wait_for_ack(broker, request, name, index, duplicate.last_offset, waits, {
                "index": index, "error_code": errors.NONE, "base_offset": duplicate.base_offset,
                "log_append_time_ms": duplicate.log_append_time, "log_start_offset": log_.log_start_offset,
                "record_errors": [], "error_message": None})
    appended = False   # set by record_producer once the log holds the batch (its record then ends the hold)

    def record_producer(result: Any) -> None:
        # before the high watermark moves (see ReplicaManager.append)
        nonlocal appended
        appended = True
        producers.update(name, index, producer_id, epoch,
                         BatchMetadata(first_seq, last_seq, result.base_offset, result.last_offset,
                                       result.max_timestamp, result.log_append_time), now_ms,
                         transactional=batch.is_transactional)

    try:
        result = broker.replicas.append(name, index, batch, now_ms=now_ms, required_acks=request.acks,
                                        recorded=record_producer if producer_id >= 0 else None)
    except KafkaError as exc:   # refused before the append: no longer the leader, or the ISR under min.insync
        if exc.code == errors.NOT_LEADER_OR_FOLLOWER:
            return _not_leader(broker, name, index, ctx.api_version, leaders)
        return _partition_error(index, exc.code, exc.message)
    except RecordTooLargeError as exc:
        return _rejected(name, index, errors.MESSAGE_TOO_LARGE, str(exc), [], ctx.header.client_id)
    except ValueError as exc:  # CorruptRecordError: what the log's own checks refuse (the CRC among them)
        return _rejected(name, index, errors.CORRUPT_MESSAGE, str(exc), [], ctx.header.client_id)
    except OSError as exc:
        if not isinstance(exc, LogDirOfflineError):  # that one was logged when the dir went offline
            log.error("append to %s-%d failed: %s", name, index, exc)
        return _partition_error(index, errors.KAFKA_STORAGE_ERROR, str(exc))
    except KeyError:  # deleted meanwhile
        return _partition_error(index, errors.UNKNOWN_TOPIC_OR_PARTITION)
    finally:
        if producer_id >= 0 and not appended:
            producers.release(name, index)   # nothing appended: end the check's hold
    if broker.metrics is not None:
        broker.metrics.produced(name, batch.size, batch.records_count)
    if route or learn_route:
        _route_natively(broker, name, index)
    return _wait_for_ack(broker, request, name, index, result.last_offset, waits, {
        "index": index, "error_code": errors.NONE, "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time, "log_start_offset": result.log_start_offset,
        "record_errors": [], "error_message": None})


def _route_natively(broker: HandlerBroker, name: str, index: int) -> None:
    """This partition passed every check a Produce to it makes before its batch (known, led here, not internal,
    not being appended by a fetcher) and took a batch: let the native path (klog/broker/native_produce.py) serve its
    next Produce requests, under the topic's policy as read here (a transactional batch there only when its
    transaction is known, ``native_produce.transaction_check``)."""
    manager = broker.partitions
    routes = manager.native_routes
    if routes is None or routes.knows(name, index):
        return
    topic = manager.topics.get(name)
    if topic is None or topic.internal:   # internal topics: only the admin client may write them (checked here)
        return
    policy = _policy(topic)
    if policy.segment_bytes is not None and policy.segment_bytes < policy.max_message_bytes:
        return   # the native path knows no segment bound: batches between the two are refused here
    manager.learn_native_route(name, index, replicated=broker.replicas.is_replicated(name, index),
                               max_message_bytes=policy.max_message_bytes, compacted=policy.compacted,
                               create_time=policy.create_time, before_max_ms=policy.before_max_ms,
                               after_max_ms=policy.after_max_ms, compression=policy.compression,
                               compression_level=policy.compression_level)


def _wait_for_ack(broker: HandlerBroker, request: ProduceRequest, name: str, index: int, last_offset: int,
                  waits: list[AckWait], entry: ProduceResponsePartitionProduceResponse) -> ProduceResponsePartitionProduceResponse:
    """acks=all on a replicated partition: the response ``entry`` waits until the ISR has ``last_offset``."""
    if request.acks == -1:
        future = broker.replicas.wait_for_ack(name, index, last_offset, request.timeout_ms)
        if future is not None and not (future.done() and future.result() == errors.NONE):
            waits.append((entry, future))
    return entry


def _rejected(name: str, index: int, code: int, message: str | None,
              record_errors: list[ProduceResponseBatchIndexAndErrorMessage], client_id: str | None) -> ProduceResponsePartitionProduceResponse:
    """The partition response refusing a batch, logged (one line a second at most). Its message goes on the wire
    for every refusal: Kafka words only those with record errors (ReplicaManager's hasCustomErrorMessage is set for
    a RecordValidationException alone); klog's words say which field of which record was wrong (a kept difference,
    docs/compatibility.md)."""
    _rejections.log(name, index, code, message or "", client_id)
    response = _partition_error(index, code, message)
    response["record_errors"] = record_errors
    return response


def _produce_response(acks: int, responses: list[ProduceResponseTopicProduceResponse],
                      endpoints: list[ProduceResponseNodeEndpoint] | None = None) -> ProduceResponse | None:
    if acks == 0:
        failed = [f"{t['name']}-{p['index']}: error {p['error_code']}" for t in responses
                  for p in t["partition_responses"] if p["error_code"]]
        if failed:
            raise CloseConnection(f"acks=0 produce failed ({', '.join(failed[:3])})")
        return None
    if endpoints:
        return {"responses": responses, "throttle_time_ms": 0, "node_endpoints": endpoints}
    return {"responses": responses, "throttle_time_ms": 0}

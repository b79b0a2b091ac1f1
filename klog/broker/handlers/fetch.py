"""Fetch (1): long poll (max_wait_ms/min_bytes, woken by appends), byte limits, whole batches (KIP-74).

Consumers read only below the high watermark. Before v11 only the leader serves them: a partition this broker
does not lead answers NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and, v16+, the endpoints of the leaders
named (KIP-951). From v11 (KIP-392) a follower serves consumers too, up to the high watermark its leader sent it
(leader-epoch and offset checks as on the leader), and a leader with ``replica.selector.class`` answers a consumer
whose ``rack_id`` holds an in-sync follower with that follower as ``preferred_read_replica`` and no records.
Replicas fetch as Kafka's followers (``ReplicaState`` v15+, the top-level ``replica_id`` before): the
replica manager judges each partition (leader epoch, ``last_fetched_epoch`` against the epoch cache, answering a
``diverging_epoch``) and records the fetch position, which moves the high watermark; replicas read up to the log
end. A consumer's ``last_fetched_epoch`` is checked as Kafka's ``Partition.readRecords`` checks it (a diverging epoch
or OFFSET_OUT_OF_RANGE before any read). Topics are named by id from v13 (KIP-516; an id the image lacks answers
UNKNOWN_TOPIC_ID).

Fetch sessions (KIP-227, v7+; :mod:`klog.broker.fetch_sessions`): ``session_epoch`` 0 opens one, later epochs
name only the partitions that changed and are answered only with those that have news; the whole session is read
and waited on as one request naming all of it would be. A consumer's session whose partitions are all routed to
the native Fetch path is handed over to it after each answer here (``FetchSessionCache.hand_over``).

Records are returned as file regions of the segment files; the server sends them with sendfile on
plaintext connections (zero copy) or copies them otherwise.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from klog._native import CorruptLogError
from klog.broker import errors
from klog.broker.fetch_sessions import FINAL_EPOCH, INVALID_SESSION_ID, FetchContext, FetchPartition, PartitionKey
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.leaders import current_leader, leader_endpoints
from klog.broker.handlers.list_offsets import epoch_end_offset

from klog.broker.partitions import leader_epoch_error
from klog.protocol import ApiKey, encode_response

if TYPE_CHECKING:
    from klog._native import PartitionLog
    from klog.protocol.message_types import (
        FetchRequest,
        FetchResponse,
        FetchResponseFetchableTopicResponse,
        FetchResponsePartitionData,
    )

    #: the topic half of a PartitionKey: a name, or a topic id from v13
    PartitionKeyTopic = str | uuid.UUID

UNKNOWN_TOPIC_ID = errors.UNKNOWN_TOPIC_ID
#: Fetch's isolation_level for a consumer that reads only committed transactional data (below the LSO)
READ_COMMITTED = 1
#: Fetch v11 added the consumer's rack_id and preferred_read_replica (KIP-392): from it, followers serve consumers
CLOSEST_REPLICA_VERSION = 11


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _partition_result(index: int, code: int, log_: PartitionLog | None = None) -> FetchResponsePartitionData:
    hw = log_.high_watermark if log_ is not None else -1
    return {"partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": log_.log_start_offset if log_ is not None else -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}


def _replica(request: FetchRequest, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of the fetcher: -1 for a consumer."""
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return (-1, -1) if state is None else (state.replica_id, state.replica_epoch)
    return request.replica_id, -1


def _not_leader(broker: HandlerBroker, name: str, index: int, leaders: set[int]) -> FetchResponsePartitionData:
    """NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION) with the current leader (KIP-951, a tagged field of
    v12+)."""
    code, leader = current_leader(broker, name, index, leaders)
    answer = _partition_result(index, code)
    if leader is not None:
        answer["current_leader"] = leader
    return answer


def _diverged(broker: HandlerBroker, name: str, index: int, log_: PartitionLog, preq: FetchPartition
              ) -> FetchResponsePartitionData | None:
    """A consumer's fetch naming the epoch of the records it read last (the Java consumer's ``lastFetchedEpoch``,
    KIP-320), checked as Kafka's ``Partition.readRecords`` checks it before reading: an epoch the partition cannot
    end (newer than every known one) or an offset below the log start is OFFSET_OUT_OF_RANGE; an epoch that ends
    before the fetch offset, or that the partition knows only under an older one, answers its end as the
    ``diverging_epoch`` (the consumer's log was truncated: it validates its position) and no records; None: read
    on."""
    code, epoch, end = epoch_end_offset(broker, name, index, log_, preq.last_fetched_epoch)
    if code or epoch < 0 or end < 0 or preq.fetch_offset < log_.log_start_offset:
        return _partition_result(index, code or errors.OFFSET_OUT_OF_RANGE)
    if epoch >= preq.last_fetched_epoch and end >= preq.fetch_offset:
        return None
    answer = _partition_result(index, errors.NONE, log_)
    answer["last_stable_offset"] = broker.producers.last_stable_offset(name, index, log_.high_watermark,
                                                                       log_.log_start_offset)
    answer["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
    return answer


def _requested(request: FetchRequest, uses_topic_ids: bool) -> tuple[list[tuple[PartitionKey, FetchPartition]],
                                                              list[PartitionKey]]:
    """The partitions a Fetch names, in order, and those its ``forgotten_topics_data`` drops from its session;
    topics by id from v13, by name before. A partition named twice is read once, at its first place with its last
    entry (Kafka's FetchRequest keys them in a LinkedHashMap)."""
    requested: dict[PartitionKey, FetchPartition] = {}
    for topic in request.topics:
        topic_key = topic.topic_id if uses_topic_ids else topic.topic
        for p in topic.partitions:
            requested[(topic_key, p.partition)] = FetchPartition.of(p)
    forgotten: list[PartitionKey] = []
    for topic in getattr(request, "forgotten_topics_data", None) or ():
        topic_key = topic.topic_id if uses_topic_ids else topic.topic
        forgotten.extend((topic_key, index) for index in topic.partitions)
    return list(requested.items()), forgotten


def _read_all(broker: HandlerBroker, request: FetchRequest, wanted: list[tuple[PartitionKey, FetchPartition]],
              zero_copy: bool, max_bytes: int, version: int, leaders: set[int],
              judged: dict[tuple[str, int], tuple[int, int, int] | None], names: dict[PartitionKeyTopic, str | None],
              denied: Callable[[str], bool] | None = None
              ) -> tuple[list[tuple[PartitionKey, FetchResponsePartitionData]], int, bool, list[tuple[str, int]]]:
    """One pass over the partitions ``wanted`` (the request's, or its session's): (an answer per partition, bytes
    found, any error, keys to wait on). Topics are named by id from v13 (``names`` caches what they name);
    ``leaders`` collects the leaders named in NOT_LEADER_OR_FOLLOWER answers. A replica's partitions are judged
    (their fetch position recorded, which moves the high watermark) on the first pass, and again only if the
    leadership changed meanwhile: ``judged`` keeps what each verdict was given under. ``denied(topic)``: the
    principal may not read the topic (TOPIC_AUTHORIZATION_FAILED, whether or not it exists here)."""
    manager = broker.partitions
    replicas = broker.replicas
    fetch_routes = manager.fetch_routes
    replica_id, broker_epoch = _replica(request, version)
    rack_id = getattr(request, "rack_id", "") if version >= CLOSEST_REPLICA_VERSION else ""
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    total = 0
    had_error = False
    keys: list[tuple[str, int]] = []
    answers: list[tuple[PartitionKey, FetchResponsePartitionData]] = []
    for entry_key, preq in wanted:
        index = preq.partition
        if version >= 13:
            topic_id = entry_key[0]
            if topic_id in names:
                name = names[topic_id]
            else:
                known = broker.metadata.topic_by_id(cast("uuid.UUID", topic_id))   # v13+ keys are topic ids
                name = names[topic_id] = known.name if known is not None else None
        else:
            name = str(entry_key[0])
        if name is None:
            answers.append((entry_key, _partition_result(index, UNKNOWN_TOPIC_ID)))
            had_error = True
            continue
        if denied is not None and denied(name):
            answers.append((entry_key, _partition_result(index, errors.TOPIC_AUTHORIZATION_FAILED)))
            had_error = True
            continue
        log_ = manager.get(name, index)
        if log_ is None:
            answers.append((entry_key, _not_leader(broker, name, index, leaders)))
            had_error = True
            continue
        offset = preq.fetch_offset
        throttled = False
        if replica_id >= 0:
            leadership = replicas.leadership(name, index)
            if leadership is None or judged.get((name, index)) != leadership:
                verdict = replicas.follower_fetch(name, index, replica_id, broker_epoch, preq.current_leader_epoch,
                                                  offset, preq.last_fetched_epoch, preq.log_start_offset)
                if verdict.error or not verdict.read:
                    answer = _partition_result(index, verdict.error, log_)
                    if verdict.diverging_epoch is not None:
                        answer["diverging_epoch"] = {"epoch": verdict.diverging_epoch.epoch,
                                                     "end_offset": verdict.diverging_epoch.end_offset}
                    answers.append((entry_key, answer))
                    had_error = True
                    continue
                judged[(name, index)] = leadership
                if fetch_routes is not None and not fetch_routes.knows(name, index):
                    manager.learn_fetch_route(name, index, log_)   # the native Fetch path serves its next fetches
            visible = log_.log_end_offset
            throttle = broker.leader_throttle
            throttled = throttle.is_throttled(name, index)
            if throttled and throttle.holds(name, index):   # leader.replication.throttled.rate used up
                visible = offset
        else:
            # the epoch first (a follower fences an older one too), then the leadership: Kafka's Partition.getLocalLog
            leader_epoch = preq.current_leader_epoch
            code = leader_epoch_error(leader_epoch, manager.leader_epoch(name, index)) if leader_epoch != -1 else 0
            if code:   # a consumer's error answers carry no offsets (Kafka's LogReadResult of an exception)
                answers.append((entry_key, _partition_result(index, code)))
                had_error = True
                continue
            following = bool(replicas.leader_error(name, index))
            if following and version < CLOSEST_REPLICA_VERSION:   # older consumers read from the leader only
                answers.append((entry_key, _not_leader(broker, name, index, leaders)))
                had_error = True
                continue
            # the leader's own epoch ends at its log end: nothing to look up (as the native path skips it)
            own_epoch = not following and preq.last_fetched_epoch == manager.leader_epoch(name, index) \
                and offset <= log_.log_end_offset
            if preq.last_fetched_epoch >= 0 and not own_epoch:
                diverged = _diverged(broker, name, index, log_, preq)
                if diverged is not None:   # answered at once, as an error is
                    answers.append((entry_key, diverged))
                    had_error = True
                    continue
            if offset < log_.log_start_offset or offset > log_.log_end_offset:
                answers.append((entry_key, _partition_result(index, errors.OFFSET_OUT_OF_RANGE)))
                had_error = True
                continue
            if rack_id and not following:
                preferred = replicas.preferred_read_replica(name, index, rack_id, offset, broker.rack)
                if preferred >= 0:   # KIP-392: no records, read them there (answered at once, as Kafka does)
                    answer = _partition_result(index, errors.NONE, log_)
                    answer["preferred_read_replica"] = preferred
                    answers.append((entry_key, answer))
                    had_error = True
                    continue
            # a follower serves up to the high watermark its leader sent it
            visible = log_.high_watermark
        keys.append((name, index))
        answer = _partition_result(index, errors.NONE, log_)
        stable = None
        if replica_id < 0:
            if fetch_routes is not None and not following and not fetch_routes.knows(name, index):
                manager.learn_fetch_route(name, index, log_)   # the native Fetch path serves its next fetches
            lso = broker.producers.last_stable_offset(name, index, log_.high_watermark, log_.log_start_offset)
            answer["last_stable_offset"] = lso
            if read_committed:   # only below the last stable offset, with the aborted transactions to skip
                stable = lso
                visible = min(visible, lso)
                answer["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in broker.producers.aborted_txns(name, index, offset, lso)]
        answers.append((entry_key, answer))
        remaining = min(preq.partition_max_bytes, max_bytes - total)
        if offset >= visible or (remaining <= 0 and total > 0):
            continue
        try:
            read = manager.read(log_, offset, max(remaining, 0), min_one_batch=total == 0, replica=replica_id >= 0,
                                stable_offset=stable)
        except ValueError:  # OffsetOutOfRange: retention moved the start meanwhile
            answer.update(_partition_result(index, errors.OFFSET_OUT_OF_RANGE, log_ if replica_id >= 0 else None))
            had_error = True
            continue
        except CorruptLogError:  # damaged segment bytes (logged by the storage engine): never served
            answer["error_code"] = errors.CORRUPT_MESSAGE
            had_error = True
            continue
        answer["high_watermark"] = read.high_watermark
        if replica_id >= 0:
            answer["last_stable_offset"] = read.high_watermark
        else:
            answer["last_stable_offset"] = min(answer["last_stable_offset"], read.high_watermark)
        answer["log_start_offset"] = read.log_start_offset
        if read.length:
            answer["records"] = read.slices if zero_copy else read.to_bytes()
            total += read.length
            if throttled:
                broker.leader_throttle.moved(read.length, broker.leader_throttle.clock())
    return answers, total, had_error, keys


def _by_topic(answers: list[tuple[PartitionKey, FetchResponsePartitionData]], uses_topic_ids: bool,
              names: dict[PartitionKeyTopic, str | None]) -> list[FetchResponseFetchableTopicResponse]:
    """The response's topics: consecutive answers of one topic under one entry (a session's order may name a topic
    again further on, as Kafka's responses do)."""
    responses: list[FetchResponseFetchableTopicResponse] = []
    last_topic = None
    partitions: list[FetchResponsePartitionData] = []
    for (topic_key, _), answer in answers:
        if topic_key != last_topic or not responses:
            partitions = []
            if uses_topic_ids:   # v13+: keys are topic ids, "topic" is not sent ("": an id the image lacks)
                responses.append({"topic": names.get(topic_key) or "", "topic_id": cast("uuid.UUID", topic_key),
                                  "partitions": partitions})
            else:
                responses.append({"topic": str(topic_key), "topic_id": errors.ZERO_UUID, "partitions": partitions})
            last_topic = topic_key
        partitions.append(answer)
    return responses


def _denied_topics(broker: HandlerBroker, ctx: RequestContext, replica_id: int) -> Callable[[str], bool] | None:
    """Which topics this fetch may not read (None: all may be read, no authorizer): a replica needs
    ClusterAction on the Cluster for every partition, a consumer Read on each topic (checked once per request)."""
    if broker.access is None:
        return None
    if replica_id >= 0:
        if authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION):
            return None
        return lambda name: True
    verdicts: dict[str, bool] = {}

    def denied(name: str) -> bool:
        verdict = verdicts.get(name)
        if verdict is None:
            verdict = verdicts[name] = not authz.allowed(broker, ctx, authz.AclOperation.READ,
                                                         authz.ResourceType.TOPIC, name)
        return verdict

    return denied


def _invalid_isolation_level(request: FetchRequest, uses_topic_ids: bool) -> FetchResponse:
    """An isolation_level other than read_uncommitted (0) and read_committed (1): Kafka's
    ``IsolationLevel.forId`` throws, and the request's error response is UNKNOWN_SERVER_ERROR at the top and on
    each partition named (high watermark, last stable and log start offsets -1), nothing read, no session
    touched."""
    responses: list[FetchResponseFetchableTopicResponse] = [
        {"topic": "" if uses_topic_ids else topic.topic,
         "topic_id": topic.topic_id if uses_topic_ids else errors.ZERO_UUID,
         "partitions": [_partition_result(p.partition, errors.UNKNOWN_SERVER_ERROR) for p in topic.partitions]}
        for topic in request.topics]
    return {"throttle_time_ms": 0, "error_code": errors.UNKNOWN_SERVER_ERROR,
            "session_id": getattr(request, "session_id", 0), "responses": responses}


@handler(1, 4, 18)
async def handle_fetch(broker: HandlerBroker, ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    version = ctx.api_version
    uses_topic_ids = version >= 13
    replica_id = _replica(request, version)[0]
    if getattr(request, "isolation_level", 0) not in (0, READ_COMMITTED):
        return _invalid_isolation_level(request, uses_topic_ids)
    requested, forgotten = _requested(request, uses_topic_ids)
    sessions = broker.fetch_sessions
    context = FetchContext.new(sessions, session_id=getattr(request, "session_id", 0),
                               session_epoch=getattr(request, "session_epoch", FINAL_EPOCH),
                               uses_topic_ids=uses_topic_ids, requested=requested, forgotten=forgotten,
                               now_ms=_now_ms())
    if context.error:
        return {"throttle_time_ms": 0, "error_code": context.error, "session_id": INVALID_SESSION_ID,
                "responses": []}
    max_bytes = min(getattr(request, "max_bytes", 2**31 - 1), broker.config["fetch.max.bytes"])
    max_bytes = max(max_bytes, 0)
    min_bytes = request.min_bytes
    max_wait_s = max(request.max_wait_ms, 0) / 1000
    deadline = time.monotonic() + max_wait_s
    leaders: set[int] = set()
    judged: dict[tuple[str, int], tuple[int, int, int] | None] = {}
    names: dict[PartitionKeyTopic, str | None] = {}
    denied = _denied_topics(broker, ctx, replica_id)
    while True:
        answers, total, had_error, keys = _read_all(broker, request, context.partitions, ctx.zero_copy, max_bytes,
                                                    version, leaders, judged, names, denied)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or total > 0 and min_bytes <= 0 or had_error or remaining <= 0 or not keys:
            break
        await broker.partitions.wait_for_append(keys, remaining, replica=replica_id >= 0)
        if time.monotonic() >= deadline:
            # Woken at the deadline: answer with whatever is there now.
            answers, total, had_error, keys = _read_all(broker, request, context.partitions, ctx.zero_copy,
                                                        max_bytes, version, leaders, judged, names, denied)
            break
        await asyncio.sleep(0)
    if replica_id < 0 and broker.quotas.limits_fetch(ctx.principal, ctx.header.client_id):
        throttle = _consumer_byte_throttle(broker, ctx, _response(
            broker, ctx, context.would_answer(answers), INVALID_SESSION_ID, uses_topic_ids, names, leaders))
        if throttle:   # Kafka's getThrottledResponse: nothing read is sent, no session opens (one continued stays)
            return {"throttle_time_ms": throttle, "error_code": errors.NONE, "responses": [],
                    "session_id": INVALID_SESSION_ID if context.session is None else context.session.id}
    session_id, answers = context.answer(sessions, answers, privileged=replica_id >= 0,
                                         uses_topic_ids=uses_topic_ids, now_ms=_now_ms())
    # a rack-aware consumer's session stays here (replica.selector.class may send it to a follower)
    rack_aware = replica_id < 0 and bool(getattr(request, "rack_id", "")) and \
        bool(broker.config["replica.selector.class"])
    if session_id != INVALID_SESSION_ID and sessions.native is not None and not rack_aware:
        # the native Fetch path serves the session's next incremental fetches if every partition is routed to it
        sessions.hand_over(context.session or sessions.sessions[session_id])
    response = _response(broker, ctx, answers, session_id, uses_topic_ids, names, leaders)
    if broker.metrics is not None:
        broker.metrics.fetched(response["responses"])
    return response


def _response(broker: HandlerBroker, ctx: RequestContext,
              answers: list[tuple[PartitionKey, FetchResponsePartitionData]], session_id: int, uses_topic_ids: bool,
              names: dict[PartitionKeyTopic, str | None], leaders: set[int]) -> FetchResponse:
    response: FetchResponse = {"throttle_time_ms": 0, "error_code": errors.NONE, "session_id": session_id,
                               "responses": _by_topic(answers, uses_topic_ids, names)}
    if leaders and ctx.api_version >= 16:
        response["node_endpoints"] = leader_endpoints(broker, ctx.listener, leaders)
    return response


def _consumer_byte_throttle(broker: HandlerBroker, ctx: RequestContext, response: FetchResponse) -> int:
    """The throttle time ``consumer_byte_rate`` gives the consumer for ``response`` (its encoded size); a throttled
    fetch is answered empty and its bytes are not counted (Kafka's KafkaApis.handleFetchRequest)."""
    size = int.from_bytes(encode_response(ApiKey.FETCH, ctx.api_version, ctx.header.correlation_id, response)[0], "big")
    return broker.quotas.fetch(ctx.principal, ctx.header.client_id, size, time.monotonic() * 1000)

"""Metadata (3): brokers, controller, topics with partitions, all from the metadata image; starts auto-creating
topics (the answer does not wait for them, as Kafka's).

Its answers are kept encoded and given again (klog/broker/metadata_answers.py) while the image's topics and brokers
are unchanged: an answer that comes to depend on anything else (a config, the client) must say so there."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, cast

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.topics import TopicError, is_internal, validate_topic_name
from klog.metadata.storage import METADATA_TOPIC

if TYPE_CHECKING:
    from klog.metadata.image import MetadataImage, PartitionRegistration, TopicImage
    from klog.protocol.message_types import (
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        DescribeTopicPartitionsResponseCursor,
        DescribeTopicPartitionsResponsePartition,
        DescribeTopicPartitionsResponseTopic,
        MetadataRequest,
        MetadataRequestTopic,
        MetadataResponse,
        MetadataResponseBroker,
        MetadataResponseTopic,
    )

_TOPIC = authz.ResourceType.TOPIC
_DESCRIBE = authz.AclOperation.DESCRIBE


def broker_entry(broker: HandlerBroker, listener: str, broker_id: int | None = None) -> MetadataResponseBroker:
    """A broker as clients of ``listener`` reach it: this broker's bound address, another's registration (also
    the NodeEndpoint of Produce and Fetch, whose fields are the same)."""
    if broker_id is None or broker_id == broker.node_id:
        host, port = broker.endpoints.get(listener, (broker.host, broker.port))
        return {"node_id": broker.node_id, "host": host, "port": port, "rack": broker.rack}
    registration = broker.metadata.image.brokers[broker_id]
    endpoint = registration.endpoint(listener)
    return {"node_id": broker_id, "host": endpoint.host if endpoint else "", "port": endpoint.port if endpoint else -1,
            "rack": registration.rack}


def live_broker_entries(broker: HandlerBroker, listener: str) -> list[MetadataResponseBroker]:
    return [broker_entry(broker, listener, b.id) for b in broker.metadata.image.live_brokers()]


def partition_entry(image: MetadataImage, partition: int, registration: PartitionRegistration
                    ) -> DescribeTopicPartitionsResponsePartition:
    """A partition as Metadata and DescribeTopicPartitions list it (Metadata's partition has a subset of the
    fields); a leader that is not a live broker is listed as none, with LEADER_NOT_AVAILABLE (Kafka's
    KRaftMetadataCache)."""
    leader = registration.leader
    live = leader in image.brokers and not image.brokers[leader].fenced
    return {"error_code": errors.NONE if live else errors.LEADER_NOT_AVAILABLE, "partition_index": partition,
            "leader_id": leader if live else -1,
            # the partition's epoch (KIP-320): clients send it back in Fetch/ListOffsets/Produce
            "leader_epoch": registration.leader_epoch, "replica_nodes": list(registration.replicas),
            "isr_nodes": list(registration.isr),
            "offline_replicas": list(registration.offline_replicas(image.brokers))}


def topic_entry(broker: HandlerBroker, ctx: RequestContext | None, name: str, include_ops: bool
                ) -> MetadataResponseTopic:
    """``ctx``: the request, for its principal's authorized operations (``include_ops``)."""
    image = broker.metadata.image
    topic = cast("TopicImage", image.topic(name))   # callers name a topic of the image
    return {
        "error_code": errors.NONE, "name": name, "topic_id": topic.id, "is_internal": is_internal(name),
        "partitions": [partition_entry(image, p, r) for p, r in sorted(topic.partitions.items())],
        "topic_authorized_operations": authz.authorized_operations(broker, ctx, _TOPIC, name)
        if include_ops and ctx is not None else errors.AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_entry(name: str | None, code: int) -> MetadataResponseTopic:
    """(Kafka flags an internal topic's name as internal in an error answer too.)"""
    return {"error_code": code, "name": name, "is_internal": name is not None and is_internal(name), "partitions": [],
            "topic_authorized_operations": errors.AUTHORIZED_OPERATIONS_OMITTED}


#: the first Metadata version that may name a topic by id alone (v10 and v11 carry the id field, Kafka refuses it)
FIRST_TOPIC_ID_VERSION = 12


def _request_refused(requested: list[MetadataRequestTopic], code: int = errors.INVALID_REQUEST
                     ) -> MetadataResponse:
    """Kafka's answer to a request its KafkaApis throws on: a v10/v11 request naming a topic by id (alone or
    beside its name: "Topic name can not be null" / "Topic IDs are not supported in requests for version ...",
    INVALID_REQUEST), a v12+ one naming a topic by neither (its null name fails the lookup: UNKNOWN_SERVER_ERROR).
    The request's error answer: every topic ``code`` (and the whole answer, v13+), no brokers, no cluster id, no
    controller."""
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [{**_error_entry(item.name or "", code), "topic_id": item.topic_id}
                       for item in requested],
            "cluster_authorized_operations": errors.AUTHORIZED_OPERATIONS_OMITTED, "error_code": code}


async def _auto_create(broker: HandlerBroker, response: MetadataResponse, pending: list[str]) -> MetadataResponse:
    """Start the auto-creation of the ``pending`` topics and answer at once, without them (Kafka's
    AutoTopicCreationManager: the CreateTopics goes to the controller, the answer names each
    UNKNOWN_TOPIC_OR_PARTITION, the client asks again). A coroutine, so that the answer, which starts something,
    is never kept encoded and given again (klog/broker/metadata_answers.py)."""
    for name in pending:
        broker.start_auto_create_topic(name)
    return response


@handler(3, 0, 13)
def handle_metadata(broker: HandlerBroker, ctx: RequestContext, request: MetadataRequest
                    ) -> MetadataResponse | Coroutine[Any, Any, MetadataResponse]:
    """Answers at once; when it starts auto-creating topics, the answer comes from a coroutine (the server
    awaits it), which is never kept encoded."""
    version = ctx.api_version
    include_topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    metadata = broker.metadata
    topics: list[MetadataResponseTopic] = []
    pending: list[str] = []
    if requested and version < FIRST_TOPIC_ID_VERSION and any(
            item.name is None or item.topic_id != errors.ZERO_UUID for item in requested):
        return _request_refused(requested)
    if requested and all(item.topic_id == errors.ZERO_UUID for item in requested) and any(
            item.name is None for item in requested):
        return _request_refused(requested, errors.UNKNOWN_SERVER_ERROR)
    if requested is None or (version == 0 and not requested):
        # every topic the principal may describe; the others are left out, unnamed
        names = metadata.topic_names()
        if broker.access is not None:
            names = [n for n in names if authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, n, count=False)]
        topics = [topic_entry(broker, ctx, name, include_topic_ops) for name in names]
    else:
        allow_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or bool(getattr(request, "allow_auto_topic_creation", True)))
        named: set[str] = set()
        wanted = [(item.name, item.topic_id) for item in requested]
        ids = [topic_id for _, topic_id in wanted if topic_id != errors.ZERO_UUID]
        if ids and version >= FIRST_TOPIC_ID_VERSION:
            # Kafka answers a request naming any topic id for its ids alone, each once (it reads them into a set):
            # names beside them are not answered, an id given with a name is looked up by the id
            wanted = [(None, topic_id) for topic_id in dict.fromkeys(ids)]
        for name, topic_id in wanted:
            if name is not None:   # Kafka answers a topic named twice once (it reads the names into a set)
                if name in named:
                    continue
                named.add(name)
            if name is None:
                # v12+ may ask by topic id; an id the principal may not describe answers TOPIC_AUTHORIZATION_FAILED
                # with its name hidden, as Kafka's
                found = metadata.topic_by_id(topic_id)
                if found is None:
                    topics.append({**_error_entry(None, errors.UNKNOWN_TOPIC_ID), "topic_id": topic_id})
                elif not authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, found.name):
                    topics.append({**_error_entry(None, errors.TOPIC_AUTHORIZATION_FAILED), "topic_id": topic_id})
                else:
                    topics.append(topic_entry(broker, ctx, found.name, include_topic_ops))
                continue
            if not authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, name):
                # Kafka answers before looking the topic up: whether it exists is not revealed
                topics.append(_error_entry(name, errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            if metadata.topic(name) is not None:
                topics.append(topic_entry(broker, ctx, name, include_topic_ops))
                continue
            try:
                validate_topic_name(name)
            except TopicError as exc:
                topics.append(_error_entry(name, exc.code))
                continue
            if not allow_create:
                topics.append(_error_entry(name, errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if not (authz.allowed_cluster(broker, ctx, authz.AclOperation.CREATE, count=False)
                    or authz.allowed(broker, ctx, authz.AclOperation.CREATE, _TOPIC, name)):
                topics.append(_error_entry(name, errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            topics.append(_error_entry(name, errors.UNKNOWN_TOPIC_OR_PARTITION))
            if name != METADATA_TOPIC:   # Kafka never creates it: its answer stays this one
                pending.append(name)
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    response: MetadataResponse = {
        "throttle_time_ms": 0,
        "brokers": live_broker_entries(broker, ctx.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": authz.cluster_operations(broker, ctx) if include_cluster_ops
        else errors.AUTHORIZED_OPERATIONS_OMITTED,
        "error_code": errors.NONE,
    }
    if pending:
        return _auto_create(broker, response, pending)
    return response


#: The most partitions one DescribeTopicPartitions answer lists (Kafka's max.request.partition.size.limit default);
#: a client asking for more gets a cursor to continue from.
MAX_DESCRIBE_TOPIC_PARTITIONS = 2000


@handler(75, 0, 0)
def handle_describe_topic_partitions(broker: HandlerBroker, ctx: RequestContext,
                                     request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    """Topics by name (all of them when none is named), in name order, with at most
    ``response_partition_limit`` partitions in all: when more are left, ``next_cursor`` is where the
    next request's cursor starts (Kafka's DescribeTopicPartitionsRequestHandler)."""
    image = broker.metadata.image
    limit = max(1, min(request.response_partition_limit, MAX_DESCRIBE_TOPIC_PARTITIONS))
    if any(not t.name for t in request.topics):
        # Kafka's authorizer throws on an empty resource name: the request fails, each topic named with it
        return {"throttle_time_ms": 0, "next_cursor": None,
                "topics": [_error_topic(t.name, errors.UNKNOWN_SERVER_ERROR) for t in request.topics]}
    if request.topics:
        requested = sorted({t.name for t in request.topics})
        hidden = set(requested) - authz.filter_allowed(broker, ctx, _DESCRIBE, _TOPIC, requested)
    else:   # every topic the principal may describe
        requested = sorted(authz.filter_allowed(broker, ctx, _DESCRIBE, _TOPIC, image.topics_by_name, count=False))
        hidden = set()
    cursor = request.cursor
    first_partition = 0
    if cursor is not None:
        # Kafka refuses a cursor naming a topic the request does not, or a negative partition
        if (request.topics and cursor.topic_name not in requested) or cursor.partition_index < 0:
            return {"throttle_time_ms": 0, "next_cursor": None,
                    "topics": [_error_topic(t.name, errors.INVALID_REQUEST) for t in request.topics]}
        requested = [name for name in requested if name >= cursor.topic_name]
        first_partition = max(cursor.partition_index, 0)
    remaining = limit
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: DescribeTopicPartitionsResponseCursor | None = None
    for name in requested:
        start = first_partition if cursor is not None and name == cursor.topic_name else 0
        if remaining <= 0:
            next_cursor = {"topic_name": name, "partition_index": start}
            break
        topic = image.topic(name)
        if name in hidden:
            topics.append(_error_topic(name, errors.TOPIC_AUTHORIZATION_FAILED))
            continue
        if topic is None:   # with the operations the principal would have on it, as Kafka's
            topics.append({**_error_topic(name, _unknown_topic_error(name)),
                           "topic_authorized_operations": authz.authorized_operations(broker, ctx, _TOPIC, name)})
            continue
        indexes = [p for p in sorted(topic.partitions) if p >= start]
        taken = indexes[:remaining]
        remaining -= len(taken)
        entries: list[DescribeTopicPartitionsResponsePartition] = []
        for p in taken:
            entry = partition_entry(image, p, topic.partitions[p])
            entry["eligible_leader_replicas"] = list(topic.partitions[p].elr)
            entry["last_known_elr"] = list(topic.partitions[p].last_known_elr)
            entries.append(entry)
        topics.append({"error_code": errors.NONE, "name": name, "topic_id": topic.id, "is_internal": is_internal(name),
                       "partitions": entries,
                       "topic_authorized_operations": authz.authorized_operations(broker, ctx, _TOPIC, name)})
        if len(indexes) > len(taken):
            next_cursor = {"topic_name": name, "partition_index": indexes[len(taken)]}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def _unknown_topic_error(name: str) -> int:
    """A topic the image lacks: INVALID_TOPIC_EXCEPTION when no topic can have its name (Kafka's metadata cache)."""
    try:
        validate_topic_name(name)
    except TopicError as exc:
        return exc.code
    return errors.UNKNOWN_TOPIC_OR_PARTITION


def _error_topic(name: str, code: int) -> DescribeTopicPartitionsResponseTopic:
    return {"error_code": code, "name": name, "topic_id": errors.ZERO_UUID, "is_internal": False, "partitions": [],
            "topic_authorized_operations": errors.AUTHORIZED_OPERATIONS_OMITTED}

"""Routing of the consumer-group APIs to ``klog.broker.groups.GroupCoordinator`` (see groups/api.py), after
Kafka's authorization of each (``KafkaApis``): Read on the Group to join, sync, heartbeat, leave and commit;
Describe on it to find its coordinator, fetch its offsets and describe it; Delete to delete it or its offsets;
Read (commit, offset delete, share offsets alter and delete) or Describe (offset fetch, share offsets describe) on
each topic; ListGroups lists every group with Describe
on the Cluster, else the groups the principal may describe. The coordinator sees only what is allowed.

The advertised versions are what the coordinator declares in ``SUPPORTED_APIS``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union, cast

from klog.broker import errors
from klog.broker.groups.api import GROUP_API_KEYS
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.topic_answers import NO_TOPIC_ID, TopicAnswers, known_partitions
from klog.protocol.struct import field_of
from klog.metadata.features import GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION
from klog.protocol.struct import Struct

_GROUP = authz.ResourceType.GROUP
_TOPIC = authz.ResourceType.TOPIC
_TXN = authz.ResourceType.TRANSACTIONAL_ID
Op = authz.AclOperation
GAF = errors.GROUP_AUTHORIZATION_FAILED
TAF = errors.TOPIC_AUTHORIZATION_FAILED
TAF_MESSAGE = "Topic authorization failed."

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequestTopic,
        ConsumerGroupDescribeRequest,
        ConsumerGroupHeartbeatRequest,
        DeleteGroupsRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeGroupsRequest,
        DescribeShareGroupOffsetsRequest,
        FindCoordinatorRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        ShareGroupDescribeRequest,
        ShareGroupHeartbeatRequest,
        StreamsGroupDescribeRequest,
        StreamsGroupHeartbeatRequest,
        SyncGroupRequest,
    )

    #: the requests of GROUP_API_KEYS
    GroupRequest = Union[
        OffsetCommitRequest, OffsetFetchRequest, FindCoordinatorRequest, JoinGroupRequest, HeartbeatRequest,
        LeaveGroupRequest, SyncGroupRequest, DescribeGroupsRequest, ListGroupsRequest, DeleteGroupsRequest,
        OffsetDeleteRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest,
        ShareGroupHeartbeatRequest, ShareGroupDescribeRequest, DescribeShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, StreamsGroupHeartbeatRequest,
        StreamsGroupDescribeRequest,
    ]


def _with(request: object, **fields: Any) -> Struct:
    return Struct(**{**request.__dict__, **fields})


async def _coordinate(broker: HandlerBroker, ctx: RequestContext, request: GroupRequest | Struct) -> Any:
    return await broker.coordinator.handle(ctx.header, request, client_host=ctx.client_host, listener=ctx.listener)


def _group_ok(broker: HandlerBroker, ctx: RequestContext, op: int, group: str) -> bool:
    return authz.allowed(broker, ctx, op, _GROUP, group)


def _topic_errors(topics: list[Any], code: int, *, indexes: str = "partitions", metadata: str | None = None
                  ) -> list[dict[str, Any]]:
    """Answers for refused topics: every partition asked answers ``code``."""
    out = []
    for t in topics:
        parts = field_of(t, indexes) or []
        out.append({"name": t.name, "topic_id": field_of(t, "topic_id", NO_TOPIC_ID), "partitions": [
            {"partition_index": p if isinstance(p, int) else p.partition_index, "error_code": code,
             "committed_offset": -1, "metadata": metadata} for p in parts]})
    return out


#: OffsetCommit and OffsetFetch name topics by id from this version (KIP-848's follow-up, Kafka 4.1)
OFFSETS_BY_TOPIC_ID_VERSION = 10


def _topic_of_id(broker: HandlerBroker, topic_id: uuid.UUID) -> Any:
    """The topic an OffsetCommit/OffsetFetch v10 names by id; None for the zero id and an id no topic has (one
    deleted), which Kafka answers UNKNOWN_TOPIC_ID."""
    return None if topic_id == NO_TOPIC_ID else broker.metadata.topic_by_id(topic_id)


async def _offset_commit(broker: HandlerBroker, ctx: RequestContext, request: OffsetCommitRequest) -> Any:
    """OffsetCommit as Kafka's KafkaApis: Read on the group first (every topic answers GROUP_AUTHORIZATION_FAILED),
    then per topic (from v10 named by id: UNKNOWN_TOPIC_ID for an id no topic has, first)
    TOPIC_AUTHORIZATION_FAILED without Read on it, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does
    not exist; the rest goes to the coordinator by name (none: the coordinator is not asked, so no group error
    either), its answers merged after these refusals."""
    by_id = ctx.api_version >= OFFSETS_BY_TOPIC_ID_VERSION
    if not _group_ok(broker, ctx, Op.READ, request.group_id):
        if not by_id:
            return {"throttle_time_ms": 0, "topics": _topic_errors(request.topics, GAF)}
        refused = TopicAnswers(by_id)
        for t in request.topics:
            refused.add(t, [p.partition_index for p in t.partitions], GAF)
        return {"throttle_time_ms": 0, "topics": refused.topics}
    answers = TopicAnswers(by_id)
    found = [_topic_of_id(broker, t.topic_id) if by_id else broker.metadata.topic(t.name) for t in request.topics]
    names = [f.name if by_id and f is not None else t.name for t, f in zip(request.topics, found, strict=True)]
    allowed = authz.filter_allowed(broker, ctx, Op.READ, _TOPIC,
                                   (n for n, f in zip(names, found, strict=True) if f is not None or not by_id))
    asked: list[Struct] = []
    id_of: dict[str, uuid.UUID] = {}
    for t, topic, name in zip(request.topics, found, names, strict=True):
        if (topic is None and by_id) or name not in allowed:
            code = errors.UNKNOWN_TOPIC_ID if topic is None else TAF
            answers.add(t, [p.partition_index for p in t.partitions], code)
            continue
        kept = known_partitions(answers, t, topic)
        if kept:
            asked.append(Struct(name=name, topic_id=field_of(t, "topic_id", NO_TOPIC_ID), partitions=kept))
            id_of[name] = field_of(t, "topic_id", NO_TOPIC_ID)
    if asked:
        response = await _coordinate(broker, ctx, _with(request, topics=asked))
        answers.merge([{"topic_id": id_of[field_of(t, "name")], "name": "" if by_id else field_of(t, "name"),
                        "partitions": field_of(t, "partitions")} for t in field_of(response, "topics")])
    return {"throttle_time_ms": 0, "topics": answers.topics}


def _hide_topics(broker: HandlerBroker, ctx: RequestContext, topics: list[Any], field: str = "name") -> list[Any]:
    """The offsets of every topic (a null topic list) without the topics the principal may not describe
    (``field``: the topic name's field)."""
    names = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _TOPIC, (field_of(t, field) for t in topics), count=False)
    return [t for t in topics if field_of(t, field) in names]


def _describable_topics_of(broker: HandlerBroker, ctx: RequestContext, group: Any,
                           field: str) -> tuple[Any, list[Any] | None]:
    """A group of an offsets request with only the topics the principal may describe, and the refused ones
    (None when the group asks for all its topics)."""
    if group.topics is None:
        return group, None
    allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _TOPIC, (field_of(t, field) for t in group.topics))
    return (_with(group, topics=[t for t in group.topics if field_of(t, field) in allowed]),
            [t for t in group.topics if field_of(t, field) not in allowed])


async def _offset_fetch(broker: HandlerBroker, ctx: RequestContext, request: OffsetFetchRequest) -> Any:
    if ctx.api_version < 8:
        if not _group_ok(broker, ctx, Op.DESCRIBE, request.group_id):
            return {"throttle_time_ms": 0, "error_code": GAF, "topics": []}
        topics = request.topics
        if topics is None:
            response = await _coordinate(broker, ctx, request)
            setattr_or_item(response, "topics", _hide_topics(broker, ctx, field_of(response, "topics")))
            return response
        allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _TOPIC, (t.name for t in topics))
        kept = [t for t in topics if t.name in allowed]
        refused = [t for t in topics if t.name not in allowed]
        if not refused:
            return await _coordinate(broker, ctx, request)
        response = await _coordinate(broker, ctx, _with(request, topics=kept)) if kept \
            else {"throttle_time_ms": 0, "error_code": errors.NONE, "topics": []}
        field_of(response, "topics").extend(_topic_errors(refused, TAF, indexes="partition_indexes"))
        return response
    by_id = ctx.api_version >= OFFSETS_BY_TOPIC_ID_VERSION
    groups_out: dict[str, Any] = {}
    asked = []
    refused_by_group: dict[str, list[Any]] = {}
    unknown_by_group: dict[str, list[Any]] = {}
    for g in request.groups:
        if not _group_ok(broker, ctx, Op.DESCRIBE, g.group_id):
            groups_out[g.group_id] = {"group_id": g.group_id, "topics": [], "error_code": GAF}
            continue
        if by_id and g.topics is not None:
            unknown_by_group[g.group_id] = [t for t in g.topics if _topic_of_id(broker, t.topic_id) is None]
            g = _name_topics_by_id(broker, g)
        kept, refused_here = _describable_topics_of(broker, ctx, g, "name")
        asked.append(kept)
        if refused_here is not None:
            refused_by_group[g.group_id] = refused_here
    if asked:
        response = await _coordinate(broker, ctx, _with(request, groups=asked))
        for group in field_of(response, "groups"):
            gid = field_of(group, "group_id")
            answered = field_of(group, "topics")
            original = next(g for g in request.groups if g.group_id == gid)
            if original.topics is None:
                answered = _hide_topics(broker, ctx, answered)
            unknown: list[dict[str, Any]] = []
            if by_id:
                answered = _with_topic_ids(broker, answered, original.topics is None)
                if not field_of(group, "error_code"):   # Kafka: a group's error is answered alone
                    unknown = _topic_errors(unknown_by_group.get(gid, []), errors.UNKNOWN_TOPIC_ID,
                                            indexes="partition_indexes", metadata="")
            answered = [*answered, *unknown,
                        *_topic_errors(refused_by_group.get(gid, []), TAF, indexes="partition_indexes")]
            setattr_or_item(group, "topics", answered)
            groups_out[gid] = group
    return {"throttle_time_ms": 0, "groups": [groups_out[g.group_id] for g in request.groups
                                              if g.group_id in groups_out]}


def _name_topics_by_id(broker: HandlerBroker, group: Any) -> Struct:
    """An OffsetFetch v10 group with its topics named, as Kafka's KafkaApis resolves the ids before the coordinator
    sees them; the topics whose id no topic has are left out (answered UNKNOWN_TOPIC_ID after the others)."""
    named = []
    for t in group.topics:
        topic = _topic_of_id(broker, t.topic_id)
        if topic is not None:
            named.append(_with(t, name=topic.name))
    return _with(group, topics=named)


def _with_topic_ids(broker: HandlerBroker, topics: list[Any], every_topic: bool) -> list[Any]:
    """OffsetFetch v10 answers name topics by id: the coordinator's topics with their ids; asked for every topic,
    one without an id (deleted meanwhile) is left out, as Kafka cannot answer it."""
    out = []
    for t in topics:
        topic = broker.metadata.topic(field_of(t, "name"))
        if topic is None and every_topic:
            continue
        setattr_or_item(t, "topic_id", NO_TOPIC_ID if topic is None else topic.id)
        out.append(t)
    return out


def setattr_or_item(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[name] = value
    else:
        setattr(obj, name, value)


async def _find_coordinator(broker: HandlerBroker, ctx: RequestContext, request: FindCoordinatorRequest) -> Any:
    key_type = getattr(request, "key_type", 0)
    resource, code = (_TXN, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) if key_type == 1 else (_GROUP, GAF)
    if ctx.api_version < 4:
        if authz.allowed(broker, ctx, Op.DESCRIBE, resource, request.key):
            return await _coordinate(broker, ctx, request)
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "node_id": -1, "host": "",
                "port": -1}
    keys = list(request.coordinator_keys)
    allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, resource, keys)
    kept = [k for k in keys if k in allowed]
    refused = [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": None}
               for k in keys if k not in allowed]
    if not refused:
        return await _coordinate(broker, ctx, request)
    response = await _coordinate(broker, ctx, _with(request, coordinator_keys=kept)) if kept \
        else {"throttle_time_ms": 0, "coordinators": []}
    field_of(response, "coordinators").extend(refused)
    return response


async def _describe_groups(broker: HandlerBroker, ctx: RequestContext,
                          request: DescribeGroupsRequest | ConsumerGroupDescribeRequest | ShareGroupDescribeRequest
                          | StreamsGroupDescribeRequest, field: str) -> Any:
    """DescribeGroups (``groups``) and ConsumerGroupDescribe (``group_ids``): Describe on each group, and its
    authorized operations when asked for."""
    ids = list(getattr(request, field))
    allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _GROUP, ids)
    kept = [g for g in ids if g in allowed]
    response = await _coordinate(broker, ctx, _with(request, **{field: kept})) if kept \
        else {"throttle_time_ms": 0, "groups": []}
    by_id = {field_of(g, "group_id"): g for g in field_of(response, "groups")}
    include_ops = bool(getattr(request, "include_authorized_operations", False))
    out = []
    for gid in ids:
        if gid not in allowed:
            out.append({"error_code": GAF, "error_message": None, "group_id": gid, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        group = by_id[gid]
        if include_ops and field_of(group, "error_code") == errors.NONE:
            setattr_or_item(group, "authorized_operations", authz.authorized_operations(broker, ctx, _GROUP, gid))
        out.append(group)
    setattr_or_item(response, "groups", out)
    return response


async def _list_groups(broker: HandlerBroker, ctx: RequestContext, request: ListGroupsRequest) -> Any:
    response = await _coordinate(broker, ctx, request)
    if not authz.allowed_cluster(broker, ctx, Op.DESCRIBE, count=False):
        groups = field_of(response, "groups")
        names = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _GROUP, (field_of(g, "group_id") for g in groups),
                                     count=False)
        setattr_or_item(response, "groups", [g for g in groups if field_of(g, "group_id") in names])
    return response


async def _delete_groups(broker: HandlerBroker, ctx: RequestContext, request: DeleteGroupsRequest) -> Any:
    names = list(request.groups_names)
    allowed = authz.filter_allowed(broker, ctx, Op.DELETE, _GROUP, names)
    kept = [g for g in names if g in allowed]
    if len(kept) == len(names):
        return await _coordinate(broker, ctx, request)
    response = await _coordinate(broker, ctx, _with(request, groups_names=kept)) if kept \
        else {"throttle_time_ms": 0, "results": []}
    field_of(response, "results").extend({"group_id": g, "error_code": GAF} for g in names if g not in allowed)
    return response


async def _offset_delete(broker: HandlerBroker, ctx: RequestContext, request: OffsetDeleteRequest) -> Any:
    """OffsetDelete as Kafka's KafkaApis: Delete on the group first; per topic TOPIC_AUTHORIZATION_FAILED without
    Read on it, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist; the coordinator is asked
    about the rest, always (its group error answers alone), its answers merged after these refusals."""
    if not _group_ok(broker, ctx, Op.DELETE, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GAF, "topics": []}
    allowed = authz.filter_allowed(broker, ctx, Op.READ, _TOPIC, (t.name for t in request.topics))
    answers = TopicAnswers(by_id=False)
    asked: list[Struct] = []
    for t in request.topics:
        if t.name not in allowed:
            answers.add(t, [p.partition_index for p in t.partitions], TAF)
            continue
        kept = known_partitions(answers, t, broker.metadata.topic(t.name))
        if kept:
            asked.append(Struct(name=t.name, partitions=kept))
    response = await _coordinate(broker, ctx, _with(request, topics=asked))
    if field_of(response, "error_code"):
        return response
    answers.merge([{"name": field_of(t, "name"), "topic_id": NO_TOPIC_ID, "partitions": field_of(t, "partitions")}
                   for t in field_of(response, "topics")])
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "topics": answers.topics}


async def _describe_share_group_offsets(broker: HandlerBroker, ctx: RequestContext,
                                        request: DescribeShareGroupOffsetsRequest) -> Any:
    """Describe on each group; Describe on each topic asked (the others answer TOPIC_AUTHORIZATION_FAILED per
    partition), or, for all the group's topics (null), only the describable ones are answered, as Kafka's
    KafkaApis."""
    ids = [g.group_id for g in request.groups]
    allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _GROUP, ids)
    kept = []
    refused_topics: dict[str, list[Any]] = {}
    for g in request.groups:
        if g.group_id not in allowed:
            continue
        asked, refused = _describable_topics_of(broker, ctx, g, "topic_name")
        kept.append(asked)
        if refused is not None:
            refused_topics[g.group_id] = refused
    response = await _coordinate(broker, ctx, _with(request, groups=kept)) if kept \
        else {"throttle_time_ms": 0, "groups": []}
    for group in field_of(response, "groups"):
        gid = field_of(group, "group_id")
        if field_of(group, "error_code"):
            continue
        topics = field_of(group, "topics")
        if gid not in refused_topics:   # all the group's topics: only those the principal may describe
            setattr_or_item(group, "topics", _hide_topics(broker, ctx, topics, "topic_name"))
            continue
        setattr_or_item(group, "topics", list(topics) + [
            {"topic_name": t.topic_name, "topic_id": NO_TOPIC_ID, "partitions": [
                {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": TAF,
                 "error_message": TAF_MESSAGE} for p in t.partitions]} for t in refused_topics[gid]])
    field_of(response, "groups").extend({"group_id": g, "topics": [], "error_code": GAF, "error_message": None}
                                    for g in ids if g not in allowed)
    return response


async def _alter_or_delete_share_group_offsets(
        broker: HandlerBroker, ctx: RequestContext,
        request: AlterShareGroupOffsetsRequest | DeleteShareGroupOffsetsRequest, alter: bool) -> Any:
    """Read (Alter) or Delete (Delete) on the group, then Read on each topic: a refused topic answers
    TOPIC_AUTHORIZATION_FAILED (per partition for Alter, per topic for Delete) and is not passed on, as Kafka's
    KafkaApis."""
    if not _group_ok(broker, ctx, Op.READ if alter else Op.DELETE, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GAF, "error_message": None, "responses": []}
    topics = list(request.topics)
    names = authz.filter_allowed(broker, ctx, Op.READ, _TOPIC, (t.topic_name for t in topics))
    refused = [t for t in topics if t.topic_name not in names]
    response = await _coordinate(broker, ctx, _with(request, topics=[t for t in topics if t.topic_name in names]))
    if not refused or field_of(response, "error_code"):
        return response
    image = broker.metadata.image

    def topic_id(name: str) -> uuid.UUID:   # Kafka's Alter answer carries the id from its metadata cache
        known = image.topic(name)
        return known.id if known is not None else uuid.UUID(int=0)

    if alter:
        answers = [{"topic_name": t.topic_name, "topic_id": topic_id(t.topic_name), "partitions": [
            {"partition_index": p.partition_index, "error_code": TAF, "error_message": TAF_MESSAGE}
            for p in cast("AlterShareGroupOffsetsRequestTopic", t).partitions]} for t in refused]
    else:
        answers = [{"topic_name": t.topic_name, "topic_id": uuid.UUID(int=0), "error_code": TAF,
                    "error_message": TAF_MESSAGE} for t in refused]
    setattr_or_item(response, "responses", answers + list(field_of(response, "responses")))
    return response


async def _consumer_group_heartbeat(broker: HandlerBroker, ctx: RequestContext,
                                   request: ConsumerGroupHeartbeatRequest | ShareGroupHeartbeatRequest) -> Any:
    if not _group_ok(broker, ctx, Op.READ, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GAF, "error_message": None, "member_id": None,
                "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}
    subscribed = request.subscribed_topic_names
    if subscribed:
        allowed = authz.filter_allowed(broker, ctx, Op.DESCRIBE, _TOPIC, subscribed)
        if len(allowed) < len(set(subscribed)):
            refused = sorted(set(subscribed) - allowed)
            return {"throttle_time_ms": 0, "error_code": TAF, "member_id": None, "member_epoch": -1,
                    "heartbeat_interval_ms": 0, "assignment": None,
                    "error_message": f"The following topics are unauthorized to subscribe: {refused}"}
    return await _coordinate(broker, ctx, request)


_READ_GROUP_SIMPLE: dict[int, Callable[[Any], dict[str, Any]]] = {
    11: lambda request: {"throttle_time_ms": 0, "error_code": GAF, "generation_id": -1, "protocol_name": None,
                         "leader": "", "member_id": "", "members": []},
    12: lambda request: {"throttle_time_ms": 0, "error_code": GAF},
    13: lambda request: {"throttle_time_ms": 0, "error_code": GAF, "members": []},
    14: lambda request: {"throttle_time_ms": 0, "error_code": GAF, "protocol_type": None, "protocol_name": None,
                         "assignment": b""},
}


async def route_to_coordinator(broker: HandlerBroker, ctx: RequestContext, request: GroupRequest) -> Any:
    """The coordinator's answer (the response Structs it builds), or the authorization errors Kafka answers."""
    return await _route(broker, ctx, request)


#: the heartbeat of a group protocol -> the feature that enables it (as Kafka's KafkaApis: KIP-848's consumer
#: protocol needs group.version 1, share groups share.version 1, streams groups streams.version 1)
_PROTOCOL_FEATURES = {68: GROUP_VERSION, 76: SHARE_VERSION, 88: STREAMS_VERSION}
#: StreamsGroupHeartbeat's answer while streams.version is not finalized (Kafka's KafkaApis: UNSUPPORTED_VERSION)
_STREAMS_DISABLED = {"throttle_time_ms": 0, "error_code": errors.UNSUPPORTED_VERSION, "member_id": "",
                     "error_message": "The streams group protocol is not enabled: finalize streams.version 1.",
                     "member_epoch": -1, "heartbeat_interval_ms": 0, "status": None, "active_tasks": None,
                     "standby_tasks": None, "warmup_tasks": None, "partitions_by_user_endpoint": None}


#: the share offset admin APIs' answer while share.version is not finalized (Kafka's KafkaApis: UNSUPPORTED_VERSION)
_SHARE_OFFSET_APIS: dict[int, Callable[[Any], dict[str, Any]]] = {
    90: lambda request: {"throttle_time_ms": 0, "groups": [
        {"group_id": g.group_id, "topics": [], "error_code": errors.UNSUPPORTED_VERSION, "error_message": None}
        for g in request.groups]},
    91: lambda request: {"throttle_time_ms": 0, "error_code": errors.UNSUPPORTED_VERSION, "error_message": None,
                         "responses": []},
    92: lambda request: {"throttle_time_ms": 0, "error_code": errors.UNSUPPORTED_VERSION, "error_message": None,
                         "responses": []},
}


#: DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe: their authorized operations are
#: answered when asked for, without an authorizer too (every operation of a group, as Kafka's AuthHelper)
_DESCRIBE_API_KEYS = frozenset({15, 69, 77, 89})


async def _route(broker: HandlerBroker, ctx: RequestContext, request: GroupRequest) -> Any:
    feature = _PROTOCOL_FEATURES.get(int(ctx.header.api_key))
    if feature is not None and broker.metadata.image.features.get(feature, 0) < 1:
        if feature == STREAMS_VERSION:
            return dict(_STREAMS_DISABLED)
        return {"throttle_time_ms": 0, "error_code": errors.UNSUPPORTED_VERSION, "error_message": None,
                "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}
    if int(ctx.header.api_key) in _SHARE_OFFSET_APIS and broker.metadata.image.features.get(SHARE_VERSION, 0) < 1:
        return _SHARE_OFFSET_APIS[int(ctx.header.api_key)](request)
    api_key = int(ctx.header.api_key)
    if api_key == 8:   # the handler refuses unknown and unauthorized topics first, as Kafka's KafkaApis
        return await _offset_commit(broker, ctx, cast("OffsetCommitRequest", request))
    if api_key == 47:
        return await _offset_delete(broker, ctx, cast("OffsetDeleteRequest", request))
    if api_key == 9 and ctx.api_version >= OFFSETS_BY_TOPIC_ID_VERSION:
        return await _offset_fetch(broker, ctx, cast("OffsetFetchRequest", request))
    if broker.access is None and not (api_key in _DESCRIBE_API_KEYS
                                      and getattr(request, "include_authorized_operations", False)):
        return await _coordinate(broker, ctx, request)
    refusal = _READ_GROUP_SIMPLE.get(api_key)
    if refusal is not None:   # JoinGroup, Heartbeat, LeaveGroup, SyncGroup: Read on the group
        simple = cast("JoinGroupRequest | HeartbeatRequest | LeaveGroupRequest | SyncGroupRequest", request)
        if not _group_ok(broker, ctx, Op.READ, simple.group_id):
            response = refusal(request)
            if api_key == 11 and ctx.api_version < 7:
                response["protocol_name"] = ""
            return response
        return await _coordinate(broker, ctx, request)
    if api_key == 9:
        return await _offset_fetch(broker, ctx, cast("OffsetFetchRequest", request))
    if api_key == 10:
        return await _find_coordinator(broker, ctx, cast("FindCoordinatorRequest", request))
    if api_key == 15:
        return await _describe_groups(broker, ctx, cast("DescribeGroupsRequest", request), "groups")
    if api_key in (69, 77, 89):   # ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe
        return await _describe_groups(broker, ctx, cast(
            "ConsumerGroupDescribeRequest | ShareGroupDescribeRequest | StreamsGroupDescribeRequest", request),
            "group_ids")
    if api_key == 16:
        return await _list_groups(broker, ctx, cast("ListGroupsRequest", request))
    if api_key == 42:
        return await _delete_groups(broker, ctx, cast("DeleteGroupsRequest", request))
    if api_key == 90:   # DescribeShareGroupOffsets: Describe on each group
        return await _describe_share_group_offsets(broker, ctx, cast("DescribeShareGroupOffsetsRequest", request))
    if api_key in (91, 92):   # AlterShareGroupOffsets: Read on the group; DeleteShareGroupOffsets: Delete
        return await _alter_or_delete_share_group_offsets(
            broker, ctx, cast("AlterShareGroupOffsetsRequest | DeleteShareGroupOffsetsRequest", request),
            api_key == 91)
    if api_key == 88:   # StreamsGroupHeartbeat: Read on the group
        streams = cast("StreamsGroupHeartbeatRequest", request)
        if not _group_ok(broker, ctx, Op.READ, streams.group_id):
            return {**_STREAMS_DISABLED, "error_code": GAF, "error_message": None}
        return await _coordinate(broker, ctx, request)
    if api_key in (68, 76):   # ConsumerGroupHeartbeat, ShareGroupHeartbeat
        return await _consumer_group_heartbeat(
            broker, ctx, cast("ConsumerGroupHeartbeatRequest | ShareGroupHeartbeatRequest", request))
    return await _coordinate(broker, ctx, request)


for _api_key in GROUP_API_KEYS:
    # The range is capped by the coordinator's SUPPORTED_APIS and the codec when the table is built.
    handler(_api_key, 0, 2**15 - 1)(route_to_coordinator)

"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DeleteRecords (21),
ElectLeaders (43)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.apis import CONTROLLER_API_VERSIONS

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteRecordsResponsePartitionResult,
        DeleteRecordsResponseTopicResult,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
    )

log = logging.getLogger("klog.broker.admin")


@handler(19, *CONTROLLER_API_VERSIONS[19])
async def handle_create_topics(broker: HandlerBroker, ctx: RequestContext, request: CreateTopicsRequest
                               ) -> CreateTopicsResponse:
    """Decided by the controller (klog.controller.apis); the partition files are made in a worker thread before
    the records commit, so other clients keep being served."""
    return await authz.guard(19, broker, ctx, request, lambda r: broker.controller_apis.create_topics(
        r, ctx.api_version, ctx.header.client_id, ctx.principal))


@handler(20, *CONTROLLER_API_VERSIONS[20])
async def handle_delete_topics(broker: HandlerBroker, ctx: RequestContext, request: DeleteTopicsRequest
                               ) -> DeleteTopicsResponse:
    return await authz.guard(20, broker, ctx, request,
                             lambda r: broker.controller_apis.delete_topics(r, ctx.api_version, ctx.header.client_id,
                                                                            ctx.principal))


@handler(37, *CONTROLLER_API_VERSIONS[37])
async def handle_create_partitions(broker: HandlerBroker, ctx: RequestContext, request: CreatePartitionsRequest
                                   ) -> CreatePartitionsResponse:
    return await authz.guard(37, broker, ctx, request, lambda r: broker.controller_apis.create_partitions(
        r, ctx.api_version, ctx.header.client_id, ctx.principal))


@handler(21, 0, 2)
async def handle_delete_records(broker: HandlerBroker, ctx: RequestContext, request: DeleteRecordsRequest
                                ) -> DeleteRecordsResponse:
    """The leader moves its log start, then (replicated) waits until every follower on a live broker has moved
    its own there too (Kafka's delayed delete records; they learn it from their fetches), at most the request's
    timeout_ms: REQUEST_TIMED_OUT after it. Kafka's checks, in its order: Delete on the topic, the partition in the
    metadata, then the replica manager's (``broker.replicas.delete_records``)."""
    topics: list[DeleteRecordsResponseTopicResult] = []
    waits: list[tuple[DeleteRecordsResponsePartitionResult, asyncio.Future[int]]] = []
    # Kafka keys the request's offsets by partition: a partition named twice (in one topic entry or two) is
    # answered once, with the offset of its last entry
    wanted: dict[str, dict[int, int]] = {}
    for topic_request in request.topics:
        named = wanted.setdefault(topic_request.name, {})
        for preq in topic_request.partitions:
            named[preq.partition_index] = preq.offset
    for name, offsets in wanted.items():
        if not offsets:
            continue   # Kafka builds its answer from the partitions: a topic entry naming none is left out
        partitions: list[DeleteRecordsResponsePartitionResult] = []
        topics.append({"name": name, "partitions": partitions})
        refused = broker.access is not None and not authz.allowed(
            broker, ctx, authz.AclOperation.DELETE, authz.ResourceType.TOPIC, name)
        for index, offset in offsets.items():
            entry: DeleteRecordsResponsePartitionResult = {"partition_index": index, "low_watermark": -1,
                                                           "error_code": errors.NONE}
            partitions.append(entry)
            if refused:   # Delete on the topic, checked before it is looked up
                entry["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            if broker.metadata.partition(name, index) is None:
                # Kafka's metadata cache check, before the replica manager's (internal topic, leader, policy, offset)
                entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                code, low_watermark, waiting = broker.replicas.delete_records(name, index, offset)
            except OSError as exc:
                log.error("DeleteRecords on %s-%d failed: %s", name, index, exc)
                entry["error_code"] = errors.KAFKA_STORAGE_ERROR
                continue
            entry["error_code"] = code
            if code:
                continue
            entry["low_watermark"] = low_watermark
            if waiting is not None:
                waits.append((entry, waiting))
    if waits:
        done, _ = await asyncio.wait([f for _, f in waits], timeout=max(0, request.timeout_ms) / 1000)
        for entry, future in waits:
            if future not in done:
                future.cancel()
                entry["error_code"] = errors.REQUEST_TIMED_OUT
            elif future.result() < 0:   # leadership moved while it waited
                entry["error_code"] = errors.NOT_LEADER_OR_FOLLOWER
                entry["low_watermark"] = -1
            else:
                entry["low_watermark"] = future.result()
    return {"throttle_time_ms": 0, "topics": topics}


@handler(43, *CONTROLLER_API_VERSIONS[43])
async def handle_elect_leaders(broker: HandlerBroker, ctx: RequestContext, request: ElectLeadersRequest
                               ) -> ElectLeadersResponse:
    """Decided by the active controller (klog.controller.apis); the new leaders reach every broker as
    PartitionChangeRecords."""
    return await authz.guard(43, broker, ctx, request,
                             lambda r: broker.controller_apis.elect_leaders(r, ctx.api_version))

"""The share coordinator's side of the share-group state RPCs (KIP-932) other brokers send it:
InitializeShareGroupState (83), ReadShareGroupState (84), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87), answered from this broker's ``__share_group_state`` partitions
(:class:`klog.broker.share_state.ShareStateStore`; NOT_COORDINATOR for a key whose state partition another broker
leads). WriteShareGroupState (85) is in :mod:`klog.broker.handlers.share`. Kafka's authorization: ClusterAction
on the cluster (brokers only)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.share import share_enabled
from klog.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        DeleteShareGroupStateRequest,
        DeleteShareGroupStateResponse,
        DeleteShareGroupStateResponseDeleteStateResult,
        DeleteShareGroupStateResponsePartitionResult,
        InitializeShareGroupStateRequest,
        InitializeShareGroupStateResponse,
        InitializeShareGroupStateResponseInitializeStateResult,
        InitializeShareGroupStateResponsePartitionResult,
        ReadShareGroupStateRequest,
        ReadShareGroupStateResponse,
        ReadShareGroupStateResponsePartitionResult,
        ReadShareGroupStateResponseReadStateResult,
        ReadShareGroupStateSummaryRequest,
        ReadShareGroupStateSummaryResponse,
        ReadShareGroupStateSummaryResponsePartitionResult,
        ReadShareGroupStateSummaryResponseReadStateSummaryResult,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


def _refusal(broker: HandlerBroker, ctx: RequestContext) -> int:
    """The error every share-partition of the request answers, or NONE."""
    if broker.access is not None and not authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if not share_enabled(broker) or broker.share_partitions.store is None:
        return ErrorCode.UNSUPPORTED_VERSION
    return ErrorCode.NONE


def _store(broker: HandlerBroker) -> Any:
    return broker.share_partitions.store


@handler(83, 0, 0)
async def handle_initialize_share_group_state(broker: HandlerBroker, ctx: RequestContext,
                                              request: InitializeShareGroupStateRequest
                                              ) -> InitializeShareGroupStateResponse:
    refused = _refusal(broker, ctx)
    results: list[InitializeShareGroupStateResponseInitializeStateResult] = []
    for t in request.topics:
        parts: list[InitializeShareGroupStateResponsePartitionResult] = []
        for p in t.partitions:
            code = refused or await _store(broker).initialize_state(
                request.group_id, t.topic_id, p.partition, state_epoch=p.state_epoch, start_offset=p.start_offset,
                now_ms=_now_ms())
            parts.append({"partition": p.partition, "error_code": int(code), "error_message": None})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


@handler(84, 0, 0)
async def handle_read_share_group_state(broker: HandlerBroker, ctx: RequestContext,
                                        request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    refused = _refusal(broker, ctx)
    results: list[ReadShareGroupStateResponseReadStateResult] = []
    for t in request.topics:
        parts: list[ReadShareGroupStateResponsePartitionResult] = []
        for p in t.partitions:
            code, message, snapshot = (refused, None, None) if refused else \
                _store(broker).read_state(request.group_id, t.topic_id, p.partition)
            answer: ReadShareGroupStateResponsePartitionResult = {
                "partition": p.partition, "error_code": int(code), "error_message": message, "state_epoch": 0,
                "start_offset": 0, "state_batches": []}
            if snapshot is not None:
                answer["state_epoch"] = snapshot.state_epoch
                answer["start_offset"] = snapshot.start_offset
                answer["state_batches"] = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                            "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                           for b in snapshot.state_batches]
            parts.append(answer)
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


@handler(86, 0, 0)
async def handle_delete_share_group_state(broker: HandlerBroker, ctx: RequestContext,
                                          request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    refused = _refusal(broker, ctx)
    results: list[DeleteShareGroupStateResponseDeleteStateResult] = []
    for t in request.topics:
        parts: list[DeleteShareGroupStateResponsePartitionResult] = []
        for p in t.partitions:
            code = refused or await _store(broker).delete_state(request.group_id, t.topic_id, p.partition,
                                                                now_ms=_now_ms())
            parts.append({"partition": p.partition, "error_code": int(code), "error_message": None})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


@handler(87, 0, 1)
async def handle_read_share_group_state_summary(broker: HandlerBroker, ctx: RequestContext,
                                                request: ReadShareGroupStateSummaryRequest
                                                ) -> ReadShareGroupStateSummaryResponse:
    refused = _refusal(broker, ctx)
    results: list[ReadShareGroupStateSummaryResponseReadStateSummaryResult] = []
    for t in request.topics:
        parts: list[ReadShareGroupStateSummaryResponsePartitionResult] = []
        for p in t.partitions:
            if refused:
                parts.append({"partition": p.partition, "error_code": int(refused), "error_message": None,
                              "state_epoch": 0, "leader_epoch": -1, "start_offset": -1,
                              "delivery_complete_count": -1})
                continue
            s = _store(broker).read_summary(request.group_id, t.topic_id, p.partition)
            parts.append({"partition": p.partition, "error_code": int(s.error_code), "error_message": None,
                          "state_epoch": s.state_epoch, "leader_epoch": s.leader_epoch,
                          "start_offset": s.start_offset, "delivery_complete_count": s.delivery_complete_count})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}

"""InitProducerId (22): idempotent producers here; a transactional id goes to the transaction coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.producer_id_blocks import ProducerIdsUnavailable

if TYPE_CHECKING:
    from klog.protocol.message_types import InitProducerIdRequest, InitProducerIdResponse


#: How long InitProducerId waits for a producer id block from the active controller before answering
#: COORDINATOR_LOAD_IN_PROGRESS (retriable: the client asks again), as Kafka's RPCProducerIdManager.
PRODUCER_ID_BLOCK_WAIT_S = 5.0


@handler(22, 0, 5)
async def handle_init_producer_id(broker: HandlerBroker, ctx: RequestContext, request: InitProducerIdRequest
                                  ) -> InitProducerIdResponse:
    if broker.access is not None:
        if request.transactional_id is not None:
            if not authz.allowed(broker, ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                                 request.transactional_id):
                return {"throttle_time_ms": 0, "error_code": errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        "producer_id": -1, "producer_epoch": -1}
        elif not (authz.allowed_cluster(broker, ctx, authz.AclOperation.IDEMPOTENT_WRITE, count=False)
                  or authz.allowed_any(broker, ctx, authz.AclOperation.WRITE, authz.ResourceType.TOPIC)):
            # Kafka: IdempotentWrite on the Cluster, or Write on some topic (KIP-679)
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                    "producer_epoch": -1}
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        # Kafka's KafkaApis: a producer id without its epoch (or an epoch without its id) is no KIP-360 recovery
        return {"throttle_time_ms": 0, "error_code": errors.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    if request.transactional_id is not None:
        from klog.broker.handlers.transactions import init_transactional_producer_id

        return await init_transactional_producer_id(broker, ctx, request)
    # Kafka gives idempotent (non-transactional) producers a fresh id with epoch 0 on every call, also when
    # they pass their current id/epoch to recover (KIP-360).
    if broker.producer_id_manager is not None:   # a quorum member: blocks from the active controller
        try:
            producer_id = await broker.producer_id_manager.generate(PRODUCER_ID_BLOCK_WAIT_S)
        except ProducerIdsUnavailable:
            return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_LOAD_IN_PROGRESS, "producer_id": -1,
                    "producer_epoch": -1}
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": 0}
    try:
        producer_id = await broker.local_producer_ids.generate()
    except OSError:
        return {"throttle_time_ms": 0, "error_code": errors.KAFKA_STORAGE_ERROR, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": 0}

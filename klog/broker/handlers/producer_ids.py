"""InitProducerId (22) for idempotent producers (transactions are not supported).

Ids come from blocks the controller commits (KIP-730): a single node takes its next block synchronously; a quorum
member sends AllocateProducerIds to the active controller (decided locally when it leads), so no two brokers hand
out the same id; the handler then returns a coroutine.
"""

from __future__ import annotations

from typing import Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler

ALLOCATE_PRODUCER_IDS = 67


@handler(22, 0, 4)
def handle_init_producer_id(broker: Any, ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return {"throttle_time_ms": 0, "error_code": errors.INVALID_REQUEST, "producer_id": -1,
                "producer_epoch": -1}
    # Kafka gives idempotent (non-transactional) producers a fresh id with epoch 0 on every call, also when
    # they pass their current id/epoch to recover (KIP-360).
    if broker.forwarder is not None and broker.producers.needs_block():
        return _with_new_block(broker)   # a quorum member asks the active controller for the next block
    try:
        producer_id = broker.producers.allocate_producer_id()
    except OSError:
        return {"throttle_time_ms": 0, "error_code": errors.KAFKA_STORAGE_ERROR, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "producer_id": producer_id, "producer_epoch": 0}


async def _with_new_block(broker: Any) -> dict[str, Any]:
    """AllocateProducerIds to the active controller (decided here when this node leads), then the first id."""
    epoch = broker.metadata.image.brokers[broker.node_id].epoch

    async def decide_locally() -> dict[str, Any]:
        return await broker.metadata.decide_producer_ids(broker.node_id, epoch)

    answer = await broker.forwarder.handle(ALLOCATE_PRODUCER_IDS, 0, f"klog-broker-{broker.node_id}",
                                           {"broker_id": broker.node_id, "broker_epoch": epoch}, decide_locally)
    code = int(answer["error_code"] if isinstance(answer, dict) else answer.error_code)
    if code:   # no controller in time (NOT_CONTROLLER), or a stale registration: the client retries
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    if broker.producers.needs_block():   # another request may have brought a block meanwhile
        start = answer["producer_id_start"] if isinstance(answer, dict) else answer.producer_id_start
        size = answer["producer_id_len"] if isinstance(answer, dict) else answer.producer_id_len
        broker.producers.add_block(int(start), int(size))
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "producer_id": broker.producers.allocate_producer_id(),
            "producer_epoch": 0}

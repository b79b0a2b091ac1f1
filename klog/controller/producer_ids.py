"""Producer id blocks as records: Kafka's ``ProducerIdControlManager`` (AllocateProducerIds, KIP-730), pure.

A broker asks for a block when its current one is used up; the controller hands out ``[next, next + size)``
and commits a ProducerIdsRecord whose NextProducerId is the end of that block, so no two blocks (and no two
brokers) ever share an id, across restarts too. The image's ``next_producer_id`` is -1 until the first block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.metadata.image import MetadataImage
from klog.metadata.records import record
from klog.protocol.errors import ErrorCode

from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AllocateProducerIdsResponse,
        AllocateProducerIdsRequest,
    )

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "allocate_producer_ids", "answer_allocate_producer_ids"]

#: Ids per block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000
#: Producer ids are int64; a block must end at or below this.
MAX_PRODUCER_ID = 2**63 - 1


def allocate_producer_ids(broker_id: int, broker_epoch: int, image: MetadataImage, *,
                          size: int = PRODUCER_ID_BLOCK_SIZE) -> ControllerResult[tuple[int, int]]:
    """The next block for ``broker_id`` as (first id, size), with the record that reserves it."""
    assert size > 0, size
    start = max(image.next_producer_id, 0)
    if start > MAX_PRODUCER_ID - size:
        raise OverflowError(f"producer ids exhausted: the next block would start at {start}")
    return ControllerResult([record("ProducerIdsRecord", broker_id=broker_id, broker_epoch=broker_epoch,
                                    next_producer_id=start + size)], (start, size))



def answer_allocate_producer_ids(request: AllocateProducerIdsRequest, image: MetadataImage
                                 ) -> ControllerResult[AllocateProducerIdsResponse]:
    """AllocateProducerIds (67) on the active controller: a block for a registered broker of the epoch it
    registered with (Kafka's ``ClusterControlManager.checkBrokerEpoch``: STALE_BROKER_EPOCH otherwise, e.g. a broker
    that restarted and has not registered again yet)."""
    registration = image.brokers.get(request.broker_id)
    if registration is None or registration.epoch != request.broker_epoch:
        return ControllerResult((), _allocate_response(ErrorCode.STALE_BROKER_EPOCH))
    try:
        result = allocate_producer_ids(request.broker_id, request.broker_epoch, image)
    except OverflowError:
        return ControllerResult((), _allocate_response(ErrorCode.UNKNOWN_SERVER_ERROR))
    start, size = result.response
    return ControllerResult(result.records, _allocate_response(ErrorCode.NONE, start, size))


def _allocate_response(code: int, start: int = -1, size: int = 0) -> AllocateProducerIdsResponse:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id_start": start, "producer_id_len": size}

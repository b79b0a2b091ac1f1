"""Producer id blocks as records: Kafka's ``ProducerIdControlManager`` (AllocateProducerIds, KIP-730), pure.

A broker asks for a block when its current one is used up; the controller hands out ``[next, next + size)``
and commits a ProducerIdsRecord whose NextProducerId is the end of that block, so no two blocks (and no two
brokers) ever share an id, across restarts too. The image's ``next_producer_id`` is -1 until the first block.
"""

from __future__ import annotations

from klog.metadata.image import MetadataImage
from klog.metadata.records import record

from .result import ControllerResult

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "allocate_producer_ids"]

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

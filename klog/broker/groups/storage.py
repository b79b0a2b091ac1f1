"""The ``__consumer_offsets`` topic: where group state is written and read back from on load (the runtime's
:class:`~klog.broker.coordinator.runtime.CoordinatorLog`)."""

from __future__ import annotations

from klog.broker.coordinator.runtime import COMPRESSION_BY_ID, CoordinatorLog, java_string_hash, partition_for

__all__ = ["COMPRESSION_BY_ID", "OffsetsTopic", "TOPIC", "java_string_hash", "partition_for"]

TOPIC = "__consumer_offsets"


class OffsetsTopic(CoordinatorLog):
    """``__consumer_offsets``, created with the ``offsets.topic.*`` settings."""

    TOPIC = TOPIC

"""klog's Kafka client: producer, consumer and admin client, with blocking and asyncio APIs.

``klog.Producer`` / ``klog.Consumer`` / ``klog.AdminClient`` block (each runs its asyncio core on a private
event-loop thread); ``klog.aio.Producer`` / ``Consumer`` / ``AdminClient`` are the asyncio twins. They speak
Kafka's wire protocol (:mod:`klog.protocol`) to any Kafka-compatible broker and encode/decode record batches
natively (:mod:`klog.records`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .admin import AclBinding, AclBindingFilter, AdminClient, AsyncAdminClient, ConfigResource, NewTopic
    from .consumer_api import AsyncConsumer, Consumer
    from .errors import KafkaError, KafkaTimeoutError
    from .producer import BatchMetadata
    from .producer_api import AsyncProducer, Producer
    from .share_consumer import AsyncShareConsumer, ShareConsumer, ShareRecord
    from .types import (
        ConsumerGroupMetadata,
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        PreparedTransaction,
        RecordMetadata,
        TopicPartition,
    )

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AdminClient",
    "AsyncAdminClient",
    "ConfigResource",
    "NewTopic",
    "AsyncConsumer",
    "AsyncProducer",
    "AsyncShareConsumer",
    "BatchMetadata",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "KafkaError",
    "KafkaTimeoutError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PreparedTransaction",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "ShareRecord",
    "TopicPartition",
]

#: Where each export lives. They are imported on first use: a broker imports this package's connection, errors and
#: security modules (for its controller channel and replica fetchers), and loading the producer, consumer and admin
#: client with them (and NumPy, ~16 MiB, through the consumer) made it MiBs larger.
_EXPORTS = {
    "AclBinding": "admin", "AclBindingFilter": "admin", "AdminClient": "admin", "AsyncAdminClient": "admin",
    "ConfigResource": "admin", "NewTopic": "admin",
    "AsyncConsumer": "consumer_api", "Consumer": "consumer_api",
    "KafkaError": "errors", "KafkaTimeoutError": "errors",
    "BatchMetadata": "producer",
    "AsyncProducer": "producer_api", "Producer": "producer_api",
    "AsyncShareConsumer": "share_consumer", "ShareConsumer": "share_consumer", "ShareRecord": "share_consumer",
    "ConsumerGroupMetadata": "types", "ConsumerRecord": "types", "OffsetAndMetadata": "types",
    "OffsetAndTimestamp": "types", "PreparedTransaction": "types", "RecordMetadata": "types",
    "TopicPartition": "types",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""klog's Kafka client: producer, consumer and admin client, with blocking and asyncio APIs.

``klog.Producer`` / ``klog.Consumer`` / ``klog.AdminClient`` block (each runs its asyncio core on a private
event-loop thread); ``klog.aio.Producer`` / ``Consumer`` / ``AdminClient`` are the asyncio twins. They speak
Kafka's wire protocol (:mod:`klog.protocol`) to any Kafka-compatible broker and encode/decode record batches
natively (:mod:`klog.records`).
"""

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

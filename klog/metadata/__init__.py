"""KRaft cluster metadata, shared by the controller and the brokers (pure: no sockets, no asyncio).

- :mod:`klog.metadata.records`: Kafka's metadata and Raft control records, their framing and record batches
  (``encode_batch`` / ``decode_batch`` are the Raft entry format);
- :mod:`klog.metadata.image` / :mod:`klog.metadata.delta`: the immutable image and the replay of records into
  the next image with what changed; :mod:`klog.metadata.loader`: committed batches and snapshots in;
- :mod:`klog.metadata.writer`: image -> the records that recreate it (snapshot content);
- :mod:`klog.metadata.storage`: ``__cluster_metadata-0`` on disk (segments, ``.checkpoint`` snapshots,
  ``quorum-state``), readable by Kafka's tools and reading what Kafka wrote;
- :mod:`klog.metadata.migration`: a single-node data directory's topics as the first records of a quorum;
- :mod:`klog.metadata.config`: Kafka's broker and topic config keys, typed and validated (``server.properties``,
  topic overrides), read by the broker and by the controller's decisions.
"""

from .delta import MetadataChanges, MetadataDelta, MetadataReplayError, PartitionChange
from .image import EMPTY_IMAGE, BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from .loader import MetadataLoader
from .records import (
    ControlRecord,
    ControlRecordType,
    MetadataBatch,
    MetadataRecord,
    MetadataRecordError,
    MetadataRecordType,
    control,
    decode_batch,
    decode_batches,
    encode_batch,
    record,
)
from .writer import image_records

__all__ = [
    "EMPTY_IMAGE",
    "BrokerRegistration",
    "ControlRecord",
    "ControlRecordType",
    "MetadataBatch",
    "MetadataChanges",
    "MetadataDelta",
    "MetadataImage",
    "MetadataLoader",
    "MetadataRecord",
    "MetadataRecordError",
    "MetadataRecordType",
    "MetadataReplayError",
    "PartitionChange",
    "PartitionRegistration",
    "TopicImage",
    "control",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "image_records",
    "record",
]

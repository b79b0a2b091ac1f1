"""Value types returned by the client: record metadata, consumer records, partitions and offsets."""

from __future__ import annotations

from typing import NamedTuple, Optional

__all__ = [
    "TopicPartition",
    "RecordMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "ConsumerGroupMetadata",
    "PreparedTransaction",
    "Header",
]

Header = tuple[str, Optional[bytes]]


class TopicPartition(NamedTuple):
    """A partition of a topic."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where the broker stored a produced record.

    ``offset`` is -1 when the producer does not wait for acknowledgements (``acks=0``). ``timestamp`` is the
    record's CreateTime, or the broker's LogAppendTime when the topic uses that.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One consumed record. ``headers`` is a list of ``(str, bytes | None)`` pairs."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list[Header]
    #: 0 = CreateTime, 1 = LogAppendTime (Kafka's TimestampType ids).
    timestamp_type: int = 0
    leader_epoch: int = -1


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the offset of the next record to consume, plus optional metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """Result of :meth:`Consumer.offsets_for_times`: the first offset whose timestamp is >= the query."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group identity (``Consumer.consumer_group_metadata()``), passed to a transactional producer's
    ``send_offsets_to_transaction`` so the broker fences offsets from a member that left the group (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: Optional[str] = None


class PreparedTransaction(NamedTuple):
    """A transaction whose records and offsets are all written, left open by ``prepare_transaction()`` for another
    process to commit or abort (``commit_prepared_transaction``): the producer id and epoch are what EndTxn needs.
    Two-phase sinks use it (Flink's KafkaSink resumes transactions the same way; klog's Spark exactly-once sink
    prepares on executors and commits on the driver)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

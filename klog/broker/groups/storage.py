"""The ``__consumer_offsets`` topic: where group state is written and read back from on startup."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from klog.records import decode_batches, encode_batch

log = logging.getLogger("klog.groups")

TOPIC = "__consumer_offsets"
#: Kafka's codec ids for offsets.topic.compression.codec.
COMPRESSION_BY_ID = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


class OffsetsTopic:
    """Appends coordinator records to, and replays them from, ``__consumer_offsets`` via the broker context.

    The topic is compacted (``cleanup.policy=compact``) like any compacted topic: the broker's log cleaner keeps
    the latest record of each key (and a tombstone for delete.retention.ms), so a load replays about the live
    state plus the active segment (at most offsets.topic.segment.bytes), not the whole history.
    """

    TOPIC = TOPIC

    def __init__(self, context: Any, num_partitions: int, segment_bytes: int, compression_codec: int,
                 load_buffer_bytes: int) -> None:
        self.context = context
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.compression = COMPRESSION_BY_ID.get(compression_codec, "none")
        self.load_buffer_bytes = load_buffer_bytes

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_topic(self) -> None:
        self.context.ensure_internal_topic(TOPIC, self.num_partitions, self._configs())

    def _configs(self) -> dict[str, str]:
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes),
                "compression.type": "producer"}

    async def ensure_topic_async(self) -> None:
        """``ensure_topic`` for a quorum member, where the active controller creates it (raises OSError when it
        could not be created yet)."""
        await self.context.ensure_internal_topic_async(TOPIC, self.num_partitions, self._configs())

    def write(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]],
              now_ms: int) -> tuple[int, int] | None:
        """Appends ``records`` (key, value-or-None) as one batch to the group's partition; returns (partition, last
        offset) of the batch, which the caller waits for the ISR to have before it answers. Raises on failure."""
        if not records:
            return None
        self.ensure_topic()
        partition = self.partition_for(group_id)
        batch = encode_batch([{"key": k, "value": v, "timestamp": now_ms} for k, v in records],
                             compression=self.compression)
        return partition, self.context.append(TOPIC, partition, batch).last_offset

    def read_partition(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Every (offset, key, value) of one partition, oldest first (control batches skipped)."""
        plog = self.context.partition_log(TOPIC, partition)
        if plog is None:
            return
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            result = plog.read(offset, self.load_buffer_bytes, max_offset=end, min_one_batch=True)
            data = result.to_bytes()
            if not data:
                break
            batches = decode_batches(data, allow_partial_trailing=True, allow_compacted=True)
            if not batches:
                break
            for batch in batches:
                last = batch.base_offset + batch.last_offset_delta
                if batch.is_control:
                    offset = max(offset, last + 1)
                    continue
                for record in batch.records:
                    if record.offset >= offset:
                        yield record.offset, record.key, record.value
                offset = max(offset, last + 1)

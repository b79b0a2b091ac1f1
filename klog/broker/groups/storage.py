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


#: A partition is compacted once it holds this many records beyond twice its live keys (and at least
#: COMPACT_MIN_RECORDS), so compaction work stays proportional to the appends that made it necessary.
COMPACT_MIN_RECORDS = 10_000
#: Records and bytes per batch written by a compaction snapshot (well under Kafka's 1 MiB message limit).
SNAPSHOT_BATCH_RECORDS = 500
SNAPSHOT_BATCH_BYTES = 512 * 1024


class OffsetsTopic:
    """Appends coordinator records to, and replays them from, ``__consumer_offsets`` via the broker context.

    The topic is compacted (only the latest record of each key matters). klog's storage has no log cleaner,
    so the coordinator compacts itself: it keeps the latest value of every live key per partition, and once a
    partition holds far more records than live keys it appends one copy of each live record (a snapshot) and
    moves the log start offset past everything older (DeleteRecords). Replaying from the new start gives the
    same state, so loading stays proportional to the live state, not to the history.
    """

    TOPIC = TOPIC

    def __init__(self, context: Any, num_partitions: int, segment_bytes: int, compression_codec: int,
                 load_buffer_bytes: int) -> None:
        self.context = context
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.compression = COMPRESSION_BY_ID.get(compression_codec, "none")
        self.load_buffer_bytes = load_buffer_bytes
        #: partition -> key bytes -> latest value bytes (tombstoned keys are dropped)
        self.live: list[dict[bytes, bytes]] = [{} for _ in range(num_partitions)]
        #: partition -> records in the log since its start (what a load must read)
        self.records_in_log = [0] * num_partitions
        self.compactions = 0

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_topic(self) -> None:
        self.context.ensure_internal_topic(TOPIC, self.num_partitions, {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "producer",
        })

    def write(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Appends ``records`` (key, value-or-None) as one batch to the group's partition. Raises on failure."""
        if not records:
            return
        self.ensure_topic()
        partition = self.partition_for(group_id)
        batch = encode_batch([{"key": k, "value": v, "timestamp": now_ms} for k, v in records],
                             compression=self.compression)
        self.context.append(TOPIC, partition, batch)
        self._track(partition, records)
        try:
            self.maybe_compact(partition, now_ms)
        except Exception as exc:  # noqa: BLE001 - the write itself succeeded; compaction retries next time
            log.warning("%s-%d: compaction failed: %s", TOPIC, partition, exc)

    def _track(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        live = self.live[partition]
        for k, v in records:
            if v is None:
                live.pop(k, None)
            else:
                live.pop(k, None)  # re-insert: the dict keeps the order of the latest writes
                live[k] = v
        self.records_in_log[partition] += len(records)

    def maybe_compact(self, partition: int, now_ms: int) -> bool:
        if self.records_in_log[partition] < max(COMPACT_MIN_RECORDS, 2 * len(self.live[partition])):
            return False
        self.compact(partition, now_ms)
        return True

    def compact(self, partition: int, now_ms: int) -> None:
        """Appends a snapshot of the partition's live records, then drops everything before it."""
        plog = self.context.partition_log(TOPIC, partition)
        if plog is None:
            return
        snapshot_start = plog.log_end_offset
        chunk: list[dict[str, Any]] = []
        size = 0
        for k, v in self.live[partition].items():
            chunk.append({"key": k, "value": v, "timestamp": now_ms})
            size += len(k) + len(v)
            if len(chunk) >= SNAPSHOT_BATCH_RECORDS or size >= SNAPSHOT_BATCH_BYTES:
                self.context.append(TOPIC, partition, encode_batch(chunk, compression=self.compression))
                chunk, size = [], 0
        if chunk:
            self.context.append(TOPIC, partition, encode_batch(chunk, compression=self.compression))
        if snapshot_start > plog.log_start_offset:
            plog.delete_records_before(snapshot_start)
        self.records_in_log[partition] = len(self.live[partition])
        self.compactions += 1
        log.info("%s-%d compacted: %d live records kept, log start now %d", TOPIC, partition,
                 len(self.live[partition]), snapshot_start)

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
                        if record.key is not None:
                            self._track(partition, [(record.key, record.value)])
                        yield record.offset, record.key, record.value
                offset = max(offset, last + 1)

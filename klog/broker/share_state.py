"""Durable share-partition state: Kafka's ``__share_group_state`` topic with its ShareSnapshot records.

The partition leader writes a share-partition's whole state (start offset, and the in-flight records as state
batches: available, acknowledged, archived, with their delivery counts) as one ShareSnapshot record, keyed by
(group, topic id, partition), to the ``__share_group_state`` partition Kafka's share coordinator uses for that key
(``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``), as an acks=all write,
and answers the acknowledgements only once the ISR has it. The topic is compacted: the latest snapshot of each
share-partition stays. A broker that becomes the partition's leader reads the latest snapshot back, so accepted
and archived records are never delivered again and released ones keep their delivery counts. Acquired records
are written as available (their locks do not survive a failover), as Kafka does.

This is the same durability as Kafka's share coordinator, on an internal path: the leader writes the snapshot
itself instead of sending WriteShareGroupState (85) to the share coordinator, so on a multi-node cluster it
needs to lead the ``__share_group_state`` partition too (or the write is refused; see docs/compatibility.md).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from klog.broker.coordinator.runtime import CoordinatorLog, replication_error_code
from klog.broker.share_partitions import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, InFlight, SharePartition
from klog.protocol.data import SHARE_SNAPSHOT_KEY_SCHEMA, SHARE_SNAPSHOT_VALUE_SCHEMA, decode_data, encode_data
from klog.protocol.error_codes import ErrorCode

TOPIC = "__share_group_state"
SNAPSHOT_RECORD_TYPE = 0
_INT16 = struct.Struct(">h")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what picks the state partition."""
    return f"{group_id}:{topic_id}:{partition}"


def snapshot_record(sp: SharePartition, topic_id: uuid.UUID, *, leader_epoch: int, now_ms: int) -> tuple[bytes, bytes]:
    """(key, value) of the ShareSnapshot record of ``sp``'s current state."""
    key = _INT16.pack(SNAPSHOT_RECORD_TYPE) + encode_data(
        SHARE_SNAPSHOT_KEY_SCHEMA, 0, {"group_id": sp.group_id, "topic_id": topic_id, "partition": sp.partition})
    batches: list[dict[str, int]] = []
    for offset in range(sp.start_offset, sp.end_offset):
        rec = sp.records.get(offset)
        if rec is None:
            continue
        state = AVAILABLE if rec.state == ACQUIRED else rec.state
        last = batches[-1] if batches else None
        if last is not None and last["last_offset"] == offset - 1 and last["delivery_state"] == state \
                and last["delivery_count"] == rec.delivery_count:
            last["last_offset"] = offset
        else:
            batches.append({"first_offset": offset, "last_offset": offset, "delivery_state": state,
                            "delivery_count": rec.delivery_count})
    sp.snapshot_epoch += 1
    completed = sum(1 for r in sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
    value = _INT16.pack(0) + encode_data(SHARE_SNAPSHOT_VALUE_SCHEMA, 0, {
        "snapshot_epoch": sp.snapshot_epoch, "state_epoch": 0, "leader_epoch": leader_epoch,
        "start_offset": sp.start_offset, "delivery_complete_count": completed,
        "create_timestamp": sp.create_timestamp or now_ms, "write_timestamp": now_ms, "state_batches": batches})
    return key, value


def decode_snapshot(key: bytes, value: bytes | None) -> tuple[tuple[str, uuid.UUID, int], Any] | None:
    """((group, topic id, partition), snapshot value or None for a tombstone); None for other record types."""
    if len(key) < 2 or _INT16.unpack_from(key)[0] != SNAPSHOT_RECORD_TYPE:
        return None
    k, _ = decode_data(SHARE_SNAPSHOT_KEY_SCHEMA, 0, memoryview(key)[2:])
    ident = (k.group_id, k.topic_id, k.partition)
    if value is None:
        return ident, None
    version = _INT16.unpack_from(value)[0]
    v, _ = decode_data(SHARE_SNAPSHOT_VALUE_SCHEMA, version, memoryview(value)[2:])
    return ident, v


def restore(sp: SharePartition, snapshot: Any) -> None:
    """Sets ``sp`` to a snapshot's state."""
    sp.start_offset = snapshot.start_offset
    sp.end_offset = snapshot.start_offset
    sp.records.clear()
    sp.snapshot_epoch = snapshot.snapshot_epoch
    sp.create_timestamp = snapshot.create_timestamp
    for b in snapshot.state_batches:
        for offset in range(max(b.first_offset, sp.start_offset), b.last_offset + 1):
            sp.records[offset] = InFlight(b.delivery_state, b.delivery_count)
        sp.end_offset = max(sp.end_offset, b.last_offset + 1)
    for offset in range(sp.start_offset, sp.end_offset):   # holes between batches: never delivered
        sp.records.setdefault(offset, InFlight())


class ShareStateStore(CoordinatorLog):
    """``__share_group_state``, created with Kafka's ``share.coordinator.state.topic.*`` settings."""

    TOPIC = TOPIC

    def __init__(self, context: Any, config: Any) -> None:
        super().__init__(context, int(config["share.coordinator.state.topic.num.partitions"]),
                         int(config["share.coordinator.state.topic.segment.bytes"]),
                         int(config["share.coordinator.state.topic.compression.codec"]),
                         int(config["share.coordinator.load.buffer.size"]),
                         replication_factor=int(config["share.coordinator.state.topic.replication.factor"]),
                         min_insync_replicas=int(config["share.coordinator.state.topic.min.isr"]))
        self.write_timeout_ms = int(config["share.coordinator.write.timeout.ms"])
        #: snapshots written (tests read it)
        self.snapshots_written = 0

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Any:
        """The latest snapshot of a share-partition, or None (never written, or deleted)."""
        wanted = (group_id, topic_id, partition)
        latest = None
        state_partition = self.partition_for(coordinator_key(group_id, topic_id, partition))
        for _, key, value in self.read_partition(state_partition):
            if key is None:
                continue
            decoded = decode_snapshot(key, value)
            if decoded is not None and decoded[0] == wanted:
                latest = decoded[1]
        return latest

    async def persist(self, sp: SharePartition, topic_id: uuid.UUID, *, leader_epoch: int, now_ms: int) -> int:
        """Writes ``sp``'s snapshot and waits until the ISR has it; returns the error code (NONE once durable)."""
        try:
            await self.ensure_topic_async()
            key, value = snapshot_record(sp, topic_id, leader_epoch=leader_epoch, now_ms=now_ms)
            written = self.write(coordinator_key(sp.group_id, topic_id, sp.partition), [(key, value)], now_ms)
        except Exception as exc:  # noqa: BLE001 - answered as an error code
            from klog.broker.coordinator.runtime import storage_error_code
            return storage_error_code(exc)
        self.snapshots_written += 1
        if written is None:
            return ErrorCode.NONE
        wait = self.context.wait_replicated(self.TOPIC, written[0], written[1], self.write_timeout_ms)
        if wait is None:
            return ErrorCode.NONE
        code = int(await wait)
        return replication_error_code(code) if code else ErrorCode.NONE

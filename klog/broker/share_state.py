"""Durable share-partition state: Kafka's ``__share_group_state`` topic with its ShareSnapshot records.

The partition leader writes a share-partition's whole state (start offset, and the in-flight records as state
batches: available, acknowledged, archived, with their delivery counts) as one ShareSnapshot record, keyed by
(group, topic id, partition), to the ``__share_group_state`` partition Kafka's share coordinator uses for that key
(``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``), as an acks=all write,
and answers the acknowledgements only once the ISR has it. The topic is compacted: the latest snapshot of each
share-partition stays. A broker that becomes the partition's leader reads the latest snapshot back, so accepted
and archived records are never delivered again and released ones keep their delivery counts. Acquired records
are written as available (their locks do not survive a failover), as Kafka does.

When this broker leads the key's ``__share_group_state`` partition it appends the snapshot itself; otherwise it
sends it, as Kafka's share-partition leaders do, in a WriteShareGroupState (85) request to that partition's
leader (the share coordinator), which appends it and answers once the ISR has it. A new leader reads the latest
snapshot from its local replica of the state partition (the state topic's replication factor covers every broker
on clusters of up to three nodes; ReadShareGroupState, 84, is not implemented).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import struct
import uuid
from typing import Any

from klog.broker.coordinator.runtime import CoordinatorLog, replication_error_code, storage_error_code
from klog.broker.share_partitions import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, InFlight, SharePartition
from klog.protocol.data import SHARE_SNAPSHOT_KEY_SCHEMA, SHARE_SNAPSHOT_VALUE_SCHEMA, decode_data, encode_data
from klog.protocol.error_codes import ErrorCode

log = logging.getLogger("klog.share")

TOPIC = "__share_group_state"
WRITE_SHARE_GROUP_STATE_VERSION = 1
#: pause between two attempts of a state write whose share coordinator is not ready
PERSIST_RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset((ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
SNAPSHOT_RECORD_TYPE = 0
_INT16 = struct.Struct(">h")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what picks the state partition (Kafka's ``Uuid.toString``
    is url-safe base64 without padding)."""
    tid = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"{group_id}:{tid}:{partition}"


def state_batches(sp: SharePartition) -> list[dict[str, int]]:
    """``sp``'s in-flight records as Kafka's state batches (acquired records are written as available)."""
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
    return batches


def snapshot_record(group_id: str, topic_id: uuid.UUID, partition: int, *, snapshot_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[dict[str, int]], create_ms: int, now_ms: int
                    ) -> tuple[bytes, bytes]:
    """(key, value) of a ShareSnapshot record."""
    key = _INT16.pack(SNAPSHOT_RECORD_TYPE) + encode_data(
        SHARE_SNAPSHOT_KEY_SCHEMA, 0, {"group_id": group_id, "topic_id": topic_id, "partition": partition})
    completed = sum(b["last_offset"] - b["first_offset"] + 1 for b in batches
                    if b["delivery_state"] in (ACKNOWLEDGED, ARCHIVED))
    value = _INT16.pack(0) + encode_data(SHARE_SNAPSHOT_VALUE_SCHEMA, 0, {
        "snapshot_epoch": snapshot_epoch, "state_epoch": 0, "leader_epoch": leader_epoch,
        "start_offset": start_offset, "delivery_complete_count": completed,
        "create_timestamp": create_ms or now_ms, "write_timestamp": now_ms, "state_batches": batches})
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
        #: snapshot epoch and creation time per share-partition key written here
        self._epochs: dict[str, int] = {}
        self._created: dict[str, int] = {}
        #: connections to the share coordinators of other brokers (WriteShareGroupState)
        self._connections: dict[tuple[int, str, int], Any] = {}
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

    def leads(self, state_partition: int) -> bool:
        led = self.context.led_partitions(self.TOPIC) if hasattr(self.context, "led_partitions") else None
        return led is None or state_partition in led

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int,
                          start_offset: int, batches: list[dict[str, int]], now_ms: int) -> int:
        """The share coordinator's write (this broker leads the key's ``__share_group_state`` partition): appends
        the snapshot and waits until the ISR has it; returns the error code."""
        key_str = coordinator_key(group_id, topic_id, partition)
        if not self.leads(self.partition_for(key_str)):
            return ErrorCode.NOT_COORDINATOR
        epoch = self._epochs.get(key_str, 0) + 1
        try:
            await self.ensure_topic_async()
            key, value = snapshot_record(group_id, topic_id, partition, snapshot_epoch=epoch,
                                         leader_epoch=leader_epoch, start_offset=start_offset, batches=batches,
                                         create_ms=self._created.setdefault(key_str, now_ms), now_ms=now_ms)
            written = self.write(key_str, [(key, value)], now_ms)
        except Exception as exc:  # noqa: BLE001 - answered as an error code
            return storage_error_code(exc)
        self._epochs[key_str] = epoch
        self.snapshots_written += 1
        if written is None:
            return ErrorCode.NONE
        wait = self.context.wait_replicated(self.TOPIC, written[0], written[1], self.write_timeout_ms)
        if wait is None:
            return ErrorCode.NONE
        code = int(await wait)
        return replication_error_code(code) if code else ErrorCode.NONE

    async def persist(self, sp: SharePartition, topic_id: uuid.UUID, *, leader_epoch: int, now_ms: int) -> int:
        """Makes ``sp``'s state durable: written here when this broker leads the key's ``__share_group_state``
        partition, else sent to that partition's leader as WriteShareGroupState (85); retried while the state
        partition has no ready leader (a new topic, a leader moving), for up to share.coordinator.write.timeout.ms,
        as Kafka's persister does. Returns the error code (NONE once the ISR has it)."""
        deadline = time.monotonic() + self.write_timeout_ms / 1000
        while True:
            code = await self._persist_once(sp, topic_id, leader_epoch=leader_epoch, now_ms=now_ms)
            if code not in _RETRIABLE or time.monotonic() >= deadline:
                return code
            await asyncio.sleep(PERSIST_RETRY_BACKOFF_S)

    async def _persist_once(self, sp: SharePartition, topic_id: uuid.UUID, *, leader_epoch: int, now_ms: int) -> int:
        batches = state_batches(sp)
        key_str = coordinator_key(sp.group_id, topic_id, sp.partition)
        try:
            await self.ensure_topic_async()
        except Exception as exc:  # noqa: BLE001 - answered as an error code
            return storage_error_code(exc)
        state_partition = self.partition_for(key_str)
        if self.leads(state_partition):
            return await self.write_state(sp.group_id, topic_id, sp.partition, leader_epoch=leader_epoch,
                                          start_offset=sp.start_offset, batches=batches, now_ms=now_ms)
        endpoint = self.context.partition_leader_endpoint(self.TOPIC, state_partition, self.context.listener_name)
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        body = {"group_id": sp.group_id, "topics": [{"topic_id": topic_id, "partitions": [{
            "partition": sp.partition, "state_epoch": 0, "leader_epoch": leader_epoch,
            "start_offset": sp.start_offset, "delivery_complete_count": -1, "state_batches": batches}]}]}
        try:
            response = await self._request(endpoint, body)
        except Exception as exc:  # noqa: BLE001 - the coordinator is unreachable: retried with the next change
            log.warning("WriteShareGroupState to node %d failed: %s", endpoint[0], exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        for result in response.results:
            for p in result.partitions:
                if p.error_code:
                    return int(p.error_code)
        self.snapshots_written += 1
        return ErrorCode.NONE

    async def _request(self, endpoint: tuple[int, str, int], body: dict[str, Any]) -> Any:
        conn = self._connections.get(endpoint)
        if conn is None or conn.closed:
            node, host, port = endpoint
            conn = await self.context.inter_broker.open(host, port, node,
                                                        client_id=f"klog-share-{self.context.node_id}",
                                                        request_timeout_ms=self.write_timeout_ms + 5000,
                                                        max_response_bytes=1 << 20, connect_timeout_ms=5000)
            self._connections[endpoint] = conn
        try:
            return await conn.request(85, body, version=WRITE_SHARE_GROUP_STATE_VERSION)
        except Exception:
            conn.close()
            self._connections.pop(endpoint, None)
            raise

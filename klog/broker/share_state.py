"""Durable share-partition state: Kafka's ``__share_group_state`` topic with its ShareSnapshot and ShareUpdate records.

The partition leader writes a share-partition's whole state (start offset, and the in-flight records as state
batches: available, acknowledged, archived, with their delivery counts) as one ShareSnapshot record, keyed by
(group, topic id, partition), to the ``__share_group_state`` partition Kafka's share coordinator uses for that key
(``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``), as an acks=all write,
and answers the acknowledgements only once the ISR has it. The topic is compacted: the latest snapshot and the
latest update of each share-partition stay. A broker that becomes the partition's leader reads the latest snapshot back, so accepted
and archived records are never delivered again and released ones keep their delivery counts. Acquired records
are written as available (their locks do not survive a failover), as Kafka does. A share-partition's state is
read as Kafka's share coordinator replays it: the latest ShareSnapshot, then the ShareUpdate records written after
it (Kafka's deltas: a start offset and the changed state batches) applied in order (``replay_state``). klog's
share coordinator writes them as Kafka's does: a ShareSnapshot, then ShareUpdates with the state batches changed
since that snapshot, a new snapshot every ``share.coordinator.snapshot.update.records.per.snapshot`` updates (or
sooner, where an update would hold more than half the whole state's batches).

When this broker leads the key's ``__share_group_state`` partition it appends the snapshot itself; otherwise it
sends it, as Kafka's share-partition leaders do, in a WriteShareGroupState (85) request to that partition's
leader (the share coordinator), which appends it and answers once the ISR has it. A new leader reads the latest
snapshot from the share coordinator (ReadShareGroupState, 84, when another broker leads the state partition;
its own replica when the coordinator does not answer), and initializes a share-partition never seen before at
its ``share.auto.offset.reset`` offset (InitializeShareGroupState, 83).

The group coordinator's share-offset admin (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets, DeleteGroups) goes through the same routing as Kafka's persister: InitializeShareGroupState
(83, a new state epoch and start offset), ReadShareGroupState (84), DeleteShareGroupState (86, a tombstone) and
ReadShareGroupStateSummary (87), answered here when this broker leads the key's state partition, else sent to its
leader. A state write whose state epoch is older than the share-partition's (an alter happened since the leader
loaded it) is refused with FENCED_STATE_EPOCH.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import struct
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from klog.broker.coordinator.runtime import CoordinatorLog, replication_error_code, storage_error_code
from klog.broker.share_partitions import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, SharePartition
from klog.protocol.data import (
    SHARE_SNAPSHOT_KEY_SCHEMA, SHARE_SNAPSHOT_VALUE_SCHEMA, SHARE_UPDATE_KEY_SCHEMA, SHARE_UPDATE_VALUE_SCHEMA,
    decode_data, encode_data,
)
from klog.protocol.error_codes import ErrorCode

log = logging.getLogger("klog.share")

TOPIC = "__share_group_state"
WRITE_SHARE_GROUP_STATE_VERSION = 1
#: pause between two attempts of a state write whose share coordinator is not ready
PERSIST_RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset((ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE = 0, 1
INITIALIZE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE = 83, 84, 85
DELETE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE_SUMMARY = 86, 87
_INT16 = struct.Struct(">h")


@dataclass
class StateSummary:
    """ReadShareGroupStateSummary's answer for one share-partition."""

    error_code: int
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = -1
    delivery_complete_count: int = -1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_code(response: Any) -> int:
    """The first share-partition error of a share-state RPC response (or the error code it already is)."""
    if isinstance(response, int):
        return response
    for result in response.results:
        for p in result.partitions:
            if p.error_code:
                return int(p.error_code)
    return ErrorCode.NONE


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what picks the state partition (Kafka's ``Uuid.toString``
    is url-safe base64 without padding)."""
    tid = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"{group_id}:{tid}:{partition}"


def state_batches(sp: SharePartition) -> list[dict[str, int]]:
    """``sp``'s in-flight records as Kafka's state batches (acquired records are written as available)."""
    batches: list[dict[str, int]] = []
    for b in sp.batches:
        state = AVAILABLE if b.state == ACQUIRED else b.state
        last = batches[-1] if batches else None
        if last is not None and last["last_offset"] == b.first - 1 and last["delivery_state"] == state \
                and last["delivery_count"] == b.delivery_count:
            last["last_offset"] = b.last
        else:
            batches.append({"first_offset": b.first, "last_offset": b.last, "delivery_state": state,
                            "delivery_count": b.delivery_count})
    return batches


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(SNAPSHOT_RECORD_TYPE) + encode_data(
        SHARE_SNAPSHOT_KEY_SCHEMA, 0, {"group_id": group_id, "topic_id": topic_id, "partition": partition})


def snapshot_record(group_id: str, topic_id: uuid.UUID, partition: int, *, snapshot_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[dict[str, int]], create_ms: int, now_ms: int,
                    state_epoch: int = 0) -> tuple[bytes, bytes]:
    """(key, value) of a ShareSnapshot record."""
    key = snapshot_key(group_id, topic_id, partition)
    completed = _completed([SimpleNamespace(**b) for b in batches])
    value = _INT16.pack(0) + encode_data(SHARE_SNAPSHOT_VALUE_SCHEMA, 0, {
        "snapshot_epoch": snapshot_epoch, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
        "start_offset": start_offset, "delivery_complete_count": completed,
        "create_timestamp": create_ms or now_ms, "write_timestamp": now_ms, "state_batches": batches})
    return key, value


def update_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(UPDATE_RECORD_TYPE) + encode_data(
        SHARE_UPDATE_KEY_SCHEMA, 0, {"group_id": group_id, "topic_id": topic_id, "partition": partition})


def _as_batches(per_offset: dict[int, tuple[int, int]]) -> list[dict[str, int]]:
    """offset -> (delivery state, delivery count) as state batches (runs of consecutive offsets alike)."""
    batches: list[dict[str, int]] = []
    for offset in sorted(per_offset):
        state, count = per_offset[offset]
        last = batches[-1] if batches else None
        if last is not None and last["last_offset"] == offset - 1 and last["delivery_state"] == state \
                and last["delivery_count"] == count:
            last["last_offset"] = offset
        else:
            batches.append({"first_offset": offset, "last_offset": offset, "delivery_state": state,
                            "delivery_count": count})
    return batches


def update_record(group_id: str, topic_id: uuid.UUID, partition: int, *, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, batches: list[dict[str, int]]) -> tuple[bytes, bytes]:
    """(key, value) of a ShareUpdate record (Kafka's delta: the changed state batches and the start offset)."""
    key = update_key(group_id, topic_id, partition)
    value = _INT16.pack(0) + encode_data(SHARE_UPDATE_VALUE_SCHEMA, 0, {
        "snapshot_epoch": snapshot_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
        "state_batches": batches})
    return key, value


def decode_state_record(key: bytes, value: bytes | None) -> tuple[tuple[str, uuid.UUID, int], int, Any] | None:
    """((group, topic id, partition), record type, value or None for a tombstone) of a ShareSnapshot (0) or
    ShareUpdate (1) record; None for other record types."""
    if len(key) < 2:
        return None
    kind = _INT16.unpack_from(key)[0]
    if kind not in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE):
        return None
    key_schema, value_schema = (SHARE_SNAPSHOT_KEY_SCHEMA, SHARE_SNAPSHOT_VALUE_SCHEMA) \
        if kind == SNAPSHOT_RECORD_TYPE else (SHARE_UPDATE_KEY_SCHEMA, SHARE_UPDATE_VALUE_SCHEMA)
    k, _ = decode_data(key_schema, 0, memoryview(key)[2:])
    ident = (k.group_id, k.topic_id, k.partition)
    if value is None:
        return ident, kind, None
    version = _INT16.unpack_from(value)[0]
    v, _ = decode_data(value_schema, version, memoryview(value)[2:])
    return ident, kind, v


def decode_snapshot(key: bytes, value: bytes | None) -> tuple[tuple[str, uuid.UUID, int], Any] | None:
    """((group, topic id, partition), snapshot value or None for a tombstone); None for other record types."""
    decoded = decode_state_record(key, value)
    if decoded is None or decoded[1] != SNAPSHOT_RECORD_TYPE:
        return None
    return decoded[0], decoded[2]


def _completed(batches: Any) -> int:
    return sum(b.last_offset - b.first_offset + 1 for b in batches if b.delivery_state in (ACKNOWLEDGED, ARCHIVED))


def apply_update(state: Any, update: Any) -> SimpleNamespace:
    """A share-partition's state after a ShareUpdate, as Kafka's share coordinator replays one over the latest
    snapshot: the update's start offset (unless -1) and leader epoch (unless -1), its state batches over the
    older ones offset by offset, nothing below the start offset kept. ``state`` None: an update with no snapshot
    before it starts the state."""
    start = update.start_offset if update.start_offset != -1 or state is None else state.start_offset
    per_offset: dict[int, tuple[int, int]] = {}
    for batches in ((state.state_batches if state is not None else []), update.state_batches):
        for b in batches:
            for offset in range(max(b.first_offset, start), b.last_offset + 1):
                per_offset[offset] = (b.delivery_state, b.delivery_count)
    merged = [SimpleNamespace(**b) for b in _as_batches(per_offset)]
    leader_epoch = update.leader_epoch if update.leader_epoch != -1 or state is None else state.leader_epoch
    return SimpleNamespace(
        snapshot_epoch=state.snapshot_epoch if state is not None else update.snapshot_epoch,
        state_epoch=state.state_epoch if state is not None else 0, leader_epoch=leader_epoch, start_offset=start,
        delivery_complete_count=_completed(merged), state_batches=merged,
        create_timestamp=state.create_timestamp if state is not None else 0,
        write_timestamp=getattr(state, "write_timestamp", 0) if state is not None else 0)


def replay_state(records: Any, wanted: tuple[str, uuid.UUID, int]) -> Any:
    """The state of share-partition ``wanted`` after ``records`` ((key, value) pairs of ``__share_group_state``
    in log order): its latest ShareSnapshot with the ShareUpdates written after it applied in order; None when
    never written or deleted (a snapshot tombstone)."""
    latest = None
    for key, value in records:
        if key is None:
            continue
        decoded = decode_state_record(key, value)
        if decoded is None or decoded[0] != wanted:
            continue
        _, kind, v = decoded
        if kind == SNAPSHOT_RECORD_TYPE:
            latest = v
        elif v is not None:
            latest = apply_update(latest, v)
    return latest


def restore(sp: SharePartition, snapshot: Any) -> None:
    """Sets ``sp`` to a snapshot's state (a start offset of -1: initialized without one, ``sp`` keeps its own)."""
    sp.state_epoch = snapshot.state_epoch
    if snapshot.start_offset < 0:
        return
    sp.snapshot_epoch = snapshot.snapshot_epoch
    sp.create_timestamp = snapshot.create_timestamp
    sp.load(snapshot.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                    for b in snapshot.state_batches])


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
        #: ShareUpdate records written between two ShareSnapshots of a share-partition
        self.updates_per_snapshot = int(config["share.coordinator.snapshot.update.records.per.snapshot"])
        #: per share-partition key written here: the state partition's leader epoch then and the last snapshot,
        #: offset -> (delivery state, count), and how many updates were written since (a key missing, or a
        #: leader epoch since moved on (another broker may have written in between): the next write is a snapshot)
        self._baselines: dict[str, tuple[int, dict[int, tuple[int, int]]]] = {}
        self._updates_since: dict[str, int] = {}
        #: snapshot epoch and creation time per share-partition key written here
        self._epochs: dict[str, int] = {}
        self._created: dict[str, int] = {}
        #: state epoch per share-partition key coordinated here (InitializeShareGroupState starts a new one)
        self._state_epochs: dict[str, int] = {}
        #: connections to the share coordinators of other brokers (WriteShareGroupState)
        self._connections: dict[tuple[int, str, int], Any] = {}
        #: state writes answered (snapshots and updates; tests read it)
        self.snapshots_written = 0

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Any:
        """A share-partition's state in this broker's replica: its latest snapshot with the later updates (Kafka's
        ShareUpdate records) applied, or None (never written, or deleted)."""
        state_partition = self.partition_for(coordinator_key(group_id, topic_id, partition))
        return replay_state(((key, value) for _, key, value in self.read_partition(state_partition)),
                            (group_id, topic_id, partition))

    def leads(self, state_partition: int) -> bool:
        led = self.context.led_partitions(self.TOPIC) if hasattr(self.context, "led_partitions") else None
        return led is None or state_partition in led

    def _state_leader_epoch(self, state_partition: int) -> int:
        metadata = getattr(self.context, "metadata", None)
        registration = metadata.partition(self.TOPIC, state_partition) if metadata is not None else None
        return int(registration.leader_epoch) if registration is not None else -1

    # -- the share coordinator: this broker leads the key's __share_group_state partition ----------------------
    def _coordinates(self, group_id: str, topic_id: uuid.UUID, partition: int) -> str | None:
        key_str = coordinator_key(group_id, topic_id, partition)
        return key_str if self.leads(self.partition_for(key_str)) else None

    def _known_state_epoch(self, key_str: str, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        if key_str not in self._state_epochs:
            latest = self.read(group_id, topic_id, partition)
            self._state_epochs[key_str] = latest.state_epoch if latest is not None else 0
            if latest is not None:   # a new coordinator goes on with the snapshot epochs
                self._epochs.setdefault(key_str, latest.snapshot_epoch)
        return self._state_epochs[key_str]

    async def _append(self, key_str: str, records: list[tuple[bytes, bytes | None]], now_ms: int) -> int:
        """Appends to the key's state partition and waits until the ISR has it; returns the error code."""
        try:
            await self.ensure_topic_async()
            written = self.write(key_str, records, now_ms)
        except Exception as exc:  # noqa: BLE001 - answered as an error code
            return storage_error_code(exc)
        if written is None:
            return ErrorCode.NONE
        wait = self.context.wait_replicated(self.TOPIC, written[0], written[1], self.write_timeout_ms)
        if wait is None:
            return ErrorCode.NONE
        code = int(await wait)
        return replication_error_code(code) if code else ErrorCode.NONE

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int,
                          start_offset: int, batches: list[dict[str, int]], now_ms: int, state_epoch: int = 0) -> int:
        """The share coordinator's write (WriteShareGroupState, ``batches``: the share-partition's state): appends
        it and waits until the ISR has it; returns the error code (FENCED_STATE_EPOCH for a leader holding state
        older than an alter). As Kafka's share coordinator, a ShareSnapshot (the whole state) starts the key and
        follows every ``share.coordinator.snapshot.update.records.per.snapshot`` ShareUpdates, which carry the
        start offset and only the state batches changed since that snapshot (at and past the start offset). An
        update holds every change since the snapshot, not just since the previous update: the topic is compacted,
        and the latest snapshot with the latest update of a key is then still the whole state (a record's state
        only moves forward, so replaying all the updates in order gives the same)."""
        key_str = self._coordinates(group_id, topic_id, partition)
        if key_str is None:
            return ErrorCode.NOT_COORDINATOR
        current = self._known_state_epoch(key_str, group_id, topic_id, partition)
        if state_epoch < current:
            return ErrorCode.FENCED_STATE_EPOCH
        state = {offset: (b["delivery_state"], b["delivery_count"])
                 for b in batches for offset in range(max(b["first_offset"], start_offset), b["last_offset"] + 1)}
        leader_epoch_now = self._state_leader_epoch(self.partition_for(key_str))
        known = self._baselines.get(key_str)
        baseline = known[1] if known is not None and known[0] == leader_epoch_now else None
        updates = self._updates_since.get(key_str, 0)
        changed = _as_batches({offset: v for offset, v in state.items() if baseline.get(offset) != v}) \
            if baseline is not None else []
        # klog's own rule beside Kafka's cadence: an update as large as half the whole state is written as a
        # snapshot instead (a cumulative update only grows until the next snapshot)
        if baseline is None or updates >= self.updates_per_snapshot or 2 * len(changed) > len(batches):
            epoch = self._epochs.get(key_str, 0) + 1
            key, value = snapshot_record(group_id, topic_id, partition, snapshot_epoch=epoch,
                                         leader_epoch=leader_epoch, start_offset=start_offset, batches=batches,
                                         state_epoch=current, create_ms=self._created.setdefault(key_str, now_ms),
                                         now_ms=now_ms)
            baseline, updates = state, 0
        else:
            epoch = self._epochs[key_str]
            key, value = update_record(group_id, topic_id, partition, snapshot_epoch=epoch,
                                       leader_epoch=leader_epoch, start_offset=start_offset, batches=changed)
            updates += 1
        code = await self._append(key_str, [(key, value)], now_ms)
        if code == ErrorCode.NONE:
            self._epochs[key_str] = epoch
            self._baselines[key_str] = (leader_epoch_now, baseline)
            self._updates_since[key_str] = updates
            self.snapshots_written += 1
        return code

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int, now_ms: int) -> int:
        """InitializeShareGroupState: a state epoch starting at ``start_offset`` with nothing in flight (an epoch
        older than the current one is FENCED_STATE_EPOCH, as Kafka's share coordinator answers)."""
        key_str = self._coordinates(group_id, topic_id, partition)
        if key_str is None:
            return ErrorCode.NOT_COORDINATOR
        if self.read(group_id, topic_id, partition) is not None \
                and state_epoch < self._known_state_epoch(key_str, group_id, topic_id, partition):
            return ErrorCode.FENCED_STATE_EPOCH
        key, value = snapshot_record(group_id, topic_id, partition, snapshot_epoch=0, leader_epoch=0,
                                     start_offset=start_offset, batches=[], state_epoch=state_epoch,
                                     create_ms=now_ms, now_ms=now_ms)
        code = await self._append(key_str, [(key, value)], now_ms)
        if code == ErrorCode.NONE:
            self._state_epochs[key_str] = state_epoch
            self._epochs[key_str] = 0
            self._created[key_str] = now_ms
            self._baselines.pop(key_str, None)   # a new state: the next write is a snapshot
        return code

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, now_ms: int) -> int:
        """DeleteShareGroupState: a tombstone for the share-partition's state."""
        key_str = self._coordinates(group_id, topic_id, partition)
        if key_str is None:
            return ErrorCode.NOT_COORDINATOR
        if self.read(group_id, topic_id, partition) is None:
            return ErrorCode.NONE
        # both record keys' tombstones: compaction then drops the share-partition's state altogether
        code = await self._append(key_str, [(snapshot_key(group_id, topic_id, partition), None),
                                            (update_key(group_id, topic_id, partition), None)], now_ms)
        if code == ErrorCode.NONE:
            self._baselines.pop(key_str, None)
            self._state_epochs.pop(key_str, None)
            self._epochs.pop(key_str, None)
            self._created.pop(key_str, None)
        return code

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, str | None, Any]:
        """ReadShareGroupState: (error code, message, latest snapshot); a share-partition never initialized (or
        deleted) is INVALID_REQUEST, as Kafka's share coordinator answers."""
        if self._coordinates(group_id, topic_id, partition) is None:
            return ErrorCode.NOT_COORDINATOR, None, None
        latest = self.read(group_id, topic_id, partition)
        if latest is None:
            return ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.", None
        return ErrorCode.NONE, None, latest

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateSummary:
        """ReadShareGroupStateSummary: the start offset, state and leader epochs and delivery-complete count (a
        share-partition never initialized: start offset -1)."""
        if self._coordinates(group_id, topic_id, partition) is None:
            return StateSummary(ErrorCode.NOT_COORDINATOR)
        latest = self.read(group_id, topic_id, partition)
        if latest is None:
            return StateSummary(ErrorCode.NONE)
        return StateSummary(ErrorCode.NONE, latest.state_epoch, latest.leader_epoch, latest.start_offset,
                            latest.delivery_complete_count)

    # -- Kafka's persister: the group coordinator's and share-partition leaders' calls, routed ---------------
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                         start_offset: int) -> int:
        if await self._local(group_id, topic_id, partition):
            return await self.initialize_state(group_id, topic_id, partition, state_epoch=state_epoch,
                                               start_offset=start_offset, now_ms=_now_ms())
        response = await self._route(INITIALIZE_SHARE_GROUP_STATE, 0, group_id, topic_id, {
            "partition": partition, "state_epoch": state_epoch, "start_offset": start_offset})
        return _first_code(response)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        if await self._local(group_id, topic_id, partition):
            return await self.delete_state(group_id, topic_id, partition, now_ms=_now_ms())
        return _first_code(await self._route(DELETE_SHARE_GROUP_STATE, 0, group_id, topic_id,
                                             {"partition": partition}))

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateSummary:
        if await self._local(group_id, topic_id, partition):
            return self.read_summary(group_id, topic_id, partition)
        response = await self._route(READ_SHARE_GROUP_STATE_SUMMARY, 1, group_id, topic_id,
                                     {"partition": partition, "leader_epoch": -1})
        if isinstance(response, int):
            return StateSummary(response)
        p = response.results[0].partitions[0]
        return StateSummary(int(p.error_code), p.state_epoch, p.leader_epoch, p.start_offset,
                            p.delivery_complete_count)

    async def load(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, Any]:
        """A share-partition leader's read of its state (ReadShareGroupState): (error code, latest snapshot or
        None when never initialized or deleted)."""
        if await self._local(group_id, topic_id, partition):
            return ErrorCode.NONE, self.read(group_id, topic_id, partition)
        response = await self._route(READ_SHARE_GROUP_STATE, 0, group_id, topic_id,
                                     {"partition": partition, "leader_epoch": -1})
        if isinstance(response, int):
            return response, None
        p = response.results[0].partitions[0]
        if p.error_code == ErrorCode.INVALID_REQUEST:   # Kafka's answer for a share-partition never initialized
            return ErrorCode.NONE, None
        if p.error_code:
            return int(p.error_code), None
        return ErrorCode.NONE, SimpleNamespace(state_epoch=p.state_epoch, start_offset=p.start_offset,
                                               snapshot_epoch=0, create_timestamp=0, state_batches=p.state_batches)

    async def _local(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        try:
            await self.ensure_topic_async()
        except Exception:  # noqa: BLE001 - the routed request answers the error
            return True
        return self.leads(self.partition_for(coordinator_key(group_id, topic_id, partition)))

    async def _route(self, api_key: int, version: int, group_id: str, topic_id: uuid.UUID,
                     partition_body: dict[str, Any]) -> Any:
        """The response of one share-state RPC for one share-partition to its share coordinator (retried while
        that has no ready leader, up to share.coordinator.write.timeout.ms), or an error code."""
        deadline = time.monotonic() + self.write_timeout_ms / 1000
        state_partition = self.partition_for(coordinator_key(group_id, topic_id, partition_body["partition"]))
        body = {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [partition_body]}]}
        while True:
            endpoint = self.context.partition_leader_endpoint(self.TOPIC, state_partition, self.context.listener_name)
            code: int
            if endpoint is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                try:
                    response = await self._request(endpoint, body, api_key=api_key, version=version)
                except Exception as exc:  # noqa: BLE001 - answered as an error code
                    log.warning("share-state request %d to node %d failed: %s", api_key, endpoint[0], exc)
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                else:
                    code = _first_code(response)
                    if code not in _RETRIABLE:
                        return response
            if time.monotonic() >= deadline:
                return code
            await asyncio.sleep(PERSIST_RETRY_BACKOFF_S)

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
                                          start_offset=sp.start_offset, batches=batches, now_ms=now_ms,
                                          state_epoch=sp.state_epoch)
        endpoint = self.context.partition_leader_endpoint(self.TOPIC, state_partition, self.context.listener_name)
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        body = {"group_id": sp.group_id, "topics": [{"topic_id": topic_id, "partitions": [{
            "partition": sp.partition, "state_epoch": sp.state_epoch, "leader_epoch": leader_epoch,
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

    async def _request(self, endpoint: tuple[int, str, int], body: dict[str, Any], *,
                       api_key: int = WRITE_SHARE_GROUP_STATE, version: int = WRITE_SHARE_GROUP_STATE_VERSION) -> Any:
        conn = self._connections.get(endpoint)
        if conn is None or conn.closed:
            node, host, port = endpoint
            conn = await self.context.inter_broker.open(host, port, node,
                                                        client_id=f"klog-share-{self.context.node_id}",
                                                        request_timeout_ms=self.write_timeout_ms + 5000,
                                                        max_response_bytes=1 << 20, connect_timeout_ms=5000)
            self._connections[endpoint] = conn
        try:
            return await conn.request(api_key, body, version=version)
        except Exception:
            conn.close()
            self._connections.pop(endpoint, None)
            raise

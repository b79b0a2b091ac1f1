"""Durable share-partition state: Kafka's ``__share_group_state`` topic with its ShareSnapshot and ShareUpdate records.

The partition leader writes a share-partition's state (start offset, and the in-flight records as state batches:
available, acknowledged, archived, with their delivery counts), keyed by (group, topic id, partition), to the
``__share_group_state`` partition Kafka's share coordinator uses for that key
(``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``), as an acks=all write,
and answers the acknowledgements only once the ISR has it. A broker that becomes the partition's leader reads the
state back, so accepted and archived records are never delivered again and released ones keep their delivery
counts. Acquired records are written as available (their locks do not survive a failover), as Kafka does.

The topic is Kafka's: created with Kafka 4.3's configs (``cleanup.policy=delete``, ``retention.ms=-1``,
``compression.type=producer``, ``segment.bytes`` and ``min.insync.replicas`` from the
``share.coordinator.state.topic.*`` settings). klog's share coordinator writes as Kafka's does: a ShareSnapshot
(the whole state) starts a share-partition, then ShareUpdates carrying the start offset and only the state batches
that write changed, a new snapshot every ``share.coordinator.snapshot.update.records.per.snapshot`` updates. A
share-partition's state is read as Kafka's share coordinator replays it (``replay_state``): the latest ShareSnapshot,
then every ShareUpdate written after it merged on in log order (Kafka's ``PersisterStateBatchCombiner``: where
offsets overlap the higher delivery count wins, then the higher state; nothing below the start offset kept). So
every record from a share-partition's latest snapshot on is needed, and nothing before the earliest such snapshot
of a state partition is: every ``share.coordinator.state.topic.prune.interval.ms`` the coordinator deletes the
records below that *last redundant offset* (``RedundantOffsets``; DeleteRecords through the replica layer: the
leader's log start moves, the followers' follow from their fetches), as Kafka's ``ShareCoordinatorService`` does;
and every ``share.coordinator.cold.partition.snapshot.interval.ms`` it snapshots again the share-partitions not
snapshotted for that long, so an idle one does not hold that offset back.
A state topic an earlier klog created compacted (``cleanup.policy=compact``) keeps working: there each ShareUpdate
carries every change since its snapshot (compaction keeps only a key's latest update), as that klog wrote them.

When this broker leads the key's ``__share_group_state`` partition it appends the state itself; otherwise it
sends it, as Kafka's share-partition leaders do, in a WriteShareGroupState (85) request to that partition's
leader (the share coordinator), which appends it and answers once the ISR has it. A new leader reads the latest
state from the share coordinator (ReadShareGroupState, 84, when another broker leads the state partition;
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
import re
import time
import struct
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import itemgetter
from types import SimpleNamespace
from typing import Any

from klog.broker.coordinator.runtime import CoordinatorLog, replication_error_code, storage_error_code
from klog.controller.topics import internal_topic_spec
from klog.metadata.storage import parse_kafka_uuid
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


class ShareCoordinatorFinder:
    """FindCoordinator for a share-partition key (key type 2, ``group:topicId:partition``, KIP-932): the leader of
    its ``__share_group_state`` partition, the topic created on first use as a group's or a transactional id's is
    (with its spec); INVALID_REQUEST without a message while share groups are not enabled (share.version 0), as
    Kafka 4.3 answers."""

    def __init__(self, context: Any, store: ShareStateStore, enabled: Callable[[], bool]) -> None:
        self.context = context
        self.store = store
        self.enabled = enabled

    async def coordinator_for(self, key: str, listener: str | None) -> tuple[int, str | None, tuple[int, str, int]]:
        none = (-1, "", -1)
        if not self.enabled():
            return ErrorCode.INVALID_REQUEST, "", none
        if not valid_share_partition_key(key):   # Kafka answers with no message
            return ErrorCode.INVALID_REQUEST, "", none
        return await self.store.leader_of(key, listener or self.context.listener_name)


#: an int Java's ``Integer.parseInt`` reads (a sign, decimal digits)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def valid_share_partition_key(key: str) -> bool:
    """Kafka's ``SharePartitionKey.validate``: ``group:topicId:partition`` with a group, a topic id a Kafka Uuid
    reads (base64url of 16 bytes) and an int partition, split as Java's ``String.split`` does (trailing empty
    parts dropped)."""
    parts = key.split(":")
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) != 3 or not parts[0] or len(parts[1]) > 24 or not _JAVA_INT.fullmatch(parts[2]) \
            or not -2**31 <= int(parts[2]) < 2**31:
        return False
    try:
        parse_kafka_uuid(parts[1])
    except ValueError:
        return False
    return True


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


#: a share-partition's state as runs: (first offset, last offset, delivery state, delivery count), in offset order,
#: not overlapping, neighbours with the same state and count merged
Runs = list[tuple[int, int, int, int]]
_RUN_LAST = itemgetter(1)


def _as_batches(runs: Runs) -> list[dict[str, int]]:
    """Runs as state batches."""
    return [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c} for f, la, s, c in runs]


def _coalesced(runs: Runs) -> Runs:
    out: Runs = []
    for run in runs:
        if out:
            f, la, s, c = out[-1]
            if la == run[0] - 1 and s == run[2] and c == run[3]:
                out[-1] = (f, run[1], s, c)
                continue
        out.append(run)
    return out


def _paint(runs: Runs, first: int, last: int, state: int, count: int) -> None:
    """Merges the state batch [first, last] (``state``, ``count``) into ``runs`` as Kafka's combiner merges it:
    where it overlaps a run the higher delivery count wins, then the higher state; elsewhere it is taken."""
    i = bisect_left(runs, first, key=_RUN_LAST)   # the first run ending at or after ``first``
    j, pos = i, first
    pieces: Runs = []
    while j < len(runs) and runs[j][0] <= last:
        rf, rl, rs, rc = runs[j]
        if rf < first:
            pieces.append((rf, first - 1, rs, rc))
        if rf > pos:
            pieces.append((pos, rf - 1, state, count))
        lo, hi = max(rf, first), min(rl, last)
        pieces.append((lo, hi, state, count) if _outranks((state, count), (rs, rc)) else (lo, hi, rs, rc))
        if rl > last:
            pieces.append((last + 1, rl, rs, rc))
        pos = hi + 1
        j += 1
    if pos <= last:
        pieces.append((pos, last, state, count))
    runs[i:j] = pieces


def _runs(batches: Any, start: int, into: Runs | None = None) -> Runs:
    """State batches (objects or dicts) merged into the runs ``into`` as Kafka's combiner merges them; offsets
    below ``start`` dropped (from ``into`` too)."""
    runs: Runs = [] if into is None else _from(into, start)
    for b in batches:
        first, last, state, count = (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"]) \
            if isinstance(b, dict) else (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        first = max(first, start)
        if first <= last:
            _paint(runs, first, last, state, count)
    return _coalesced(runs)


def _from(runs: Runs, start: int) -> Runs:
    """The runs from offset ``start`` on (a copy)."""
    i = bisect_left(runs, start, key=_RUN_LAST)
    out = runs[i:]
    if out and out[0][0] < start:
        out[0] = (start, *out[0][1:])
    return out


def _changed(runs: Runs, since: Runs) -> Runs:
    """The parts of ``runs`` that ``since`` does not hold alike (another state or count, or no state)."""
    out: Runs = []
    j = 0
    for f, la, s, c in runs:
        while j < len(since) and since[j][1] < f:
            j += 1
        pos, k = f, j
        while k < len(since) and since[k][0] <= la:
            sf, sl, ss, sc = since[k]
            if ss == s and sc == c:
                lo = max(sf, f)
                if lo > pos:
                    out.append((pos, lo - 1, s, c))
                pos = min(sl, la) + 1
            k += 1
        if pos <= la:
            out.append((pos, la, s, c))
    return _coalesced(out)


def update_record(group_id: str, topic_id: uuid.UUID, partition: int, *, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, batches: list[dict[str, int]]) -> tuple[bytes, bytes]:
    """(key, value) of a ShareUpdate record (Kafka's delta: the changed state batches and the start offset)."""
    key = update_key(group_id, topic_id, partition)
    value = _INT16.pack(0) + encode_data(SHARE_UPDATE_VALUE_SCHEMA, 0, {
        "snapshot_epoch": snapshot_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
        "state_batches": batches})
    return key, value


def decode_state_key(key: bytes | None) -> tuple[tuple[str, uuid.UUID, int], int] | None:
    """((group, topic id, partition), record type) of a ShareSnapshot (0) or ShareUpdate (1) record's key; None for
    other records."""
    if key is None or len(key) < 2:
        return None
    kind = _INT16.unpack_from(key)[0]
    if kind not in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE):
        return None
    k, _ = decode_data(SHARE_SNAPSHOT_KEY_SCHEMA if kind == SNAPSHOT_RECORD_TYPE else SHARE_UPDATE_KEY_SCHEMA, 0,
                       memoryview(key)[2:])
    return (k.group_id, k.topic_id, k.partition), kind


def decode_state_record(key: bytes, value: bytes | None) -> tuple[tuple[str, uuid.UUID, int], int, Any] | None:
    """((group, topic id, partition), record type, value or None for a tombstone) of a ShareSnapshot (0) or
    ShareUpdate (1) record; None for other record types."""
    decoded = decode_state_key(key)
    if decoded is None:
        return None
    ident, kind = decoded
    if value is None:
        return ident, kind, None
    version = _INT16.unpack_from(value)[0]
    v, _ = decode_data(SHARE_SNAPSHOT_VALUE_SCHEMA if kind == SNAPSHOT_RECORD_TYPE else SHARE_UPDATE_VALUE_SCHEMA,
                       version, memoryview(value)[2:])
    return ident, kind, v


def decode_snapshot(key: bytes, value: bytes | None) -> tuple[tuple[str, uuid.UUID, int], Any] | None:
    """((group, topic id, partition), snapshot value or None for a tombstone); None for other record types."""
    decoded = decode_state_record(key, value)
    if decoded is None or decoded[1] != SNAPSHOT_RECORD_TYPE:
        return None
    return decoded[0], decoded[2]


def _completed(batches: Any) -> int:
    return sum(b.last_offset - b.first_offset + 1 for b in batches if b.delivery_state in (ACKNOWLEDGED, ARCHIVED))


def _outranks(new: tuple[int, int], old: tuple[int, int]) -> bool:
    """Kafka's ``PersisterStateBatchCombiner`` where two state batches overlap (each a (delivery state, delivery
    count)): the higher delivery count wins, then the higher delivery state (available, acquired, acknowledged,
    archived in id order); a tie keeps either (they are the same)."""
    return (new[1], new[0]) >= (old[1], old[0])


def apply_update(state: Any, update: Any) -> SimpleNamespace:
    """A share-partition's state after a ShareUpdate, as Kafka's share coordinator replays one
    (``ShareCoordinatorShard.merge``): the update's start offset (unless -1) and leader epoch (unless -1), its state
    batches merged onto the state's (where they overlap the higher delivery count wins, then the higher state),
    nothing below the start offset kept. ``state`` None: an update with no snapshot before it starts the state."""
    start = update.start_offset if update.start_offset != -1 or state is None else state.start_offset
    runs = _runs(update.state_batches, start, _runs(state.state_batches, start) if state is not None else None)
    merged = [SimpleNamespace(**b) for b in _as_batches(runs)]
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


def replay_all(records: Any) -> dict[tuple[str, uuid.UUID, int], Any]:
    """The state of every share-partition ``records`` ((key, value) pairs of one ``__share_group_state`` partition
    in log order) hold, replayed as :func:`replay_state` replays one (the deleted ones left out)."""
    states: dict[tuple[str, uuid.UUID, int], Any] = {}
    for key, value in records:
        decoded = decode_state_record(key, value) if key is not None else None
        if decoded is None:
            continue
        ident, kind, v = decoded
        if kind == SNAPSHOT_RECORD_TYPE:
            states[ident] = v
        elif v is not None:
            states[ident] = apply_update(states.get(ident), v)
    return {ident: state for ident, state in states.items() if state is not None}


class RedundantOffsets:
    """Kafka's ``ShareCoordinatorOffsetsManager`` for one ``__share_group_state`` partition, fed its records in log
    order (``add``): for each share-partition the offset its replay starts at (its latest ShareSnapshot; before any,
    its first ShareUpdate; none once a snapshot tombstone deleted it). The lowest of them is the partition's last
    redundant offset: every record below it is superseded (``last_redundant_offset``)."""

    def __init__(self, next_offset: int = 0) -> None:
        #: share-partition -> the offset of the first record its state is replayed from
        self.needed: dict[tuple[str, uuid.UUID, int], int] = {}
        #: the offset after the last record added
        self.next_offset = next_offset

    def add(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.next_offset = max(self.next_offset, offset + 1)
        decoded = decode_state_key(key)
        if decoded is None:
            return
        ident, kind = decoded
        if kind == SNAPSHOT_RECORD_TYPE:
            if value is None:   # deleted: nothing of it is needed any more
                self.needed.pop(ident, None)
            else:
                self.needed[ident] = offset
        elif value is not None:
            self.needed.setdefault(ident, offset)

    def last_redundant_offset(self, end_offset: int) -> int:
        """The lowest offset a share-partition's state still needs; ``end_offset`` when none needs any."""
        return min(self.needed.values(), default=end_offset)


def last_redundant_offset(records: Iterable[tuple[int, bytes | None, bytes | None]], end_offset: int) -> int:
    """The last redundant offset of a ``__share_group_state`` partition holding ``records`` ((offset, key, value)
    in log order) below ``end_offset``: records below it may be deleted, every share-partition's state replays the
    same from what is left."""
    offsets = RedundantOffsets()
    for offset, key, value in records:
        if offset < end_offset:
            offsets.add(offset, key, value)
    return offsets.last_redundant_offset(end_offset)


def restore(sp: SharePartition, snapshot: Any) -> None:
    """Sets ``sp`` to a snapshot's state (a start offset of -1: initialized without one, ``sp`` keeps its own)."""
    sp.state_epoch = snapshot.state_epoch
    if snapshot.start_offset < 0:
        return
    sp.snapshot_epoch = snapshot.snapshot_epoch
    sp.create_timestamp = snapshot.create_timestamp
    sp.load(snapshot.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                    for b in snapshot.state_batches])


@dataclass
class _Written:
    """What this share coordinator last wrote for one share-partition (its next write is a ShareUpdate against it,
    or a ShareSnapshot)."""

    #: the state partition's leader epoch then (moved on: another coordinator may have written since)
    leader_epoch: int
    start_offset: int
    #: the state (as runs) at the latest snapshot, and after the latest write
    snapshot: Runs
    current: Runs
    #: ShareUpdates written since the snapshot
    updates: int = 0


class ShareStateStore(CoordinatorLog):
    """``__share_group_state``, created with Kafka's ``share.coordinator.state.topic.*`` settings and topic
    configs, pruned every ``share.coordinator.state.topic.prune.interval.ms``."""

    TOPIC = TOPIC

    def __init__(self, context: Any, config: Any) -> None:
        super().__init__(context, internal_topic_spec(TOPIC, config),
                         int(config["share.coordinator.state.topic.compression.codec"]),
                         int(config["share.coordinator.load.buffer.size"]))
        self.write_timeout_ms = int(config["share.coordinator.write.timeout.ms"])
        #: ShareUpdate records written between two ShareSnapshots of a share-partition
        self.updates_per_snapshot = int(config["share.coordinator.snapshot.update.records.per.snapshot"])
        self.prune_interval_ms = int(config["share.coordinator.state.topic.prune.interval.ms"])
        self.cold_snapshot_interval_ms = int(config["share.coordinator.cold.partition.snapshot.interval.ms"])
        #: per share-partition key written here (a key missing, or a leader epoch since moved on: the next write is
        #: a snapshot)
        self._written: dict[str, _Written] = {}
        #: snapshot epoch per share-partition key written here
        self._epochs: dict[str, int] = {}
        #: state epoch per share-partition key coordinated here (InitializeShareGroupState starts a new one)
        self._state_epochs: dict[str, int] = {}
        #: per state partition pruned here: (its leader epoch then, what its records need so far)
        self._redundant: dict[int, tuple[int, RedundantOffsets]] = {}
        #: connections to the share coordinators of other brokers (WriteShareGroupState)
        self._connections: dict[tuple[int, str, int], Any] = {}
        #: state writes answered (snapshots and updates; tests read it)
        self.snapshots_written = 0

    def compacted(self) -> bool:
        """The state topic is compacted: an earlier klog created it so (its ShareUpdates then carry every change since
        their snapshot, as compaction keeps only the latest one of a key)."""
        topics = getattr(getattr(self.context, "partitions", None), "topics", None)
        if topics is None or self.TOPIC not in topics:
            return False
        return "compact" in self.context.partitions.topic_config(self.TOPIC)["cleanup.policy"]

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Any:
        """A share-partition's state in this broker's replica: its latest snapshot with the later updates (Kafka's
        ShareUpdate records) applied, or None (never written, or deleted)."""
        state_partition = self.partition_for(coordinator_key(group_id, topic_id, partition))
        return replay_state(((key, value) for _, key, value in self.read_partition(state_partition)),
                            (group_id, topic_id, partition))

    # -- pruning (Kafka's ShareCoordinatorService record pruning job) ------------------------------------------
    async def prune_forever(self) -> None:
        """Prunes the state partitions this broker leads every ``share.coordinator.state.topic.prune.interval.ms``."""
        while True:
            await asyncio.sleep(self.prune_interval_ms / 1000)
            try:
                self.prune()
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.exception("pruning %s failed", self.TOPIC)

    def prune(self) -> dict[int, int]:
        """One pruning pass: in each ``__share_group_state`` partition this broker leads, the records below its last
        redundant offset are deleted (DeleteRecords through the replica layer: the leader's log start moves, the
        followers' follow). The offset is computed over the records the ISR has (below the high watermark; none
        needed there: the high watermark). Returns partition -> log start offset, for the partitions pruned."""
        replicas = getattr(self.context, "replicas", None)
        if replicas is None or self.context.partition_count(self.TOPIC) is None:
            return {}
        led = self.context.led_partitions(self.TOPIC) if hasattr(self.context, "led_partitions") else None
        partitions = set(range(self.num_partitions)) if led is None else led
        for gone in set(self._redundant) - partitions:
            del self._redundant[gone]
        pruned: dict[int, int] = {}
        for partition in sorted(partitions):
            plog = self.context.partition_log(self.TOPIC, partition)
            if plog is None:
                continue
            offset = self._last_redundant_offset(partition, plog)
            if offset <= plog.log_start_offset:
                continue
            try:
                code, start, _followers = replicas.delete_records(self.TOPIC, partition, offset,
                                                                    internal_allowed=True)
            except OSError as exc:
                log.warning("pruning %s-%d below offset %d failed: %s", self.TOPIC, partition, offset, exc)
                continue
            if code:
                log.info("pruning %s-%d below offset %d refused: %s", self.TOPIC, partition, offset, code)
                continue
            log.debug("pruned %s-%d below offset %d", self.TOPIC, partition, offset)
            pruned[partition] = start
        return pruned

    async def snapshot_cold_forever(self) -> None:
        """Snapshots the idle share-partitions every ``share.coordinator.cold.partition.snapshot.interval.ms``."""
        while True:
            await asyncio.sleep(self.cold_snapshot_interval_ms / 1000)
            try:
                await self.snapshot_cold(_now_ms())
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.exception("snapshotting the idle share-partitions of %s failed", self.TOPIC)

    async def snapshot_cold(self, now_ms: int) -> int:
        """Kafka's cold share-partition snapshots (``ShareCoordinatorShard.snapshotColdPartitions``), so that an idle
        share-partition's old snapshot does not hold back the pruning of its state partition: in each state
        partition this broker leads, unless every share-partition's latest snapshot is already such a cold one
        (written after its creation: nothing was snapshotted since, another round frees nothing), each
        share-partition whose latest snapshot was written ``share.coordinator.cold.partition.snapshot.interval.ms``
        ago or more is written again as a ShareSnapshot (the same state, the next snapshot epoch, its creation time
        kept, written now). Returns how many were written."""
        replicas = getattr(self.context, "replicas", None)
        if replicas is None or self.context.partition_count(self.TOPIC) is None:
            return 0
        led = self.context.led_partitions(self.TOPIC) if hasattr(self.context, "led_partitions") else None
        written = 0
        for partition in sorted(set(range(self.num_partitions)) if led is None else led):
            if self.context.partition_log(self.TOPIC, partition) is None:
                continue
            # read and appended with no await in between: a state write cannot come between them
            states = replay_all((key, value) for _, key, value in self.read_partition(partition))
            if all(state.create_timestamp != state.write_timestamp for state in states.values()):
                continue
            leader_epoch_now = self._state_leader_epoch(partition)
            last = None
            for ident, state in states.items():
                if now_ms - state.write_timestamp < self.cold_snapshot_interval_ms:
                    continue
                key_str = coordinator_key(*ident)
                epoch = max(state.snapshot_epoch, self._epochs.get(key_str, 0)) + 1
                batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                            "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                           for b in state.state_batches]
                key, value = snapshot_record(*ident, snapshot_epoch=epoch, leader_epoch=state.leader_epoch,
                                             start_offset=state.start_offset, batches=batches,
                                             state_epoch=state.state_epoch, create_ms=state.create_timestamp,
                                             now_ms=now_ms)
                try:
                    last = self.write(key_str, [(key, value)], now_ms)
                except Exception as exc:  # noqa: BLE001 - the next pass tries again
                    log.warning("snapshotting %s in %s-%d failed: %s", key_str, self.TOPIC, partition, exc)
                    break
                after = _runs(batches, state.start_offset)
                self._epochs[key_str] = epoch
                self._written[key_str] = _Written(leader_epoch_now, state.start_offset, snapshot=after, current=after)
                written += 1
            if last is not None:
                wait = self.context.wait_replicated(self.TOPIC, last[0], last[1], self.write_timeout_ms)
                if wait is not None and await wait:
                    log.info("snapshots of idle share-partitions in %s-%d did not reach the ISR", self.TOPIC, partition)
        return written

    def _last_redundant_offset(self, partition: int, plog: Any) -> int:
        """The state partition's last redundant offset, reading only the records added since the last pass (all of
        them again when its leader epoch moved, or something else moved its log start past what they needed)."""
        high_watermark = int(plog.high_watermark)
        leader_epoch = self._state_leader_epoch(partition)
        known = self._redundant.get(partition)
        if known is None or known[0] != leader_epoch \
                or known[1].last_redundant_offset(high_watermark) < plog.log_start_offset:
            known = (leader_epoch, RedundantOffsets(int(plog.log_start_offset)))
            self._redundant[partition] = known
        offsets = known[1]
        for offset, key, value in self.read_partition(partition, offsets.next_offset, high_watermark):
            offsets.add(offset, key, value)
        offsets.next_offset = max(offsets.next_offset, high_watermark)
        return offsets.last_redundant_offset(high_watermark)

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
        """The share coordinator's write (WriteShareGroupState): ``batches`` merged onto the share-partition's state
        as Kafka's share coordinator merges them (where offsets overlap the higher delivery count wins, then the
        higher state; nothing below the start offset kept), appended, answered once the ISR has it (the error code;
        FENCED_STATE_EPOCH for a leader holding state older than an alter). As Kafka's share coordinator: a
        ShareSnapshot (the whole state) starts the key and follows every
        ``share.coordinator.snapshot.update.records.per.snapshot`` ShareUpdates; a ShareUpdate carries the start
        offset and only the state batches this write changed (klog's share-partition leaders send their whole
        state), replayed over the snapshot and the updates before it in log order. On a state topic an earlier klog
        created compacted, an update carries every change since its snapshot instead (the latest snapshot and
        update compaction keeps are then the whole state), and one holding more than half the whole state's
        batches is written as a snapshot."""
        key_str = self._coordinates(group_id, topic_id, partition)
        if key_str is None:
            return ErrorCode.NOT_COORDINATOR
        current_state_epoch = self._known_state_epoch(key_str, group_id, topic_id, partition)
        if state_epoch < current_state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        leader_epoch_now = self._state_leader_epoch(self.partition_for(key_str))
        written = self._written.get(key_str)
        if written is not None and written.leader_epoch != leader_epoch_now:
            written = None   # another coordinator may have written since: start again with a snapshot
        start = start_offset if start_offset != -1 or written is None else written.start_offset
        state = _runs(batches, start, None if written is None else written.current)
        whole = _as_batches(state)
        compacted = self.compacted()
        changed: list[dict[str, int]] = []
        if written is not None:
            changed = _as_batches(_changed(state, written.snapshot if compacted else written.current))
        if written is None or written.updates >= self.updates_per_snapshot \
                or (compacted and 2 * len(changed) > len(whole)):
            epoch = self._epochs.get(key_str, 0) + 1
            key, value = snapshot_record(group_id, topic_id, partition, snapshot_epoch=epoch,
                                         leader_epoch=leader_epoch, start_offset=start, batches=whole,
                                         state_epoch=current_state_epoch, create_ms=now_ms, now_ms=now_ms)
            after = _Written(leader_epoch_now, start, snapshot=state, current=state)
        else:
            epoch = self._epochs[key_str]
            key, value = update_record(group_id, topic_id, partition, snapshot_epoch=epoch,
                                       leader_epoch=leader_epoch, start_offset=start_offset, batches=changed)
            after = _Written(leader_epoch_now, start, snapshot=written.snapshot, current=state,
                             updates=written.updates + 1)
        code = await self._append(key_str, [(key, value)], now_ms)
        if code == ErrorCode.NONE:
            # max: a snapshot of an idle share-partition (snapshot_cold) may have been written meanwhile
            self._epochs[key_str] = max(epoch, self._epochs.get(key_str, 0))
            self._written[key_str] = after
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
            self._written.pop(key_str, None)   # a new state: the next write is a snapshot
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
            self._written.pop(key_str, None)
            self._state_epochs.pop(key_str, None)
            self._epochs.pop(key_str, None)
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

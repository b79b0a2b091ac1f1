"""Share-partition state (KIP-932): the records of one partition as one share group consumes them.

Sans-IO: every method takes the time (``now_ms``) and the partition's visible end (its high watermark) from the
caller; the ShareFetch/ShareAcknowledge handlers (``klog.broker.handlers.share``) do the reading.

A share-partition has a start offset (every record below it is done: acknowledged or archived) and an end
offset (the next record never acquired yet); each record in between, *in flight*, is in one of Kafka's states:

- AVAILABLE: it may be acquired (again);
- ACQUIRED: one member holds it until its lock expires (``group.share.record.lock.duration.ms``);
- ACKNOWLEDGED: a member accepted it;
- ARCHIVED: rejected, or delivered ``group.share.delivery.count.limit`` times without being accepted.

Each acquisition adds one to the record's delivery count. A release, or a lock that expires, makes the record
available again, or archives it once its delivery count reached the limit. The start offset moves past the
leading acknowledged and archived records. At most ``group.share.partition.max.record.locks`` records are in
flight (new records are not acquired beyond it; redeliveries still are).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from klog.protocol.error_codes import ErrorCode

# Kafka's RecordState ids
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# Kafka's AcknowledgeType ids (ShareFetch/ShareAcknowledge's AcknowledgeTypes); 0 marks a gap (no record there)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TYPES = frozenset((GAP, ACCEPT, RELEASE, REJECT, RENEW))
#: expire_locks' bound when no record is acquired
_NO_DEADLINE = 2**63 - 1


class ShareStateError(Exception):
    """An acknowledgement the share-partition refuses (``code``: INVALID_RECORD_STATE, INVALID_REQUEST)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


@dataclass(slots=True)
class InFlight:
    state: int = AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0


@dataclass
class SharePartition:
    group_id: str
    topic: str
    partition: int
    start_offset: int
    lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    #: the next offset never acquired (every offset in [start_offset, end_offset) is in ``records``)
    end_offset: int = -1
    records: dict[int, InFlight] = field(default_factory=dict)
    #: the topic's id (the durable state's key)
    topic_id: uuid.UUID | None = None
    #: changed since the state was last written (klog.broker.share_state)
    dirty: bool = False
    snapshot_epoch: int = 0
    create_timestamp: int = 0
    #: the state epoch of the state it was loaded from (an AlterShareGroupOffsets starts a new one)
    state_epoch: int = 0
    #: no acquired record's lock expires before this (a lower bound): expire_locks skips the scan until then
    _next_deadline_ms: int = field(default=0, repr=False)
    #: no in-flight record below this offset is available (a lower bound): next_fetch_offset scans from here
    _scan_from: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    def records_replaced(self) -> None:
        """Call after setting ``records`` from outside (a durable state loaded): the scan bounds start over."""
        self._next_deadline_ms = self._scan_from = 0

    # -- acquisition ------------------------------------------------------------------------------------------
    def expire_locks(self, now_ms: int) -> int:
        """Releases the acquired records whose lock expired (each counted as a delivery); returns how many.
        Scans the in-flight records only once the earliest lock may have expired (every fetch and acknowledgement
        calls this; a scan per call cost O(in-flight records), up to ``max_record_locks``)."""
        if now_ms < self._next_deadline_ms:
            return 0
        expired = 0
        next_deadline = _NO_DEADLINE
        for offset, rec in self.records.items():
            if rec.state == ACQUIRED:
                if rec.deadline_ms <= now_ms:
                    self._release(offset, rec)
                    expired += 1
                elif rec.deadline_ms < next_deadline:
                    next_deadline = rec.deadline_ms
        self._next_deadline_ms = next_deadline
        if expired:
            self._advance()
        return expired

    def next_fetch_offset(self, visible_end: int) -> int | None:
        """Where a fetch should start reading: the first available in-flight record, else the end offset when
        new records are visible and the in-flight limit allows; None when there is nothing to acquire."""
        for offset in range(max(self.start_offset, self._scan_from), self.end_offset):
            rec = self.records.get(offset)
            if rec is not None and rec.state == AVAILABLE:
                self._scan_from = offset
                return offset
        self._scan_from = self.end_offset
        if self.end_offset < visible_end and self.end_offset - self.start_offset < self.max_record_locks:
            return self.end_offset
        return None

    def acquire(self, member_id: str, first: int, last: int, max_records: int, now_ms: int,
                unreadable: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, int]]:
        """Acquires for ``member_id`` the available records among offsets [first, last] (the range the caller
        read), at most ``max_records``; returns the acquired runs (first offset, last offset, delivery count).
        Offsets of the ``unreadable`` ranges (inclusive; under ``share.isolation.level=read_committed``: control
        batches and the batches of aborted transactions) are archived instead, never delivered, as Kafka's
        SharePartition archives aborted transactional records."""
        if first < self.start_offset:
            first = self.start_offset
        acquired: list[tuple[int, int, int]] = []
        count = 0
        deadline = now_ms + self.lock_duration_ms
        self._next_deadline_ms = min(self._next_deadline_ms, deadline)
        offset = first
        archived = False
        while offset <= last and count < max_records:
            if offset >= self.end_offset:
                if self.end_offset - self.start_offset >= self.max_record_locks:
                    break
                self.records[offset] = InFlight()
                self.end_offset = offset + 1
            rec = self.records.get(offset)
            if rec is not None and rec.state == AVAILABLE and any(lo <= offset <= hi for lo, hi in unreadable):
                rec.state = ARCHIVED
                self.dirty = archived = True
            elif rec is not None and rec.state == AVAILABLE:
                rec.state = ACQUIRED
                rec.delivery_count += 1
                rec.member_id = member_id
                rec.deadline_ms = deadline
                count += 1
                if acquired and acquired[-1][1] == offset - 1 and acquired[-1][2] == rec.delivery_count:
                    acquired[-1] = (acquired[-1][0], offset, rec.delivery_count)
                else:
                    acquired.append((offset, offset, rec.delivery_count))
            offset += 1
        if archived:
            self._advance()
        return acquired

    # -- acknowledgement --------------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, first: int, last: int, types: list[int], now_ms: int) -> None:
        """Applies one acknowledgement batch: ``types`` has one type for every offset of [first, last], or a
        single type for all of them. Validates the whole batch before changing anything."""
        if last < first or (len(types) != 1 and len(types) != last - first + 1) or not types:
            raise ShareStateError(ErrorCode.INVALID_REQUEST, "acknowledgement batch malformed")
        if any(t not in ACK_TYPES for t in types):
            raise ShareStateError(ErrorCode.INVALID_REQUEST, "unknown acknowledge type")
        recs = []
        for offset in range(first, last + 1):
            rec = self.records.get(offset)
            if rec is None or rec.state != ACQUIRED or rec.member_id != member_id:
                raise ShareStateError(ErrorCode.INVALID_RECORD_STATE,
                                      f"offset {offset} is not acquired by member {member_id}")
            recs.append(rec)
        for i, rec in enumerate(recs):
            kind = types[0] if len(types) == 1 else types[i]
            self.dirty = True
            if kind == ACCEPT:
                rec.state = ACKNOWLEDGED
            elif kind in (REJECT, GAP):
                rec.state = ARCHIVED
            elif kind == RELEASE:
                self._release(first + i, rec)
            elif kind == RENEW:
                rec.deadline_ms = now_ms + self.lock_duration_ms
        self._advance()

    def release_member(self, member_id: str) -> int:
        """Releases every record ``member_id`` holds (its share session closed or it left the group)."""
        released = 0
        for offset, rec in self.records.items():
            if rec.state == ACQUIRED and rec.member_id == member_id:
                self._release(offset, rec)
                released += 1
        if released:
            self._advance()
        return released

    # -- inspection -------------------------------------------------------------------------------------------
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def count(self, state: int) -> int:
        return sum(1 for r in self.records.values() if r.state == state)

    # -- internals --------------------------------------------------------------------------------------------
    def _release(self, offset: int, rec: InFlight) -> None:
        self.dirty = True
        rec.member_id = ""
        rec.deadline_ms = 0
        if rec.delivery_count >= self.delivery_count_limit:
            rec.state = ARCHIVED
        else:
            rec.state = AVAILABLE
            self._scan_from = min(self._scan_from, offset)

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            rec = self.records.get(self.start_offset)
            if rec is None or rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1


@dataclass
class ShareSession:
    """A share consumer's session on this broker (ShareFetch epoch 0 opens it, -1 closes it)."""

    group_id: str
    member_id: str
    #: the epoch the next request must carry
    epoch: int = 1
    #: (topic, partition) -> topic id of the partitions the session fetches
    partitions: dict[tuple[str, int], uuid.UUID] = field(default_factory=dict)


class SharePartitionManager:
    """Every share-partition this broker leads the partition of, keyed by (group, topic, partition)."""

    def __init__(self, config: Mapping[str, Any], store: Any = None) -> None:
        get = config.__getitem__
        self.lock_duration_ms = int(get("group.share.record.lock.duration.ms"))
        self.delivery_count_limit = int(get("group.share.delivery.count.limit"))
        self.max_record_locks = int(get("group.share.partition.max.record.locks"))
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        #: where share-partition state is made durable (klog.broker.share_state.ShareStateStore); None: memory only
        self.store: Any = store

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, partition))

    def get_or_init(self, group_id: str, topic: str, partition: int, start_offset: int) -> SharePartition:
        """The share-partition, created at ``start_offset`` (``share.auto.offset.reset``: latest is the
        partition's high watermark, earliest its log start) when the group first reads it."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None:
            sp = SharePartition(group_id, topic, partition, start_offset, self.lock_duration_ms,
                                self.delivery_count_limit, self.max_record_locks)
            self.partitions[key] = sp
        return sp

    def release_member(self, group_id: str, member_id: str, keys: Iterable[tuple[str, int]] | None = None) -> int:
        released = 0
        for (gid, topic, partition), sp in self.partitions.items():
            if gid == group_id and (keys is None or (topic, partition) in keys):
                released += sp.release_member(member_id)
        return released

    def drop_group(self, group_id: str, topic: str | None = None) -> None:
        """Forgets the group's share-partitions (of one topic, when named): the next access loads the durable
        state again (after AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups)."""
        for key in [k for k in self.partitions if k[0] == group_id and (topic is None or k[1] == topic)]:
            del self.partitions[key]

    def in_flight(self, group_id: str) -> int:
        return sum(sp.in_flight() for (gid, _, _), sp in self.partitions.items() if gid == group_id)

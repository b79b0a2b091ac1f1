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
flight (new records are not acquired beyond it; redeliveries still are), except that a batch_optimized ShareFetch,
as Kafka's, completes the record batch holding the last record the limit allows.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
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
    """One in-flight record's state (what ``SharePartition.records`` shows)."""

    state: int = AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0


@dataclass(slots=True)
class InFlightBatch:
    """In-flight offsets [first, last] in one state (Kafka's InFlightBatch): an acquisition, acknowledgement or
    release of part of a batch splits it, and neighbours in the same state merge again, so a share-partition's
    work is per batch, not per record."""

    first: int
    last: int
    state: int = AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0

    def joins(self, other: InFlightBatch) -> bool:
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.deadline_ms == other.deadline_ms)


_FIRST = attrgetter("first")


def _unreadable_at(unreadable: Sequence[tuple[int, int]], offset: int) -> tuple[int, int] | None:
    for lo, hi in unreadable:
        if lo <= offset <= hi:
            return lo, hi
    return None


@dataclass
class SharePartition:
    group_id: str
    topic: str
    partition: int
    start_offset: int
    lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    #: the next offset never acquired (the batches cover [start_offset, end_offset) without a gap)
    end_offset: int = -1
    #: the in-flight records as batches, in offset order
    batches: list[InFlightBatch] = field(default_factory=list)
    #: the topic's id (the durable state's key)
    topic_id: uuid.UUID | None = None
    #: changes that need writing, counted (bumped by every change of the durable state; klog.broker.share_state)
    changes: int = 0
    #: the count of changes the last successful write of the state carried (dirty while below ``changes``)
    persisted_changes: int = 0
    #: the write in flight, as (its task answering the error code, the count of changes it carries): one at a time
    #: per share-partition, so that every caller waits for the write that carries its change (the share-partition
    #: leader's persister write, klog.broker.handlers.share._persist)
    writing: tuple[Any, int] | None = field(default=None, repr=False, compare=False)
    snapshot_epoch: int = 0
    create_timestamp: int = 0
    #: the state epoch of the state it was loaded from (an AlterShareGroupOffsets starts a new one)
    state_epoch: int = 0
    #: no acquired record's lock expires before this (a lower bound): expire_locks skips the scan until then
    _next_deadline_ms: int = field(default=0, repr=False)
    #: no in-flight record below this offset is available (a lower bound): next_fetch_offset scans from here
    _scan_from: int = field(default=0, repr=False)
    #: called with (topic, partition) when records may have become acquirable (released, a lock expired, the
    #: in-flight window moved, the state replaced): the broker answers the ShareFetches waiting on the partition,
    #: as Kafka's DelayedShareFetch is completed by those events (appends wake them through the high watermark)
    on_acquirable: Callable[[str, int], None] | None = field(default=None, repr=False, compare=False)

    @property
    def dirty(self) -> bool:
        """Changed since the state was last written durably (a write in flight or failed leaves it dirty)."""
        return self.persisted_changes < self.changes

    @dirty.setter
    def dirty(self, value: bool) -> None:
        if value:
            self.changes += 1
        else:
            self.persisted_changes = self.changes

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset
        if self.end_offset > self.start_offset and not self.batches:
            self.batches.append(InFlightBatch(self.start_offset, self.end_offset - 1))

    @property
    def records(self) -> dict[int, InFlight]:
        """Every in-flight record by offset (a copy, for inspection: it costs one object per record)."""
        return {offset: InFlight(b.state, b.delivery_count, b.member_id, b.deadline_ms)
                for b in self.batches for offset in range(b.first, b.last + 1)}

    def load(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]]) -> None:
        """Replaces the state (a durable state loaded): ``batches`` as (first offset, last offset, state, delivery
        count), those below ``start_offset`` dropped; the offsets between them are available, never delivered."""
        self.start_offset = self.end_offset = start_offset
        self.batches = []
        for first, last, state, count in sorted(batches):
            first = max(first, self.end_offset)
            if last < first:
                continue
            if first > self.end_offset:
                self.batches.append(InFlightBatch(self.end_offset, first - 1))
            self.batches.append(InFlightBatch(first, last, state, count))
            self.end_offset = last + 1
        self._coalesce(0, len(self.batches))
        self.records_replaced()

    def skip_to(self, offset: int) -> None:
        """Forgets every in-flight record: the share-partition starts again at ``offset`` (or its end offset when
        later), as when retention removed records the group never finished."""
        self.start_offset = self.end_offset = max(self.end_offset, offset)
        self.batches = []
        self.records_replaced()

    def records_replaced(self) -> None:
        """Call after replacing ``batches`` from outside: the scan bounds start over."""
        self._next_deadline_ms = self._scan_from = 0
        self._acquirable()

    def next_lock_deadline_ms(self) -> int | None:
        """No acquired record's lock expires before this wall-clock time (a lower bound, exact right after
        ``expire_locks``); None when no record is acquired."""
        return None if self._next_deadline_ms >= _NO_DEADLINE else self._next_deadline_ms

    # -- acquisition ------------------------------------------------------------------------------------------
    def expire_locks(self, now_ms: int) -> int:
        """Releases the acquired records whose lock expired (each counted as a delivery); returns how many.
        Scans the in-flight batches only once the earliest lock may have expired (every fetch and acknowledgement
        calls this)."""
        if now_ms < self._next_deadline_ms:
            return 0
        expired = 0
        next_deadline = _NO_DEADLINE
        for b in self.batches:
            if b.state == ACQUIRED:
                if b.deadline_ms <= now_ms:
                    self._release(b)
                    expired += b.last - b.first + 1
                elif b.deadline_ms < next_deadline:
                    next_deadline = b.deadline_ms
        self._next_deadline_ms = next_deadline
        if expired:
            self._coalesce(0, len(self.batches))
            self._advance()
        return expired

    def next_fetch_offset(self, visible_end: int) -> int | None:
        """Where a fetch should start reading: the first available in-flight record, else the end offset when
        new records are visible and the in-flight limit allows; None when there is nothing to acquire."""
        lo = max(self.start_offset, self._scan_from)
        if lo < self.end_offset:
            batches = self.batches
            for k in range(self._index(lo), len(batches)):
                b = batches[k]
                if b.state == AVAILABLE:
                    self._scan_from = max(b.first, lo)
                    return self._scan_from
        self._scan_from = self.end_offset
        if self.end_offset < visible_end and self.end_offset - self.start_offset < self.max_record_locks:
            return self.end_offset
        return None

    def acquire(self, member_id: str, first: int, last: int, max_records: int, now_ms: int,
                unreadable: Sequence[tuple[int, int]] = (), past_lock_limit: bool = False
                ) -> list[tuple[int, int, int]]:
        """Acquires for ``member_id`` the available records among offsets [first, last] (the range the caller
        read), at most ``max_records``; returns the acquired runs (first offset, last offset, delivery count).
        Offsets of the ``unreadable`` ranges (inclusive; under ``share.isolation.level=read_committed``: control
        batches and the batches of aborted transactions) are archived instead, never delivered, as Kafka's
        SharePartition archives aborted transactional records. New records (from the end offset on) are
        acquired while fewer than ``max_record_locks`` records are in flight; with ``past_lock_limit``
        (batch_optimized: the caller ended ``last`` with the record batch holding the last record the limit
        allows, see ``lock_room``) through ``last``, as Kafka's SharePartition completes that batch."""
        if first < self.start_offset:
            first = self.start_offset
        # plan: the (first, last, acquire or archive) ranges, in offset order, from the state before any change
        plan: list[tuple[int, int, bool]] = []
        remaining = max_records

        def take(lo: int, hi: int) -> bool:
            """Plans the available offsets [lo, hi]; False once ``max_records`` stopped it."""
            nonlocal remaining
            while lo <= hi:
                if remaining <= 0:
                    return False
                skip = _unreadable_at(unreadable, lo) if unreadable else None
                if skip is not None:
                    end = min(skip[1], hi)
                    plan.append((lo, end, False))
                else:
                    end = min(hi, lo + remaining - 1, *(u - 1 for u, _ in unreadable if u > lo))
                    plan.append((lo, end, True))
                    remaining -= end - lo + 1
                lo = end + 1
            return True

        going = True
        top = min(last, self.end_offset - 1)
        if first <= top:
            batches = self.batches
            for k in range(self._index(first), len(batches)):
                b = batches[k]
                if b.first > top:
                    break
                if b.state == AVAILABLE and not take(max(b.first, first), min(b.last, top)):
                    going = False
                    break
        if going and last >= self.end_offset:
            new_first = max(first, self.end_offset)
            new_last = last if past_lock_limit else min(last, self.start_offset + self.max_record_locks - 1)
            planned = len(plan)
            take(new_first, new_last)
            if len(plan) > planned:   # the new offsets (and any skipped up to the first) join the in-flight ones
                self.batches.append(InFlightBatch(self.end_offset, plan[-1][1]))
                self.end_offset = plan[-1][1] + 1
        if not plan:
            return []
        deadline = now_ms + self.lock_duration_ms
        self._next_deadline_ms = min(self._next_deadline_ms, deadline)
        acquired: list[tuple[int, int, int]] = []
        archived = False
        for lo, hi, acquire in plan:
            i, j = self._split(lo), self._split(hi + 1)
            for b in self.batches[i:j]:
                if acquire:
                    b.state = ACQUIRED
                    b.delivery_count += 1
                    b.member_id = member_id
                    b.deadline_ms = deadline
                    if acquired and acquired[-1][1] == b.first - 1 and acquired[-1][2] == b.delivery_count:
                        acquired[-1] = (acquired[-1][0], b.last, b.delivery_count)
                    else:
                        acquired.append((b.first, b.last, b.delivery_count))
                else:
                    self._settle(b, ARCHIVED)
                    archived = True
        self._coalesce(self._index(plan[0][0]), self._index(plan[-1][1]) + 1)
        if archived:
            self.dirty = True
            self._advance()
        return acquired

    # -- acknowledgement --------------------------------------------------------------------------------------
    def check_acknowledgement(self, member_id: str, first: int, last: int, types: list[int]
                              ) -> tuple[int, list[int]] | None:
        """Raises ShareStateError unless ``member_id`` may acknowledge [first, last] with ``types``; returns the
        batch's part at or past the start offset as (first, types), None when it is all below it. As Kafka's
        SharePartition: offsets below the start offset are skipped (already acknowledged or archived), offsets
        past the acquired records are an invalid request, offsets not acquired by the member an invalid state."""
        if last < first or (len(types) != 1 and len(types) != last - first + 1) or not types:
            raise ShareStateError(ErrorCode.INVALID_REQUEST, "acknowledgement batch malformed")
        if any(t not in ACK_TYPES for t in types):
            raise ShareStateError(ErrorCode.INVALID_REQUEST, "unknown acknowledge type")
        if last < self.start_offset:
            return None
        if first < self.start_offset:
            if len(types) > 1:
                types = types[self.start_offset - first:]
            first = self.start_offset
        if self.start_offset < self.end_offset <= last:
            raise ShareStateError(ErrorCode.INVALID_REQUEST,
                                  "Batch record not found. The last offset in request is past acquired records.")
        bad = self._not_held(member_id, first, last)
        if bad is not None:
            raise ShareStateError(ErrorCode.INVALID_RECORD_STATE, f"offset {bad} is not acquired by member {member_id}")
        return first, types

    def acknowledge(self, member_id: str, first: int, last: int, types: list[int], now_ms: int) -> None:
        """Applies one acknowledgement batch: ``types`` has one type for every offset of [first, last], or a
        single type for all of them. Validates the whole batch before changing anything."""
        checked = self.check_acknowledgement(member_id, first, last, types)
        if checked is not None:
            self.apply_acknowledgement(checked[0], last, checked[1], now_ms)

    def apply_acknowledgement(self, first: int, last: int, types: list[int], now_ms: int) -> None:
        """Applies a batch :meth:`check_acknowledgement` accepted, as it returned it (first, types)."""
        if len(types) == 1:
            ranges = [(first, last, types[0])]
        else:   # runs of one type
            ranges = []
            for i, kind in enumerate(types):
                if ranges and ranges[-1][2] == kind:
                    ranges[-1] = (ranges[-1][0], first + i, kind)
                else:
                    ranges.append((first + i, first + i, kind))
        self.dirty = True
        for lo, hi, kind in ranges:
            i, j = self._split(lo), self._split(hi + 1)
            for b in self.batches[i:j]:
                if kind == ACCEPT:
                    self._settle(b, ACKNOWLEDGED)
                elif kind in (REJECT, GAP):
                    self._settle(b, ARCHIVED)
                elif kind == RELEASE:
                    self._release(b)
                elif kind == RENEW:
                    b.deadline_ms = now_ms + self.lock_duration_ms
        self._coalesce(self._index(first), self._index(last) + 1)
        self._advance()

    def release_member(self, member_id: str) -> int:
        """Releases every record ``member_id`` holds (its share session closed or it left the group)."""
        released = 0
        for b in self.batches:
            if b.state == ACQUIRED and b.member_id == member_id:
                self._release(b)
                released += b.last - b.first + 1
        if released:
            self._coalesce(0, len(self.batches))
            self._advance()
        return released

    # -- inspection -------------------------------------------------------------------------------------------
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def lock_room(self) -> int:
        """How many more records may be in flight (``max_record_locks`` minus the in-flight ones; <= 0: none)."""
        return self.max_record_locks - (self.end_offset - self.start_offset)

    def count(self, state: int) -> int:
        return sum(b.last - b.first + 1 for b in self.batches if b.state == state)

    # -- internals --------------------------------------------------------------------------------------------
    def _index(self, offset: int) -> int:
        """The index of the batch holding ``offset`` (an in-flight offset)."""
        return bisect_right(self.batches, offset, key=_FIRST) - 1

    def _split(self, offset: int) -> int:
        """Makes a batch start at ``offset`` (in [start_offset, end_offset]); returns its index (the number of
        batches for the end offset)."""
        if offset >= self.end_offset:
            return len(self.batches)
        i = self._index(offset)
        b = self.batches[i]
        if b.first == offset:
            return i
        self.batches.insert(i + 1, InFlightBatch(offset, b.last, b.state, b.delivery_count, b.member_id,
                                                 b.deadline_ms))
        b.last = offset - 1
        return i + 1

    def _coalesce(self, i: int, j: int) -> None:
        """Merges the batches of indexes [i, j) with their neighbours in the same state."""
        batches = self.batches
        k, lo = min(j, len(batches) - 1), max(i, 1)
        while k >= lo:   # downwards: a merge leaves the indexes below k in place
            prev, b = batches[k - 1], batches[k]
            if prev.joins(b):
                prev.last = b.last
                del batches[k]
            k -= 1

    def _not_held(self, member_id: str, first: int, last: int) -> int | None:
        """The first offset of [first, last] ``member_id`` does not hold acquired, or None."""
        if first < self.start_offset:
            return first
        if first < self.end_offset:
            batches = self.batches
            for k in range(self._index(first), len(batches)):
                b = batches[k]
                if b.first > last:
                    break
                if b.state != ACQUIRED or b.member_id != member_id:
                    return max(b.first, first)
        return None if last < self.end_offset else max(first, self.end_offset)

    def _settle(self, b: InFlightBatch, state: int) -> None:
        b.state, b.member_id, b.deadline_ms = state, "", 0

    def _release(self, b: InFlightBatch) -> None:
        self.dirty = True
        if b.delivery_count >= self.delivery_count_limit:
            self._settle(b, ARCHIVED)
        else:
            self._settle(b, AVAILABLE)
            self._scan_from = min(self._scan_from, b.first)
            self._acquirable()

    def _advance(self) -> None:
        batches = self.batches
        done = 0
        while done < len(batches) and batches[done].state in (ACKNOWLEDGED, ARCHIVED):
            done += 1
        if done:
            del batches[:done]
            self.start_offset = batches[0].first if batches else self.end_offset
            self._acquirable()   # the in-flight window moved: room for new records

    def _acquirable(self) -> None:
        if self.on_acquirable is not None:
            self.on_acquirable(self.topic, self.partition)


@dataclass
class ShareSession:
    """A share consumer's session on this broker (ShareFetch epoch 0 opens it, -1 closes it)."""

    group_id: str
    member_id: str
    #: the epoch the next request must carry
    epoch: int = 1
    #: (topic, partition) -> topic id of the partitions the session fetches
    partitions: dict[tuple[str, int], uuid.UUID] = field(default_factory=dict)
    #: the client connection that opened it: the session closes with it (Kafka 4.3's ShareSessionCache)
    connection_id: int | None = None


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
        #: each share-partition's ``on_acquirable`` (the broker answers the ShareFetches waiting on the partition)
        self.on_acquirable: Callable[[str, int], None] | None = None

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, partition))

    def get_or_init(self, group_id: str, topic: str, partition: int, start_offset: int) -> SharePartition:
        """The share-partition, created at ``start_offset`` (``share.auto.offset.reset``: latest is the
        partition's high watermark, earliest its log start) when the group first reads it."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None:
            sp = SharePartition(group_id, topic, partition, start_offset, self.lock_duration_ms,
                                self.delivery_count_limit, self.max_record_locks, on_acquirable=self.on_acquirable)
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

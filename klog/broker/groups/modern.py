"""What Kafka's KIP-848-style groups share (Kafka's ``ModernGroup``): the consumer groups of ``consumer.py`` and
the streams groups of ``streams.py`` both keep members with epochs, a group epoch and a target assignment
epoch, a session timer and a rebalance timer per member, and persist the same five kinds of records in
``__consumer_offsets`` (group metadata, target assignment metadata and members, member metadata, current member
assignment). Each subclass says what a member and an assignment are; the bookkeeping lives here once.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import records as R
from .errors import ErrorCode, GroupError, storage_error_code

if TYPE_CHECKING:  # pragma: no cover
    from klog.broker.coordinator.timer import Timer

log = logging.getLogger("klog.groups")

#: a member's epoch in a heartbeat that leaves the group (a static member: leaves for now, keeps its instance id)
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: a timer's fencing whose write failed is tried again this much later (Kafka's CoordinatorTimer retry backoff)
FENCE_RETRY_BACKOFF_MS = 500


def assignment_due(last_assignment_ms: int | None, interval_ms: int, now_ms: int) -> bool:
    """Whether a group may compute a new target assignment now (Kafka 4.3's canComputeNextTargetAssignment,
    KIP-1263): at most once per ``*.assignment.interval.ms`` after the last one; a group without one (a new
    group, or a timestamp of 0 or below as a migrated group's) or an interval of 0 may at once."""
    if last_assignment_ms is None or last_assignment_ms <= 0 or interval_ms == 0:
        return True
    return now_ms >= last_assignment_ms + interval_ms


@dataclass(frozen=True)
class GroupRecordTypes:
    """The ``__consumer_offsets`` record types of one kind of group, in Kafka's tombstone order."""

    metadata: int
    target_assignment_metadata: int
    target_assignment_member: int
    member_metadata: int
    current_member_assignment: int
    #: the group-level record that is neither metadata nor target metadata (partition metadata, topology)
    group_extra: int

    def member_tombstones(self, group_id: str, member_id: str) -> list[tuple[bytes, Any]]:
        """Kafka's order: current assignment, target assignment, member metadata."""
        key = {"group_id": group_id, "member_id": member_id}
        return [R.consumer_group_record(t, key, None) for t in
                (self.current_member_assignment, self.target_assignment_member, self.member_metadata)]

    def group_tombstones(self, group_id: str) -> list[tuple[bytes, Any]]:
        key = {"group_id": group_id}
        return [R.consumer_group_record(t, key, None) for t in
                (self.target_assignment_metadata, self.group_extra, self.metadata)]


class ModernMember(Protocol):
    """The fields every modern member has (ConsumerMember and StreamsMember are dataclasses with these)."""

    member_id: str
    member_epoch: int
    previous_member_epoch: int
    rebalance_timeout_ms: int
    state: Any
    assigned: Any
    pending_revocation: Any


M = TypeVar("M", bound=ModernMember)


class ModernGroup(Generic[M]):
    """A group whose coordinator owns the assignment: members, the group epoch and the assignment epoch."""

    group_type = ""
    protocol_type = ""
    record_types: GroupRecordTypes
    #: the group and assignment epochs of a new group (before any epoch record)
    initial_epoch = 0

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = self.initial_epoch
        self.assignment_epoch = self.initial_epoch
        self.members: dict[str, M] = {}
        self.target: dict[str, Any] = {}
        self.session_keys: dict[str, int] = {}
        #: when the target assignment was last computed (wall-clock ms, replayed from its metadata record's
        #: assignment_timestamp as Kafka does); the next waits for *.assignment.interval.ms (KIP-1263)
        self.last_assignment_ms: int | None = None

    #: indexes derived from the members (rebuilt by ``put_member`` on ``restore``, not copied by ``snapshot``)
    derived_indexes: tuple[str, ...] = ()

    # -- the state before a change whose records may not be written (Kafka's revertLastWrittenOffset) -----------
    def snapshot(self) -> dict[str, Any]:
        """What ``restore`` brings back if a heartbeat's records are refused: every attribute, the dicts copied
        shallowly (members and targets are replaced by a heartbeat, never changed in place: the copies share
        them), but the timers' keys (timers change only once the records are written) and the derived indexes.
        O(members) dict copies, no deep copy: a heartbeat already walks the members."""
        skip = ("session_keys", *self.derived_indexes)
        return {k: (dict(v) if type(v) is dict else v) for k, v in vars(self).items() if k not in skip}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """The group as ``snapshot`` saw it (its derived indexes rebuilt from its members)."""
        members: dict[str, M] = snapshot["members"]
        for k, v in snapshot.items():
            setattr(self, k, dict(v) if type(v) is dict else v)
        for name in self.derived_indexes:
            setattr(self, name, {})
        self.members = {}
        for member in members.values():
            self.put_member(member)

    # -- state ------------------------------------------------------------------------------------------------
    def state(self) -> Any:
        raise NotImplementedError

    def state_name(self) -> str:
        return str(self.state().value)

    def state_lower(self) -> str:
        return self.state_name().lower()

    def is_empty(self) -> bool:
        return not self.members

    def offset_expiration_base(self) -> Callable[[Any], int]:
        return lambda om: om.commit_timestamp

    # -- members ----------------------------------------------------------------------------------------------
    def put_member(self, member: M) -> None:
        raise NotImplementedError

    def remove_member(self, member_id: str) -> M | None:
        raise NotImplementedError

    # -- offsets and deletion (the Group interface shared with the other group types) --------------------------
    def stale_epoch_error(self, member: M) -> int:
        """The error for an OffsetFetch with another epoch than the member's."""
        return ErrorCode.STALE_MEMBER_EPOCH

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            raise GroupError(self.stale_epoch_error(member))

    def validate_offset_delete(self) -> None:
        return None

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def tombstones(self) -> list[tuple[bytes, Any]]:
        """Kafka's createGroupTombstoneRecords: every member's three records, then the group's."""
        out: list[tuple[bytes, Any]] = []
        for mid in self.members:
            out.extend(self.record_types.member_tombstones(self.group_id, mid))
        out.extend(self.record_types.group_tombstones(self.group_id))
        return out


G = TypeVar("G", bound=ModernGroup[Any])
T = TypeVar("T")


class ModernGroupManager(Generic[G, M]):
    """The heartbeat-independent half of a modern group's coordinator logic: writing its records, the session
    and rebalance timers of its members, forgetting a group, and replaying its records when the coordinator
    loads a partition."""

    group_class: type[G]
    #: the members' state enum (Kafka's MemberState), with an UNKNOWN member for a state this build does not know
    member_states: Any
    #: in log lines and timer keys: "consumer", "streams"
    kind = ""

    def __init__(self, groups: dict[str, Any], timer: Timer, write: Callable[[str, list], None],
                 forget_group: Callable[[Any], None], config: Any,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        """``config``: the broker's; ``group_configs(group_id)``: the group's dynamic configs (its GROUP config
        resource), which win over the broker's ``group.*`` synonyms (None: the broker's only)."""
        self.groups = groups
        self.timer = timer
        self._write = write
        self.forget_group = forget_group
        self.config = config
        self.group_configs: Callable[[str], Mapping[str, str]] = group_configs or (lambda group_id: {})

    def group_int(self, group_id: str, name: str) -> int:
        """An int setting of a group (``consumer.session.timeout.ms``, ``share.assignment.interval.ms``, ...): its
        own group config, else the broker's ``group.<name>``, as Kafka's GroupMetadataManager reads them."""
        value = self.group_configs(group_id).get(name)
        return int(value if value is not None else self.config["group." + name])

    def write(self, group_id: str, records: list) -> None:
        try:
            self._write(group_id, records)
        except Exception as exc:  # noqa: BLE001 - a failed append is answered with an error code
            log.warning("group %s: writing %s group records failed: %s", group_id, self.kind, exc)
            raise GroupError(storage_error_code(exc), f"writing group state failed: {exc}") from exc

    def change_and_write(self, group: G, created: bool, records: list[Any],
                         change: Callable[[list[Callable[[], None]]], T], converted_from: Any = None) -> T:
        """Run ``change`` (it changes ``group``, appends to ``records`` what to write and to the list it is given the
        timer moves to make once written), then write ``records``. A refused write, or an error half-way, restores
        the group as it was (Kafka's CoordinatorRuntime reverts to the last written offset) and moves no timer.
        ``converted_from``: the classic group ``group`` took the place of (its tombstone in ``records``): a refused
        write puts it back (``undo_conversion``); it is forgotten only once written."""
        snapshot = group.snapshot()
        timers: list[Callable[[], None]] = []
        try:
            result = change(timers)
            self.write(group.group_id, records)
        except Exception:
            if converted_from is not None:
                self.undo_conversion(group, converted_from)
            else:
                self.rollback(group, snapshot, created)
            raise
        if converted_from is not None:
            self.forget_group(converted_from)
        for op in timers:
            op()
        return result

    def undo_conversion(self, group: G, converted_from: Any) -> None:
        """A conversion whose records were not written (or that failed half-way): ``group`` is forgotten, its
        timers with it, and the classic group it replaced is back in the registry as it was: the conversion changed
        nothing of it, its members' timers ran on (Kafka's failed write reverts the replay of its tombstone)."""
        self.forget_group(group)
        self.groups[group.group_id] = converted_from

    def rollback(self, group: G, snapshot: dict[str, Any], created: bool) -> None:
        """A change of ``group`` whose records were not written (or that failed half-way) is undone: the group is
        restored to ``snapshot`` (taken before the change; Kafka's CoordinatorRuntime reverts its state to the last
        written offset), a group the change ``created`` leaves the registry, and every restored member keeps a
        session timer (the change armed none: timers move only after the write)."""
        group.restore(snapshot)
        if created and not group.members:
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            self.forget(group)
            return
        for mid in [mid for mid in group.session_keys if mid not in group.members]:
            self.cancel_timers(group, mid)
        for mid in group.members:
            if mid not in group.session_keys:
                self.schedule_session_timeout(group, mid)

    # -- hooks --------------------------------------------------------------------------------------------------
    def fence_member(self, group: G, member: M) -> None:
        raise NotImplementedError

    def member_session_timeout_ms(self, group: G, member: M | None) -> int:
        raise NotImplementedError

    def rebalance_timeout_default_ms(self, group: G) -> int:
        """A member without a rebalance timeout gets this one (the session timeout)."""
        return self.member_session_timeout_ms(group, None)

    def still_revoking(self, member: M, epoch: int) -> bool:
        """Whether a member whose rebalance timer was set at ``epoch`` has still not revoked what it must."""
        return member.member_epoch == epoch

    # -- timers -------------------------------------------------------------------------------------------------
    def _rebalance_timer(self, group_id: str, member_id: str) -> tuple[str, str, str]:
        return (f"{self.kind}-rebalance", group_id, member_id)

    def _fence_on_timeout(self, group: G, member: M) -> bool:
        """A timer's fencing; False: its write failed (logged; the member stays, and the caller's timer tries
        again after FENCE_RETRY_BACKOFF_MS, as Kafka's timer operations scheduled with retry)."""
        try:
            self.fence_member(group, member)
        except GroupError as exc:
            log.warning("group %s: fencing %s member %s failed: %s; trying again in %d ms", group.group_id,
                        self.kind, member.member_id, exc.message, FENCE_RETRY_BACKOFF_MS)
            return False
        return True

    def schedule_session_timeout(self, group: G, member_id: str) -> None:
        key = group.session_keys.get(member_id)
        if key is None:
            gid, group_class = group.group_id, self.group_class

            def expire() -> None:
                g = self.groups.get(gid)
                if isinstance(g, group_class):
                    if g.session_keys.get(member_id) == own:
                        del g.session_keys[member_id]
                    m = g.members.get(member_id)
                    if m is not None:
                        log.info("group %s: %s member %s session expired; fencing it", gid, self.kind, member_id)
                        if not self._fence_on_timeout(g, m):
                            if g.members.get(member_id) is not None and member_id not in g.session_keys:
                                g.session_keys[member_id] = own   # the member stays: its timer tries again
                                self.timer.arm(own, FENCE_RETRY_BACKOFF_MS)
                                return
                self.timer.release(own)

            own = self.timer.register(expire)
            group.session_keys[member_id] = own
            key = own
        self.timer.arm(key, self.member_session_timeout_ms(group, group.members.get(member_id)))

    def schedule_rebalance_timeout(self, group: G, member: M) -> None:
        gid, mid, epoch, group_class = group.group_id, member.member_id, member.member_epoch, self.group_class
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else \
            self.rebalance_timeout_default_ms(group)

        def expire() -> None:
            g = self.groups.get(gid)
            if isinstance(g, group_class):
                m = g.members.get(mid)
                if m is not None and self.still_revoking(m, epoch):
                    log.info("group %s: %s member %s did not revoke what it must within %d ms; fencing it", gid,
                             self.kind, mid, timeout)
                    if not self._fence_on_timeout(g, m) and not self.timer.is_scheduled(name):
                        self.timer.schedule(name, FENCE_RETRY_BACKOFF_MS, expire)   # the member stays: again

        name = self._rebalance_timer(gid, mid)
        self.timer.schedule(name, timeout, expire)

    def cancel_rebalance_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(self._rebalance_timer(group_id, member_id))

    def cancel_timers(self, group: G, member_id: str) -> None:
        key = group.session_keys.pop(member_id, None)
        if key is not None:
            self.timer.release(key)
        self.cancel_rebalance_timeout(group.group_id, member_id)

    def forget(self, group: G) -> None:
        for mid in list(group.session_keys):
            self.cancel_timers(group, mid)

    # -- loading ------------------------------------------------------------------------------------------------
    def apply_group_metadata(self, group: G, value: dict[str, Any]) -> None:
        group.group_epoch = value["epoch"]

    def new_member(self, member_id: str) -> M:
        raise NotImplementedError

    def target_from_record(self, value: dict[str, Any]) -> Any:
        raise NotImplementedError

    def apply_member_metadata(self, member: M, value: dict[str, Any]) -> None:
        raise NotImplementedError

    def empty_assignment(self) -> tuple[Any, Any]:
        """(assigned, pending revocation) of a member that holds nothing."""
        raise NotImplementedError

    def assignment_from_record(self, value: dict[str, Any]) -> tuple[Any, Any]:
        """(assigned, pending revocation) from a current member assignment record."""
        raise NotImplementedError

    def apply_member_assignment(self, member: M, value: dict[str, Any] | None) -> None:
        """The member's epochs, state and assignment from its record (None: its assignment cleared)."""
        if value is None:
            member.assigned, member.pending_revocation = self.empty_assignment()
            return
        member.member_epoch = value["member_epoch"]
        member.previous_member_epoch = value["previous_member_epoch"]
        try:
            member.state = self.member_states(value["state"])
        except ValueError:
            member.state = self.member_states.UNKNOWN
        member.assigned, member.pending_revocation = self.assignment_from_record(value)

    def replay_other(self, group: G, rec: R.CoordinatorRecord) -> None:
        """A record of this kind of group the common replay does not handle (the group-level extra one)."""

    def replay_one(self, rec: R.CoordinatorRecord) -> None:
        """Applies one of this kind of group's records, in log order (later records win; tombstones delete)."""
        types = self.group_class.record_types
        gid = rec.key["group_id"]
        group = self.groups.get(gid)
        if rec.value is None and not isinstance(group, self.group_class):
            return
        if not isinstance(group, self.group_class):
            group = self.group_class(gid)
            self.groups[gid] = group
        value = rec.value
        if rec.type == types.metadata:
            if value is None:
                del self.groups[gid]
            else:
                self.apply_group_metadata(group, value)
        elif rec.type == types.target_assignment_metadata:
            group.assignment_epoch = group.initial_epoch if value is None else value["assignment_epoch"]
            group.last_assignment_ms = None if value is None else value.get("assignment_timestamp")
        elif rec.type == types.target_assignment_member:
            mid = rec.key["member_id"]
            if value is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = self.target_from_record(value)
        elif rec.type == types.member_metadata:
            mid = rec.key["member_id"]
            if value is None:
                group.remove_member(mid)
                return
            member = copy.deepcopy(group.members.get(mid)) or self.new_member(mid)
            self.apply_member_metadata(member, value)
            group.put_member(member)
        elif rec.type == types.current_member_assignment:
            mid = rec.key["member_id"]
            existing = group.members.get(mid)
            if value is None and existing is None:
                return
            member = copy.deepcopy(existing) or self.new_member(mid)
            self.apply_member_assignment(member, value)
            group.put_member(member)
        else:
            self.replay_other(group, rec)


def metadata_hash(topics: Mapping[str, int]) -> int:
    """A signed 64-bit digest of the topology's topics and their partition counts: a change starts a new epoch."""
    digest = hashlib.sha256(repr(sorted(topics.items())).encode()).digest()
    return int(struct.unpack(">q", digest[:8])[0])

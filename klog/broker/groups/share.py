"""Share groups (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77) as Kafka 4.x answers them.

Membership follows KIP-848's heartbeat (member epoch 0 joins with a client-generated member id, -1 leaves, the
session times out after ``group.share.session.timeout.ms`` without a heartbeat). The assignment is computed on
the server by Kafka's ``SimpleAssignor`` (:mod:`.share_assignor`): partitions split among the members, balanced,
shared when members outnumber partitions (the share-partition hands each record to one of them), sticky to the
previous target across epochs. A member joining, leaving or changing its subscription,
and a subscribed topic's partition count changing, bump the group epoch; the next heartbeat computes the target
assignment at that epoch (at most once per ``share.assignment.interval.ms``, KIP-1263) and each member moves to it
at its own next heartbeat (no revocation phase, as Kafka's: a share-partition tolerates two members reading it while the one losing it has not heartbeated yet), so the group is Stable whenever it has members.

The membership is persisted in ``__consumer_offsets`` as Kafka 4.x's group coordinator writes it (records 10-15:
ShareGroupMetadata, ShareGroupMemberMetadata, ShareGroupTargetAssignmentMetadata/Member,
ShareGroupCurrentMemberAssignment, ShareGroupStatePartitionMetadata) before a heartbeat is answered, and replayed
by the broker that takes the group's ``__consumer_offsets`` partition over: after a coordinator failover the
group keeps its epoch, members and assignments, and its members go on heartbeating with their epochs. The
records' bookkeeping (tombstones, writing, session timers, replay) is :mod:`.modern`'s, shared with consumer and
streams groups.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from klog.broker.coordinator.timer import Timer
from klog.protocol import Struct

from . import records as R
from . import share_assignor
from .errors import ErrorCode, GroupError
from .modern import GroupRecordTypes, ModernGroup, ModernGroupManager, assignment_due, metadata_hash

log = logging.getLogger("klog.groups.share")

ASSIGNOR_NAME = "simple"
#: the longest member id ShareGroupHeartbeat accepts (a UUID's string), as Kafka 4.3
MAX_MEMBER_ID_LENGTH = 36
#: ShareGroupCurrentMemberAssignmentValue.State of a member at its target assignment (Kafka's MemberState.STABLE)
MEMBER_STATE_STABLE = 0

#: topic id -> partitions
Assignment = dict[uuid.UUID, list[int]]


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    #: topic id -> partitions (its current assignment)
    assigned: Assignment = field(default_factory=dict)
    #: ModernMember's fields a share member keeps constant: nothing is owned exclusively, so nothing is revoked
    #: (no rebalance timeout, no partitions pending revocation) and a member is always at its target (STABLE)
    rebalance_timeout_ms: int = -1
    state: int = MEMBER_STATE_STABLE
    pending_revocation: Assignment = field(default_factory=dict)

    def metadata_value(self) -> dict[str, Any]:
        return {"rack_id": self.rack_id, "client_id": self.client_id, "client_host": self.client_host,
                "subscribed_topic_names": list(self.subscribed_topic_names)}


def _assignment_value(parts: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]


def _assignment_of(items: list[dict[str, Any]]) -> Assignment:
    return {i["topic_id"]: sorted(i["partitions"]) for i in items}


class ShareGroup(ModernGroup[ShareMember]):
    group_type = "share"
    protocol_type = "share"
    record_types = GroupRecordTypes(
        metadata=R.SHARE_GROUP_METADATA, target_assignment_metadata=R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
        target_assignment_member=R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, member_metadata=R.SHARE_GROUP_MEMBER_METADATA,
        current_member_assignment=R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        group_extra=R.SHARE_GROUP_STATE_PARTITION_METADATA)
    #: Kafka 4.3.1's ModernGroup starts at group epoch 1 and target assignment epoch 1: the first member's join
    #: bumps it to 2 (tests/test_share_groups.py::test_share_group_epochs_start_as_kafkas)
    initial_epoch = 1

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        #: a digest of the subscribed topics' ids and partition counts (a change bumps the group epoch)
        self.metadata_hash = 0
        #: member id -> its target assignment at ``assignment_epoch``
        self.target: dict[str, Assignment] = {}
        #: topic id -> the partitions the group has share state for (assigned to a member, or offsets altered)
        self.initialized: dict[uuid.UUID, set[int]] = {}
        #: topic id -> name, of the topics in ``initialized`` (ShareGroupStatePartitionMetadata names them)
        self.initialized_names: dict[uuid.UUID, str] = {}

    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    def put_member(self, member: ShareMember) -> None:
        self.members[member.member_id] = member

    def remove_member(self, member_id: str) -> ShareMember | None:
        return self.members.pop(member_id, None)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def offset_expiration_base(self) -> None:  # type: ignore[override]
        return None   # share groups keep no committed offsets in __consumer_offsets

    def validate_offset_commit(self, *args: Any, **kwargs: Any) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group.")

    def validate_offset_fetch(self, *args: Any, **kwargs: Any) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group.")

    def validate_offset_delete(self) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)

    def metadata_record(self, epoch: int | None = None, hash_: int | None = None) -> tuple[bytes, bytes | None]:
        return R.consumer_group_record(R.SHARE_GROUP_METADATA, {"group_id": self.group_id}, {
            "epoch": self.group_epoch if epoch is None else epoch,
            "metadata_hash": self.metadata_hash if hash_ is None else hash_})

    def state_partition_record(self, initialized: Mapping[uuid.UUID, set[int]],
                               names: Mapping[uuid.UUID, str]) -> tuple[bytes, bytes | None]:
        return R.consumer_group_record(R.SHARE_GROUP_STATE_PARTITION_METADATA, {"group_id": self.group_id}, {
            "initializing_topics": [],
            "initialized_topics": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                   for t, ps in sorted(initialized.items(), key=lambda kv: str(kv[0])) if ps],
            "deleting_topics": []})


class ShareGroupManager(ModernGroupManager[ShareGroup, ShareMember]):
    """Kafka's share-group membership over the shared group registry."""

    group_class = ShareGroup
    kind = "share"

    def __init__(self, groups: dict[str, Any], timer: Timer, config: Any, catalog: Callable[[], Any],
                 group_configs: Callable[[str], Mapping[str, str]] | None = None,
                 write: Callable[[str, list[tuple[bytes, bytes | None]]], None] | None = None) -> None:
        """``write``: appends a group's records to its ``__consumer_offsets`` partition (None: kept in memory)."""
        super().__init__(groups, timer, write or (lambda group_id, records: None), lambda group: None, config,
                         group_configs)
        self.catalog = catalog
        self.max_size = int(config["group.share.max.size"])

    def write(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            super().write(group_id, records)

    # -- ModernGroupManager's hooks -----------------------------------------------------------------------------
    def fence_member(self, group: ShareGroup, member: ShareMember) -> None:
        log.info("share group %s: member %s session expired; removing it", group.group_id, member.member_id)
        self.remove_member(group, member.member_id)

    def member_session_timeout_ms(self, group: ShareGroup, member: ShareMember | None) -> int:
        return self.group_int(group.group_id, "share.session.timeout.ms")

    def apply_group_metadata(self, group: ShareGroup, value: dict[str, Any]) -> None:
        group.group_epoch, group.metadata_hash = value["epoch"], value["metadata_hash"]

    def new_member(self, member_id: str) -> ShareMember:
        return ShareMember(member_id)

    def target_from_record(self, value: dict[str, Any]) -> Assignment:
        return _assignment_of(value["topic_partitions"])

    def apply_member_metadata(self, member: ShareMember, value: dict[str, Any]) -> None:
        member.rack_id, member.client_id, member.client_host = value["rack_id"], value["client_id"], \
            value["client_host"]
        member.subscribed_topic_names = sorted(value["subscribed_topic_names"])

    def apply_member_assignment(self, member: ShareMember, value: dict[str, Any] | None) -> None:
        if value is None:
            member.assigned = {}
            return
        member.member_epoch, member.previous_member_epoch = value["member_epoch"], value["previous_member_epoch"]
        member.assigned = _assignment_of(value["assigned_partitions"])

    def replay_other(self, group: ShareGroup, rec: R.CoordinatorRecord) -> None:
        """ShareGroupStatePartitionMetadata: the share-partitions the group has state for."""
        group.initialized, group.initialized_names = {}, {}
        for t in [] if rec.value is None else rec.value["initialized_topics"]:
            group.initialized[t["topic_id"]] = set(t["partitions"])
            group.initialized_names[t["topic_id"]] = t["topic_name"]

    # -- ShareGroupHeartbeat ------------------------------------------------------------------------------------
    def heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        try:
            return self._heartbeat(request, client_id, client_host)
        except GroupError as e:
            return Struct(throttle_time_ms=0, error_code=int(e.code), error_message=e.message,
                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    def _heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        # Kafka 4.x: the client generates its member id, a UUID's string (KIP-1082); Kafka 4.3 refuses an empty or
        # longer one first, with no message (its length counted in Java chars, UTF-16 code units)
        if not member_id or len(member_id.encode("utf-16-le")) // 2 > MAX_MEMBER_ID_LENGTH:
            raise GroupError(ErrorCode.INVALID_REQUEST)
        if not group_id:
            raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if request.rack_id is not None and request.rack_id == "":
            raise GroupError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0 and not request.subscribed_topic_names:
            raise GroupError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if epoch < -1:
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):   # as Kafka 4.3: not found as a share group
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group is None and epoch != 0:   # only a first heartbeat creates the group
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} not found." if epoch == -1 else f"Share group {group_id} not found.")
        if epoch == -1:
            return self._leave(group, group_id, member_id)
        records: list[tuple[bytes, bytes | None]] = []
        if group is None:
            group = ShareGroup(group_id)
        member = group.members.get(member_id)
        if epoch == 0:
            if member is None:
                if len(group.members) >= self.max_size:
                    raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of {self.max_size} members.")
                member = ShareMember(member_id)
        else:
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, _unknown_member(member_id, group_id))
            # Kafka's throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted too (the answer that
            # carried the last bump may have been lost, e.g. with the coordinator that sent it)
            if epoch > member.member_epoch:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a greater member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.member_epoch}). The member must abandon all "
                                 f"its partitions and rejoin.")
            if epoch < member.member_epoch and epoch != member.previous_member_epoch:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a smaller member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.member_epoch}), and it does not match the "
                                 f"previous member epoch ({member.previous_member_epoch}). The member must abandon "
                                 f"all its partitions and rejoin.")
        # 1. the member's metadata
        updated = replace(member, client_id=client_id, client_host=client_host,
                          subscribed_topic_names=list(member.subscribed_topic_names), assigned=dict(member.assigned))
        if request.rack_id is not None:
            updated.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            updated.subscribed_topic_names = sorted(set(request.subscribed_topic_names))
        new_member = member_id not in group.members
        bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names
        if new_member or updated.metadata_value() != member.metadata_value():
            records.append(R.consumer_group_record(R.SHARE_GROUP_MEMBER_METADATA,
                                                   {"group_id": group_id, "member_id": member_id},
                                                   updated.metadata_value()))
        members = {**group.members, member_id: updated}
        # 2. the group epoch: bumped by a subscription change, or by the subscribed topics' metadata changing
        catalog = self.catalog()
        topics = {n: catalog.by_name[n] for m in members.values() for n in m.subscribed_topic_names
                  if n in catalog.by_name}
        new_hash = metadata_hash({f"{tid}/{name}": count for name, (tid, count) in topics.items()})
        group_epoch = group.group_epoch
        if bump or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(group.metadata_record(group_epoch, new_hash))
        # 3. the target assignment at the group epoch: Kafka's simple assignor, sticky to the previous target; at
        # most once per share.assignment.interval.ms (KIP-1263): meanwhile members stay at the previous target
        target = dict(group.target)
        assignment_epoch = group.assignment_epoch
        now = self.timer.now()
        interval = self.group_int(group_id, "share.assignment.interval.ms")
        assigning = group_epoch > assignment_epoch and assignment_due(group.last_assignment_ms, interval, now)
        if assigning:
            computed = share_assignor.assign(
                {mid: {topics[n][0] for n in m.subscribed_topic_names if n in topics} for mid, m in members.items()},
                {tid: count for tid, count in topics.values()}, group.target)
            for mid, wanted in computed.items():
                if target.get(mid) != wanted or mid not in group.target:
                    target[mid] = wanted
                    records.append(R.consumer_group_record(R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                                           {"group_id": group_id, "member_id": mid},
                                                           {"topic_partitions": _assignment_value(wanted)}))
            assignment_epoch = group_epoch
            records.append(R.consumer_group_record(R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": group_id},
                                                   {"assignment_epoch": assignment_epoch,
                                                    "assignment_timestamp": now}))
        # 4. the member moves to its target assignment (nothing to revoke: it is immediate)
        mine = target.get(member_id, {})
        send_assignment = epoch == 0 or request.subscribed_topic_names is not None
        if updated.member_epoch != assignment_epoch or updated.assigned != mine:
            updated.previous_member_epoch = updated.member_epoch
            updated.member_epoch = assignment_epoch
            updated.assigned = dict(mine)
            records.append(R.consumer_group_record(R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                                   {"group_id": group_id, "member_id": member_id},
                                                   {"member_epoch": updated.member_epoch,
                                                    "previous_member_epoch": updated.previous_member_epoch,
                                                    "state": MEMBER_STATE_STABLE,
                                                    "assigned_partitions": _assignment_value(updated.assigned)}))
            send_assignment = True
        if epoch != updated.member_epoch:   # e.g. a member that missed the answer carrying its last epoch
            send_assignment = True
        # 5. the share-partitions the group now has state for
        initialized = {t: set(ps) for t, ps in group.initialized.items()}
        names = dict(group.initialized_names)
        for tid, parts in mine.items():
            if not set(parts) <= initialized.get(tid, set()):
                initialized.setdefault(tid, set()).update(parts)
        if initialized != group.initialized:
            names.update({tid: catalog.by_id.get(tid, names.get(tid, "")) for tid in initialized})
            records.append(group.state_partition_record(initialized, names))
        self.write(group_id, records)
        # written (the answer waits for the ISR to have them): apply
        self.groups.setdefault(group_id, group)
        group.members[member_id] = updated
        group.group_epoch, group.metadata_hash = group_epoch, new_hash
        group.target, group.assignment_epoch = target, assignment_epoch
        if assigning:
            group.last_assignment_ms = now
        group.initialized, group.initialized_names = initialized, names
        self.schedule_session_timeout(group, member_id)
        assignment = None
        if send_assignment:
            assignment = Struct(topic_partitions=[Struct(topic_id=t, partitions=ps)
                                                  for t, ps in sorted(mine.items(), key=lambda kv: str(kv[0]))])
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                      member_id=member_id, member_epoch=updated.member_epoch,
                      heartbeat_interval_ms=self.group_int(group_id, "share.heartbeat.interval.ms"),
                      assignment=assignment)

    def _leave(self, group: ShareGroup | None, group_id: str, member_id: str) -> Struct:
        if group is None or member_id not in group.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, _unknown_member(member_id, group_id))
        self.remove_member(group, member_id)
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
                      member_epoch=-1, heartbeat_interval_ms=0, assignment=None)

    def remove_member(self, group: ShareGroup, member_id: str) -> None:
        """The member leaves (or its session expired): its records' tombstones and a new group epoch. The records
        it acquired stay acquired by it (it may still acknowledge them) until its share session closes or their
        locks expire, as Kafka 4.3's partition leaders keep them."""
        if member_id not in group.members:
            return
        self.write(group.group_id, [*group.record_types.member_tombstones(group.group_id, member_id),
                                    group.metadata_record(group.group_epoch + 1)])
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self.cancel_timers(group, member_id)
        group.group_epoch += 1

    def record_initialized(self, group: ShareGroup, initialized: Mapping[uuid.UUID, set[int]],
                           *, created: bool = False) -> None:
        """The group's share-partitions with state changed (offsets altered or deleted): written, then applied.
        ``created``: the group is new (AlterShareGroupOffsets before any member): its epoch record goes first."""
        names = dict(group.initialized_names)
        names.update({tid: self.catalog().by_id.get(tid, names.get(tid, "")) for tid in initialized})
        records = [group.metadata_record()] if created else []
        records.append(group.state_partition_record(initialized, names))
        self.write(group.group_id, records)
        group.initialized = {t: set(ps) for t, ps in initialized.items() if ps}
        group.initialized_names = {t: n for t, n in names.items() if t in group.initialized}

    # -- loading ----------------------------------------------------------------------------------------------
    def on_loaded(self, group: ShareGroup) -> None:
        """A group replayed by a new coordinator: its members' sessions start now."""
        for member_id in group.members:
            self.schedule_session_timeout(group, member_id)

    # -- ShareGroupDescribe -------------------------------------------------------------------------------------
    def describe(self, group_id: str) -> Struct:
        group = self.groups.get(group_id)
        if not group_id:   # Kafka 4.3 answers no message
            return _described_error(group_id, ErrorCode.INVALID_GROUP_ID, None)
        if group is None:
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        names = self.catalog().by_id
        members = [Struct(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                          client_id=m.client_id, client_host=m.client_host,
                          subscribed_topic_names=list(m.subscribed_topic_names),
                          assignment=Struct(topic_partitions=[
                              Struct(topic_id=t, topic_name=names.get(t, ""), partitions=ps)
                              for t, ps in sorted(m.assigned.items(), key=lambda kv: names.get(kv[0], ""))]))
                   for m in group.members.values()]
        return Struct(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                      group_state=group.state_name(), group_epoch=group.group_epoch,
                      assignment_epoch=group.assignment_epoch, assignor_name=ASSIGNOR_NAME, members=members,
                      authorized_operations=-2147483648)


def _unknown_member(member_id: str, group_id: str) -> str:
    return f"Member {member_id} is not a member of group {group_id}."


def _described_error(group_id: str, code: int, message: str | None) -> Struct:
    return Struct(error_code=int(code), error_message=message, group_id=group_id, group_state="", group_epoch=0,
                  assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2147483648)

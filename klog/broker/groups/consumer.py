"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat / ConsumerGroupDescribe) as Kafka 4.x's
group coordinator runs it: the coordinator owns the assignment.

Each heartbeat may update the member's subscription; a changed subscription (or changed topic metadata)
bumps the *group epoch*; a group epoch above the *assignment epoch* makes the server-side assignor compute a
new *target assignment*; each member then reconciles towards its target one heartbeat at a time: it first
revokes partitions it must give up (state UNREVOKED_PARTITIONS, epoch unchanged), then moves to the target
epoch and receives the new partitions once their previous owners released them (UNRELEASED_PARTITIONS
until then). Everything is persisted as Kafka's ConsumerGroup* records.
"""

from __future__ import annotations

import copy
import enum
import functools
import logging
import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from klog.protocol import Struct

from . import records as R
from .assignors import ASSIGNORS, MemberSpec
from .errors import ErrorCode, GroupError
from .modern import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, GroupRecordTypes, ModernGroup, \
    ModernGroupManager, assignment_due

if TYPE_CHECKING:  # pragma: no cover
    from klog.broker.coordinator.timer import Timer

log = logging.getLogger("klog.groups")

#: ConsumerGroupDescribe v1's MemberType, as Kafka's ConsumerGroupMember sets it: 0 a classic-protocol member
#: (JoinGroup/SyncGroup/Heartbeat inside a consumer group, see ``migration.py``), 1 a consumer-protocol one.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1
TopicPartitions = dict[uuid.UUID, set[int]]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass
class ClassicMemberMetadata:
    """What a classic-protocol member of a consumer group joined with (Kafka's ClassicMemberMetadata in the
    ConsumerGroupMemberMetadata record): its session timeout and its (assignor name, subscription) protocols."""

    session_timeout_ms: int
    supported_protocols: list[tuple[str, bytes]]

    def value(self) -> dict[str, Any]:
        return {"session_timeout_ms": self.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in self.supported_protocols]}

    @classmethod
    def from_value(cls, value: dict[str, Any] | None) -> ClassicMemberMetadata | None:
        if value is None:
            return None
        return cls(value["session_timeout_ms"],
                   [(p["name"], bytes(p["metadata"])) for p in value["supported_protocols"]])


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    #: set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def subscription_equals(self, other: ConsumerMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic) == \
            (other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
             other.subscribed_topic_regex, other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def assignment_equals(self, other: ConsumerMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation) == (other.member_epoch, other.previous_member_epoch, other.state,
                                             other.assigned, other.pending_revocation)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def metadata_value(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "rack_id": self.rack_id, "client_id": self.client_id,
                "client_host": self.client_host, "subscribed_topic_names": list(self.subscribed_topic_names),
                "subscribed_topic_regex": self.subscribed_topic_regex,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "server_assignor": self.server_assignor,
                "classic_member_metadata": None if self.classic is None else self.classic.value()}

    def assignment_value(self) -> dict[str, Any]:
        return {"member_epoch": self.member_epoch, "previous_member_epoch": self.previous_member_epoch,
                "state": int(self.state), "assigned_partitions": _to_record(self.assigned),
                "partitions_pending_revocation": _to_record(self.pending_revocation)}


def _to_record(parts: TopicPartitions) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]


def _from_record(items: list[dict[str, Any]]) -> TopicPartitions:
    return {i["topic_id"]: set(i["partitions"]) for i in items if i["partitions"]}


def _copy_parts(parts: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in parts.items()}


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup(ModernGroup[ConsumerMember]):
    group_type = "consumer"
    protocol_type = "consumer"
    record_types = GroupRecordTypes(
        metadata=R.CONSUMER_GROUP_METADATA, target_assignment_metadata=R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        target_assignment_member=R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        member_metadata=R.CONSUMER_GROUP_MEMBER_METADATA,
        current_member_assignment=R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        group_extra=R.CONSUMER_GROUP_PARTITION_METADATA)
    #: Kafka 4.3.1's ModernGroup starts at group epoch 1 and target assignment epoch 1 (a member joining a new
    #: group with no topic gets epoch 1; the first subscription bumps it to 2)
    initial_epoch = 1
    derived_indexes = ("partition_epochs",)

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.static_members: dict[str, str] = {}
        self.target: dict[str, TopicPartitions] = {}
        #: (topic id, partition) -> epoch of the member owning it (assigned or pending revocation)
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        #: topic name -> (topic id, partitions) of the subscribed topics at the last epoch bump
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}

    # -- state ------------------------------------------------------------------------------------------------
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata or topic in self.subscribed_topic_names()

    # -- members ----------------------------------------------------------------------------------------------
    def put_member(self, member: ConsumerMember) -> None:
        """Adds or replaces a member (and its partition ownership)."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _claim(self, member: ConsumerMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.partition_epochs.pop((t, p), None)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        mid = self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    # -- classic-protocol members (Kafka's "classic members of a consumer group") --------------------------------
    def all_members_use_classic_protocol_except(self, member_ids: Collection[str]) -> bool:
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid not in member_ids)

    def supports_classic_protocols(self, protocol_type: str | None, names: set[str]) -> bool:
        """A classic member may join when it speaks the embedded consumer protocol and shares an assignor name
        with every classic member already in (Kafka's supportsClassicProtocols)."""
        if protocol_type != "consumer" or not names:
            return False
        for m in self.members.values():
            if m.classic is not None:
                names = names & {n for n, _ in m.classic.supported_protocols}
        return bool(names)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for t, ps in self.target.get(member.member_id, {}).items():
            mine = member.assigned.get(t, set())
            if any(p not in mine and self.current_partition_epoch(t, p) != -1 for p in ps):
                return True
        return False

    # -- offsets and deletion (Group interface shared with ClassicGroup) ---------------------------------------
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int = 9, *, transactional: bool = False) -> None:
        if generation < 0 and not self.members:
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member.uses_classic_protocol:   # a classic member commits with its generation: the member epoch
            if generation != member.member_epoch:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            return
        if api_version < 9 and not transactional:   # TxnOffsetCommit carries the member epoch at any version
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION,
                             "OffsetCommit version 9 or above must be used by members using the consumer protocol")
        if generation != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)

    def stale_epoch_error(self, member: ConsumerMember) -> int:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH


class TopicCatalog:
    """Topic names <-> ids and partition counts, as the broker currently knows them."""

    def __init__(self, by_name: dict[str, tuple[uuid.UUID, int]]) -> None:
        self.by_name = by_name
        self.by_id = {tid: name for name, (tid, _) in by_name.items()}


class ProtocolMigration(Protocol):
    """Moves groups between the protocols (``migration.GroupMigration``, Kafka's online upgrade and downgrade)."""

    def upgrade_refusal(self, group: Any, consumer_max_size: int) -> str | None: ...

    def upgrade(self, consumer: ConsumerGroupManager, classic: Any, records: list) -> ConsumerGroup: ...

    def downgrade_without(self, consumer: ConsumerGroupManager, group: ConsumerGroup,
                          leaving: Sequence[ConsumerMember]) -> bool: ...


class ConsumerGroupManager(ModernGroupManager[ConsumerGroup, ConsumerMember]):
    """Kafka's consumer-group (KIP-848) logic over the shared group registry."""

    group_class = ConsumerGroup
    member_states = MemberState
    kind = "consumer"

    def __init__(self, groups: dict[str, Any], timer: Timer, write: Callable[[str, list], None], config: Any,
                 catalog: Callable[[], TopicCatalog], forget_group: Callable[[Any], None],
                 migration: ProtocolMigration | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        """``migration``: converts groups between the classic and the consumer protocol (None: never);
        ``group_configs``: a group's consumer.session.timeout.ms, consumer.heartbeat.interval.ms and
        consumer.assignment.interval.ms win over the broker's group.consumer.* ones."""
        super().__init__(groups, timer, write, forget_group, config, group_configs)
        self.migration = migration
        self.catalog = catalog
        self.max_size = int(config["group.consumer.max.size"])
        names = [n for n in config["group.consumer.assignors"] if n in ASSIGNORS]
        self.assignors = {n: ASSIGNORS[n] for n in names} or {"uniform": ASSIGNORS["uniform"]}
        self.default_assignor = next(iter(self.assignors))
        #: completed target-assignment computations (benchmarks read it)
        self.assignments_computed = 0

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------------------------
    def heartbeat(self, request: Any, api_version: int, client_id: str, client_host: str) -> Struct:
        try:
            self._validate(request, api_version)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except GroupError as e:
            return Struct(throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                          member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    def _validate(self, request: Any, api_version: int) -> None:
        def invalid(msg: str) -> GroupError:
            return GroupError(ErrorCode.INVALID_REQUEST, msg)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id is not None and request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id is not None and request.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == 0:
            if api_version >= 1 and not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            regex = getattr(request, "subscribed_topic_regex", None) if api_version >= 1 else None
            if request.subscribed_topic_names is None and regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.assignors)}.")
        regex = getattr(request, "subscribed_topic_regex", None) if api_version >= 1 else None
        if regex is not None:
            try:
                re2j_pattern(regex)
            except re.error as e:
                raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.") from None

    def _group(self, group_id: str, create: bool, records: list) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                # Kafka 4.3 (consumerGroupHeartbeat's consumerGroup lookup): GROUP_ID_NOT_FOUND
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            group = ConsumerGroup(group_id)
            self.groups[group_id] = group
            return group
        if isinstance(group, ConsumerGroup):
            return group
        if group.group_type == "streams":
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if create and group.is_empty():
            # An empty classic group is converted: Kafka deletes it and creates a consumer group (the classic group
            # is forgotten once the records are written: a refused write puts it back).
            records.append(R.group_metadata_tombstone(group_id))
            group = ConsumerGroup(group_id)
            self.groups[group_id] = group
            return group
        refusal = f"Group {group_id} is not a consumer group."
        if create and self.migration is not None:
            refusal = self.migration.upgrade_refusal(group, self.max_size) or ""
            if not refusal:
                # A consumer-protocol member joins a classic group with members: Kafka converts it online.
                return self.migration.upgrade(self, group, records)
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, refusal)

    def _heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        records: list[tuple[bytes, bytes | None]] = []
        epoch = request.member_epoch
        create = epoch == 0
        existing = self.groups.get(request.group_id)
        created = existing is None
        group = self._group(request.group_id, create, records)
        converted_from = None if existing is group else existing   # a classic group this heartbeat converts
        try:
            member, updated, replaced, owned = self._heartbeat_member(group, request, client_id, client_host)
        except GroupError:
            if converted_from is not None:
                self.undo_conversion(group, converted_from)
            elif created and not group.members and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            raise
        # the heartbeat changes the group before its records are written: a refused write (or an error half-way)
        # restores it (a converted classic group comes back), and its timers move only once written
        prior, reconciled = self.change_and_write(group, created, records, lambda timers: self.update_and_reconcile(
            group, member, updated, replaced, owned, records, timers), converted_from)
        self.schedule_session_timeout(group, reconciled.member_id)

        full = epoch == 0 or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                              and request.topic_partitions is not None)
        changed = prior is None or prior.assigned != reconciled.assigned
        assignment = None
        if full or changed:
            assignment = Struct(topic_partitions=[Struct(topic_id=t, partitions=sorted(ps))
                                                  for t, ps in sorted(reconciled.assigned.items(),
                                                                      key=lambda kv: str(kv[0]))])
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=reconciled.member_id,
                      member_epoch=reconciled.member_epoch,
                      heartbeat_interval_ms=self.group_int(group.group_id, "consumer.heartbeat.interval.ms"),
                      assignment=assignment)

    def _heartbeat_member(self, group: ConsumerGroup, request: Any, client_id: str, client_host: str
                          ) -> tuple[ConsumerMember, ConsumerMember, ConsumerMember | None, TopicPartitions | None]:
        """A heartbeat's checks (nothing changed yet): (the member as the group has it or a new one, the member as
        the request updates it, the static member it replaces, the partitions it says it owns)."""
        epoch = request.member_epoch
        create = epoch == 0
        member_id = request.member_id or str(uuid.uuid4())
        if len(group.members) >= self.max_size and member_id not in group.members:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.max_size} members.")
        owned = None if request.topic_partitions is None else \
            {tp.topic_id: set(tp.partitions) for tp in request.topic_partitions}
        replaced: ConsumerMember | None = None
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
                member = ConsumerMember(member_id)
                log.info("group %s: member %s joins (consumer protocol)", group.group_id, member_id)
            else:
                self._check_epoch(member, epoch, owned)
        else:
            existing = group.static_member(request.instance_id)
            if create:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerMember(member_id)
                else:
                    # Kafka 4.3 (getOrMaybeSubscribeStaticConsumerGroupMember): a consumer-protocol static member
                    # replaces another only once it left (epoch -2), even under its own member id; a classic one
                    # at once
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol:
                        raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                         f"Static member {member_id} with instance id {request.instance_id} cannot "
                                         f"join the group because the instance id is owned by {existing.member_id} member.")
                    member = copy.deepcopy(existing)
                    member.member_id = member_id
                    member.member_epoch = 0
                    member.previous_member_epoch = 0
                    replaced = existing
                    log.info("group %s: static member %s rejoins as %s (replacing %s)", group.group_id,
                             request.instance_id, member_id, existing.member_id)
            else:
                if existing is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Instance id {request.instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {request.instance_id} was "
                                     f"fenced by member {existing.member_id}.")
                self._check_epoch(existing, epoch, owned)
                member = existing

        updated = copy.deepcopy(member)
        if request.instance_id is not None:
            updated.instance_id = request.instance_id
        if request.rack_id is not None:
            updated.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            updated.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            updated.subscribed_topic_names = sorted(set(request.subscribed_topic_names))
        regex = getattr(request, "subscribed_topic_regex", None)
        if regex is not None:
            updated.subscribed_topic_regex = regex or None
        updated.client_id = client_id
        updated.client_host = client_host

        return member, updated, replaced, owned

    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                             replaced: ConsumerMember | None, owned: TopicPartitions | None,
                             records: list, timers: list[Callable[[], None]]
                             ) -> tuple[ConsumerMember | None, ConsumerMember]:
        """Kafka's steps 1-3 of a heartbeat (ConsumerGroupHeartbeat, or a classic member's JoinGroup): the member's
        new subscription (a new group epoch when it changed), the target assignment of a new epoch, and the
        member's reconciliation towards its target given the partitions it still ``owned``. Appends the records
        and applies them, and the timer changes to ``timers`` (for the caller to run once the records are
        written: on a refused write it restores the group, ``ModernGroupManager.rollback``); returns (the member
        before, the member after)."""
        bump = False
        is_new = member.member_id not in group.members or replaced is not None
        catalog = self.catalog()
        others = [m for mid, m in group.members.items()
                  if mid != updated.member_id and (replaced is None or mid != replaced.member_id)]
        if is_new or not updated.subscription_equals(member):
            records.append(R.consumer_group_record(R.CONSUMER_GROUP_MEMBER_METADATA,
                                                   {"group_id": group.group_id, "member_id": updated.member_id},
                                                   updated.metadata_value()))
            # A new group epoch when the member's topic names changed from what it had (Kafka 4.3.1's
            # hasMemberSubscriptionChanged): a new member had none, so one joining with no topic starts no epoch;
            # a replaced static member is compared with its predecessor's copy. The rest comes from the regex
            # and from the group's subscribed topics (below).
            if updated.subscribed_topic_names != member.subscribed_topic_names or (
                    updated.subscribed_topic_regex != member.subscribed_topic_regex
                    and _regex_change_bumps(updated.subscribed_topic_regex, others, catalog)):
                bump = True

        # the subscribed topics that exist, with their ids and partition counts (Kafka's metadata hash, KIP-1101):
        # a change bumps the epoch (one bump per heartbeat at most, as Kafka's updateSubscriptionMetadata)
        subscription = self.subscription_metadata(others + [updated], catalog)
        if subscription != group.subscription_metadata:
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(R.consumer_group_record(R.CONSUMER_GROUP_METADATA, {"group_id": group.group_id},
                                                   {"epoch": group_epoch}))
            log.info("group %s: group epoch bumped to %d", group.group_id, group_epoch)

        # Apply the membership change before computing the target assignment.
        if replaced is not None:
            old_target = group.target.get(replaced.member_id, {})
            group.remove_member(replaced.member_id)
            if replaced.member_id != updated.member_id:   # (under its own id: the records above rewrite it)
                key = {"group_id": group.group_id, "member_id": replaced.member_id}
                records.append(R.consumer_group_record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, key, None))
                records.append(R.consumer_group_record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, key, None))
                records.append(R.consumer_group_record(R.CONSUMER_GROUP_MEMBER_METADATA, key, None))
            timers.append(functools.partial(self.cancel_timers, group, replaced.member_id))
            group.target[updated.member_id] = _copy_parts(old_target)
        prior = group.members.get(updated.member_id)
        group.put_member(updated)
        group.subscription_metadata = subscription
        group.group_epoch = group_epoch

        # a new target at most once per consumer.assignment.interval.ms (KIP-1263): within it the members stay at
        # the previous target and the first heartbeat after it computes the new one, as Kafka 4.3 does
        if group.group_epoch > group.assignment_epoch and assignment_due(
                group.last_assignment_ms, self.group_int(group.group_id, "consumer.assignment.interval.ms"),
                self.timer.now()):
            self._update_target_assignment(group, catalog, records)
        target = group.target.get(updated.member_id, {})

        reconciled = self._reconcile(group, updated, target, owned)
        if prior is None or not reconciled.assignment_equals(prior) or is_new:
            records.append(R.consumer_group_record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                                   {"group_id": group.group_id, "member_id": reconciled.member_id},
                                                   reconciled.assignment_value()))
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                timers.append(lambda: self.schedule_rebalance_timeout(group, reconciled))
            else:
                timers.append(lambda: self.cancel_rebalance_timeout(group.group_id, reconciled.member_id))
        group.put_member(reconciled)
        return prior, reconciled

    @staticmethod
    def _check_epoch(member: ConsumerMember, received: int, owned: TopicPartitions | None) -> None:
        if received > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch:
            subset = owned is not None and all(ps <= member.assigned.get(t, set()) for t, ps in owned.items())
            if received != member.previous_member_epoch or not subset:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its partitions and rejoin.")

    def subscription_metadata(self, members: list[ConsumerMember],
                               catalog: TopicCatalog) -> dict[str, tuple[uuid.UUID, int]]:
        names: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                pattern = re2j_pattern(m.subscribed_topic_regex)
                names.update(n for n in catalog.by_name if pattern.fullmatch(n))   # internal topics too, as Kafka
        return {n: catalog.by_name[n] for n in sorted(names) if n in catalog.by_name}

    def _member_topics(self, member: ConsumerMember, group: ConsumerGroup) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re2j_pattern(member.subscribed_topic_regex)
            names.update(n for n in group.subscription_metadata if pattern.fullmatch(n))
        return frozenset(group.subscription_metadata[n][0] for n in names if n in group.subscription_metadata)

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        counts: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.default_assignor
        return max(sorted(counts), key=lambda n: counts[n])

    def _update_target_assignment(self, group: ConsumerGroup, catalog: TopicCatalog, records: list) -> None:
        name = self._preferred_assignor(group)
        assignor = self.assignors.get(name) or self.assignors[self.default_assignor]
        specs = {mid: MemberSpec(self._member_topics(m, group), group.target.get(mid, {}), m.instance_id)
                 for mid, m in group.members.items()}
        partitions = {tid: n for tid, n in group.subscription_metadata.values()}
        topic_names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
        new = assignor.assign(specs, partitions, topic_names)
        self.assignments_computed += 1
        for mid in group.members:
            parts = {t: ps for t, ps in new.get(mid, {}).items() if ps}
            if parts != group.target.get(mid):
                records.append(R.consumer_group_record(
                    R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, {"group_id": group.group_id, "member_id": mid},
                    {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                          for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]}))
            group.target[mid] = parts
        group.assignment_epoch = group.group_epoch
        # every computed assignment starts consumer.assignment.interval.ms, as Kafka 4.3.1's (a new group has none:
        # it starts at assignment epoch 1 and members joining with no topic compute none)
        group.last_assignment_ms = self.timer.now()
        records.append(R.consumer_group_record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                                               {"group_id": group.group_id},
                                               {"assignment_epoch": group.assignment_epoch,
                                                "assignment_timestamp": group.last_assignment_ms}))
        log.info("group %s: computed target assignment for epoch %d with the %s assignor", group.group_id,
                 group.assignment_epoch, assignor.name)

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ------------------------------------------------------
    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, target: TopicPartitions,
                   owned: TopicPartitions | None) -> ConsumerMember:
        epoch = group.assignment_epoch
        if member.is_reconciled_to(epoch):
            return member
        if member.state is MemberState.STABLE:
            if member.member_epoch != epoch:
                return self._next_assignment(group, member, member.member_epoch, epoch, target, owned)
            return member
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return member
            return self._next_assignment(group, member, member.member_epoch + 1, epoch, target, owned)
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            return self._next_assignment(group, member, member.member_epoch, epoch, target, owned)
        if owned is None or owned:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                             "The member must abandon all its partitions and rejoin.")
        return self._next_assignment(group, member, epoch, epoch, target, owned)

    def _next_assignment(self, group: ConsumerGroup, member: ConsumerMember, member_epoch: int, target_epoch: int,
                         target: TopicPartitions, owned: TopicPartitions | None) -> ConsumerMember:
        unreleased = False
        assigned: TopicPartitions = {}
        revoke: TopicPartitions = {}
        pending_assign: TopicPartitions = {}
        for t in set(target) | set(member.assigned):
            tgt = target.get(t, set())
            cur = member.assigned.get(t, set())
            keep = cur & tgt
            gone = cur - keep
            add = tgt - keep
            still_owned = {p for p in add if group.current_partition_epoch(t, p) != -1
                           and not _owned_by(group, member, t, p)}
            if still_owned:
                unreleased = True
                add -= still_owned
            if keep:
                assigned[t] = keep
            if gone:
                revoke[t] = gone
            if add:
                pending_assign[t] = add
        out = copy.deepcopy(member)
        if revoke and _owns_any(owned, revoke):
            out.state = MemberState.UNREVOKED_PARTITIONS
            _update_epoch(out, member_epoch)
            out.assigned = assigned
            out.pending_revocation = revoke
        elif pending_assign:
            for t, ps in pending_assign.items():
                assigned.setdefault(t, set()).update(ps)
            out.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            _update_epoch(out, target_epoch)
            out.assigned = assigned
            out.pending_revocation = {}
        else:
            out.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            _update_epoch(out, target_epoch)
            out.assigned = assigned
            out.pending_revocation = {}
        return out

    # -- leaving and fencing ----------------------------------------------------------------------------------
    def _leave(self, request: Any) -> Struct:
        group = self.groups.get(request.group_id)
        if not isinstance(group, ConsumerGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {request.member_id} is not a member of group {group.group_id}.")
            log.info("group %s: member %s left", group.group_id, member.member_id)
            self.fence_member(group, member)
            return _leave_response(request.member_id, request.member_epoch)
        member = group.static_member(request.instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
        if member.member_id != request.member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {request.member_id} with instance id {request.instance_id} was fenced "
                             f"by member {member.member_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("group %s: static member %s (%s) left temporarily", group.group_id, member.member_id,
                     request.instance_id)
            leaving = copy.deepcopy(member)
            leaving.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            leaving.pending_revocation = {}
            self.write(group.group_id, [R.consumer_group_record(
                R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"group_id": group.group_id, "member_id": member.member_id},
                leaving.assignment_value())])
            group.put_member(leaving)
            return _leave_response(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("group %s: static member %s (%s) left", group.group_id, member.member_id, request.instance_id)
        self.fence_member(group, member)
        return _leave_response(request.member_id, request.member_epoch)

    def fence_member(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Removes a member that left or timed out (:meth:`fence_members`)."""
        self.fence_members(group, [member])

    def fence_members(self, group: ConsumerGroup, members: Sequence[ConsumerMember]) -> None:
        """Kafka's consumerGroupFenceMembers: removes members that left or timed out, with one new group epoch; when
        only classic-protocol members remain, the group may become a classic group again (Kafka's online
        downgrade, a LeaveGroup's too)."""
        if not members:
            return
        if self.migration is not None and self.migration.downgrade_without(self, group, members):
            return
        # written first: a refused write leaves the members in (and their timers: a timer's fencing tries again)
        records = [r for m in members
                   for r in ConsumerGroup.record_types.member_tombstones(group.group_id, m.member_id)]
        records.append(R.consumer_group_record(R.CONSUMER_GROUP_METADATA, {"group_id": group.group_id},
                                               {"epoch": group.group_epoch + 1}))
        self.write(group.group_id, records)
        for member in members:
            group.remove_member(member.member_id)
        group.subscription_metadata = self.subscription_metadata(list(group.members.values()), self.catalog())
        group.group_epoch += 1
        for member in members:
            self.cancel_timers(group, member.member_id)

    def member_session_timeout_ms(self, group: ConsumerGroup, member: ConsumerMember | None) -> int:
        """A classic-protocol member keeps the session timeout it joined with."""
        classic = None if member is None else member.classic
        if classic is not None:
            return classic.session_timeout_ms
        return self.group_int(group.group_id, "consumer.session.timeout.ms")

    def rebalance_timeout_default_ms(self, group: ConsumerGroup) -> int:
        return self.group_int(group.group_id, "consumer.session.timeout.ms")

    def cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        super().cancel_timers(group, member_id)
        self.timer.cancel(classic_join_timer(group.group_id, member_id))
        self.timer.cancel(classic_sync_timer(group.group_id, member_id))

    def topic_names(self, group: ConsumerGroup) -> dict[uuid.UUID, str]:
        """Topic id -> name of the group's subscribed topics and of every topic the broker knows."""
        names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
        names.update(self.catalog().by_id)
        return names

    # -- ConsumerGroupDescribe ----------------------------------------------------------------------------------
    def describe(self, group_id: str, api_version: int) -> Struct:
        group = self.groups.get(group_id)
        if not group_id:
            return _described_error(group_id, ErrorCode.INVALID_GROUP_ID, None)   # Kafka sets no message
        if group is None:
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                    f"Group {group_id} is not a consumer group.")
        names = self.topic_names(group)

        def assignment(parts: TopicPartitions) -> Struct:
            return Struct(topic_partitions=[Struct(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
                                            for t, ps in sorted(parts.items(), key=lambda kv: names.get(kv[0], ""))])

        members = [Struct(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                          member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                          subscribed_topic_names=list(m.subscribed_topic_names),
                          subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=assignment(m.assigned),
                          target_assignment=assignment(group.target.get(m.member_id, {})),
                          member_type=MEMBER_TYPE_CLASSIC if m.uses_classic_protocol else MEMBER_TYPE_CONSUMER)
                   for m in group.members.values()]
        return Struct(error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state=group.state_name(),
                      group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                      assignor_name=self._preferred_assignor(group), members=members,
                      authorized_operations=-2147483648)

    # -- loading ----------------------------------------------------------------------------------------------
    def replay(self, records: list[R.CoordinatorRecord]) -> None:
        """Rebuilds consumer groups from their records, in log order (later records win; tombstones delete).
        ConsumerGroupPartitionMetadata is recomputed from the live topics; nothing to restore."""
        for rec in records:
            self.replay_one(rec)

    def new_member(self, member_id: str) -> ConsumerMember:
        return ConsumerMember(member_id)

    def target_from_record(self, value: dict[str, Any]) -> TopicPartitions:
        return _from_record(value["topic_partitions"])

    def apply_member_metadata(self, member: ConsumerMember, value: dict[str, Any]) -> None:
        member.instance_id = value["instance_id"]
        member.rack_id = value["rack_id"]
        member.client_id = value["client_id"]
        member.client_host = value["client_host"]
        member.subscribed_topic_names = list(value["subscribed_topic_names"])
        member.subscribed_topic_regex = value["subscribed_topic_regex"]
        member.rebalance_timeout_ms = value["rebalance_timeout_ms"]
        member.server_assignor = value["server_assignor"]
        member.classic = ClassicMemberMetadata.from_value(value.get("classic_member_metadata"))

    def empty_assignment(self) -> tuple[TopicPartitions, TopicPartitions]:
        return {}, {}

    def assignment_from_record(self, value: dict[str, Any]) -> tuple[TopicPartitions, TopicPartitions]:
        return _from_record(value["assigned_partitions"]), _from_record(value["partitions_pending_revocation"])

    def on_loaded(self, group: ConsumerGroup) -> None:
        group.subscription_metadata = self.subscription_metadata(list(group.members.values()), self.catalog())
        for member in group.members.values():
            self.schedule_session_timeout(group, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance_timeout(group, member)


def classic_join_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    """The deadline of a classic member asked to rejoin (Kafka's consumerGroupJoinKey)."""
    return ("classic-join", group_id, member_id)


def classic_sync_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    """The deadline of a classic member's SyncGroup after its JoinGroup (Kafka's consumerGroupSyncKey)."""
    return ("classic-sync", group_id, member_id)


@functools.lru_cache(maxsize=256)
def re2j_pattern(regex: str) -> re.Pattern[str]:
    """A subscription's regex compiled with the syntax Kafka compiles it with (com.google.re2j's Pattern): raises
    re.error for the constructs Python's re accepts and RE2J refuses (lookarounds, atomic groups, conditionals,
    comments, backreferences, possessive quantifiers, \\Z), and reads RE2J's \\Q...\\E quoting and \\z as Python's
    re would need them. (RE2J's Unicode classes, \\p{..}, are still refused.)"""
    out: list[str] = []
    i, n, in_class = 0, len(regex), False
    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            d, after = regex[i + 1], regex[i + 2:i + 3]
            if d in "89" or (d in "1234567" and not (after and after in "01234567")) or (d == "Z" and not in_class):
                raise re.error("invalid escape sequence")
            if d == "Q" and not in_class:
                end = regex.find("\\E", i + 2)
                out.append(re.escape(regex[i + 2:] if end < 0 else regex[i + 2:end]))
                i = n if end < 0 else end + 2
                continue
            out.append("\\Z" if d == "z" and not in_class else regex[i:i + 2])
            i += 2
            continue
        start = i
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + regex.startswith("^", i + 1)
            i += regex.startswith("]", i)   # a ']' first in a class is a literal
            out.append(regex[start:i])
            continue
        elif regex.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(", "(?#"), i):
            raise re.error("invalid or unsupported Perl syntax")
        elif c in "*+?}" and regex.startswith("+", i + 1):
            raise re.error("bad repetition operator")
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _regex_change_bumps(regex: str | None, others: list[ConsumerMember], catalog: TopicCatalog) -> bool:
    """Whether a member's new regex bumps the group epoch (Kafka 4.3.1's maybeUpdateRegularExpressions and
    handleRegularExpressionsResult): a regex removed or one another member already has does at once; a regex new to
    the group only when its resolution finds a topic (Kafka resolves it just after the heartbeat, klog in it)."""
    if not regex or any(m.subscribed_topic_regex == regex for m in others):
        return True
    pattern = re2j_pattern(regex)
    return any(pattern.fullmatch(n) for n in catalog.by_name)


def _update_epoch(member: ConsumerMember, epoch: int) -> None:
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch


def _owns_any(owned: TopicPartitions | None, parts: TopicPartitions) -> bool:
    """Whether the member still reports owning any of ``parts`` (an unknown ``owned`` counts as yes)."""
    if owned is None:
        return True
    return any(owned.get(t, set()) & ps for t, ps in parts.items())


def _owned_by(group: ConsumerGroup, member: ConsumerMember, t: uuid.UUID, p: int) -> bool:
    return p in member.assigned.get(t, ()) or p in member.pending_revocation.get(t, ())


def _leave_response(member_id: str, epoch: int) -> Struct:
    return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
                  member_epoch=epoch, heartbeat_interval_ms=0, assignment=None)


def _described_error(group_id: str, code: int, message: str | None) -> Struct:
    return Struct(error_code=int(code), error_message=message, group_id=group_id, group_state="",
                  group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                  authorized_operations=-2147483648)

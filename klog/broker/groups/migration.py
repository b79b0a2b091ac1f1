"""Moving a group between the classic and the consumer (KIP-848) protocol while it runs, as Kafka 4.x does.

``group.consumer.migration.policy`` (bidirectional, upgrade, downgrade, disabled) says which way is allowed:

- **upgrade**: a consumer-protocol member's first ConsumerGroupHeartbeat to a classic group with members (using
  the embedded ``consumer`` protocol, at most ``group.consumer.max.size`` of them) turns it into a consumer group:
  the group epoch is the classic generation, each classic member keeps its last assignment as its current and
  target assignment, and parked JoinGroup/SyncGroup requests answer REBALANCE_IN_PROGRESS.
- **classic members of a consumer group**: the classic members keep talking JoinGroup/SyncGroup/Heartbeat/
  LeaveGroup; the coordinator assigns for them (no leader), a JoinGroup reconciles the member as a heartbeat
  would (its generation is its member epoch), SyncGroup hands out its assigned partitions, and Heartbeat answers
  REBALANCE_IN_PROGRESS whenever the member must revoke, catch up with a new group epoch, or can collect
  partitions another member released.
- **downgrade**: when members are fenced or leave (ConsumerGroupHeartbeat, LeaveGroup) and only classic members
  remain (at most ``group.max.size``), the group becomes a classic group in its target assignment and rebalances;
  when a classic static member replaces the last consumer-protocol member (same ``group.instance.id``), it becomes
  one without a rebalance, the new member taking the old one's partitions.

Everything is written as Kafka's records (GroupMetadata tombstone/value, ConsumerGroup* with the classic member
metadata), so a restarted coordinator loads the same group (Kafka's GroupMetadataManager: convertToConsumerGroup,
classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
classicGroupLeaveToConsumerGroup, convertToClassicGroup).
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from klog.protocol import Struct
from klog.protocol.consumer_protocol import Assignment, decode_assignment, decode_subscription, encode_assignment
from klog.protocol.exceptions import ProtocolError

from . import records as R
from .classic_group import (CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupState, ClassicMember,
                            join_error, sync_response)
from .consumer import (ClassicMemberMetadata, ConsumerGroup, ConsumerMember, MemberState, TopicPartitions,
                       classic_join_timer, classic_sync_timer)
from .errors import ErrorCode, GroupError

if TYPE_CHECKING:  # pragma: no cover
    from .classic import ClassicGroupManager
    from .consumer import ConsumerGroupManager, TopicCatalog

log = logging.getLogger("klog.groups")

class GroupMigration:
    """Kafka's online upgrade (classic -> consumer) and downgrade (consumer -> classic) of a group."""

    def __init__(self, config: Any, classic: ClassicGroupManager) -> None:
        policy = str(config["group.consumer.migration.policy"]).lower()
        self.upgrade_enabled = policy in ("bidirectional", "upgrade")
        self.downgrade_enabled = policy in ("bidirectional", "downgrade")
        self.classic = classic

    # -- classic -> consumer ------------------------------------------------------------------------------------
    def upgrade_refusal(self, group: Any, consumer_max_size: int) -> str | None:
        """Kafka's validateOnlineUpgrade: why ``group`` cannot become a consumer group (its GROUP_ID_NOT_FOUND
        message), or None when it can."""
        gid = getattr(group, "group_id", "")
        if not isinstance(group, ClassicGroup):
            return f"Group {gid} is not a consumer group."
        if not self.upgrade_enabled:
            log.info("group %s: cannot upgrade to a consumer group: the online upgrade is disabled", gid)
            return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
        if not group.uses_consumer_protocol():
            log.info("group %s: cannot upgrade to a consumer group: it does not use the embedded consumer protocol",
                     gid)
            return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                    f"consumer embedded protocol.")
        if len(group.members) > consumer_max_size:
            log.info("group %s: cannot upgrade to a consumer group: %d members exceed group.consumer.max.size",
                     gid, len(group.members))
            return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                    f"consumer group maximum size.")
        return None

    def upgrade(self, consumer: ConsumerGroupManager, classic: ClassicGroup, records: list) -> ConsumerGroup:
        """Kafka's convertToConsumerGroup: the consumer group the classic ``classic`` becomes (installed in the
        registry in its place; its records appended to ``records``). ``classic`` is left as it is, its members'
        timers and parked requests with it, until the records are written (``ModernGroupManager.change_and_write``
        then forgets it: its parked requests answer REBALANCE_IN_PROGRESS); a refused write puts it back."""
        gid = classic.group_id
        catalog = consumer.catalog()
        group = ConsumerGroup(gid)
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for m in classic.members.values():
            try:
                metadata = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
                subscription = decode_subscription(metadata)
                assigned = _by_id(decode_assignment(m.assignment).partitions, catalog)
            except (ProtocolError, ValueError, IndexError) as e:
                log.warning("group %s: cannot upgrade to a consumer group: member %s's embedded consumer protocol "
                            "is malformed: %s", gid, m.member_id, e)
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {gid} to consumer "
                                 "group because the embedded consumer protocol is malformed.") from None
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=sorted(set(subscription.topics)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=classic.generation_id,
                previous_member_epoch=classic.generation_id, state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, list(m.protocols)))
            group.target[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
            group.put_member(member)
        group.subscription_metadata = consumer.subscription_metadata(list(group.members.values()), catalog)
        records.append(R.group_metadata_tombstone(gid))
        records.extend(_consumer_group_records(group))
        consumer.groups[gid] = group
        # (as Kafka's, before the write: a refused write forgets the group, these timers with it)
        for mid in group.members:
            consumer.schedule_session_timeout(group, mid)
        log.info("group %s: upgraded from a classic group (generation %d, %d members) to a consumer group", gid,
                 classic.generation_id, len(group.members))
        return group

    # -- consumer -> classic ------------------------------------------------------------------------------------
    def downgrade_without(self, consumer: ConsumerGroupManager, group: ConsumerGroup,
                          leaving: Sequence[ConsumerMember]) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers + convertToClassicGroup: when the ``leaving`` members go
        and only classic members remain, the group becomes a classic group that rebalances; False: nothing was
        done."""
        leaving_ids = {m.member_id for m in leaving}
        remaining = len(group.members) - len(leaving_ids)
        if not group.all_members_use_classic_protocol_except(leaving_ids) or remaining <= 0:
            return False
        if not self._may_downgrade(group, remaining):
            return False
        self._to_classic(consumer, group, leaving_ids, [])
        log.info("group %s: downgraded from a consumer group to a classic group as members %s left", group.group_id,
                 ", ".join(sorted(leaving_ids)))
        return True

    def downgrade_replacing(self, consumer: ConsumerGroupManager, group: ConsumerGroup, replaced: ConsumerMember,
                            records: list) -> ClassicGroup | None:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId: a classic static member took the place of the last
        consumer-protocol member (``replaced``, already out of ``group``; ``records`` say so): the group becomes a
        classic group in its current assignment, without a rebalance. None: it stays a consumer group."""
        if replaced.uses_classic_protocol or not group.all_members_use_classic_protocol_except(()):
            return None
        if not self._may_downgrade(group, len(group.members)):
            return None
        log.info("group %s: downgraded from a consumer group to a classic group as a classic static member replaced "
                 "%s", group.group_id, replaced.member_id)
        return self._to_classic(consumer, group, (), records)

    def _may_downgrade(self, group: ConsumerGroup, size: int) -> bool:
        if not self.downgrade_enabled:
            log.info("group %s: cannot downgrade to a classic group: the online downgrade is disabled",
                     group.group_id)
            return False
        if size > self.classic.max_size:
            log.info("group %s: cannot downgrade to a classic group: more members than group.max.size", group.group_id)
            return False
        return True

    def _to_classic(self, consumer: ConsumerGroupManager, group: ConsumerGroup, leaving: Collection[str],
                    records: list) -> ClassicGroup:
        """Kafka's convertToClassicGroup: the Stable classic group of ``group``'s classic members but the ``leaving``
        member ids, at the group epoch, each member's assignment its target; written after ``records`` and
        installed. Rebalances when members left."""
        gid = group.group_id
        now = consumer.timer.now()
        classic = ClassicGroup(gid, ClassicGroupState.STABLE, now, generation=group.group_epoch,
                               protocol_type=CONSUMER_PROTOCOL_TYPE)
        for mid, m in group.members.items():
            if mid in leaving:
                continue
            assert m.classic is not None
            classic.add(ClassicMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                      m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                      list(m.classic.supported_protocols)))
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        names = consumer.topic_names(group)
        for cm in classic.members.values():
            cm.assignment = _assignment_bytes(group.target.get(cm.member_id, {}), names,
                                              cm.metadata(classic.protocol_name))
        records = [*records, *group.tombstones(),
                   R.group_metadata_record(gid, classic.metadata_value(classic.group_assignment(), now))]
        consumer.write(gid, records)
        consumer.forget(group)
        consumer.groups[gid] = classic
        for cm in classic.members.values():
            self.classic.reschedule_heartbeat(classic, cm)
        if leaving:
            self.classic.prepare_rebalance(classic, f"Downgrade group {gid} from consumer to classic.")
        return classic


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic-protocol members inside a consumer group."""

    def __init__(self, consumer: ConsumerGroupManager, classic: ClassicGroupManager,
                 migration: GroupMigration | None) -> None:
        self.consumer = consumer
        self.classic = classic
        self.migration = migration

    # -- JoinGroup ----------------------------------------------------------------------------------------------
    def join(self, group: ConsumerGroup, request: Any, api_version: int, client_id: str, client_host: str) -> Struct:
        """Kafka's classicGroupJoinToConsumerGroup: answered at once (the coordinator assigns; no leader)."""
        session_timeout = request.session_timeout_ms
        if not self.classic.min_session_timeout_ms <= session_timeout <= self.classic.max_session_timeout_ms:
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        rebalance_timeout = request.rebalance_timeout_ms if api_version >= 1 else session_timeout
        if rebalance_timeout is None or rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        instance_id = request.group_instance_id if api_version >= 5 else None
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        member_id = str(uuid.uuid4()) if unknown else request.member_id
        # (the refusals Kafka throws answer no member id: its service's answer to an exception)
        if len(group.members) >= self.consumer.max_size and member_id not in group.members:
            return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not group.supports_classic_protocols(request.protocol_type, {n for n, _ in protocols}):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and instance_id is None and api_version >= 4:
            # a dynamic member learns its id first, as in a classic group
            return join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ProtocolError:
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        replaced: ConsumerMember | None = None
        try:
            # Kafka 4.3's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member: a dynamic
            # member id of either protocol is taken (an unknown one joins); a static member naming a member id must
            # be the instance id's current member
            if instance_id is None:
                member = group.members.get(member_id) or ConsumerMember(member_id)
            else:
                existing = group.static_member(instance_id)
                if existing is None:
                    if not unknown:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    member = group.members.get(member_id) or ConsumerMember(member_id)
                elif existing.member_id == member_id:
                    member = existing
                elif unknown:   # a static member restarted: the new one takes the old one's place
                    replaced = existing
                    member = copy.deepcopy(existing)
                    member.member_id = member_id
                    member.member_epoch = member.previous_member_epoch = 0
                else:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
            catalog = self.consumer.catalog()
            updated = copy.deepcopy(member)
            if instance_id is not None:   # (Kafka's maybeUpdateInstanceId: a dynamic join keeps the member's)
                updated.instance_id = instance_id
            if subscription.rack_id is not None:
                updated.rack_id = subscription.rack_id
            updated.rebalance_timeout_ms = rebalance_timeout
            updated.server_assignor = None
            updated.subscribed_topic_names = sorted(set(subscription.topics))
            updated.client_id, updated.client_host = client_id, client_host
            updated.classic = ClassicMemberMetadata(session_timeout, protocols)
            owned = _by_id(subscription.owned_partitions, catalog)
            records: list = []
        except GroupError as e:
            return join_error(e.code)
        # as a ConsumerGroupHeartbeat: the group is restored when the records are refused, timers move once written
        snapshot = group.snapshot()
        timers: list[Callable[[], None]] = []
        try:
            _, reconciled = self.consumer.update_and_reconcile(group, member, updated, replaced, owned, records,
                                                               timers)
            downgraded = None
            if replaced is not None and self.migration is not None:
                downgraded = self.migration.downgrade_replacing(self.consumer, group, replaced, records)
            if downgraded is None:
                self.consumer.write(group.group_id, records)
        except Exception as e:
            if self.consumer.groups.get(group.group_id) is group:
                self.consumer.rollback(group, snapshot, False)
            if isinstance(e, GroupError):
                return join_error(e.code)
            raise
        if downgraded is None:   # (a downgraded group's timers went with it)
            for op in timers:
                op()
        gid, mid = group.group_id, reconciled.member_id
        if downgraded is not None:   # a classic group now: its member syncs and heartbeats as in any classic group
            return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, generation_id=downgraded.generation_id,
                          protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=downgraded.protocol_name, leader="",
                          skip_assignment=False, member_id=mid, members=[])
        timer = self.consumer.timer
        timer.cancel(classic_join_timer(gid, mid))
        self.consumer.schedule_session_timeout(group, mid)
        timer.schedule(classic_sync_timer(gid, mid), rebalance_timeout,
                       lambda: self._fence(gid, mid, "did not send SyncGroup within its rebalance timeout"))
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, generation_id=reconciled.member_epoch,
                      protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0], leader="",
                      skip_assignment=False, member_id=mid, members=[])

    # -- SyncGroup ----------------------------------------------------------------------------------------------
    def sync(self, group: ConsumerGroup, request: Any, api_version: int) -> Struct:
        """Kafka's classicGroupSyncToConsumerGroup: the member's assigned partitions, in its protocol's version."""
        try:
            member = self._member(group, request.member_id,
                                  request.group_instance_id if api_version >= 3 else None)
            if request.generation_id != member.member_epoch:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            assert member.classic is not None
            protocol_name = member.classic.supported_protocols[0][0]
            protocol_type = request.protocol_type if api_version >= 5 else None
            name = request.protocol_name if api_version >= 5 else None
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (name is not None and name != protocol_name):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            self._raise_if_rebalancing(group, member)
        except GroupError as e:
            return sync_response(e.code)
        gid = group.group_id
        self.consumer.timer.cancel(classic_sync_timer(gid, member.member_id))
        self.consumer.schedule_session_timeout(group, member.member_id)
        assignment = _assignment_bytes(member.assigned, self.consumer.topic_names(group),
                                       member.classic.supported_protocols[0][1])
        return sync_response(ErrorCode.NONE, assignment, CONSUMER_PROTOCOL_TYPE, protocol_name)

    def _raise_if_rebalancing(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A new target assignment asks the member to rejoin, unless it is still revoking (its next join follows).
        Kafka 4.3 compares with the assignment epoch: a new group epoch whose target waits for the assignment
        interval (KIP-1263) has nothing new for the member yet."""
        if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group, member)
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    # -- Heartbeat ----------------------------------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, request: Any, api_version: int) -> int:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS asks the member to rejoin."""
        try:
            member = self._member(group, request.member_id,
                                  request.group_instance_id if api_version >= 3 else None)
        except GroupError as e:
            return e.code
        if request.generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumer.schedule_session_timeout(group, member.member_id)
        if member.member_epoch < group.assignment_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member)):
            self._schedule_join_timeout(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup ---------------------------------------------------------------------------------------------
    def leave(self, group: ConsumerGroup, request: Any, api_version: int) -> Struct:
        """Kafka 4.3's classicGroupLeaveToConsumerGroup: every member named (by member id, or by instance id, of
        either protocol: an admin's removal) leaves at once (one new group epoch; a downgrade when only classic
        members remain); each answer names the member as the request did."""
        if api_version >= 3:
            identities = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            identities = [(request.member_id, None)]
        results = []
        leaving: dict[str, ConsumerMember] = {}
        for member_id, instance_id in identities:
            code: int = ErrorCode.NONE
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    if member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                        raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
                log.info("group %s: member %s left through LeaveGroup", group.group_id, member.member_id)
                leaving[member.member_id] = member
            except GroupError as e:
                code = e.code
            results.append(Struct(member_id=member_id, group_instance_id=instance_id, error_code=code))
        self.consumer.fence_members(group, list(leaving.values()))
        if api_version < 3:
            return Struct(throttle_time_ms=0, error_code=results[0].error_code, members=[])
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, members=results)

    # -- helpers ------------------------------------------------------------------------------------------------
    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if not member.uses_classic_protocol:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid, mid = group.group_id, member.member_id
        key = classic_join_timer(gid, mid)
        if not self.consumer.timer.is_scheduled(key):
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else \
                self.consumer.rebalance_timeout_default_ms(group)
            self.consumer.timer.schedule(key, timeout,
                                         lambda: self._fence(gid, mid, "did not rejoin within its rebalance timeout"))

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.consumer.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            member = group.members.get(member_id)
            if member is not None:
                log.info("group %s: classic member %s %s; fencing it", group_id, member_id, why)
                try:
                    self.consumer.fence_member(group, member)
                except GroupError as e:   # retried by the member's session timeout
                    log.warning("group %s: fencing member %s failed: %s", group_id, member_id, e.message)


def _by_id(partitions: dict[str, list[int]], catalog: TopicCatalog) -> TopicPartitions:
    """Partitions by topic name -> by topic id (topics the catalog no longer has are dropped, as Kafka does)."""
    return {catalog.by_name[t][0]: set(ps) for t, ps in partitions.items() if ps and t in catalog.by_name}


def _assignment_bytes(parts: TopicPartitions, names: dict[uuid.UUID, str], subscription: bytes) -> bytes:
    """A ConsumerProtocolAssignment of ``parts`` in the version of the member's subscription (Kafka answers
    each classic member in the version it joined with)."""
    try:
        version = decode_subscription(subscription).version
    except ProtocolError:
        version = 0
    return encode_assignment(Assignment({names[t]: sorted(ps) for t, ps in parts.items() if t in names},
                                        version=min(version, 3)))


def _consumer_group_records(group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
    """Kafka's createConsumerGroupRecords: every member's metadata, the group epoch, the target assignment and its
    epoch, every member's current assignment."""
    gkey = {"group_id": group.group_id}
    out = [R.consumer_group_record(R.CONSUMER_GROUP_MEMBER_METADATA, {**gkey, "member_id": mid}, m.metadata_value())
           for mid, m in group.members.items()]
    out.append(R.consumer_group_record(R.CONSUMER_GROUP_METADATA, gkey, {"epoch": group.group_epoch}))
    for mid in group.members:
        parts = group.target.get(mid, {})
        out.append(R.consumer_group_record(
            R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, {**gkey, "member_id": mid},
            {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                  for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))]}))
    out.append(R.consumer_group_record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gkey,
                                       {"assignment_epoch": group.assignment_epoch, "assignment_timestamp": -1}))
    out.extend(R.consumer_group_record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {**gkey, "member_id": mid},
                                       m.assignment_value()) for mid, m in group.members.items())
    return out

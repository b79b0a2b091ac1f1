"""Share groups (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77) as Kafka 4.x answers them.

Membership follows KIP-848's heartbeat (member epoch 0 joins with a coordinator-generated member id, -1 leaves,
the session times out after ``group.share.session.timeout.ms`` without a heartbeat). The assignment is computed
on the server, as Kafka's ``SimpleAssignor`` does when members are at least as many as partitions: every member
is assigned every partition of the topics it subscribes to (share groups let several members read one
partition; the share-partition hands each record to one of them). Each membership change bumps the group epoch;
the assignment is immediate (no revocation phase: nothing is owned exclusively), so the group is Stable
whenever it has members.

Not persisted yet: the membership lives in memory on the coordinator (members rejoin after a failover with
UNKNOWN_MEMBER_ID, as after a session timeout).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.broker.coordinator.timer import Timer
from klog.protocol import Struct

from .errors import ErrorCode, GroupError

log = logging.getLogger("klog.groups.share")

ASSIGNOR_NAME = "simple"


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    #: topic id -> partitions
    assigned: dict[uuid.UUID, list[int]] = field(default_factory=dict)


class ShareGroup:
    group_type = "share"
    protocol_type = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.session_keys: dict[str, int] = {}
        #: topic id -> the partitions the group has share state for (assigned to a member, or offsets altered)
        self.initialized: dict[uuid.UUID, set[int]] = {}

    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    def state_lower(self) -> str:
        return self.state_name().lower()

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def offset_expiration_base(self) -> None:
        return None   # share groups keep no committed offsets in __consumer_offsets

    def validate_offset_commit(self, *args: Any, **kwargs: Any) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group.")

    def validate_offset_fetch(self, *args: Any, **kwargs: Any) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group.")

    def validate_offset_delete(self) -> None:
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def tombstones(self) -> list[tuple[bytes, None]]:
        return []


class ShareGroupManager:
    """Kafka's share-group membership over the shared group registry."""

    def __init__(self, groups: dict[str, Any], timer: Timer, config: Any, catalog: Callable[[], Any],
                 on_member_gone: Callable[[str, str], None],
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        self.groups = groups
        self.timer = timer
        self.catalog = catalog
        self.on_member_gone = on_member_gone
        self.session_timeout_ms = int(config["group.share.session.timeout.ms"])
        self.heartbeat_interval_ms = int(config["group.share.heartbeat.interval.ms"])
        self.config = config
        #: a group's dynamic configs (its GROUP config resource: share.session.timeout.ms, share.heartbeat.interval.ms)
        self.group_configs = group_configs or (lambda group_id: {})
        self.max_size = int(config["group.share.max.size"])

    # -- ShareGroupHeartbeat ------------------------------------------------------------------------------------
    def heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        try:
            return self._heartbeat(request, client_id, client_host)
        except GroupError as e:
            return Struct(throttle_time_ms=0, error_code=int(e.code), error_message=str(e) or None,
                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    def _heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        if not group_id:
            raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:   # Kafka 4.x: the client generates its member id (KIP-1082)
            raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.rack_id is not None and request.rack_id == "":
            raise GroupError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0 and not request.subscribed_topic_names:
            raise GroupError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if epoch < -1:
            raise GroupError(ErrorCode.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be >= -1.")
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Group {group_id} is not a share group.")
        if epoch == -1:
            return self._leave(group, group_id, member_id)
        if group is None:
            group = ShareGroup(group_id)
            self.groups[group_id] = group
        if epoch == 0:
            member = group.members.get(member_id)
            if member is None:
                if len(group.members) >= self.max_size:
                    raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of {self.max_size} members.")
                member = ShareMember(member_id)
                group.members[member.member_id] = member
                group.group_epoch += 1
        else:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of {group_id}.")
            if epoch != member.member_epoch:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a member epoch ({epoch}) different from the one "
                                 f"known ({member.member_epoch}).")
        member.client_id, member.client_host = client_id, client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        changed = False
        if request.subscribed_topic_names is not None:
            names = sorted(set(request.subscribed_topic_names))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                group.group_epoch += 1
                changed = True
        catalog = self.catalog()
        target: dict[uuid.UUID, list[int]] = {}
        for name in member.subscribed_topic_names:
            known = catalog.by_name.get(name)
            if known is not None:
                topic_id, count = known
                target[topic_id] = list(range(count))
        send_assignment = epoch == 0 or changed or target != member.assigned
        if target != member.assigned or member.member_epoch != group.group_epoch:
            member.assigned = target
            member.member_epoch = group.group_epoch
            for tid, parts in target.items():
                group.initialized.setdefault(tid, set()).update(parts)
            send_assignment = True
        group.assignment_epoch = group.group_epoch
        self._schedule_session_timeout(group, member.member_id)
        assignment = None
        if send_assignment:
            assignment = Struct(topic_partitions=[Struct(topic_id=t, partitions=ps)
                                                  for t, ps in sorted(target.items(), key=lambda kv: str(kv[0]))])
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                      member_id=member.member_id, member_epoch=member.member_epoch,
                      heartbeat_interval_ms=self._setting(group_id, "share.heartbeat.interval.ms"),
                      assignment=assignment)

    def _leave(self, group: ShareGroup | None, group_id: str, member_id: str) -> Struct:
        if group is None or member_id not in group.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of {group_id}.")
        self.remove_member(group, member_id)
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
                      member_epoch=-1, heartbeat_interval_ms=0, assignment=None)

    def remove_member(self, group: ShareGroup, member_id: str) -> None:
        if group.members.pop(member_id, None) is None:
            return
        key = group.session_keys.pop(member_id, None)
        if key is not None:
            self.timer.release(key)
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        self.on_member_gone(group.group_id, member_id)

    def _schedule_session_timeout(self, group: ShareGroup, member_id: str) -> None:
        key = group.session_keys.get(member_id)
        if key is None:
            gid = group.group_id

            def expire() -> None:
                g = self.groups.get(gid)
                if isinstance(g, ShareGroup):
                    g.session_keys.pop(member_id, None)
                    if member_id in g.members:
                        log.info("share group %s: member %s session expired; removing it", gid, member_id)
                        self.remove_member(g, member_id)

            key = self.timer.register(expire)
            group.session_keys[member_id] = key
        self.timer.arm(key, self._setting(group.group_id, "share.session.timeout.ms"))

    def _setting(self, group_id: str, name: str) -> int:
        """A session setting of the group: its own group config, else the broker's group.share.* one."""
        value = self.group_configs(group_id).get(name)
        if value is not None:
            return int(value)
        return self.session_timeout_ms if name == "share.session.timeout.ms" else self.heartbeat_interval_ms

    def forget(self, group: ShareGroup) -> None:
        for key in group.session_keys.values():
            self.timer.release(key)
        group.session_keys.clear()

    # -- ShareGroupDescribe -------------------------------------------------------------------------------------
    def describe(self, group_id: str) -> Struct:
        group = self.groups.get(group_id)
        if not group_id:
            return _described_error(group_id, ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
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


def _described_error(group_id: str, code: int, message: str) -> Struct:
    return Struct(error_code=int(code), error_message=message, group_id=group_id, group_state="", group_epoch=0,
                  assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2147483648)

"""A classic group and its members, as Apache Kafka's ``ClassicGroup`` and ``ClassicGroupMember`` (4.x) keep them.

The group's state machine (Empty -> PreparingRebalance -> CompletingRebalance -> Stable; Dead once deleted), its
members with their parked JoinGroup/SyncGroup answers, protocol selection by vote, the checks of member ids,
instance ids and generations, the topics its consumers subscribe to (read from their consumer-protocol
subscriptions) and the ``GroupMetadataValue`` it persists. The protocol that drives it is
:mod:`klog.broker.groups.classic`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from klog.protocol import Struct
from klog.protocol.consumer_protocol import decode_subscription

from .errors import ErrorCode, GroupError

log = logging.getLogger("klog.groups")

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
EMPTY_ASSIGNMENT = b""


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = ClassicGroupState
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(S),
}


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = EMPTY_ASSIGNMENT
    join_future: asyncio.Future[Struct] | None = None
    sync_future: asyncio.Future[Struct] | None = None
    is_new: bool = False
    heartbeat_key: int = 0  # Timer key of the session (heartbeat) deadline

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


def complete_parked(future: asyncio.Future[Struct] | None, response: Struct) -> bool:
    """Answers a parked JoinGroup/SyncGroup (if one is parked); True when there was one."""
    if future is None:
        return False
    if not future.done():
        future.set_result(response)
    return True


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str, state: ClassicGroupState, now_ms: int, *, generation: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, state_timestamp: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = S.DEAD
        self.state_timestamp: int | None = now_ms if state_timestamp is None else state_timestamp
        self.generation_id = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # -- queries ----------------------------------------------------------------------------------------------
    def is_in(self, state: ClassicGroupState) -> bool:
        return self.state is state

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[S.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def state_name(self) -> str:
        return self.state.value

    def state_lower(self) -> str:
        return self.state.value.lower()

    # -- mutation ---------------------------------------------------------------------------------------------
    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: invalid transition {self.state} -> {state}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def add(self, member: ClassicMember, future: asyncio.Future[Struct] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.join_future = future
        if member.awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.awaiting_join:
                self.num_awaiting_join -= 1
                complete_parked(member.join_future, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
                member.join_future = None
            if member.sync_future is not None:
                # A removed member's parked SyncGroup is answered rather than left hanging.
                complete_parked(member.sync_future, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
                member.sync_future = None
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: ClassicMember, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, future: asyncio.Future[Struct] | None) -> None:
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif future is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        elif future is not None and member.join_future is not future:
            # The same member joined again while its previous JoinGroup was parked (a client retry): answer the
            # superseded request instead of leaving it hanging (Kafka drops it; its client times out).
            complete_parked(member.join_future, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = future

    def complete_join(self, member: ClassicMember, response: Struct) -> bool:
        if member.awaiting_join:
            complete_parked(member.join_future, response)
            member.join_future = None
            self.num_awaiting_join -= 1
            return True
        return False

    def complete_sync(self, member: ClassicMember, response: Struct) -> bool:
        if member.awaiting_sync:
            complete_parked(member.sync_future, response)
            member.sync_future = None
            return True
        return False

    def _count_protocols(self, member: ClassicMember, delta: int) -> None:
        for name, _ in member.protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.is_in(S.EMPTY):
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(name, 0) == n for name in protocol_names))

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and not leader.awaiting_join:
            for member in self.members.values():
                if member.awaiting_join:
                    self.leader_id = member.member_id
                    log.info("group %s: leader %s did not rejoin in time; %s is the new leader",
                             self.group_id, leader.member_id, member.member_id)
                    return True
            return False
        return True

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicMember:
        removed = self.members.pop(old_member_id)
        # Fence a duplicate (zombie) instance that still awaits a join or sync answer.
        if removed.join_future is not None:
            complete_parked(removed.join_future, Struct(
                error_code=ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id, protocol_name=None,
                protocol_type=None, leader="", members=[], skip_assignment=False))
            removed.join_future = None
            self.num_awaiting_join -= 1
        if removed.sync_future is not None:
            complete_parked(removed.sync_future, Struct(error_code=ErrorCode.FENCED_INSTANCE_ID, assignment=b"",
                                                        protocol_name=None, protocol_type=None))
            removed.sync_future = None
        new = ClassicMember(new_member_id, removed.group_instance_id, removed.client_id, removed.client_host,
                            removed.rebalance_timeout_ms, removed.session_timeout_ms, removed.protocol_type,
                            removed.protocols, removed.assignment)
        new.heartbeat_key = removed.heartbeat_key
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                log.info("group %s: member %s with instance id %s is fenced by %s",
                         self.group_id, member_id, instance_id, existing)
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_id: int, *,
                               transactional: bool = False) -> None:
        if self.is_in(S.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and self.is_in(S.EMPTY):
            return  # admin client or a consumer without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation_id != self.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        elif not transactional and not self.is_in(S.EMPTY):
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if not transactional and self.is_in(S.COMPLETING_REBALANCE):
            # (Kafka's ClassicGroup: a TxnOffsetCommit is not held to the group's state)
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_offset_delete(self) -> None:
        if self.is_in(S.DEAD):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) \
                and not self.uses_consumer_protocol():
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def validate_delete_group(self) -> None:
        if self.is_in(S.DEAD):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_base(self) -> Callable[[Any], int] | None:
        """Kafka's offsetExpirationCondition: the timestamp an offset's retention counts from, or None when
        the group's offsets must not expire now."""
        if self.protocol_type:
            if self.is_in(S.EMPTY):
                ts = self.state_timestamp
                if ts is not None:
                    return lambda om: ts
                return lambda om: om.commit_timestamp
            if self.uses_consumer_protocol() and self.subscribed_topics is not None and self.is_in(S.STABLE):
                return lambda om: om.commit_timestamp
            return None
        return lambda om: om.commit_timestamp

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except ValueError as e:  # ProtocolError (a malformed subscription) is one
            log.warning("group %s: cannot parse consumer subscriptions (%s); offsets of all topics are kept",
                        self.group_id, e)
            return None
        return topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members_for_leader(self) -> list[Struct]:
        return [Struct(member_id=m.member_id, group_instance_id=m.group_instance_id,
                       metadata=m.metadata(self.protocol_name)) for m in self.members.values()]

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def metadata_value(self, assignment: dict[str, bytes], now_ms: int) -> dict[str, Any]:
        """The GroupMetadataValue Kafka persists for this group with ``assignment``."""
        members = []
        for m in self.members.values():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms, "subscription": m.metadata(self.protocol_name),
                "assignment": assignment[m.member_id],
            })
        return {"protocol_type": self.protocol_type or "", "generation": self.generation_id,
                "protocol": self.protocol_name, "leader": self.leader_id,
                "current_state_timestamp": -1 if self.state_timestamp is None else self.state_timestamp,
                "members": members}


def join_error(error: int, member_id: str = UNKNOWN_MEMBER_ID, **extra: Any) -> Struct:
    fields: dict[str, Any] = dict(error_code=int(error), member_id=member_id, generation_id=-1, protocol_type=None,
                                  protocol_name=None, leader="", skip_assignment=False, members=[])
    fields.update(extra)
    return Struct(**fields)


def sync_response(error: int, assignment: bytes = b"", protocol_type: str | None = None,
                  protocol_name: str | None = None) -> Struct:
    return Struct(error_code=int(error), assignment=assignment, protocol_type=protocol_type,
                  protocol_name=protocol_name)

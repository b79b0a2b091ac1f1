"""The classic group protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), as Apache Kafka's group
coordinator runs it (the classic half of ``GroupMetadataManager`` of Kafka 4.x), answer for answer.

The groups and members it drives are :mod:`klog.broker.groups.classic_group` (states: Empty ->
PreparingRebalance -> CompletingRebalance -> Stable (-> PreparingRebalance ...); Dead once deleted). A
rebalance parks every member's JoinGroup until all known members rejoined (or the rebalance timeout passed),
picks the protocol all members support by vote, and answers; the leader's SyncGroup assignment is persisted and
handed to every member. Session timeouts, the rebalance timeout, the pending-sync timeout and
``group.initial.rebalance.delay.ms`` run on :class:`~klog.broker.coordinator.timer.Timer`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from klog.protocol import Struct
from klog.protocol.errors import error_info

from . import records as R
from .classic_group import EMPTY_ASSIGNMENT, UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupState, ClassicMember, \
    complete_parked, join_error, sync_response
from .errors import ErrorCode, GroupError, storage_error_code

if TYPE_CHECKING:  # pragma: no cover
    from klog.broker.coordinator.timer import Timer

log = logging.getLogger("klog.groups")
S = ClassicGroupState


#: JoinGroup v4+ answers a first join without member id with MEMBER_ID_REQUIRED (KIP-394).
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4
#: JoinGroup v9+ lets a static leader that rejoins in Stable skip the assignment (KIP-814).
JOIN_SUPPORTS_SKIP_ASSIGNMENT_VERSION = 9
#: Kafka's group.classic.new.member.join.timeout.ms: a new member's JoinGroup waits at most this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class ClassicGroupManager:
    """Kafka's classic-group logic over a shared group registry.

    ``write(group_id, records)`` appends ``(key, value)`` records to the group's ``__consumer_offsets``
    partition and raises on failure; ``await_writes()`` waits until the ISR has the current request's writes and
    returns the error to answer with (NONE). ``new_future()`` makes the futures parked JoinGroup/SyncGroup requests
    wait on. ``offsets_of(group_id)`` tells whether a group still has committed offsets.
    """

    def __init__(self, groups: dict[str, Any], timer: Timer, write: Callable[[str, list], None],
                 config: Any, new_future: Callable[[], asyncio.Future[Struct]],
                 await_writes: Callable[[], Awaitable[int]] | None = None) -> None:
        self.groups = groups
        self.timer = timer
        self.write = write
        self.await_writes = await_writes
        self.new_future = new_future
        self.initial_rebalance_delay_ms = int(config["group.initial.rebalance.delay.ms"])
        self.min_session_timeout_ms = int(config["group.min.session.timeout.ms"])
        self.max_session_timeout_ms = int(config["group.max.session.timeout.ms"])
        self.max_size = int(config["group.max.size"])
        self.new_member_join_timeout_ms = NEW_MEMBER_JOIN_TIMEOUT_MS
        #: Counter the benchmarks and tests read: completed rebalances.
        self.rebalances_completed = 0

    # -- helpers ----------------------------------------------------------------------------------------------
    def now(self) -> int:
        return self.timer.now()

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def get_or_create(self, group_id: str, create: bool) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Classic group {group_id} not found.")
            group = ClassicGroup(group_id, S.EMPTY, self.now())
            self.groups[group_id] = group
            return group
        if not isinstance(group, ClassicGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")
        return group

    def _register_member_timer(self, group: ClassicGroup, member: ClassicMember) -> None:
        gid, mid_holder = group.group_id, member

        def expire() -> None:
            self._expire_heartbeat(gid, mid_holder.member_id, mid_holder.heartbeat_key)

        member.heartbeat_key = self.timer.register(expire)

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, timeout_ms: int | None = None) -> None:
        if member.heartbeat_key == 0:
            self._register_member_timer(group, member)
        self.timer.arm(member.heartbeat_key, member.session_timeout_ms if timeout_ms is None else timeout_ms)

    def _cancel_heartbeat(self, member: ClassicMember) -> None:
        if member.heartbeat_key:
            self.timer.release(member.heartbeat_key)
            member.heartbeat_key = 0

    def _pending_key(self, group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("pending-heartbeat", group_id, member_id)

    def _write_or_error(self, group_id: str, records: list) -> int:
        try:
            self.write(group_id, records)
            return ErrorCode.NONE
        except Exception as exc:  # noqa: BLE001 - storage failures become Kafka error codes
            code = storage_error_code(exc)
            log.warning("group %s: writing group metadata failed (%s); answering %s", group_id, exc,
                        error_info(code).name)
            return code

    # -- JoinGroup --------------------------------------------------------------------------------------------
    async def join(self, request: Any, api_version: int, client_id: str, client_host: str) -> Struct:
        group_id = request.group_id
        if not group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, request.member_id)
        session_timeout = request.session_timeout_ms
        if not self.min_session_timeout_ms <= session_timeout <= self.max_session_timeout_ms:
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout = request.rebalance_timeout_ms if api_version >= 1 else session_timeout
        if rebalance_timeout is None or rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        instance_id = request.group_instance_id if api_version >= 5 else None
        member_id = request.member_id
        future = self.new_future()
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        is_new_group = group_id not in self.groups
        try:
            group = self.get_or_create(group_id, is_unknown)
        except GroupError:
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

        settle: Callable[[int], None] | None = None
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            complete_parked(future, join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            settle = self._join_new_member(group, request, api_version, client_id, client_host, instance_id,
                                           protocols, rebalance_timeout, future)
        else:
            self._join_existing_member(group, request, member_id, instance_id, protocols, rebalance_timeout,
                                       future, client_id, client_host)
        if is_new_group and group_id in self.groups:
            code = self._write_or_error(group_id, [R.group_metadata_record(group_id, {
                "protocol_type": "", "generation": 0, "protocol": None, "leader": None,
                "current_state_timestamp": group.state_timestamp or -1, "members": []})])
            if code != ErrorCode.NONE:
                # Kafka's runtime reverts a failed write: the group goes, and the request is answered with the
                # mapped error unless it was answered already (MEMBER_ID_REQUIRED, a refused protocol)
                complete_parked(future, join_error(code, member_id))
                self._drop_unwritten_group(group)
        if settle is not None and self.await_writes is not None:
            settle(await self.await_writes())
        return await future

    def _drop_unwritten_group(self, group: ClassicGroup) -> None:
        """A group this request made whose first record was refused: gone from memory with its timers (its
        members, at most the joining one, were answered)."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        for member in group.members.values():
            self._cancel_heartbeat(member)
        for member_id in group.pending_join_members:
            self.timer.cancel(self._pending_key(group.group_id, member_id))
        for kind in ("join", "sync"):
            self.timer.cancel((kind, group.group_id))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < self.max_size
        return member_id in group.members or len(group.members) < self.max_size

    def _join_new_member(self, group: ClassicGroup, request: Any, api_version: int, client_id: str,
                         client_host: str, instance_id: str | None, protocols: list[tuple[str, bytes]],
                         rebalance_timeout: int, future: asyncio.Future[Struct]) -> Callable[[int], None] | None:
        """A JoinGroup without member id; returns what to call with the ISR's outcome of a write it made."""
        if group.is_in(S.DEAD):
            complete_parked(future, join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return None
        if not group.supports_protocols(request.protocol_type, {name for name, _ in protocols}):
            complete_parked(future, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return None
        new_member_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                log.info("group %s: static member %s rejoins with a new member id %s (replacing %s)",
                         group.group_id, instance_id, new_member_id, existing)
                return self._update_static_member(group, request, api_version, instance_id, existing,
                                                  new_member_id, protocols, rebalance_timeout, future)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, instance_id, protocols,
                                               rebalance_timeout, client_id, client_host, future)
        elif api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            group.pending_join_members.add(new_member_id)
            gid = group.group_id
            self.timer.schedule(self._pending_key(gid, new_member_id), request.session_timeout_ms,
                                lambda: self._expire_pending_member(gid, new_member_id))
            complete_parked(future, join_error(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, None, protocols, rebalance_timeout,
                                           client_id, client_host, future)
        return None

    def _join_existing_member(self, group: ClassicGroup, request: Any, member_id: str, instance_id: str | None,
                              protocols: list[tuple[str, bytes]], rebalance_timeout: int,
                              future: asyncio.Future[Struct], client_id: str, client_host: str) -> None:
        if group.is_in(S.DEAD):
            complete_parked(future, join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in protocols}):
            complete_parked(future, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:  # Kafka asserts this cannot happen; answer it instead of crashing
                complete_parked(future, join_error(ErrorCode.INVALID_REQUEST, member_id))
                return
            self.timer.cancel(self._pending_key(group.group_id, member_id))
            self._add_member_and_rebalance(group, request, member_id, None, protocols, rebalance_timeout,
                                           client_id, client_host, future)
            return
        try:
            group.validate_member(member_id, instance_id)
        except GroupError as e:
            complete_parked(future, join_error(e.code, member_id))
            return
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout,
                                              request.session_timeout_ms, future)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                complete_parked(future, self._current_generation_response(
                    group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout,
                                                  request.session_timeout_ms, future)
        elif group.is_in(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader rejoining forces a rebalance (e.g. new topic metadata); so does new metadata.
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout,
                                                  request.session_timeout_ms, future)
            else:
                complete_parked(future, self._current_generation_response(group, member_id, with_members=False))
        else:
            log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id,
                        group.state)
            complete_parked(future, join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _current_generation_response(self, group: ClassicGroup, member_id: str, *, with_members: bool,
                                     skip_assignment: bool = False, leader: str | None = None) -> Struct:
        """The JoinGroup answer for the group's current generation; ``leader`` names another leader than the
        group's current one (a replaced static member is told the leader from before its rejoin)."""
        leader_id = group.leader_id if leader is None else leader
        return Struct(error_code=ErrorCode.NONE, generation_id=group.generation_id,
                      protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                      leader=leader_id or "", skip_assignment=skip_assignment, member_id=member_id,
                      members=group.current_members_for_leader() if with_members else [])

    def _add_member_and_rebalance(self, group: ClassicGroup, request: Any, member_id: str,
                                  instance_id: str | None, protocols: list[tuple[str, bytes]],
                                  rebalance_timeout: int, client_id: str, client_host: str,
                                  future: asyncio.Future[Struct]) -> None:
        member = ClassicMember(member_id, instance_id, client_id, client_host, rebalance_timeout,
                               request.session_timeout_ms, request.protocol_type, protocols)
        member.is_new = True
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member, future)
        # A new member cannot heartbeat while its JoinGroup is parked: bound its wait instead.
        self.reschedule_heartbeat(group, member, self.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout: int,
                                     session_timeout: int, future: asyncio.Future[Struct]) -> None:
        group.update_member(member, protocols, rebalance_timeout, session_timeout, future)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoining")

    def _update_static_member(self, group: ClassicGroup, request: Any, api_version: int, instance_id: str,
                              old_member_id: str, new_member_id: str, protocols: list[tuple[str, bytes]],
                              rebalance_timeout: int, future: asyncio.Future[Struct]) -> Callable[[int], None] | None:
        """A known static member's JoinGroup with no member id: the new id replaces the old one. Returns what to
        call with the ISR's outcome of the write it made (a rejoin in Stable keeping the protocol), if it made
        one."""
        current_leader = group.leader_id
        new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        # The old id's session timer now belongs to the new id.
        self.timer.release(new_member.heartbeat_key)
        new_member.heartbeat_key = 0
        self.reschedule_heartbeat(group, new_member)
        old_protocols = new_member.protocols
        old_rebalance, old_session = new_member.rebalance_timeout_ms, new_member.session_timeout_ms
        group.update_member(new_member, protocols, rebalance_timeout, request.session_timeout_ms, future)

        if group.is_in(S.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                log.info("group %s: static member %s rejoined in Stable without changing the protocol; "
                         "no rebalance", group.group_id, instance_id)
                code = self._write_or_error(group.group_id, [R.group_metadata_record(
                    group.group_id, group.metadata_value(group.group_assignment(), self.now()))])

                def settle(code: int) -> None:
                    """The write's outcome (Kafka's append callback): the replacement answered, or reverted."""
                    if code == ErrorCode.NONE:
                        is_leader = api_version >= JOIN_SUPPORTS_SKIP_ASSIGNMENT_VERSION and \
                            group.is_leader(new_member_id)
                        group.complete_join(new_member, self._current_generation_response(
                            group, new_member_id, with_members=is_leader, skip_assignment=is_leader,
                            leader=None if is_leader else current_leader or ""))
                        return
                    if group.static_members.get(instance_id) == new_member_id:   # not replaced again meanwhile
                        group.update_member(new_member, old_protocols, old_rebalance, old_session, None)
                        old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                        self.timer.release(old.heartbeat_key)
                        old.heartbeat_key = 0
                        self.reschedule_heartbeat(group, old)
                    complete_parked(future, join_error(code, UNKNOWN_MEMBER_ID, generation_id=group.generation_id,
                                                       protocol_name=group.protocol_name,
                                                       protocol_type=group.protocol_type, leader=current_leader or ""))

                if code != ErrorCode.NONE or self.await_writes is None:
                    settle(code)
                else:
                    return settle   # once the ISR has the write
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {instance_id} changed the selected protocol")
        elif group.is_in(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join_phase(group)
        return None

    # -- rebalance machinery ----------------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        if group.previous_state is S.EMPTY:
            return  # the initial rebalance waits for its delay
        if not group.has_all_members_joined():
            return
        self._complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Starts a rebalance of ``group`` (a group downgraded from the consumer protocol starts with one)."""
        self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.timer.cancel(("sync", group.group_id))
        initial = group.is_in(S.EMPTY)
        gid = group.group_id
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(("join", gid), delay,
                                lambda: self._try_complete_initial_rebalance(gid, delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self.now())
        log.info("group %s: preparing to rebalance (generation %d): %s", gid, group.generation_id, reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self.timer.schedule(("join", gid), group.rebalance_timeout_ms(),
                                    lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.classic_group(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(("join", group_id), new_delay,
                                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.classic_group(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(("join", gid))
        if not group.is_in(S.PREPARING_REBALANCE):
            return  # a stale timer (the group moved on); Kafka's timer key cancellation makes this unreachable
        not_rejoined = [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]
        for m in not_rejoined:
            group.remove(m.member_id)
            self._cancel_heartbeat(m)
        if not_rejoined:
            log.info("group %s: removed members that did not rejoin: %s", gid, [m.member_id for m in not_rejoined])
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s: no member rejoined; waiting another rebalance timeout", gid)
            self.timer.schedule(("join", gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return
        now = self.now()
        group.init_next_generation(now)
        if group.is_in(S.EMPTY):
            log.info("group %s: generation %d is empty", gid, group.generation_id)
            self._write_or_error(gid, [R.group_metadata_record(gid, group.metadata_value({}, now))])
            self._after_group_emptied(group)
            return
        log.info("group %s: stabilized generation %d with %d members (protocol %s)", gid, group.generation_id,
                 len(group.members), group.protocol_name)
        self.rebalances_completed += 1
        leader_members = group.current_members_for_leader()
        for member in list(group.members.values()):
            response = Struct(error_code=ErrorCode.NONE, generation_id=group.generation_id,
                              protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                              leader=group.leader_id or "", skip_assignment=False, member_id=member.member_id,
                              members=leader_members if group.is_leader(member.member_id) else [])
            group.complete_join(member, response)
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timer.schedule(("sync", gid), group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(gid, generation))

    def _after_group_emptied(self, group: ClassicGroup) -> None:
        """Hook for the coordinator (offset expiry bookkeeping); nothing to do here."""

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.classic_group(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            pending = list(group.pending_sync_members)
            for member_id in pending:
                member = group.members.get(member_id)
                group.remove(member_id)
                if member is not None:
                    self._cancel_heartbeat(member)
            log.info("group %s: removed members that sent no SyncGroup in time: %s", group_id, pending)
            self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            response = sync_response(error, member.assignment, group.protocol_type if ok else None,
                                     group.protocol_name if ok else None)
            if group.complete_sync(member, response):
                self.reschedule_heartbeat(group, member)

    def _expire_heartbeat(self, group_id: str, member_id: str, key: int) -> None:
        group = self.classic_group(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        member = group.members.get(member_id)
        if member is None or member.heartbeat_key != key:
            return
        if member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s session expired; removing it", group_id, member_id)
        self._remove_member_and_update_group(group, member, "heartbeat expiration")

    def _expire_pending_member(self, group_id: str, member_id: str) -> None:
        group = self.classic_group(group_id)
        if group is None or not group.is_pending_member(member_id):
            return
        log.info("group %s: pending member %s never rejoined; dropping it", group_id, member_id)
        group.remove(member_id)
        if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel_heartbeat(member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # -- SyncGroup --------------------------------------------------------------------------------------------
    async def sync(self, request: Any, api_version: int) -> Struct:
        if not request.group_id:
            return sync_response(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(request.group_id)
        if group is None or group.is_empty() or not isinstance(group, ClassicGroup):
            return sync_response(ErrorCode.UNKNOWN_MEMBER_ID)
        member_id = request.member_id
        instance_id = request.group_instance_id if api_version >= 3 else None
        if group.is_in(S.DEAD):
            return sync_response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            group.validate_member(member_id, instance_id)
        except GroupError as e:
            return sync_response(e.code)
        if request.generation_id != group.generation_id:
            return sync_response(ErrorCode.ILLEGAL_GENERATION)
        if api_version >= 5 and (_inconsistent(request.protocol_type, group.protocol_type)
                                 or _inconsistent(request.protocol_name, group.protocol_name)):
            return sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(S.PREPARING_REBALANCE):
            return sync_response(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.is_in(S.COMPLETING_REBALANCE):
            future = self.new_future()
            if member.sync_future is not None:  # a retried SyncGroup supersedes the parked one
                complete_parked(member.sync_future, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_future = future
            group.pending_sync_members.discard(member_id)
            if group.is_leader(member_id):
                log.info("group %s: assignment received from leader %s for generation %d", group.group_id,
                         member_id, group.generation_id)
                assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
                for mid in group.members:
                    assignment.setdefault(mid, EMPTY_ASSIGNMENT)
                code = self._write_or_error(group.group_id, [R.group_metadata_record(
                    group.group_id, group.metadata_value(assignment, self.now()))])
                if code == ErrorCode.NONE and self.await_writes is not None:
                    # every member gets the assignment only once the ISR has it (Kafka's append callback); the
                    # group may have moved on meanwhile, as the check below sees
                    code = await self.await_writes()
                if group.is_in(S.COMPLETING_REBALANCE) and request.generation_id == group.generation_id:
                    if code != ErrorCode.NONE:
                        self._reset_and_propagate_assignment(group, code)
                        self._maybe_prepare_rebalance_or_complete_join(group, f"error {code} storing assignment")
                    else:
                        for m in group.members.values():
                            m.assignment = assignment.get(m.member_id, EMPTY_ASSIGNMENT)
                        self._propagate_assignment(group, ErrorCode.NONE)
                        group.transition_to(S.STABLE, self.now())
            return await future
        # Stable: hand out the current assignment.
        group.pending_sync_members.discard(member_id)
        return sync_response(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)

    # -- Heartbeat --------------------------------------------------------------------------------------------
    def heartbeat(self, request: Any, api_version: int) -> int:
        """The Heartbeat error code (the hot path: no allocation beyond the lookups)."""
        group_id = request.group_id
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not isinstance(group, ClassicGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member_id = request.member_id
        instance_id = request.group_instance_id if api_version >= 3 else None
        try:
            group.validate_member(member_id, instance_id)
        except GroupError as e:
            return e.code
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        state = group.state
        if state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self.reschedule_heartbeat(group, member)
        if state is S.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup -------------------------------------------------------------------------------------------
    def leave(self, request: Any, api_version: int) -> Struct:
        if not request.group_id:
            return Struct(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID, members=[])
        if api_version >= 3:
            identities = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            identities = [(request.member_id, None)]
        group = self.groups.get(request.group_id)
        if group is None or not isinstance(group, ClassicGroup):
            # Kafka: the group is not found -> every member UNKNOWN_MEMBER_ID (top-level for v0-2).
            results = [Struct(member_id=mid, group_instance_id=iid, error_code=ErrorCode.UNKNOWN_MEMBER_ID)
                       for mid, iid in identities]
            return _leave_response(api_version, ErrorCode.NONE, results)
        if group.is_in(S.DEAD):
            return Struct(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, members=[])
        results = []
        for member_id, instance_id in identities:
            error: int = ErrorCode.NONE
            if member_id == UNKNOWN_MEMBER_ID:
                if instance_id is not None and instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[instance_id])
                else:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(self._pending_key(group.group_id, member_id))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                    self._remove_current_member(group, member_id)
                except GroupError as e:
                    error = e.code
            results.append(Struct(member_id=member_id, group_instance_id=instance_id, error_code=error))
        left = [r.member_id for r in results if r.error_code == ErrorCode.NONE]
        if left:
            log.info("group %s: members %s left", group.group_id, left)
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"members {left} left")
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return _leave_response(api_version, ErrorCode.NONE, results)

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self._cancel_heartbeat(member)
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # -- loading ----------------------------------------------------------------------------------------------
    def load_group(self, group_id: str, value: dict[str, Any]) -> ClassicGroup:
        members = value.get("members") or []
        protocol_type = value.get("protocol_type") or None
        ts = value.get("current_state_timestamp", -1)
        group = ClassicGroup(group_id, S.STABLE if members else S.EMPTY, self.now(),
                             generation=value["generation"], protocol_type=protocol_type,
                             protocol_name=value.get("protocol"), leader_id=value.get("leader"),
                             state_timestamp=None if ts is None or ts < 0 else ts)
        for m in members:
            rebalance = m.get("rebalance_timeout", -1)
            member = ClassicMember(m["member_id"], m.get("group_instance_id"), m["client_id"], m["client_host"],
                                   m["session_timeout"] if rebalance is None or rebalance < 0 else rebalance,
                                   m["session_timeout"], protocol_type or "",
                                   [(group.protocol_name or "", bytes(m["subscription"]))], bytes(m["assignment"]))
            group.add(member)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def on_loaded(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            self.reschedule_heartbeat(group, member)
        if len(group.members) > self.max_size:
            self._prepare_rebalance(group, f"loaded group is over capacity {self.max_size}")


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _leave_response(api_version: int, error: int, results: list[Struct]) -> Struct:
    if api_version < 3:
        # One member, answered at the top level.
        top = results[0].error_code if results and error == ErrorCode.NONE else error
        return Struct(throttle_time_ms=0, error_code=top, members=[])
    return Struct(throttle_time_ms=0, error_code=error, members=results)

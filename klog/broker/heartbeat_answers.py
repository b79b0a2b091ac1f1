"""Heartbeats answered on the connection (issue 38: Heartbeat's cost per request).

A classic group's Heartbeat (API key 12) is the commonest group request and its usual answer never changes: a
member of a Stable group, at the group's generation, with its member id (and, from v3, its group instance id),
gets ``error_code=NONE`` and its session deadline moved on. Through the handler that costs a header and body
decode, a RequestContext, the group routing, the coordinator runtime's write scope and a response encode, all in
coroutines. :class:`HeartbeatAnswers` decodes only the request's few fields (struct reads), checks exactly what
:meth:`klog.broker.groups.classic.ClassicGroupManager.heartbeat` checks for that answer, moves the deadline the
same way (:meth:`~klog.broker.groups.classic.ClassicGroupManager.reschedule_heartbeat`) and returns the answer
encoded once per version by the handler's encoder, its correlation id replaced.

Everything else takes the handler, unchanged: a group not Stable (a rebalance: REBALANCE_IN_PROGRESS; Completing:
the handler), an unknown group or member, a wrong generation or instance id, a group of the consumer protocol, a
coordinator not active or not owning the group's partition, a member without a session timer, a request with
tagged fields, a null or non-UTF-8 string, trailing bytes, or a version ApiVersions does not advertise. The
connection does not ask at all under an authorizer (the state builds none: Read on the group must be checked),
a client quota, an unfinished SASL login, request tracing, or ``klog.heartbeat.fast.enable=false``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from klog.broker.groups.classic_group import ClassicGroup, ClassicGroupState
from klog.protocol import encode_response
from klog.protocol.error_codes import ErrorCode
from klog.protocol.struct import Struct

if TYPE_CHECKING:
    from klog.broker.groups.coordinator import GroupCoordinator

__all__ = ["HEARTBEAT_KEY", "HeartbeatAnswers"]

HEARTBEAT_KEY = 12
#: Heartbeat versions this path decodes (v4 is the first flexible one)
_MAX_VERSION = 4
_STABLE = ClassicGroupState.STABLE


def _answers() -> list[tuple[bytes, bytes]]:
    """Per version: the size prefix and what follows the correlation id, of the handler's NONE answer (the
    Struct GroupCoordinator._heartbeat builds, by the encoder the connection's _respond uses)."""
    out = []
    body = Struct(throttle_time_ms=0, error_code=int(ErrorCode.NONE))
    for version in range(_MAX_VERSION + 1):
        prefix, whole = encode_response(HEARTBEAT_KEY, version, 0, body)
        out.append((bytes(prefix), bytes(whole[4:])))
    return out


class _Unserved(Exception):
    """A field this path does not decode (a string of 127 bytes or more): the handler answers."""


def _compact_string(frame: bytes, pos: int) -> tuple[str | None, int]:
    """The compact nullable string at ``pos`` (one length byte: at most 126 bytes) and the position after it."""
    n = frame[pos] - 1
    if n < 0:
        return None, pos + 1
    if n >= 0x7F:
        raise _Unserved
    end = pos + 1 + n
    return frame[pos + 1:end].decode(), end


def _string(frame: bytes, pos: int) -> tuple[str | None, int]:
    """The int16-length nullable string at ``pos`` and the position after it."""
    n = frame[pos] << 8 | frame[pos + 1]
    if n == 0xFFFF:
        return None, pos + 2
    if n >= 0x8000:
        raise _Unserved
    end = pos + 2 + n
    return frame[pos + 2:end].decode(), end


class HeartbeatAnswers:
    """The NONE answers of common Heartbeats, given without the handler (see the module's docstring)."""

    __slots__ = ("_coordinator", "_versions", "_answers", "hits")

    def __init__(self, coordinator: GroupCoordinator, versions: dict[int, tuple[int, int]]) -> None:
        self._coordinator = coordinator
        #: what ApiVersions advertises (the state's mapping: a version outside it takes the handler, which refuses)
        self._versions = versions
        self._answers = _answers()
        #: Heartbeats answered here (a counter for tests and operators)
        self.hits = 0

    def answer(self, frame: Any) -> bytes | None:
        """The whole answer frame (size prefix first) to the Heartbeat ``frame`` (its API key checked by the
        caller) after moving the member's session deadline, or None, having changed nothing: the handler
        answers it."""
        if type(frame) is not bytes:   # a frame in a pooled buffer
            frame = bytes(frame)
        end = len(frame)
        if end < 10:
            return None
        version = frame[2] << 8 | frame[3]
        if version > _MAX_VERSION or frame[0:2] != b"\x00\x0c":
            return None
        advertised = self._versions.get(HEARTBEAT_KEY)
        if advertised is None or not advertised[0] <= version <= advertised[1]:
            return None
        n = frame[8] << 8 | frame[9]
        if n == 0xFFFF:   # a null client id
            pos = 10
        elif n >= 0x8000:
            return None
        else:
            pos = 10 + n
            if pos > end:
                return None
            client_id = frame[10:pos]
            if not client_id.isascii():
                try:
                    client_id.decode()
                except UnicodeDecodeError:
                    return None
        try:
            if version >= 4:   # flexible: no tagged fields in the header or body; strings of up to 126 bytes
                if frame[pos]:
                    return None
                group_id, pos = _compact_string(frame, pos + 1)
                generation = int.from_bytes(frame[pos:pos + 4], "big", signed=True)
                member_id, pos = _compact_string(frame, pos + 4)
                instance_id, pos = _compact_string(frame, pos)
                if group_id is None or member_id is None or frame[pos]:
                    return None
                pos += 1
            else:
                group_id, pos = _string(frame, pos)
                generation = int.from_bytes(frame[pos:pos + 4], "big", signed=True)
                member_id, pos = _string(frame, pos + 4)
                instance_id = None
                if version >= 3:
                    instance_id, pos = _string(frame, pos)
                if group_id is None or member_id is None:
                    return None
        except (IndexError, UnicodeDecodeError, _Unserved):
            return None
        if pos != end:   # cut short (a string past the end) or trailing bytes
            return None
        coordinator = self._coordinator
        group = coordinator.groups.get(group_id)
        if type(group) is not ClassicGroup or group.state is not _STABLE or generation != group.generation_id:
            return None
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            return None
        member = group.members.get(member_id)
        if member is None or not member.heartbeat_key or coordinator.runtime.unavailable(group_id):
            return None
        coordinator.classic.reschedule_heartbeat(group, member)
        self.hits += 1
        prefix, rest = self._answers[version]
        return prefix + frame[4:8] + rest

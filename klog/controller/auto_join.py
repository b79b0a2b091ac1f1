"""KIP-853 ``controller.quorum.auto.join.enable``: what a controller whose voter key (node id, directory id) is not a
voter sends the quorum leader itself (pure: :func:`decide_auto_join` on an :class:`AutoJoinState`; the IO is
``klog.controller.node.ControllerNode``'s, next to its UpdateRaftVoter).

As Kafka's KafkaRaftClient (``pollFollowerAsObserver`` / ``shouldSendAddOrRemoveVoterRequest``): an observer that
may become a voter, with auto-join on and the quorum's kraft.version 1, asks the leader once per
``controller.quorum.fetch.timeout.ms`` (Kafka's update-voter-set period) to remove the voter holding its node id
under another directory id (its disk was replaced and reformatted), else to add itself; the leader decides whether
it has caught up (AddRaftVoter's REQUEST_TIMED_OUT until it has).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping

__all__ = ["AUTO_JOIN_BACKOFF_MAX_MS", "AddSelf", "AutoJoinState", "RemoveStaleSelf", "auto_join_backoff_ms",
           "decide_auto_join"]

ZERO_UUID = uuid.UUID(int=0)
#: The longest an auto-joining controller waits between two requests after failures (doubling from
#: controller.quorum.fetch.timeout.ms, Kafka's update-voter-set period).
AUTO_JOIN_BACKOFF_MAX_MS = 30_000


@dataclasses.dataclass(frozen=True)
class AutoJoinState:
    """A controller's view of the quorum while it fetches the log as an observer (its voter key, node id and
    directory id, is not in the voter set)."""

    node_id: int
    directory_id: uuid.UUID               # this controller's (meta.properties' directory.id)
    enabled: bool                         # controller.quorum.auto.join.enable
    dynamic: bool                         # kraft.version 1 (formatted voter set): voters can change
    leader_id: int                        # as the leader's last fetch answer named it (<= 0: not known)
    voters: frozenset[int]                # the voter set as last learnt from the leader
    directory_ids: Mapping[int, uuid.UUID]   # the voters' directory ids as known (missing / zero: not known)
    in_flight: bool                       # a request sent earlier has not been answered yet
    now_ms: float
    next_attempt_ms: float                # not before this (the period after the last answer, or the backoff)


@dataclasses.dataclass(frozen=True)
class AddSelf:
    """Send the leader AddRaftVoter for this controller's own voter key."""

    leader_id: int


@dataclasses.dataclass(frozen=True)
class RemoveStaleSelf:
    """Send the leader RemoveRaftVoter for the voter with this controller's node id and another directory id (its
    disk was replaced and reformatted); AddSelf follows once that voter is gone."""

    leader_id: int
    stale_directory_id: uuid.UUID


def decide_auto_join(state: AutoJoinState) -> AddSelf | RemoveStaleSelf | None:
    """As Kafka's KafkaRaftClient.pollFollowerAsObserver with auto-join on: once per period, an observer that can
    become a voter (a controller of a kraft.version 1 quorum) asks the leader to remove the voter that holds its
    node id under another directory id, else to add itself. Nothing while the leader is unknown, a request is
    unanswered, the period has not passed, or its own key is a voter. The leader decides whether it has caught up
    (REQUEST_TIMED_OUT until it has: the next period asks again)."""
    if not state.enabled or not state.dynamic or state.leader_id <= 0 or state.in_flight:
        return None
    if state.now_ms < state.next_attempt_ms:
        return None
    if state.node_id not in state.voters:
        return AddSelf(state.leader_id)
    known = state.directory_ids.get(state.node_id, ZERO_UUID)
    if known == ZERO_UUID or known == state.directory_id:
        return None   # its own key is a voter (an unknown directory id names any): nothing to send
    return RemoveStaleSelf(state.leader_id, known)


def auto_join_backoff_ms(period_ms: int, failures: int) -> int:
    """The wait before the next auto-join request: the period (controller.quorum.fetch.timeout.ms, as Kafka waits
    after any answer), doubled for each consecutive request that got no answer or an unexpected error, at most
    :data:`AUTO_JOIN_BACKOFF_MAX_MS`."""
    return int(min(max(period_ms, 1) * (2 ** min(max(failures, 0), 16)), max(AUTO_JOIN_BACKOFF_MAX_MS, period_ms)))

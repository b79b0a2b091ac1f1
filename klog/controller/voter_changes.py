"""KIP-853 voter changes: AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82) on a controller listener.

Pure part: :func:`decide_add_voter` / :func:`decide_remove_voter` / :func:`decide_update_voter` take a
:class:`VoterSetState` (the leader's view, taken on the event loop) and the decoded request, and answer either an
error (Kafka's code and message, as ``AddVoterHandler`` / ``RemoveVoterHandler`` of Kafka's raft module answer) or
the change to make. IO part (:class:`VoterChanges`): the leader first commits a RegisterControllerRecord with the
new voter's endpoints (every member learns from the log how to reach it; the image keeps it, so snapshots do
too), then the raft conf change (raft-rs AddNode / RemoveNode, written as a VotersRecord), and answers once that
is committed.

As Kafka's leader, klog's admits a new voter only when it is a known observer (a controller formatted
``--no-initial-controllers`` fetches the committed log from the leader until it is added, with its directory id)
that has had the leader's whole committed log and fetched within the last hour; REQUEST_TIMED_OUT otherwise
(``kafka-metadata-quorum add-controller`` fails, the operator retries). UpdateRaftVoter (a voter whose controller
endpoint changed tells the leader at startup) commits the new endpoint in a RegisterControllerRecord, and every
member reaches the voter there from then on. klog keeps a voter's directory id as the ``incarnation_id`` of its
RegisterControllerRecord; the initial voters' ones come from the voter set ``format`` wrote.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from klog._native import NotLeaderError, RaftError
from klog.controller.quorum import Voter
from klog.controller.raft import ObserverState
from klog.protocol.errors import ErrorCode, error_info

if TYPE_CHECKING:
    from klog.controller.node import ControllerNode
    from klog.protocol.message_types import (
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        RemoveRaftVoterRequest,
        RemoveRaftVoterResponse,
        UpdateRaftVoterRequest,
        UpdateRaftVoterResponse,
    )

__all__ = ["STATIC_QUORUM_MESSAGE", "AddVoter", "RemoveVoter", "UpdateVoter", "VoterChangeError", "VoterChanges",
           "VoterSetState", "decide_add_voter", "decide_remove_voter", "decide_update_voter", "static_quorum_refusal"]

log = logging.getLogger("klog.controller")

ZERO_UUID = uuid.UUID(int=0)
#: The longest a voter change waits for its records to commit when the request names no (or a larger) timeout.
MAX_VOTER_CHANGE_TIMEOUT_MS = 60_000
#: AddRaftVoter admits an observer that fetched this recently (Kafka's LeaderState.isReplicaCaughtUp: an hour).
ADD_VOTER_FETCHED_WITHIN_MS = 3_600_000
#: The kraft.version a dynamic voter set runs (KIP-853's reconfiguration needs 1).
KRAFT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class VoterSetState:
    """The answering member's view of the quorum."""

    node_id: int
    is_leader: bool
    leader_id: int                        # -1: unknown
    cluster_id: str | None
    dynamic: bool                         # kraft.version 1: formatted with a voter set (not controller.quorum.voters)
    voters: frozenset[int]
    directory_ids: Mapping[int, uuid.UUID]   # what is known of the voters' directory ids
    change_pending: bool                  # a voter change is still being committed
    listener_name: str                    # the controller listener the quorum's members talk on
    #: the nodes fetching the committed log from this leader as observers (controllers waiting to be added)
    observers: Mapping[int, ObserverState] = dataclasses.field(default_factory=dict)
    now_ms: float = 0.0                   # wall clock, as the observers' fetch times


@dataclasses.dataclass(frozen=True)
class VoterChangeError:
    error_code: int
    message: str


@dataclasses.dataclass(frozen=True)
class AddVoter:
    voter: Voter
    directory_id: uuid.UUID


@dataclasses.dataclass(frozen=True)
class RemoveVoter:
    node_id: int


@dataclasses.dataclass(frozen=True)
class UpdateVoter:
    voter: Voter              # its new endpoint on the quorum's listener
    directory_id: uuid.UUID


def _error(code: ErrorCode, message: str) -> VoterChangeError:
    return VoterChangeError(code, message)


#: why a quorum of ``controller.quorum.voters`` (kraft.version 0) changes no voter
STATIC_QUORUM_MESSAGE = ("the voter set is static (controller.quorum.voters, kraft.version 0): voters are changed "
                         "only in a quorum formatted with controller.quorum.bootstrap.servers")


def static_quorum_refusal() -> AddRaftVoterResponse:
    """AddRaftVoter's / RemoveRaftVoter's answer where the voter set cannot change (a single voter's quorum too)."""
    return answer(_error(ErrorCode.UNSUPPORTED_VERSION, STATIC_QUORUM_MESSAGE))


def _common(state: VoterSetState, request: AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
            ) -> VoterChangeError | None:
    cid = getattr(request, "cluster_id", None)
    if cid is not None and state.cluster_id is not None and cid != state.cluster_id:
        return _error(ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster id {cid} is not this quorum's ({state.cluster_id})")
    if not state.is_leader:
        return _error(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {state.node_id} is not the quorum leader (leader: "
                                                f"{state.leader_id})")
    if not state.dynamic:
        return _error(ErrorCode.UNSUPPORTED_VERSION, STATIC_QUORUM_MESSAGE)
    if state.change_pending:
        return _error(ErrorCode.REQUEST_TIMED_OUT, "another voter change is still being committed; retry")
    return None


def decide_add_voter(state: VoterSetState, request: AddRaftVoterRequest) -> AddVoter | VoterChangeError:
    """AddRaftVoter: the voter to add, or why not."""
    refused = _common(state, request)
    if refused is not None:
        return refused
    voter_id = int(request.voter_id)
    if voter_id < 1:
        return _error(ErrorCode.INVALID_REQUEST, f"voter id {voter_id}: a controller's node.id is at least 1")
    if voter_id in state.voters:
        return _error(ErrorCode.DUPLICATE_VOTER, f"node {voter_id} is already a voter")
    endpoint = _quorum_endpoint(state, voter_id, request)
    if isinstance(endpoint, VoterChangeError):
        return endpoint
    asked = request.voter_directory_id or ZERO_UUID
    seen = state.observers.get(voter_id)
    if (seen is None or seen.directory_id != asked or seen.caught_up_ms <= 0
            or seen.fetched_ms <= state.now_ms - ADD_VOTER_FETCHED_WITHIN_MS):
        why = ("it is not fetching the log from this leader as an observer" if seen is None else
               f"the observer fetching as node {voter_id} has directory id {seen.directory_id}"
               if seen.directory_id != asked else "it has not caught up with the leader's committed log")
        return _error(ErrorCode.REQUEST_TIMED_OUT, f"Aborted add voter operation for node {voter_id} (directory {asked}) "
                                           f"since it is lagging behind: {why}")
    return AddVoter(endpoint, asked)


def _quorum_endpoint(state: VoterSetState, voter_id: int, request: AddRaftVoterRequest | UpdateRaftVoterRequest
                     ) -> Voter | VoterChangeError:
    """The voter's endpoint on the quorum's listener among the request's listeners."""
    mine = [ep for ep in (request.listeners or []) if ep.name == state.listener_name]
    if not mine:
        names = sorted({ep.name for ep in (request.listeners or [])})
        return _error(ErrorCode.INVALID_REQUEST, f"voter {voter_id}'s listeners {names} have no endpoint for the quorum's "
                                         f"listener {state.listener_name}")
    ep = mine[0]
    if not ep.host or not 0 < int(ep.port) < 65536:
        return _error(ErrorCode.INVALID_REQUEST, f"listener {ep.name}: no usable host:port ({ep.host}:{ep.port})")
    return Voter(voter_id, ep.host, int(ep.port))


def decide_remove_voter(state: VoterSetState, request: RemoveRaftVoterRequest) -> RemoveVoter | VoterChangeError:
    """RemoveRaftVoter: the voter to remove, or why not (a voter key names an id and a directory id)."""
    refused = _common(state, request)
    if refused is not None:
        return refused
    voter_id = int(request.voter_id)
    known = state.directory_ids.get(voter_id, ZERO_UUID)
    asked = request.voter_directory_id or ZERO_UUID
    if voter_id not in state.voters or (known != ZERO_UUID and asked != known):
        return _error(ErrorCode.VOTER_NOT_FOUND, f"no voter {voter_id} with directory id {asked} (voters: "
                                         f"{sorted(state.voters)})")
    if state.voters == {voter_id}:
        return _error(ErrorCode.INVALID_REQUEST, f"node {voter_id} is the only voter: the quorum cannot lose it")
    return RemoveVoter(voter_id)


def decide_update_voter(state: VoterSetState, request: UpdateRaftVoterRequest) -> UpdateVoter | VoterChangeError:
    """UpdateRaftVoter (Kafka's UpdateVoterHandler): a voter, named by its key (id and directory id), tells the
    leader its endpoint and supported kraft.version range; the new endpoint, or why not."""
    refused = _common(state, request)
    if refused is not None:
        return refused
    feature = request.k_raft_version_feature
    if not int(feature.min_supported_version) <= KRAFT_VERSION <= int(feature.max_supported_version):
        return _error(ErrorCode.INVALID_REQUEST, f"kraft.version range {feature.min_supported_version}-"
                                         f"{feature.max_supported_version} does not hold the finalized version "
                                         f"{KRAFT_VERSION}")
    voter_id = int(request.voter_id)
    endpoint = _quorum_endpoint(state, voter_id, request)
    if isinstance(endpoint, VoterChangeError):
        return endpoint
    known = state.directory_ids.get(voter_id, ZERO_UUID)
    asked = request.voter_directory_id or ZERO_UUID
    if voter_id not in state.voters or (known != ZERO_UUID and asked != known):
        return _error(ErrorCode.VOTER_NOT_FOUND, f"no voter {voter_id} with directory id {asked}")
    return UpdateVoter(endpoint, asked if asked != ZERO_UUID else known)


def answer(result: VoterChangeError | None) -> AddRaftVoterResponse:
    """AddRaftVoter's (and RemoveRaftVoter's, the same fields) answer."""
    if result is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None}
    return {"throttle_time_ms": 0, "error_code": result.error_code,
            "error_message": result.message or error_info(result.error_code).message}


class VoterChanges:
    """Serves the three requests on a controller (``node``: its :class:`klog.controller.node.ControllerNode`)."""

    def __init__(self, node: ControllerNode, listener_name: str) -> None:
        self.node = node
        self.listener_name = listener_name
        self._pending = False
        #: UpdateRaftVoter's registrations, answered before they commit (kept referenced until they end)
        self._registering: set[asyncio.Future[None]] = set()

    def _registered(self, registering: asyncio.Future[None]) -> None:
        self._registering.discard(registering)
        if not registering.cancelled() and registering.exception() is not None:   # the voter resends
            log.info("controller %d: an updated voter endpoint not committed: %r", self.node.quorum.node_id,
                     registering.exception())

    def voter_directory_ids(self) -> dict[int, uuid.UUID]:
        """The voters' directory ids (DescribeQuorum's ReplicaDirectoryId), as the node knows them."""
        ids: dict[int, uuid.UUID] = self.node.voter_directory_ids()
        return ids

    def state(self) -> VoterSetState:
        driver = self.node.driver   # its soft state: the raft node's getters wait for a ready cycle's fsync
        voters = frozenset(driver.voters) if driver.node is not None else frozenset()
        return VoterSetState(
            node_id=driver.cfg.node_id, is_leader=driver.is_leader, leader_id=driver.leader_id or -1,
            cluster_id=self.node.cluster_id, dynamic=driver.cfg.dynamic_voters, voters=voters,
            directory_ids=self.node.voter_directory_ids(), change_pending=self._pending,
            listener_name=self.listener_name, observers=dict(driver.observers), now_ms=time.time() * 1000.0)

    async def _committed(self, change: Awaitable[object], timeout_ms: int) -> None:
        limit = MAX_VOTER_CHANGE_TIMEOUT_MS if timeout_ms <= 0 else min(timeout_ms, MAX_VOTER_CHANGE_TIMEOUT_MS)
        await asyncio.wait_for(change, limit / 1000)

    async def _commit_change(self, what: str, proposals: Callable[[], Awaitable[None]]
                             ) -> AddRaftVoterResponse | None:
        """Run a change's proposals with the change marked pending: None once committed, else the error answer."""
        self._pending = True
        try:
            await proposals()
        except asyncio.TimeoutError:
            return answer(_error(ErrorCode.REQUEST_TIMED_OUT, f"{what} did not commit in time"))
        except RaftError as e:   # leadership lost, the proposal overwritten, a conf change dropped: the client retries
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER if isinstance(e, NotLeaderError) else ErrorCode.REQUEST_TIMED_OUT
            return answer(_error(code, str(e)))
        finally:
            self._pending = False
        return None

    async def add(self, request: AddRaftVoterRequest) -> AddRaftVoterResponse:
        decided = decide_add_voter(self.state(), request)
        if isinstance(decided, VoterChangeError):
            return answer(decided)
        v = decided.voter

        async def proposals() -> None:
            await self._committed(self.node.register_controller(v, decided.directory_id), int(request.timeout_ms))
            self.node.driver.add_peer(v)
            await self._committed(self.node.driver.change_voter(v.node_id, True), int(request.timeout_ms))

        failed = await self._commit_change(f"adding voter {v.node_id}", proposals)
        if failed is not None:
            return failed
        log.info("controller %d: added voter %d (%s:%d, directory %s)", self.node.quorum.node_id, v.node_id,
                 v.host, v.port, decided.directory_id)
        return answer(None)

    async def remove(self, request: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
        decided = decide_remove_voter(self.state(), request)
        if isinstance(decided, VoterChangeError):
            return answer(decided)
        failed = await self._commit_change(
            f"removing voter {decided.node_id}",
            lambda: self._committed(self.node.driver.change_voter(decided.node_id, False), MAX_VOTER_CHANGE_TIMEOUT_MS))
        if failed is not None:
            return failed
        log.info("controller %d: removed voter %d", self.node.quorum.node_id, decided.node_id)
        return answer(None)

    def update(self, request: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
        """As Kafka's leader: the new endpoint is proposed and the answer does not wait for it to commit."""
        decided = decide_update_voter(self.state(), request)
        out: UpdateRaftVoterResponse = {
            "throttle_time_ms": 0,
            "error_code": decided.error_code if isinstance(decided, VoterChangeError) else ErrorCode.NONE}
        if not isinstance(decided, VoterChangeError):
            registering = asyncio.ensure_future(self._committed(
                self.node.register_controller(decided.voter, decided.directory_id), MAX_VOTER_CHANGE_TIMEOUT_MS))
            self._registering.add(registering)
            registering.add_done_callback(self._registered)
            log.info("controller %d: voter %d updates its endpoint to %s:%d", self.node.quorum.node_id,
                     decided.voter.node_id, decided.voter.host, decided.voter.port)
        driver = self.node.driver
        leader = driver.endpoints.get(driver.leader_id)
        out["current_leader"] = {"leader_id": driver.leader_id or -1,
                                 "leader_epoch": driver.term if driver.node is not None else -1,
                                 "host": leader.host if leader is not None else "",
                                 "port": leader.port if leader is not None else -1}
        return out

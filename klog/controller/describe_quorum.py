"""DescribeQuorum (55) and the Kafka requests a controller listener answers (what ``kafka-metadata-quorum
--bootstrap-controller`` sends: ApiVersions, DescribeCluster with the controller endpoint type, DescribeQuorum).

Pure part: :class:`QuorumStatus` (a snapshot of the raft member's state) -> response dicts, as Kafka's
``KafkaRaftClient.handleDescribeQuorumRequest`` builds them: only the leader describes the quorum (others answer
NOT_LEADER_OR_FOLLOWER at the partition level), a request for another partition than ``__cluster_metadata-0`` gets
UNKNOWN_TOPIC_OR_PARTITION on each partition it names (``DescribeQuorumRequest.getPartitionLevelErrorResponse``).
IO part: :func:`serve_kafka_connection`, used by the raft driver for a controller-listener connection that does not
start with the raft preamble.

Static quorums (``controller.quorum.voters``, kraft.version 0) carry no directory ids: Kafka reports the zero
UUID for every voter then, and so does klog. In a formatted (dynamic) quorum every voter is reported with its
directory id (the one remove-controller names): the initial voters' from the voter set ``format`` wrote, an added
voter's from AddRaftVoter. Observers: the nodes fetching the log from the leader (:mod:`klog.controller.observer`:
broker-only nodes, and controllers waiting to be added as voters), each with the offset it had at its last fetch
and the directory id its hello named.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union, cast

from klog.client.stream_login import open_logged_in
from klog.controller.envelope import ENVELOPE_API_KEY, ENVELOPE_VERSIONS, EnvelopedDecider, open_envelope
from klog.controller.listener_access import CLUSTER_OPERATION_NEEDED, TOKEN_APIS, peer_host
from klog.controller.listener_login import SASL_APIS, LastAnswer, Reauthentication
from klog.controller.quorum import OBSERVER_SESSION_MS, Voter
from klog.metadata.storage import METADATA_PARTITION, METADATA_TOPIC
from klog.protocol import (
    ProtocolError,
    Struct,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    versions,
)
from klog.protocol.errors import ErrorCode, error_info
from klog.security.acl import AclOperation

if TYPE_CHECKING:
    from klog._native import RaftNode
    from klog.client.security import ClientSecurity
    from klog.security.principal import KafkaPrincipal
    from klog.controller.listener_port import ListenerPort
    from klog.protocol.messages import RequestHeader
    from klog.protocol.message_types import (
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        AlterPartitionRequest,
        AlterPartitionResponse,
        ApiVersionsRequest,
        ApiVersionsResponse,
        ApiVersionsResponseApiVersion,
        AssignReplicasToDirsRequest,
        AssignReplicasToDirsResponse,
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
        DescribeClusterRequest,
        DescribeClusterResponse,
        DescribeClusterResponseBroker,
        DescribeQuorumRequest,
        EnvelopeRequest,
        RemoveRaftVoterRequest,
        RemoveRaftVoterResponse,
        UnregisterBrokerRequest,
        UnregisterBrokerResponse,
        UpdateRaftVoterRequest,
        UpdateRaftVoterResponse,
        DescribeQuorumResponse,
        DescribeQuorumResponseNode,
        DescribeQuorumResponsePartitionData,
        DescribeQuorumResponseReplicaState,
    )

    #: BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds, UnregisterBroker as decoded
    LifecycleRequest = Union[BrokerRegistrationRequest, BrokerHeartbeatRequest, AlterPartitionRequest,
                             AllocateProducerIdsRequest, AssignReplicasToDirsRequest, UnregisterBrokerRequest]
    #: and their answers
    LifecycleResponse = Union[BrokerRegistrationResponse, BrokerHeartbeatResponse, AlterPartitionResponse,
                              AllocateProducerIdsResponse, AssignReplicasToDirsResponse, UnregisterBrokerResponse]

__all__ = ["ControllerListener", "QuorumStatus", "ReplicaStatus", "describe_quorum_response", "quorum_status",
           "single_voter_status"]

log = logging.getLogger("klog.controller")

#: The largest request a controller listener reads (describe requests, broker heartbeats and the admin requests
#: brokers forward: CreateTopics of thousands of topics fits).
MAX_CONTROLLER_REQUEST_BYTES = 1 << 20
#: How long a combined node's broker waits for the active controller when it forwards a DescribeQuorum.
FORWARD_TIMEOUT_S = 5.0
#: A client connection idle this long on the controller listener is closed.
CONTROLLER_CONNECTION_IDLE_S = 600.0
ZERO_UUID = uuid.UUID(int=0)
#: What the controller listener serves, api key -> (min, max) version.
CONTROLLER_APIS: dict[int, tuple[int, int]] = {18: (0, 4), 55: (0, 2), 60: (0, 2),
                                               # BrokerRegistration, BrokerHeartbeat (klog.controller.broker_service)
                                               62: versions(62), 63: versions(63),
                                               # AllocateProducerIds (klog.controller.broker_service)
                                               67: versions(67),
                                               # AssignReplicasToDirs (klog.controller.directories)
                                               73: versions(73),
                                               # AlterPartition (klog.controller.partitions_isr): Kafka 4's 2-3
                                               56: (2, 3),
                                               # UnregisterBroker (klog.controller.broker_service)
                                               64: versions(64),
                                               # KIP-853 voter changes (klog.controller.voter_changes)
                                               80: versions(80), 81: versions(81), 82: versions(82)}
#: what brokers forward in an envelope and this listener decides itself (Kafka 4.3's KafkaApis forwards them:
#: ``kafka-cluster unregister`` and ``kafka-metadata-quorum --bootstrap-server add-controller/remove-controller``),
#: each needing Alter on the Cluster of the principal the envelope names
ENVELOPED_HERE: dict[int, tuple[int, int]] = {64: versions(64), 80: versions(80), 81: versions(81)}
#: the answers with a top-level error code, refused CLUSTER_AUTHORIZATION_FAILED (others close the connection)
TOP_LEVEL_ERROR_APIS = frozenset({38, 39, 40, 43, 45, 46, 55, 56, 57, 58, 60, 62, 63, 64, 67, 73, 80, 81, 82})
_SIZE = struct.Struct(">i")
NONE = ErrorCode.NONE
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
UNSUPPORTED_ENDPOINT_TYPE = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
#: DescribeCluster's endpoint types (Kafka's EndpointType): what a broker's and a controller's listeners describe
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


def cluster_authorization_failed() -> dict[str, Any]:
    """The refusal of a request without the Cluster operation it needs (a top-level error code and message)."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": "Cluster authorization failed."}


def describe_cluster_refusal(api_version: int, served: int, requested: int) -> DescribeClusterResponse | None:
    """Kafka's AuthHelper.computeDescribeClusterResponse refusals: an endpoint type it does not know
    (UNSUPPORTED_ENDPOINT_TYPE), or the other listener's type (MISMATCHED_ENDPOINT_TYPE), INVALID_REQUEST in v0;
    the refusal carries its code and message only (the other fields their schema defaults). None: answer it."""
    if requested not in _ENDPOINT_NAMES:
        code, message = UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {requested}"
    elif requested != served:
        code, message = ErrorCode.MISMATCHED_ENDPOINT_TYPE, (
            f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[served]}, but we wanted an endpoint of "
            f"type {_ENDPOINT_NAMES[requested]}")
    else:
        return None
    return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST if api_version == 0 else code,
            "error_message": message, "endpoint_type": BROKER_ENDPOINT, "cluster_id": "", "controller_id": -1,
            "brokers": [], "cluster_authorized_operations": -2147483648}
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION


@dataclasses.dataclass(frozen=True)
class ReplicaStatus:
    node_id: int
    log_end_offset: int          # Kafka offset of the replica's log end as the leader knows it (-1: unknown)
    last_fetch_ms: int           # wall clock ms the leader last heard from it (-1: never)
    last_caught_up_ms: int       # wall clock ms it was last known to have the leader's whole log (-1: never)
    directory_id: uuid.UUID = ZERO_UUID   # its replica key's directory id when the leader knows it


@dataclasses.dataclass(frozen=True)
class QuorumStatus:
    """One member's view of the quorum, taken on the event loop."""

    node_id: int
    leader_id: int               # -1: unknown
    leader_epoch: int
    high_watermark: int          # Kafka offset (-1: unknown)
    is_leader: bool
    voters: Sequence[ReplicaStatus]
    observers: Sequence[ReplicaStatus]
    endpoints: Mapping[int, Voter]   # voter id -> controller endpoint
    listener_name: str
    #: the directory ids known of voters (those AddRaftVoter added); others are reported as the zero UUID
    directory_ids: Mapping[int, uuid.UUID] = dataclasses.field(default_factory=dict)


def _message(code: int) -> str:
    return error_info(code).message or error_info(code).name


def _replica(r: ReplicaStatus, directory_ids: Mapping[int, uuid.UUID] | None = None
             ) -> DescribeQuorumResponseReplicaState:
    return {"replica_id": r.node_id, "replica_directory_id": (directory_ids or {}).get(r.node_id, r.directory_id),
            "log_end_offset": r.log_end_offset,
            "last_fetch_timestamp": r.last_fetch_ms, "last_caught_up_timestamp": r.last_caught_up_ms}


def describe_quorum_response(status: QuorumStatus | None, request: DescribeQuorumRequest | None
                             ) -> DescribeQuorumResponse:
    """The DescribeQuorum answer (every field of the newest version; the encoder drops what a version lacks).
    ``status`` None: this process has no quorum member (answered as Kafka's broker without a raft client)."""
    topics = list(getattr(request, "topics", None) or [])
    wanted = [(t.topic_name, [p.partition_index for p in (t.partitions or [])]) for t in topics]
    if status is None:
        return {"error_code": NOT_LEADER_OR_FOLLOWER, "error_message": _message(NOT_LEADER_OR_FOLLOWER),
                "topics": [], "nodes": []}
    if wanted != [(METADATA_TOPIC, [METADATA_PARTITION])]:   # each partition named refused, as Kafka's
        refused: DescribeQuorumResponsePartitionData = {
            "error_code": UNKNOWN_TOPIC_OR_PARTITION, "error_message": _message(UNKNOWN_TOPIC_OR_PARTITION),
            "leader_id": 0, "leader_epoch": 0, "high_watermark": 0, "current_voters": [], "observers": []}
        return {"error_code": NONE, "error_message": "", "nodes": [], "topics": [
            {"topic_name": name, "partitions": [{**refused, "partition_index": p} for p in partitions]}
            for name, partitions in wanted]}
    partition: DescribeQuorumResponsePartitionData = {"partition_index": METADATA_PARTITION}
    if not status.is_leader:
        partition.update({"error_code": NOT_LEADER_OR_FOLLOWER, "error_message": _message(NOT_LEADER_OR_FOLLOWER),
                          "leader_id": status.leader_id, "leader_epoch": status.leader_epoch, "high_watermark": -1,
                          "current_voters": [], "observers": []})
        nodes: list[DescribeQuorumResponseNode] = []
    else:
        partition.update({"error_code": NONE, "error_message": "", "leader_id": status.leader_id,
                          "leader_epoch": status.leader_epoch, "high_watermark": status.high_watermark,
                          "current_voters": [_replica(r, status.directory_ids) for r in status.voters],
                          "observers": [_replica(r) for r in status.observers]})
        nodes = [{"node_id": v.node_id, "listeners": [{"name": status.listener_name, "host": v.host, "port": v.port}]}
                 for v in sorted(status.endpoints.values(), key=lambda v: v.node_id)]
    return {"error_code": NONE, "error_message": "",
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}], "nodes": nodes}


def controller_api_keys(apis: Mapping[int, tuple[int, int]] = CONTROLLER_APIS) -> list[ApiVersionsResponseApiVersion]:
    """ApiVersions' list of what a controller listener serves."""
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(apis.items())]


class ObserverProgress(Protocol):
    """What a member knows of one observer (:class:`klog.controller.raft.ObserverState`)."""

    @property
    def applied_index(self) -> int: ...

    @property
    def end_offset(self) -> int | None: ...

    @property
    def fetched_ms(self) -> float: ...

    @property
    def caught_up_ms(self) -> float: ...

    @property
    def directory_id(self) -> uuid.UUID: ...


class VoterProgress(Protocol):
    """The leader's view of one replica (:class:`klog.controller.raft.ReplicaProgress`)."""

    @property
    def node_id(self) -> int: ...

    @property
    def is_voter(self) -> bool: ...

    @property
    def end_offset(self) -> int: ...


class VotersConfig(Protocol):
    @property
    def node_id(self) -> int: ...


    @property
    def voters(self) -> Mapping[int, Voter]: ...

    @property
    def client_security(self) -> ClientSecurity | None: ...


class RaftMember(Protocol):
    """A quorum member's raft driver as a controller listener reads it (:class:`klog.controller.raft.RaftDriver`,
    which imports this module): its raft node (None before it started), who leads, the voters' endpoints and
    the per-peer times of its last fetches. The raft state is the driver's soft state, read between ready cycles:
    the raft node's getters take its lock, which a ready cycle holds through its fsync (with the GIL held here,
    the event loop would stop for it)."""

    @property
    def node(self) -> RaftNode | None: ...

    @property
    def role(self) -> str: ...

    @property
    def term(self) -> int: ...

    @property
    def voters(self) -> tuple[int, ...]: ...

    @property
    def committed_end_offset(self) -> int | None: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def progress(self) -> Sequence[VoterProgress]: ...

    @property
    def cfg(self) -> VotersConfig: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def endpoints(self) -> Mapping[int, Voter]: ...

    @property
    def last_heard_ms(self) -> Mapping[int, float]: ...

    @property
    def last_caught_up_ms(self) -> Mapping[int, float]: ...

    @property
    def observers(self) -> Mapping[int, ObserverProgress]: ...


def _wall_ms() -> int:
    return int(time.time() * 1000)


def quorum_status(driver: RaftMember, listener_name: str) -> QuorumStatus | None:
    """Read the raft driver's member (None before it started): the leader's raft progress for each voter's
    log end offset, the driver's per-peer times for its last fetch / last caught-up timestamps."""
    if driver.node is None:
        return None
    now = _wall_ms()
    me = driver.cfg.node_id
    is_leader = driver.role == "leader"
    hw = driver.committed_end_offset
    voters: list[ReplicaStatus] = []
    if is_leader:
        for p in driver.progress:
            if not p.is_voter:
                continue
            if p.node_id == me:
                voters.append(ReplicaStatus(me, driver.log_end_offset, now, now))
                continue
            voters.append(ReplicaStatus(p.node_id, p.end_offset, int(driver.last_heard_ms.get(p.node_id, -1)),
                                        int(driver.last_caught_up_ms.get(p.node_id, -1))))
    observers: list[ReplicaStatus] = []
    if is_leader:   # broker-only nodes fetching the log from this leader (klog.controller.observer)
        voter_ids = {r.node_id for r in voters}
        for node_id, o in sorted(driver.observers.items()):
            if now - o.fetched_ms > OBSERVER_SESSION_MS or node_id in voter_ids:   # an added voter fetches as one
                continue
            observers.append(ReplicaStatus(node_id, -1 if o.end_offset is None else o.end_offset, int(o.fetched_ms),
                                           int(o.caught_up_ms), o.directory_id))
    return QuorumStatus(node_id=me, leader_id=driver.leader_id or -1, leader_epoch=driver.term,
                        high_watermark=-1 if hw is None else hw, is_leader=is_leader, voters=voters,
                        observers=observers,
                        endpoints=current_voter_endpoints(driver), listener_name=listener_name)


def current_voter_endpoints(driver: RaftMember) -> dict[int, Voter]:
    """The endpoints of the raft member's current voters (voter changes add and remove some)."""
    ids = set(driver.voters) if driver.node is not None else set(driver.cfg.voters)
    return {i: v for i, v in driver.endpoints.items() if i in ids}


def single_voter_status(node_id: int, epoch: int, committed_end: int, log_end_offset: int) -> QuorumStatus:
    """The quorum of one that ``klog-broker`` without arguments runs: this node leads, its committed end is the
    high watermark. It has no controller listener, so no voter endpoints are given."""
    now = _wall_ms()
    return QuorumStatus(node_id=node_id, leader_id=node_id, leader_epoch=epoch, high_watermark=committed_end,
                        is_leader=True, voters=[ReplicaStatus(node_id, log_end_offset, now, now)], observers=[],
                        endpoints={}, listener_name="")


class BrokerLifecycleRequests(Protocol):
    """BrokerRegistration / BrokerHeartbeat / AlterPartition / AllocateProducerIds
    (klog.controller.broker_service.BrokerLifecycleService, which imports this module)."""

    def handle(self, api_key: int, request: LifecycleRequest) -> Awaitable[LifecycleResponse]: ...


class VoterChangeRequests(Protocol):
    """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (klog.controller.voter_changes.VoterChanges)."""

    def add(self, request: AddRaftVoterRequest) -> Awaitable[AddRaftVoterResponse]: ...

    def remove(self, request: RemoveRaftVoterRequest) -> Awaitable[RemoveRaftVoterResponse]: ...

    def update(self, request: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse: ...

    def voter_directory_ids(self) -> dict[int, uuid.UUID]: ...


class ControllerListener:
    """The Kafka requests a controller listener answers (``driver``: its RaftDriver; ``cluster_id``: a callable,
    the id may be learnt late). Serves the Kafka connections of the driver's ``port`` (the
    :class:`~klog.controller.listener_port.ListenerPort` both are given); the requests brokers forward go to the
    node's :class:`klog.controller.apis.ControllerApis` once :meth:`accept_forwarded` installed it, a start-up step."""

    def __init__(self, driver: RaftMember, listener_name: str, cluster_id: Callable[[], str | None], *,
                 port: ListenerPort | None = None, broker_lifecycle: BrokerLifecycleRequests | None = None,
                 voter_changes: VoterChangeRequests | None = None,
                 features: Callable[[int], ApiVersionsResponse] | None = None) -> None:
        """``port``: the controller port's connections this listener serves the Kafka ones of (None: it is not
        served on a port, as in tests of its answers alone); ``features(api_version)``: ApiVersions v3+'s feature
        fields (klog.controller.features), for ``kafka-features --bootstrap-controller``."""
        self.driver = driver
        self.features = features
        self.listener_name = listener_name
        self.cluster_id = cluster_id
        #: serves BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AlterPartition (the active controller's)
        self.broker_lifecycle = broker_lifecycle
        #: serves AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter
        self.voter_changes = voter_changes
        #: what this listener serves: CONTROLLER_APIS, plus the requests brokers forward once a deciding
        #: handler is installed (:meth:`accept_forwarded`)
        self.apis: dict[int, tuple[int, int]] = dict(CONTROLLER_APIS)
        #: the controller port (its login, on a SASL controller listener), None when not served on one
        self.port = port
        self._decide_forwarded: Callable[[RequestHeader, Any, object], Awaitable[Any]] | None = None
        #: the forwarded APIs (api key -> versions) and the decider of those a broker sent in an envelope
        self._forwarded: Mapping[int, tuple[int, int]] = {}
        #: the APIs decided by ``_decide_enveloped`` as their sender when sent here directly (the forwarded ones and
        #: those answered here only)
        self._direct: Mapping[int, tuple[int, int]] = {}
        self._decide_enveloped: EnvelopedDecider | None = None
        #: the decider of those sent here directly (None: ``_decide_enveloped``)
        self._decide_direct: EnvelopedDecider | None = None
        if port is not None:
            port.serve_kafka(self.serve)

    def accept_forwarded(self, versions: Mapping[int, tuple[int, int]],
                         decide: Callable[[RequestHeader, Any, object], Awaitable[Any]],
                         decide_enveloped: EnvelopedDecider | None = None, *,
                         answered_here: Mapping[int, tuple[int, int]] | None = None,
                         decide_direct: EnvelopedDecider | None = None) -> None:
        """Serve the requests brokers forward to the active controller (``versions``: api key -> (min, max)) with
        ``decide(header, request, peer)``: :meth:`klog.controller.apis.ControllerApis.handle`, which answers
        NOT_CONTROLLER on every item when this node does not lead the quorum (the forwarding broker then tries the
        new leader). A start-up step, once per listener, not a constructor argument: the deciding ControllerApis
        exists only later (a combined node's commits through its broker's metadata, made when the broker starts;
        a controller-only node's once the quorum established its cluster id). ``decide_enveloped(header, request,
        principal, host)``: the decider of those a broker wraps in an EnvelopeRequest (served once given):
        :meth:`klog.controller.apis.ControllerApis.handle_enveloped`. ``answered_here``: the APIs the same deciders
        answer for clients of this listener only (never forwarded by a broker, so never in an envelope: Kafka's
        controller-only DescribeConfigs, klog.controller.apis.CONTROLLER_ONLY_API_VERSIONS). ``decide_direct``: the
        decider of those a client sends here itself, authorized as its sender
        (:meth:`klog.controller.apis.ControllerApis.handle_direct`; None: ``decide_enveloped``)."""
        assert self._decide_forwarded is None, "the forwarded requests have one decider"
        self.apis.update(versions)
        self.apis.update(answered_here or {})
        self._decide_forwarded = decide
        self._forwarded = dict(versions)
        self._direct = {**versions, **(answered_here or {})}
        if decide_enveloped is not None:
            self.apis[ENVELOPE_API_KEY] = ENVELOPE_VERSIONS
            self._decide_enveloped = decide_enveloped
        self._decide_direct = decide_direct

    def status(self) -> QuorumStatus | None:
        status = quorum_status(self.driver, self.listener_name)
        if status is not None and self.voter_changes is not None:
            status = dataclasses.replace(status, directory_ids=self.voter_changes.voter_directory_ids())
        return status

    def describe_quorum(self, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
        return describe_quorum_response(self.status(), request)

    async def describe_quorum_forwarded(self, request: DescribeQuorumRequest, version: int
                                        ) -> DescribeQuorumResponse | Struct:
        """A broker listener's answer: Kafka's brokers forward DescribeQuorum to the active controller, so a
        member that does not lead asks the leader's controller listener (its own answer if that fails)."""
        status = self.status()
        if status is not None and not status.is_leader and status.leader_id in status.endpoints:
            leader = status.endpoints[status.leader_id]
            try:
                return await forward_describe_quorum(leader, version, request,
                                                     security=self.driver.cfg.client_security)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ProtocolError) as e:
                log.info("DescribeQuorum: forwarding to the leader %d at %s:%d failed: %s", leader.node_id,
                         leader.host, leader.port, e)
        return describe_quorum_response(status, request)

    def describe_cluster(self, request: DescribeClusterRequest, api_version: int = 1) -> DescribeClusterResponse:
        """Controllers answer DescribeCluster for the controller endpoint type only (as Kafka's ControllerApis)."""
        endpoint_type = int(getattr(request, "endpoint_type", 1))
        refused = describe_cluster_refusal(api_version, CONTROLLER_ENDPOINT, endpoint_type)
        if refused is not None:
            return refused
        base: DescribeClusterResponse = {"throttle_time_ms": 0, "endpoint_type": endpoint_type,
                                         "cluster_id": self.cluster_id() or "",
                                         "cluster_authorized_operations": -2147483648}
        leader = self.driver.leader_id or -1
        brokers: list[DescribeClusterResponseBroker] = [
            {"broker_id": v.node_id, "host": v.host, "port": v.port, "rack": None, "is_fenced": False}
            for v in sorted(current_voter_endpoints(self.driver).values(), key=lambda v: v.node_id)]
        return {**base, "error_code": NONE, "error_message": None, "controller_id": leader, "brokers": brokers}

    def api_versions(self, request: ApiVersionsRequest, api_version: int = 0) -> ApiVersionsResponse:
        response: ApiVersionsResponse = {"error_code": NONE, "throttle_time_ms": 0,
                                         "api_keys": controller_api_keys(self.apis)}
        if api_version >= 3 and self.features is not None:
            response.update(self.features(api_version))
        return response

    def handle(self, api_key: int, request: object, header: RequestHeader | None = None, peer: object = None
               ) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
        """``request``: the decoded body of API ``api_key`` (of the type the method answering it takes);
        ``header`` and ``peer`` (the connection's peer name) are passed on to the forwarded requests' decider."""
        if api_key == ENVELOPE_API_KEY and self._decide_enveloped is not None:
            return open_envelope(cast("EnvelopeRequest", request), {**self._forwarded, **ENVELOPED_HERE},
                                 self._decide_envelope)
        if api_key not in CONTROLLER_APIS and self._decide_forwarded is not None:
            assert header is not None, "a forwarded request is decided with its header"
            return self._decide_forwarded(header, request, peer)
        if api_key in (56, 62, 63, 64, 67, 73) and self.broker_lifecycle is not None:
            return self.broker_lifecycle.handle(api_key, cast("LifecycleRequest", request))
        if api_key == 55:
            return self.describe_quorum(cast("DescribeQuorumRequest", request))
        if api_key in (80, 81, 82) and self.voter_changes is not None:
            if api_key == 80:
                return self.voter_changes.add(cast("AddRaftVoterRequest", request))
            if api_key == 81:
                return self.voter_changes.remove(cast("RemoveRaftVoterRequest", request))
            return self.voter_changes.update(cast("UpdateRaftVoterRequest", request))
        if api_key == 60:
            return self.describe_cluster(cast("DescribeClusterRequest", request),
                                         int(header.api_version) if header is not None else 1)
        return self.api_versions(cast("ApiVersionsRequest", request),
                                 int(header.api_version) if header is not None else 0)

    async def _decide_envelope(self, header: RequestHeader, request: Any, principal: KafkaPrincipal, host: str
                               ) -> Any:
        """An enveloped request: UnregisterBroker, AddRaftVoter and RemoveRaftVoter decided here as the principal
        the envelope names (Alter on the Cluster, as Kafka's ControllerApis), the rest by the deciding
        ControllerApis."""
        api_key = int(header.api_key)
        if api_key not in ENVELOPED_HERE:
            assert self._decide_enveloped is not None
            return await self._decide_enveloped(header, request, principal, host)
        access = self.port.access if self.port is not None else None
        if access is not None and not access.may(principal, host, AclOperation.ALTER):
            access.refuse_unauthorized(principal, host, f"api {api_key} v{header.api_version} (forwarded)",
                                       AclOperation.ALTER)
            return cluster_authorization_failed()
        handled = self.handle(api_key, request, header)
        return handled if isinstance(handled, Mapping) else await handled

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, prefix: bytes,
                    principal: KafkaPrincipal | None = None) -> None:
        """Serve one Kafka connection; ``principal``: who it is (logged in on a SASL listener, its certificate's on
        SSL, ANONYMOUS on PLAINTEXT). Its requests are authorized as Kafka's ControllerApis does when the port has
        an access control (klog.controller.listener_access) and an authorizer is set."""
        access = self.port.access if self.port is not None else None
        login = self.port.login if self.port is not None else None
        if principal is None or access is None:
            await serve_kafka_connection(reader, writer, prefix, self.handle, self.apis)
            return
        apis = dict(self.apis)
        address = writer.get_extra_info("peername")
        host = peer_host(address)
        reauth = None
        if login is not None:   # a SASL listener: KIP-368 re-authentication on the logged-in connection
            apis.update({k: v for k, v in SASL_APIS.items() if k != 18})
            reauth = Reauthentication(login, principal, address, login.session_end(writer), login.mechanism(writer))

        def authorized(api_key: int, request: object, header: RequestHeader | None = None, peer: object = None
                       ) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
            version = int(header.api_version) if header is not None else 0
            if reauth is not None:
                if reauth.refused is not None:
                    return reauth.refuse()
                if api_key != 36 and reauth.in_login:
                    return reauth.unexpected(api_key, request)
                if api_key == 17:
                    return reauth.handshake(version, str(getattr(request, "mechanism", "")))
                if api_key == 36:
                    return reauth.authenticate(version, bytes(getattr(request, "auth_bytes", None) or b""))
                if reauth.expired():   # connections.max.reauth.ms passed without a re-authentication (as Kafka)
                    log.info("controller listener: closing the connection of %s from %s: its SASL session expired "
                             "(connections.max.reauth.ms or its token's expiry) and was not re-authenticated", principal, address)
                    raise ConnectionAbortedError("SASL session expired")
            if api_key in TOKEN_APIS:
                refused = access.token_refusal(api_key, request, principal, host)
                if refused is not None:
                    return refused
            decide_direct = self._decide_direct or self._decide_enveloped
            if api_key in self._direct and api_key not in CLUSTER_OPERATION_NEEDED and decide_direct is not None:
                # an admin request sent here directly: authorized as its sender, with the ACLs Kafka checks for it
                assert header is not None, "a forwarded request is decided with its header"
                return decide_direct(header, request, principal, host)
            needed = CLUSTER_OPERATION_NEEDED.get(api_key, AclOperation.CLUSTER_ACTION)
            if needed is not None and not access.may(principal, host, needed):
                access.refuse_unauthorized(principal, address, f"api {api_key} v{version}", needed)
                if api_key in TOP_LEVEL_ERROR_APIS and (api_key != 43 or version >= 1):
                    return cluster_authorization_failed()
                raise ConnectionAbortedError(f"api {api_key} refused: not authorized")
            return self.handle(api_key, request, header, peer)

        await serve_kafka_connection(reader, writer, prefix, authorized, apis)


async def forward_describe_quorum(controller: Voter, version: int,
                                  request: DescribeQuorumRequest | Mapping[str, object], *,
                                  security: ClientSecurity | None = None) -> Struct:
    """Send DescribeQuorum ``request`` to ``controller``'s controller listener at ``version``; its decoded answer."""
    return await controller_request(controller, 55, version, request, security=security)


async def controller_request(controller: Voter, api_key: int, version: int, request: object, *,
                             security: ClientSecurity | None = None) -> Struct:
    """Send one Kafka request to ``controller``'s controller listener (with ``security``, the quorum config's
    ``client_security``: TLS, and a SASL login first); its decoded answer (``request``: what the codec encodes, a
    decoded request or a mapping of its fields)."""
    reader, writer = await open_logged_in(controller.host, controller.port, security, FORWARD_TIMEOUT_S,
                                          client_id="klog-broker")
    try:
        writer.write(encode_request(api_key, version, 1, "klog-broker", request))
        await writer.drain()
        (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(_SIZE.size), FORWARD_TIMEOUT_S))
        if not 0 < size <= MAX_CONTROLLER_REQUEST_BYTES:
            raise ProtocolError(f"the controller answered a {size}-byte frame", field="size", offset=0)
        frame = await asyncio.wait_for(reader.readexactly(size), FORWARD_TIMEOUT_S)
        return decode_response(api_key, version, frame)[1]
    finally:
        writer.close()


async def serve_kafka_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, prefix: bytes,
                                 handle: Callable[..., Mapping[str, Any] | Awaitable[Mapping[str, Any]]],
                                 apis: Mapping[int, tuple[int, int]] = CONTROLLER_APIS) -> None:
    """Answer size-prefixed Kafka requests on ``reader`` (``prefix``: bytes already read off it) with
    ``handle(api_key, request, header, peer)`` for the APIs in ``apis``; anything else closes the connection
    (the client saw ApiVersions and should not send it)."""
    peer = writer.get_extra_info("peername")
    buffered = bytes(prefix)
    try:
        while True:
            while len(buffered) < _SIZE.size:
                buffered += await asyncio.wait_for(reader.read(65536), CONTROLLER_CONNECTION_IDLE_S) or b"!eof"
                if buffered.endswith(b"!eof"):
                    return
            (size,) = _SIZE.unpack_from(buffered)
            if not 0 < size <= MAX_CONTROLLER_REQUEST_BYTES:
                log.warning("controller listener: %s sent a %d-byte request (limit %d); closing", peer, size,
                            MAX_CONTROLLER_REQUEST_BYTES)
                return
            need = _SIZE.size + size - len(buffered)
            if need > 0:
                buffered += await asyncio.wait_for(reader.readexactly(need), CONTROLLER_CONNECTION_IDLE_S)
            frame, buffered = buffered[_SIZE.size:_SIZE.size + size], buffered[_SIZE.size + size:]
            header, offset = decode_request_header(frame)
            api_key, version = int(header.api_key), int(header.api_version)
            lo_hi = apis.get(api_key)
            if lo_hi is None or not lo_hi[0] <= version <= lo_hi[1]:
                if api_key == 18:  # KIP-511: a too-new ApiVersions gets the list in v0
                    too_new = {"error_code": UNSUPPORTED_VERSION, "api_keys": controller_api_keys(apis)}
                    writer.writelines(encode_response(18, 0, header.correlation_id, too_new))
                    await writer.drain()
                    continue
                log.info("controller listener: %s sent api %d v%d, which a controller does not serve; closing",
                         peer, api_key, version)
                return
            request = decode_request(header, frame, offset)
            try:
                handled = handle(api_key, request, header, peer)
                answer = handled if isinstance(handled, Mapping) else await handled
            except LastAnswer as last:   # answered, then the connection ends (a refused re-authentication)
                writer.writelines(encode_response(api_key, version, header.correlation_id, last.answer))
                await writer.drain()
                return
            except ConnectionAbortedError:   # refused, and the answer cannot say so: the connection ends
                return
            writer.writelines(encode_response(api_key, version, header.correlation_id, answer))
            await writer.drain()
    except ProtocolError as e:
        log.warning("controller listener: bad request from %s: %s; closing", peer, e)
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    except asyncio.CancelledError:
        pass
    finally:
        writer.close()

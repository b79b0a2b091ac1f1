"""The controller's Kafka APIs (Kafka's ``ControllerApis`` over its ``QuorumController``): each takes the decoded
request and returns the response, once the records it decided are committed.

CreateTopics, DeleteTopics, CreatePartitions, CreateAcls, DeleteAcls, AlterConfigs, IncrementalAlterConfigs,
ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments are decided here, by the pure managers of
this package (:mod:`~klog.controller.topics`, :mod:`~klog.controller.configs`, :mod:`~klog.controller.acls`,
:mod:`~klog.controller.elections`, :mod:`~klog.controller.reassignments`) on the committed image of a
:class:`QuorumWriter`, and so are the writes a broker makes for itself on the node that decides (an internal
topic, a single voter's producer-id blocks). Every metadata write goes through one
:class:`~klog.controller.writer.MetadataWriter` (the write path: decide on the committed image, refuse NOT_CONTROLLER
when not active, commit, answer): those of
:meth:`ControllerApis.write` and, on a quorum member, those of the brokers' lifecycle
(:class:`~klog.controller.broker_service.BrokerLifecycleService`: registrations, heartbeats, fencing, controlled
shutdown, AlterPartition, AllocateProducerIds, leader balancing), serialized by the member's one lock
(``ControllerNode.decisions``).

- a controller-only node: :class:`RaftQuorumWriter` over its Raft member
  (:class:`~klog.controller.node.ControllerNode`);
- a node with a broker (a single voter, or a combined ``broker,controller`` node): the broker's cluster metadata,
  whose commit returns once its broker applied the records (as every broker, it makes the files of its new
  partitions only then).

Brokers forward these requests to the active controller (:mod:`klog.broker.forwarding`), whose controller listener
hands them to :meth:`ControllerApis.handle`; a broker on the active controller's node calls the same methods in
process. A node that is not the active controller answers NOT_CONTROLLER on every item, so the forwarding broker
tries the next one. Decisions are serialized: each sees the records of the one before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, Union, cast

from klog.controller import acls
from klog.controller.authorize import ControllerRequest as GuardedRequest
from klog.controller.authorize import Requester, config_denial, guard
from klog.controller.brokers import not_registered, unregister_records, unregistered
from klog.controller.configs import ConfigControlManager
from klog.controller.describe_configs import DESCRIBE_CONFIGS_VERSIONS, DescribedNode, describe_configs
from klog.controller.features import UPGRADE, FeatureUpdate, kraft_version, update_features
from klog.controller.elections import PREFERRED, ElectionError, elect_leaders
from klog.controller.partition_change import unclean_election_allowed
from klog.controller.producer_ids import allocate_producer_ids
from klog.controller.quotas import alter_client_quotas, ip_host_names
from klog.controller.reassignments import alter_partition_reassignments, list_partition_reassignments
from klog.controller.result import ControllerResult
from klog.controller.scram import alter_user_scram_credentials
from klog.controller.tokens import (
    TokenSettings,
    create_delegation_token,
    create_refusal,
    expire_delegation_token,
    expired_tokens,
    renew_delegation_token,
    requested_owner,
)
from klog.controller.topics import CreatableTopic, CreatedTopic, MutationCharge, TopicControlManager, TopicError
from klog.controller.writer import Decision, MetadataWriter, QuorumWriter, RaftQuorumWriter, not_controller_error
from klog.metadata.config import BrokerConfig, ConfigSource, topic_config_entries
from klog.metadata import loggers as runtime_loggers
from klog.metadata.image import ConfigResourceType, MetadataImage
from klog.protocol.errors import ErrorCode
from klog.security.acl import AclOperation
from klog.security.authorizer import StandardAuthorizer, authorizer_from_config
from klog.security.principal import ANONYMOUS, KafkaPrincipal
from klog.security.quotas import MutationQuota, MutationQuotaManager
from klog.security.tokens import token_secret_key

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterConfigsRequest,
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterClientQuotasResponseEntryData,
        AlterConfigsRequestResource,
        AlterConfigsResponse,
        AlterConfigsResponseResourceResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        AlterPartitionReassignmentsResponseReassignablePartitionResponse,
        AlterPartitionReassignmentsResponseReassignableTopicResponse,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        AlterUserScramCredentialsResponseResult,
        CreateAclsRequest,
        CreateAclsResponse,
        CreateAclsResponseAclCreationResult,
        CreateDelegationTokenRequest,
        CreateDelegationTokenResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreatePartitionsResponseTopicResult,
        CreateTopicsRequest,
        CreateTopicsResponse,
        CreateTopicsResponseCreatableTopicResult,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
        DeleteAclsResponseFilterResult,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DeleteTopicsResponseDeletableTopicResult,
        DescribeConfigsRequest,
        DescribeConfigsRequestResource,
        DescribeConfigsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ElectLeadersResponsePartitionResult,
        ElectLeadersResponseReplicaElectionResult,
        ExpireDelegationTokenRequest,
        ExpireDelegationTokenResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsRequestAlterConfigsResource,
        IncrementalAlterConfigsResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
        RenewDelegationTokenRequest,
        RenewDelegationTokenResponse,
        UnregisterBrokerResponse,
        UpdateFeaturesRequest,
        UpdateFeaturesResponse,
    )
    from klog.controller.reassignments import ReassignedPartition
    from klog.protocol.messages import RequestHeader

    #: the decoded body of a request brokers forward to the controller, and its answer
    ControllerRequest = Union[CreateTopicsRequest, DeleteTopicsRequest, CreateAclsRequest, DeleteAclsRequest,
                              AlterConfigsRequest, CreatePartitionsRequest, ElectLeadersRequest,
                              IncrementalAlterConfigsRequest, AlterPartitionReassignmentsRequest,
                              ListPartitionReassignmentsRequest, AlterClientQuotasRequest,
                              AlterUserScramCredentialsRequest, UpdateFeaturesRequest,
                              CreateDelegationTokenRequest, RenewDelegationTokenRequest,
                              ExpireDelegationTokenRequest, DescribeConfigsRequest, DescribeAclsRequest]
    ControllerResponse = Union[CreateTopicsResponse, DeleteTopicsResponse, CreateAclsResponse, DeleteAclsResponse,
                               AlterConfigsResponse, CreatePartitionsResponse, ElectLeadersResponse,
                               IncrementalAlterConfigsResponse, AlterPartitionReassignmentsResponse,
                               ListPartitionReassignmentsResponse, AlterClientQuotasResponse,
                               AlterUserScramCredentialsResponse, UpdateFeaturesResponse,
                               CreateDelegationTokenResponse, RenewDelegationTokenResponse,
                               ExpireDelegationTokenResponse, DescribeConfigsResponse, DescribeAclsResponse]

    #: a per-item result of a controller response: each carries an error code and message, which a refused
    #: change sets on every item that would have succeeded
    ErrorItem = Union[AlterClientQuotasResponseEntryData, AlterConfigsResponseResourceResponse,
                      AlterPartitionReassignmentsResponseReassignablePartitionResponse,
                      AlterUserScramCredentialsResponseResult, CreateAclsResponseAclCreationResult,
                      CreatePartitionsResponseTopicResult, CreateTopicsResponseCreatableTopicResult,
                      DeleteAclsResponseFilterResult, DeleteTopicsResponseDeletableTopicResult,
                      ElectLeadersResponsePartitionResult]

__all__ = ["CONTROLLER_API_VERSIONS", "CONTROLLER_ONLY_API_VERSIONS", "ControllerApis", "Decision", "MetadataWriter", "QuorumWriter", "RaftQuorumWriter",
           "not_controller_error"]

log = logging.getLogger("klog.controller.apis")

NONE = ErrorCode.NONE
NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER

#: api key -> (min, max) version the controller decides; brokers accept these and forward them.
CONTROLLER_API_VERSIONS: dict[int, tuple[int, int]] = {
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    30: (1, 3),   # CreateAcls
    31: (1, 3),   # DeleteAcls
    33: (0, 2),   # AlterConfigs
    37: (0, 3),   # CreatePartitions
    38: (1, 3),   # CreateDelegationToken
    39: (1, 2),   # RenewDelegationToken
    40: (1, 2),   # ExpireDelegationToken
    43: (0, 2),   # ElectLeaders
    44: (0, 1),   # IncrementalAlterConfigs
    45: (0, 1),   # AlterPartitionReassignments
    46: (0, 0),   # ListPartitionReassignments
    49: (0, 1),   # AlterClientQuotas
    51: (0, 0),   # AlterUserScramCredentials
    57: (0, 2),   # UpdateFeatures
}
#: api key -> (min, max) version the controller listener answers for its own clients (``--bootstrap-controller``)
#: and brokers answer themselves, never forwarding them: DescribeConfigs (Kafka's ControllerApis, KIP-919)
CONTROLLER_ONLY_API_VERSIONS: dict[int, tuple[int, int]] = {32: DESCRIBE_CONFIGS_VERSIONS,
                                                             # DescribeAcls (kafka-acls --bootstrap-controller)
                                                             29: (1, 3)}

#: Kafka's "no topic id" (Uuid.ZERO_UUID)
_ZERO_UUID = uuid.UUID(int=0)
#: the longest a pass of the expired-token check waits for its commit before the next pass
TOKEN_EXPIRY_COMMIT_TIMEOUT_S = 30.0
#: the longest AlterClientQuotas waits for its IP entities' host names to resolve (all at once); a name not
#: resolved by then is answered as not resolvable
QUOTA_HOST_RESOLVE_TIMEOUT_S = 5.0
R = TypeVar("R")
T = TypeVar("T")
E = TypeVar("E", bound="ErrorItem")


def _items(items: list[E]) -> list[E]:
    """A response whose items are its wire items."""
    return items


def _partitions(items: list[tuple[str, E]]) -> Iterable[E]:
    """The wire items of per-partition results (each beside its topic's name)."""
    return (item for _, item in items)


def _answer_refusal(item: ErrorItem, exc: TopicError) -> None:
    item["error_code"] = exc.code
    item["error_message"] = exc.message


def _topic_not_created(item: CreateTopicsResponseCreatableTopicResult, exc: TopicError) -> None:
    """A refused CreateTopics item: without what a success reports (its id, partition count, replication
    factor)."""
    _answer_refusal(item, exc)
    item.update({"topic_id": _ZERO_UUID, "num_partitions": -1, "replication_factor": -1})


def _nothing_deleted(item: DeleteAclsResponseFilterResult, exc: TopicError) -> None:
    _answer_refusal(item, exc)
    item["matching_acls"] = []


def _past_deadline(timeout_ms: int, named: Iterable[object]) -> bool:
    """Kafka's controller times a request's event out when its deadline (now + the request's timeout_ms) has
    passed when the event runs: always for a timeout_ms of 0 or less, once a request leaves its controller
    anything to do (``named``: its items that are neither repeated nor refused before the controller)."""
    counts = Counter(named)
    return timeout_ms <= 0 and any(n == 1 for n in counts.values())


async def _answered(answer: T) -> T:
    """An answer ready now, as an awaitable."""
    return answer


async def resolvable_host_names(names: Iterable[str], timeout: float = QUOTA_HOST_RESOLVE_TIMEOUT_S
                                ) -> frozenset[str]:
    """The ``names`` that resolve to an address (Kafka's ``InetAddress.getByName``), looked up at once on the
    loop's resolver threads within ``timeout`` seconds; those still unresolved then are left out."""
    loop = asyncio.get_running_loop()
    lookups = {asyncio.ensure_future(loop.getaddrinfo(name, None)): name for name in names}
    if not lookups:
        return frozenset()
    done, pending = await asyncio.wait(lookups, timeout=timeout)
    for lookup in pending:
        lookup.cancel()
    return frozenset(lookups[lookup] for lookup in done
                     if not lookup.cancelled() and lookup.exception() is None)


def now_ms() -> int:
    return int(time.time() * 1000)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


#: the first version of CreateTopics (19), DeleteTopics (20) and CreatePartitions (37) whose items may be refused
#: with THROTTLING_QUOTA_EXCEEDED (KIP-599); older ones are accepted and only told their throttle time
_STRICT_MUTATION_QUOTA_SINCE = {19: 6, 20: 5, 37: 3}


class ControllerApis:
    """``config``: the node's configuration (broker defaults for new topics and configs, min.insync.replicas,
    unclean.leader.election.enable)."""

    def __init__(self, quorum: QuorumWriter, config: BrokerConfig, *, decisions: asyncio.Lock | None = None) -> None:
        """``decisions``: the lock of the node's other writers (a quorum member's ``ControllerNode.decisions``,
        shared with its BrokerLifecycleService), None: a lock of its own (a single voter)."""
        self.quorum = quorum
        self.config = config
        self.topics = TopicControlManager(config)
        self.configs = ConfigControlManager(config, config.node_id)
        #: the write path: one decision at a time, each decided on the image with the previous one's records
        self.writer = MetadataWriter(quorum, decisions)
        #: what enveloped requests are authorized with (authorizer.class.name; None: everything is allowed)
        self.authorizer: StandardAuthorizer | None = authorizer_from_config(
            config["authorizer.class.name"], config["super.users"].split(";"), config["allow.everyone.if.no.acl.found"])
        #: controller_mutation_rate (KIP-599): the partitions CreateTopics, CreatePartitions and DeleteTopics
        #: create, add or delete, per client as the image's client quotas say
        self.mutation_quotas = MutationQuotaManager(
            num_samples=int(config["controller.quota.window.num"]),
            window_ms=int(config["controller.quota.window.size.seconds"]) * 1000)

    def handle(self, header: RequestHeader, request: ControllerRequest, peer: object = None
               ) -> Awaitable[ControllerResponse]:
        """A request sent to the controller listener without an envelope (``header``: its decoded request header;
        ``request``: the decoded body of the API ``header`` names, of the type each method below takes; ``peer``:
        unused): decided as ``User:ANONYMOUS``'s where a principal matters (delegation tokens), and as a request no
        broker forwarded (``kafka-configs --bootstrap-controller``)."""
        return self._decide(header, request, ANONYMOUS, forwarded=False)

    async def handle_enveloped(self, header: RequestHeader, request: ControllerRequest, principal: KafkaPrincipal,
                               host: str, *, forwarded: bool = True) -> ControllerResponse:
        """A request a broker forwarded in an EnvelopeRequest (KIP-590): authorized as ``principal`` from ``host``
        (the client's, as the envelope names them) with this node's authorizer on the committed image, as Kafka's
        controller does, then decided; the delegation-token APIs are decided for ``principal``. ``forwarded``:
        see :meth:`_decide`."""
        api_key = int(header.api_key)
        if api_key in (38, 39, 40) or self.authorizer is None:
            return await self._decide(header, request, principal, forwarded=forwarded)
        authorizer = self.authorizer

        def check(operation: int, resource_type: int, name: str, count: bool) -> bool:
            return authorizer.authorize(self.quorum.image.acls, principal, host, operation, resource_type, name)

        requester = Requester(check, int(header.api_version), lambda: self.quorum.image)
        if api_key == 29:   # DescribeAcls: Describe on the Cluster (Kafka's AclApis)
            if not requester.allowed_cluster(AclOperation.DESCRIBE):
                return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "error_message": "Cluster authorization failed.", "resources": []}
            return self.describe_acls(cast("DescribeAclsRequest", request))
        if api_key == 32:   # DescribeConfigs: DESCRIBE_CONFIGS on each resource (the Cluster, or the topic)
            return self.describe_configs(cast("DescribeConfigsRequest", request), lambda resource: config_denial(
                requester, resource, AclOperation.DESCRIBE_CONFIGS))
        return await guard(api_key, requester, cast("GuardedRequest", request),
                           lambda allowed: self._decide(header, allowed, principal, forwarded=forwarded))

    def handle_direct(self, header: RequestHeader, request: ControllerRequest, principal: KafkaPrincipal,
                      host: str) -> Awaitable[ControllerResponse]:
        """An admin request a client sent to the controller listener itself (``--bootstrap-controller``),
        authorized as its sender: :meth:`handle_enveloped`, decided as a request no broker forwarded."""
        return self.handle_enveloped(header, request, principal, host, forwarded=False)

    def _decide(self, header: RequestHeader, request: ControllerRequest, principal: KafkaPrincipal, *,
                forwarded: bool = True) -> Awaitable[ControllerResponse]:
        """``forwarded``: a broker passed the request on (it checked it first), False: a client sent it to the
        controller listener itself."""
        api_key, version = int(header.api_key), int(header.api_version)
        if api_key == 19:
            return self.create_topics(cast("CreateTopicsRequest", request), version, header.client_id, principal)
        if api_key == 20:
            return self.delete_topics(cast("DeleteTopicsRequest", request), version, header.client_id, principal)
        if api_key == 30:
            return self.create_acls(cast("CreateAclsRequest", request))
        if api_key == 31:
            return self.delete_acls(cast("DeleteAclsRequest", request))
        if api_key == 33:
            return self.alter_configs(cast("AlterConfigsRequest", request), forwarded=forwarded)
        if api_key == 37:
            return self.create_partitions(cast("CreatePartitionsRequest", request), version, header.client_id,
                                          principal)
        if api_key == 43:
            return self.elect_leaders(cast("ElectLeadersRequest", request), version)
        if api_key == 44:
            return self.incremental_alter_configs(cast("IncrementalAlterConfigsRequest", request), forwarded=forwarded)
        if api_key == 45:
            return self.alter_partition_reassignments(cast("AlterPartitionReassignmentsRequest", request), version)
        if api_key == 46:
            return self.list_partition_reassignments(cast("ListPartitionReassignmentsRequest", request))
        if api_key == 49:
            return self.alter_client_quotas(cast("AlterClientQuotasRequest", request))
        if api_key == 51:
            return self.alter_user_scram_credentials(cast("AlterUserScramCredentialsRequest", request))
        if api_key == 57:
            return self.update_features(cast("UpdateFeaturesRequest", request), version)
        if api_key == 29:
            return _answered(self.describe_acls(cast("DescribeAclsRequest", request)))
        if api_key == 32:
            return _answered(self.describe_configs(cast("DescribeConfigsRequest", request), lambda resource: 0))
        if api_key in (38, 39, 40):
            if api_key == 38:
                return self.create_delegation_token(cast("CreateDelegationTokenRequest", request), principal)
            if api_key == 39:
                return self.renew_delegation_token(cast("RenewDelegationTokenRequest", request), principal)
            return self.expire_delegation_token(cast("ExpireDelegationTokenRequest", request), principal)
        raise ValueError(f"api key {api_key} is not decided by the controller")

    def describe_configs(self, request: DescribeConfigsRequest,
                         denial: Callable[[DescribeConfigsRequestResource], int]) -> DescribeConfigsResponse:
        """DescribeConfigs on the controller listener (``kafka-configs --bootstrap-controller --describe``): this
        node's BROKER resource, the cluster default, its BROKER_LOGGER, topics, from its config and committed
        image, on any controller (Kafka's ControllerApis.handleDescribeConfigsRequest, no NOT_CONTROLLER)."""
        return describe_configs(DescribedNode(self.config, self.config.node_id, self.quorum.image), request, denial)

    # ---- topics --------------------------------------------------------------------------------------

    def _mutation_quota(self, api_key: int, api_version: int, client_id: str | None, principal: KafkaPrincipal
                        ) -> MutationQuota:
        """The request's controller mutation quota (Kafka's ``newQuotaFor``): strict (THROTTLING_QUOTA_EXCEEDED
        per item) from CreateTopics v6, DeleteTopics v5, CreatePartitions v3; permissive (accepted, only
        throttled) before."""
        return self.mutation_quotas.quota_for(self.quorum.image.client_quotas, principal.name, client_id or "",
                                              api_version >= _STRICT_MUTATION_QUOTA_SINCE[api_key], _monotonic_ms())

    async def create_topics(self, request: CreateTopicsRequest, api_version: int, client_id: str | None,
                            principal: KafkaPrincipal = ANONYMOUS) -> CreateTopicsResponse:
        """``principal`` and ``client_id``: whose controller mutation quota the partitions are charged to."""
        items = [CreatableTopic.from_request(t) for t in request.topics]
        validate_only = bool(getattr(request, "validate_only", False))
        if _past_deadline(request.timeout_ms, (t.name for t in items)):   # the request's error answer
            return {"throttle_time_ms": 0, "topics": [
                {"name": t.name, "topic_id": _ZERO_UUID, "error_code": int(ErrorCode.REQUEST_TIMED_OUT),
                 "error_message": None, "num_partitions": -1, "replication_factor": -1,
                 "configs": [] if api_version >= 5 else None} for t in items]}
        quota = self._mutation_quota(19, api_version, client_id, principal)
        results = await self.create(items, validate_only=validate_only, client_id=client_id,
                                    quota=lambda n: quota.record(n, _monotonic_ms()))
        sent = {t.name: t.configs or {} for t in items}
        for created in results:
            result = created.item
            if api_version >= 5 and result["error_code"] == NONE:
                # sorted by name (Kafka's controller describes them from a TreeMap), the topic's own values as the
                # request wrote them (" 100 ", "TRUE"; described later as parsed)
                own = sent[result["name"]]
                result["configs"] = [
                    {"name": e["name"], "value": own.get(e["name"], e["value"])
                     if e["config_source"] == ConfigSource.TOPIC_CONFIG else e["value"],
                     "read_only": e["read_only"], "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
                    for e in sorted(topic_config_entries(self.config, created.overrides or {}, None,
                                                         include_synonyms=False), key=lambda e: e["name"])]
            else:   # v5+ refused: Kafka answers an empty list (its schema's default), not null; before v5 none
                result["configs"] = [] if api_version >= 5 else None
        return {"throttle_time_ms": quota.throttle_time_ms(_monotonic_ms()),
                "topics": [created.item for created in results]}

    async def create(self, topics: list[CreatableTopic], *, validate_only: bool = False,
                     client_id: str | None = None, quota: MutationCharge | None = None) -> list[CreatedTopic]:
        """CreateTopics' per-topic results (each with the topic's overrides beside it)."""
        return await self._write(lambda image: self.topics.create_topics(
            topics, image, now_ms(), validate_only=validate_only, client_id=client_id, quota=quota),
            lambda created: (c.item for c in created), _topic_not_created)

    async def delete_topics(self, request: DeleteTopicsRequest, api_version: int, client_id: str | None = None,
                            principal: KafkaPrincipal = ANONYMOUS) -> DeleteTopicsResponse:
        if api_version >= 6:
            wanted = [(t.name, getattr(t, "topic_id", _ZERO_UUID)) for t in request.topics]
        else:
            wanted = [(name, _ZERO_UUID) for name in request.topic_names]
        if _past_deadline(request.timeout_ms, (
                name if topic_id == _ZERO_UUID else topic_id for name, topic_id in wanted
                if (name is None) != (topic_id == _ZERO_UUID))):   # the request's error answer
            return {"throttle_time_ms": 0, "responses": [
                {"name": name, "topic_id": topic_id, "error_code": int(ErrorCode.REQUEST_TIMED_OUT), "error_message": None}
                for name, topic_id in wanted]}
        quota = self._mutation_quota(20, api_version, client_id, principal)
        responses = await self._write(lambda image: self.topics.delete_topics(
            wanted, image, now_ms(), lambda n: quota.record(n, _monotonic_ms())), _items)
        return {"throttle_time_ms": quota.throttle_time_ms(_monotonic_ms()), "responses": responses}

    async def create_partitions(self, request: CreatePartitionsRequest, api_version: int = 0,
                                client_id: str | None = None, principal: KafkaPrincipal = ANONYMOUS
                                ) -> CreatePartitionsResponse:
        if _past_deadline(request.timeout_ms, (t.name for t in request.topics)):   # the request's error answer
            return {"throttle_time_ms": 0, "results": [
                {"name": t.name, "error_code": int(ErrorCode.REQUEST_TIMED_OUT), "error_message": None}
                for t in request.topics]}
        quota = self._mutation_quota(37, api_version, client_id, principal)
        results = await self._write(lambda image: self.topics.create_partitions(
            request, image, now_ms(), lambda n: quota.record(n, _monotonic_ms())), _items)
        return {"throttle_time_ms": quota.throttle_time_ms(_monotonic_ms()), "results": results}

    # ---- configs -------------------------------------------------------------------------------------

    async def alter_configs(self, request: AlterConfigsRequest, *, forwarded: bool = True) -> AlterConfigsResponse:
        """AlterConfigs replaces a resource's overrides (``forwarded``: see :meth:`_decide`)."""
        responses = await self._alter_configs(request.resources, bool(request.validate_only), incremental=False,
                                              forwarded=forwarded)
        return {"throttle_time_ms": 0, "responses": responses}

    async def incremental_alter_configs(self, request: IncrementalAlterConfigsRequest, *, forwarded: bool = True
                                        ) -> IncrementalAlterConfigsResponse:
        """IncrementalAlterConfigs edits a resource's overrides (``forwarded``: see :meth:`_decide`). A BROKER_LOGGER
        resource (``kafka-configs --bootstrap-controller``, KIP-919) changes this node's log levels, as Kafka's
        ControllerApis does with its RuntimeLoggerManager: answered here, not written to the metadata log."""
        validate_only = bool(request.validate_only)
        loggers = {index: runtime_loggers.answer_changes(self.config.node_id, resource, validate_only)
                   for index, resource in enumerate(request.resources)
                   if resource.resource_type == ConfigResourceType.BROKER_LOGGER}
        rest = [resource for index, resource in enumerate(request.resources) if index not in loggers]
        responses = await self._alter_configs(rest, validate_only, incremental=True, forwarded=forwarded) \
            if rest or not loggers else []
        if loggers:
            responses = runtime_loggers.in_request_order(request.resources, loggers, responses)
        return {"throttle_time_ms": 0, "responses": responses}

    async def _alter_configs(self, resources: Sequence[AlterConfigsRequestResource]
                             | Sequence[IncrementalAlterConfigsRequestAlterConfigsResource], validate_only: bool, *,
                             incremental: bool, forwarded: bool) -> list[AlterConfigsResponseResourceResponse]:
        return await self._write(lambda image: self.configs.alter_configs(
            resources, image, now_ms(), incremental=incremental, validate_only=validate_only, forwarded=forwarded),
            _items)

    # ---- ACLs ----------------------------------------------------------------------------------------

    def _security_disabled(self) -> str | None:
        """Kafka's answer to ACL changes on a node without ``authorizer.class.name``."""
        return None if self.config["authorizer.class.name"] else "No Authorizer is configured."

    async def create_acls(self, request: CreateAclsRequest) -> CreateAclsResponse:
        disabled = self._security_disabled()
        if disabled is not None:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": disabled} for _ in request.creations]}
        results = await self._write(lambda image: acls.create_acls(request.creations, image), _items)
        return {"throttle_time_ms": 0, "results": results}

    def describe_acls(self, request: DescribeAclsRequest) -> DescribeAclsResponse:
        """DescribeAcls on the controller listener (``kafka-acls --bootstrap-controller --list``): the committed
        image's ACLs, as Kafka's ControllerApis answers from its authorizer (SECURITY_DISABLED without one)."""
        if self._security_disabled() is not None:   # DescribeAcls' own message (Kafka's AclApis)
            return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED,
                    "error_message": acls.DESCRIBE_ACLS_DISABLED, "resources": []}
        return acls.describe_acls(request, self.quorum.image.acls)

    async def delete_acls(self, request: DeleteAclsRequest) -> DeleteAclsResponse:
        disabled = self._security_disabled()
        if disabled is not None:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": disabled, "matching_acls": []}
                for _ in request.filters]}
        filter_results = await self._write(lambda image: acls.delete_acls(request.filters, image), _items,
                                           _nothing_deleted)
        return {"throttle_time_ms": 0, "filter_results": filter_results}

    # ---- replicas and leaders ------------------------------------------------------------------------

    async def elect_leaders(self, request: ElectLeadersRequest, api_version: int) -> ElectLeadersResponse:
        """The new leaders reach every broker as PartitionChangeRecords."""
        election_type = getattr(request, "election_type", PREFERRED) if api_version >= 1 else PREFERRED
        wanted = None if request.topic_partitions is None else \
            [(t.topic, list(t.partitions)) for t in request.topic_partitions]
        if wanted is not None and not wanted:   # nothing to do (Kafka answers at once)
            return {"throttle_time_ms": 0, "error_code": NONE, "replica_election_results": []}
        min_isr = self.config["min.insync.replicas"]
        #: every topic when no partition is named: Kafka lists each, its partitions that needed no election left out
        every_topic: list[str] = []

        def decide(image: MetadataImage) -> ControllerResult[list[tuple[str, ElectLeadersResponsePartitionResult]]]:
            if wanted is None:
                every_topic[:] = sorted(image.topics_by_name)
            return elect_leaders(election_type, wanted, image, min_insync_replicas=min_isr)

        try:
            items = await self._write(decide, _partitions)
        except ElectionError as exc:   # the request's error answer: each partition named refused as the request
            return {"throttle_time_ms": 0, "error_code": exc.code, "replica_election_results": [
                {"topic": t, "partition_result": [{"partition_id": p, "error_code": exc.code,
                                                   "error_message": exc.message} for p in partitions]}
                for t, partitions in wanted or []]}
        if wanted is None:   # every topic of the cluster, its partitions that needed no election left out
            by_name = dict(_by_topic(items))
            grouped = [(name, by_name.get(name, [])) for name in every_topic]
        else:   # as Kafka: one result per topic item of the request (one naming no partition too), in its order
            answers = iter(answer for _, answer in items)
            grouped = [(t, [next(answers) for _ in partitions]) for t, partitions in wanted]
        results: list[ElectLeadersResponseReplicaElectionResult] = [
            {"topic": t, "partition_result": r} for t, r in grouped]
        return {"throttle_time_ms": 0, "error_code": NONE, "replica_election_results": results}

    async def alter_partition_reassignments(self, request: AlterPartitionReassignmentsRequest, api_version: int
                                            ) -> AlterPartitionReassignmentsResponse:
        """Brokers named in a partition's ``adding_replicas`` start following it, and a broker no longer among
        its replicas deletes its copy, as they apply the PartitionChangeRecords."""
        allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True)) if api_version >= 1 \
            else True
        wanted = [(t.name, [(p.partition_index, None if p.replicas is None else list(p.replicas))
                            for p in t.partitions]) for t in request.topics]
        default_unclean = bool(self.config["unclean.leader.election.enable"])

        def decide(image: MetadataImage) -> ControllerResult[list[tuple[str, ReassignedPartition]]]:
            def unclean(topic: str) -> bool:
                return unclean_election_allowed(image, topic, default_unclean)
            return alter_partition_reassignments(wanted, image, allow_replication_factor_change=allow_rf_change,
                                                 unclean_allowed=unclean)

        items = await self._write(decide, _partitions) if wanted else []
        responses: list[AlterPartitionReassignmentsResponseReassignableTopicResponse] = [
            {"name": t, "partitions": r} for t, r in _by_topic(items)]
        return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": NONE,
                "error_message": None, "responses": responses}

    async def list_partition_reassignments(self, request: ListPartitionReassignmentsRequest
                                           ) -> ListPartitionReassignmentsResponse:
        if self.quorum.not_controller() is not None:   # only the active controller answers
            return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                    "error_message": "This node is not the active controller.", "topics": []}
        wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
                "topics": list_partition_reassignments(wanted, self.quorum.image)}

    # ---- the broker's own writes (a single voter's, or an in-process active controller's) ---------------

    async def create_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Mapping[str, str]) -> int:
        """An internal topic (``__consumer_offsets``), the replication factor capped at the live brokers: its
        error code (NONE when created or there already). Raises TopicError when it was not committed."""
        return await self.write(lambda image: self.topics.create_internal_topic(
            name, num_partitions, replication_factor, configs, image))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids for ``broker_id`` (Kafka's ProducerIdControlManager): (first id, size), once
        its ProducerIdsRecord is committed. Raises TopicError when it was not committed."""
        return await self.write(lambda image: allocate_producer_ids(broker_id, broker_epoch, image))

    async def unregister_broker(self, broker_id: int) -> UnregisterBrokerResponse:
        """UnregisterBroker where no broker lifecycle service decides it (a single voter: its broker's registration
        is the image's only one); a quorum member's is decided with its broker sessions
        (klog.controller.broker_service)."""
        def decide(image: MetadataImage) -> ControllerResult[UnregisterBrokerResponse]:
            if broker_id not in image.brokers:
                return ControllerResult((), not_registered(broker_id))
            # the brokers that may lead: the image's live ones not shutting down (no sessions here to ask)
            active = {b.id for b in image.live_brokers() if not b.in_controlled_shutdown}
            default_unclean = bool(self.config["unclean.leader.election.enable"])
            return ControllerResult(unregister_records(
                image, broker_id, active.__contains__,
                lambda topic: unclean_election_allowed(image, topic, default_unclean),
                int(self.config["min.insync.replicas"])),
                unregistered())

        decision = await self.writer.decide(decide)
        if decision.refusal is not None:
            return {"throttle_time_ms": 0, "error_code": decision.refusal.code, "error_message": None}
        return decision.response

    # ---- SCRAM credentials ---------------------------------------------------------------------------

    async def alter_user_scram_credentials(self, request: AlterUserScramCredentialsRequest
                                           ) -> AlterUserScramCredentialsResponse:
        """UserScramCredentialRecords / RemoveUserScramCredentialRecords (klog.controller.scram)."""
        deletions, upsertions = list(request.deletions or []), list(request.upsertions or [])
        results = await self._write(lambda image: alter_user_scram_credentials(deletions, upsertions, image),
                                    _items)
        return {"throttle_time_ms": 0, "results": results}

    # ---- delegation tokens ---------------------------------------------------------------------------

    def _token_settings(self) -> TokenSettings:
        return TokenSettings(token_secret_key(self.config), int(self.config["delegation.token.max.lifetime.ms"]),
                             int(self.config["delegation.token.expiry.time.ms"]))

    async def create_delegation_token(self, request: CreateDelegationTokenRequest, requester: KafkaPrincipal
                                      ) -> CreateDelegationTokenResponse:
        """A DelegationTokenRecord (klog.controller.tokens); the owner is the request's (v3) or the requester."""
        owner = requested_owner(request, requester)
        if owner is None:
            return create_refusal(ErrorCode.UNKNOWN_SERVER_ERROR)
        settings = self._token_settings()
        return await self._write_token(lambda image: create_delegation_token(request, requester, owner, settings,
                                                                             now_ms()))

    async def renew_delegation_token(self, request: RenewDelegationTokenRequest, principal: KafkaPrincipal
                                     ) -> RenewDelegationTokenResponse:
        settings = self._token_settings()
        hmac, period = bytes(request.hmac), int(request.renew_period_ms)
        return await self._write_token(lambda image: renew_delegation_token(hmac, period, principal, settings,
                                                                            image, now_ms()))

    async def expire_delegation_token(self, request: ExpireDelegationTokenRequest, principal: KafkaPrincipal
                                      ) -> ExpireDelegationTokenResponse:
        settings = self._token_settings()
        hmac, period = bytes(request.hmac), int(request.expiry_time_period_ms)
        return await self._write_token(lambda image: expire_delegation_token(hmac, period, principal, settings,
                                                                             image, now_ms()))

    async def _write_token(self, operation: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        """A token decision's answer; not committed (not the active controller...): its error, nothing else."""
        decision = await self.writer.decide(operation)
        response = decision.response
        if decision.refusal is not None:
            answer = cast("dict[str, object]", response)
            answer["error_code"] = decision.refusal.code
            if "token_id" in answer:   # a token that was not committed does not exist: no id, no HMAC
                answer.update({"token_id": "", "hmac": b""})
        return response

    async def expire_tokens_forever(self) -> None:
        """Every ``delegation.token.expiry.check.interval.ms``, remove the tokens past their expiry
        (RemoveDelegationTokenRecords; only the active controller commits them, other nodes' passes are refused
        and change nothing)."""
        interval_s = int(self.config["delegation.token.expiry.check.interval.ms"]) / 1000
        while True:
            await asyncio.sleep(interval_s)
            if token_secret_key(self.config) is None or not self.quorum.image.delegation_tokens:
                continue
            try:
                removed = await asyncio.wait_for(self.write(lambda image: expired_tokens(image, now_ms())),
                                                 TOKEN_EXPIRY_COMMIT_TIMEOUT_S)
            except (TopicError, asyncio.TimeoutError):
                continue
            if removed:
                log.info("removed %d expired delegation token(s)", len(removed))

    # ---- client quotas ------------------------------------------------------------------------------

    async def alter_client_quotas(self, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
        """ClientQuotaRecords (klog.controller.quotas); ``validate_only``: the answers, nothing written. The IP
        entities' host names are resolved first, off the event loop (Kafka resolves them on its controller thread,
        which a slow resolver then holds)."""
        entries, validate_only = list(request.entries), bool(request.validate_only)
        resolvable = await resolvable_host_names(ip_host_names(entries))
        results = await self._write(lambda image: alter_client_quotas(entries, image, validate_only=validate_only,
                                                                      resolvable_hosts=resolvable), _items)
        return {"throttle_time_ms": 0, "entries": results}

    # ---- features ----------------------------------------------------------------------------------

    async def update_features(self, request: UpdateFeaturesRequest, api_version: int) -> UpdateFeaturesResponse:
        """FeatureLevelRecords (klog.controller.features); the whole request refused on the first bad update. Kafka
        4.3 reads a v0 request's updates as upgrades (its AllowDowngrade is not honoured)."""
        updates = [FeatureUpdate(u.feature, int(u.max_version_level),
                                 int(getattr(u, "upgrade_type", UPGRADE)) if api_version >= 1 else UPGRADE)
                   for u in request.feature_updates]
        validate_only = bool(getattr(request, "validate_only", False)) if api_version >= 1 else False
        kraft = kraft_version(self.config)
        try:
            refusal = await self.write(lambda image: update_features(
                updates, image, node_id=self.config.node_id, kraft_version=kraft, validate_only=validate_only,
                static_min_insync_replicas=self.config["min.insync.replicas"]))
        except TopicError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message, "results": []}
        if refusal is not None:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "results": []}
        # v0-1 name every update with Kafka's NONE answer (its ApiError.NONE message is "NONE")
        return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
                "results": [{"feature": u.name, "error_code": NONE, "error_message": "NONE"} for u in updates]}

    # ---- the write path ------------------------------------------------------------------------------

    async def write(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """The one path of every metadata write (:meth:`MetadataWriter.write`): decide ``operation`` (a pure
        manager function of the committed image) and commit its records; its response once they are committed.
        Raises TopicError when this node is not the active controller or the records were not committed (then
        nothing was). A new kind of write (ACLs, SCRAM credentials, quotas...) is a manager function returning a
        ControllerResult, passed here."""
        return await self.writer.write(operation)

    async def _write(self, operation: Callable[[MetadataImage], ControllerResult[list[T]]],
                     items: Callable[[list[T]], Iterable[E]],
                     refuse: Callable[[E, TopicError], None] = _answer_refusal) -> list[T]:
        """:meth:`write` for a per-item response: a change refused as a whole (this node is not the active
        controller, the records could not be committed) answers the refusal (``refuse``) on every item that
        would have succeeded (every item when not active). ``items``: the wire items of the response."""
        decision = await self.writer.decide(operation)
        if decision.refusal is not None:
            for item in items(decision.response):
                if item["error_code"] == NONE or decision.not_active:
                    refuse(item, decision.refusal)
        return decision.response


def _by_topic(items: Iterable[tuple[str, T]]) -> list[tuple[str, list[T]]]:
    """Per-partition items (each beside its topic's name) grouped by topic, in first-seen order."""
    grouped: dict[str, list[T]] = {}
    for topic, item in items:
        grouped.setdefault(topic, []).append(item)
    return list(grouped.items())

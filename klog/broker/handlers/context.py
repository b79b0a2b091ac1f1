"""The broker as request handlers see it: :class:`HandlerBroker`, the first argument of every handler.

A ``typing.Protocol`` naming exactly what handlers read, each with its real type, so mypy checks the handlers
against the broker state (``klog.broker.context.BrokerState`` implements it; ``klog.broker.network.connection``
passes that state to the handlers through :class:`klog.broker.handlers.Handler`, whose ``func`` is typed with
this Protocol, so a missing or retyped attribute fails the type check there). Not to be confused with
``klog.broker.groups.api.BrokerContext``, what the broker hands the group coordinator.

The types are imported for the type checker only: handlers import nothing more at run time than before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from klog.broker.cluster_metadata import ClusterMetadata
    from klog.broker.config import BrokerConfig
    from klog.broker.fetch_sessions import FetchSessionCache
    from klog.broker.groups.api import GroupCoordinatorAPI
    from klog.broker.access import AccessControl
    from klog.security.principal import KafkaPrincipal
    from klog.broker.partitions import PartitionManager
    from klog.broker.producer_id_blocks import LocalProducerIdManager, RpcProducerIdManager
    from klog.broker.producer_state import ProducerStateManager
    from klog.broker.quotas import QuotaControl
    from klog.broker.replication.manager import ReplicaManager
    from klog.broker.replication.throttle import ReplicationThrottle
    from klog.broker.security import InterBrokerConnector
    from klog.broker.telemetry import ClientTelemetry
    from klog.broker.share_partitions import SharePartitionManager, ShareSession
    from klog.broker.transactions.lazy import LazyTransactionCoordinator
    from klog.controller.apis import ControllerApis
    from klog.controller.describe_quorum import ControllerListener
    from klog.protocol.message_types import FetchResponseFetchableTopicResponse


class HandlerMetrics(Protocol):
    """What handlers count into the broker's metrics (``klog.broker.metrics.BrokerMetrics``, which imports
    ``handlers.metadata`` and so is named here by what it does, not imported)."""

    def produced(self, topic: str, nbytes: int, records: int) -> None: ...

    def fetched(self, responses: Sequence[FetchResponseFetchableTopicResponse]) -> None: ...

    def fetched_natively(self, topic_bytes: Sequence[tuple[str, int]]) -> None: ...


class ControllerForwarding(Protocol):
    """A quorum member's way to the active controller (``klog.broker.forwarding.ControllerForwarder``)."""

    async def handle(self, api_key: int, version: int, client_id: str | None, request: object,
                     decide_locally: Callable[[], Awaitable[Any]], *, principal: KafkaPrincipal | None = None,
                     client_host: str = "0.0.0.0") -> Any: ...


class HandlerBroker(Protocol):
    """Everything a handler reads from the broker (``klog.broker.context.BrokerState`` implements it)."""

    config: BrokerConfig
    node_id: int
    cluster_id: str
    #: ``broker.rack``, None when unset
    rack: str | None
    #: listener name -> advertised (host, port)
    endpoints: dict[str, tuple[str, int]]
    #: api key -> (min, max) advertised in ApiVersions
    api_versions: dict[int, tuple[int, int]]
    #: the committed cluster metadata (the image) and the operations on it
    metadata: ClusterMetadata
    #: the controller's decisions (CreateTopics, configs, elections...)
    controller_apis: ControllerApis
    #: this broker's partition logs and watermarks
    partitions: PartitionManager
    #: leader or follower of each local partition
    replicas: ReplicaManager
    #: leader.replication.throttled.rate of the replica fetches this broker answers
    leader_throttle: ReplicationThrottle
    #: the KIP-227 fetch sessions
    fetch_sessions: FetchSessionCache
    #: the client quotas (a consumer_byte_rate throttled fetch is answered empty)
    quotas: QuotaControl
    #: KIP-932: share-partitions of the partitions this broker leads, and the share sessions fetching them
    share_partitions: SharePartitionManager
    share_sessions: dict[tuple[str, str], ShareSession]
    producers: ProducerStateManager
    #: producer ids from controller-allocated blocks on a quorum member, None on a single voter
    producer_id_manager: RpcProducerIdManager | None
    #: a single voter's producer ids, from blocks it commits itself
    local_producer_ids: LocalProducerIdManager
    #: the transaction coordinator
    transactions: LazyTransactionCoordinator
    #: opens connections to other brokers' inter-broker listener (its TLS and SASL)
    inter_broker: InterBrokerConnector
    #: None unless ``klog.metrics.listener`` is set
    metrics: HandlerMetrics | None
    #: the authorization hook (klog.broker.handlers.authz), None without authorizer.class.name: all allowed
    access: AccessControl | None
    #: a combined node's controller listener (DescribeQuorum), else None
    controller_listener: ControllerListener | None

    @property
    def telemetry(self) -> ClientTelemetry:
        """KIP-714 client telemetry: subscriptions and pushed client metrics (made on first use)."""
        ...

    @property
    def forwarder(self) -> ControllerForwarding | None:
        """A quorum member's broker forwards the controller's requests to the active controller (None: a single
        voter decides them in process)."""
        ...

    @property
    def coordinator(self) -> GroupCoordinatorAPI:
        """The group coordinator (read-only here, so BrokerState's GroupCoordinator satisfies it)."""
        ...

    @property
    def host(self) -> str:
        """Advertised host of the first listener."""
        ...

    @property
    def port(self) -> int:
        """Advertised port of the first listener."""
        ...

    def start_auto_create_topic(self, name: str) -> None:
        """Start creating ``name`` with the broker defaults (Metadata's allow_auto_topic_creation) without waiting
        for it, unless that is under way."""
        ...

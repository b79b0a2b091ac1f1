"""The metadata image: an immutable view of the cluster built from the committed ``__cluster_metadata`` log.

Mirrors Apache Kafka's ``org.apache.kafka.image.MetadataImage``: features, brokers and controllers, topics
(by id and by name) with their partitions, configs per resource, client quotas, ACLs, SCRAM credentials,
delegation tokens, the next producer id block, and the provenance (highest offset and epoch applied).
Everything is frozen: dataclasses with tuples, and read-only mappings; a :class:`klog.metadata.delta.MetadataDelta`
builds the next image. Handlers read an image; they never change one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "AclEntry",
    "BrokerEndpoint",
    "BrokerRegistration",
    "ClientQuotaEntity",
    "ConfigResourceType",
    "ControllerRegistration",
    "DelegationToken",
    "EMPTY_IMAGE",
    "LeaderRecoveryState",
    "LOST_DIRECTORY",
    "MIGRATING_DIRECTORY",
    "UNASSIGNED_DIRECTORY",
    "METADATA_VERSION_FEATURE",
    "MetadataImage",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "PartitionRegistration",
    "ScramCredential",
    "TopicImage",
    "frozen_map",
]

#: PartitionRecord.Leader when the partition has no leader.
NO_LEADER = -1
#: PartitionChangeRecord.Leader when the leader did not change.
NO_LEADER_CHANGE = -2
#: Kafka's ``DirectoryId.MIGRATING``: a replica whose log directory is not tracked (the zero UUID).
MIGRATING_DIRECTORY = uuid.UUID(int=0)
#: Kafka's ``DirectoryId.UNASSIGNED``: the broker has several log dirs and has not said yet which one holds the
#: replica (it does with AssignReplicasToDirs once it made the log).
UNASSIGNED_DIRECTORY = uuid.UUID(int=1)
#: Kafka's ``DirectoryId.LOST``: the replica's log dir is gone.
LOST_DIRECTORY = uuid.UUID(int=2)
METADATA_VERSION_FEATURE = "metadata.version"

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def frozen_map(d: dict[Any, Any]) -> Mapping[Any, Any]:
    """A read-only view of ``d`` (the caller hands the dict over and keeps no reference)."""
    return MappingProxyType(d) if d else _EMPTY


class LeaderRecoveryState(IntEnum):
    """KIP-704: RECOVERING after an unclean election until the new leader has recovered the partition."""

    RECOVERED = 0
    RECOVERING = 1


class ConfigResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` byte values, as in ConfigRecord.ResourceType."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker (RegisterBrokerRecord, then Fence/Unfence/BrokerRegistrationChange records)."""

    id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    supported_features: tuple[tuple[str, int, int], ...]  # (name, min, max)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool = False
    directories: tuple[uuid.UUID, ...] = ()
    cordoned_directories: tuple[uuid.UUID, ...] | None = None

    def has_online_dir(self, directory: uuid.UUID) -> bool:
        """Kafka's ``DirectoryId.isOnline``: a replica in ``directory`` can be served by this broker (its registration
        lists the dir among its online ones; MIGRATING and UNASSIGNED count as online, LOST never; a broker that
        registered no dirs has every dir online)."""
        if directory in (MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY):
            return True
        if directory == LOST_DIRECTORY:
            return False
        return not self.directories or directory in self.directories

    def has_uncordoned_dirs(self) -> bool:
        """Kafka's ``BrokerRegistration.hasUncordonedDirs``: new replicas may be placed on this broker (it registered
        no dirs, has reported no cordoned ones yet, or has a dir that is not cordoned)."""
        if not self.directories or self.cordoned_directories is None:
            return True
        return bool(set(self.directories) - set(self.cordoned_directories))

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for e in self.endpoints:
            if e.name == listener:
                return e
        return None


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool
    endpoints: tuple[BrokerEndpoint, ...]
    supported_features: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replica assignment and leadership (Kafka's ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    directories: tuple[uuid.UUID, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: LeaderRecoveryState
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def directory(self, broker_id: int) -> uuid.UUID:
        """The log dir holding ``broker_id``'s replica (Kafka's ``PartitionRegistration.directory``)."""
        for r, d in zip(self.replicas, self.directories):
            if r == broker_id:
                return d
        return UNASSIGNED_DIRECTORY

    def offline_replicas(self, live_brokers: Mapping[int, BrokerRegistration]) -> tuple[int, ...]:
        """Replicas on brokers that are not registered or are fenced, or in a log dir their broker reported
        offline (Metadata's OfflineReplicas, as Kafka's MetadataCache)."""
        return tuple(r for r in self.replicas if r not in live_brokers or live_brokers[r].fenced
                     or not live_brokers[r].has_online_dir(self.directory(r)))


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class AclEntry:
    """AccessControlEntryRecord fields (Kafka's ``StandardAcl``)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class DelegationToken:
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int


#: A client quota entity: sorted ((entity_type, entity_name or None), ...).
ClientQuotaEntity = tuple[tuple[str, "str | None"], ...]


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole cluster metadata at one log offset. ``highest_offset`` is the offset of the last record applied
    (-1: nothing), ``epoch`` the Raft epoch of that record's batch, ``cluster_id`` comes from the data directory
    (meta.properties / the quorum), not from records."""

    cluster_id: str | None = None
    highest_offset: int = -1
    epoch: int = -1
    last_contained_log_time_ms: int = -1
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[tuple[ConfigResourceType, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    client_quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    acls: Mapping[uuid.UUID, AclEntry] = field(default_factory=lambda: _EMPTY)
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: _EMPTY)
    delegation_tokens: Mapping[str, DelegationToken] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = -1

    @property
    def metadata_version(self) -> int | None:
        return self.features.get(METADATA_VERSION_FEATURE)

    @property
    def is_empty(self) -> bool:
        return self.same_content(EMPTY_IMAGE)

    def with_provenance(self, cluster_id: str | None, highest_offset: int, epoch: int,
                        last_contained_log_time_ms: int) -> MetadataImage:
        return MetadataImage(cluster_id, highest_offset, epoch, last_contained_log_time_ms, self.features,
                             self.brokers, self.controllers, self.topics_by_id, self.topics_by_name, self.configs,
                             self.client_quotas, self.acls, self.scram_credentials, self.delegation_tokens,
                             self.next_producer_id)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics_by_name.get(topic)
        return None if t is None else t.partitions.get(partition)

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((ConfigResourceType.TOPIC, topic), _EMPTY)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered, unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def same_content(self, other: MetadataImage) -> bool:
        """Equal ignoring provenance (offset, epoch, time) and cluster id: what a snapshot must preserve."""
        return self.with_provenance(None, -1, -1, -1) == other.with_provenance(None, -1, -1, -1)


EMPTY_IMAGE = MetadataImage()

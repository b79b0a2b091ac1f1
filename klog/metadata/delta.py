"""Records in, next image out: Kafka's ``MetadataDelta`` replay semantics over :class:`MetadataImage`.

A :class:`MetadataDelta` starts from an image, replays records (copy-on-write: only what they touch is copied)
and :meth:`MetadataDelta.apply` returns the next image together with what changed (:class:`MetadataChanges`:
topics created and deleted, partitions whose leader, ISR or replicas changed, broker registrations...), which
is what a broker acts on. Pure: no IO, no clock.

Replay follows Apache Kafka 4.x (``org.apache.kafka.image.*Delta``):

- PartitionChangeRecord: a null list field or Leader -2 means "no change"; any other Leader (including -1,
  no leader) bumps the leader epoch; every change record bumps the partition epoch; LeaderRecoveryState -1 is
  "no change". Directories missing or all MIGRATING become MIGRATING for every replica.
- RemoveTopicRecord removes the topic, its partitions and its configs.
- Fence/Unfence/BrokerRegistrationChange name the broker epoch; a mismatch or unknown broker is an error (as
  Kafka's ``getBrokerOrThrow``). BrokerRegistrationChange.Fenced is 1 fence, -1 unfence, 0 no change;
  InControlledShutdown 1 sets it, 0 no change; an empty LogDirs list is no change.
- FeatureLevelRecord with level 0 removes a feature (metadata.version is always kept).
- ConfigRecord with a null value deletes the key; a resource left with no keys disappears. The same for
  client quotas (Remove=true).
- Records a broker image does not hold (NoOp, ZkMigrationState, Begin/End/AbortTransaction) change nothing
  here; metadata transactions are resolved by :class:`klog.metadata.loader.MetadataLoader`.

Inconsistent records (a change for an unknown partition, removing an unknown topic...) raise
:class:`MetadataReplayError` naming the offset and record, never a silent skip.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.protocol.struct import Struct

from .image import (
    METADATA_VERSION_FEATURE,
    MIGRATING_DIRECTORY,
    NO_LEADER_CHANGE,
    AclEntry,
    BrokerEndpoint,
    BrokerRegistration,
    ClientQuotaEntity,
    ConfigResourceType,
    ControllerRegistration,
    DelegationToken,
    LeaderRecoveryState,
    MetadataImage,
    PartitionRegistration,
    ScramCredential,
    TopicImage,
    frozen_map,
)
from .records import AnyRecord, ControlRecord, MetadataRecord, MetadataRecordType

__all__ = ["MetadataChanges", "MetadataDelta", "MetadataReplayError", "PartitionChange", "replay"]

T = MetadataRecordType


class MetadataReplayError(ValueError):
    """A record that does not fit the image it is replayed on (Kafka throws IllegalStateException)."""

    def __init__(self, reason: str, *, offset: int | None = None, record: str | None = None) -> None:
        self.reason = reason
        self.offset = offset
        self.record = record
        where = " ".join(x for x in (f"offset {offset}" if offset is not None else None, record) if x)
        super().__init__(f"{where}: {reason}" if where else reason)


@dataclass(frozen=True, slots=True)
class PartitionChange:
    topic_id: uuid.UUID
    topic_name: str
    partition: int
    before: PartitionRegistration | None  # None: a new partition
    after: PartitionRegistration

    @property
    def leader_changed(self) -> bool:
        b = self.before
        return b is None or b.leader != self.after.leader or b.leader_epoch != self.after.leader_epoch

    @property
    def isr_changed(self) -> bool:
        return self.before is None or self.before.isr != self.after.isr


@dataclass(frozen=True)
class MetadataChanges:
    """What one delta changed: enough for a broker to start/stop replicas and refresh its caches."""

    created_topics: Mapping[uuid.UUID, str] = field(default_factory=dict)
    deleted_topics: Mapping[uuid.UUID, str] = field(default_factory=dict)
    changed_partitions: tuple[PartitionChange, ...] = ()
    #: broker id -> (before, after); None before = newly registered, None after = unregistered
    changed_brokers: Mapping[int, tuple[BrokerRegistration | None, BrokerRegistration | None]] = field(
        default_factory=dict)
    changed_controllers: frozenset[int] = frozenset()
    changed_configs: frozenset[tuple[Any, str]] = frozenset()
    features_changed: bool = False
    producer_ids_changed: bool = False

    @property
    def leader_changes(self) -> list[PartitionChange]:
        return [c for c in self.changed_partitions if c.leader_changed]

    @property
    def isr_changes(self) -> list[PartitionChange]:
        return [c for c in self.changed_partitions if c.isr_changed]

    @property
    def empty(self) -> bool:
        return not (self.created_topics or self.deleted_topics or self.changed_partitions or self.changed_brokers
                    or self.changed_controllers or self.changed_configs or self.features_changed
                    or self.producer_ids_changed)


def _endpoints(items: list[Any]) -> tuple[BrokerEndpoint, ...]:
    return tuple(BrokerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in items)


def _features(items: list[Any]) -> tuple[tuple[str, int, int], ...]:
    return tuple((f.name, f.min_supported_version, f.max_supported_version) for f in items)


def _ids(items: list[int] | None) -> tuple[int, ...]:
    return tuple(items) if items else ()


def _directories(dirs: list[uuid.UUID] | tuple[uuid.UUID, ...] | None, replicas: int) -> tuple[uuid.UUID, ...]:
    """Kafka's ``defaultToMigrating``: none given, or all MIGRATING, means MIGRATING for every replica."""
    if not dirs or all(d == MIGRATING_DIRECTORY for d in dirs):
        return (MIGRATING_DIRECTORY,) * replicas
    return tuple(dirs)


def _config_type(value: int) -> Any:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return value


class MetadataDelta:
    """Changes on top of ``image``; :meth:`replay` records in log order, then :meth:`apply`."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.highest_offset = image.highest_offset
        self.epoch = image.epoch
        self.last_log_time_ms = image.last_contained_log_time_ms
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._controllers: dict[int, ControllerRegistration | None] = {}
        # topic id -> (name, partitions): topics created or changed in this delta
        self._topics: dict[uuid.UUID, tuple[str, dict[int, PartitionRegistration]]] = {}
        self._topic_names: dict[str, uuid.UUID] = {}  # names of the topics in self._topics
        self._deleted_topics: dict[uuid.UUID, str] = {}  # topics of the image removed by this delta
        self._created_topics: dict[uuid.UUID, str] = {}
        self._touched_partitions: set[tuple[uuid.UUID, int]] = set()
        self._configs: dict[tuple[Any, str], dict[str, str]] = {}
        self._quotas: dict[ClientQuotaEntity, dict[str, float]] = {}
        self._acls: dict[uuid.UUID, AclEntry | None] = {}
        self._scram: dict[tuple[str, int], ScramCredential | None] = {}
        self._tokens: dict[str, DelegationToken | None] = {}
        self._next_producer_id: int | None = None

    # -- lookups through the delta ----------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def topic_id(self, name: str) -> uuid.UUID | None:
        tid = self._topic_names.get(name)
        if tid is not None:
            return tid
        t = self.image.topics_by_name.get(name)
        if t is not None and t.id not in self._deleted_topics:
            return t.id
        return None

    def _topic_partitions(self, topic_id: uuid.UUID, what: str) -> tuple[str, dict[int, PartitionRegistration]]:
        entry = self._topics.get(topic_id)
        if entry is not None:
            return entry
        t = self.image.topics_by_id.get(topic_id)
        if t is None or topic_id in self._deleted_topics:
            raise MetadataReplayError(f"{what}: no topic with id {topic_id}")
        entry = (t.name, dict(t.partitions))
        self._topics[topic_id] = entry
        self._topic_names[t.name] = topic_id
        return entry

    def _broker_or_raise(self, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        b = self.broker(broker_id)
        if b is None:
            raise MetadataReplayError(f"tried to {action} broker {broker_id}, but that broker was not registered")
        if b.epoch != epoch:
            raise MetadataReplayError(f"tried to {action} broker {broker_id}, but the given epoch, {epoch}, did not "
                                      f"match the current broker epoch, {b.epoch}")
        return b

    def _config(self, key: tuple[Any, str]) -> dict[str, str]:
        c = self._configs.get(key)
        if c is None:
            c = dict(self.image.configs.get(key, {}))
            self._configs[key] = c
        return c

    # -- replay -------------------------------------------------------------------------------------------------

    def replay(self, rec: AnyRecord, offset: int | None = None, epoch: int | None = None) -> None:
        """Apply one record. ``offset``/``epoch`` (its log position) advance the provenance of the next image."""
        if offset is not None:
            self.highest_offset = offset
        if epoch is not None:
            self.epoch = epoch
        if isinstance(rec, ControlRecord):
            return  # Raft bookkeeping: no metadata content
        handler = _HANDLERS.get(rec.type)
        if handler is None:
            return
        try:
            handler(self, rec.data)
        except MetadataReplayError as e:
            raise MetadataReplayError(e.reason, offset=offset, record=f"{rec.name} v{rec.version}") from None

    def _register_broker(self, r: Struct) -> None:
        self._brokers[r.broker_id] = BrokerRegistration(
            r.broker_id, r.broker_epoch, r.incarnation_id, _endpoints(r.end_points), _features(r.features), r.rack,
            r.fenced, r.in_controlled_shutdown, r.is_migrating_zk_broker, tuple(r.log_dirs),
            None if r.cordoned_log_dirs is None else tuple(r.cordoned_log_dirs))

    def _unregister_broker(self, r: Struct) -> None:
        self._brokers[r.broker_id] = None

    def _fence(self, r: Struct, fenced: bool) -> None:
        b = self._broker_or_raise(r.id, r.epoch, "fence" if fenced else "unfence")
        self._brokers[r.id] = _with(b, fenced=fenced)

    def _fence_broker(self, r: Struct) -> None:
        self._fence(r, True)

    def _unfence_broker(self, r: Struct) -> None:
        self._fence(r, False)

    def _broker_registration_change(self, r: Struct) -> None:
        b = self._broker_or_raise(r.broker_id, r.broker_epoch, "change")
        changes: dict[str, Any] = {}
        if r.fenced == 1:
            changes["fenced"] = True
        elif r.fenced == -1:
            changes["fenced"] = False
        elif r.fenced != 0:
            raise MetadataReplayError(f"unknown value for the fenced field: {r.fenced}")
        if r.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        elif r.in_controlled_shutdown != 0:
            raise MetadataReplayError(f"unknown value for the in_controlled_shutdown field: "
                                      f"{r.in_controlled_shutdown}")
        if r.log_dirs:
            changes["directories"] = tuple(r.log_dirs)
        if r.cordoned_log_dirs is not None:
            changes["cordoned_directories"] = tuple(r.cordoned_log_dirs)
        nb = _with(b, **changes)
        if nb != b:
            self._brokers[r.broker_id] = nb

    def _register_controller(self, r: Struct) -> None:
        self._controllers[r.controller_id] = ControllerRegistration(
            r.controller_id, r.incarnation_id, r.zk_migration_ready, _endpoints(r.end_points), _features(r.features))

    def _topic(self, r: Struct) -> None:
        if r.topic_id in self._topics or (r.topic_id in self.image.topics_by_id
                                          and r.topic_id not in self._deleted_topics):
            raise MetadataReplayError(f"topic id {r.topic_id} already exists")
        if self.topic_id(r.name) is not None:
            raise MetadataReplayError(f"a topic named {r.name!r} already exists")
        self._topics[r.topic_id] = (r.name, {})
        self._topic_names[r.name] = r.topic_id
        self._created_topics[r.topic_id] = r.name

    def _partition(self, r: Struct) -> None:
        name, parts = self._topic_partitions(r.topic_id, f"partition {r.partition_id}")
        if r.directories and len(r.directories) != len(r.replicas):
            raise MetadataReplayError(f"{len(r.directories)} directories for {len(r.replicas)} replicas")
        parts[r.partition_id] = PartitionRegistration(
            tuple(r.replicas), _directories(r.directories, len(r.replicas)), tuple(r.isr),
            tuple(r.removing_replicas), tuple(r.adding_replicas), r.leader,
            LeaderRecoveryState(r.leader_recovery_state), r.leader_epoch, r.partition_epoch,
            _ids(r.eligible_leader_replicas), _ids(r.last_known_elr))
        self._touched_partitions.add((r.topic_id, r.partition_id))

    def _partition_change(self, r: Struct) -> None:
        name, parts = self._topic_partitions(r.topic_id, f"partition {r.partition_id}")
        p = parts.get(r.partition_id)
        if p is None:
            raise MetadataReplayError(f"topic {name!r} ({r.topic_id}) has no partition {r.partition_id}")
        parts[r.partition_id] = merge_partition_change(p, r)
        self._touched_partitions.add((r.topic_id, r.partition_id))

    def _clear_elr(self, r: Struct) -> None:
        if r.topic_name:
            tid = self.topic_id(r.topic_name)
            if tid is None:
                raise MetadataReplayError(f"unable to clear the ELR of topic {r.topic_name!r}: no such topic")
            ids = [tid]
        else:
            # Every topic visible through the delta. (Kafka's TopicsDelta only walks the image's topics, so its
            # result would depend on where batches were cut; the controller never relies on that.)
            ids = [tid for tid in self.image.topics_by_id if tid not in self._deleted_topics]
            ids += [tid for tid in self._topics if tid not in self.image.topics_by_id]
        for tid in ids:
            _, parts = self._topic_partitions(tid, "clear ELR")
            for pid, p in list(parts.items()):
                if p.elr or p.last_known_elr:
                    parts[pid] = _with(p, elr=(), last_known_elr=(), partition_epoch=p.partition_epoch + 1)
                    self._touched_partitions.add((tid, pid))

    def _remove_topic(self, r: Struct) -> None:
        tid = r.topic_id
        entry = self._topics.pop(tid, None)
        if entry is not None:
            name = entry[0]
            del self._topic_names[name]
            self._created_topics.pop(tid, None)
        else:
            t = self.image.topics_by_id.get(tid)
            if t is None or tid in self._deleted_topics:
                raise MetadataReplayError(f"unable to delete topic with id {tid}: no such topic found")
            name = t.name
        if tid in self.image.topics_by_id:
            # the image's topic goes (its name, even if this delta reused the id for another topic since)
            self._deleted_topics.setdefault(tid, self.image.topics_by_id[tid].name)
        self._touched_partitions = {k for k in self._touched_partitions if k[0] != tid}
        # Kafka's ConfigurationsDelta.replay(RemoveTopicRecord, name): the topic's configs go with it.
        self._configs[(ConfigResourceType.TOPIC, name)] = {}

    def _config_record(self, r: Struct) -> None:
        c = self._config((_config_type(r.resource_type), r.resource_name))
        if r.value is None:
            c.pop(r.name, None)
        else:
            c[r.name] = r.value

    def _feature_level(self, r: Struct) -> None:
        if self._features is None:
            self._features = dict(self.image.features)
        if r.feature_level == 0 and r.name != METADATA_VERSION_FEATURE:
            self._features.pop(r.name, None)
        else:
            self._features[r.name] = r.feature_level

    def _producer_ids(self, r: Struct) -> None:
        self._next_producer_id = r.next_producer_id

    def _client_quota(self, r: Struct) -> None:
        entity: ClientQuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in r.entity))
        q = self._quotas.get(entity)
        if q is None:
            q = dict(self.image.client_quotas.get(entity, {}))
            self._quotas[entity] = q
        if r.remove:
            q.pop(r.key, None)
        else:
            q[r.key] = r.value

    def _acl(self, r: Struct) -> None:
        self._acls[r.id] = AclEntry(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                                    r.operation, r.permission_type)

    def _remove_acl(self, r: Struct) -> None:
        exists = self._acls[r.id] is not None if r.id in self._acls else r.id in self.image.acls
        if not exists:
            raise MetadataReplayError(f"failed to remove ACL {r.id}: no such ACL")
        self._acls[r.id] = None

    def _scram_credential(self, r: Struct) -> None:
        self._scram[(r.name, r.mechanism)] = ScramCredential(bytes(r.salt), bytes(r.stored_key),
                                                             bytes(r.server_key), r.iterations)

    def _remove_scram_credential(self, r: Struct) -> None:
        self._scram[(r.name, r.mechanism)] = None

    def _token(self, r: Struct) -> None:
        self._tokens[r.token_id] = DelegationToken(r.owner, r.requester, tuple(r.renewers), r.issue_timestamp,
                                                   r.max_timestamp, r.expiration_timestamp)

    def _remove_token(self, r: Struct) -> None:
        self._tokens[r.token_id] = None

    # -- apply --------------------------------------------------------------------------------------------------

    def apply(self, *, log_time_ms: int | None = None) -> tuple[MetadataImage, MetadataChanges]:
        """The next image (provenance: the last replayed offset and epoch) and what changed."""
        img = self.image
        features = img.features if self._features is None else frozen_map(self._features)
        brokers = _overlay(img.brokers, self._brokers)
        controllers = _overlay(img.controllers, self._controllers)
        # no topic changed (a NoOpRecord, a broker's registration, a config): the next image shares the topic
        # mappings (klog/broker/metadata_answers.py keeps its Metadata answers while they and the brokers' are the
        # same objects)
        unchanged = not self._deleted_topics and not self._topics
        by_id = {} if unchanged else dict(img.topics_by_id)
        by_name = {} if unchanged else dict(img.topics_by_name)
        for tid, name in self._deleted_topics.items():
            del by_id[tid]
            if by_name.get(name) is not None and by_name[name].id == tid:
                del by_name[name]
        changed_partitions = []
        for tid, (name, parts) in self._topics.items():
            t = TopicImage(name, tid, frozen_map(dict(sorted(parts.items()))))
            by_id[tid] = t
            by_name[name] = t
            before = img.topics_by_id.get(tid)
            for pid in sorted(parts):
                if (tid, pid) in self._touched_partitions:
                    old = before.partitions.get(pid) if before is not None and tid not in self._created_topics \
                        else None
                    if old != parts[pid]:
                        changed_partitions.append(PartitionChange(tid, name, pid, old, parts[pid]))
        # a resource (or quota entity) left with no keys disappears
        configs = _overlay(img.configs, {k: frozen_map(dict(c)) if c else None for k, c in self._configs.items()})
        quotas = _overlay(img.client_quotas, {k: frozen_map(dict(q)) if q else None for k, q in self._quotas.items()})
        next_image = MetadataImage(
            img.cluster_id, self.highest_offset, self.epoch,
            self.last_log_time_ms if log_time_ms is None else log_time_ms,
            features, brokers, controllers, img.topics_by_id if unchanged else frozen_map(by_id),
            img.topics_by_name if unchanged else frozen_map(by_name), configs, quotas,
            _overlay(img.acls, self._acls), _overlay(img.scram_credentials, self._scram),
            _overlay(img.delegation_tokens, self._tokens),
            img.next_producer_id if self._next_producer_id is None else self._next_producer_id,
        )
        changed_brokers: dict[int, tuple[BrokerRegistration | None, BrokerRegistration | None]] = {}
        for bid, after in self._brokers.items():
            registered = img.brokers.get(bid)
            if registered != after:
                changed_brokers[bid] = (registered, after)
        changes = MetadataChanges(
            created_topics=dict(self._created_topics),
            deleted_topics=dict(self._deleted_topics),
            changed_partitions=tuple(changed_partitions),
            changed_brokers=changed_brokers,
            changed_controllers=frozenset(k for k, v in self._controllers.items() if img.controllers.get(k) != v),
            changed_configs=frozenset(k for k in self._configs if img.configs.get(k, {}) != configs.get(k, {})),
            features_changed=features != img.features,
            producer_ids_changed=next_image.next_producer_id != img.next_producer_id,
        )
        return next_image, changes


def merge_partition_change(p: PartitionRegistration, r: Any) -> PartitionRegistration:
    """Kafka's ``PartitionRegistration.merge(PartitionChangeRecord)``."""
    replicas = p.replicas if r.replicas is None else tuple(r.replicas)
    if r.replicas is not None and r.directories and len(r.directories) != len(r.replicas):
        raise MetadataReplayError(f"{len(r.directories)} directories for {len(r.replicas)} replicas")
    directories = _directories(p.directories if r.directories is None else r.directories, len(replicas))
    if len(directories) != len(replicas):
        # Kafka's controller sends Directories with every Replicas change; without them the partition would
        # hold a directory list that its next PartitionRecord (a snapshot) could not carry.
        raise MetadataReplayError(f"replicas {list(replicas)} changed but the {len(directories)} log directories "
                                  f"did not")
    if r.leader == NO_LEADER_CHANGE:
        leader, leader_epoch = p.leader, p.leader_epoch
    else:
        leader, leader_epoch = r.leader, p.leader_epoch + 1
    lrs = p.leader_recovery_state if r.leader_recovery_state == -1 else LeaderRecoveryState(r.leader_recovery_state)
    return PartitionRegistration(
        replicas, directories,
        p.isr if r.isr is None else tuple(r.isr),
        p.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas),
        p.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas),
        leader, lrs, leader_epoch, p.partition_epoch + 1,
        p.elr if r.eligible_leader_replicas is None else tuple(r.eligible_leader_replicas),
        p.last_known_elr if r.last_known_elr is None else tuple(r.last_known_elr),
    )


def _with(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes) if changes else obj


def _overlay(base: Mapping[Any, Any], changes: dict[Any, Any]) -> Mapping[Any, Any]:
    if not changes:
        return base
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return frozen_map(out)


_HANDLERS: dict[int, Any] = {
    T.REGISTER_BROKER_RECORD: MetadataDelta._register_broker,
    T.UNREGISTER_BROKER_RECORD: MetadataDelta._unregister_broker,
    T.TOPIC_RECORD: MetadataDelta._topic,
    T.PARTITION_RECORD: MetadataDelta._partition,
    T.CONFIG_RECORD: MetadataDelta._config_record,
    T.PARTITION_CHANGE_RECORD: MetadataDelta._partition_change,
    T.FENCE_BROKER_RECORD: MetadataDelta._fence_broker,
    T.UNFENCE_BROKER_RECORD: MetadataDelta._unfence_broker,
    T.REMOVE_TOPIC_RECORD: MetadataDelta._remove_topic,
    T.DELEGATION_TOKEN_RECORD: MetadataDelta._token,
    T.USER_SCRAM_CREDENTIAL_RECORD: MetadataDelta._scram_credential,
    T.FEATURE_LEVEL_RECORD: MetadataDelta._feature_level,
    T.CLIENT_QUOTA_RECORD: MetadataDelta._client_quota,
    T.PRODUCER_IDS_RECORD: MetadataDelta._producer_ids,
    T.BROKER_REGISTRATION_CHANGE_RECORD: MetadataDelta._broker_registration_change,
    T.ACCESS_CONTROL_ENTRY_RECORD: MetadataDelta._acl,
    T.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: MetadataDelta._remove_acl,
    T.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: MetadataDelta._remove_scram_credential,
    T.REMOVE_DELEGATION_TOKEN_RECORD: MetadataDelta._remove_token,
    T.REGISTER_CONTROLLER_RECORD: MetadataDelta._register_controller,
    T.CLEAR_ELR_RECORD: MetadataDelta._clear_elr,
}


def replay(image: MetadataImage, records: list[MetadataRecord | ControlRecord] | list[AnyRecord],
           first_offset: int | None = None) -> tuple[MetadataImage, MetadataChanges]:
    """Replay records on ``image`` in one delta (offsets ``first_offset, first_offset + 1, ...`` if given)."""
    delta = MetadataDelta(image)
    for i, rec in enumerate(records):
        delta.replay(rec, None if first_offset is None else first_offset + i)
    return delta.apply()

"""Topic operations as records: CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Kafka's ``ReplicationControlManager``, pure: each operation is decided against the committed image and returns
the records (TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord) with the per-topic results. Items
of one request are decided in order, each seeing the topics an earlier item of the same request creates, and
the records of all successful items are committed together.

Replicas are placed on the registered brokers of the image that are neither fenced nor in controlled shutdown nor
have all their log dirs cordoned (KIP-1066),
striped as Kafka's ``StripedReplicaPlacer`` does: leaders go round the racks (``broker.rack``; brokers without one
form a rack of their own) and round the brokers within each rack, and the other replicas of a partition take the
following racks, so a partition's replicas are on distinct racks where there are enough. Without racks partition
``p`` starts on the ``p``-th broker and takes the next ones. Each new topic starts the stripe one place further
(the number of topics there are), so single-partition topics spread over the brokers (Kafka picks a random
start). The first replica is the leader, the ISR is every replica, leader epoch and partition epoch start at 0.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klog.metadata.config import BrokerConfig, TopicConfigError, check_topic_configs
from klog.metadata.features import MV_CORDONED_LOG_DIRS
from klog.metadata.image import ConfigResourceType, MetadataImage, TopicImage
from klog.metadata.records import MetadataRecord, record
from klog.metadata.storage import METADATA_TOPIC, random_kafka_uuid
from klog.protocol.errors import ErrorCode

from .directories import placement_directories
from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreatePartitionsRequest,
        CreatePartitionsRequestTopic,
        CreateTopicsRequestCreatableTopic,
        CreatePartitionsResponseTopicResult,
        CreateTopicsResponseCreatableTopicResult,
        DeleteTopicsResponseDeletableTopicResult,
    )

__all__ = [
    "INTERNAL_TOPICS",
    "InternalTopicSpec",
    "MAX_PARTITIONS_PER_CLUSTER",
    "MAX_PARTITIONS_PER_TOPIC",
    "TOPIC_NAME_MAX_LENGTH",
    "CreatedTopic",
    "TopicControlManager",
    "PlacementError",
    "TopicError",
    "internal_topic_spec",
    "is_internal",
    "place_replicas",
    "validate_topic_name",
]

TOPIC_NAME_MAX_LENGTH = 249
_TOPIC_NAME_RE = re.compile(r"[a-zA-Z0-9._-]+")   # fullmatch: "$" would let a final newline in
#: Kafka caps partitions per CreateTopics/CreatePartitions request implicitly by memory; we name a limit.
MAX_PARTITIONS_PER_TOPIC = 10_000
#: Partitions one CreateTopics request may make, over all its topics (Kafka's MAX_PARTITIONS_PER_BATCH)
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Records one CreateTopics request may make (Kafka's QuorumController.MAX_RECORDS_PER_USER_OP): a topic record, its
#: partition records and its config records each
MAX_RECORDS_PER_REQUEST = 10_000
#: Partitions a cluster may hold (issue 15's bound: the metadata image, every broker's copy of it and a snapshot
#: grow with them); CreateTopics/CreatePartitions past it are refused with POLICY_VIOLATION naming this limit.
MAX_PARTITIONS_PER_CLUSTER = 200_000
#: Kafka's internal topics (``Topic.isInternal``): not deletable by clients, Metadata's IsInternal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True)
class InternalTopicSpec:
    """How an internal topic is created, whoever creates it (its coordinator's FindCoordinator or first write, a
    Metadata request auto-creating it): its partitions, replication factor (capped at the live brokers by the
    controller) and topic configs."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]


def internal_topic_spec(name: str, config: Mapping[str, object]) -> InternalTopicSpec:
    """The one place deciding an internal topic's spec from the broker ``config`` (Kafka's names), as Kafka 4.3's
    coordinators do (GroupCoordinatorService.groupMetadataTopicConfigs, TransactionStateManager.transactionTopicConfigs,
    ShareCoordinatorService.shareGroupStateTopicConfigs, which its AutoTopicCreationManager uses too); KeyError
    for a name not in INTERNAL_TOPICS."""
    def setting(key: str) -> int:
        return int(str(config[key]))

    if name == "__consumer_offsets":
        return InternalTopicSpec(name, setting("offsets.topic.num.partitions"),
                                 setting("offsets.topic.replication.factor"),
                                 {"cleanup.policy": "compact", "compression.type": "producer",
                                  "segment.bytes": str(setting("offsets.topic.segment.bytes"))})
    if name == "__transaction_state":
        return InternalTopicSpec(name, setting("transaction.state.log.num.partitions"),
                                 setting("transaction.state.log.replication.factor"),
                                 {"unclean.leader.election.enable": "false", "compression.type": "uncompressed",
                                  "cleanup.policy": "compact",
                                  "min.insync.replicas": str(setting("transaction.state.log.min.isr")),
                                  "segment.bytes": str(setting("transaction.state.log.segment.bytes"))})
    if name == "__share_group_state":
        # a deleting topic whose records never expire by time (the share coordinator prunes it)
        return InternalTopicSpec(name, setting("share.coordinator.state.topic.num.partitions"),
                                 setting("share.coordinator.state.topic.replication.factor"),
                                 {"cleanup.policy": "delete", "compression.type": "producer",
                                  "segment.bytes": str(setting("share.coordinator.state.topic.segment.bytes")),
                                  "min.insync.replicas": str(setting("share.coordinator.state.topic.min.isr")),
                                  "retention.ms": "-1"})
    raise KeyError(name)

ZERO_UUID = uuid.UUID(int=0)


#: charges a number of partition mutations to the request's controller mutation quota; False: refused
#: (THROTTLING_QUOTA_EXCEEDED). None: no quota.
MutationCharge = Callable[[int], bool]
#: the error of an item the quota refused (Kafka 4.3 answers no message with it)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)


def _refused(quota: MutationCharge | None, partitions: int) -> bool:
    """Kafka's ControllerRequestContext.applyPartitionChangeQuota: whether the quota refuses the partitions."""
    return quota is not None and not quota(partitions)


class TopicError(Exception):
    """A topic operation refused with a Kafka error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = int(code)
        #: None where Kafka answers no message
        self.message = message


class PlacementError(TopicError):
    """Kafka's InvalidReplicationFactorException out of its ReplicaPlacer: CreatePartitions answers its message as it
    is, CreateTopics after "Unable to replicate the partition N time(s): " (ReplicationControlManager.createTopic)."""


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def validate_topic_name(name: str | None) -> None:
    """Kafka's ``Topic.validate``, with its words."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: the length of '{name}' is "
                         f"longer than the max allowed length {TOPIC_NAME_MAX_LENGTH}")
    if not _TOPIC_NAME_RE.fullmatch(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is invalid: '{name}' contains one or more characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'")


#: Replicas per partition at most: Kafka's bound (CreateTopics' ReplicationFactor is an int16); placement further
#: needs that many live brokers.
MAX_REPLICATION_FACTOR = 32767


def place_replicas(brokers: list[int], first_partition: int, count: int, replication_factor: int,
                   racks: Mapping[int, str | None] | None = None, start: int = 0) -> list[list[int]]:
    """Replica lists for partitions ``first_partition .. first_partition + count - 1``, striped over
    ``brokers`` (ids) and over their ``racks`` (broker id -> ``broker.rack``, None: no rack), the stripe shifted
    by ``start``. Raises TopicError when there are fewer brokers than the replication factor."""
    if replication_factor < 1:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if not brokers:   # Kafka's StripedReplicaPlacer: no usable broker at all
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "All brokers are currently fenced, or have all their log directories cordoned.")
    if replication_factor > len(brokers):
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"The target replication factor of {replication_factor} cannot be reached because only "
                             f"{len(brokers)} broker(s) are registered.")
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        rack = (racks or {}).get(b)
        # brokers without a rack are one rack of their own, ordered before any named one
        by_rack.setdefault("" if rack is None else "\0" + rack, []).append(b)
    rack_lists = [by_rack[r] for r in sorted(by_rack)]
    n_racks = len(rack_lists)
    widest = max(len(r) for r in rack_lists)
    out = []
    for p in range(first_partition + start, first_partition + start + count):
        replicas: list[int] = []
        # replica j goes to rack (p + j) mod R, the k-th time (k = j // R) this partition uses that rack to its
        # broker (p // R + k) mod rack size: distinct racks first, and every broker of a rack in turn after that
        for j in range(n_racks * widest):
            rack_brokers = rack_lists[(p + j) % n_racks]
            candidate = rack_brokers[(p // n_racks + j // n_racks) % len(rack_brokers)]
            if candidate not in replicas:
                replicas.append(candidate)
                if len(replicas) == replication_factor:
                    break
        assert len(replicas) == replication_factor, (brokers, racks, p, replicas)
        out.append(replicas)
    return out


def partition_records(topic_id: uuid.UUID, first_partition: int, assignment: list[list[int]],
                      image: MetadataImage | None = None) -> list[MetadataRecord]:
    """PartitionRecords of a new topic's (or new) partitions; each replica's log dir is its broker's default one in
    ``image`` (klog.controller.directories: the only dir, or UNASSIGNED until the broker assigns it)."""
    return [record("PartitionRecord", partition_id=first_partition + i, topic_id=topic_id, replicas=replicas,
                   isr=list(replicas), leader=replicas[0], leader_epoch=0, partition_epoch=0,
                   directories=[] if image is None else placement_directories(image, replicas))
            for i, replicas in enumerate(assignment)]


@dataclass(frozen=True)
class CreatableTopic:
    """One CreateTopics item (the wire request's fields): -1 partitions / replication factor = broker default;
    ``assignments`` (partition index -> broker ids) excludes both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, list[int]] | None = None
    configs: Mapping[str, str | None] | None = None
    #: a partition index ``assignments`` names more than once (the request's first such), refused as Kafka does
    repeated_partition: int | None = None

    @staticmethod
    def from_request(item: CreateTopicsRequestCreatableTopic) -> CreatableTopic:
        return CreatableTopic(item.name, item.num_partitions, item.replication_factor,
                              {a.partition_index: list(a.broker_ids) for a in item.assignments or []} or None,
                              {c.name: c.value for c in item.configs or []},
                              _first_repeated(a.partition_index for a in item.assignments or []))


def _first_repeated(indexes: Iterable[int]) -> int | None:
    """The first index named a second time (one pass: a request may name 10,000)."""
    seen: set[int] = set()
    for index in indexes:
        if index in seen:
            return index
        seen.add(index)
    return None


def uncordoned_brokers(image: MetadataImage, brokers: Iterable[int], reported_all_cordoned: Collection[int] = ()
                       ) -> list[int]:
    """Kafka's usable brokers for placement (KIP-1066): those of ``brokers`` with a log dir that is not cordoned, by
    their registration (``BrokerRegistration.hasUncordonedDirs``) and, from metadata.version 4.3-IV0 (before it,
    brokers report no cordoned dirs), not in ``reported_all_cordoned``: brokers that reported every log dir of
    theirs cordoned though their registration holds no log dirs (a single voter's own node)."""
    reported = reported_all_cordoned if (image.metadata_version or 0) >= MV_CORDONED_LOG_DIRS else ()
    return [b for b in brokers if image.brokers[b].has_uncordoned_dirs() and b not in reported]


@dataclass
class CreatedTopic:
    """One CreateTopics result: ``item``, what goes on the wire (without its v5+ config list, which the
    controller's API fills in from ``overrides``), and the topic's config overrides (None unless created)."""

    item: CreateTopicsResponseCreatableTopicResult
    overrides: dict[str, str] | None = None


class TopicControlManager:
    """Decides topic operations for the controller. ``config`` supplies the broker defaults
    (``num.partitions``, ``default.replication.factor``, ``delete.topic.enable``); ``new_topic_id`` is
    injectable so tests are deterministic."""

    def __init__(self, config: BrokerConfig, new_topic_id: Callable[[], uuid.UUID] = random_kafka_uuid, *,
                 max_replication_factor: int = MAX_REPLICATION_FACTOR,
                 max_partitions_per_cluster: int = MAX_PARTITIONS_PER_CLUSTER) -> None:
        assert max_partitions_per_cluster >= 1, max_partitions_per_cluster
        self.config = config
        #: the brokers that reported every log dir of theirs cordoned though their registration cannot say so (a
        #: single voter's own node, which registers no log dirs and sends no heartbeat: its broker reports it with
        #: :meth:`report_all_dirs_cordoned` as a quorum broker's heartbeat carries its cordoned dirs)
        self.reported_all_dirs_cordoned: frozenset[int] = frozenset()
        self.max_partitions_per_cluster = max_partitions_per_cluster
        self.new_topic_id = new_topic_id
        #: replicas per partition at most (placement itself stripes any number over the brokers)
        self.max_replication_factor = max_replication_factor

    @staticmethod
    def _placement_brokers(image: MetadataImage) -> list[int]:
        """Kafka's live brokers: registered, unfenced, not in controlled shutdown (a manual assignment may name
        them)."""
        return [b.id for b in image.live_brokers() if not b.in_controlled_shutdown]

    def report_all_dirs_cordoned(self, broker_id: int, all_cordoned: bool) -> None:
        """Broker ``broker_id``, whose registration holds no log dirs, says whether every online log dir of it is
        cordoned now (:attr:`reported_all_dirs_cordoned`)."""
        if all_cordoned:
            self.reported_all_dirs_cordoned |= {broker_id}
        else:
            self.reported_all_dirs_cordoned -= {broker_id}

    def _uncordoned(self, image: MetadataImage, brokers: list[int]) -> list[int]:
        return uncordoned_brokers(image, brokers, self.reported_all_dirs_cordoned)

    @staticmethod
    def _racks(image: MetadataImage) -> dict[int, str | None]:
        return {b.id: b.rack for b in image.brokers.values()}

    def _check_cluster_partitions(self, existing: int, adding: int) -> None:
        if existing + adding > self.max_partitions_per_cluster:
            raise TopicError(ErrorCode.POLICY_VIOLATION,
                             f"Adding {adding} partitions to the cluster's {existing} would exceed klog's limit of "
                             f"{self.max_partitions_per_cluster} partitions per cluster (MAX_PARTITIONS_PER_CLUSTER).")

    def _check_replication(self, assignment: list[list[int]]) -> None:
        rf = max((len(r) for r in assignment), default=0)
        if rf > self.max_replication_factor:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor {rf} is larger than the maximum of {self.max_replication_factor} "
                             "replica(s) per partition.")

    # ---- CreateTopics -------------------------------------------------------------------------------

    def create_topics(self, topics: Iterable[CreatableTopic], image: MetadataImage, now_ms: int, *,
                      validate_only: bool = False, client_id: str | None = None,
                      quota: MutationCharge | None = None) -> ControllerResult[list[CreatedTopic]]:
        """Results per topic: name, topic_id, error_code, error_message, num_partitions, replication_factor,
        with the topic's config overrides beside them (for the response's v5+ config list). ``quota``: charged
        each valid topic's partitions (for ``validate_only`` too, as on Kafka)."""
        topics = list(topics)
        counts = Counter(t.name for t in topics)
        # as Kafka's ControllerApis.createTopics: a repeated name never reaches the controller; it is answered
        # once, after the others
        items = [t for t in topics if counts[t.name] == 1]
        repeated = [name for name, n in counts.items() if n > 1]
        records: list[MetadataRecord] = []
        created: dict[str, uuid.UUID] = {}
        results: list[CreatedTopic] = []
        partitions_in_cluster = _partition_count(image)
        too_many = self._requested_partitions(items) > MAX_PARTITIONS_PER_REQUEST
        for item in items:
            result: CreateTopicsResponseCreatableTopicResult = {
                "name": item.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.NONE, "error_message": None,
                "num_partitions": -1, "replication_factor": -1}
            answer = CreatedTopic(result)
            results.append(answer)
            if too_many:   # Kafka's validateTotalNumberOfPartitions: the whole request
                result.update({"error_code": int(ErrorCode.POLICY_VIOLATION),
                               "error_message": "Excessively large number of partitions per request."})
                continue
            try:
                topic_id, recs, partitions, rf, overrides = self._create_one(item, image, created)
                self._check_cluster_partitions(partitions_in_cluster, partitions)
            except TopicError as exc:
                result.update({"error_code": exc.code, "error_message": exc.message})
                continue
            if _refused(quota, partitions):   # validate_only too, as Kafka's controller does
                result.update({"error_code": _THROTTLED, "error_message": None})
                continue
            partitions_in_cluster += partitions
            created[item.name] = topic_id
            records.extend(recs)
            result.update({"topic_id": topic_id, "num_partitions": partitions, "replication_factor": rf})
            answer.overrides = overrides
        results += [CreatedTopic({"name": name, "topic_id": ZERO_UUID, "error_code": int(ErrorCode.INVALID_REQUEST),
                                  "error_message": "Duplicate topic name.", "num_partitions": -1,
                                  "replication_factor": -1}) for name in repeated]
        if len(records) > MAX_RECORDS_PER_REQUEST:   # Kafka's BoundedList: the whole request fails
            for answer in results:
                answer.overrides = None
                answer.item.update({"topic_id": ZERO_UUID, "num_partitions": -1, "replication_factor": -1,
                                    "error_code": int(ErrorCode.POLICY_VIOLATION),
                                    "error_message": "Unable to perform excessively large batch operation."})
            records = []
        return ControllerResult(() if validate_only else records, results)

    def _requested_partitions(self, items: Iterable[CreatableTopic]) -> int:
        """The partitions a CreateTopics request asks for, counted as Kafka counts them (a topic with assignments:
        as many as they name; else its count, the broker default for -1, none for another negative one)."""
        return sum(len(item.assignments) if item.assignments else
                   self.config["num.partitions"] if item.num_partitions == -1 else max(item.num_partitions, 0)
                   for item in items)

    def internal_replication_factor(self, replication_factor: int, image: MetadataImage) -> int:
        """offsets.topic.replication.factor capped at the live brokers and at what this controller supports."""
        return max(1, min(replication_factor, len(image.live_brokers()), self.max_replication_factor))

    def create_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                              configs: Mapping[str, str], image: MetadataImage) -> ControllerResult[int]:
        """An internal topic (``__consumer_offsets``): the replication factor is capped at the brokers there
        are, as a single node creates its offsets topic whatever offsets.topic.replication.factor says."""
        if image.topic(name) is not None:
            return ControllerResult((), 0)
        rf = self.internal_replication_factor(replication_factor, image)
        result = self.create_topics([CreatableTopic(name, num_partitions, rf, None, dict(configs))], image, 0)
        return ControllerResult(result.records, result.response[0].item["error_code"])

    def _create_one(self, item: CreatableTopic, image: MetadataImage, created: Mapping[str, uuid.UUID]
                    ) -> tuple[uuid.UUID, list[MetadataRecord], int, int, dict[str, str]]:
        name = item.name
        if name == METADATA_TOPIC:   # Kafka's ControllerApis.createTopics: the metadata log is no topic
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        validate_topic_name(name)
        if image.topic(name) is not None or name in created:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        # Kafka's controller checks the configs of every new topic before it places any
        try:
            check_topic_configs(item.configs or {}, self.config.topic_default)
        except TopicConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        overrides = {k: v for k, v in (item.configs or {}).items() if v is not None}
        brokers = self._placement_brokers(image)
        if item.assignments:
            if item.num_partitions != -1 or item.replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                 + ("replication factor" if item.replication_factor != -1 else "numPartitions")
                                 + " was not set to -1.")
            if item.repeated_partition is not None:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition "
                                 f"assignments for partition {item.repeated_partition}")
            assignment = self._checked_assignment(item.assignments, 0, brokers)
        else:
            partitions = self.config["num.partitions"] if item.num_partitions == -1 else item.num_partitions
            rf = self.config["default.replication.factor"] if item.replication_factor == -1 \
                else item.replication_factor
            if rf < 1:   # checked before the partitions, as Kafka's ReplicationControlManager.createTopic
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
            if partitions < 1:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            if partitions > MAX_PARTITIONS_PER_TOPIC:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"Number of partitions {partitions} exceeds klog's limit "
                                 f"{MAX_PARTITIONS_PER_TOPIC}.")
            try:
                assignment = place_replicas(self._uncordoned(image, brokers), 0, partitions, rf, self._racks(image),
                                            start=len(image.topics_by_name) + len(created))
            except PlacementError as exc:
                raise TopicError(exc.code, f"Unable to replicate the partition {rf} time(s): {exc.message}") from None
        self._check_replication(assignment)
        # against the committed topics only, as Kafka's controller: two new names of one request that differ only
        # by '.' and '_' are both made there (arguably Kafka's bug; matched, it loses nothing)
        colliding = _colliding_topic(name, image.topics_by_name)
        if colliding is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {colliding}")
        topic_id = self.new_topic_id()
        recs = [record("TopicRecord", name=name, topic_id=topic_id), *partition_records(topic_id, 0, assignment, image)]
        recs += [record("ConfigRecord", resource_type=int(ConfigResourceType.TOPIC), resource_name=name, name=k,
                        value=v) for k, v in sorted(overrides.items())]
        return topic_id, recs, len(assignment), len(assignment[0]), overrides

    @staticmethod
    def _checked_assignment(assignments: Mapping[int, list[int]], first: int, brokers: list[int]
                            ) -> list[list[int]]:
        indexes = sorted(assignments)
        if indexes != list(range(first, first + len(indexes))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        if len(indexes) > MAX_PARTITIONS_PER_TOPIC:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"{len(indexes)} partitions exceed klog's limit {MAX_PARTITIONS_PER_TOPIC}.")
        out = [list(assignments[i]) for i in indexes]
        live = set(brokers)
        # Kafka's validateManualPartitionAssignment, partition by partition: the replicas sorted, each registered
        # and named once, as many as the first partition's
        for replicas in out:
            if not replicas:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes an empty replica list.")
            ordered = sorted(replicas)
            for n, broker in enumerate(ordered):
                if broker not in live:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                                     f"includes broker {broker}, but no such broker is registered.")
                if n and ordered[n - 1] == broker:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                                     f"includes the broker {broker} more than once.")
            if len(replicas) != len(out[0]):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes "
                                 f"a partition with {len(replicas)} replica(s), but this is not consistent with "
                                 f"previous partitions, which have {len(out[0])} replica(s).")
        return out

    # ---- DeleteTopics -------------------------------------------------------------------------------

    def delete_topics(self, wanted: Iterable[tuple[str | None, uuid.UUID]], image: MetadataImage, now_ms: int,
                      quota: MutationCharge | None = None
                      ) -> ControllerResult[list[DeleteTopicsResponseDeletableTopicResult]]:
        """``wanted``: (name, ZERO_UUID) or (None, topic id) per item. Results: name, topic_id, error_code,
        error_message. ``quota``: charged each deleted topic's partitions. As Kafka's ControllerApis.deleteTopics,
        a name (or id) the request repeats deletes nothing: its first mention gets no result, each further one
        INVALID_REQUEST; an item with neither a name nor an id, or with both, is INVALID_REQUEST."""
        items = list(wanted)
        keys = Counter((name, ZERO_UUID) if name is not None else (None, topic_id) for name, topic_id in items
                       if name is None or topic_id == ZERO_UUID)
        repeated = {key for key, n in keys.items() if n > 1 and key != (None, ZERO_UUID)}
        seen: set[tuple[str | None, uuid.UUID]] = set()
        records: list[MetadataRecord] = []
        removed: set[uuid.UUID] = set()
        results: list[DeleteTopicsResponseDeletableTopicResult] = []
        for name, topic_id in items:
            result: DeleteTopicsResponseDeletableTopicResult = {
                "name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None}
            if name is not None and topic_id != ZERO_UUID:   # Kafka's ControllerApis: neither is looked up
                results.append(result)
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": "You may not specify both topic name and topic id."})
                continue
            key = (name, ZERO_UUID) if name is not None else (None, topic_id)
            if key in repeated and key not in seen:
                seen.add(key)   # answered (refused) at its next mention
                continue
            results.append(result)
            if name is None and topic_id == ZERO_UUID:
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": "Neither topic name nor id were specified."})
                continue
            if key in repeated:
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": "Duplicate topic name." if name is not None else "Duplicate topic id."})
                continue
            topic: TopicImage | None
            if name is None:
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    result.update({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
                                   "error_message": "This server does not host this topic ID."})
                    continue
                result["name"] = topic.name
            else:
                topic = image.topic(name)
            if topic is None:
                result.update({"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                               "error_message": "This server does not host this topic-partition."})
                continue
            result["topic_id"] = topic.id
            if is_internal(topic.name):
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": f"Topic {topic.name} is an internal topic and cannot be deleted"})
                continue
            if not self.config["delete.topic.enable"]:
                result.update({"error_code": int(ErrorCode.TOPIC_DELETION_DISABLED),
                               "error_message": "Topic deletion is disabled."})
                continue
            if topic.id in removed:
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": f"Duplicate topic {topic.name} in the request."})
                continue
            if _refused(quota, len(topic.partitions)):
                result.update({"error_code": _THROTTLED, "error_message": None})
                continue
            removed.add(topic.id)
            records.append(record("RemoveTopicRecord", topic_id=topic.id))
        return ControllerResult(records, results)

    # ---- CreatePartitions ---------------------------------------------------------------------------

    def create_partitions(self, request: CreatePartitionsRequest, image: MetadataImage, now_ms: int,
                          quota: MutationCharge | None = None
                          ) -> ControllerResult[list[CreatePartitionsResponseTopicResult]]:
        """``request``: CreatePartitions' fields (topics: name, count, assignments; validate_only). ``quota``:
        charged the partitions each topic adds (for validate_only too, as on Kafka)."""
        counts = Counter(t.name for t in request.topics)
        brokers = self._placement_brokers(image)
        records: list[MetadataRecord] = []
        results: list[CreatePartitionsResponseTopicResult] = []
        partitions_in_cluster = _partition_count(image)
        answered_duplicates: set[str] = set()
        for item in request.topics:
            if item.name in answered_duplicates:
                continue   # a name given twice is answered once, as Kafka's ControllerApis.createPartitions
            result: CreatePartitionsResponseTopicResult = {"name": item.name, "error_code": ErrorCode.NONE,
                                                           "error_message": None}
            results.append(result)
            if counts[item.name] > 1:
                answered_duplicates.add(item.name)
                result.update({"error_code": int(ErrorCode.INVALID_REQUEST),
                               "error_message": "Duplicate topic name."})
                continue
            try:
                added = self._add_partitions(item, image, len(records), brokers)
                adding = sum(1 for r in added if r.name == "PartitionRecord")
                self._check_cluster_partitions(partitions_in_cluster, adding)
                if _refused(quota, adding):   # validate_only too, as Kafka's controller does
                    result.update({"error_code": _THROTTLED, "error_message": None})
                    continue
                records += added
                partitions_in_cluster += adding
            except TopicError as exc:
                result.update({"error_code": exc.code, "error_message": exc.message})
        return ControllerResult(() if request.validate_only else records, results)

    def _add_partitions(self, item: CreatePartitionsRequestTopic, image: MetadataImage, earlier: int,
                        brokers: list[int]) -> list[MetadataRecord]:
        """The records adding ``item``'s partitions, after the ``earlier`` records of the request's other topics."""
        topic = image.topic(item.name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)   # Kafka says no more
        current = len(topic.partitions)
        total = item.count
        if total < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"The topic {item.name} currently has {current} "
                             f"partition(s); {total} would not be an increase.")
        if total == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if earlier + total - current > MAX_RECORDS_PER_REQUEST:
            # Kafka's BoundedList of the request's records throws, which its createPartitions answers
            # UNKNOWN_SERVER_ERROR (the topics before it keep theirs)
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
        if item.assignments is not None:   # an empty list too, as Kafka
            if len(item.assignments) != total - current:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {total - current} additional partition(s), but only "
                                 f"{len(item.assignments)} assignment(s) were specified.")
            assignment = self._checked_assignment(
                {current + i: list(a.broker_ids) for i, a in enumerate(item.assignments)}, current, brokers)
            if any(len(r) != rf for r in assignment):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment must have {rf} replicas per partition, as the "
                                 "topic's existing partitions do.")
        else:
            assignment = place_replicas(self._uncordoned(image, brokers), current, total - current, rf,
                                        self._racks(image))
        self._check_replication(assignment)
        return partition_records(topic.id, current, assignment, image)


def _partition_count(image: MetadataImage) -> int:
    return sum(len(t.partitions) for t in image.topics_by_name.values())


def _colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    # Kafka: '.' and '_' collide in metric names, so topics differing only by them are refused.
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return other
    return None

"""ElectLeaders (43) on the active controller: preferred and unclean leader elections asked for by an admin
(``kafka-leader-election``, ``AdminClient.electLeaders``), as records.

Kafka's ``ReplicationControlManager.electLeaders``, pure: decided against the
committed :class:`klog.metadata.MetadataImage`, returning a :class:`ControllerResult` whose records are
PartitionChangeRecords (a new leader; replaying one bumps the leader and partition epochs) and whose response is
one flat item per partition (topic, partition_id, error_code, error_message) that the handler groups by topic.

Per partition:

- not in the image: UNKNOWN_TOPIC_OR_PARTITION;
- PREFERRED (0): the preferred replica (the first assigned one) already leads: ELECTION_NOT_NEEDED; it is in the
  ISR on a registered, unfenced broker that is not shutting down: it becomes the leader; else
  PREFERRED_LEADER_NOT_AVAILABLE;
- UNCLEAN (1): the partition has a leader: ELECTION_NOT_NEEDED; else the first acceptable ISR member leads, else
  (an empty ISR) an acceptable eligible leader replica, else the last known leader, else the first acceptable
  assigned replica with the ISR reset to it (RECOVERING; the ELR cleared), else ELIGIBLE_LEADERS_NOT_AVAILABLE
  (:mod:`klog.controller.partition_change`).

With no partitions named (null), every partition of every topic is tried and those answering ELECTION_NOT_NEEDED
are left out of the response, as Kafka does. An unknown election type is INVALID_REQUEST for the request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from klog.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode, error_info

from .brokers import leader_and_isr_changes
from .partition_change import MIN_INSYNC_REPLICAS
from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import ElectLeadersResponsePartitionResult

__all__ = ["MAX_ELECTIONS_PER_IMBALANCE", "PREFERRED", "UNCLEAN", "ElectionError", "balance_partition_leaders",
           "elect_leaders", "is_acceptable_leader"]

PREFERRED = 0
UNCLEAN = 1
#: Preferred elections one auto-rebalance pass commits at most (Kafka's maxElectionsPerImbalance); the next pass
#: comes at once when there were more.
MAX_ELECTIONS_PER_IMBALANCE = 1000


class ElectionError(Exception):
    """The whole request is refused (an unknown election type)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def is_acceptable_leader(image: MetadataImage, broker_id: int) -> bool:
    """Kafka's ``LeaderAcceptor``: registered, unfenced and not in controlled shutdown."""
    b = image.brokers.get(broker_id)
    return b is not None and not b.fenced and not b.in_controlled_shutdown


def _item(topic: str, partition: int, code: int = ErrorCode.NONE, message: str | None = None
          ) -> tuple[str, ElectLeadersResponsePartitionResult]:
    """An error without a message of its own carries its code's default one, as Kafka's ApiError.message()."""
    if message is None and code != ErrorCode.NONE:
        message = error_info(code).message
    return topic, {"partition_id": partition, "error_code": int(code), "error_message": message}


def _elect_one(image: MetadataImage, topic: TopicImage, pid: int, p: PartitionRegistration, election_type: int,
               min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> tuple[int, list[MetadataRecord]]:
    if election_type == PREFERRED:
        preferred = p.replicas[0] if p.replicas else NO_LEADER
        if p.leader == preferred:
            return int(ErrorCode.ELECTION_NOT_NEEDED), []
        if preferred in p.isr and is_acceptable_leader(image, preferred):
            return 0, [record("PartitionChangeRecord", partition_id=pid, topic_id=topic.id, leader=preferred)]
        return int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), []
    if p.leader != NO_LEADER:
        return int(ErrorCode.ELECTION_NOT_NEEDED), []
    records = leader_and_isr_changes(image, lambda b: is_acceptable_leader(image, b), lambda _name: True,
                                     iter([(topic, pid, p)]), min_insync_replicas=min_insync_replicas)
    if not any(getattr(r.data, "leader", NO_LEADER) != NO_LEADER for r in records):
        return int(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE), []
    return 0, records


def elect_leaders(election_type: int, topic_partitions: Iterable[tuple[str, Iterable[int]]] | None,
                  image: MetadataImage, *, min_insync_replicas: int = MIN_INSYNC_REPLICAS
                  ) -> ControllerResult[list[tuple[str, ElectLeadersResponsePartitionResult]]]:
    """``topic_partitions``: (topic name, partition ids) pairs, or None for every partition. The response: one
    (topic name, partition result) pair per partition, in the order the partitions were named.
    ``min_insync_replicas``: the static default (a topic's or the cluster's dynamic one wins)."""
    if election_type not in (PREFERRED, UNCLEAN):
        raise ElectionError(int(ErrorCode.INVALID_REQUEST), f"Unknown election type {election_type}")
    records: list[MetadataRecord] = []
    items: list[tuple[str, ElectLeadersResponsePartitionResult]] = []
    if topic_partitions is None:
        for name, topic in sorted(image.topics_by_name.items()):
            for pid, p in sorted(topic.partitions.items()):
                code, recs = _elect_one(image, topic, pid, p, election_type, min_insync_replicas)
                records += recs
                if code != ErrorCode.ELECTION_NOT_NEEDED:
                    items.append(_item(name, pid, code))
        return ControllerResult(records, items)
    for name, partitions in topic_partitions:
        named = image.topic(name)
        for pid in partitions:
            registration = named.partitions.get(pid) if named is not None else None
            if named is None or registration is None:
                items.append(_item(name, pid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   f"No such topic as {name}" if named is None else
                                   f"No such partition as {name}-{pid}"))
                continue
            code, recs = _elect_one(image, named, pid, registration, election_type, min_insync_replicas)
            records += recs
            items.append(_item(name, pid, code))
    return ControllerResult(records, items)


def balance_partition_leaders(image: MetadataImage, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
                              ) -> ControllerResult[bool]:
    """``auto.leader.rebalance.enable``: preferred elections for partitions not led by their preferred replica
    where it can lead (Kafka's ``maybeBalancePartitionLeaders``). The response says whether more remain than
    ``max_elections`` allowed (run again at once)."""
    assert max_elections >= 1, max_elections
    records: list[MetadataRecord] = []
    for _name, topic in sorted(image.topics_by_name.items()):
        for pid, p in sorted(topic.partitions.items()):
            if p.replicas and p.leader != p.replicas[0]:
                code, recs = _elect_one(image, topic, pid, p, PREFERRED)
                if code == ErrorCode.NONE:
                    if len(records) >= max_elections:
                        return ControllerResult(records, True)
                    records += recs
    return ControllerResult(records, False)

"""Partition reassignment on the active controller: AlterPartitionReassignments (45), ListPartitionReassignments (46)
and the completion of a reassignment once its new replicas are in sync, as records.

Kafka's ``ReplicationControlManager`` with ``PartitionReassignmentReplicas`` / ``PartitionReassignmentRevert``
(KIP-455 under KRaft), pure: decided against the committed :class:`klog.metadata.MetadataImage`, returning a
:class:`ControllerResult` whose records are PartitionChangeRecords.

A reassignment of a partition from its current replicas ``C`` to a target ``T``:

1. **start**: replicas become ``T`` followed by the members of ``C`` not in ``T`` (the union, target first, so the
   preferred leader is already the target's), ``adding_replicas`` = ``T - C``, ``removing_replicas`` = ``C - T``;
   the ISR does not change. Brokers in ``adding`` see themselves in the replicas and start following the leader.
2. **catch-up**: the leader adds each new replica to the ISR through AlterPartition once it has caught up.
3. **completion** (:func:`completed_reassignment`, tried on every ISR change and at the start): once every target
   replica is in the ISR, replicas = ``T``, the removing replicas leave the ISR, ``adding``/``removing`` are
   cleared, and a leader that is being removed (or no longer in the ISR) hands over to the first target replica
   in the ISR that can lead. A reassignment to replicas that are all in the ISR already (removing replicas, reordering
   them) completes at once. Asked again for the same target while it runs (``--additional``), nothing completes
   early: the target replicas still have to be in sync.

Cancelling (null replicas) reverts: replicas and ISR without the adding replicas, ``adding``/``removing`` cleared;
when no ISR member would be left, only with ``unclean.leader.election.enable`` (else INVALID_REPLICA_ASSIGNMENT).

Errors, per partition as Kafka's: an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; cancelling where none
is in progress NO_REASSIGNMENT_IN_PROGRESS; an empty target, a broker named twice or a broker that is not registered
INVALID_REPLICA_ASSIGNMENT; a different replica count when the request (v1, KIP-860) disallows replication factor
changes INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypedDict

from klog.controller.directories import placement_directories
from klog.metadata.image import MIGRATING_DIRECTORY, NO_LEADER, MetadataImage, PartitionRegistration
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .elections import is_acceptable_leader
from .result import ControllerResult
from .topics import TopicError

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterPartitionReassignmentsResponseReassignablePartitionResponse,
        ListPartitionReassignmentsResponseOngoingPartitionReassignment,
        ListPartitionReassignmentsResponseOngoingTopicReassignment,
    )

    #: one partition's AlterPartitionReassignments result (its topic is named beside it)
    ReassignedPartition = AlterPartitionReassignmentsResponseReassignablePartitionResponse

__all__ = ["PartitionChangeFields", "ReassignmentTarget", "alter_partition_reassignments", "completed_reassignment",
           "list_partition_reassignments", "reassignment_in_progress"]

#: (partition index, target replicas or None to cancel)
ReassignmentTarget = tuple[int, "Sequence[int] | None"]


class PartitionChangeFields(TypedDict, total=False):
    """The fields of a PartitionChangeRecord a reassignment writes (one left out: unchanged)."""

    replicas: list[int]
    isr: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]
    leader: int
    directories: list[uuid.UUID]


def reassignment_in_progress(p: PartitionRegistration) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def completed_reassignment(image: MetadataImage, p: PartitionRegistration, isr: Sequence[int],
                           replicas: Sequence[int] | None = None, adding: Sequence[int] | None = None,
                           removing: Sequence[int] | None = None) -> PartitionChangeFields | None:
    """The PartitionChangeRecord fields that complete the reassignment of ``p`` once its ISR is ``isr`` (replicas,
    adding, removing: as about to be written, by default ``p``'s), or None while it cannot complete: no reassignment,
    or a target replica (one not being removed) not in ``isr`` yet."""
    replicas = p.replicas if replicas is None else tuple(replicas)
    adding = p.adding_replicas if adding is None else tuple(adding)
    removing = p.removing_replicas if removing is None else tuple(removing)
    if not adding and not removing:
        return None
    new_isr = [r for r in isr if r not in removing]
    target = [r for r in replicas if r not in removing]
    if not new_isr or any(r not in new_isr for r in target):
        return None
    changes: PartitionChangeFields = {"replicas": target, "isr": new_isr, "adding_replicas": [], "removing_replicas": []}
    directories = _directories_for(image, p, target)
    if directories is not None:
        changes["directories"] = directories
    if p.leader not in new_isr:
        changes["leader"] = next((r for r in target if r in new_isr and is_acceptable_leader(image, r)), NO_LEADER)
    return changes


def _directories_for(image: MetadataImage, p: PartitionRegistration, replicas: Sequence[int]
                     ) -> list[uuid.UUID] | None:
    """The log directory of each of ``replicas`` (kept for the old ones, each new one's broker default, as Kafka's
    ``defaultDir``), or None when none is tracked (all MIGRATING: the record leaves them out)."""
    known = {r: d for r, d in zip(p.replicas, p.directories)}
    dirs = placement_directories(image, replicas, known)
    if not dirs:
        return None if all(d == MIGRATING_DIRECTORY for d in p.directories) else \
            [known.get(r, MIGRATING_DIRECTORY) for r in replicas]
    return dirs


def _validate_target(image: MetadataImage, target: Sequence[int]) -> None:
    if not target:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker in target:
        if broker in seen:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker {broker} more than once.")
        seen.add(broker)
        if broker not in image.brokers:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes broker {broker}, but no such broker is "
                           f"registered.")


def _change_record(topic_id: uuid.UUID, pid: int, p: PartitionRegistration, fields: PartitionChangeFields
                   ) -> MetadataRecord | None:
    """A PartitionChangeRecord with only the fields that differ from ``p`` (None: nothing changes)."""
    current = {"replicas": list(p.replicas), "isr": list(p.isr), "adding_replicas": list(p.adding_replicas),
               "removing_replicas": list(p.removing_replicas), "leader": p.leader}
    changed = {k: v for k, v in fields.items() if k == "directories" or current.get(k) != v}
    if "replicas" not in changed:
        changed.pop("directories", None)
    if not changed:
        return None
    return record("PartitionChangeRecord", partition_id=pid, topic_id=topic_id, **changed)


def _start(image: MetadataImage, p: PartitionRegistration, target: Sequence[int], allow_rf_change: bool
           ) -> PartitionChangeFields:
    _validate_target(image, target)
    current = p.replicas
    if not allow_rf_change and len(target) != len(current) - len(p.adding_replicas):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"The replication factor is changed from {len(current) - len(p.adding_replicas)} to "
                       f"{len(target)} but allowReplicationFactorChange is false.")
    removing = [r for r in current if r not in target]
    adding = [r for r in target if r not in current]
    replicas = list(target) + removing
    completed = completed_reassignment(image, p, p.isr, replicas, adding, removing)
    if completed is not None:
        return completed
    fields: PartitionChangeFields = {"replicas": replicas, "adding_replicas": adding, "removing_replicas": removing}
    directories = _directories_for(image, p, replicas)
    if directories is not None:
        fields["directories"] = directories
    return fields


def _revert(image: MetadataImage, p: PartitionRegistration, unclean_allowed: bool, where: str
            ) -> PartitionChangeFields:
    if not reassignment_in_progress(p):
        raise TopicError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)   # Kafka's answer carries no message
    replicas = [r for r in p.replicas if r not in p.adding_replicas]
    isr = [r for r in p.isr if r not in p.adding_replicas]
    fields: PartitionChangeFields = {"replicas": replicas, "isr": isr, "adding_replicas": [], "removing_replicas": []}
    if not isr:
        if not unclean_allowed:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Unable to revert partition assignment for {where} because it would require an "
                           f"unclean leader election.")
        leader = next((r for r in replicas if is_acceptable_leader(image, r)), NO_LEADER)
        fields["isr"] = [leader] if leader != NO_LEADER else []
        fields["leader"] = leader
    elif p.leader not in isr:
        fields["leader"] = next((r for r in replicas if r in isr and is_acceptable_leader(image, r)), NO_LEADER)
    directories = _directories_for(image, p, replicas)
    if directories is not None:
        fields["directories"] = directories
    return fields


def alter_partition_reassignments(topics: Iterable[tuple[str, Iterable[ReassignmentTarget]]], image: MetadataImage,
                                  *, allow_replication_factor_change: bool = True,
                                  unclean_allowed: Callable[[str], bool] = lambda _topic: False
                                  ) -> ControllerResult[list[tuple[str, ReassignedPartition]]]:
    """``topics``: (name, [(partition, target replicas or None)]). The response: one (topic name, partition
    result) pair per partition, that the controller's API groups by topic. ``unclean_allowed(topic)``: the
    topic's unclean.leader.election.enable."""
    records: list[MetadataRecord] = []
    answers: list[tuple[str, ReassignedPartition]] = []
    for name, partitions in topics:
        topic = image.topic(name)
        for pid, target in partitions:
            p = None if topic is None else topic.partitions.get(pid)
            if topic is None or p is None:
                answers.append((name, {"partition_index": pid, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                       "error_message": f"Unable to find a topic named {name}." if topic is None
                                       else f"Unable to find partition {name}:{pid}."}))
                continue
            try:
                fields = _revert(image, p, unclean_allowed(name), f"{name}:{pid}") if target is None else \
                    _start(image, p, target, allow_replication_factor_change)
            except TopicError as exc:
                answers.append((name, {"partition_index": pid, "error_code": exc.code,
                                       "error_message": exc.message}))
                continue
            change = _change_record(topic.id, pid, p, fields)
            if change is not None:
                records.append(change)
            answers.append((name, {"partition_index": pid, "error_code": ErrorCode.NONE, "error_message": None}))
    return ControllerResult(records, answers)


def list_partition_reassignments(topics: Iterable[tuple[str, Iterable[int]]] | None, image: MetadataImage
                                 ) -> list[ListPartitionReassignmentsResponseOngoingTopicReassignment]:
    """The ``topics`` array of ListPartitionReassignments: partitions with a reassignment in progress, of every
    topic (``topics`` None) or of the named partitions (unknown ones are left out, as Kafka does)."""
    wanted: list[tuple[str, list[int] | None]] = (
        [(name, None) for name in sorted(image.topics_by_name)] if topics is None
        else [(name, list(parts)) for name, parts in topics])
    out: list[ListPartitionReassignmentsResponseOngoingTopicReassignment] = []
    for name, parts in wanted:
        topic = image.topic(name)
        if topic is None:
            continue
        ids = sorted(topic.partitions) if parts is None else parts
        ongoing: list[ListPartitionReassignmentsResponseOngoingPartitionReassignment] = []
        for pid in ids:
            p = topic.partitions.get(pid)
            if p is not None and reassignment_in_progress(p):
                ongoing.append({"partition_index": pid, "replicas": list(p.replicas),
                                "adding_replicas": list(p.adding_replicas),
                                "removing_replicas": list(p.removing_replicas)})
        if ongoing:
            out.append({"name": name, "partitions": ongoing})
    return out

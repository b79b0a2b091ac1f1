"""AlterPartition (56) on the active controller: ISR changes proposed by partition leaders, as records.

Kafka's ``ReplicationControlManager.alterPartition`` (Kafka 4.x), pure: decided against the committed
:class:`klog.metadata.MetadataImage`, returning a :class:`ControllerResult` whose records are PartitionChangeRecords
(the ISR changes, the leader and its epoch do not, the partition epoch goes up by one when replayed; with eligible
leader replicas, replicas leaving an ISR smaller than ``min.insync.replicas`` join the ELR, see
:mod:`klog.controller.partition_change`) and whose response is the AlterPartitionResponse body to send once they
are committed.

Checks, in Kafka's order:

- the requesting broker's epoch must be its registered one, else STALE_BROKER_EPOCH for the whole request;
- a topic id (v2+) or name (v0-1) not in the image: UNKNOWN_TOPIC_ID (UNKNOWN_TOPIC_OR_PARTITION before v2);
  a partition not in it: UNKNOWN_TOPIC_OR_PARTITION;
- a leader or partition epoch *newer* than the image's: NOT_CONTROLLER (this controller is behind: the leader
  should find the new one); an older leader epoch: FENCED_LEADER_EPOCH (a leader deposed while its ISR change was
  on the way hears this, not INVALID_REQUEST); the requester not the leader: INVALID_REQUEST; an older partition
  epoch: INVALID_UPDATE_VERSION;
- the new ISR must be distinct assigned replicas holding the leader, and RECOVERING only with an ISR of one and
  never going back from RECOVERED: else INVALID_REQUEST;
- every member other than the leader must be registered, unfenced, not in controlled shutdown and (v3, when the
  request gives one) at the broker epoch it fetched with (KIP-903): else INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED
  before v2).

An accepted change that alters nothing writes no record and answers the current state. An ISR change that brings the
last target replica of a reassignment in sync also completes the reassignment (:mod:`.reassignments`); when that
moves the leadership away from the requester it answers NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.metadata.delta import merge_partition_change
from klog.metadata.image import NO_LEADER_CHANGE, LeaderRecoveryState, MetadataImage, PartitionRegistration
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .partition_change import MIN_INSYNC_REPLICAS, effective_min_isr, elr_enabled, partition_change
from .reassignments import completed_reassignment
from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterPartitionResponse,
        AlterPartitionResponsePartitionData,
        AlterPartitionResponseTopicData,
        AlterPartitionRequest,
        AlterPartitionRequestPartitionData,
    )

__all__ = ["alter_partition"]


def _partition_answer(index: int, error: int, p: PartitionRegistration | None = None
                      ) -> AlterPartitionResponsePartitionData:
    if p is None:
        return {"partition_index": index, "error_code": int(error), "leader_id": -1, "leader_epoch": -1, "isr": [],
                "leader_recovery_state": 0, "partition_epoch": -1}
    return {"partition_index": index, "error_code": int(error), "leader_id": p.leader,
            "leader_epoch": p.leader_epoch, "isr": list(p.isr),
            "leader_recovery_state": int(p.leader_recovery_state), "partition_epoch": p.partition_epoch}


def _new_isr(data: AlterPartitionRequestPartitionData, version: int) -> list[tuple[int, int]]:
    """(broker id, broker epoch or -1) per new ISR member: NewIsrWithEpochs from v3, NewIsr before."""
    if version >= 3:
        return [(s.broker_id, s.broker_epoch) for s in data.new_isr_with_epochs]
    return [(b, -1) for b in data.new_isr]


def _validate(broker_id: int, p: PartitionRegistration, data: AlterPartitionRequestPartitionData, new_isr: list[tuple[int, int]],
              image: MetadataImage) -> int:
    if data.leader_epoch > p.leader_epoch or data.partition_epoch > p.partition_epoch:
        return int(ErrorCode.NOT_CONTROLLER)
    if data.leader_epoch < p.leader_epoch:
        return int(ErrorCode.FENCED_LEADER_EPOCH)   # before the leader check: a deposed leader is fenced
    if broker_id != p.leader:
        return int(ErrorCode.INVALID_REQUEST)
    if data.partition_epoch < p.partition_epoch:
        return int(ErrorCode.INVALID_UPDATE_VERSION)
    ids = [b for b, _ in new_isr]
    if len(set(ids)) != len(ids) or any(b not in p.replicas for b in ids) or p.leader not in ids:
        return int(ErrorCode.INVALID_REQUEST)
    recovery = LeaderRecoveryState(data.leader_recovery_state)
    if recovery == LeaderRecoveryState.RECOVERING and len(ids) > 1:
        return int(ErrorCode.INVALID_REQUEST)
    if p.leader_recovery_state == LeaderRecoveryState.RECOVERED and recovery == LeaderRecoveryState.RECOVERING:
        return int(ErrorCode.INVALID_REQUEST)
    for b, epoch in new_isr:
        if b == p.leader:
            continue
        reg = image.brokers.get(b)
        if reg is None or reg.fenced or reg.in_controlled_shutdown or (epoch != -1 and epoch != reg.epoch):
            return int(ErrorCode.INELIGIBLE_REPLICA)
    return int(ErrorCode.NONE)


def _downgrade(error: int, version: int) -> int:
    """Errors a pre-v2 leader does not know (KIP-841)."""
    if version < 2:
        if error == ErrorCode.INELIGIBLE_REPLICA:
            return int(ErrorCode.OPERATION_NOT_ATTEMPTED)
        if error == ErrorCode.UNKNOWN_TOPIC_ID:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return error


def alter_partition(request: AlterPartitionRequest, version: int, image: MetadataImage, *,
                    min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> ControllerResult[AlterPartitionResponse]:
    """``request``: an AlterPartitionRequest decoded at ``version`` (Struct or any object with its fields).
    ``min_insync_replicas``: the controller's static default (a topic's or the cluster's dynamic one wins)."""
    assert 0 <= version <= 3, version
    elr = elr_enabled(image)
    broker = image.brokers.get(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        return ControllerResult((), {"throttle_time_ms": 0, "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
                                     "topics": []})
    records: list[MetadataRecord] = []
    topics_out: list[AlterPartitionResponseTopicData] = []
    for t in request.topics:
        topic = image.topics_by_id.get(t.topic_id) if version >= 2 else image.topics_by_name.get(t.topic_name)
        parts_out: list[AlterPartitionResponsePartitionData] = []
        topic_out: AlterPartitionResponseTopicData = {"partitions": parts_out}
        if version >= 2:
            topic_out["topic_id"] = t.topic_id
        else:
            topic_out["topic_name"] = t.topic_name
        topics_out.append(topic_out)
        if topic is None:
            code = _downgrade(int(ErrorCode.UNKNOWN_TOPIC_ID), version)
            parts_out += [_partition_answer(d.partition_index, code) for d in t.partitions]
            continue
        for d in t.partitions:
            p = topic.partitions.get(d.partition_index)
            if p is None:
                parts_out.append(_partition_answer(d.partition_index, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            new_isr = _new_isr(d, version)
            error = _validate(request.broker_id, p, d, new_isr, image)
            if error:
                parts_out.append(_partition_answer(d.partition_index, _downgrade(error, version)))
                continue
            ids = [b for b, _ in new_isr]
            change = partition_change(
                topic, d.partition_index, p, target_isr=ids,
                acceptable=p.leader.__eq__, elr=elr,   # the leader stays (it is the requester, in its new ISR)
                min_isr=effective_min_isr(image, topic, min_insync_replicas),
                leader_recovery_state=LeaderRecoveryState(d.leader_recovery_state))
            completion = completed_reassignment(image, p, ids) if tuple(ids) != p.isr else None
            if completion is not None:   # the last target replica joined the ISR: the reassignment completes
                fields = {k: v for k, v in vars(change.data).items() if k not in ("partition_id", "topic_id")} \
                    if change is not None else {}
                fields.update(completion)
                change = record("PartitionChangeRecord", partition_id=d.partition_index, topic_id=topic.id, **fields)
            if change is None:
                parts_out.append(_partition_answer(d.partition_index, int(ErrorCode.NONE), p))
                continue
            records.append(change)
            if change.data.leader not in (NO_LEADER_CHANGE, request.broker_id):
                # completing the reassignment moved the leadership away from the requester: it must learn the new
                # leader from the metadata before anything else (Kafka answers this although the change commits)
                error = ErrorCode.NEW_LEADER_ELECTED if version >= 2 else ErrorCode.FENCED_LEADER_EPOCH
                parts_out.append(_partition_answer(d.partition_index, int(error)))
                continue
            after = merge_partition_change(p, change.data)
            parts_out.append(_partition_answer(d.partition_index, int(ErrorCode.NONE), after))
    return ControllerResult(records, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": topics_out})

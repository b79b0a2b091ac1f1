"""ListOffsets (2) and OffsetForLeaderEpoch (23), answered by the partition's leader only (a follower answers
NOT_LEADER_OR_FOLLOWER unless the request is a debugging one, replica id -2, as Kafka's). ListOffsets' latest is
the high watermark for clients and the log end for a replica asking its leader (replica id >= 0)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.leaders import not_led
from klog.broker.partitions import leader_epoch_error

if TYPE_CHECKING:
    from klog._native import PartitionLog
    from klog.protocol.message_types import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListOffsetsResponsePartitionResponse,
        ListOffsetsResponseTopicResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochRequestOffsetForLeaderPartition,
        OffsetForLeaderEpochResponse,
        OffsetForLeaderEpochResponseEpochEndOffset,
        OffsetForLeaderEpochResponseOffsetForLeaderTopicResult,
    )

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1

_DESCRIBE = authz.AclOperation.DESCRIBE
_TOPIC = authz.ResourceType.TOPIC


def _lookup(log_: PartitionLog, timestamp: int, version: int) -> tuple[int, int, int]:
    """(error code, offset, timestamp) for one ListOffsets partition."""
    if timestamp == EARLIEST or (timestamp == EARLIEST_LOCAL and version >= 8):
        return errors.NONE, log_.log_start_offset, -1
    if timestamp == LATEST:
        return errors.NONE, log_.high_watermark, -1
    if timestamp == MAX_TIMESTAMP and version >= 7:
        if log_.log_end_offset <= log_.log_start_offset:
            return errors.NONE, -1, -1
        offset, ts = log_.max_timestamp_offset()
        return errors.NONE, offset, ts
    if timestamp < 0:
        return errors.INVALID_REQUEST if version >= 1 else errors.UNKNOWN_SERVER_ERROR, -1, -1
    found = log_.offset_for_timestamp(timestamp)
    if found is None or found[0] >= log_.high_watermark:
        return errors.NONE, -1, -1
    # the batch may start below a log start offset moved by DeleteRecords: never answer a deleted offset
    return errors.NONE, max(found[0], log_.log_start_offset), found[1]


def _leader_log(broker: HandlerBroker, topic: str, partition: int, current_leader_epoch: int, replica_id: int
                ) -> tuple[int, PartitionLog | None]:
    """(error code, log) of a partition a client addresses as its leader: NOT_LEADER_OR_FOLLOWER or
    UNKNOWN_TOPIC_OR_PARTITION when this broker has no log of it (:func:`not_led`), NOT_LEADER_OR_FOLLOWER when it
    does not lead it (except for a debugging request), FENCED_/UNKNOWN_LEADER_EPOCH when the client's epoch (-1:
    none) is not ours; the log is None on error."""
    manager = broker.partitions
    log_ = manager.get(topic, partition)
    if log_ is None:
        return not_led(broker, topic, partition)[0], None
    if replica_id != DEBUGGING_REPLICA_ID:
        code = broker.replicas.leader_error(topic, partition)
        if code:
            return code, None
    code = leader_epoch_error(current_leader_epoch, manager.leader_epoch(topic, partition))
    return (code, None) if code else (errors.NONE, log_)


@handler(2, 1, 8)
def handle_list_offsets(broker: HandlerBroker, ctx: RequestContext, request: ListOffsetsRequest
                        ) -> ListOffsetsResponse:
    # Hot path: consumers and Spark's Kafka source send one such request per partition and poll, tens of
    # thousands per read. Plain loops, one small dict per partition, no closures or dict merges. Response
    # fields left out (error_code 0, timestamp -1, offset -1, leader_epoch -1, throttle_time_ms 0) take their
    # schema defaults, which are exactly these values in every version (old_style_offsets is v0 only).
    version = ctx.header.api_version
    get_log = broker.partitions.get
    leader_epoch = broker.partitions.leader_epoch
    leader_error = broker.replicas.leader_error
    replica_id = request.replica_id
    access = broker.access
    topics: list[ListOffsetsResponseTopicResponse] = []
    # read_committed (v2+): the latest offset is the last stable offset (Kafka's isolation level)
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    producers = broker.producers
    for topic_request in request.topics:
        name = topic_request.name
        partitions: list[ListOffsetsResponsePartitionResponse] = []
        topics.append({"name": name, "partitions": partitions})
        if access is not None and not authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, name):
            partitions.extend({"partition_index": p.partition_index, "error_code": errors.TOPIC_AUTHORIZATION_FAILED}
                              for p in topic_request.partitions)
            continue
        for preq in topic_request.partitions:
            index = preq.partition_index
            log_ = get_log(name, index)
            if log_ is None:
                partitions.append({"partition_index": index, "error_code": not_led(broker, name, index)[0]})
                continue
            if replica_id != DEBUGGING_REPLICA_ID:
                code = leader_error(name, index)
                if code:
                    partitions.append({"partition_index": index, "error_code": code})
                    continue
            epoch = preq.current_leader_epoch  # -1 (none) before v4
            if epoch != -1:
                code = leader_epoch_error(epoch, leader_epoch(name, index))
                if code:
                    partitions.append({"partition_index": index, "error_code": code})
                    continue
            timestamp = preq.timestamp
            if timestamp == LATEST:
                latest = log_.high_watermark if replica_id < 0 else log_.log_end_offset
                if read_committed and replica_id < 0:
                    latest = producers.last_stable_offset(name, index, latest)
                partitions.append({"partition_index": index, "offset": latest})
            elif timestamp == EARLIEST:
                partitions.append({"partition_index": index, "offset": log_.log_start_offset})
            else:
                code, offset, found = _lookup(log_, timestamp, version)
                partitions.append({"partition_index": index, "error_code": code, "offset": offset,
                                   "timestamp": found})
    return {"topics": topics}


def _epoch_end(broker: HandlerBroker, name: str, log_: PartitionLog,
               preq: OffsetForLeaderEpochRequestOffsetForLeaderPartition) -> OffsetForLeaderEpochResponseEpochEndOffset:
    """OffsetForLeaderEpoch: the largest epoch <= the one asked and the offset where the next epoch starts (or
    the log end); nothing (UNDEFINED epoch and offset) when every epoch is larger."""
    wanted = preq.leader_epoch
    replicated = broker.replicas.offset_for_leader_epoch(name, preq.partition, -1, wanted)
    if replicated is not None:   # the leader state's epoch cache (Kafka's endOffsetFor)
        code, epoch, end = replicated
        return {"error_code": code, "leader_epoch": epoch, "end_offset": end}
    epochs = sorted(log_.leader_epoch_entries()) or [(0, log_.log_start_offset)]
    chosen = None
    for i, (epoch, _start) in enumerate(epochs):
        if epoch <= wanted:
            chosen = i
    if chosen is None:
        return {}
    end = epochs[chosen + 1][1] if chosen + 1 < len(epochs) else log_.log_end_offset
    return {"leader_epoch": epochs[chosen][0], "end_offset": end}


@handler(23, 2, 4)
def handle_offset_for_leader_epoch(broker: HandlerBroker, ctx: RequestContext, request: OffsetForLeaderEpochRequest
                                   ) -> OffsetForLeaderEpochResponse:
    """Each partition answers the error of :func:`_leader_log`, or its epoch end (:func:`_epoch_end`); without
    ClusterAction on the Cluster (a replica, replica_id >= 0) or Describe on the topic (a client), the
    authorization error."""
    replica_id = getattr(request, "replica_id", -1)
    topics: list[OffsetForLeaderEpochResponseOffsetForLeaderTopicResult] = []
    for topic_request in request.topics:
        name = topic_request.topic
        partitions: list[OffsetForLeaderEpochResponseEpochEndOffset] = []
        topics.append({"topic": name, "partitions": partitions})
        refused = 0
        if broker.access is not None:
            if replica_id >= 0:
                if not authz.allowed_cluster(broker, ctx, authz.AclOperation.CLUSTER_ACTION):
                    refused = errors.CLUSTER_AUTHORIZATION_FAILED
            elif not authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, name):
                refused = errors.TOPIC_AUTHORIZATION_FAILED
        for preq in topic_request.partitions:
            index = preq.partition
            entry: OffsetForLeaderEpochResponseEpochEndOffset = {"partition": index, "error_code": errors.NONE,
                                                                "leader_epoch": -1, "end_offset": -1}
            partitions.append(entry)
            if refused:
                entry["error_code"] = refused
                continue
            code, log_ = _leader_log(broker, name, index, getattr(preq, "current_leader_epoch", -1), replica_id)
            if log_ is None:
                entry["error_code"] = code
            else:
                entry.update(_epoch_end(broker, name, log_, preq))
    return {"throttle_time_ms": 0, "topics": topics}

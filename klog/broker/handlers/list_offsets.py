"""ListOffsets (2) and OffsetForLeaderEpoch (23), answered by the partition's leader only (a follower answers
NOT_LEADER_OR_FOLLOWER unless the request is a debugging one, replica id -2, as Kafka's). ListOffsets' latest is
the last offset a client may fetch (the high watermark, the last stable offset for read_committed) for clients and
the log end for a replica asking its leader (replica id >= 0) or a debugging request; an offset found by timestamp
at or past that bound is not answered (-1), and a new leader whose high watermark is still below the offset its
leadership started at answers clients OFFSET_NOT_AVAILABLE instead of an offset it cannot vouch for, as Kafka's
``ReplicaManager.fetchOffset``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.handlers.leaders import not_led
from klog.broker.partitions import leader_epoch_error
from klog.broker.replication.epochs import LeaderEpochCache

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
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1

#: the first version that carries each negative timestamp (Kafka's ``timestampMinSupportedVersion``): another
#: negative timestamp, or one asked below its version, is UNSUPPORTED_VERSION
_TIMESTAMP_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                          EARLIEST_PENDING_UPLOAD: 11}
_NO_VERSION = 1 << 15

_DESCRIBE = authz.AclOperation.DESCRIBE
_TOPIC = authz.ResourceType.TOPIC


def _epoch_at(log_: PartitionLog, offset: int) -> int:
    """The leader epoch of the batch holding ``offset`` (from the log's epoch cache; -1: none), which Java clients
    validate the answer with (KIP-320)."""
    return max((epoch for epoch, start in log_.leader_epoch_entries() if start <= offset), default=-1)


def _lookup(log_: PartitionLog, timestamp: int, fetchable: int) -> tuple[int, int] | None:
    """(offset, timestamp) found for a max timestamp (-3) or timestamp lookup, None when nothing is found below
    ``fetchable`` (the last offset the asker may fetch)."""
    if timestamp == MAX_TIMESTAMP:
        if log_.log_end_offset <= log_.log_start_offset:
            return None
        found = log_.max_timestamp_offset()
        return found if found[0] < fetchable else None
    by_time = log_.offset_for_timestamp(timestamp)
    if by_time is None or by_time[0] >= fetchable:
        return None
    # the batch may start below a log start offset moved by DeleteRecords: never answer a deleted offset
    return max(by_time[0], log_.log_start_offset), by_time[1]


def _duplicates(request: ListOffsetsRequest) -> set[tuple[str, int]]:
    """The partitions the request names more than once (Kafka answers each once, INVALID_REQUEST)."""
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    if len(request.topics) == 1 and len(request.topics[0].partitions) == 1:
        return duplicates   # the hot path's one partition
    for topic_request in request.topics:
        for preq in topic_request.partitions:
            key = (topic_request.name, preq.partition_index)
            if key in seen:
                duplicates.add(key)
            seen.add(key)
    return duplicates


def _leader_log(broker: HandlerBroker, topic: str, partition: int, current_leader_epoch: int, replica_id: int
                ) -> tuple[int, PartitionLog | None]:
    """(error code, log) of a partition a client addresses as its leader: NOT_LEADER_OR_FOLLOWER or
    UNKNOWN_TOPIC_OR_PARTITION when this broker has no log of it (:func:`not_led`), FENCED_/UNKNOWN_LEADER_EPOCH
    when the client's epoch (-1: none) is not the one this broker knows, then NOT_LEADER_OR_FOLLOWER when it does
    not lead it (except for a debugging request), in Kafka's order (Partition.getLocalLog: a follower too fences
    an older epoch); the log is None on error."""
    manager = broker.partitions
    log_ = manager.get(topic, partition)
    if log_ is None:
        return not_led(broker, topic, partition)[0], None
    code = leader_epoch_error(current_leader_epoch, manager.leader_epoch(topic, partition))
    if not code and replica_id != DEBUGGING_REPLICA_ID:
        code = broker.replicas.leader_error(topic, partition)
    return (code, None) if code else (errors.NONE, log_)


@handler(2, 1, 11)
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
    lagging = broker.replicas.high_watermark_lagging
    replica_id = request.replica_id
    # Kafka's client bounds (the high watermark, the last stable offset for read_committed, OFFSET_NOT_AVAILABLE
    # while a new leader's high watermark lags) are for consumers; a replica or a debugging request gets the log end
    client = replica_id == CONSUMER_REPLICA_ID
    access = broker.access
    topics: list[ListOffsetsResponseTopicResponse] = []
    isolation_level = getattr(request, "isolation_level", 0)
    if isolation_level not in (0, READ_COMMITTED):
        # Kafka's IsolationLevel.forId throws: the request's error answer, every partition UNKNOWN_SERVER_ERROR
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors.UNKNOWN_SERVER_ERROR} for p in t.partitions]}
            for t in request.topics]}
    read_committed = isolation_level == READ_COMMITTED
    producers = broker.producers
    duplicates = _duplicates(request)
    refused: set[tuple[str, int]] = set()
    # before v5 clients do not know OFFSET_NOT_AVAILABLE (Kafka answers them LEADER_NOT_AVAILABLE)
    not_available = errors.OFFSET_NOT_AVAILABLE if version >= 5 else errors.LEADER_NOT_AVAILABLE
    with_epoch = version >= 4
    # one answer per topic, a topic named in several entries answered in its first (Kafka answers by partition,
    # grouped by topic)
    by_name: dict[str, list[ListOffsetsResponsePartitionResponse]] = {}
    for topic_request in request.topics:
        name = topic_request.name
        partitions = by_name.get(name)
        if partitions is None:
            partitions = by_name[name] = []
            topics.append({"name": name, "partitions": partitions})
        if access is not None and not authz.allowed(broker, ctx, _DESCRIBE, _TOPIC, name):
            partitions.extend({"partition_index": p.partition_index, "error_code": errors.TOPIC_AUTHORIZATION_FAILED}
                              for p in topic_request.partitions)
            continue
        for preq in topic_request.partitions:
            index = preq.partition_index
            if duplicates and (name, index) in duplicates:
                if (name, index) not in refused:   # answered once, at its first place
                    refused.add((name, index))
                    partitions.append({"partition_index": index, "error_code": errors.INVALID_REQUEST})
                continue
            timestamp = preq.timestamp
            if timestamp < 0 and _TIMESTAMP_MIN_VERSION.get(timestamp, _NO_VERSION) > version:
                partitions.append({"partition_index": index, "error_code": errors.UNSUPPORTED_VERSION})
                continue
            log_ = get_log(name, index)
            if log_ is None:
                partitions.append({"partition_index": index, "error_code": not_led(broker, name, index)[0]})
                continue
            epoch = preq.current_leader_epoch  # -1 (none) before v4
            # the epoch first, then the leadership (Kafka's Partition.getLocalLog: a follower fences an older epoch)
            code = leader_epoch_error(epoch, leader_epoch(name, index)) if epoch != -1 else errors.NONE
            if not code and replica_id != DEBUGGING_REPLICA_ID:
                code = leader_error(name, index)
            if code:
                partitions.append({"partition_index": index, "error_code": code})
                continue
            if timestamp == LATEST_TIERED or timestamp == EARLIEST_PENDING_UPLOAD:
                # offsets in tiered storage, which klog does not have: none, as Kafka answers for a log without
                # remote storage
                partitions.append({"partition_index": index})
                continue
            if timestamp == EARLIEST or timestamp == EARLIEST_LOCAL:
                start = log_.log_start_offset
                partitions.append({"partition_index": index, "offset": start, "leader_epoch": _epoch_at(log_, start)}
                                  if with_epoch else {"partition_index": index, "offset": start})
                continue
            if client:
                # a new leader's high watermark below its epoch start: offsets up to that start may be committed
                # already, and answering below them would move a consumer's latest backwards
                code = not_available if lagging(name, index) else errors.NONE
                fetchable = log_.high_watermark
                if read_committed:
                    fetchable = producers.last_stable_offset(name, index, fetchable, log_.log_start_offset)
            else:
                code, fetchable = errors.NONE, log_.log_end_offset
            if timestamp == LATEST:
                if code:
                    partitions.append({"partition_index": index, "error_code": code})
                else:
                    partitions.append({"partition_index": index, "offset": fetchable,
                                       "leader_epoch": leader_epoch(name, index)}
                                      if with_epoch else {"partition_index": index, "offset": fetchable})
                continue
            found = _lookup(log_, timestamp, fetchable)
            if found is None:   # nothing below the bound: -1, or the lagging leader's error
                partitions.append({"partition_index": index, "error_code": code})
            elif with_epoch:
                partitions.append({"partition_index": index, "offset": found[0], "timestamp": found[1],
                                   "leader_epoch": _epoch_at(log_, found[0])})
            else:
                partitions.append({"partition_index": index, "offset": found[0], "timestamp": found[1]})
    return {"topics": topics}


def epoch_end_offset(broker: HandlerBroker, name: str, index: int, log_: PartitionLog, wanted: int
                     ) -> tuple[int, int, int]:
    """(error, epoch, end offset): Kafka's ``endOffsetFor`` of epoch ``wanted`` over the partition's epochs (a
    replicated partition's leader state, else the log's epoch entries): the latest epoch ends at the log end, an
    older one where the next higher epoch starts; an epoch newer than every known one is UNDEFINED (epoch and
    offset -1). OffsetForLeaderEpoch answers it, and a consumer's Fetch checks its last fetched epoch with it."""
    replicated = broker.replicas.offset_for_leader_epoch(name, index, -1, wanted)
    if replicated is not None:   # the leader state's epoch cache (Kafka's endOffsetFor)
        return replicated
    answer = LeaderEpochCache(sorted(log_.leader_epoch_entries()) or [(0, log_.log_start_offset)]).end_offset_for(
        wanted, log_.log_end_offset)
    return errors.NONE, answer.epoch, answer.end_offset


def _epoch_end(broker: HandlerBroker, name: str, log_: PartitionLog,
               preq: OffsetForLeaderEpochRequestOffsetForLeaderPartition) -> OffsetForLeaderEpochResponseEpochEndOffset:
    """OffsetForLeaderEpoch's answer for one partition (:func:`epoch_end_offset`)."""
    code, epoch, end = epoch_end_offset(broker, name, preq.partition, log_, preq.leader_epoch)
    return {"error_code": code, "leader_epoch": epoch, "end_offset": end}


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

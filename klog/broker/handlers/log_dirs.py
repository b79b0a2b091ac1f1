"""DescribeLogDirs (35): each log directory with the size of every partition in it, and (v4) the disk's
total and usable bytes, as ``kafka-log-dirs.sh --describe`` and admin consoles show them; a replica moving to another
dir is listed there too as the future replica (is_future_key); v5's IsCordoned says whether the dir is among
``cordoned.log.dirs`` (KIP-1066: no new partition log is made there).

AlterReplicaLogDirs (34): move local replicas between this broker's log dirs, as ``kafka-reassign-partitions
--execute`` does for a reassignment JSON with ``log_dirs``; the moves themselves are the partition manager's
(klog.broker.log_dir_moves)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterReplicaLogDirsRequest,
        AlterReplicaLogDirsResponse,
        AlterReplicaLogDirsResponseAlterReplicaLogDirTopicResult,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeLogDirsResponsePartition,
        DescribeLogDirsResponseResult,
    )


def _wanted(request: DescribeLogDirsRequest) -> dict[str, set[int]] | None:
    """topic -> partitions asked for; None: every partition (a null topic list)."""
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = {}
    for item in request.topics:
        wanted.setdefault(item.topic, set()).update(item.partitions)
    return wanted


@handler(35, 1, 5)
def handle_describe_log_dirs(broker: HandlerBroker, ctx: RequestContext, request: DescribeLogDirsRequest
                             ) -> DescribeLogDirsResponse:
    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.DESCRIBE):
        # Kafka: Describe on the Cluster, else the error (v3+) and no directory
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = _wanted(request)
    by_dir: dict[str, dict[str, list[DescribeLogDirsResponsePartition]]] = {os.path.realpath(d): {} for d in broker.config.log_dirs}
    offline = {os.path.realpath(d) for d in broker.partitions.offline_dirs}
    cordoned = {os.path.realpath(d) for d in broker.partitions.cordoned_dirs}
    for (topic, partition), log_ in sorted(broker.partitions.logs()):
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        directory = os.path.realpath(os.path.dirname(log_.dir))
        topics = by_dir.get(directory)
        if topics is None:   # not under a configured log dir: cannot happen, the LogManager creates them there
            continue
        if directory in offline:   # listed without partitions; its log may be closed (its size raises)
            continue
        try:
            size = log_.size_in_bytes
        except OSError:   # closed by a failed write whose dir goes offline at once: left out, as it will be
            continue
        topics.setdefault(topic, []).append({
            "partition_index": partition, "partition_size": size,
            # Kafka's getLogEndOffsetLag for a current (not future) replica: how far its log end is behind the
            # high watermark it knows, never below 0 (0 for a leader)
            "offset_lag": max(0, log_.high_watermark - log_.log_end_offset), "is_future_key": False})
        move = broker.partitions.moves.moves.get((topic, partition))
        future_dir = None if move is None else by_dir.get(os.path.realpath(move.target))
        if move is not None and future_dir is not None:
            # the future replica: what is copied so far, and (Kafka's lag of a future log) how far its end is behind
            # the current log's
            future_dir.setdefault(topic, []).append({
                "partition_index": partition, "partition_size": broker.partitions.moves.future_size((topic, partition)),
                "offset_lag": log_.log_end_offset - max(0, move.copied_end_offset), "is_future_key": True})
    # as Kafka answers for a log dir that has failed: the error, no partitions, no sizes
    results = []
    for directory, topics in by_dir.items():
        result: DescribeLogDirsResponseResult = {"error_code": errors.NONE, "log_dir": directory, "total_bytes": -1,
                                  "usable_bytes": -1,
                                  "is_cordoned": directory in cordoned,
                                  "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
        if directory in offline:
            result.update({"error_code": errors.KAFKA_STORAGE_ERROR, "topics": []})
            results.append(result)
            continue
        try:
            stats = os.statvfs(directory)
        except OSError:
            result.update({"error_code": errors.KAFKA_STORAGE_ERROR, "topics": []})
        else:
            result.update({"total_bytes": stats.f_blocks * stats.f_frsize,
                           "usable_bytes": stats.f_bavail * stats.f_frsize})
        results.append(result)
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "results": results}


@handler(34, 1, 2)
def handle_alter_replica_log_dirs(broker: HandlerBroker, ctx: RequestContext, request: AlterReplicaLogDirsRequest
                                  ) -> AlterReplicaLogDirsResponse:
    allowed = authz.allowed_cluster(broker, ctx, authz.AclOperation.ALTER)
    by_topic: dict[str, dict[int, int]] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            codes = by_topic.setdefault(topic.name, {})
            for partition in topic.partitions:
                # Kafka: Alter on the Cluster, else every partition answers the error
                # a partition the metadata does not know answers UNKNOWN_TOPIC_OR_PARTITION (Kafka's
                # getPartitionOrException), one it places elsewhere REPLICA_NOT_AVAILABLE
                known = broker.metadata.partition(topic.name, partition) is not None
                codes[partition] = broker.partitions.moves.alter(topic.name, partition, entry.path, known=known) \
                    if allowed else errors.CLUSTER_AUTHORIZATION_FAILED
    results: list[AlterReplicaLogDirsResponseAlterReplicaLogDirTopicResult] = [
        {"topic_name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in codes.items()]}
        for name, codes in by_topic.items()]
    return {"throttle_time_ms": 0, "results": results}

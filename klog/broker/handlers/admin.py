"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DeleteRecords (21)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.configs import topic_config_entries
from klog.broker.partitions import TopicError

log = logging.getLogger("klog.broker.admin")


@handler(19, 2, 7)
async def handle_create_topics(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    version = ctx.api_version
    manager = broker.partitions
    counts = Counter(t.name for t in request.topics)
    validate_only = bool(getattr(request, "validate_only", False))
    results = []
    for item in request.topics:
        name = item.name
        result: dict[str, Any] = {"name": name, "topic_id": errors.ZERO_UUID, "error_code": errors.NONE, "error_message": None,
                                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        results.append(result)
        if counts[name] > 1:
            result.update(error_code=errors.INVALID_REQUEST,
                          error_message=f"Create topics request from client `{ctx.header.client_id}` contains "
                                        f"multiple entries for the following topics: {name}")
            continue
        num_partitions = item.num_partitions
        replication_factor = item.replication_factor
        assignments = item.assignments or []
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                result.update(error_code=errors.INVALID_REQUEST,
                              error_message="Both numPartitions or replicationFactor and replicasAssignments "
                                            "were set. Both cannot be used at the same time.")
                continue
            indexes = sorted(a.partition_index for a in assignments)
            bad = [a for a in assignments if list(a.broker_ids) != [broker.node_id]]
            if indexes != list(range(len(assignments))) or bad:
                result.update(error_code=errors.INVALID_REPLICA_ASSIGNMENT,
                              error_message=f"Replica assignments must place partitions 0..n-1 on broker "
                                            f"{broker.node_id}, the only broker")
                continue
            num_partitions, replication_factor = len(assignments), 1
        if num_partitions == -1:
            num_partitions = broker.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = broker.config["default.replication.factor"]
        configs = {c.name: c.value for c in (item.configs or [])}
        try:
            # the partition directories and files are made in a worker thread: other clients keep being served
            topic = await manager.create_topic_async(name, num_partitions, configs,
                                                     replication_factor=replication_factor,
                                                     validate_only=validate_only)
        except TopicError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
            continue
        result.update(topic_id=topic.topic_id, num_partitions=topic.partitions,
                      replication_factor=replication_factor)
        if version >= 5:
            result["configs"] = [
                {"name": e["name"], "value": e["value"], "read_only": e["read_only"],
                 "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
                for e in topic_config_entries(broker, topic, None, include_synonyms=False)]
    return {"throttle_time_ms": 0, "topics": results}


@handler(20, 1, 6)
def handle_delete_topics(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    manager = broker.partitions
    if ctx.api_version >= 6:
        wanted = [(t.name, getattr(t, "topic_id", errors.ZERO_UUID)) for t in request.topics]
    else:
        wanted = [(name, errors.ZERO_UUID) for name in request.topic_names]
    responses = []
    for name, topic_id in wanted:
        response: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": errors.NONE,
                                    "error_message": None}
        responses.append(response)
        if name is None:
            found = next((t for t in manager.topics.values() if t.topic_id == topic_id), None)
            if found is None:
                response.update(error_code=errors.UNKNOWN_TOPIC_ID, error_message="Unknown topic id")
                continue
            name = found.name
            response["name"] = name
        topic = manager.topics.get(name)
        if topic is not None:
            response["topic_id"] = topic.topic_id
            if topic.internal:
                response.update(error_code=errors.INVALID_REQUEST,
                                error_message=f"Topic {name} is an internal topic and cannot be deleted")
                continue
        try:
            manager.delete_topic(name)
            broker.producers.forget_topic(name)
        except TopicError as exc:
            response.update(error_code=exc.code, error_message=exc.message)
    return {"throttle_time_ms": 0, "responses": responses}


@handler(37, 0, 3)
async def handle_create_partitions(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    manager = broker.partitions
    counts = Counter(t.name for t in request.topics)
    results = []
    for item in request.topics:
        result = {"name": item.name, "error_code": errors.NONE, "error_message": None}
        results.append(result)
        if counts[item.name] > 1:
            result.update(error_code=errors.INVALID_REQUEST, error_message="Duplicate topic in request.")
            continue
        topic = manager.topics.get(item.name)
        if item.assignments and topic is not None:
            if len(item.assignments) != item.count - topic.partitions or any(
                    list(a.broker_ids) != [broker.node_id] for a in item.assignments):
                result.update(error_code=errors.INVALID_REPLICA_ASSIGNMENT,
                              error_message=f"Assignments must name broker {broker.node_id} for each new "
                                            "partition")
                continue
        try:
            # the partition directories and files are made in a worker thread: other clients keep being served
            await manager.create_partitions_async(item.name, item.count, validate_only=bool(request.validate_only))
        except TopicError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
    return {"throttle_time_ms": 0, "results": results}


@handler(21, 0, 2)
def handle_delete_records(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    manager = broker.partitions
    topics = []
    for topic_request in request.topics:
        partitions: list[dict[str, Any]] = []
        topics.append({"name": topic_request.name, "partitions": partitions})
        for preq in topic_request.partitions:
            entry = {"partition_index": preq.partition_index, "low_watermark": -1, "error_code": errors.NONE}
            partitions.append(entry)
            log_ = manager.get(topic_request.name, preq.partition_index)
            if log_ is None:
                entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offset = preq.offset
            hw = log_.high_watermark
            if offset == -1:
                offset = hw
            if offset < 0 or offset > hw:
                entry["error_code"] = errors.OFFSET_OUT_OF_RANGE
                continue
            try:
                entry["low_watermark"] = log_.delete_records_before(offset) if offset > log_.log_start_offset \
                    else log_.log_start_offset
            except OSError as exc:
                log.error("DeleteRecords on %s-%d failed: %s", topic_request.name, preq.partition_index, exc)
                entry["error_code"] = errors.KAFKA_STORAGE_ERROR
    return {"throttle_time_ms": 0, "topics": topics}

"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DeleteRecords (21),
ElectLeaders (43)."""

from __future__ import annotations

import asyncio

import logging
from typing import Any

from klog.broker import errors
from klog.broker.cluster_metadata import now_ms
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.configs import topic_config_entries
from klog.broker.handlers.leaders import not_led
from klog.controller.elections import PREFERRED, ElectionError, elect_leaders
from klog.controller.topics import CreatableTopic

log = logging.getLogger("klog.broker.admin")


@handler(19, 2, 7)
async def handle_create_topics(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    """The controller decides (klog.controller.topics); the partition files are made in a worker thread
    before the records commit, so other clients keep being served."""
    control = broker.metadata.topic_control
    items = [CreatableTopic.from_request(t) for t in request.topics]
    validate_only = bool(getattr(request, "validate_only", False))
    results = await broker.metadata.run_async(lambda image: control.create_topics(
        items, image, now_ms(), validate_only=validate_only, client_id=ctx.header.client_id))
    for result in results:
        overrides = result.pop("configs")
        if ctx.api_version >= 5 and result["error_code"] == errors.NONE:
            result["configs"] = [
                {"name": e["name"], "value": e["value"], "read_only": e["read_only"],
                 "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
                for e in topic_config_entries(broker, overrides, None, include_synonyms=False)]
        else:
            result["configs"] = None
    return {"throttle_time_ms": 0, "topics": results}


@handler(20, 1, 6)
async def handle_delete_topics(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.api_version >= 6:
        wanted = [(t.name, getattr(t, "topic_id", errors.ZERO_UUID)) for t in request.topics]
    else:
        wanted = [(name, errors.ZERO_UUID) for name in request.topic_names]
    control = broker.metadata.topic_control
    responses = await broker.metadata.run_async(lambda image: control.delete_topics(wanted, image, now_ms()))
    return {"throttle_time_ms": 0, "responses": responses}


@handler(37, 0, 3)
async def handle_create_partitions(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    control = broker.metadata.topic_control
    results = await broker.metadata.run_async(lambda image: control.create_partitions(request, image, now_ms()))
    return {"throttle_time_ms": 0, "results": results}


@handler(21, 0, 2)
async def handle_delete_records(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    """The leader moves its log start, then (replicated) waits until every follower on a live broker has moved
    its own there too (Kafka's delayed delete records; they learn it from their fetches), at most the request's
    timeout_ms: REQUEST_TIMED_OUT after it."""
    manager = broker.partitions
    topics = []
    waits: list[tuple[dict[str, Any], asyncio.Future[int]]] = []
    for topic_request in request.topics:
        partitions: list[dict[str, Any]] = []
        topics.append({"name": topic_request.name, "partitions": partitions})
        for preq in topic_request.partitions:
            entry = {"partition_index": preq.partition_index, "low_watermark": -1, "error_code": errors.NONE}
            partitions.append(entry)
            log_ = manager.get(topic_request.name, preq.partition_index)
            if log_ is None:
                entry["error_code"] = not_led(broker, topic_request.name, preq.partition_index)[0]
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
                continue
            replicas = getattr(broker, "replicas", None)
            waiting = None if replicas is None else \
                replicas.wait_for_low_watermark(topic_request.name, preq.partition_index, offset)
            if waiting is not None:
                waits.append((entry, waiting))
    if waits:
        done, _ = await asyncio.wait([f for _, f in waits], timeout=max(0, request.timeout_ms) / 1000)
        for entry, future in waits:
            if future not in done:
                future.cancel()
                entry["error_code"] = errors.REQUEST_TIMED_OUT
            elif future.result() < 0:   # leadership moved while it waited
                entry["error_code"] = errors.NOT_LEADER_OR_FOLLOWER
                entry["low_watermark"] = -1
            else:
                entry["low_watermark"] = future.result()
    return {"throttle_time_ms": 0, "topics": topics}


@handler(43, 0, 2)
async def handle_elect_leaders(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    """Decided by the active controller (klog.controller.elections); the new leaders reach every broker as
    PartitionChangeRecords."""
    election_type = getattr(request, "election_type", PREFERRED) if ctx.api_version >= 1 else PREFERRED
    wanted = None if request.topic_partitions is None else \
        [(t.topic, list(t.partitions)) for t in request.topic_partitions]
    if wanted is not None and not wanted:   # nothing to do (Kafka answers at once)
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "replica_election_results": []}
    try:
        min_isr = broker.config["min.insync.replicas"]
        items = await broker.metadata.run_async(
            lambda image: elect_leaders(election_type, wanted, image, min_insync_replicas=min_isr))
    except ElectionError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "replica_election_results": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_topic.setdefault(item.pop("topic"), []).append(item)
    return {"throttle_time_ms": 0, "error_code": errors.NONE,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in by_topic.items()]}

"""Metadata (3): brokers, controller (this broker), topics with partitions; auto-creates topics."""

from __future__ import annotations

from typing import Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.partitions import TopicError, validate_topic_name

# Topic operations a single node without ACLs allows: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS (bit n = AclOperation code n).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# Cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def broker_entry(broker: Any, listener: str) -> dict[str, Any]:
    host, port = broker.endpoints.get(listener, (broker.host, broker.port))
    return {"node_id": broker.node_id, "host": host, "port": port, "rack": broker.rack}


def topic_entry(broker: Any, name: str, include_ops: bool) -> dict[str, Any]:
    topic = broker.partitions.topics[name]
    node = broker.node_id
    return {
        "error_code": errors.NONE, "name": name, "topic_id": topic.topic_id, "is_internal": topic.internal,
        "partitions": [{"error_code": errors.NONE, "partition_index": p, "leader_id": node,
                        # -1: clients skip KIP-320 leader-epoch validation (one node, one epoch forever)
                        "leader_epoch": -1, "replica_nodes": [node], "isr_nodes": [node],
                        "offline_replicas": []} for p in range(topic.partitions)],
        "topic_authorized_operations": TOPIC_OPERATIONS if include_ops else errors.AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_entry(name: str | None, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "is_internal": False, "partitions": [],
            "topic_authorized_operations": errors.AUTHORIZED_OPERATIONS_OMITTED}


def _created_entry(broker: Any, name: str, include_ops: bool) -> dict[str, Any]:
    if name in broker.partitions.topics:
        return topic_entry(broker, name, include_ops)
    # another request is still creating it: Kafka's answer for a topic whose leaders are not elected yet
    return _error_entry(name, errors.LEADER_NOT_AVAILABLE)


async def _auto_create(broker: Any, response: dict[str, Any], pending: list[tuple[int, str]],
                       include_ops: bool) -> dict[str, Any]:
    topics = response["topics"]
    manager = broker.partitions
    for index, name in pending:
        if manager.is_being_created(name):      # by another request: answer once it exists
            await manager.wait_created(name)
            code = 0
        else:
            code = await broker.auto_create_topic_async(name)
        topics[index] = _error_entry(name, code) if code else _created_entry(broker, name, include_ops)
    return response


@handler(3, 0, 12)
def handle_metadata(broker: Any, ctx: RequestContext, request: Any) -> Any:
    """Answers at once, except when topics are auto-created: then it returns a coroutine (the server awaits
    it) that makes their files in a worker thread, so the common Metadata request stays synchronous."""
    version = ctx.api_version
    include_topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    manager = broker.partitions
    topics: list[dict[str, Any]] = []
    pending: list[tuple[int, str]] = []
    if requested is None or (version == 0 and not requested):
        names = sorted(manager.topics)
        topics = [topic_entry(broker, name, include_topic_ops) for name in names]
    else:
        allow_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or bool(getattr(request, "allow_auto_topic_creation", True)))
        for item in requested:
            name = item.name
            if name is None:
                # v10+ may ask by topic id
                topic_id = getattr(item, "topic_id", None)
                found = next((t.name for t in manager.topics.values() if t.topic_id == topic_id), None)
                if found is None:
                    topics.append({**_error_entry(None, errors.UNKNOWN_TOPIC_ID), "topic_id": topic_id})
                else:
                    topics.append(topic_entry(broker, found, include_topic_ops))
                continue
            if name in manager.topics:
                topics.append(topic_entry(broker, name, include_topic_ops))
                continue
            try:
                validate_topic_name(name)
            except TopicError as exc:
                topics.append(_error_entry(name, exc.code))
                continue
            if not allow_create:
                topics.append(_error_entry(name, errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            pending.append((len(topics), name))
            topics.append(_error_entry(name, errors.LEADER_NOT_AVAILABLE))   # replaced once created
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    response = {
        "throttle_time_ms": 0,
        "brokers": [broker_entry(broker, ctx.listener)],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": CLUSTER_OPERATIONS if include_cluster_ops
        else errors.AUTHORIZED_OPERATIONS_OMITTED,
        "error_code": errors.NONE,
    }
    if pending:
        return _auto_create(broker, response, pending, include_topic_ops)
    return response

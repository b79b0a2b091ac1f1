"""Partition reassignment: AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the
active controller (:mod:`klog.controller.reassignments`; other nodes forward them, :mod:`klog.broker.forwarding`).
The new replicas reach every broker as PartitionChangeRecords: brokers named in ``adding_replicas`` start
following, and a broker no longer among a partition's replicas deletes its copy."""

from __future__ import annotations

from typing import Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.cluster_metadata import NOT_CONTROLLER
from klog.controller.reassignments import alter_partition_reassignments, list_partition_reassignments


@handler(45, 0, 1)
async def handle_alter_partition_reassignments(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True)) if ctx.api_version >= 1 \
        else True
    wanted = [(t.name, [(p.partition_index, None if p.replicas is None else list(p.replicas))
                        for p in t.partitions]) for t in request.topics]
    default_unclean = "true" if broker.config["unclean.leader.election.enable"] else "false"

    def decide(image: Any) -> Any:
        def unclean(topic: str) -> bool:
            return image.topic_config(topic).get("unclean.leader.election.enable", default_unclean) == "true"
        return alter_partition_reassignments(wanted, image, allow_replication_factor_change=allow_rf_change,
                                             unclean_allowed=unclean)

    items = await broker.metadata.run_async(decide) if wanted else []
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_topic.setdefault(item.pop("topic"), []).append(item)
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": errors.NONE,
            "error_message": None, "responses": [{"name": t, "partitions": r} for t, r in by_topic.items()]}


@handler(46, 0, 0)
def handle_list_partition_reassignments(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = broker.metadata.controller
    if controller is not None and not controller.driver.is_leader:   # only the active controller answers
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                "error_message": "This node is not the active controller.", "topics": []}
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
            "topics": list_partition_reassignments(wanted, broker.metadata.image)}

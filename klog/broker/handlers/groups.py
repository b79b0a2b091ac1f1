"""Routing of the consumer-group APIs to ``klog.broker.groups.GroupCoordinator`` (see groups/api.py).

The advertised versions are what the coordinator declares in ``SUPPORTED_APIS``.
"""

from __future__ import annotations

from typing import Any

from klog.broker.groups import GroupCoordinator
from klog.broker.groups.api import GROUP_API_KEYS
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.context import HandlerBroker


def create_coordinator(context: Any) -> GroupCoordinator:
    coordinator = GroupCoordinator(context)
    # a quorum member coordinates the groups of the offsets partitions it leads, which change with each image
    context.metadata.publish_listeners.append(coordinator.on_metadata_published)
    return coordinator


async def route_to_coordinator(broker: HandlerBroker, ctx: RequestContext, request: Any) -> Any:
    return await broker.coordinator.handle(ctx.header, request, client_host=ctx.client_host, listener=ctx.listener)


for _api_key in GROUP_API_KEYS:
    # The range is capped by the coordinator's SUPPORTED_APIS and the codec when the table is built.
    handler(_api_key, 0, 2**15 - 1)(route_to_coordinator)

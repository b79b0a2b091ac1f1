"""Routing of the consumer-group APIs to ``klog.broker.groups.GroupCoordinator`` (see groups/api.py).

The advertised versions are what the coordinator declares in ``SUPPORTED_APIS``; until the coordinator
package provides ``GroupCoordinator``, a placeholder declares none, so no group API is advertised.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from klog.broker.groups.api import GROUP_API_KEYS
from klog.broker.handlers import RequestContext, handler

log = logging.getLogger("klog.broker.groups")


class PlaceholderCoordinator:
    """Stands in while no coordinator is installed: advertises nothing, so clients never ask it."""

    SUPPORTED_APIS: ClassVar[dict[int, tuple[int, int]]] = {}

    def __init__(self, context: Any) -> None:
        self.context = context

    async def start(self) -> None:
        log.info("no consumer-group coordinator installed: group APIs are not advertised")

    async def handle(self, header: Any, request: Any, *, client_host: str = "") -> Any:  # pragma: no cover
        raise RuntimeError(f"group api {header.api_key} is not advertised")

    async def stop(self) -> None:
        pass


def create_coordinator(context: Any) -> Any:
    try:
        from klog.broker.groups import GroupCoordinator  # type: ignore[attr-defined]
    except ImportError:
        return PlaceholderCoordinator(context)
    return GroupCoordinator(context)


async def route_to_coordinator(broker: Any, ctx: RequestContext, request: Any) -> Any:
    return await broker.coordinator.handle(ctx.header, request, client_host=ctx.client_host)


for _api_key in GROUP_API_KEYS:
    # The range is capped by the coordinator's SUPPORTED_APIS and the codec when the table is built.
    handler(_api_key, 0, 2**15 - 1)(route_to_coordinator)

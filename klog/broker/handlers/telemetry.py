"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714 client metrics, decided by
:class:`klog.broker.telemetry.ClientTelemetry` (advertised only with ``klog.metrics.listener``, which exposes them)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.context import HandlerBroker

if TYPE_CHECKING:
    from klog.broker.telemetry import ClientMetadata
    from klog.protocol.message_types import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
    )


def _client(ctx: RequestContext) -> Callable[[uuid.UUID], ClientMetadata]:
    """The client's metadata a subscription's ``match`` tests, for its instance id."""
    from klog.broker.telemetry import ClientMetadata   # loaded with the broker's telemetry, on first use

    name, version = ctx.client_software
    return lambda instance_id: ClientMetadata(str(instance_id), ctx.header.client_id or "", name, version,
                                              ctx.client_host, str(ctx.client_port))


@handler(71, 0, 0)
def handle_get_telemetry_subscriptions(broker: HandlerBroker, ctx: RequestContext,
                                       request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    return broker.telemetry.get_subscriptions(request.client_instance_id, _client(ctx), int(time.time() * 1000))


@handler(72, 0, 0)
def handle_push_telemetry(broker: HandlerBroker, ctx: RequestContext, request: PushTelemetryRequest
                          ) -> PushTelemetryResponse:
    return broker.telemetry.push(request, _client(ctx), int(time.time() * 1000))

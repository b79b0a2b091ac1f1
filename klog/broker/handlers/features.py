"""UpdateFeatures (57), decided by the controller (klog.controller.features; a quorum member's broker forwards it).
DescribeFeatures is ApiVersions' supported and finalized features, as in Kafka (klog.broker.handlers.api_versions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.apis import CONTROLLER_API_VERSIONS

if TYPE_CHECKING:
    from klog.protocol.message_types import UpdateFeaturesRequest, UpdateFeaturesResponse


@handler(57, *CONTROLLER_API_VERSIONS[57])
async def handle_update_features(broker: HandlerBroker, ctx: RequestContext, request: UpdateFeaturesRequest
                                 ) -> UpdateFeaturesResponse:
    async def decide(allowed: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
        return await broker.controller_apis.update_features(allowed, ctx.api_version)

    return await authz.guard(57, broker, ctx, request, decide)

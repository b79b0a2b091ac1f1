"""ApiVersions (18), with KIP-511's fallback for versions newer than the broker knows."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.features import finalized_levels, kraft_version
from klog.metadata.features import supported_features

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        ApiVersionsResponseApiVersion,
        ApiVersionsResponseFinalizedFeatureKey,
        ApiVersionsResponseSupportedFeatureKey,
    )

# KIP-511: client software names and versions must match this, else INVALID_REQUEST.
_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _api_keys(broker: HandlerBroker) -> list[ApiVersionsResponseApiVersion]:
    return [{"api_key": key, "min_version": lo, "max_version": hi} for key, (lo, hi) in broker.api_versions.items()]


def unsupported_version_response(broker: HandlerBroker) -> ApiVersionsResponse:
    """The v0-format answer to an ApiVersions request at a version above ours."""
    return {"error_code": errors.UNSUPPORTED_VERSION, "api_keys": _api_keys(broker), "throttle_time_ms": 0}


@handler(18, 0, 4)
def handle_api_versions(broker: HandlerBroker, ctx: RequestContext, request: ApiVersionsRequest
                        ) -> ApiVersionsResponse:
    if ctx.api_version >= 3:
        name = getattr(request, "client_software_name", "") or ""
        version = getattr(request, "client_software_version", "") or ""
        if not (_SOFTWARE_RE.match(name) and _SOFTWARE_RE.match(version)):
            return {"error_code": errors.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    response: ApiVersionsResponse = {"error_code": errors.NONE, "api_keys": _api_keys(broker), "throttle_time_ms": 0}
    if ctx.api_version >= 3:
        response.update(_features(broker, ctx.api_version))
    return response


def _features(broker: HandlerBroker, api_version: int) -> ApiVersionsResponse:
    """Kafka's DescribeFeatures answer: what this node supports (v3 leaves out features whose minimum is 0, which
    its readers cannot take) and the cluster's finalized levels (level 0: not finalized) as of the metadata image's
    offset, the finalized features' epoch."""
    image = broker.metadata.image
    supported: list[ApiVersionsResponseSupportedFeatureKey] = [
        {"name": name, "min_version": lo, "max_version": hi} for name, lo, hi in supported_features()
        if api_version >= 4 or lo >= 1]
    if image.metadata_version is None:   # nothing finalized yet
        return {"supported_features": supported, "finalized_features_epoch": -1, "finalized_features": []}
    finalized: list[ApiVersionsResponseFinalizedFeatureKey] = [
        {"name": name, "min_version_level": level, "max_version_level": level}
        for name, level in sorted(finalized_levels(image, kraft_version(broker.config)).items()) if level >= 1]
    return {"supported_features": supported, "finalized_features_epoch": image.highest_offset,
            "finalized_features": finalized}

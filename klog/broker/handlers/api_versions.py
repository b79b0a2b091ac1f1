"""ApiVersions (18), with KIP-511's fallback for versions newer than the broker knows."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.features import described_features, kraft_version

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        ApiVersionsResponseApiVersion,
    )

API_VERSIONS_KEY = 18
# KIP-511: client software names and versions must match this, else INVALID_REQUEST.
_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _api_keys(broker: HandlerBroker) -> list[ApiVersionsResponseApiVersion]:
    return [{"api_key": key, "min_version": lo, "max_version": hi} for key, (lo, hi) in broker.api_versions.items()]


def unsupported_version_response(broker: HandlerBroker) -> ApiVersionsResponse:
    """The v0-format answer to an ApiVersions request at a version above ours: as Kafka's
    ApiVersionsRequest.getErrorResponse (KIP-511), the versions of ApiVersions only, which the client retries with."""
    low, high = broker.api_versions[API_VERSIONS_KEY]
    return {"error_code": errors.UNSUPPORTED_VERSION, "throttle_time_ms": 0,
            "api_keys": [{"api_key": API_VERSIONS_KEY, "min_version": low, "max_version": high}]}


@handler(18, 0, 4)
def handle_api_versions(broker: HandlerBroker, ctx: RequestContext, request: ApiVersionsRequest
                        ) -> ApiVersionsResponse:
    if ctx.api_version >= 3:
        name = getattr(request, "client_software_name", "") or ""
        version = getattr(request, "client_software_version", "") or ""
        if not (_SOFTWARE_RE.match(name) and _SOFTWARE_RE.match(version)):
            return {"error_code": errors.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    response: ApiVersionsResponse = {"error_code": errors.NONE, "api_keys": _api_keys(broker), "throttle_time_ms": 0}
    login = ctx.session   # a SASL connection's login state (ConnectionAuth): Kafka takes one ApiVersions before it
    if login is not None and not login.authenticated:
        login.api_versions_answered = True
    if ctx.api_version >= 3:
        response.update(described_features(broker.metadata.image, kraft_version(broker.config), ctx.api_version))
    return response

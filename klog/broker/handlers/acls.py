"""ACLs: DescribeAcls (29) answered from this broker's image; CreateAcls (30) and DeleteAcls (31) decided by the
controller (klog.controller.acls), forwarded like the other controller APIs. Changing ACLs needs Alter on the
Cluster, listing them Describe on the Cluster (Kafka's AclApis); without an authorizer Kafka answers
SECURITY_DISABLED."""

from __future__ import annotations

import logging
from typing import Any

from klog.broker import errors
from klog.broker.handlers import CloseConnection, RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.acls import describe_acls, entry_of, filter_of
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.security.acl import AclOperation, filter_error, has_unknown_code

log = logging.getLogger("klog.broker.acls")

_DISABLED = "No Authorizer is configured."
_CLUSTER_DENIED = "Cluster authorization failed."   # Kafka's ClusterAuthorizationException message


def _refuse_unparsable(ctx: RequestContext, problems: list[str | None]) -> None:
    """Kafka's broker cannot parse an ACL request holding UNKNOWN codes (its request classes refuse them) and
    closes the connection; klog does the same, with a log line saying why."""
    problem = next((p for p in problems if p is not None), None)
    if problem is not None:
        log.info("closing connection %d from %s: %s request refused (%s), as Kafka does",
                 ctx.connection_id, ctx.client_host, ctx.header.api_key, problem)
        raise CloseConnection(problem)


@handler(29, 1, 3)
def handle_describe_acls(broker: HandlerBroker, ctx: RequestContext, request: Any) -> dict[str, Any]:
    _refuse_unparsable(ctx, [filter_error(filter_of(request))])
    if not authz.allowed_cluster(broker, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": _CLUSTER_DENIED, "resources": []}
    if broker.access is None:
        return {"throttle_time_ms": 0, "error_code": errors.SECURITY_DISABLED, "error_message": _DISABLED,
                "resources": []}
    return describe_acls(request, broker.metadata.image.acls)


@handler(30, *CONTROLLER_API_VERSIONS[30])
async def handle_create_acls(broker: HandlerBroker, ctx: RequestContext, request: Any) -> dict[str, Any]:
    _refuse_unparsable(ctx, ["a creation holds an UNKNOWN (0) code" if has_unknown_code(entry_of(c)) else None
                             for c in request.creations])
    return await authz.guard(30, broker, ctx, request, broker.controller_apis.create_acls)


@handler(31, *CONTROLLER_API_VERSIONS[31])
async def handle_delete_acls(broker: HandlerBroker, ctx: RequestContext, request: Any) -> dict[str, Any]:
    _refuse_unparsable(ctx, [filter_error(filter_of(f)) for f in request.filters])
    return await authz.guard(31, broker, ctx, request, broker.controller_apis.delete_acls)

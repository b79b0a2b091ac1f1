"""ACLs: DescribeAcls (29) answered from this broker's image; CreateAcls (30) and DeleteAcls (31) decided by the
controller (klog.controller.acls), forwarded like the other controller APIs. Changing ACLs needs Alter on the
Cluster, listing them Describe on the Cluster (Kafka's AclApis); without an authorizer Kafka answers
SECURITY_DISABLED."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.acls import DESCRIBE_ACLS_DISABLED, describe_acls
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.security.acl import AclOperation

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

_DISABLED = "No Authorizer is configured."
_CLUSTER_DENIED = "Cluster authorization failed."   # Kafka's ClusterAuthorizationException message


@handler(29, 1, 3)
def handle_describe_acls(broker: HandlerBroker, ctx: RequestContext, request: DescribeAclsRequest
                         ) -> DescribeAclsResponse:
    authz.refuse_unparsable(29, ctx, request)
    if not authz.allowed_cluster(broker, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": _CLUSTER_DENIED, "resources": []}
    if broker.access is None:
        return {"throttle_time_ms": 0, "error_code": errors.SECURITY_DISABLED,
                "error_message": DESCRIBE_ACLS_DISABLED, "resources": []}
    return describe_acls(request, broker.metadata.image.acls)


@handler(30, *CONTROLLER_API_VERSIONS[30])
async def handle_create_acls(broker: HandlerBroker, ctx: RequestContext, request: CreateAclsRequest
                            ) -> CreateAclsResponse:
    authz.refuse_unparsable(30, ctx, request)
    return await authz.guard(30, broker, ctx, request, broker.controller_apis.create_acls)


@handler(31, *CONTROLLER_API_VERSIONS[31])
async def handle_delete_acls(broker: HandlerBroker, ctx: RequestContext, request: DeleteAclsRequest
                            ) -> DeleteAclsResponse:
    authz.refuse_unparsable(31, ctx, request)
    return await authz.guard(31, broker, ctx, request, broker.controller_apis.delete_acls)

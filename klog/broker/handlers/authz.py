"""Authorization in the handlers: the questions of :class:`klog.broker.access.AccessControl` asked with the
handler's ``broker`` and ``ctx`` (principal and client host); without an authorizer (``broker.access`` None) every
answer is yes. :func:`guard` authorizes the controller's APIs (decided locally or forwarded) as the client.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar, cast

from klog.broker.handlers import CloseConnection
from klog.controller import authorize
from klog.controller.acls import entry_of, filter_of
from klog.controller.authorize import ConfigResource, ControllerRequest, Requester
from klog.security.acl import CLUSTER_NAME, AclOperation, ResourceType, has_unknown_code
from klog.security.authorizer import SUPPORTED_OPERATIONS

if TYPE_CHECKING:
    from klog.broker.handlers import RequestContext
    from klog.broker.handlers.context import HandlerBroker
    from klog.protocol.message_types import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

R = TypeVar("R")
Req = TypeVar("Req", bound=ControllerRequest)
log = logging.getLogger("klog.broker.acls")

__all__ = ["CLUSTER_NAME", "AclOperation", "ResourceType", "allowed", "allowed_any", "allowed_cluster",
           "authorized_operations", "cluster_operations", "config_denial", "filter_allowed", "guard",
           "refuse_unparsable", "requester"]


def allowed(broker: HandlerBroker, ctx: RequestContext, operation: int, resource_type: int, name: str,
            *, count: bool = True) -> bool:
    access = broker.access
    return access is None or access.check(ctx.principal, ctx.client_host, operation, resource_type, name,
                                          count=count)


def allowed_cluster(broker: HandlerBroker, ctx: RequestContext, operation: int, *, count: bool = True) -> bool:
    return allowed(broker, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, count=count)


def allowed_any(broker: HandlerBroker, ctx: RequestContext, operation: int, resource_type: int) -> bool:
    """Kafka's ``authorizeByResourceType``: the operation is allowed on at least one resource of the type."""
    access = broker.access
    return access is None or access.check_any(ctx.principal, ctx.client_host, operation, resource_type)


def filter_allowed(broker: HandlerBroker, ctx: RequestContext, operation: int, resource_type: int,
                   names: Iterable[str], *, count: bool = True) -> set[str]:
    """The names among ``names`` the principal may ``operation`` (each name checked once)."""
    unique = set(names)
    access = broker.access
    if access is None:
        return unique
    return {n for n in unique if access.check(ctx.principal, ctx.client_host, operation, resource_type, n,
                                              count=count)}


def cluster_operations(broker: HandlerBroker, ctx: RequestContext) -> int:
    """``cluster_authorized_operations`` (Metadata, DescribeCluster): 0 unless the principal may describe the
    cluster (Kafka's rule)."""
    if not allowed_cluster(broker, ctx, AclOperation.DESCRIBE, count=False):
        return 0
    return authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(broker: HandlerBroker, ctx: RequestContext, resource_type: int, name: str) -> int:
    """The ``*_authorized_operations`` bit field: every supported operation without an authorizer."""
    access = broker.access
    if access is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
    return access.operations(ctx.principal, ctx.client_host, resource_type, name)


# ---- the controller's APIs (decided locally or forwarded): klog.controller.authorize as this client ----------

def requester(broker: HandlerBroker, ctx: RequestContext) -> Requester:
    """The client of ``ctx`` as the controller's checks see it: this broker's AccessControl over its image."""
    access = broker.access
    if access is None:
        return Requester(None, ctx.api_version, lambda: broker.metadata.image)
    principal, host = ctx.principal, ctx.client_host

    def check(operation: int, resource_type: int, name: str, count: bool) -> bool:
        return access.check(principal, host, operation, resource_type, name, count=count)

    return Requester(check, ctx.api_version, lambda: broker.metadata.image)


def config_denial(broker: HandlerBroker, ctx: RequestContext, resource: ConfigResource, operation: int) -> int:
    """The error of a config resource the principal may not ``operation`` (AlterConfigs/DescribeConfigs), 0."""
    return authorize.config_denial(requester(broker, ctx), resource, operation)


def refuse_unparsable(api_key: int, ctx: RequestContext,
                      request: DescribeAclsRequest | CreateAclsRequest | DeleteAclsRequest) -> None:
    """Kafka's broker cannot parse an ACL request (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) holding
    UNKNOWN (0) codes and closes the connection (other codes it does not know are answered): klog does the same
    (CloseConnection), with a log line saying why, before authorizing or forwarding it."""
    unknown: list[bool] = []
    if api_key == 29:
        unknown = [has_unknown_code(filter_of(cast("DescribeAclsRequest", request)))]
    elif api_key == 30:
        unknown = [has_unknown_code(entry_of(c)) for c in cast("CreateAclsRequest", request).creations]
    elif api_key == 31:
        unknown = [has_unknown_code(filter_of(f)) for f in cast("DeleteAclsRequest", request).filters]
    if any(unknown):
        problem = "an ACL creation or filter holds an UNKNOWN (0) code"
        log.info("closing connection %d from %s: ACL request (api key %d) refused (%s), as Kafka does",
                 ctx.connection_id, ctx.client_host, api_key, problem)
        raise CloseConnection(problem)


async def guard(api_key: int, broker: HandlerBroker, ctx: RequestContext, request: Req,
                decide: Callable[[Req], Awaitable[R]]) -> R:
    """Authorize a controller API as the client's principal, then ``decide`` (locally or by forwarding) what
    is allowed (:func:`klog.controller.authorize.guard`)."""
    return await authorize.guard(api_key, requester(broker, ctx), request, decide)

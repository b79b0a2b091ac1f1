"""Authorization in the handlers: the questions of :class:`klog.broker.access.AccessControl` asked with the
handler's ``broker`` and ``ctx`` (principal and client host); without an authorizer (``broker.access`` None) every
answer is yes. :func:`guard` authorizes the controller's APIs (decided locally or forwarded) as the client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Union, cast

from klog.broker import errors
from klog.broker.handlers import CloseConnection
from klog.controller.acls import entry_of, filter_of
from klog.protocol.struct import Struct
from klog.security.acl import CLUSTER_NAME, AclOperation, ResourceType, filter_error, has_unknown_code
from klog.security.authorizer import SUPPORTED_OPERATIONS

if TYPE_CHECKING:
    from klog.broker.handlers import RequestContext
    from klog.broker.handlers.context import HandlerBroker
    from klog.protocol.message_types import (
        AlterClientQuotasRequest,
        AlterConfigsRequest,
        AlterPartitionReassignmentsRequest,
        AlterUserScramCredentialsRequest,
        CreateAclsRequest,
        CreatePartitionsRequest,
        CreateTopicsRequest,
        DeleteAclsRequest,
        DeleteTopicsRequest,
        DescribeAclsRequest,
        ElectLeadersRequest,
        IncrementalAlterConfigsRequest,
        ListPartitionReassignmentsRequest,
        UpdateFeaturesRequest,
    )

#: the requests :func:`guard` authorizes: the controller's APIs
ControllerRequest = Union["CreateTopicsRequest", "DeleteTopicsRequest", "CreatePartitionsRequest",
                          "AlterConfigsRequest", "IncrementalAlterConfigsRequest", "CreateAclsRequest",
                          "DeleteAclsRequest", "ElectLeadersRequest", "AlterPartitionReassignmentsRequest",
                          "ListPartitionReassignmentsRequest", "AlterUserScramCredentialsRequest",
                          "AlterClientQuotasRequest", "UpdateFeaturesRequest"]
R = TypeVar("R")
Req = TypeVar("Req", bound=ControllerRequest)


class ConfigResource(Protocol):
    """A config resource of DescribeConfigs, AlterConfigs or IncrementalAlterConfigs."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...
log = logging.getLogger("klog.broker.acls")

__all__ = ["CLUSTER_NAME", "AclOperation", "ResourceType", "allowed", "allowed_any", "allowed_cluster",
           "authorized_operations", "cluster_operations", "config_denial", "filter_allowed", "guard",
           "refuse_unparsable"]


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


# ---- the controller's APIs (decided locally or forwarded): authorized here, as the client's principal --------

_TOPIC = ResourceType.TOPIC
_CONFIG_TYPE_TOPIC, _CONFIG_TYPE_BROKER, _CONFIG_TYPE_BROKER_LOGGER, _CONFIG_TYPE_GROUP = 2, 4, 8, 32
_ZERO_UUID = uuid.UUID(int=0)


def _cluster_denied(api_key: int, request: ControllerRequest) -> dict[str, Any]:
    code = errors.CLUSTER_AUTHORIZATION_FAILED
    message = "Cluster authorization failed."
    if api_key == 30:
        return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message}
                                                   for _ in cast("CreateAclsRequest", request).creations]}
    if api_key == 31:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in cast("DeleteAclsRequest", request).filters]}
    if api_key == 43:
        wanted = cast("ElectLeadersRequest", request).topic_partitions or []
        return {"throttle_time_ms": 0, "error_code": code, "replica_election_results": [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": message} for p in t.partitions]}
            for t in wanted]}
    if api_key == 51:   # AlterUserScramCredentials: every user named
        alter = cast("AlterUserScramCredentialsRequest", request)
        users = dict.fromkeys([d.name for d in alter.deletions] + [u.name for u in alter.upsertions])
        return {"throttle_time_ms": 0, "results": [{"user": u, "error_code": code, "error_message": message}
                                                   for u in users]}
    if api_key == 57:   # UpdateFeatures: one top-level error
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "results": []}
    if api_key == 49:   # AlterClientQuotas: every entry (Kafka's AlterClientQuotasResponse of one error)
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": code, "error_message": message,
             "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
            for entry in cast("AlterClientQuotasRequest", request).entries]}
    if api_key == 45:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": [],
                "allow_replication_factor_change": bool(getattr(request, "allow_replication_factor_change",
                                                                True))}
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "topics": []}   # 46


#: the cluster operation each all-or-nothing controller API needs
_CLUSTER_APIS: dict[int, int] = {30: AclOperation.ALTER, 31: AclOperation.ALTER, 43: AclOperation.ALTER,
                                 45: AclOperation.ALTER, 46: AclOperation.DESCRIBE, 51: AclOperation.ALTER,
                                 49: AclOperation.ALTER_CONFIGS, 57: AclOperation.ALTER}


def config_denial(broker: HandlerBroker, ctx: RequestContext, resource: ConfigResource, operation: int) -> int:
    """The error of a config resource the principal may not ``operation`` (AlterConfigs/DescribeConfigs), 0."""
    rtype = int(resource.resource_type)
    if rtype == _CONFIG_TYPE_TOPIC:
        return 0 if allowed(broker, ctx, operation, _TOPIC, resource.resource_name) \
            else errors.TOPIC_AUTHORIZATION_FAILED
    if rtype == _CONFIG_TYPE_GROUP:
        return 0 if allowed(broker, ctx, operation, ResourceType.GROUP, resource.resource_name) \
            else errors.GROUP_AUTHORIZATION_FAILED
    return 0 if allowed_cluster(broker, ctx, operation) else errors.CLUSTER_AUTHORIZATION_FAILED


def _denied_items(api_key: int, broker: HandlerBroker, ctx: RequestContext, request: ControllerRequest
                  ) -> tuple[str, list[Any], list[dict[str, Any]], str]:
    """(request list field, the items kept, the answers of those refused, response list field)."""
    kept: list[Any] = []
    refused: list[dict[str, Any]] = []
    taf = errors.TOPIC_AUTHORIZATION_FAILED
    if api_key == 19:   # CreateTopics: Create on the Cluster, else on each topic
        everything = allowed_cluster(broker, ctx, AclOperation.CREATE, count=False)
        for t in cast("CreateTopicsRequest", request).topics:
            if everything or allowed(broker, ctx, AclOperation.CREATE, _TOPIC, t.name):
                kept.append(t)
            else:
                refused.append({"name": t.name, "topic_id": _ZERO_UUID, "error_code": taf,
                                "error_message": "Authorization failed.", "num_partitions": -1,
                                "replication_factor": -1, "configs": None, "topic_config_error_code": taf})
        return "topics", kept, refused, "topics"
    if api_key == 20:   # DeleteTopics: Delete on each topic; without Describe too, the error hides whether it exists
        by_name = ctx.api_version < 6
        delete = cast("DeleteTopicsRequest", request)
        items: list[Any] = list(delete.topic_names) if by_name else list(delete.topics)
        image = broker.metadata.image
        for t in items:
            name = t if by_name else t.name
            if name is None:   # by id: its name decides, an unknown id is the controller's answer
                found = image.topics_by_id.get(t.topic_id)
                name = None if found is None else found.name
                if name is None:
                    kept.append(t)
                    continue
            if allowed(broker, ctx, AclOperation.DELETE, _TOPIC, name):
                kept.append(t)
                continue
            code: int = taf
            if allowed(broker, ctx, AclOperation.DESCRIBE, _TOPIC, name, count=False) and image.topic(name) is None:
                code = errors.UNKNOWN_TOPIC_OR_PARTITION   # Kafka's ControllerApis: describable, not there
            if by_name or t.name is not None:
                refused.append({"name": name, "topic_id": _ZERO_UUID, "error_code": code, "error_message": None})
            else:   # asked by id: do not name the topic
                refused.append({"name": None, "topic_id": t.topic_id, "error_code": code, "error_message": None})
        return ("topic_names" if by_name else "topics"), kept, refused, "responses"
    if api_key == 37:   # CreatePartitions: Alter on each topic
        for partitions in cast("CreatePartitionsRequest", request).topics:
            if allowed(broker, ctx, AclOperation.ALTER, _TOPIC, partitions.name):
                kept.append(partitions)
            else:
                refused.append({"name": partitions.name, "error_code": taf, "error_message": None})
        return "topics", kept, refused, "results"
    # 33, 44: AlterConfigs / IncrementalAlterConfigs: AlterConfigs on each resource
    alter: AlterConfigsRequest | IncrementalAlterConfigsRequest = cast(
        "AlterConfigsRequest | IncrementalAlterConfigsRequest", request)
    for r in alter.resources:
        denied = config_denial(broker, ctx, r, AclOperation.ALTER_CONFIGS)
        if denied:
            refused.append({"error_code": denied, "error_message": None, "resource_type": r.resource_type,
                            "resource_name": r.resource_name})
        else:
            kept.append(r)
    return "resources", kept, refused, "responses"


def refuse_unparsable(api_key: int, ctx: RequestContext,
                      request: DescribeAclsRequest | CreateAclsRequest | DeleteAclsRequest) -> None:
    """Kafka's broker cannot parse an ACL request (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) holding
    UNKNOWN (0) codes, or filters of codes it does not know, and closes the connection: klog does the same
    (CloseConnection), with a log line saying why, before authorizing or forwarding it."""
    problems: list[str | None] = []
    if api_key == 29:
        problems = [filter_error(filter_of(cast("DescribeAclsRequest", request)))]
    elif api_key == 30:
        problems = ["a creation holds an UNKNOWN (0) code" if has_unknown_code(entry_of(c)) else None
                    for c in cast("CreateAclsRequest", request).creations]
    elif api_key == 31:
        problems = [filter_error(filter_of(f)) for f in cast("DeleteAclsRequest", request).filters]
    problem = next((p for p in problems if p is not None), None)
    if problem is not None:
        log.info("closing connection %d from %s: ACL request (api key %d) refused (%s), as Kafka does",
                 ctx.connection_id, ctx.client_host, api_key, problem)
        raise CloseConnection(problem)


async def guard(api_key: int, broker: HandlerBroker, ctx: RequestContext, request: Req,
                decide: Callable[[Req], Awaitable[R]]) -> R:
    """Authorize a controller API as the client's principal, then ``decide`` (locally or by forwarding) what
    is allowed: all-or-nothing APIs answer CLUSTER_AUTHORIZATION_FAILED, per-item APIs answer the refused items
    themselves and pass the rest on."""
    if broker.access is None:
        return await decide(request)
    cluster_op = _CLUSTER_APIS.get(api_key)
    if cluster_op is not None:
        if not allowed_cluster(broker, ctx, cluster_op):
            return cast(R, _cluster_denied(api_key, request))
        return await decide(request)
    field, kept, refused, out = _denied_items(api_key, broker, ctx, request)
    if not refused:
        return await decide(request)
    response: Any = await decide(cast(Req, Struct(**{**request.__dict__, field: kept}))) if kept \
        else {"throttle_time_ms": 0, out: []}
    items = response[out] if isinstance(response, dict) else getattr(response, out)
    items.extend(refused)
    return cast(R, response)

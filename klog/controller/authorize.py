"""The controller's APIs authorized as the principal that sent them (Kafka's ``ControllerApis`` with its
``AuthHelper``): CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs, CreateAcls,
DeleteAcls, ElectLeaders, partition reassignments, AlterClientQuotas, AlterUserScramCredentials and UpdateFeatures.

Asked by a broker for the requests it decides itself (klog.broker.handlers.authz wraps :func:`guard` with its
AccessControl) and by the active controller for the requests a broker forwarded in an EnvelopeRequest (KIP-590: as
the principal the envelope names, from the client's address it names). Pure: the check is the caller's
(:class:`Requester`), the decision too.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Union, cast

from klog.metadata.image import MetadataImage
from klog.protocol.errors import ErrorCode, error_info
from klog.protocol.struct import Struct
from klog.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
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
        ElectLeadersRequest,
        IncrementalAlterConfigsRequest,
        ListPartitionReassignmentsRequest,
        UpdateFeaturesRequest,
    )

__all__ = ["ControllerRequest", "Requester", "config_denial", "guard", "refusal"]

#: the requests :func:`guard` authorizes: the controller's APIs
ControllerRequest = Union["CreateTopicsRequest", "DeleteTopicsRequest", "CreatePartitionsRequest",
                          "AlterConfigsRequest", "IncrementalAlterConfigsRequest", "CreateAclsRequest",
                          "DeleteAclsRequest", "ElectLeadersRequest", "AlterPartitionReassignmentsRequest",
                          "ListPartitionReassignmentsRequest", "AlterUserScramCredentialsRequest",
                          "AlterClientQuotasRequest", "UpdateFeaturesRequest"]
R = TypeVar("R")
Req = TypeVar("Req", bound=ControllerRequest)
#: (operation, resource type, resource name, count the denial in the metrics) -> allowed
Check = Callable[[int, int, str, bool], bool]


class ConfigResource(Protocol):
    """A config resource of DescribeConfigs, AlterConfigs or IncrementalAlterConfigs."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


@dataclass(frozen=True)
class Requester:
    """Who asks, as the checks see it: ``check`` answers for its principal and client host (None: no authorizer,
    everything allowed), ``api_version`` is its request's, ``image()`` the metadata image the names are looked up in
    (DeleteTopics by id)."""

    check: Check | None
    api_version: int
    image: Callable[[], MetadataImage]

    def allowed(self, operation: int, resource_type: int, name: str, *, count: bool = True) -> bool:
        return self.check is None or self.check(operation, resource_type, name, count)

    def allowed_cluster(self, operation: int, *, count: bool = True) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME, count=count)


_TOPIC = ResourceType.TOPIC
_CONFIG_TYPE_TOPIC, _CONFIG_TYPE_BROKER, _CONFIG_TYPE_BROKER_LOGGER, _CONFIG_TYPE_GROUP = 2, 4, 8, 32
_ZERO_UUID = uuid.UUID(int=0)


def _cluster_denied(api_key: int, request: ControllerRequest, code: int = ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    message: str = "Cluster authorization failed.") -> dict[str, Any]:
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


def config_denial(requester: Requester, resource: ConfigResource, operation: int) -> int:
    """The error of a config resource the principal may not ``operation`` (AlterConfigs/DescribeConfigs), 0."""
    rtype = int(resource.resource_type)
    if rtype == _CONFIG_TYPE_TOPIC:
        return 0 if requester.allowed(operation, _TOPIC, resource.resource_name) \
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rtype == _CONFIG_TYPE_GROUP:
        return 0 if requester.allowed(operation, ResourceType.GROUP, resource.resource_name) \
            else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return 0 if requester.allowed_cluster(operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _denied_items(api_key: int, requester: Requester, request: ControllerRequest
                  ) -> tuple[str, list[Any], list[dict[str, Any]], str]:
    """(request list field, the items kept, the answers of those refused, response list field)."""
    kept: list[Any] = []
    refused: list[dict[str, Any]] = []
    taf = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if api_key == 19:   # CreateTopics: Create on the Cluster, else on each topic
        everything = requester.allowed_cluster(AclOperation.CREATE, count=False)
        for t in cast("CreateTopicsRequest", request).topics:
            if everything or requester.allowed(AclOperation.CREATE, _TOPIC, t.name):
                kept.append(t)
            else:
                refused.append({"name": t.name, "topic_id": _ZERO_UUID, "error_code": taf,
                                "error_message": "Authorization failed.", "num_partitions": -1,
                                "replication_factor": -1, "configs": None, "topic_config_error_code": taf})
        return "topics", kept, refused, "topics"
    if api_key == 20:   # DeleteTopics: Delete on each topic; without Describe too, the error hides whether it exists
        by_name = requester.api_version < 6
        delete = cast("DeleteTopicsRequest", request)
        items: list[Any] = list(delete.topic_names) if by_name else list(delete.topics)
        image = requester.image()
        for t in items:
            name = t if by_name else t.name
            if name is None:   # by id: its name decides, an unknown id is the controller's answer
                found = image.topics_by_id.get(t.topic_id)
                name = None if found is None else found.name
                if name is None:
                    kept.append(t)
                    continue
            if requester.allowed(AclOperation.DELETE, _TOPIC, name):
                kept.append(t)
                continue
            code: int = taf
            if requester.allowed(AclOperation.DESCRIBE, _TOPIC, name, count=False) and image.topic(name) is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION   # Kafka's ControllerApis: describable, not there
            message = error_info(code).message   # Kafka's ApiError of the code: its default message
            if by_name or t.name is not None:
                refused.append({"name": name, "topic_id": _ZERO_UUID, "error_code": code, "error_message": message})
            else:   # asked by id: do not name the topic
                refused.append({"name": None, "topic_id": t.topic_id, "error_code": code, "error_message": message})
        return ("topic_names" if by_name else "topics"), kept, refused, "responses"
    if api_key == 37:   # CreatePartitions: Alter on each topic
        for partitions in cast("CreatePartitionsRequest", request).topics:
            if requester.allowed(AclOperation.ALTER, _TOPIC, partitions.name):
                kept.append(partitions)
            else:
                refused.append({"name": partitions.name, "error_code": taf, "error_message": None})
        return "topics", kept, refused, "results"
    # 33, 44: AlterConfigs / IncrementalAlterConfigs: AlterConfigs on each resource
    alter: AlterConfigsRequest | IncrementalAlterConfigsRequest = cast(
        "AlterConfigsRequest | IncrementalAlterConfigsRequest", request)
    for r in alter.resources:
        denied = config_denial(requester, r, AclOperation.ALTER_CONFIGS)
        if denied:
            refused.append({"error_code": denied, "error_message": None, "resource_type": r.resource_type,
                            "resource_name": r.resource_name})
        else:
            kept.append(r)
    return "resources", kept, refused, "responses"


async def guard(api_key: int, requester: Requester, request: Req,
                decide: Callable[[Req], Awaitable[R]]) -> R:
    """Authorize a controller API as the requester, then ``decide`` (locally or by forwarding) what
    is allowed: all-or-nothing APIs answer CLUSTER_AUTHORIZATION_FAILED, per-item APIs answer the refused items
    themselves and pass the rest on."""
    if requester.check is None:
        return await decide(request)
    cluster_op = _CLUSTER_APIS.get(api_key)
    if cluster_op is not None:
        if not requester.allowed_cluster(cluster_op):
            return cast(R, _cluster_denied(api_key, request))
        return await decide(request)
    field, kept, refused, out = _denied_items(api_key, requester, request)
    if not refused:
        response: Any = await decide(request)
    else:
        response = await decide(cast(Req, Struct(**{**request.__dict__, field: kept}))) if kept \
            else {"throttle_time_ms": 0, out: []}
    items = response[out] if isinstance(response, dict) else getattr(response, out)
    if api_key == 19:
        _hide_undescribable_configs(requester, items)
    items.extend(refused)
    return cast(R, response)


def _hide_undescribable_configs(requester: Requester, created: list[Any]) -> None:
    """CreateTopics (v5+ answers a created topic's configs, partitions and replication factor): only for topics the
    principal may DescribeConfigs; the others answer TOPIC_AUTHORIZATION_FAILED there instead (Kafka's
    ControllerApis ``describableTopicNames``)."""
    for item in created:
        fields = item if isinstance(item, dict) else item.__dict__
        if fields.get("error_code") or fields.get("configs") is None \
                or requester.allowed(AclOperation.DESCRIBE_CONFIGS, _TOPIC, fields["name"], count=False):
            continue
        fields.update(configs=None, num_partitions=-1, replication_factor=-1,
                      topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def refusal(api_key: int, api_version: int, request: ControllerRequest, code: int, message: str) -> dict[str, Any]:
    """The answer refusing every item of ``request`` with ``code`` (what a broker relays when the controller
    refused its envelope: Kafka's ``getErrorResponse(UNKNOWN_SERVER_ERROR)``)."""
    if api_key in _CLUSTER_APIS:
        return _cluster_denied(api_key, request, code, message)
    if api_key in (38, 39, 40, 64, 80, 81):   # delegation tokens, UnregisterBroker, voter changes: one error code
        return {"throttle_time_ms": 0, "error_code": code}
    nobody = Requester(lambda operation, resource_type, name, count: False, api_version, MetadataImage)
    _, _, refused, out = _denied_items(api_key, nobody, request)
    for item in refused:
        item["error_code"] = code
        item["error_message"] = message
        if "topic_config_error_code" in item:
            item["topic_config_error_code"] = code
    return {"throttle_time_ms": 0, out: refused}

"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), ListConfigResources (74).

Topic configs are real: effective values with their source (topic override, broker properties, default)
and Kafka's synonyms. Broker configs are static (set in server.properties or --override) and read-only, but for
the dynamic ones (klog.metadata.config.DYNAMIC_BROKER_KEYS). Client metrics subscriptions (KIP-714, resource type
16) are the ConfigRecords of their CLIENT_METRICS resource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from klog.broker import errors
from klog.metadata import loggers as runtime_loggers
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.security import dynamic_ssl_problem
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.controller.configs import OP_DELETE, ConfigControlManager
from klog.controller.describe_configs import DESCRIBE_CONFIGS_VERSIONS, DescribedNode, describe_configs
from klog.controller.topics import TopicError
from klog.metadata.config import CORDONED_LOG_DIRS, cordoned_log_dirs_problem
from klog.metadata.config_security import dynamic_ssl_key
from klog.protocol.struct import Struct
from klog.metadata.image import ConfigResourceType

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        ListConfigResourcesRequest,
        ListConfigResourcesResponse,
        ListConfigResourcesResponseConfigResource,
    )

BROKER = 4
BROKER_LOGGER = 8


@handler(32, *DESCRIBE_CONFIGS_VERSIONS)
def handle_describe_configs(broker: HandlerBroker, ctx: RequestContext, request: DescribeConfigsRequest
                            ) -> DescribeConfigsResponse:
    """Answered by this broker itself (never forwarded), from its configuration and metadata image."""
    return describe_configs(DescribedNode(broker.config, broker.node_id, broker.metadata.image), request,
                            lambda resource: authz.config_denial(broker, ctx, resource,
                                                                 authz.AclOperation.DESCRIBE_CONFIGS))


@handler(33, *CONTROLLER_API_VERSIONS[33])
async def handle_alter_configs(broker: HandlerBroker, ctx: RequestContext, request: AlterConfigsRequest
                               ) -> AlterConfigsResponse:
    """AlterConfigs replaces a resource's overrides; decided by the controller (klog.controller.apis)."""
    return await authz.guard(33, broker, ctx, request, lambda checked: preprocessed(
        broker, checked, broker.controller_apis.alter_configs, incremental=False))


@handler(44, *CONTROLLER_API_VERSIONS[44])
async def handle_incremental_alter_configs(broker: HandlerBroker, ctx: RequestContext,
                                           request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    return await authz.guard(44, broker, ctx, request, lambda checked: preprocessed(
        broker, checked, broker.controller_apis.incremental_alter_configs, incremental=True))


AlterRequest = TypeVar("AlterRequest", "AlterConfigsRequest", "IncrementalAlterConfigsRequest")
AlterResponse = TypeVar("AlterResponse", "AlterConfigsResponse", "IncrementalAlterConfigsResponse")


async def preprocessed(broker: HandlerBroker, request: AlterRequest,
                       decide: Callable[[AlterRequest], Awaitable[AlterResponse]], *, incremental: bool
                       ) -> AlterResponse:
    """Kafka's brokers check a config change before the controller sees it (ConfigAdminManager.preprocess), each
    resource refused INVALID_REQUEST by this broker: a resource the request names twice (both), a config it names
    twice, a null value (but a DELETE's), a broker resource of another broker's id, and a change of this broker's
    own TLS listeners' keystores and truststores (the stores must load here, and the certificate keep its
    subject). A BROKER_LOGGER resource (IncrementalAlterConfigs only) this broker answers itself
    (:func:`klog.metadata.loggers.answer_changes`). The rest go on to the controller."""
    answered_here: dict[int, Any] = {}   # by the resource's index: refused, or a BROKER_LOGGER resource's answer
    kept = []
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    for index, resource in enumerate(request.resources):
        problem = _preprocess_problem(broker, resource, named[(resource.resource_type, resource.resource_name)] > 1,
                                      incremental)
        if problem is None and incremental and resource.resource_type == BROKER_LOGGER:
            answered_here[index] = runtime_loggers.answer_changes(broker.node_id, resource,
                                                                   bool(request.validate_only))
            continue
        if problem is None and resource.resource_type == BROKER and resource.resource_name == str(
                broker.node_id) and any(dynamic_ssl_key(item.name) is not None or item.name == CORDONED_LOG_DIRS
                                        for item in resource.configs):
            try:
                before, after = ConfigControlManager(broker.config, broker.node_id).broker_configs_after(
                    resource.resource_name, resource.configs, broker.metadata.image, incremental)
            except TopicError:
                pass   # refused by the controller as well, with its own answer
            else:
                problem = dynamic_ssl_problem(broker.config, before, after) or _cordoned_problem(broker, after)
        if problem is None:
            kept.append(resource)
        else:
            answered_here[index] = {"error_code": errors.INVALID_REQUEST, "error_message": problem,
                                    "resource_type": resource.resource_type, "resource_name": resource.resource_name}
    if not answered_here:
        return await decide(request)
    if not kept:
        return cast(AlterResponse, {"throttle_time_ms": 0, "responses": [*answered_here.values()]})
    response = await decide(cast(AlterRequest, Struct(**{**request.__dict__, "resources": kept})))
    answered: Any = response
    answered["responses"] = runtime_loggers.in_request_order(request.resources, answered_here, answered["responses"])
    return response


def _cordoned_problem(broker: HandlerBroker, after: dict[str, str]) -> str | None:
    """Kafka's broker checks its own new cordoned.log.dirs against its log.dirs (KafkaConfig.validateCordonedLogDirs,
    a Scala ``require``) before the controller sees it."""
    value = after.get(CORDONED_LOG_DIRS)
    if value is None:
        return None
    why = cordoned_log_dirs_problem([e.strip() for e in value.split(",") if e.strip()],
                                    broker.config.configured_log_dirs)
    return None if why is None else f"requirement failed: {why}"


def _preprocess_problem(broker: HandlerBroker, resource: Any, repeated: bool, incremental: bool) -> str | None:
    """Why Kafka's ConfigAdminManager.preprocess refuses ``resource`` (INVALID_REQUEST), in its order; None: it
    goes on."""
    if repeated:
        return "Each resource must appear at most once."
    names = [item.name for item in resource.configs]
    if len(set(names)) != len(names):
        return "Error due to duplicate config keys"
    nulls = [item.name for item in resource.configs
             if item.value is None and not (incremental and item.config_operation == OP_DELETE)]
    if nulls:
        return "Null value not supported for : " + ", ".join(nulls)
    if resource.resource_type == BROKER and resource.resource_name != "":
        if not resource.resource_name.lstrip("-").isdigit():
            return f"Node id must be an integer, but it is: {resource.resource_name}"
        if int(resource.resource_name) != broker.node_id:
            return f"Unexpected broker id, expected {broker.node_id}, but received {resource.resource_name}"
    return None


#: ListConfigResources v1 with no types lists these, in Kafka 4.3's order (any other type: UNSUPPORTED_VERSION)
LISTED_RESOURCE_TYPES = (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS, ConfigResourceType.BROKER_LOGGER,
                         ConfigResourceType.BROKER, ConfigResourceType.TOPIC)


@handler(74, 0, 1)
def handle_list_config_resources(broker: HandlerBroker, ctx: RequestContext, request: ListConfigResourcesRequest
                                 ) -> ListConfigResourcesResponse:
    """ListClientMetricsResources (v0: client metrics subscriptions only) and ListConfigResources (v1, KIP-1142:
    the resources of the types asked for, every listed type when none), as Kafka's KafkaApis answers them."""
    if not authz.allowed_cluster(broker, ctx, authz.AclOperation.DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    asked = {ConfigResourceType.CLIENT_METRICS} if ctx.api_version == 0 else {int(t) for t in request.resource_types}
    if any(t not in LISTED_RESOURCE_TYPES for t in asked):
        return {"throttle_time_ms": 0, "error_code": errors.UNSUPPORTED_VERSION, "config_resources": []}
    types = [t for t in LISTED_RESOURCE_TYPES if not asked or t in asked]
    image = broker.metadata.image
    resources: list[ListConfigResourcesResponseConfigResource] = []
    for rtype in types:
        if rtype == ConfigResourceType.TOPIC:
            names = set(image.topics_by_name)
        elif rtype in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
            names = {str(node) for node in image.brokers}
        else:   # subscriptions and groups exist as their ConfigRecords
            names = {name for (t, name) in image.configs if t == rtype}
        resources += [{"resource_name": name, "resource_type": int(rtype)} for name in sorted(names)]
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "config_resources": resources}

"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), ListConfigResources (74).

Topic configs are real: effective values with their source (topic override, broker properties, default)
and Kafka's synonyms. Broker configs are static (set in server.properties or --override) and read-only, but for
the dynamic ones (klog.metadata.config.DYNAMIC_BROKER_KEYS). Client metrics subscriptions (KIP-714, resource type
16) are the ConfigRecords of their CLIENT_METRICS resource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from klog.broker import errors
from klog.metadata import loggers as runtime_loggers
from klog.metadata.config import (
    BROKER_KEYS,
    CONFIG_TYPE_CODES,
    DYNAMIC_BROKER_KEYS,
    BrokerConfig,
    ConfigSource,
    listener_key,
    topic_config_entries,
)
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.broker.security import dynamic_ssl_problem
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.controller.configs import OP_DELETE, ConfigControlManager
from klog.controller.topics import TopicError, validate_topic_name
from klog.metadata.config_security import DYNAMIC_SSL_KEYS, dynamic_ssl_key, listener_ssl_key
from klog.protocol.struct import Struct
from klog.metadata import client_metrics
from klog.metadata import group_config
from klog.metadata.image import ConfigResourceType

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        DescribeConfigsResponseResourceResult,
        DescribeConfigsResponseResult,
        DescribeConfigsResponseSynonym,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        ListConfigResourcesRequest,
        ListConfigResourcesResponse,
        ListConfigResourcesResponseConfigResource,
    )

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def broker_config_entries(broker: HandlerBroker, keys: list[str] | None, *, include_synonyms: bool,
                          include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    config = broker.config
    entries: list[DescribeConfigsResponseResourceResult] = []
    image_configs = broker.metadata.image.configs
    for name, spec in BROKER_KEYS.items():
        if keys is not None and name not in keys:
            continue
        is_set = config.is_set(name)
        source = ConfigSource.STATIC_BROKER_CONFIG if is_set else ConfigSource.DEFAULT_CONFIG
        value = None if spec.sensitive else spec.format(config[name])
        synonyms: list[DescribeConfigsResponseSynonym] = []
        dynamic = [(v, src) for resource, src in ((str(broker.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                                                  ("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
                   if name in DYNAMIC_BROKER_KEYS
                   and (v := image_configs.get((ConfigResourceType.BROKER, resource), {}).get(name)) is not None]
        if dynamic:   # a dynamic broker config: its own resource's value, else the cluster default's
            value, source, is_set = dynamic[0][0], dynamic[0][1], True
            if include_synonyms:
                synonyms += [{"name": name, "value": v, "source": src} for v, src in dynamic]
        if include_synonyms:
            if is_set:
                synonyms.append({"name": name, "value": value, "source": ConfigSource.STATIC_BROKER_CONFIG})
            if spec.default is not None:
                synonyms.append({"name": name, "value": spec.format(spec.default),
                                 "source": ConfigSource.DEFAULT_CONFIG})
        entries.append({
            # Kafka's dynamic broker configs include the listeners' reconfigurable TLS settings
            "name": name, "value": value, "read_only": name not in DYNAMIC_BROKER_KEYS and name not in DYNAMIC_SSL_KEYS,
            "is_default": not is_set,
            "config_source": source,
            "is_sensitive": spec.sensitive, "synonyms": synonyms,
            "config_type": CONFIG_TYPE_CODES.get(spec.type, 0),
            "documentation": spec.doc if include_documentation else None,
        })
    for name in sorted(config.unused):   # supplied, unknown to Kafka 4: static, read-only, sensitive (of no type)
        if keys is not None and name not in keys:
            continue
        entries.append({
            "name": name, "value": None, "read_only": True, "is_default": False,
            "config_source": ConfigSource.STATIC_BROKER_CONFIG, "is_sensitive": True,
            "synonyms": [{"name": name, "value": None, "source": ConfigSource.STATIC_BROKER_CONFIG}]
            if include_synonyms else [],
            "config_type": 0, "documentation": None,
        })
    own = image_configs.get((ConfigResourceType.BROKER, str(broker.node_id)), {})
    listener_names = {n for n in config.originals if n.startswith("listener.name.")} | \
        {n for n in own if listener_ssl_key(n) is not None}
    entries += [listener_entry(config, name, own.get(name) if listener_ssl_key(name) else None,
                               include_synonyms=include_synonyms, include_documentation=include_documentation)
                for name in sorted(listener_names) if keys is None or name in keys]
    return entries


def default_broker_config_entries(broker: HandlerBroker, keys: list[str] | None, *, include_synonyms: bool,
                                  include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    """The cluster default broker resource "" as Kafka's ConfigHelper describes it: only the dynamic defaults set
    on it (DYNAMIC_DEFAULT_BROKER_CONFIG), their synonyms without any one broker's own value."""
    defaults = broker.metadata.image.configs.get((ConfigResourceType.BROKER, ""), {})
    wanted = [name for name in defaults if keys is None or name in keys]
    entries = broker_config_entries(broker, wanted, include_synonyms=include_synonyms,
                                    include_documentation=include_documentation) if wanted else []
    for entry in entries:
        entry["value"] = None if entry.get("is_sensitive") else defaults[entry["name"]]
        entry["config_source"], entry["is_default"] = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False
        entry["synonyms"] = [s for s in entry.get("synonyms", [])
                             if s["source"] != ConfigSource.DYNAMIC_BROKER_CONFIG]
    return entries


def listener_entry(config: BrokerConfig, name: str, dynamic: str | None, *, include_synonyms: bool,
                   include_documentation: bool) -> DescribeConfigsResponseResourceResult:
    """A ``listener.name.<l>.<key>`` setting as Kafka describes it: its dynamic value (``dynamic``, this broker's
    ConfigRecord) else its server.properties one (STATIC_BROKER_CONFIG); null when the key it overrides is sensitive
    (a password, a JAAS config); read-only (Kafka lists only the unprefixed names as dynamic); its synonyms the
    setting itself (dynamic, then static) and the broker config it overrides (static, then default)."""
    _, _, base, spec = listener_key(name)
    static = config.originals.get(name)

    def shown(value: Any) -> str | None:
        return None if spec.sensitive or value is None else spec.format(value)

    synonyms: list[DescribeConfigsResponseSynonym] = []
    if dynamic is not None:
        synonyms.append({"name": name, "value": shown(dynamic), "source": ConfigSource.DYNAMIC_BROKER_CONFIG})
    if static is not None:
        synonyms.append({"name": name, "value": shown(static), "source": ConfigSource.STATIC_BROKER_CONFIG})
    if config.is_set(base):
        synonyms.append({"name": base, "value": shown(config[base]), "source": ConfigSource.STATIC_BROKER_CONFIG})
    if spec.default is not None:
        synonyms.append({"name": base, "value": shown(spec.default), "source": ConfigSource.DEFAULT_CONFIG})
    return {
        "name": name, "value": synonyms[0]["value"], "read_only": True, "is_default": False,
        "config_source": synonyms[0]["source"], "is_sensitive": spec.sensitive,
        "synonyms": synonyms if include_synonyms else [], "config_type": CONFIG_TYPE_CODES.get(spec.type, 0),
        "documentation": spec.doc if include_documentation else None,
    }


def client_metrics_entries(values: Mapping[str, str], keys: list[str] | None, *, include_synonyms: bool,
                           include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    """A subscription's three keys as Kafka 4.3 describes them (an unknown subscription too: its defaults): a set
    value from DYNAMIC_CLIENT_METRICS_CONFIG, with itself as its synonym, else the default; never is_default."""
    entries: list[DescribeConfigsResponseResourceResult] = []
    for name in sorted(client_metrics.KEYS):
        if keys is not None and name not in keys:
            continue
        value = values.get(name)
        source = ConfigSource.DEFAULT_CONFIG if value is None else ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG
        entries.append({
            "name": name, "value": client_metrics.DEFAULTS[name] if value is None else value, "read_only": False,
            "is_default": False, "config_source": source, "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": source}] if include_synonyms and value is not None
            else [],
            "config_type": CONFIG_TYPE_CODES["int" if name == client_metrics.INTERVAL_MS else "list"],
            "documentation": client_metrics.DOCS[name] if include_documentation else None,
        })
    return entries


def _broker_name_ok(broker: HandlerBroker, name: str) -> bool:
    return name in ("", str(broker.node_id))


@handler(32, 1, 4)
def handle_describe_configs(broker: HandlerBroker, ctx: RequestContext, request: DescribeConfigsRequest
                            ) -> DescribeConfigsResponse:
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        rtype, rname = resource.resource_type, resource.resource_name
        # Kafka's ConfigHelper reads an empty list of keys as none given: every config
        keys = list(resource.configuration_keys) if resource.configuration_keys else None
        result: DescribeConfigsResponseResult = {"error_code": errors.NONE, "error_message": None, "resource_type": rtype,
                                  "resource_name": rname, "configs": []}
        results.append(result)
        denied = authz.config_denial(broker, ctx, resource, authz.AclOperation.DESCRIBE_CONFIGS)
        if denied:   # Kafka's ConfigHelper: before the resource is looked up (a hidden topic answers the same)
            result["error_code"] = denied
            result["error_message"] = None
            continue
        if rtype == TOPIC:
            try:
                validate_topic_name(rname)   # Kafka's ConfigHelper, before the topic is looked up
            except TopicError as exc:
                result.update({"error_code": exc.code, "error_message": exc.message})
                continue
            if broker.metadata.topic(rname) is None:
                result.update({"error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                               "error_message": f"Topic {rname} does not exist"})
                continue
            result["configs"] = topic_config_entries(broker.config, broker.metadata.topic_overrides(rname), keys,
                                                     include_synonyms=include_synonyms,
                                                     include_documentation=include_documentation)
        elif rtype == BROKER:
            if not _broker_name_ok(broker, rname):
                result.update({"error_code": errors.INVALID_REQUEST,
                               "error_message": f"Unexpected broker id {rname}; this broker is {broker.node_id}"})
                continue
            if rname == "":
                result["configs"] = default_broker_config_entries(broker, keys, include_synonyms=include_synonyms,
                                                                  include_documentation=include_documentation)
                continue
            result["configs"] = broker_config_entries(broker, keys, include_synonyms=include_synonyms,
                                                      include_documentation=include_documentation)
        elif rtype == BROKER_LOGGER:
            if rname != str(broker.node_id):   # Kafka's ConfigHelper, its words
                message = "Broker id must not be empty" if not rname else \
                    f"Unexpected broker id, expected {broker.node_id} but received {rname}"
                result.update({"error_code": errors.INVALID_REQUEST, "error_message": message})
                continue
            result["configs"] = logger_entries(keys)
        elif rtype == ConfigResourceType.CLIENT_METRICS:
            if not rname:
                result.update({"error_code": errors.INVALID_REQUEST,
                               "error_message": "Client metrics subscription name must not be empty"})
                continue
            result["configs"] = client_metrics_entries(
                broker.metadata.image.configs.get((ConfigResourceType.CLIENT_METRICS, rname), {}), keys,
                include_synonyms=include_synonyms, include_documentation=include_documentation)
        elif rtype == ConfigResourceType.GROUP:
            if not rname:
                result.update({"error_code": errors.INVALID_REQUEST, "error_message": "Group name must not be empty"})
                continue
            result["configs"] = group_config_entries(broker, rname, keys, include_synonyms=include_synonyms,
                                                     include_documentation=include_documentation)
        else:
            result.update({"error_code": errors.INVALID_REQUEST,
                           "error_message": f"Unsupported resource type {rtype}"})
    return {"throttle_time_ms": 0, "results": results}


def logger_entries(keys: list[str] | None) -> list[DescribeConfigsResponseResourceResult]:
    """This broker's loggers (those of ``keys``, else every one) with their effective levels, as Kafka's
    ConfigHelper describes a BROKER_LOGGER resource (source DYNAMIC_BROKER_LOGGER_CONFIG, no synonyms)."""
    return [{"name": name, "value": level, "read_only": False, "is_default": False,
             "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False, "synonyms": [],
             "config_type": 0, "documentation": None}
            for name, level in runtime_loggers.loggers().items() if keys is None or name in keys]


def group_config_entries(broker: HandlerBroker, name: str, keys: list[str] | None, *, include_synonyms: bool,
                         include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    """Every group config of group ``name`` as Kafka's ConfigHelper describes it: the group's own value
    (DYNAMIC_GROUP_CONFIG), else its broker synonym's (STATIC_BROKER_CONFIG when server.properties sets it, else
    DEFAULT_CONFIG); synonyms from the most to the least specific."""
    dynamic = broker.metadata.image.configs.get((ConfigResourceType.GROUP, name), {})
    entries: list[DescribeConfigsResponseResourceResult] = []
    for key in sorted(group_config.GROUP_KEYS.values(), key=lambda k: k.name):
        if keys is not None and key.name not in keys:
            continue
        broker_value, static = group_config.broker_value(key, broker.config)
        synonym_name = key.synonym or key.name
        synonyms: list[DescribeConfigsResponseSynonym] = []
        own = dynamic.get(key.name)
        if own is not None:
            synonyms.append({"name": key.name, "value": own, "source": ConfigSource.DYNAMIC_GROUP_CONFIG})
        if static:
            synonyms.append({"name": synonym_name, "value": broker_value, "source": ConfigSource.STATIC_BROKER_CONFIG})
        synonyms.append({"name": synonym_name, "value": key.default, "source": ConfigSource.DEFAULT_CONFIG})
        entries.append({
            "name": key.name, "value": own if own is not None else broker_value, "read_only": False,
            "is_default": False, "config_source": synonyms[0]["source"], "is_sensitive": False,
            "synonyms": synonyms if include_synonyms else [], "config_type": CONFIG_TYPE_CODES.get(key.type, 0),
            "documentation": None})
    return entries


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
                broker.node_id) and any(dynamic_ssl_key(item.name) is not None for item in resource.configs):
            try:
                before, after = ConfigControlManager(broker.config, broker.node_id).broker_configs_after(
                    resource.resource_name, resource.configs, broker.metadata.image, incremental)
            except TopicError:
                pass   # refused by the controller as well, with its own answer
            else:
                problem = dynamic_ssl_problem(broker.config, before, after)
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

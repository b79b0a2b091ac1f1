"""DescribeConfigs (32) of a node, a broker's (klog.broker.handlers.configs) or a controller's (KIP-919: Kafka's
ControllerApis answers it on the controller listener, for ``kafka-configs --bootstrap-controller --describe``):
topic configs (effective values with their source and Kafka's synonyms), the node's own BROKER resource and the
cluster default "", its BROKER_LOGGER (KIP-412), client metrics subscriptions (KIP-714) and group configs, read
from the node's configuration and metadata image as Kafka's ConfigHelper reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from klog.controller.topics import TopicError, validate_topic_name
from klog.metadata import client_metrics, group_config
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
from klog.metadata.config_security import DYNAMIC_SSL_KEYS, listener_ssl_key
from klog.metadata.image import ConfigResourceType, MetadataImage
from klog.protocol.errors import ErrorCode, error_info

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        DescribeConfigsRequest,
        DescribeConfigsRequestResource,
        DescribeConfigsResponse,
        DescribeConfigsResponseResourceResult,
        DescribeConfigsResponseResult,
        DescribeConfigsResponseSynonym,
    )

__all__ = ["DESCRIBE_CONFIGS_VERSIONS", "DescribedNode", "describe_configs", "logger_entries"]

#: the DescribeConfigs versions a broker and a controller answer (Kafka 4's)
DESCRIBE_CONFIGS_VERSIONS = (1, 4)
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


@dataclass(frozen=True)
class DescribedNode:
    """What a node's configs are described from: its configuration, node id and metadata image."""

    config: BrokerConfig
    node_id: int
    image: MetadataImage


def broker_config_entries(node: DescribedNode, keys: list[str] | None, *, include_synonyms: bool,
                          include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    config = node.config
    entries: list[DescribeConfigsResponseResourceResult] = []
    image_configs = node.image.configs
    for name, spec in BROKER_KEYS.items():
        if keys is not None and name not in keys:
            continue
        is_set = static_set = config.is_set(name)
        source = ConfigSource.STATIC_BROKER_CONFIG if is_set else ConfigSource.DEFAULT_CONFIG
        value = static_value = None if spec.sensitive else spec.format(config[name])
        synonyms: list[DescribeConfigsResponseSynonym] = []
        dynamic = [(v, src) for resource, src in ((str(node.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                                                  ("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
                   if name in DYNAMIC_BROKER_KEYS
                   and (v := image_configs.get((ConfigResourceType.BROKER, resource), {}).get(name)) is not None]
        if dynamic:   # a dynamic broker config: its own resource's value, else the cluster default's
            value, source, is_set = dynamic[0][0], dynamic[0][1], True
            if include_synonyms:
                synonyms += [{"name": name, "value": v, "source": src} for v, src in dynamic]
        if spec.internal and not is_set:
            continue   # Kafka lists its internal (and non-KafkaConfig) keys only once supplied
        if include_synonyms:
            if static_set:
                # server.properties' value, under a dynamic one that overrides it
                synonyms.append({"name": name, "value": static_value, "source": ConfigSource.STATIC_BROKER_CONFIG})
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
    # supplied, unknown to Kafka 4's KafkaConfig: static, read-only, sensitive (of no type)
    for name in sorted({**config.unused, **config.provider_settings}):
        if keys is not None and name not in keys:
            continue
        entries.append({
            "name": name, "value": None, "read_only": True, "is_default": False,
            "config_source": ConfigSource.STATIC_BROKER_CONFIG, "is_sensitive": True,
            "synonyms": [{"name": name, "value": None, "source": ConfigSource.STATIC_BROKER_CONFIG}]
            if include_synonyms else [],
            "config_type": 0, "documentation": None,
        })
    own = image_configs.get((ConfigResourceType.BROKER, str(node.node_id)), {})
    listener_names = {n for n in config.originals if n.startswith("listener.name.")} | \
        {n for n in own if listener_ssl_key(n) is not None}
    entries += [listener_entry(config, name, own.get(name) if listener_ssl_key(name) else None,
                               include_synonyms=include_synonyms, include_documentation=include_documentation)
                for name in sorted(listener_names) if keys is None or name in keys]
    return entries


def default_broker_config_entries(node: DescribedNode, keys: list[str] | None, *, include_synonyms: bool,
                                  include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    """The cluster default broker resource "" as Kafka's ConfigHelper describes it: only the dynamic defaults set
    on it (DYNAMIC_DEFAULT_BROKER_CONFIG), their synonyms without any one broker's own value."""
    defaults = node.image.configs.get((ConfigResourceType.BROKER, ""), {})
    wanted = [name for name in defaults if keys is None or name in keys]
    entries = broker_config_entries(node, wanted, include_synonyms=include_synonyms,
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


def _broker_name_ok(node: DescribedNode, name: str) -> bool:
    return name == "" or _broker_id(name) == node.node_id


def _broker_id(name: str) -> int:
    """Kafka's ConfigHelper.resourceNameToBrokerId (Integer.parseInt): a TopicError in its words for a name that is
    no int."""
    if re.fullmatch(r"[+-]?[0-9]+", name) and -(2**31) <= int(name) < 2**31:
        return int(name)
    raise TopicError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")


def describe_configs(node: DescribedNode, request: DescribeConfigsRequest,
                     denial: Callable[[DescribeConfigsRequestResource], int]) -> DescribeConfigsResponse:
    """DescribeConfigs (32) as Kafka's ConfigHelper answers it on a broker or a controller (KIP-919,
    ``--bootstrap-controller``): each resource authorized first (``denial``: its error, 0 when DESCRIBE_CONFIGS
    is allowed), then described from ``node``'s configuration and metadata image."""
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        rtype, rname = resource.resource_type, resource.resource_name
        # Kafka's ConfigHelper reads an empty list of keys as none given: every config
        keys = list(resource.configuration_keys) if resource.configuration_keys else None
        result: DescribeConfigsResponseResult = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": rtype,
                                  "resource_name": rname, "configs": []}
        results.append(result)
        denied = denial(resource)
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
            if node.image.topic(rname) is None:
                result.update({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "error_message": f"Topic {rname} does not exist"})
                continue
            result["configs"] = topic_config_entries(node.config, node.image.topic_config(rname), keys,
                                                     include_synonyms=include_synonyms,
                                                     include_documentation=include_documentation)
        elif rtype == BROKER:
            try:
                named_ok = _broker_name_ok(node, rname)
            except TopicError as exc:
                result.update({"error_code": exc.code, "error_message": exc.message})
                continue
            if not named_ok:
                result.update({"error_code": ErrorCode.INVALID_REQUEST,   # Kafka's ConfigHelper, its words
                               "error_message": f"Unexpected broker id, expected {node.node_id} or empty string, "
                                                f"but received {rname}"})
                continue
            if rname == "":
                result["configs"] = default_broker_config_entries(node, keys, include_synonyms=include_synonyms,
                                                                  include_documentation=include_documentation)
                continue
            result["configs"] = broker_config_entries(node, keys, include_synonyms=include_synonyms,
                                                      include_documentation=include_documentation)
        elif rtype == BROKER_LOGGER:
            try:
                if not rname:   # Kafka's ConfigHelper, its words
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
                if _broker_id(rname) != node.node_id:
                    raise TopicError(ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {node.node_id} but received {rname}")
            except TopicError as exc:
                result.update({"error_code": exc.code, "error_message": exc.message})
                continue
            result["configs"] = logger_entries(keys)
        elif rtype == ConfigResourceType.CLIENT_METRICS:
            if not rname:
                result.update({"error_code": ErrorCode.INVALID_REQUEST,
                               "error_message": "Client metrics subscription name must not be empty"})
                continue
            result["configs"] = client_metrics_entries(
                node.image.configs.get((ConfigResourceType.CLIENT_METRICS, rname), {}), keys,
                include_synonyms=include_synonyms, include_documentation=include_documentation)
        elif rtype == ConfigResourceType.GROUP:
            if not rname:
                result.update({"error_code": ErrorCode.INVALID_REQUEST, "error_message": "Group name must not be empty"})
                continue
            result["configs"] = group_config_entries(node, rname, keys, include_synonyms=include_synonyms,
                                                     include_documentation=include_documentation)
        else:   # Kafka answers INVALID_REQUEST's default message
            result.update({"error_code": ErrorCode.INVALID_REQUEST,
                           "error_message": error_info(ErrorCode.INVALID_REQUEST).message})
    return {"throttle_time_ms": 0, "results": results}


def logger_entries(keys: list[str] | None) -> list[DescribeConfigsResponseResourceResult]:
    """This broker's loggers (those of ``keys``, else every one) with their effective levels, as Kafka's
    ConfigHelper describes a BROKER_LOGGER resource (source DYNAMIC_BROKER_LOGGER_CONFIG, no synonyms)."""
    return [{"name": name, "value": level, "read_only": False, "is_default": False,
             "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False, "synonyms": [],
             "config_type": 0, "documentation": None}
            for name, level in runtime_loggers.loggers().items() if keys is None or name in keys]


def group_config_entries(node: DescribedNode, name: str, keys: list[str] | None, *, include_synonyms: bool,
                         include_documentation: bool) -> list[DescribeConfigsResponseResourceResult]:
    """Every group config of group ``name`` as Kafka's ConfigHelper describes it: the group's own value
    (DYNAMIC_GROUP_CONFIG), else its broker synonym's (STATIC_BROKER_CONFIG when server.properties sets it, else
    DEFAULT_CONFIG); synonyms from the most to the least specific."""
    dynamic = node.image.configs.get((ConfigResourceType.GROUP, name), {})
    entries: list[DescribeConfigsResponseResourceResult] = []
    for key in sorted(group_config.GROUP_KEYS.values(), key=lambda k: k.name):
        if keys is not None and key.name not in keys:
            continue
        broker_value, static = group_config.broker_value(key, node.config)
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

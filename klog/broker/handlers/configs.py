"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs are real: effective values with their source (topic override, broker properties, default)
and Kafka's synonyms. Broker configs are static (set in server.properties or --override) and read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from klog.broker import errors
from klog.broker.config import BROKER_KEYS, CONFIG_TYPE_CODES, TOPIC_KEYS, ConfigError
from klog.broker.handlers import RequestContext, handler
from klog.broker.partitions import TopicError

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def topic_config_entries(broker: Any, topic: Any, keys: list[str] | None, *, include_synonyms: bool,
                         include_documentation: bool = False) -> list[dict[str, Any]]:
    config = broker.config
    entries = []
    for name, spec in TOPIC_KEYS.items():
        if keys is not None and name not in keys:
            continue
        broker_key, broker_set = config.topic_default_source(name)
        default_value = spec.format(config.topic_default(name))
        synonyms = []
        if name in topic.configs:
            value, source = topic.configs[name], errors.SOURCE_TOPIC_CONFIG
            synonyms.append({"name": name, "value": value, "source": errors.SOURCE_TOPIC_CONFIG})
        elif broker_set:
            value, source = default_value, errors.SOURCE_STATIC_BROKER_CONFIG
        else:
            value, source = default_value, errors.SOURCE_DEFAULT_CONFIG
        if broker_set:
            synonyms.append({"name": broker_key, "value": default_value,
                             "source": errors.SOURCE_STATIC_BROKER_CONFIG})
        synonyms.append({"name": broker_key if broker_key in BROKER_KEYS else name,
                         "value": spec.format(BROKER_KEYS[broker_key].default) if broker_key in BROKER_KEYS
                         and BROKER_KEYS[broker_key].default is not None else default_value,
                         "source": errors.SOURCE_DEFAULT_CONFIG})
        entries.append({
            "name": name, "value": value, "read_only": False, "is_default": source == errors.SOURCE_DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": CONFIG_TYPE_CODES.get(spec.type, 0),
            "documentation": spec.doc if include_documentation else None,
        })
    return entries


def broker_config_entries(broker: Any, keys: list[str] | None, *, include_synonyms: bool,
                          include_documentation: bool) -> list[dict[str, Any]]:
    config = broker.config
    entries = []
    for name, spec in BROKER_KEYS.items():
        if keys is not None and name not in keys:
            continue
        is_set = config.is_set(name)
        source = errors.SOURCE_STATIC_BROKER_CONFIG if is_set else errors.SOURCE_DEFAULT_CONFIG
        value = None if spec.sensitive else spec.format(config[name])
        synonyms = []
        if include_synonyms:
            if is_set:
                synonyms.append({"name": name, "value": value, "source": errors.SOURCE_STATIC_BROKER_CONFIG})
            if spec.default is not None:
                synonyms.append({"name": name, "value": spec.format(spec.default),
                                 "source": errors.SOURCE_DEFAULT_CONFIG})
        entries.append({
            "name": name, "value": value, "read_only": True, "is_default": not is_set, "config_source": source,
            "is_sensitive": spec.sensitive, "synonyms": synonyms,
            "config_type": CONFIG_TYPE_CODES.get(spec.type, 0),
            "documentation": spec.doc if include_documentation else None,
        })
    return entries


def _broker_name_ok(broker: Any, name: str) -> bool:
    return name in ("", str(broker.node_id))


@handler(32, 1, 4)
def handle_describe_configs(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        rtype, rname = resource.resource_type, resource.resource_name
        keys = list(resource.configuration_keys) if resource.configuration_keys is not None else None
        result: dict[str, Any] = {"error_code": errors.NONE, "error_message": None, "resource_type": rtype,
                                  "resource_name": rname, "configs": []}
        results.append(result)
        if rtype == TOPIC:
            topic = broker.partitions.topics.get(rname)
            if topic is None:
                result.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {rname} does not exist")
                continue
            result["configs"] = topic_config_entries(broker, topic, keys, include_synonyms=include_synonyms,
                                                     include_documentation=include_documentation)
        elif rtype == BROKER:
            if not _broker_name_ok(broker, rname):
                result.update(error_code=errors.INVALID_REQUEST,
                              error_message=f"Unexpected broker id {rname}; this broker is {broker.node_id}")
                continue
            result["configs"] = broker_config_entries(broker, keys, include_synonyms=include_synonyms,
                                                      include_documentation=include_documentation)
        elif rtype == BROKER_LOGGER:
            result["configs"] = []
        else:
            result.update(error_code=errors.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {rtype}")
    return {"throttle_time_ms": 0, "results": results}


def _static_broker_error(broker: Any, rname: str) -> tuple[int, str]:
    if not _broker_name_ok(broker, rname):
        return errors.INVALID_REQUEST, f"Unexpected broker id {rname}; this broker is {broker.node_id}"
    return (errors.INVALID_CONFIG, "klog broker configs are static: set them in server.properties or with "
            "--override and restart")


def _alter_topic(broker: Any, name: str, overrides: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    try:
        broker.partitions.alter_topic_configs(name, overrides, validate_only=validate_only)
    except TopicError as exc:
        return exc.code, exc.message
    except ConfigError as exc:
        return errors.INVALID_CONFIG, str(exc)
    return errors.NONE, None


class _ConfigChangeRejected(Exception):
    """A resource's config change refused before it reaches the topic: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _replaced_overrides(broker: Any, name: str, configs: Any) -> dict[str, str]:
    """AlterConfigs: the request's configs replace all of the topic's overrides."""
    overrides = {}
    for item in configs:
        if item.value is None:
            raise _ConfigChangeRejected(errors.INVALID_CONFIG,
                                        f"Null value not supported for topic configs: {item.name}")
        overrides[item.name] = item.value
    return overrides


def _incremental_overrides(broker: Any, name: str, configs: Any) -> dict[str, str]:
    """IncrementalAlterConfigs: the topic's overrides with each SET/DELETE/APPEND/SUBTRACT applied in order."""
    topic = broker.partitions.topics.get(name)
    if topic is None:
        raise _ConfigChangeRejected(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
    overrides = dict(topic.configs)
    for item in configs:
        spec = TOPIC_KEYS.get(item.name)
        if spec is None:
            raise _ConfigChangeRejected(errors.INVALID_CONFIG, f"Unknown topic config name: {item.name}")
        op = item.config_operation
        if op == SET:
            if item.value is None:
                raise _ConfigChangeRejected(errors.INVALID_REQUEST, f"Null value for SET of {item.name}")
            overrides[item.name] = item.value
        elif op == DELETE:
            overrides.pop(item.name, None)
        elif op in (APPEND, SUBTRACT):
            if spec.type != "list":
                raise _ConfigChangeRejected(errors.INVALID_CONFIG,
                                            f"Config value append is not allowed for config key: {item.name}")
            current = overrides.get(item.name, spec.format(broker.config.topic_default(item.name)))
            values = [v for v in (current or "").split(",") if v]
            change = [v.strip() for v in (item.value or "").split(",") if v.strip()]
            if op == APPEND:
                values += [v for v in change if v not in values]
            else:
                values = [v for v in values if v not in change]
            overrides[item.name] = ",".join(values)
        else:
            raise _ConfigChangeRejected(errors.INVALID_REQUEST, f"Unknown config operation {op}")
    return overrides


def _alter_resources(broker: Any, request: Any,
                     topic_overrides: Callable[[Any, str, Any], dict[str, str]]) -> dict[str, Any]:
    """The answer to AlterConfigs and IncrementalAlterConfigs, which differ only in how a topic's new
    overrides follow from the request (``topic_overrides(broker, topic, configs)``); broker configs are static."""
    responses = []
    for resource in request.resources:
        rtype, rname = resource.resource_type, resource.resource_name
        code: int
        message: str | None
        if rtype == TOPIC:
            try:
                overrides = topic_overrides(broker, rname, resource.configs)
            except _ConfigChangeRejected as exc:
                code, message = exc.code, exc.message
            else:
                code, message = _alter_topic(broker, rname, overrides, bool(request.validate_only))
        elif rtype == BROKER:
            code, message = _static_broker_error(broker, rname)
        else:
            code, message = errors.INVALID_REQUEST, f"Unsupported resource type {rtype}"
        responses.append({"error_code": code, "error_message": message, "resource_type": rtype,
                          "resource_name": rname})
    return {"throttle_time_ms": 0, "responses": responses}


@handler(33, 0, 2)
def handle_alter_configs(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return _alter_resources(broker, request, _replaced_overrides)


@handler(44, 0, 1)
def handle_incremental_alter_configs(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return _alter_resources(broker, request, _incremental_overrides)

"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs are real: effective values with their source (topic override, broker properties, default)
and Kafka's synonyms. Broker configs are static (set in server.properties or --override) and read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from klog.broker import errors
from klog.broker.cluster_metadata import now_ms
from klog.broker.config import BROKER_KEYS, CONFIG_TYPE_CODES, DYNAMIC_BROKER_KEYS, TOPIC_KEYS
from klog.broker.handlers import RequestContext, handler
from klog.metadata.image import ConfigResourceType

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def topic_config_entries(broker: Any, overrides: Mapping[str, str], keys: list[str] | None, *,
                         include_synonyms: bool, include_documentation: bool = False) -> list[dict[str, Any]]:
    """A topic's effective configs with their sources, from its overrides (as the metadata image holds them)."""
    config = broker.config
    entries = []
    for name, spec in TOPIC_KEYS.items():
        if keys is not None and name not in keys:
            continue
        broker_key, broker_set = config.topic_default_source(name)
        default_value = spec.format(config.topic_default(name))
        synonyms = []
        value: str | None
        if name in overrides:
            value, source = overrides[name], errors.SOURCE_TOPIC_CONFIG
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
    image_configs = broker.metadata.image.configs
    for name, spec in BROKER_KEYS.items():
        if keys is not None and name not in keys:
            continue
        is_set = config.is_set(name)
        source = errors.SOURCE_STATIC_BROKER_CONFIG if is_set else errors.SOURCE_DEFAULT_CONFIG
        value = None if spec.sensitive else spec.format(config[name])
        synonyms = []
        dynamic = [(v, src) for resource, src in ((str(broker.node_id), errors.SOURCE_DYNAMIC_BROKER_CONFIG),
                                                  ("", errors.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
                   if name in DYNAMIC_BROKER_KEYS
                   and (v := image_configs.get((ConfigResourceType.BROKER, resource), {}).get(name)) is not None]
        if dynamic:   # a dynamic broker config: its own resource's value, else the cluster default's
            value, source, is_set = dynamic[0][0], dynamic[0][1], True
            if include_synonyms:
                synonyms += [{"name": name, "value": v, "source": src} for v, src in dynamic]
        if include_synonyms:
            if is_set:
                synonyms.append({"name": name, "value": value, "source": errors.SOURCE_STATIC_BROKER_CONFIG})
            if spec.default is not None:
                synonyms.append({"name": name, "value": spec.format(spec.default),
                                 "source": errors.SOURCE_DEFAULT_CONFIG})
        entries.append({
            "name": name, "value": value, "read_only": name not in DYNAMIC_BROKER_KEYS, "is_default": not is_set,
            "config_source": source,
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
            if broker.metadata.topic(rname) is None:
                result.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {rname} does not exist")
                continue
            result["configs"] = topic_config_entries(broker, broker.metadata.topic_overrides(rname), keys, include_synonyms=include_synonyms,
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


@handler(33, 0, 2)
async def handle_alter_configs(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    """AlterConfigs replaces a topic's overrides; decided by the controller (klog.controller.configs)."""
    return await _alter(broker, request, incremental=False)


@handler(44, 0, 1)
async def handle_incremental_alter_configs(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    return await _alter(broker, request, incremental=True)


async def _alter(broker: Any, request: Any, *, incremental: bool) -> dict[str, Any]:
    control = broker.metadata.config_control
    validate_only = bool(request.validate_only)
    responses = await broker.metadata.run_async(lambda image: control.alter_configs(
        request.resources, image, now_ms(), incremental=incremental, validate_only=validate_only))
    return {"throttle_time_ms": 0, "responses": responses}

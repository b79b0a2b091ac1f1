"""Config changes as records: AlterConfigs (33) and IncrementalAlterConfigs (44).

Kafka's ``ConfigurationControlManager``, pure: a topic's new overrides are computed from the image's current
ones (AlterConfigs replaces them all; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT in order),
validated as a whole, and the difference becomes ConfigRecords (a null value deletes a key). Broker configs
are static in klog (server.properties / --override), a change refused with INVALID_REQUEST as Kafka refuses a
config it cannot change dynamically (an unknown one INVALID_CONFIG), except the dynamic
replication throttle rates (``DYNAMIC_BROKER_KEYS``) and a listener's reconfigurable TLS settings
(``listener.name.<l>.ssl.keystore.location``, ...), kept as ConfigRecords on the broker's resource (its id, or ""
for the cluster-wide default) as Kafka's controller keeps them. ``cordoned.log.dirs`` (KIP-1066) is per broker only
and refused below metadata.version 4.3-IV0, as Kafka's ConfigurationControlManager refuses it. With ELR on,
``min.insync.replicas`` follows KIP-966's rules (:mod:`klog.controller.partition_change`): no broker-level value,
the cluster-level one never removed, and a change clears the ELRs computed against the old value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeGuard, Union

from klog.metadata.config import (
    BROKER_KEYS,
    CORDONED_LOG_DIRS,
    DYNAMIC_BROKER_KEYS,
    DYNAMIC_LOG_KEYS,
    DYNAMIC_SASL_LOGIN_KEYS,
    PER_BROKER_KEYS,
    SECURITY_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    ConfigKey,
    TopicConfigError,
    check_topic_configs,
)
from klog.metadata import client_metrics, group_config
from klog.metadata.config_security import DYNAMIC_SSL_KEYS, STORED_SSL_KEYS, listener_ssl_key
from klog.metadata.features import MV_CORDONED_LOG_DIRS, metadata_version_name
from klog.metadata.image import ConfigResourceType, MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .partition_change import MIN_ISR_KEY, clear_elr_records, elr_enabled, elr_min_isr_refusal
from .result import ControllerResult
from .topics import TopicError, validate_topic_name

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterConfigsRequestAlterableConfig,
        AlterConfigsRequestResource,
        AlterConfigsResponseResourceResponse,
        IncrementalAlterConfigsRequestAlterableConfig,
        IncrementalAlterConfigsRequestAlterConfigsResource,
    )

    #: a resource of AlterConfigs or of IncrementalAlterConfigs, and one of its configs
    AlterableResource = Union[AlterConfigsRequestResource, IncrementalAlterConfigsRequestAlterConfigsResource]
    AlterableConfig = Union[AlterConfigsRequestAlterableConfig, IncrementalAlterConfigsRequestAlterableConfig]

__all__ = ["ConfigControlManager", "OP_APPEND", "OP_DELETE", "OP_SET", "OP_SUBTRACT"]

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

#: a client metrics subscription's keys: SET and DELETE only (Kafka refuses APPEND and SUBTRACT on them)
CLIENT_METRICS_KEYS: dict[str, ConfigKey] = {
    key: ConfigKey(key, "string", None, doc) for key, doc in client_metrics.DOCS.items()}
#: a group's configs (none is a list: SET and DELETE only)
GROUP_CONFIG_KEYS: dict[str, ConfigKey] = {
    key.name: ConfigKey(key.name, "string", None, key.name) for key in group_config.GROUP_KEYS.values()}


def topic_config_records(name: str, before: Mapping[str, str], after: Mapping[str, str]) -> list[MetadataRecord]:
    """ConfigRecords turning ``before`` into ``after`` (changed or new keys set, removed keys nulled)."""
    out = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            out.append(record("ConfigRecord", resource_type=int(ConfigResourceType.TOPIC), resource_name=name,
                              name=key, value=after.get(key)))
    return out


def _not_a_list(op: int, key: str) -> TopicError:
    """Kafka's answer to an APPEND or SUBTRACT on a config that is not a list."""
    return TopicError(ErrorCode.INVALID_CONFIG,
                      f"Can't {'APPEND' if op == OP_APPEND else 'SUBTRACT'} to key {key} because its type is not LIST.")


def _java_split(value: str) -> list[str]:
    """Java's ``value.split(",")``, as Kafka splits an APPEND/SUBTRACT value: trailing empty entries dropped, but
    for a value without a comma (``""`` is one empty entry)."""
    parts = value.split(",")
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return [] if parts == [""] and "," in value else parts


def _has_operation(item: AlterableConfig) -> TypeGuard[IncrementalAlterConfigsRequestAlterableConfig]:
    return hasattr(item, "config_operation")


#: what a refused broker config change says besides Kafka's words
_STATIC_BROKER_CONFIGS = (
    "klog broker configs are static (set them in server.properties or with --override and restart) except "
    f"{', '.join(sorted(DYNAMIC_BROKER_KEYS - DYNAMIC_LOG_KEYS - DYNAMIC_SASL_LOGIN_KEYS))}, the broker defaults of "
    "topic configs (log.retention.ms, compression.type, ...), the broker's own SASL login settings (sasl.kerberos.*, "
    "sasl.login.refresh.*, without effect) and a listener's listener.name.<listener>.ssl.keystore.*/"
    "ssl.truststore.*")


#: how Kafka's ConfigurationControlManager splits a LIST value (COMMA_WITH_WHITESPACE)
_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*")
#: Kafka's ConfigurationControlManager.INVALID_CORDONED_LOG_DIRS_ERROR (its two spaces included)
_CORDONED_VIA_CONTROLLERS = (f"When updating {CORDONED_LOG_DIRS} via controllers,  the new value must be a subset of "
                             "the current configuration value.")


def _cordoned_subset(new: str | None, current: str | None) -> bool:
    """Kafka's ConfigurationControlManager.isCordonedLogDirsInvalid, negated, for a request no broker forwarded
    (a broker checks the value against its own log.dirs, which the controller does not know): a new non-blank
    ``cordoned.log.dirs`` names only entries of the current dynamic value (none: no entries), so that the
    controller listener can uncordon dirs but not cordon others."""
    if new is None or not new.strip():
        return True
    current_entries = _COMMA_WITH_WHITESPACE.split(current.strip()) if current is not None else []
    return set(_COMMA_WITH_WHITESPACE.split(new.strip())) <= set(current_entries)


def _broker_key(key: str) -> ConfigKey | None:
    """The schema of broker config ``key``: a listener's TLS setting's (``listener.name.<l>.ssl.*``), else
    :data:`BROKER_KEYS`' (None: not a broker config klog knows)."""
    ssl_key = listener_ssl_key(key)
    return SECURITY_KEYS[ssl_key[1]] if ssl_key is not None else BROKER_KEYS.get(key)


def _check_dynamic(resource: str, key: str, spec: ConfigKey | None) -> None:
    """Why broker config ``key`` (schema ``spec``) cannot be changed on broker resource ``resource`` ("": the
    cluster default), as a TopicError: a per-broker key or a listener's TLS setting at the cluster level, a
    listener setting named without its listener, a key that is not dynamic."""
    listener = listener_ssl_key(key) is not None
    if resource == "" and (key in PER_BROKER_KEYS or listener):
        raise TopicError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id "
                         f"must be specified: [{key}]")
    if listener:
        return
    if key in STORED_SSL_KEYS:   # Kafka's answer for a listener setting named without its listener
        raise TopicError(ErrorCode.INVALID_REQUEST, f"{key}: Configs cannot be updated dynamically for "
                         "existing listeners, restart broker or create a new listener for update")
    if spec is None or key not in DYNAMIC_BROKER_KEYS:   # not a broker config klog knows
        raise TopicError(ErrorCode.INVALID_CONFIG, f"{key}: unknown broker config; {_STATIC_BROKER_CONFIGS}")


class ConfigControlManager:
    def __init__(self, config: BrokerConfig, node_id: int) -> None:
        self.config = config
        self.node_id = node_id

    def alter_configs(self, resources: Iterable[AlterableResource], image: MetadataImage, now_ms: int, *,
                      incremental: bool, validate_only: bool, forwarded: bool = True
                      ) -> ControllerResult[list[AlterConfigsResponseResourceResponse]]:
        """``resources``: the request's (resource_type, resource_name, configs) items; ``forwarded``: a broker passed
        the request on, False: a client sent it to the controller listener. Results: error_code, error_message,
        resource_type, resource_name per resource."""
        records: list[MetadataRecord] = []
        results: list[AlterConfigsResponseResourceResponse] = []
        for resource in resources:
            rtype, rname = resource.resource_type, resource.resource_name
            code: int = ErrorCode.NONE
            message: str | None = None
            try:
                if rtype == ConfigResourceType.TOPIC:
                    records += self._alter_topic(rname, resource.configs, image, incremental)
                elif rtype == ConfigResourceType.BROKER:
                    records += self._alter_broker(rname, resource.configs, image, incremental, forwarded)
                elif rtype == ConfigResourceType.CLIENT_METRICS:
                    records += self._alter_client_metrics(rname, resource.configs, image, incremental)
                elif rtype == ConfigResourceType.GROUP:
                    records += self._alter_group(rname, resource.configs, image, incremental)
                else:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {rtype}")
            except TopicError as exc:
                code, message = exc.code, exc.message
            results.append({"error_code": code, "error_message": message, "resource_type": rtype,
                            "resource_name": rname})
        if elr_enabled(image):
            records += clear_elr_records(records)
        return ControllerResult(() if validate_only else records, results)

    def _alter_topic(self, name: str, configs: Iterable[AlterableConfig], image: MetadataImage, incremental: bool
                     ) -> list[MetadataRecord]:
        if not name:   # Kafka's ControllerConfigurationValidator
            raise TopicError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        validate_topic_name(name)
        # Kafka's controller checks the new configs before it looks the topic up
        before = dict(image.topic_config(name)) if image.topic(name) is not None else {}
        after = self._incremental(before, configs) if incremental else self._replaced(configs)
        try:
            check_topic_configs(after, self.config.topic_default)
        except TopicConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if image.topic(name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return topic_config_records(name, before, after)

    def _alter_broker(self, name: str, configs: Iterable[AlterableConfig], image: MetadataImage, incremental: bool,
                      forwarded: bool = True) -> list[MetadataRecord]:
        items = list(configs)
        before, after = self.broker_configs_after(name, items, image, incremental)
        if before.get(CORDONED_LOG_DIRS) != after.get(CORDONED_LOG_DIRS) \
                and (image.metadata_version or 0) < MV_CORDONED_LOG_DIRS:
            # Kafka's ConfigurationControlManager.isCordonedLogDirsDisabled: any change of it, a removal too
            raise TopicError(ErrorCode.INVALID_CONFIG, f"The {CORDONED_LOG_DIRS} configuration value cannot be set "
                             f"because it requires metadata.version >= {metadata_version_name(MV_CORDONED_LOG_DIRS)}")
        if not forwarded and not _cordoned_subset(after.get(CORDONED_LOG_DIRS), before.get(CORDONED_LOG_DIRS)):
            raise TopicError(ErrorCode.INVALID_CONFIG, _CORDONED_VIA_CONTROLLERS)
        changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
        if elr_enabled(image):
            # Kafka records every key a broker change names, changed or not (KAFKA-14136), and refuses those
            # records by ELR's min ISR rules; a cluster-level min.insync.replicas set again still clears every ELR
            named = {item.name for item in items}
            if MIN_ISR_KEY in named | changed:
                refusal = elr_min_isr_refusal(name, after.get(MIN_ISR_KEY))
                if refusal is not None:
                    raise TopicError(ErrorCode.INVALID_CONFIG, refusal)
                changed.add(MIN_ISR_KEY)
        return [record("ConfigRecord", resource_type=int(ConfigResourceType.BROKER), resource_name=name, name=key,
                       value=after.get(key)) for key in sorted(changed)]

    def broker_configs_after(self, name: str, configs: Iterable[AlterableConfig], image: MetadataImage,
                             incremental: bool) -> tuple[dict[str, str], dict[str, str]]:
        """(before, after) of broker ``name``'s dynamic configs (or "" for every broker's): the
        :data:`DYNAMIC_BROKER_KEYS`, and a listener's reconfigurable TLS settings
        (``listener.name.<l>.ssl.keystore.location``, ..., one broker's only, as Kafka's per-broker configs); any
        other broker config is static and refused. A TopicError says why a change is refused."""
        if name != "" and not name.isdigit():
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
        items = list(configs)
        static = [item.name for item in items if item.name in BROKER_KEYS and item.name not in DYNAMIC_BROKER_KEYS
                  and item.name not in STORED_SSL_KEYS | DYNAMIC_SSL_KEYS]
        if static:   # Kafka's DynamicBrokerConfig answers a config it cannot change so (INVALID_REQUEST)
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: "
                             f"[{', '.join(static)}] ({_STATIC_BROKER_CONFIGS})")
        unprefixed = [item.name for item in items if item.name in DYNAMIC_SSL_KEYS]
        if unprefixed:   # a keystore/truststore setting is a listener's (listener.name.<l>.ssl.*), as on Kafka
            raise TopicError(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
                             f"per-listener using the listener prefix: [{', '.join(unprefixed)}]")
        before = dict(image.configs.get((ConfigResourceType.BROKER, name), {}))
        # the one table of the schemas of the keys the change names and the resource holds
        keys = {key: spec for key in {*before, *(item.name for item in items)} if (spec := _broker_key(key))}
        for item in items:
            _check_dynamic(name, item.name, keys.get(item.name))
        after = self._incremental(before, items, keys, broker=True) if incremental else self._replaced(items)
        for key, value in after.items():
            spec = keys[key]
            try:
                spec.parse(value)
            except ConfigError as exc:
                # Kafka's DynamicBrokerConfig answers a bad value so (INVALID_REQUEST, KAFKA-13609)
                raise TopicError(ErrorCode.INVALID_REQUEST, exc.kafka_message) from None
        return before, after

    def _alter_client_metrics(self, name: str, configs: Iterable[AlterableConfig], image: MetadataImage,
                              incremental: bool) -> list[MetadataRecord]:
        """A client metrics subscription (KIP-714) as ConfigRecords on its CLIENT_METRICS resource; Kafka's
        ClientMetricsConfigs validates the whole subscription after the change."""
        before = dict(image.configs.get((ConfigResourceType.CLIENT_METRICS, name), {}))
        items = list(configs)
        for item in items:
            if item.name not in client_metrics.KEYS:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {item.name}")
            op = item.config_operation if _has_operation(item) else OP_SET
            if op in (OP_APPEND, OP_SUBTRACT):
                raise _not_a_list(op, item.name)
        after = self._incremental(before, items, CLIENT_METRICS_KEYS) if incremental else self._replaced(items)
        try:
            client_metrics.validate(name, after)
        except client_metrics.SubscriptionError as exc:
            code = ErrorCode.INVALID_REQUEST if exc.invalid_request else ErrorCode.INVALID_CONFIG
            raise TopicError(code, str(exc)) from None
        return [record("ConfigRecord", resource_type=int(ConfigResourceType.CLIENT_METRICS), resource_name=name,
                       name=key, value=after.get(key))
                for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]

    def _alter_group(self, name: str, configs: Iterable[AlterableConfig], image: MetadataImage,
                     incremental: bool) -> list[MetadataRecord]:
        """A group's dynamic configs as ConfigRecords on its GROUP resource, validated as Kafka's GroupConfig
        validates them: known names, their types and bounds, the broker's group.*.min/max bounds."""
        if not name:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        before = dict(image.configs.get((ConfigResourceType.GROUP, name), {}))
        items = list(configs)
        for item in items:
            if item.name not in group_config.GROUP_KEYS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {item.name}")
            op = item.config_operation if _has_operation(item) else OP_SET
            if op in (OP_APPEND, OP_SUBTRACT):
                raise _not_a_list(op, item.name)
        after = self._incremental(before, items, GROUP_CONFIG_KEYS) if incremental else self._replaced(items)
        try:
            group_config.validate(after, self.config)
        except group_config.GroupConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return [record("ConfigRecord", resource_type=int(ConfigResourceType.GROUP), resource_name=name,
                       name=key, value=after.get(key))
                for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]

    @staticmethod
    def _replaced(configs: Iterable[AlterableConfig]) -> dict[str, str]:
        """AlterConfigs: the request's configs replace all of the topic's overrides."""
        overrides = {}
        for item in configs:
            if item.value is None:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {item.name}")
            overrides[item.name] = item.value
        return overrides

    def _incremental(self, before: Mapping[str, str], configs: Iterable[AlterableConfig],
                     keys: Mapping[str, ConfigKey] = TOPIC_KEYS, *, broker: bool = False) -> dict[str, str]:
        """IncrementalAlterConfigs: each SET/DELETE/APPEND/SUBTRACT applied in order. ``broker``: ``keys`` are
        broker configs, whose APPEND/SUBTRACT starts from the config's default where the resource has no value
        (Kafka's ConfigAdminManager: its ConfigDef default), and whose APPEND/SUBTRACT on a config that is no list
        is refused in the words of Kafka's brokers."""
        overrides = dict(before)
        for item in configs:
            spec = keys.get(item.name)
            op = item.config_operation if _has_operation(item) else OP_SET
            if op == OP_DELETE:   # a key no config has: nothing to delete, no error, as on Kafka
                overrides.pop(item.name, None)
            elif spec is None and op not in (OP_APPEND, OP_SUBTRACT):
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {item.name}")
            elif op == OP_SET:
                if item.value is None:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value for SET of {item.name}")
                overrides[item.name] = item.value
            elif op in (OP_APPEND, OP_SUBTRACT):
                if spec is None or spec.type != "list":
                    if broker:
                        verb = "append" if op == OP_APPEND else "subtract"
                        raise TopicError(ErrorCode.INVALID_CONFIG,
                                         f"Config value {verb} is not allowed for config key: {item.name}")
                    raise _not_a_list(op, item.name)
                default = spec.default if broker else self.config.topic_default(item.name)
                current = overrides.get(item.name, spec.format(default))
                values = [v.strip() for v in (current or "").split(",") if v.strip()]
                change = [v.strip() for v in _java_split(item.value or "")]
                if op == OP_APPEND:   # an empty entry too, as Kafka (which its list validators refuse)
                    values += [v for v in dict.fromkeys(change) if v not in values]
                else:
                    values = [v for v in values if v not in change]
                overrides[item.name] = ",".join(values)
            else:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
        return overrides

"""Group configs (KIP-848, KIP-932): Kafka 4.3's ``GroupConfig``, the dynamic configs of one group kept as
ConfigRecords on its GROUP (32) config resource, altered through IncrementalAlterConfigs/AlterConfigs (decided by
the controller, :mod:`klog.controller.configs`) and described with DescribeConfigs.

Each key has a broker synonym (``share.record.lock.duration.ms`` <- ``group.share.record.lock.duration.ms``)
whose value applies when the group sets none, and a value is validated as Kafka validates it: its type and
ConfigDef bound, then the broker's ``group.*.min/max.*`` bounds. The share coordinator applies
``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ``share.delivery.count.limit`` and
``share.partition.max.record.locks`` when it loads a share-partition; ShareFetch and ShareAcknowledge read
``share.isolation.level`` and ``share.renew.acknowledge.enable`` on each request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"


class GroupConfigError(ValueError):
    """An invalid group config (INVALID_CONFIG with this message)."""


@dataclass(frozen=True)
class GroupKey:
    name: str
    type: str                   # "int", "string" or "boolean"
    #: the broker config whose value applies when the group sets none (None: the key's own default)
    synonym: str | None
    default: str
    #: the smallest value Kafka's ConfigDef accepts (ints)
    at_least: int | None = None
    #: the broker configs bounding the value (Kafka's GroupConfig.validate)
    bounds: tuple[str, str] | None = None
    check: Callable[[str], None] | None = None


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
BY_DURATION = "by_duration:"


def duration_ms(value: str) -> int | None:
    """The milliseconds of ``share.auto.offset.reset=by_duration:<PnDTnHnMn.nS>``, else None."""
    if not value.startswith(BY_DURATION):
        return None
    match = _DURATION.match(value[len(BY_DURATION):])
    if match is None:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _auto_offset_reset(value: str) -> None:
    if value in ("earliest", "latest"):
        return
    if value.startswith("by_duration:") and _DURATION.match(value[len("by_duration:"):]) and value != "by_duration:P":
        return
    raise GroupConfigError(f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: Invalid value `{value}` for "
                           f"configuration {AUTO_OFFSET_RESET}. The value must be either 'earliest', 'latest' or of "
                           f"the format 'by_duration:<PnDTnHnMn.nS>'.")


def _isolation_level(value: str) -> None:
    if value not in ("read_committed", "read_uncommitted"):
        raise GroupConfigError(f"Invalid value {value} for configuration {ISOLATION_LEVEL}: String must be one of: "
                               f"read_committed, read_uncommitted")


def _g(name: str, type_: str, synonym: str | None, default: str, **kw: Any) -> GroupKey:
    return GroupKey(name, type_, synonym, default, **kw)


#: Kafka 4.3's group configs, as ``kafka-configs --describe --entity-type groups --all`` lists them
GROUP_KEYS: dict[str, GroupKey] = {k.name: k for k in [
    _g("consumer.assignment.interval.ms", "int", "group.consumer.assignment.interval.ms", "1000", at_least=0,
       bounds=("group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms")),
    _g("consumer.heartbeat.interval.ms", "int", "group.consumer.heartbeat.interval.ms", "5000", at_least=1,
       bounds=("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
    _g("consumer.session.timeout.ms", "int", "group.consumer.session.timeout.ms", "45000", at_least=1,
       bounds=("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
    _g("share.assignment.interval.ms", "int", "group.share.assignment.interval.ms", "1000", at_least=0,
       bounds=("group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms")),
    _g(AUTO_OFFSET_RESET, "string", None, "latest", check=_auto_offset_reset),
    _g(DELIVERY_COUNT_LIMIT, "int", "group.share.delivery.count.limit", "5", at_least=2,
       bounds=("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit")),
    _g("share.heartbeat.interval.ms", "int", "group.share.heartbeat.interval.ms", "5000", at_least=1,
       bounds=("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")),
    _g(ISOLATION_LEVEL, "string", None, "read_uncommitted", check=_isolation_level),
    _g(PARTITION_MAX_RECORD_LOCKS, "int", "group.share.partition.max.record.locks", "2000", at_least=100,
       bounds=("group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks")),
    _g(RECORD_LOCK_DURATION_MS, "int", "group.share.record.lock.duration.ms", "30000", at_least=1000,
       bounds=("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")),
    _g(RENEW_ACKNOWLEDGE_ENABLE, "boolean", None, "true"),
    _g("share.session.timeout.ms", "int", "group.share.session.timeout.ms", "45000", at_least=1,
       bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")),
    _g("streams.assignment.interval.ms", "int", "group.streams.assignment.interval.ms", "1000", at_least=0,
       bounds=("group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms")),
    _g("streams.heartbeat.interval.ms", "int", "group.streams.heartbeat.interval.ms", "5000", at_least=1,
       bounds=("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms")),
    _g("streams.initial.rebalance.delay.ms", "int", "group.streams.initial.rebalance.delay.ms", "3000",
       at_least=0),
    _g("streams.num.standby.replicas", "int", "group.streams.num.standby.replicas", "0", at_least=0,
       bounds=("", "group.streams.max.standby.replicas")),
    _g("streams.session.timeout.ms", "int", "group.streams.session.timeout.ms", "45000", at_least=1,
       bounds=("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms")),
]}


def broker_value(key: GroupKey, config: Any) -> tuple[str, bool]:
    """(the value the group gets without a group config, whether server.properties set it)."""
    if key.synonym is not None and _known(config, key.synonym):
        spec_value = config[key.synonym]
        return str(spec_value), bool(config.is_set(key.synonym))
    return key.default, False


def _known(config: Any, name: str) -> bool:
    try:
        config[name]
    except KeyError:
        return False
    return True


def validate(configs: Mapping[str, str], config: Any) -> None:
    """Kafka's GroupConfig.validateNames + validate: every name known, every value of its type and within its
    ConfigDef bound and the broker's bounds; raises GroupConfigError."""
    for name in configs:
        if name not in GROUP_KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    for name, value in configs.items():
        key = GROUP_KEYS[name]
        if key.check is not None:
            key.check(value)
        if key.type == "boolean" and value.lower() not in ("true", "false"):
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Expected value to be either "
                                   f"true or false")
        if key.type != "int":
            continue
        try:
            number = int(value.strip())
        except ValueError:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") \
                from None
        if key.at_least is not None and number < key.at_least:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}: Value must be at least "
                                   f"{key.at_least}")
        if key.bounds is not None:
            low, high = key.bounds
            if _known(config, low) and number < int(config[low]):
                raise GroupConfigError(f"{name} must be greater than or equal to {low}")
            if _known(config, high) and number > int(config[high]):
                raise GroupConfigError(f"{name} must be less than or equal to {high}")


def effective(group_configs: Mapping[str, str], name: str, config: Any) -> str:
    """The value of group config ``name`` for a group with ``group_configs`` (its own, else the broker's)."""
    value = group_configs.get(name)
    return value if value is not None else broker_value(GROUP_KEYS[name], config)[0]

"""The schema of a config key (name, type, default, validator, doc), the value types and validators shared by
the broker, topic and security configs (klog.metadata.config, klog.metadata.config_security)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
#: listen() backlog: a burst of this many simultaneous connects is queued by the kernel, not dropped
LISTEN_BACKLOG_DEFAULT = 1024
#: queued.max.request.bytes: 2.5 maximal (100 MiB) requests, a small share of a server's memory
QUEUED_MAX_REQUEST_BYTES_DEFAULT = 256 * 1024 * 1024


#: ``replica.selector.class`` naming Kafka's rack-aware selector (the only selector klog has,
#: klog.broker.replication.selector)
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = (RACK_AWARE_REPLICA_SELECTOR,)


class ConfigError(ValueError):
    """A config key is unknown or its value is invalid. The message names the key."""

    def __init__(self, key: str, message: str, value: str | None = None) -> None:
        super().__init__(f"config {key!r}: {message}" if value is None else
                         f"config {key!r}: invalid value {value!r}: {message}")
        self.key = key
        #: what is wrong with the value, without the key
        self.reason = message
        #: the refused value as Kafka's ConfigException shows it (None: not known)
        self.value = value

    @property
    def kafka_message(self) -> str:
        """Kafka's ConfigException message: ``Invalid value V for configuration K: reason``."""
        return f"Invalid value {self.value} for configuration {self.key}: {self.reason}"


class Problem:
    """What a validator finds wrong with a value, with the part of it Kafka's message shows (the item of a list
    a ValidList refuses); a validator may return a plain reason instead, shown with the whole value."""

    def __init__(self, value: str, reason: str) -> None:
        self.value = value
        self.reason = reason


# ---- value types ---------------------------------------------------------------------------------------

#: Java's Integer/Long.parseLong syntax (no "_" separators, no other digits than ASCII ones)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_TYPE_NAMES = {32: "INT", 64: "LONG", 16: "SHORT"}


def _parse_int(raw: str, lo: int, hi: int) -> int:
    """An integer in [lo, hi] (an int16/32/64 range), refused in the words of Kafka's ConfigDef.parseType."""
    text = raw.strip()
    if not _JAVA_INTEGER.fullmatch(text) or not lo <= int(text) <= hi:
        raise ValueError(f"Not a number of type {_JAVA_TYPE_NAMES.get(hi.bit_length() + 1, 'LONG')}")
    return int(text)


def _parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ValueError("Expected value to be either true or false")


def _parse_double(raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise ValueError("Not a number of type DOUBLE") from None


def _parse_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": lambda raw: _parse_int(raw, -(2**31), INT_MAX),
    "long": lambda raw: _parse_int(raw, -(2**63), LONG_MAX),
    "short": lambda raw: _parse_int(raw, -(2**15), 2**15 - 1),
    "boolean": _parse_bool,
    "double": _parse_double,
    "string": lambda raw: raw.strip(),
    # a Java class name (Kafka's ConfigDef.Type.CLASS): DescribeConfigs types it CLASS
    "class": lambda raw: raw.strip() or None,
    "password": lambda raw: raw,
    "list": _parse_list,
}

# Kafka's DescribeConfigs config_type codes (v3+).
CONFIG_TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                     "class": 8, "password": 9}


#: a config value's check: None when valid, else why not (a Problem where Kafka shows part of the value)
Validator = Callable[[Any], "str | Problem | None"]


def at_least(lo: float) -> Callable[[Any], str | None]:
    """Kafka's ConfigDef.Range.atLeast, with its words."""
    return lambda v: None if v >= lo else f"Value must be at least {lo}"


def in_range(lo: float, hi: float) -> Callable[[Any], str | None]:
    """Kafka's ConfigDef.Range.between, with its words (klog refuses NaN, which Kafka's comparisons let through)."""
    def check(v: Any) -> str | None:
        if not v >= lo:
            return f"Value must be at least {lo}"
        return None if v <= hi else f"Value must be no more than {hi}"
    return check


def one_of(*choices: str, case_insensitive: bool = False) -> Validator:
    """Kafka's ConfigDef.ValidString (ValidList for a list: the item refused), with its words."""
    def check(v: Any) -> str | Problem | None:
        items = v if isinstance(v, list) else [v]
        for item in items:
            probe = item.lower() if case_insensitive else item
            allowed = [c.lower() for c in choices] if case_insensitive else list(choices)
            if probe not in allowed:
                return Problem(item, f"String must be one of: {', '.join(choices)}")
        return None
    return check


def parse_listener(value: str) -> tuple[str, int]:
    """``klog.metrics.listener``: ``[http://]HOST:PORT`` (an empty host: every interface)."""
    text = value.strip()
    if text.lower().startswith("http://"):
        text = text[len("http://"):]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected [http://]HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _metrics_listener(value: str) -> str | None:
    if not value:
        return None
    try:
        parse_listener(value)
    except ValueError as exc:
        return str(exc)
    return None


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                      # one of PARSERS
    default: Any                   # typed default (None = no value)
    doc: str
    validator: Validator | None = None
    #: accepted for compatibility with Kafka's server.properties; klog ignores it.
    no_effect: bool = False
    sensitive: bool = False
    #: internal in Kafka's ConfigDef, or not a KafkaConfig key (an authorizer's, a DynamicConfig's): accepted, but
    #: DescribeConfigs lists it only once set, as Kafka lists only its non-internal keys and the ones supplied
    internal: bool = False

    def parse(self, raw: Any) -> Any:
        """Turn a raw value (a string from a file, or an already typed value) into this key's type."""
        if raw is None:
            return None
        if isinstance(raw, str):
            try:
                value = PARSERS[self.type](raw)
            except ValueError as exc:
                raise ConfigError(self.name, str(exc), raw) from None
        else:
            value = raw
            if self.type in ("int", "long", "short") and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(self.name, f"expected an integer, got {raw!r}")
            if self.type == "boolean" and not isinstance(value, bool):
                raise ConfigError(self.name, f"expected true or false, got {raw!r}")
            if self.type == "list" and isinstance(value, (list, tuple)):
                value = [str(v) for v in value]
        if self.validator is not None and value is not None:
            problem = self.validator(value)
            if isinstance(problem, Problem):
                raise ConfigError(self.name, problem.reason, problem.value)
            if problem:
                raise ConfigError(self.name, problem, java_string(value))
        return value

    def format(self, value: Any) -> str | None:
        """Kafka's string form of a typed value (DescribeConfigs)."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        if isinstance(value, float):
            return java_double(value)
        return str(value)


def java_string(value: Any) -> str:
    """Java's ``toString`` of a parsed config value (what Kafka's ConfigException shows): a list as ``[a, b]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return f"[{', '.join(map(str, value))}]"
    return str(value)


def java_double(value: float) -> str:
    """Java's ``Double.toString`` (Kafka's string form of a DOUBLE config): plain decimal with at least one
    fractional digit for magnitudes in [1e-3, 1e7), else ``d.dddE<exp>`` (``1.7976931348623157E308``)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)   # Python's shortest repr is plain decimal ("0.9", "100.0") in this range
    import decimal

    sign, digits, exponent = decimal.Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if value < 0 else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _k(name: str, type_: str, default: Any, doc: str, validator: Any = None, **kw: Any) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator, **kw)


#: the doc of a key accepted from Kafka's server.properties that changes nothing in klog
_KAFKA_ONLY = "accepted for compatibility with Kafka's server.properties; no effect in klog"

"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource, as Kafka's ``ClientMetricsConfigs``.

A subscription is a named config resource (ConfigResource type 16) with three keys:

- ``metrics``: metric name prefixes the matching clients push (``*`` or an empty prefix: all of them);
- ``interval.ms``: how often they push (100 to 3,600,000 ms, default 300,000);
- ``match``: ``key=regex`` items, every one of which a client must match (none: every client), on
  ``client_instance_id``, ``client_id``, ``client_software_name``, ``client_software_version``,
  ``client_source_address`` and ``client_source_port``.

Pure: the controller validates an IncrementalAlterConfigs change with :func:`validate`; brokers turn the image's
configs into :class:`Subscription`\\ s with :func:`subscriptions`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ALL_METRICS", "INTERVAL_MS_DEFAULT", "KEYS", "MATCH_KEYS", "Subscription", "SubscriptionError",
           "subscriptions", "validate"]

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
#: Kafka's ClientMetricsConfigs defaults and bounds
INTERVAL_MS_DEFAULT = 300_000
INTERVAL_MS_MIN, INTERVAL_MS_MAX = 100, 3_600_000
#: the ``metrics`` value that subscribes every metric
ALL_METRICS = "*"
#: what a ``match`` item may test (Kafka's ClientMetricsConfigs.ALLOWED_MATCH_PARAMS)
MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_source_port")


#: each key's documentation, as Kafka's DescribeConfigs gives it
DOCS = {METRICS: "Telemetry metric name prefix list", INTERVAL_MS: "Metrics push interval in milliseconds",
        MATCH: "Client match criteria"}
#: each key's default, as DescribeConfigs shows it
DEFAULTS = {METRICS: "", INTERVAL_MS: str(INTERVAL_MS_DEFAULT), MATCH: ""}


class SubscriptionError(ValueError):
    """An invalid subscription config: Kafka answers INVALID_REQUEST for an empty name, an unknown key or an
    interval out of range (``invalid_request``), INVALID_CONFIG for a value that does not parse."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def _items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def parse_match(items: list[str]) -> dict[str, re.Pattern[str]]:
    """``key=regex`` items as compiled patterns (Kafka's ClientMetricsConfigs.parseMatchingPatterns)."""
    patterns: dict[str, re.Pattern[str]] = {}
    for item in items:
        key, sep, pattern = item.partition("=")
        key, pattern = key.strip(), pattern.strip()
        if not sep or not key or not pattern:
            raise SubscriptionError(f"Illegal client matching pattern: {item}")
        if key not in MATCH_KEYS:
            raise SubscriptionError(f"Illegal client matching pattern: {item}")
        try:
            patterns[key] = re.compile(pattern)
        except re.error:
            raise SubscriptionError(f"Illegal client matching pattern: {item}") from None
    return patterns


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Raise :class:`SubscriptionError` unless ``configs`` is a valid subscription ``name``."""
    if not name:
        raise SubscriptionError("Subscription name can't be empty", invalid_request=True)
    for key in configs:
        if key not in KEYS:
            raise SubscriptionError(f"Unknown client metrics configuration: {key}", invalid_request=True)
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS])
        except ValueError:
            raise SubscriptionError(f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                                    "Not a number of type INT") from None
        if not INTERVAL_MS_MIN <= interval <= INTERVAL_MS_MAX:
            raise SubscriptionError(f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                                    f"{INTERVAL_MS_MIN} and {INTERVAL_MS_MAX} (1 hour)", invalid_request=True)
    parse_match(_items(configs.get(MATCH)))


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        """Every ``match`` pattern matches the whole of the client's value (Java's ``Matcher.matches``)."""
        return all(pattern.fullmatch(client.get(key, "")) is not None for key, pattern in self.match)


def subscriptions(configs: Mapping[str, Mapping[str, str]]) -> list[Subscription]:
    """The subscriptions of the image's CLIENT_METRICS resources (name -> configs), sorted by name; a resource
    the controller would not have accepted is skipped."""
    out = []
    for name, values in sorted(configs.items()):
        try:
            validate(name, values)
        except SubscriptionError:
            continue
        out.append(Subscription(name, tuple(_items(values.get(METRICS))),
                                int(values.get(INTERVAL_MS, INTERVAL_MS_DEFAULT)),
                                tuple(parse_match(_items(values.get(MATCH))).items())))
    return out

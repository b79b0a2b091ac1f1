"""Kafka's connection quotas (ConnectionQuotas, KIP-402/KIP-612) beside max.connections: how many connections one
address may hold (``max.connections.per.ip`` and its ``max.connections.per.ip.overrides``), and how fast
connections may be created: per listener (``listener.name.<l>.max.connection.creation.rate``), per broker
(``max.connection.creation.rate``, every listener but the inter-broker one) and per client address (the
``connection_creation_rate`` client quota of an ``ip`` entity, else of the default ip entity).

As on Kafka: a connection over the listener or broker rate is delayed (Kafka's acceptor stops accepting until the
rate allows; here the connection is accepted and not read until then, each one after the previous one's delay);
a connection over its address's rate is closed after the time its rate needs to fall back (a delayed close);
one over its address's count is closed at once. The four broker configs are dynamic, as Kafka's (this broker's
resource, else the cluster default, else server.properties). Rates are Kafka's sampled Rate over
``quota.window.num`` samples of ``quota.window.size.seconds`` (klog.security.quotas). Pure but for the clock the
caller passes.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

from klog.metadata.config import BROKER_KEYS, BrokerConfig, ConfigError
from klog.metadata.image import ConfigResourceType
from klog.security.quotas import IP, Rate, throttle_time_ms

__all__ = ["ConnectionQuotas", "parse_per_ip_overrides"]

log = logging.getLogger("klog.broker.server")

CONNECTION_RATE_KEY = "connection_creation_rate"
#: max.connection.creation.rate's default (Kafka's Int.MaxValue): no limit
UNLIMITED = 2 ** 31 - 1
#: the ClientQuotaRecords of the metadata image: entity -> quota key -> value
QuotaImage = Mapping[tuple[tuple[str, "str | None"], ...], Mapping[str, float]]


def _address(host: str) -> str:
    """An override's host as the address connections come from (a host name resolved, as Kafka's InetAddress)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        try:
            return socket.gethostbyname(host)
        except OSError:
            raise ConfigError("max.connections.per.ip.overrides", f"{host!r} is not an IP address or a host "
                              "name that resolves") from None


def parse_per_ip_overrides(value: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,...``): count by address."""
    out: dict[str, int] = {}
    for entry in (value or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError("max.connections.per.ip.overrides", f"{entry!r}: expected host:count")
        out[_address(host.strip().strip("[]"))] = int(count)
    return out


class ConnectionQuotas:
    """The rates and counts a new connection is checked against (one per broker, used on its event loop)."""

    def __init__(self, config: BrokerConfig, quotas_of: Callable[[], QuotaImage] | None = None) -> None:
        self.config = config
        self.num_samples: int = config["quota.window.num"]
        self.window_ms: int = config["quota.window.size.seconds"] * 1000
        inter_broker = config.inter_broker_listener
        #: listener -> (its own max.connection.creation.rate, whether the broker's applies too: not to the
        #: inter-broker listener)
        self.listener_rates: dict[str, tuple[int, bool]] = {}
        for listener in config.listeners:
            # the listener's own only when set for it
            own = config.listener_settings.get(listener.name.upper(), {}).get("max.connection.creation.rate")
            self.listener_rates[listener.name] = (own if own is not None else UNLIMITED,
                                                  inter_broker is None or listener.name != inter_broker.name)
        self.quotas_of = quotas_of
        #: the metadata image's configs (ConfigRecords), for the dynamic broker configs (None: static only)
        self.configs_of: Callable[[], Mapping[Any, Mapping[str, str]]] | None = None
        self._resources = ((ConfigResourceType.BROKER, str(config.node_id)), (ConfigResourceType.BROKER, ""))
        static = config["max.connections.per.ip.overrides"] or ""
        #: (the overrides' text, count by address); a static value that does not parse stops the start (ConfigError)
        self._overrides: tuple[str, dict[str, int]] = (static, parse_per_ip_overrides(static))
        self._rates: dict[str, Rate] = {}
        self._ip_rates: dict[str, Rate] = {}
        #: when each listener's (Kafka's) acceptor would accept again: delays queue behind each other
        self._free_at: dict[str, float] = {}

    def setting(self, key: str) -> Any:
        """A dynamic connection config (Kafka's are cluster-wide dynamic): this broker's resource's value, else the
        cluster default's, else server.properties'."""
        if self.configs_of is not None:
            configs = self.configs_of()
            for resource in self._resources:
                value = configs.get(resource, {}).get(key)
                if value is not None:
                    try:
                        return BROKER_KEYS[key].parse(value)
                    except ConfigError:
                        break   # validated by the controller: not reached
        return self.config[key]

    @property
    def per_ip_overrides(self) -> dict[str, int]:
        value = self.setting("max.connections.per.ip.overrides") or ""
        if value != self._overrides[0]:
            try:
                self._overrides = (value, parse_per_ip_overrides(value))
            except ConfigError:
                if self.configs_of is None:
                    raise
                log.error("max.connections.per.ip.overrides=%s: a host does not resolve; keeping %s", value,
                          self._overrides[0] or "none")
        return self._overrides[1]

    def max_per_ip(self, host: str) -> int:
        overrides = self.per_ip_overrides
        return overrides[host] if host in overrides else int(self.setting("max.connections.per.ip"))

    def _rate(self, table: dict[str, Rate], key: str, now_ms: float) -> Rate:
        rate = table.get(key)
        if rate is None:
            rate = table[key] = Rate(self.num_samples, self.window_ms, now_ms)
        return rate

    def _throttle(self, rate: Rate, bound: float, now_ms: float) -> int:
        """Kafka's sensor.record(1) with the quota checked: the value counts, then the throttle time if over."""
        rate.record(1.0, now_ms)
        window = rate.window_size_ms(now_ms)
        return min(throttle_time_ms(rate.measure(now_ms), bound, window), self.num_samples * self.window_ms)

    def accept_delay_ms(self, listener: str, now_ms: float) -> float:
        """How long a new connection of ``listener`` waits before it is served (0: at once), by the listener's and
        the broker's max.connection.creation.rate."""
        own, broker_wide = self.listener_rates.get(listener, (UNLIMITED, False))
        limited = [(own, listener)] if own < UNLIMITED else []
        if broker_wide:
            rate = int(self.setting("max.connection.creation.rate"))
            if rate < UNLIMITED:
                limited.append((rate, ""))
        if not limited:
            return 0.0
        at = max(now_ms, self._free_at.get(listener, 0.0))
        wait = max(self._throttle(self._rate(self._rates, name, at), bound, at) for bound, name in limited)
        self._free_at[listener] = at + wait
        return at + wait - now_ms

    def ip_rate_quota(self, host: str) -> float | None:
        """``connection_creation_rate`` of ``host``'s ip entity, else of the default ip entity (None: no quota)."""
        if self.quotas_of is None:
            return None
        quotas = self.quotas_of()
        for entity in (((IP, host),), ((IP, None),)):
            value = quotas.get(entity, {}).get(CONNECTION_RATE_KEY)
            if value is not None:
                return value
        return None

    def ip_throttle_ms(self, host: str, now_ms: float) -> int:
        """A new connection from ``host``: how long until it is closed for exceeding its address's
        connection_creation_rate (0: within it)."""
        bound = self.ip_rate_quota(host)
        if bound is None:
            self._ip_rates.pop(host, None)
            return 0
        return self._throttle(self._rate(self._ip_rates, host, now_ms), bound, now_ms)

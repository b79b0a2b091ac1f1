"""klog.broker.network.connection_quotas without a broker: the per-address counts of
max.connections.per.ip.overrides, the delays of max.connection.creation.rate queued as Kafka's blocked acceptor,
and the ip connection_creation_rate quota (its own entity before the default one)."""

from __future__ import annotations

import pytest

from klog.broker.network.connection_quotas import ConnectionQuotas, parse_per_ip_overrides
from klog.metadata.config import BrokerConfig, ConfigError

LISTENERS = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
             "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "inter.broker.listener.name": "PLAINTEXT"}


def test_per_ip_overrides_take_addresses_and_resolvable_names_and_refuse_the_rest():
    assert parse_per_ip_overrides("127.0.0.2:2, localhost:7,") == {"127.0.0.2": 2, "127.0.0.1": 7}
    for bad in ("127.0.0.2", "127.0.0.2:x", "no-such-host.invalid:3"):
        with pytest.raises(ConfigError):
            parse_per_ip_overrides(bad)
    quotas = ConnectionQuotas(BrokerConfig({**LISTENERS, "max.connections.per.ip": 50,
                                            "max.connections.per.ip.overrides": "127.0.0.2:2"}))
    assert quotas.max_per_ip("127.0.0.2") == 2 and quotas.max_per_ip("127.0.0.9") == 50


def test_connections_over_a_listener_rate_wait_one_after_another_and_the_inter_broker_listener_is_exempt():
    quotas = ConnectionQuotas(BrokerConfig({**LISTENERS, "max.connection.creation.rate": 2,
                                            "quota.window.num": 2}))
    delays = [quotas.accept_delay_ms("EXTERNAL", 1000.0) for _ in range(6)]
    assert delays[:2] == [0.0, 0.0]
    assert delays == sorted(delays) and delays[-1] > delays[2] > 0, delays   # queued behind each other
    assert [quotas.accept_delay_ms("PLAINTEXT", 1000.0) for _ in range(6)] == [0.0] * 6


def test_the_ip_quota_of_an_address_comes_before_the_default_ip_quota():
    image = {(("ip", "127.0.0.3"),): {"connection_creation_rate": 1.0},
             (("ip", None),): {"connection_creation_rate": 5.0}}
    quotas = ConnectionQuotas(BrokerConfig({**LISTENERS, "quota.window.num": 2}), lambda: image)
    assert quotas.ip_rate_quota("127.0.0.3") == 1.0 and quotas.ip_rate_quota("127.0.0.4") == 5.0
    assert quotas.ip_throttle_ms("127.0.0.3", 0.0) == 0
    assert quotas.ip_throttle_ms("127.0.0.3", 1.0) > 0   # the second within the window: over 1/s
    assert [quotas.ip_throttle_ms("127.0.0.4", 1.0) for _ in range(5)] == [0] * 5
    image.clear()
    assert quotas.ip_throttle_ms("127.0.0.3", 2.0) == 0   # the quota removed

"""The broker's own SASL login settings (Kerberos' ``sasl.kerberos.*``, ``sasl.login.refresh.*``) are per-broker
dynamic configs in Apache Kafka 4.3 (its DynamicBrokerConfig's listener configs): AlterConfigs and
IncrementalAlterConfigs on a broker id store them, DescribeConfigs lists them as DYNAMIC_BROKER_CONFIG (Kafka's
broker shows the new value once it has read the change from its metadata log, so the test waits for it), and the
cluster default "" refuses them (a broker id must be named). klog takes them in server.properties without effect
(it makes no Kerberos or OAUTHBEARER login of its own) and stores them the same way when set at runtime.
librdkafka's own admin test (0081_admin, do_test_AlterConfigs) sets ``sasl.kerberos.min.time.before.relogin`` on
a broker and expects success; klog refused it as a static config before."""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
import time  # noqa: E402

from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from klog.client import admin as klog_admin  # noqa: E402

NODE_ID = "1"
#: how long Kafka's broker may take to show a change it reads from its metadata log
DESCRIBE_WAIT_S = 30


#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"node.id": NODE_ID}


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _described(admin: AdminClient, name: str, value: str | None) -> ConfigEntry:
    """The broker's entry of ``name`` once it shows ``value`` (the last entry seen when it never does)."""
    resource = ConfigResource(ConfigResource.Type.BROKER, NODE_ID)
    deadline = time.monotonic() + DESCRIBE_WAIT_S
    while True:
        entry = admin.describe_configs([resource])[resource].result(30)[name]
        if entry.value == value or time.monotonic() > deadline:
            return entry
        time.sleep(0.2)


def test_alter_configs_stores_a_kerberos_login_setting_on_a_broker_as_kafka(admin: AdminClient) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, NODE_ID,
                              set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    admin.alter_configs([resource])[resource].result(30)
    entry = _described(admin, "sasl.kerberos.min.time.before.relogin", "58000")
    assert (entry.value, entry.source, entry.is_read_only) == \
        ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)


def test_incremental_alter_configs_sets_and_deletes_a_login_refresh_setting_on_a_broker(admin: AdminClient) -> None:
    name = "sasl.login.refresh.buffer.seconds"

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry(name, value, incremental_operation=op)
        resource = ConfigResource(ConfigResource.Type.BROKER, NODE_ID, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(30)

    alter(AlterConfigOpType.SET, "200")
    entry = _described(admin, name, "200")
    assert (entry.value, entry.source) == ("200", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter(AlterConfigOpType.DELETE, None)
    entry = _described(admin, name, "300")
    assert (entry.value, entry.source) == ("300", ConfigSource.DEFAULT_CONFIG.value)


def test_the_cluster_default_refuses_a_per_broker_login_setting(bootstrap: str) -> None:
    # librdkafka refuses an empty broker name itself: klog's client sends it
    with klog_admin.AdminClient(bootstrap) as admin, pytest.raises(Exception) as refused:
        admin.alter_configs({klog_admin.ConfigResource("broker", ""): {"sasl.kerberos.min.time.before.relogin": "58000"}})
    assert "INVALID_REQUEST" in str(refused.value) and "broker id must be specified" in str(refused.value)

"""Client quotas on klog and on Apache Kafka 4.x from the same properties: Kafka's own ``kafka-configs --alter
--add-config producer_byte_rate=...,consumer_byte_rate=... --entity-type users|clients [--entity-default]`` sets
them (AlterClientQuotas, forwarded to the controller), ``--describe`` reads them back (DescribeClientQuotas), bad
keys and values are refused with Kafka's messages, and ``--delete-config`` removes them. One broker of each kind
for the module."""

from __future__ import annotations

import uuid

import pytest

from klog.testing import kafka_tools as kt
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.java


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "klog":
        with BrokerProcess(root / "data", {"listeners": "PLAINTEXT://127.0.0.1:0"}) as node:
            yield node.bootstrap_servers
        return
    try:
        find_kafka_libs()
    except Exception as exc:  # the jars are fetched by tools/install-peers.sh
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    with apache_kafka(root, free_port(), heap="512m") as bootstrap:
        yield str(bootstrap)


def _configs(bootstrap, *args, ok=True):
    result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)
    if ok:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


def test_kafka_configs_sets_describes_and_deletes_client_quotas(server):
    user, client = f"u-{uuid.uuid4().hex[:6]}", f"c-{uuid.uuid4().hex[:6]}"
    _configs(server, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
             "--entity-type", "users", "--entity-name", user)
    _configs(server, "--alter", "--add-config", "request_percentage=50", "--entity-type", "users", "--entity-name",
             user, "--entity-type", "clients", "--entity-name", client)
    _configs(server, "--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "clients",
             "--entity-default")

    out = _configs(server, "--describe", "--entity-type", "users", "--entity-name", user).stdout
    assert f"Quota configs for user-principal '{user}' are" in out, out
    assert "consumer_byte_rate=2097152.0" in out and "producer_byte_rate=1048576.0" in out, out
    out = _configs(server, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type",
                   "clients", "--entity-name", client).stdout
    assert f"user-principal '{user}', client-id '{client}'" in out and "request_percentage=50.0" in out, out
    out = _configs(server, "--describe", "--entity-type", "clients", "--entity-default").stdout
    assert "the default client-id are producer_byte_rate=4096.0" in out, out

    # refused with Kafka's messages, nothing changed
    bad = _configs(server, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "users",
                   "--entity-name", user, ok=False)
    assert bad.returncode != 0 and "producer_byte_rate cannot be a fractional value." in bad.stderr + bad.stdout, bad.stderr
    bad = _configs(server, "--alter", "--add-config", "request_percentage=-1", "--entity-type", "users",
                   "--entity-name", user, ok=False)
    assert bad.returncode != 0 and "must be greater than 0" in bad.stderr + bad.stdout, bad.stderr

    _configs(server, "--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users", "--entity-name",
             user)
    out = _configs(server, "--describe", "--entity-type", "users", "--entity-name", user).stdout
    assert "producer_byte_rate" not in out and "consumer_byte_rate=2097152.0" in out, out
    _configs(server, "--alter", "--delete-config", "producer_byte_rate", "--entity-type", "clients",
             "--entity-default")
    out = _configs(server, "--describe", "--entity-type", "clients", "--entity-default").stdout
    assert "producer_byte_rate" not in out, out

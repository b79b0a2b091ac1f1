"""The broker-wide defaults of topic configs are dynamic, as Kafka's DynamicLogConfig makes them, on klog and on
Apache Kafka 4.3 from the same client calls: IncrementalAlterConfigs on the cluster's default broker resource ("",
``kafka-configs --entity-type brokers --entity-default``) or on one broker's changes every topic without its own
value at once. DescribeConfigs of such a topic names the dynamic source and its synonyms in Kafka's order, a
broker's own value wins over the cluster default, a topic's own value wins over both, deleting the dynamic value
brings the static default back, and the new default takes effect on the data path: a topic created before the
change stores new batches with the cluster's new compression.type (Kafka's DumpLogSegments, the oracle)."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic  # noqa: E402

from klog.protocol import ApiKey  # noqa: E402

from klog.testing import kafka_tools  # noqa: E402
from klog.testing.kafka import find_kafka_libs, one_broker  # noqa: E402
from klog.testing.wire import WireClient  # noqa: E402

pytestmark = pytest.mark.java

NODE_ID = "1"


class Server:
    def __init__(self, bootstrap: str, data_dir: Path) -> None:
        self.bootstrap, self.data_dir = bootstrap, data_dir
        self.admin = AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    # a static value, so the synonyms show all four layers
    with one_broker(request.param, root, {"log.retention.ms": 86_400_000, "node.id": NODE_ID}) as bootstrap:
        yield Server(bootstrap, root / ("data" if request.param == "klog" else "kafka-data"))


def _topic(server: Server, configs: dict[str, str] | None = None) -> str:
    topic = f"dyn-{uuid.uuid4().hex[:8]}"
    server.admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})])[topic].result(30)
    return topic


def _kafka_configs(server: Server, broker: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's own ``kafka-configs`` on broker ``broker`` ("" the cluster default, ``--entity-default``)."""
    entity = ["--entity-default"] if broker == "" else ["--entity-name", broker]
    return kafka_tools.run_kafka_tool(kafka_tools.CONFIG_COMMAND, "--bootstrap-server", server.bootstrap,
                                      "--alter", "--entity-type", "brokers", *entity, *args)


def _alter(server: Server, broker: str, op: str, **configs: str) -> None:
    """``op``: "set" (--add-config) or "delete" (--delete-config)."""
    names = [name.replace("_", ".") for name in configs]
    args = ["--add-config", ",".join(f"{n}={v}" for n, v in zip(names, configs.values()))] if op == "set" \
        else ["--delete-config", ",".join(names)]
    result = _kafka_configs(server, broker, *args)
    assert result.returncode == 0, result.stderr + result.stdout


SOURCES = {1: "TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}


def _entry(server: Server, topic: str, key: str) -> tuple[str, str, list[tuple[str, str, str]]]:
    """(value, source, [(synonym, value, source)]) of one topic config, once the topic is known: DescribeConfigs
    v4 on the wire (confluent-kafka keys synonyms by name, and a dynamic and a static synonym share one)."""
    host, _, port = server.bootstrap.rpartition(":")
    for _ in range(100):
        with WireClient(host, int(port)) as wire:
            result = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": 2, "resource_name": topic, "configuration_keys": [key]}],
                "include_synonyms": True, "include_documentation": False}).results[0]
        if result.error_code == 3:   # UNKNOWN_TOPIC_OR_PARTITION: not in the broker's metadata yet
            time.sleep(0.1)
            continue
        assert result.error_code == 0, result
        [entry] = result.configs
        return (entry.value, SOURCES[entry.config_source],
                [(s.name, s.value, SOURCES[s.source]) for s in entry.synonyms])
    raise AssertionError(f"{topic} never became known")


def _eventually(server: Server, topic: str, key: str, value: str) -> tuple[str, str, list[tuple[str, str, str]]]:
    """The entry once it shows ``value`` (a dynamic change reaches the broker's image a moment after it is
    answered)."""
    for _ in range(100):
        got = _entry(server, topic, key)
        if got[0] == value:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{topic}'s {key} never became {value}: {got}")


def _stored_codecs(server: Server, topic: str) -> list[str]:
    segment = server.data_dir / f"{topic}-0" / f"{0:020d}.log"
    result = kafka_tools.run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", str(segment),
                                        libs=find_kafka_libs())
    assert result.returncode == 0, result.stderr
    return [dict(re.findall(r"(\w+): (\S+)", line))["compresscodec"] for line in result.stdout.splitlines()
            if line.startswith("baseOffset:")]


def _produce(server: Server, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "none", "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, value=f"value {i} ".encode() * 20)
    assert producer.flush(30) == 0


def test_a_cluster_default_then_a_brokers_own_value_then_none_apply_to_a_topic_without_its_own(server):
    topic = _topic(server)
    assert _entry(server, topic, "retention.ms") == (
        "86400000", "STATIC_BROKER_CONFIG",
        [("log.retention.ms", "86400000", "STATIC_BROKER_CONFIG"),
         ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    _alter(server, "", "set", log_retention_ms="3600000")
    assert _eventually(server, topic, "retention.ms", "3600000") == (
        "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG",
        [("log.retention.ms", "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
         ("log.retention.ms", "86400000", "STATIC_BROKER_CONFIG"),
         ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    _alter(server, NODE_ID, "set", log_retention_ms="7200000")
    assert _eventually(server, topic, "retention.ms", "7200000") == (
        "7200000", "DYNAMIC_BROKER_CONFIG",
        [("log.retention.ms", "7200000", "DYNAMIC_BROKER_CONFIG"),
         ("log.retention.ms", "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
         ("log.retention.ms", "86400000", "STATIC_BROKER_CONFIG"),
         ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    # a topic's own value wins over every broker layer
    own = _topic(server, {"retention.ms": "60000"})
    assert _entry(server, own, "retention.ms")[:2] == ("60000", "TOPIC_CONFIG")
    _alter(server, NODE_ID, "delete", log_retention_ms="")
    assert _eventually(server, topic, "retention.ms", "3600000")[1] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    _alter(server, "", "delete", log_retention_ms="")
    assert _eventually(server, topic, "retention.ms", "86400000")[1] == "STATIC_BROKER_CONFIG"


def test_the_broker_resource_describes_the_dynamic_default_it_was_given(server):
    _alter(server, "", "set", log_cleaner_delete_retention_ms="123000")
    try:
        resource = ConfigResource(ConfigResource.Type.BROKER, NODE_ID)
        for _ in range(100):
            entry = server.admin.describe_configs([resource])[resource].result(30)[
                "log.cleaner.delete.retention.ms"]
            if entry.value == "123000":
                break
        assert (entry.value, ConfigSource(entry.source).name, entry.is_read_only) == (
            "123000", "DYNAMIC_DEFAULT_BROKER_CONFIG", False)
    finally:
        _alter(server, "", "delete", log_cleaner_delete_retention_ms="")


def test_a_new_cluster_compression_type_recompresses_new_batches_of_an_existing_topic(server):
    topic = _topic(server)
    _produce(server, topic, 20)
    _alter(server, "", "set", compression_type="gzip")
    try:
        assert _eventually(server, topic, "compression.type", "gzip")[1] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        _produce(server, topic, 20)
        codecs = _stored_codecs(server, topic)
        # the batches stored before the change as sent, those after it with the cluster's new codec
        assert codecs[0] == "none" and codecs[-1] == "gzip" and set(codecs) == {"none", "gzip"}, codecs
    finally:
        _alter(server, "", "delete", compression_type="")


def test_an_invalid_dynamic_default_is_refused_and_changes_nothing(server):
    topic = _topic(server)
    refused = _kafka_configs(server, "", "--add-config", "compression.type=brotli")
    assert refused.returncode != 0 and "brotli" in refused.stderr + refused.stdout, refused.stderr
    assert _entry(server, topic, "compression.type")[:2] == ("producer", "DEFAULT_CONFIG")

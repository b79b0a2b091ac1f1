"""DescribeConfigs on the controller listener (Kafka's ``kafka-configs --bootstrap-controller --describe``, KIP-919),
on klog and on Apache Kafka 4.x (one combined node): the controller answers it itself, as Kafka's
ControllerApis.handleDescribeConfigsRequest: its own BROKER resource (its properties), its BROKER_LOGGER (KIP-412),
a topic's configs from its metadata image, and INVALID_REQUEST for another node's id; Kafka's own ConfigCommand
describes the controller's configs and loggers through it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools
from klog.testing.cluster import cluster_of
from klog.testing.wire import WireClient, until

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
#: a broker config set in both nodes' properties (not its default, 1)
BACKGROUND_THREADS = ("background.threads", "7")


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp(f"controller-configs-{request.param}")
    with cluster_of(request.param, root, 1, properties={"offsets.topic.replication.factor": 1,
                                                        BACKGROUND_THREADS[0]: BACKGROUND_THREADS[1]}) as started:
        yield started


def _controller(node: Any) -> tuple[WireClient, str]:
    node_id = node.controller_ids[0]
    return WireClient("127.0.0.1", node.controller_ports[node_id], client_id="controller-configs-test"), str(node_id)


def _describe(wire: WireClient, rtype: int, name: str, keys: list[str] | None = None) -> Any:
    [result] = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False}).results
    return result


def _values(result: Any) -> dict[str, str | None]:
    return {entry.name: entry.value for entry in result.configs}


def test_the_controller_listener_describes_its_own_nodes_configs(node: Any) -> None:
    wire, me = _controller(node)
    with wire:
        result = _describe(wire, BROKER, me, [BACKGROUND_THREADS[0]])
    assert result.error_code == ErrorCode.NONE, result
    assert _values(result) == dict([BACKGROUND_THREADS])


def test_the_controller_listener_describes_its_own_loggers(node: Any) -> None:
    wire, me = _controller(node)
    with wire:
        result = _describe(wire, BROKER_LOGGER, me)
    assert result.error_code == ErrorCode.NONE, result
    assert "root" in _values(result)


def test_the_controller_listener_describes_a_topics_configs(node: Any) -> None:
    wire, _ = _controller(node)
    topic = "described-" + uuid.uuid4().hex[:8]
    with wire:
        [created] = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "retention.ms", "value": "12345"}]}], "timeout_ms": 30000,
            "validate_only": False}).topics
        assert created.error_code == ErrorCode.NONE, created
        # the controller's metadata image holds the topic once its records are applied
        result = until(lambda: (r := _describe(wire, TOPIC, topic, ["retention.ms"])).error_code == ErrorCode.NONE
                       and r, f"topic {topic} described by the controller", timeout=30)
    assert _values(result) == {"retention.ms": "12345"}


def test_the_controller_listener_refuses_another_nodes_configs(node: Any) -> None:
    wire, _ = _controller(node)
    with wire:
        result = _describe(wire, BROKER, "99")
    wanted = f"Unexpected broker id, expected {node.controller_ids[0]} or empty string, but received 99"
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, wanted), result


def test_kafkas_config_command_describes_a_controller_through_its_listener(node: Any) -> None:
    node_id = node.controller_ids[0]
    bootstrap = f"127.0.0.1:{node.controller_ports[node_id]}"
    brokers = kafka_tools.run_kafka_tool(kafka_tools.CONFIG_COMMAND, "--bootstrap-controller", bootstrap,
                                         "--describe", "--entity-type", "brokers", "--entity-name", str(node_id),
                                         "--all")
    assert brokers.returncode == 0, brokers.stderr + brokers.stdout
    assert "background.threads=7" in brokers.stdout, brokers.stdout
    loggers = kafka_tools.run_kafka_tool(kafka_tools.CONFIG_COMMAND, "--bootstrap-controller", bootstrap,
                                         "--describe", "--entity-type", "broker-loggers", "--entity-name",
                                         str(node_id))
    assert loggers.returncode == 0, loggers.stderr + loggers.stdout
    assert "root=" in loggers.stdout, loggers.stdout

"""Features on a 3-node cluster, one script for klog (:class:`klog.testing.cluster.KlogCluster`) and Apache Kafka 4.3
(:class:`klog.testing.kafka.KafkaCluster`, nightly): ``kafka-features upgrade|downgrade`` sent to a node that is not
the active controller is forwarded to it, the FeatureLevelRecord reaches every node, and every node's ApiVersions
and share-group gate follow it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools as kt
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs

pytestmark = pytest.mark.timeout(600)

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


@pytest.fixture(params=["klog", "kafka"], scope="module")
def three(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"{request.param}-features")
    cluster: Cluster
    if request.param == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        cluster = KafkaCluster(root, 3, properties=CLUSTER_TIMING, startup_timeout=300)
    else:
        cluster = KlogCluster(root, 3, properties=CLUSTER_TIMING)
    with cluster:
        cluster.wait_for_brokers()
        yield cluster


def _finalized(cluster: Cluster, node: int) -> dict[str, int]:
    with cluster.wire(node) as wire:
        answer: Any = wire.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    return {f.name: int(f.max_version_level) for f in answer.finalized_features}


def _share_heartbeat_error(cluster: Cluster, node: int) -> int:
    body = {"group_id": "g-features", "member_id": "m" * 22, "member_epoch": 0, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"]}
    with cluster.wire(node) as wire:
        return int(wire.request(76, 1, body).error_code)


def _on_every_node(cluster: Cluster, name: str, level: int | None, timeout: float = 60.0) -> None:
    """Wait until every node's ApiVersions finalizes ``name`` at ``level`` (None: not finalized)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {node: _finalized(cluster, node).get(name) for node in cluster.node_ids}
        if all(got == level for got in seen.values()):
            return
        assert time.monotonic() < deadline, f"{name} is not {level} on every node: {seen}"
        time.sleep(0.2)


def test_an_update_sent_to_any_node_is_decided_by_the_controller_and_reaches_every_node(three: Cluster) -> None:
    controller = three.wait_for_controller()
    other = next(node for node in three.node_ids if node != controller)
    bootstrap = three.node_bootstrap(other)
    _on_every_node(three, "share.version", 1)   # a new cluster has share groups on, as Kafka 4.2+ formats one

    down = kt.run_kafka_tool(FEATURE_COMMAND, "--bootstrap-server", bootstrap, "downgrade", "--feature",
                             "share.version=0")
    assert (down.returncode, down.stdout.strip()) == (0, "share.version was downgraded to 0."), down.stderr
    _on_every_node(three, "share.version", None)
    assert {_share_heartbeat_error(three, node) for node in three.node_ids} == {ErrorCode.UNSUPPORTED_VERSION}

    up = kt.run_kafka_tool(FEATURE_COMMAND, "--bootstrap-server", bootstrap, "upgrade", "--feature",
                           "share.version=1")
    assert (up.returncode, up.stdout.strip()) == (0, "share.version was upgraded to 1."), up.stderr
    _on_every_node(three, "share.version", 1)
    assert ErrorCode.UNSUPPORTED_VERSION not in {_share_heartbeat_error(three, node) for node in three.node_ids}
    # a static controller.quorum.voters quorum: kraft.version 0, not finalized, on both
    assert all("kraft.version" not in _finalized(three, node) for node in three.node_ids)


def test_kafka_features_describes_through_the_controller_listener(three: Cluster) -> None:
    """``--bootstrap-controller``: the controllers answer ApiVersions with the features, as Kafka's do."""
    controllers = ",".join(f"127.0.0.1:{port}" for port in three.controller_ports.values())
    by_controller = kt.run_kafka_tool(FEATURE_COMMAND, "--bootstrap-controller", controllers, "describe")
    by_broker = kt.run_kafka_tool(FEATURE_COMMAND, "--bootstrap-server", three.bootstrap_servers, "describe")
    assert by_controller.returncode == 0 and by_broker.returncode == 0, by_controller.stderr + by_broker.stderr

    def rows(out: str) -> list[str]:   # the epoch (the metadata offset each node had applied) aside
        return [line.split("Epoch:")[0].split() for line in out.splitlines() if line.startswith("Feature:")]
    assert rows(by_controller.stdout) == rows(by_broker.stdout) and len(rows(by_broker.stdout)) == 7, \
        by_controller.stdout

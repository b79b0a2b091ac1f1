"""Kafka's dedicated layout: 3 ``process.roles=controller`` nodes form the quorum, 3 ``process.roles=broker`` nodes
follow it as observers and serve clients. Topics are created through the brokers (forwarded to the active
controller, which decides them without a broker of its own), records are replicated (RF 2) and read back; after a
SIGKILL of the active controller a new one takes over and the brokers follow it; a killed broker's partitions move
to the others; a broker started late catches up from a snapshot of the controller's image and rejoins the ISR.
DescribeQuorum lists the brokers as observers; Kafka's tools read the cluster through a broker. The same test runs
against Apache Kafka 4.x in the same layout, and the documented files in ``config/cluster-dedicated/`` start such a
cluster."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, cluster_of
from klog.testing.cluster_api import Cluster
from klog.testing.kafka_tools import TOPIC_COMMAND, kafka_libs_dir, run_kafka_tool

QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"

pytestmark = pytest.mark.timeout(420)


def _observers(cluster: Cluster, via: int) -> set[int]:
    with cluster.wire(via) as wire:
        answer = wire.request(ApiKey.DESCRIBE_QUORUM, 0, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    partitions = answer.topics[0].partitions if answer.topics else []
    return {o.replica_id for o in partitions[0].observers} if partitions and not partitions[0].error_code else set()


@pytest.fixture(params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The same layout of either system: 3 controller-only nodes (101-103), 3 broker-only nodes (1-3)."""
    properties = {**CLUSTER_TIMING, "default.replication.factor": 2}
    with cluster_of(request.param, tmp_path, 3, controllers=3, properties=properties) as started:
        yield started


@pytest.mark.long
def test_broker_only_nodes_follow_a_dedicated_controller_quorum(cluster: Any) -> None:
    brokers = cluster.node_ids
    cluster.wait_for_brokers(brokers)
    controller = cluster.wait_for_controller()
    assert controller in cluster.controller_ids   # a controller-only node leads; brokers never vote
    # DescribeQuorum (through a broker) lists the brokers as the quorum's observers
    deadline = time.monotonic() + 30
    while (seen := _observers(cluster, brokers[1])) != set(brokers):
        assert time.monotonic() < deadline, f"observers {seen}, not the brokers {brokers}"
        time.sleep(0.5)
    for via in brokers:
        assert cluster.create_topic(f"via-{via}", 3, 2, via=via) == (0, None), via
    for via in brokers:
        assert set(cluster.wait_for_topic(f"via-{via}", 3).values()) <= set(brokers)
    assert cluster.create_topic("via-1", 1, 2, via=brokers[-1])[0] == 36   # TOPIC_ALREADY_EXISTS
    sent = cluster.produce("via-1", [0, 1, 2], 20, tag="a")
    assert cluster.consume("via-1", [0, 1, 2], len(sent)) == sent
    if kafka_libs_dir() is not None:   # Kafka's own tools read the cluster through a broker-only node
        described = run_kafka_tool(TOPIC_COMMAND, "--bootstrap-server", cluster.node_bootstrap(brokers[2]),
                                   "--describe", "--topic", "via-1")
        assert described.returncode == 0, described.stderr
        assert described.stdout.count("Topic: via-1\tPartition:") == 3, described.stdout
        status = run_kafka_tool(QUORUM_COMMAND, "--bootstrap-server", cluster.node_bootstrap(brokers[0]),
                                "describe", "--status")
        assert status.returncode == 0, status.stderr
        text = status.stdout.replace("\n", " ")
        assert re.search(rf"LeaderId:\s*{controller}\b", text), status.stdout
        assert re.search(r"CurrentVoters:\s*\[.*\b101\b.*\b102\b.*\b103\b", text), status.stdout

    # SIGKILL of the active controller: another controller takes over, the brokers follow it
    cluster.kill(controller)
    new_controller = cluster.wait_for_controller(exclude=controller)
    assert new_controller in cluster.controller_ids
    assert cluster.create_topic("after-failover", 4, 2, via=brokers[1]) == (0, None)
    cluster.wait_for_topic("after-failover", 4)
    sent |= cluster.produce("via-1", [0, 1, 2], 20, tag="b")
    assert cluster.consume("via-1", [0, 1, 2], len(sent)) == sent

    # SIGKILL of a broker: its leaderships move to the other replicas, nothing acknowledged is lost
    victim = brokers[0]
    cluster.kill(victim)
    survivors = [b for b in brokers if b != victim]
    cluster.wait_for_brokers(survivors)
    for p in range(3):
        assert cluster.wait_for_leader("via-1", p, exclude=victim) in survivors
    sent |= cluster.produce("via-1", [0, 1, 2], 20, tag="c")
    assert cluster.consume("via-1", [0, 1, 2], len(sent)) == sent

    # the dead controller restarts; the killed broker starts late (the controllers snapshotted their images
    # meanwhile, every 500 ms): it loads a snapshot of the image, then follows the log, and rejoins the ISR
    cluster.restart(controller)
    time.sleep(1.5)
    cluster.restart(victim)
    cluster.wait_for_brokers(brokers)
    if cluster.kind == "klog":   # (a Kafka broker keeps its metadata log and fetches only what it missed)
        assert any(re.search(r"observer \d+: loaded controller \d+'s image at index \d+", line)
                   for line in cluster.log_lines(victim)), cluster.log_lines(victim)[-20:]
    for p in range(3):
        replicas = cluster.metadata(brokers[1], ["via-1"]).topics[0].partitions[p].replica_nodes
        cluster.wait_for_isr("via-1", p, replicas)
    assert cluster.create_topic("after-rejoin", 3, 2, via=victim) == (0, None)
    cluster.wait_for_topic("after-rejoin", 3)
    assert cluster.consume("via-1", [0, 1, 2], len(sent)) == sent


def test_the_documented_dedicated_files_start_three_controllers_and_three_brokers(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    from klog.testing.controller_quorum import QUORUM_READY
    from klog.testing.process import BrokerProcess, start_together
    from test_cluster_config_files import read_properties, relocated

    files = sorted((Path(__file__).resolve().parent.parent / "config" / "cluster-dedicated").glob("*.properties"))
    roles = {f.name: read_properties(f)["process.roles"] for f in files}
    assert sorted(roles.values()) == ["broker"] * 3 + ["controller"] * 3, roles
    local, _ = relocated(files, tmp_path)
    nodes = {}
    for f in local:
        props = read_properties(f)
        nodes[int(props["node.id"])] = BrokerProcess(
            props["log.dirs"], {"listeners": props["listeners"]}, properties_file=f,
            ready_re=QUORUM_READY if props["process.roles"] == "controller" else None)
    try:
        start_together(nodes.values())
        brokers = [nodes[i] for i in (1, 2, 3)]
        bootstrap = ",".join(n.bootstrap_servers for n in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while sorted(admin.list_topics(timeout=10).brokers) != [1, 2, 3]:
            assert time.monotonic() < deadline, "the three brokers never registered"
            time.sleep(0.5)
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import NewTopic

        admin.create_topics([NewTopic("orders", 3)])["orders"].result(30)   # RF 3, min.insync.replicas 2
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("orders", value=b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0, "\n".join(line for i in (1, 2, 3) for line in nodes[i].lines[-8:])
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])   # a group: __consumer_offsets is created through the controllers
        got: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.add(bytes(msg.value() or b""))
        assert got == {b"%d" % i for i in range(30)}
        assert all(tp.error is None for tp in consumer.commit(asynchronous=False) or [])
        consumer.close()
        replicas = admin.list_topics("orders", timeout=10).topics["orders"].partitions
        assert all(sorted(p.replicas) == [1, 2, 3] for p in replicas.values())
    finally:
        codes = {i: n.stop() for i, n in nodes.items()}   # brokers (1-3) stop first: controlled shutdowns
    assert codes == dict.fromkeys(nodes, 0), {i: nodes[i].lines[-10:] for i, c in codes.items() if c}

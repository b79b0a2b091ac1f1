"""Partition reassignment with Kafka's own tools, one script for a 3-node klog cluster and a 3-node Apache Kafka 4.x
cluster: ``kafka-topics --create --replica-assignment 1:2``, records in the partition, then
``kafka-reassign-partitions --generate``, ``--execute --throttle`` (the throttle holds the move in progress, which
ListPartitionReassignments shows through every node), ``--execute --additional --throttle`` (a higher rate),
``--verify`` until it completes (and clears the throttles). Afterwards the partition lives on [2, 3]: node 3's
segment holds the same bytes as node 2's, node 1 no longer has the partition's directory, DescribeLogDirs on each
node lists exactly what it hosts, a consumer reads every record; ``kafka-topics --alter --partitions`` adds
partitions that take records too."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs
from klog.testing.kafka_tools import TOPIC_COMMAND, java_available, run_kafka_tool

pytestmark = pytest.mark.timeout(480)

REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
SEGMENT = "00000000000000000000.log"
RECORDS = 3000
VALUE_BYTES = 100
#: small replica fetches so that a throttled follower cannot take the whole partition in its first fetch (Kafka's
#: quota only measures after the fact)
PROPERTIES = {**CLUSTER_TIMING, "replica.fetch.max.bytes": 16384}
#: bytes/s while the move must stay in progress, then to let it finish
SLOW_THROTTLE, FAST_THROTTLE = 2000, 50_000_000


@pytest.fixture(params=["klog", "kafka"], scope="module")   # one cluster per system: each test its own topic
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if not java_available():
        pytest.skip("needs java for Kafka's tools")
    try:
        find_kafka_libs()
    except KafkaStartError as exc:
        pytest.skip(f"needs the Kafka jars: {exc}")
    kind = KlogCluster if request.param == "klog" else KafkaCluster
    with kind(tmp_path_factory.mktemp(f"{request.param}-reassign"), 3, properties=PROPERTIES) as started:
        started.wait_for_brokers()
        yield started


def _tool(main_class: str, *args: str) -> str:
    done = run_kafka_tool(main_class, *args, timeout=120)
    assert done.returncode == 0, f"{main_class} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _reassign(cluster: Cluster, *args: str) -> str:
    return _tool(REASSIGN_COMMAND, "--bootstrap-server", cluster.bootstrap_servers, *args)


def _list_reassignments(cluster: Cluster, node: int, topic: str) -> list[tuple[int, list[int], list[int], list[int]]]:
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": 30000, "topics": [{"name": topic, "partition_indexes": [0]}]})
    assert answer.error_code == 0, answer
    return [(p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in answer.topics for p in t.partitions]


def _described_partitions(cluster: Cluster, node: int, topic: str) -> list[int]:
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": topic,
                                                                        "partitions": [0, 1, 2]}]})
    assert answer.error_code == 0
    return sorted(p.partition_index for d in answer.results for t in d.topics if t.name == topic
                  for p in t.partitions)


def _replicas(cluster: Cluster, node: int, topic: str) -> dict[int, list[int]]:
    return {p.partition_index: list(p.replica_nodes) for p in cluster.metadata(node, [topic]).topics[0].partitions}


def _wait(done: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _segment(cluster: Cluster, node: int, topic: str, partition: int) -> bytes:
    path = cluster.log_dir(node) / f"{topic}-{partition}" / SEGMENT
    return path.read_bytes() if path.exists() else b""


def _produce(cluster: Cluster, topic: str, partition: int, count: int, tag: str) -> list[bytes]:
    # small batches: a throttled follower still takes one whole batch per fetch
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5,
                         "batch.size": 4096, "message.timeout.ms": 60000})
    values = [f"{tag}-{i:06d}-".encode().ljust(VALUE_BYTES, b"x") for i in range(count)]
    failed: list[str] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, msg: failed.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:3]
    return values


def _consume(cluster: Cluster, topic: str, partitions: list[int], expected: int) -> list[bytes]:
    return [value for _, value in cluster.read(topic, partitions, expected, timeout=60)]


def _topic_on_brokers_1_and_2(cluster: Cluster, topic: str, tag: str) -> list[bytes]:
    """``topic`` made by kafka-topics on replicas [1, 2], both in its ISR, holding RECORDS records: those sent."""
    _tool(TOPIC_COMMAND, "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", topic,
          "--replica-assignment", "1:2")
    cluster.wait_for_topic(topic, 1)
    cluster.wait_for_isr(topic, 0, [1, 2])
    return _produce(cluster, topic, 0, RECORDS, tag)


def _write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.long
def test_kafka_reassign_partitions_moves_a_partition_with_its_data(cluster: Cluster, tmp_path: Path) -> None:
    topic = "moving"
    sent = _topic_on_brokers_1_and_2(cluster, topic, "before")

    # --generate proposes a placement on the brokers given (the only one for RF 2 on {2, 3})
    generated = _reassign(cluster, "--generate", "--broker-list", "2,3", "--topics-to-move-json-file",
                          _write(tmp_path / "topics.json", {"topics": [{"topic": topic}], "version": 1}))
    proposal = json.loads(generated.split("Proposed partition reassignment configuration")[1].strip())
    assert [(p["topic"], p["partition"], sorted(p["replicas"])) for p in proposal["partitions"]] == \
        [(topic, 0, [2, 3])]
    current = json.loads(generated.split("Current partition replica assignment")[1]
                         .split("Proposed partition reassignment configuration")[0].strip())
    assert [(p["partition"], p["replicas"]) for p in current["partitions"]] == [(0, [1, 2])]

    # --execute with a throttle: the move starts and stays in progress
    plan = _write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]})
    executed = _reassign(cluster, "--execute", "--reassignment-json-file", plan, "--throttle", str(SLOW_THROTTLE))
    assert "Successfully started partition reassignment" in executed, executed
    for node in cluster.node_ids:   # any node answers (the others forward to the active controller)
        ongoing = _list_reassignments(cluster, node, topic)
        assert ongoing == [(0, [2, 3, 1], [3], [1])], (node, ongoing)
    verifying = _reassign(cluster, "--verify", "--reassignment-json-file", plan)
    assert re.search(r"Reassignment of partition moving-0 is still in progress", verifying), verifying
    assert _replicas(cluster, 1, topic)[0] == [2, 3, 1]
    held_from, held_at = len(_segment(cluster, 3, topic, 0)), time.monotonic()
    time.sleep(3)
    held_bytes = len(_segment(cluster, 3, topic, 0))
    assert held_bytes < len(_segment(cluster, 2, topic, 0))   # held by the throttle
    print(f"{cluster.kind}: node 3 copied {held_bytes - held_from} bytes in {time.monotonic() - held_at:.1f} s at a "
          f"{SLOW_THROTTLE} B/s throttle ({held_bytes} of {len(_segment(cluster, 2, topic, 0))} bytes so far)")

    # a higher throttle lets it finish; --verify then reports it done and clears the throttles
    _reassign(cluster, "--execute", "--additional", "--reassignment-json-file", plan, "--throttle",
              str(FAST_THROTTLE))
    deadline = time.monotonic() + 120
    while True:
        verifying = _reassign(cluster, "--verify", "--reassignment-json-file", plan)
        if "Reassignment of partition moving-0 is completed" in verifying:
            break
        assert time.monotonic() < deadline, verifying
        time.sleep(1)
    assert "Clearing broker-level throttles" in verifying and "Clearing topic-level throttles" in verifying
    assert all(_list_reassignments(cluster, node, topic) == [] for node in cluster.node_ids)
    _wait(lambda: all(_replicas(cluster, n, topic)[0] == [2, 3] for n in cluster.node_ids), 30, "replicas [2, 3]")
    cluster.wait_for_isr(topic, 0, [2, 3])

    # node 3 holds the same batches as node 2; node 1 deleted its copy
    _wait(lambda: _segment(cluster, 3, topic, 0) == _segment(cluster, 2, topic, 0) != b"", 30, "identical segments")
    _wait(lambda: not (cluster.log_dir(1) / f"{topic}-0").exists(), 30, "node 1 to delete its replica")
    assert {n: _described_partitions(cluster, n, topic) for n in cluster.node_ids} == {1: [], 2: [0], 3: [0]}
    assert _consume(cluster, topic, [0], len(sent)) == sent

    # kafka-topics --alter --partitions: the new partitions take records
    _tool(TOPIC_COMMAND, "--bootstrap-server", cluster.bootstrap_servers, "--alter", "--topic", topic,
          "--partitions", "3")
    cluster.wait_for_topic(topic, 3)
    more = {p: _produce(cluster, topic, p, 50, f"after-{p}") for p in (1, 2)}
    assert sorted(_consume(cluster, topic, [1, 2], 100)) == sorted(more[1] + more[2])


def test_reassignment_errors_are_kafkas(cluster: Cluster) -> None:
    cluster.create_topic("fixed", 1, 2)
    cluster.wait_for_topic("fixed", 1)
    with cluster.wire(cluster.node_ids[-1]) as wire:
        answer = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
            {"name": "fixed", "partitions": [
                {"partition_index": 0, "replicas": None},         # nothing to cancel
                {"partition_index": 5, "replicas": [1, 2]}]},     # no such partition
            {"name": "nope", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
        bad_brokers = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
            {"name": "fixed", "partitions": [{"partition_index": 0, "replicas": [1, 9]}]}]})
        duplicate = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
            {"name": "fixed", "partitions": [{"partition_index": 0, "replicas": [2, 2]}]}]})
        # v1 (KIP-860): a different replica count is refused when the request disallows it
        rf_change = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, {
            "timeout_ms": 30000, "allow_replication_factor_change": False, "topics": [
                {"name": "fixed", "partitions": [{"partition_index": 0, "replicas": [1, 2, 3]}]}]})
    assert answer.error_code == 0
    codes = {(t.name, p.partition_index): p.error_code for t in answer.responses for p in t.partitions}
    assert codes == {("fixed", 0): 85, ("fixed", 5): 3, ("nope", 0): 3}   # NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_...
    assert [p.error_code for t in bad_brokers.responses for p in t.partitions] == [39]   # INVALID_REPLICA_ASSIGNMENT
    assert [p.error_code for t in duplicate.responses for p in t.partitions] == [39]
    assert rf_change.error_code == 0 and rf_change.allow_replication_factor_change is False
    assert [p.error_code for t in rf_change.responses for p in t.partitions] == [38]   # INVALID_REPLICATION_FACTOR
    assert _replicas(cluster, cluster.node_ids[0], "fixed")[0] == _replicas(cluster, cluster.node_ids[-1], "fixed")[0]
    assert len(_replicas(cluster, cluster.node_ids[0], "fixed")[0]) == 2   # nothing changed


@pytest.mark.long
def test_kafka_reassign_partitions_cancel_reverts_a_move_in_progress(cluster: Cluster, tmp_path: Path) -> None:
    topic = "cancelled"
    sent = _topic_on_brokers_1_and_2(cluster, topic, "kept")
    plan = _write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]})
    _reassign(cluster, "--execute", "--reassignment-json-file", plan, "--throttle", str(SLOW_THROTTLE))
    assert _list_reassignments(cluster, cluster.node_ids[-1], topic) == [(0, [2, 3, 1], [3], [1])]
    listed = _reassign(cluster, "--list")
    assert "cancelled-0: replicas: 2,3,1. adding: 3. removing: 1." in listed, listed

    cancelled = _reassign(cluster, "--cancel", "--reassignment-json-file", plan)
    assert "Successfully cancelled partition reassignment" in cancelled, cancelled
    assert all(_list_reassignments(cluster, node, topic) == [] for node in cluster.node_ids)
    # back on the replicas it had (in the move's order), node 3's partial copy deleted, every record there
    _wait(lambda: all(sorted(_replicas(cluster, n, topic)[0]) == [1, 2] for n in cluster.node_ids), 30,
          "replicas {1, 2}")
    reverted = _replicas(cluster, 1, topic)[0]
    assert reverted == [2, 1]   # Kafka's PartitionReassignmentRevert keeps the move's order
    cluster.wait_for_isr(topic, 0, [1, 2])
    _wait(lambda: not (cluster.log_dir(3) / f"{topic}-0").exists(), 30, "node 3 to delete its partial replica")
    assert _consume(cluster, topic, [0], len(sent)) == sent
    print(f"{cluster.kind}: replicas after --cancel: {reverted}")

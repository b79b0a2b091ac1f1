"""Partitions of a 3-node ``broker,controller`` quorum (real processes) are striped over every live broker; a broker
asked for a partition it does not lead answers NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951), and Kafka
clients bootstrapped on one node reach the leaders on every node."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from klog.protocol import ApiKey
from klog.testing import kafka_tools
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
PARTITIONS = 6


def _metadata(node, topics: list[str] | None):
    with WireClient(node.host, node.port) as wire:
        return wire.request(ApiKey.METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})


def wait_all_brokers_registered(q: ControllerQuorum, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        seen = {i: sorted(b.node_id for b in _metadata(n, []).brokers) for i, n in q.nodes.items()}
        if all(ids == sorted(q.nodes) for ids in seen.values()):
            return
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)


def _create(node, name: str, partitions: int):
    with WireClient(node.host, node.port) as wire:
        return wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False}).topics[0]


def _leaders(q: ControllerQuorum, topic: str, timeout: float = 20.0) -> dict[int, int]:
    """partition -> leader, once every node lists the topic with the same leaders."""
    deadline = time.monotonic() + timeout
    while True:
        views = {}
        for i, node in q.nodes.items():
            t = _metadata(node, [topic]).topics[0]
            views[i] = {p.partition_index: p.leader_id for p in t.partitions} if t.error_code == 0 else None
        first = next(iter(views.values()))
        if first is not None and len(first) == PARTITIONS and all(v == first for v in views.values()):
            return first
        assert time.monotonic() < deadline, views
        time.sleep(0.1)


@pytest.mark.long
def test_partitions_are_striped_over_every_broker_and_others_answer_not_leader(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        wait_all_brokers_registered(q)
        topic = f"striped-{uuid.uuid4().hex[:6]}"
        created = _create(q.nodes[leader], topic, PARTITIONS)
        assert created.error_code == 0, created.error_message
        leaders = _leaders(q, topic)
        assert sorted(leaders.values()) == sorted(list(q.nodes) * (PARTITIONS // 3)), leaders

        # a node that does not lead a partition: NOT_LEADER_OR_FOLLOWER naming the leader and its endpoint
        partition, owner = next((p, b) for p, b in leaders.items())
        other = next(i for i in q.nodes if i != owner)
        with WireClient(q.nodes[other].host, q.nodes[other].port) as wire:
            produced = wire.request(ApiKey.PRODUCE, 11, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                         "topic_data": [{"name": topic, "partition_data": [
                                                             {"index": partition, "records": None}]}]})
            answer = produced.responses[0].partition_responses[0]
            assert answer.error_code == NOT_LEADER_OR_FOLLOWER
            assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (owner, 0)
            assert [(e.node_id, e.host, e.port) for e in produced.node_endpoints] == [
                (owner, "127.0.0.1", q.nodes[owner].port)]
            fetched = wire.request(ApiKey.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            fp = fetched.responses[0].partitions[0]
            assert (fp.error_code, fp.current_leader.leader_id) == (NOT_LEADER_OR_FOLLOWER, owner)
            # v16 names topics by id and lists the leaders' endpoints; an unknown id: UNKNOWN_TOPIC_ID
            topic_id = _metadata(q.nodes[other], [topic]).topics[0].topic_id
            fetched = wire.request(ApiKey.FETCH, 16, {
                "replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic_id": tid, "partitions": [
                        {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}
                    for tid in (topic_id, uuid.uuid4())],
                "forgotten_topics_data": [], "rack_id": ""})
            assert [(t.topic_id, t.partitions[0].error_code) for t in fetched.responses] == [
                (topic_id, NOT_LEADER_OR_FOLLOWER), (fetched.responses[1].topic_id, 100)]
            assert fetched.responses[0].partitions[0].current_leader.leader_id == owner
            assert [(e.node_id, e.port) for e in fetched.node_endpoints] == [(owner, q.nodes[owner].port)]
            listed = wire.request(ApiKey.LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                "timestamp": -1}]},
                {"name": "no-such-topic", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                          "timestamp": -1}]}]})
            assert [t.partitions[0].error_code for t in listed.topics] == [NOT_LEADER_OR_FOLLOWER,
                                                                            UNKNOWN_TOPIC_OR_PARTITION]

        # Kafka clients bootstrapped on one node: records reach the leaders on every node and are read back
        bootstrap = q.nodes[other].bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})   # InitProducerId: a block
        sent = {(p, b"p%d-%d" % (p, i)) for p in range(PARTITIONS) for i in range(10)}
        for p, value in sorted(sent):
            producer.produce(topic, value=value, partition=p)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "placement",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            got: set[tuple[int, bytes]] = set()
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.add((msg.partition(), msg.value()))
            assert got == sent
        finally:
            consumer.close()
        # Kafka's kafka-topics --describe (DescribeTopicPartitions) against any node sees the striped leaders
        if kafka_tools.java_available() and kafka_tools.kafka_libs_dir(__file__) is not None:
            described = kafka_tools.run_kafka_tool(kafka_tools.TOPIC_COMMAND, "--bootstrap-server", bootstrap,
                                                   "--describe", "--topic", topic,
                                                   libs=kafka_tools.kafka_libs_dir(__file__))
            assert described.returncode == 0, described.stderr
            rows = {int(m["p"]): (int(m["leader"]), m["replicas"], m["isr"]) for m in re.finditer(
                r"Partition: (?P<p>\d+)\s+Leader: (?P<leader>-?\d+)\s+Replicas: (?P<replicas>[\d,]*)\s+"
                r"Isr: (?P<isr>[\d,]*)", described.stdout)}
            assert rows == {p: (b, str(b), str(b)) for p, b in leaders.items()}, described.stdout
            assert f"PartitionCount: {PARTITIONS}" in described.stdout
        # each node holds the logs of exactly the partitions it leads
        for i in q.nodes:
            held = {int(d.name.rsplit("-", 1)[1]) for d in q.log_dir(i).iterdir() if d.name.startswith(topic + "-")}
            assert held == {p for p, b in leaders.items() if b == i}, (i, held, leaders)
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
            assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])

"""The broker role of combined ``broker,controller`` nodes of a 3-member quorum (real processes) serves the image
the Raft member applies from the quorum's committed log: topic changes are proposed through Raft on the active
controller's node, answered NOT_CONTROLLER (41) on the others (Kafka 4 brokers would forward them), and every
node's Metadata lists a topic once it is committed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from klog.protocol import ApiKey
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

NOT_CONTROLLER = 41
INVALID_REPLICATION_FACTOR = 38


def _metadata(node, topic: str):
    with WireClient(node.host, node.port) as wire:
        return wire.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})


def _wait_listed(q: ControllerQuorum, topic: str, partitions: int, timeout: float = 20.0,
                 nodes: list[int] | None = None) -> dict[int, object]:
    deadline = time.monotonic() + timeout
    answers: dict[int, object] = {}
    while time.monotonic() < deadline:
        answers = {i: _metadata(q.nodes[i], topic) for i in (nodes or q.nodes)}
        if all(a.topics[0].error_code == 0 and len(a.topics[0].partitions) == partitions for a in answers.values()):
            return answers
        time.sleep(0.1)
    raise AssertionError({i: (a.topics[0].error_code, len(a.topics[0].partitions)) for i, a in answers.items()})


def _create_on(node, name: str, partitions: int, replication_factor: int = 1):
    with WireClient(node.host, node.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": replication_factor, "assignments": [],
             "configs": []}], "timeout_ms": 30000, "validate_only": False})
    return response.topics[0].error_code, response.topics[0].error_message


def test_topics_are_proposed_on_the_active_controller_and_listed_by_every_node(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        follower = next(i for i in q.nodes if i != leader)
        # the active controller's broker is registered: Metadata names it as the controller everywhere
        deadline = time.monotonic() + 20
        while _metadata(q.nodes[follower], "x").controller_id != leader:
            assert time.monotonic() < deadline, q.nodes[leader].lines[-10:]
            time.sleep(0.1)

        code, message = _create_on(q.nodes[follower], "refused", 1)
        assert code == NOT_CONTROLLER and f"node {leader}" in message, (code, message)
        assert _metadata(q.nodes[leader], "refused").topics[0].error_code == 3   # nothing committed
        # more replicas than brokers
        assert _create_on(q.nodes[leader], "rf4", 1, replication_factor=4)[0] == INVALID_REPLICATION_FACTOR

        # a Kafka admin client bootstrapped at a follower finds the controller through Metadata
        topic = f"q-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": q.nodes[follower].bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "123456"})])[topic].result(30)
        answers = _wait_listed(q, topic, 3)
        ids = {a.topics[0].topic_id for a in answers.values()}
        assert len(ids) == 1, ids
        for answer in answers.values():
            assert {p.leader_id for p in answer.topics[0].partitions} <= set(q.nodes)   # striped over the brokers
            assert leader in [b.node_id for b in answer.brokers]   # every registered, unfenced broker is listed
        configs = admin.describe_configs([ConfigResource("topic", topic)])
        described = next(iter(configs.values())).result(30)
        assert described["retention.ms"].value == "123456"

        # records go to the partitions' leader, whatever node the clients bootstrap from
        producer = Producer({"bootstrap.servers": q.nodes[follower].bootstrap_servers})
        for i in range(30):
            producer.produce(topic, value=b"v%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": q.nodes[follower].bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            from confluent_kafka import TopicPartition
            consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
            got: set[bytes] = set()
            deadline = time.monotonic() + 30
            while len(got) < 30 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.add(msg.value())
            assert got == {b"v%d" % i for i in range(30)}
        finally:
            consumer.close()

        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
        _wait_listed(q, topic, 5)
        admin.delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 20
        while any(_metadata(node, topic).topics[0].error_code != 3 for node in q.nodes.values()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
            assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])


def test_after_the_active_controller_is_killed_the_new_one_takes_topic_changes(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        deadline = time.monotonic() + 20
        while _create_on(q.nodes[leader], "before", 2)[0] != 0:   # until its broker is registered
            assert time.monotonic() < deadline, q.nodes[leader].lines[-10:]
            time.sleep(0.1)
        _wait_listed(q, "before", 2)
        q.kill(leader)
        new_leader = q.wait_for_leader(exclude=leader)
        live = {i: n for i, n in q.nodes.items() if i != leader}
        deadline = time.monotonic() + 20
        while (code := _create_on(live[new_leader], "after", 2)[0]) != 0:
            assert code in (NOT_CONTROLLER, INVALID_REPLICATION_FACTOR) and time.monotonic() < deadline, code
            time.sleep(0.1)
        _wait_listed(q, "after", 2, nodes=list(live))
        for i, node in live.items():
            after, before = _metadata(node, "after"), _metadata(node, "before")
            # placed on the live brokers (the dead one's until its session expires): led by their first replica,
            # or offline once that replica is the fenced dead node
            for p in after.topics[0].partitions:
                assert p.leader_id in (p.replica_nodes[0], -1), (i, p)
            # a partition on the dead node alone stays its dead node's until the new controller fences it after
            # broker.session.timeout.ms, then is offline (one replica: no other ISR member to lead)
            for p in before.topics[0].partitions:
                expected = (leader, -1) if p.replica_nodes == [leader] else (p.replica_nodes[0],)
                assert p.leader_id in expected, (i, p)
            assert after.controller_id == new_leader
        for i, node in live.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])

"""The broker role of combined ``broker,controller`` nodes of a 3-member quorum (real processes) serves the image
the Raft member applies from the quorum's committed log: topic changes are proposed through Raft on the active
controller's node; the other nodes forward them to it over the controller listener (as Kafka 4 brokers do,
retrying while the controller moves, NOT_CONTROLLER (41) only when none is reachable within the request's
timeout), and every node's Metadata lists a topic once it is committed."""

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


def _create_on(node, name: str, partitions: int, replication_factor: int = 1, timeout_ms: int = 30000):
    with WireClient(node.host, node.port, timeout=timeout_ms / 1000 + 15) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": replication_factor, "assignments": [],
             "configs": []}], "timeout_ms": timeout_ms, "validate_only": False})
    return response.topics[0].error_code, response.topics[0].error_message


def _wait_brokers(q: ControllerQuorum, expected: set[int], nodes: list[int] | None = None, timeout: float = 30.0):
    """Until every node's Metadata lists exactly ``expected`` as its live brokers."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {i: {b.node_id for b in _metadata(q.nodes[i], "x").brokers} for i in (nodes or q.nodes)}
        if all(ids == expected for ids in seen.values()):
            return
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)


def test_topics_are_proposed_on_the_active_controller_and_listed_by_every_node(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        follower = next(i for i in q.nodes if i != leader)
        # the follower's broker is registered and unfenced: its Metadata names a live broker, itself, as the
        # controller (as Kafka's brokers do: any broker forwards controller requests to the active controller)
        deadline = time.monotonic() + 20
        while _metadata(q.nodes[follower], "x").controller_id != follower:
            assert time.monotonic() < deadline, q.nodes[leader].lines[-10:]
            time.sleep(0.1)

        _wait_brokers(q, set(q.nodes))

        # a follower forwards CreateTopics to the active controller, which decides it
        assert _create_on(q.nodes[follower], "forwarded", 3) == (0, None)
        answers = _wait_listed(q, "forwarded", 3)
        assert {p.leader_id for p in answers[leader].topics[0].partitions} == set(q.nodes)   # striped
        code, message = _create_on(q.nodes[follower], "forwarded", 1)   # decided on the controller's image
        assert code == 36 and "already exists" in message, (code, message)
        # more replicas than brokers
        assert _create_on(q.nodes[leader], "rf4", 1, replication_factor=4)[0] == INVALID_REPLICATION_FACTOR
        # CreatePartitions, IncrementalAlterConfigs and DeleteTopics sent to a follower are forwarded too
        with WireClient(q.nodes[follower].host, q.nodes[follower].port) as wire:
            grown = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [
                {"name": "forwarded", "count": 4, "assignments": None}], "timeout_ms": 30000, "validate_only": False})
            assert [(r.name, r.error_code) for r in grown.results] == [("forwarded", 0)]
            altered = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                {"resource_type": 2, "resource_name": "forwarded",
                 "configs": [{"name": "retention.ms", "config_operation": 0, "value": "4242"}]}],
                "validate_only": False})
            assert [r.error_code for r in altered.responses] == [0]
            # ElectLeaders too: the controller's answer (one replica, already leading: ELECTION_NOT_NEEDED)
            elected = wire.request(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
                {"topic": "forwarded", "partitions": [0]}], "timeout_ms": 30000})
            assert [(r.topic, [p.error_code for p in r.partition_result])
                    for r in elected.replica_election_results] == [("forwarded", [84])]
        answers = _wait_listed(q, "forwarded", 4)
        with WireClient(q.nodes[leader].host, q.nodes[leader].port) as wire:
            described = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": 2, "resource_name": "forwarded", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": False, "include_documentation": False})
            assert [(c.name, c.value) for c in described.results[0].configs] == [("retention.ms", "4242")]
        with WireClient(q.nodes[follower].host, q.nodes[follower].port) as wire:
            deleted = wire.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "forwarded", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 30000})
            assert [r.error_code for r in deleted.responses] == [0]

        # a Kafka admin client bootstrapped at a follower finds the controller through Metadata
        topic = f"q-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": q.nodes[follower].bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "123456"})])[topic].result(30)
        answers = _wait_listed(q, topic, 3)
        ids = {a.topics[0].topic_id for a in answers.values()}
        assert len(ids) == 1, ids
        for answer in answers.values():
            assert {p.leader_id for p in answer.topics[0].partitions} == set(q.nodes)
            assert sorted(b.node_id for b in answer.brokers) == sorted(q.nodes)   # every live broker is listed
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


@pytest.mark.long
def test_after_the_active_controller_is_killed_the_new_one_takes_topic_changes(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        _wait_brokers(q, set(q.nodes))
        follower = next(i for i in q.nodes if i != leader)
        assert _create_on(q.nodes[follower], "before", 3) == (0, None)
        _wait_listed(q, "before", 3)
        q.kill(leader)
        live = {i: n for i, n in q.nodes.items() if i != leader}
        # sent at once to a node that is not the new controller: forwarded, retried while the controller moves
        other = next(i for i in live if i != q.wait_for_leader(exclude=leader, nodes=list(live)))
        assert _create_on(live[other], "after", 2) == (0, None)
        new_leader = q.wait_for_leader(exclude=leader, nodes=list(live))
        _wait_listed(q, "after", 2, nodes=list(live))
        for i, node in live.items():
            after, before = _metadata(node, "after"), _metadata(node, "before")
            # placed on the brokers registered and unfenced then (the dead one until its session expires)
            assert {p.leader_id for p in after.topics[0].partitions} <= set(q.nodes) | {-1}, i
            # the dead node's partition stays its until the new controller fences it after
            # broker.session.timeout.ms, then offline (one replica: no other ISR member to lead)
            dead = [p for p in before.topics[0].partitions if p.replica_nodes == [leader]]
            assert len(dead) == 1 and dead[0].leader_id in (leader, -1), i
            assert after.controller_id == i   # a live broker (this one), never the killed node
        # the new controller's node too is gone: no quorum, so NOT_CONTROLLER once the request's timeout passed
        q.kill(new_leader)
        started = time.monotonic()
        code, message = _create_on(live[other], "no-quorum", 1, timeout_ms=2000)
        assert code == NOT_CONTROLLER and "not the active controller" in message, (code, message)
        assert time.monotonic() - started >= 2.0
        assert live[other].stop() == 0, "\n".join(live[other].lines[-15:])

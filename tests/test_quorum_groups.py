"""Consumer groups and idempotent producers on a 3-node combined ``broker,controller`` quorum (real processes).

- ``__consumer_offsets`` is created through the active controller on first use (FindCoordinator), with
  offsets.topic.num.partitions partitions; the coordinator of a group is the leader of its offsets partition
  (``abs(groupId.hashCode()) % partitions``, Java's String.hashCode) whatever node is asked, and the other nodes
  answer the group APIs NOT_COORDINATOR.
- Producer ids come from blocks the active controller allocates (AllocateProducerIds through Raft), so producers
  bootstrapped on different nodes never share one.
- Committed offsets survive a SIGKILL and restart of the node that coordinates the group.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.broker.groups.storage import partition_for
from klog.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE
from klog.controller.topics import MAX_REPLICATION_FACTOR
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import decode_batches
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(240)

OFFSETS_PARTITIONS = 6
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
PROPERTIES = {"offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 3,
              "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}


def _wire(node):
    return WireClient(node.host, node.port)


def _find_coordinators(node, groups: list[str]):
    with _wire(node) as wire:
        return wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": groups}).coordinators


def _metadata(node, topic: str):
    with _wire(node) as wire:
        return wire.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})


def _wait_registered(q: ControllerQuorum, timeout: float = 30.0) -> int:
    """The active controller, once every node's broker is registered and unfenced (each node then names itself,
    a live broker, as the controller in Metadata, as Kafka's brokers name a live one)."""
    leader = q.wait_for_leader()
    deadline = time.monotonic() + timeout
    while True:
        answers = {i: _metadata(n, "x") for i, n in q.nodes.items()}
        if all(len(a.brokers) == len(q.nodes) and a.controller_id == i for i, a in answers.items()):
            return leader
        assert time.monotonic() < deadline, [(a.controller_id, len(a.brokers)) for a in answers.values()]
        time.sleep(0.2)


def _wait_coordinators(node, groups: list[str], timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        found = _find_coordinators(node, groups)
        if all(c.error_code == 0 for c in found):
            return found
        assert time.monotonic() < deadline, [(c.key, c.error_code, c.error_message) for c in found]
        time.sleep(0.2)


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _consume(configs: list[dict], topic: str, want: int, timeout: float = 90.0) -> set[bytes]:
    """Values the subscribed members (one per config, polled in turn) get until ``want`` distinct ones arrived
    and every member has partitions; each member then commits its position synchronously and closes."""
    consumers = [Consumer({"auto.offset.reset": "earliest", "enable.auto.commit": False, **c}) for c in configs]
    got: set[bytes] = set()
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < want or not all(c.assignment() for c in consumers):
            assert time.monotonic() < deadline, (len(got), [len(c.assignment()) for c in consumers])
            for consumer in consumers:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got.add(msg.value())
        for consumer in consumers:
            consumer.commit(asynchronous=False)
    finally:
        for consumer in consumers:
            consumer.close()
    return got


def test_the_group_coordinator_is_the_leader_of_the_groups_offsets_partition(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=PROPERTIES) as q:
        _wait_registered(q)
        groups = [f"group-{i}" for i in range(8)]
        follower = next(i for i in q.nodes if i != q.wait_for_leader())
        # asked at a node that is not the active controller: the topic is created through the controller
        found = _wait_coordinators(q.nodes[follower], groups)
        offsets = _metadata(q.nodes[follower], "__consumer_offsets").topics[0]
        assert offsets.error_code == 0 and offsets.is_internal
        assert len(offsets.partitions) == OFFSETS_PARTITIONS
        # offsets.topic.replication.factor (3) capped at the live brokers and at what the controller supports
        assert {len(p.replica_nodes) for p in offsets.partitions} == {min(3, len(q.nodes), MAX_REPLICATION_FACTOR)}
        leaders = {p.partition_index: p.leader_id for p in offsets.partitions}
        ports = {i: n.port for i, n in q.nodes.items()}
        for node in q.nodes.values():
            answers = _find_coordinators(node, groups) if node is not q.nodes[follower] else found
            for group, answer in zip(groups, answers, strict=True):
                leader = leaders[partition_for(group, OFFSETS_PARTITIONS)]
                assert (answer.key, answer.error_code, answer.node_id) == (group, 0, leader)
                assert (answer.host, answer.port) == ("127.0.0.1", ports[leader])
        # v0 (one key) answers the same
        with _wire(q.nodes[follower]) as wire:
            v0 = wire.request(ApiKey.FIND_COORDINATOR, 0, {"key": groups[0]})
        assert (v0.error_code, v0.node_id) == (0, leaders[partition_for(groups[0], OFFSETS_PARTITIONS)])
        # a node that does not lead the group's partition is not its coordinator
        coordinator = leaders[partition_for(groups[0], OFFSETS_PARTITIONS)]
        others = [i for i in q.nodes if i != coordinator]
        for i in others:
            with _wire(q.nodes[i]) as wire:
                join = wire.request(ApiKey.JOIN_GROUP, 5, {
                    "group_id": groups[0], "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                    "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]})
                fetch = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": groups[0], "topics": None,
                                                              "require_stable": False})
            assert join.error_code == NOT_COORDINATOR, i
            assert fetch.error_code == NOT_COORDINATOR, i
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
            assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])


def test_idempotent_producers_on_every_node_get_distinct_producer_ids_from_controller_blocks(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=PROPERTIES) as q:
        _wait_registered(q)
        ids = {}
        for i, node in q.nodes.items():
            with _wire(node) as wire:
                got = [wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                                 "transaction_timeout_ms": 60000,
                                                                 "producer_id": -1, "producer_epoch": -1})
                       for _ in range(5)]
            assert all(r.error_code == 0 and r.producer_epoch == 0 for r in got), [r.error_code for r in got]
            ids[i] = [r.producer_id for r in got]
        every = [pid for pids in ids.values() for pid in pids]
        assert len(set(every)) == len(every), ids
        for pids in ids.values():   # each node hands out its own block in order
            assert pids == list(range(pids[0], pids[0] + 5)), ids

        # the next block is asked for once 90% of the current one is handed out, before it runs out
        node = q.nodes[1]
        blocks_logged = [line for line in node.lines if "producer id block [" in line]
        assert len(blocks_logged) == 1, blocks_logged
        with _wire(node) as wire:
            more = [wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                                              "producer_id": -1, "producer_epoch": -1}).producer_id
                    for _ in range(PRODUCER_ID_BLOCK_SIZE * 9 // 10)]
        deadline = time.monotonic() + 10
        while len([line for line in node.lines if "producer id block [" in line]) < 2:
            assert time.monotonic() < deadline, "no block prefetched"
            time.sleep(0.1)
        assert more == list(range(ids[1][-1] + 1, ids[1][-1] + 1 + len(more)))   # still the first block
        every += more

        # real idempotent producers, one bootstrapped on each node, into one topic: each record exactly once
        topic = f"idem-{uuid.uuid4().hex[:8]}"
        _create_topic(q.nodes[1].bootstrap_servers, topic, 3)
        for i, node in q.nodes.items():
            producer = Producer({"bootstrap.servers": node.bootstrap_servers, "enable.idempotence": True,
                                 "linger.ms": 5})
            for n in range(200):
                producer.produce(topic, key=b"%d" % i, value=b"%d-%d" % (i, n), partition=n % 3)
            assert producer.flush(30) == 0
        producer_ids: dict[bytes, set[int]] = {}
        values = []
        leader = _metadata(q.nodes[1], topic).topics[0].partitions
        for p in leader:
            node = next(n for i, n in q.nodes.items() if i == p.leader_id)
            with _wire(node) as wire:
                fetched = wire.request(ApiKey.FETCH, 11, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
                        "partition": p.partition_index, "current_leader_epoch": -1, "fetch_offset": 0,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 23}]}],
                    "forgotten_topics_data": [], "rack_id": ""})
            for batch in decode_batches(fetched.responses[0].partitions[0].records or b""):
                for record in batch.records:
                    producer_ids.setdefault(record.key, set()).add(batch.producer_id)
                    values.append(record.value)
        assert sorted(values) == sorted(b"%d-%d" % (i, n) for i in q.nodes for n in range(200))
        assert all(len(pids) == 1 for pids in producer_ids.values()), producer_ids
        distinct = {next(iter(pids)) for pids in producer_ids.values()}
        assert len(distinct) == 3 and min(distinct) >= 0 and not distinct & set(every), producer_ids
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
            assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])


@pytest.mark.parametrize("protocol", [pytest.param("classic", marks=pytest.mark.long), "consumer"])
def test_a_group_on_a_quorum_consumes_commits_and_resumes_and_its_offsets_survive_its_coordinators_kill(
        tmp_path: Path, protocol: str) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=PROPERTIES) as q:
        _wait_registered(q)
        topic = f"g-{uuid.uuid4().hex[:8]}"
        group = f"group-{protocol}"
        _create_topic(q.nodes[2].bootstrap_servers, topic, 6)
        producer = Producer({"bootstrap.servers": q.nodes[3].bootstrap_servers, "enable.idempotence": True})
        for n in range(300):
            producer.produce(topic, value=b"v%d" % n, partition=n % 6)
        assert producer.flush(30) == 0
        coordinator = _wait_coordinators(q.nodes[1], [group])[0].node_id
        extra = {} if protocol == "classic" else {"group.protocol": "consumer"}

        # two members bootstrapped on different nodes share the partitions, consume everything and commit
        first = _consume([{"bootstrap.servers": q.nodes[i].bootstrap_servers, "group.id": group, **extra}
                          for i in (1, 2)], topic, want=300)
        assert first == {b"v%d" % n for n in range(300)}
        with _wire(q.nodes[coordinator]) as wire:
            fetched = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                                            "require_stable": False})
        committed = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        assert committed == {(topic, p): 50 for p in range(6)}, committed
        with _wire(q.nodes[coordinator]) as wire:
            listed = wire.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        assert [(g.group_id, g.group_type) for g in listed.groups] == [(group, protocol)]   # the protocol used

        # new records; a new member bootstrapped on another node resumes from the committed offsets
        for n in range(300, 360):
            producer.produce(topic, value=b"v%d" % n, partition=n % 6)
        assert producer.flush(30) == 0
        resumed = _consume([{"bootstrap.servers": q.nodes[3].bootstrap_servers, "group.id": group, **extra}], topic,
                           want=60)
        assert resumed == {b"v%d" % n for n in range(300, 360)}

        # SIGKILL the coordinator: a follower of its offsets partition (RF 3) leads with the acknowledged commits
        q.kill(coordinator)
        q.nodes[coordinator].start()
        live = q.nodes[next(i for i in q.nodes if i != coordinator)]
        deadline = time.monotonic() + 60
        while True:
            found = _find_coordinators(live, [group])[0]
            # (until the restarted node's new registration is committed its old address is answered)
            if found.error_code == 0 and found.port == q.nodes[found.node_id].port:
                with _wire(q.nodes[found.node_id]) as wire:
                    fetched = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                                                    "require_stable": False})
                if fetched.error_code == 0:
                    break
            assert time.monotonic() < deadline, (found, q.nodes[coordinator].port)
            time.sleep(0.3)
        committed = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        assert committed == {(topic, p): 60 for p in range(6)}, committed
        # and a consumer of the group starts there: nothing is read again
        after = Consumer({"bootstrap.servers": live.bootstrap_servers, "group.id": group,
                          "auto.offset.reset": "earliest", **extra})
        try:
            positions = after.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
        finally:
            after.close()
        assert [tp.offset for tp in positions] == [60] * 6
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
            assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])


def test_a_fenced_coordinator_resigns_its_offsets_partitions_and_reloads_them_when_it_leads_again(
        tmp_path: Path) -> None:
    """SIGSTOP the coordinator past broker.session.timeout.ms: the controller fences it and its offsets partitions
    have no leader (one replica), so FindCoordinator answers COORDINATOR_NOT_AVAILABLE; resumed, the node applies
    its fencing (onResignation: its groups unloaded), is unfenced and leads again (onElection: the committed offsets
    are read back)."""
    # one replica per offsets partition: fenced, the coordinator's partitions have no other replica to lead them
    with ControllerQuorum(tmp_path, 3, roles="broker,controller",
                          properties={**PROPERTIES, "offsets.topic.replication.factor": 1}) as q:
        _wait_registered(q)
        topic = f"f-{uuid.uuid4().hex[:8]}"
        _create_topic(q.nodes[1].bootstrap_servers, topic, 2)
        group = "fenced-group"
        # the first commit is retried as a client retries NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS: the node
        # named by another node's FindCoordinator may not have applied its offsets partition's leadership yet
        deadline = time.monotonic() + 30
        while True:
            coordinator = _wait_coordinators(q.nodes[1], [group])[0].node_id
            with _wire(q.nodes[coordinator]) as wire:
                commit = wire.request(ApiKey.OFFSET_COMMIT, 8, {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                        {"partition_index": p, "committed_offset": 40 + p, "committed_leader_epoch": -1,
                         "committed_metadata": "m"} for p in range(2)]}]})
            codes = {p.error_code for p in commit.topics[0].partitions}
            if codes == {0}:
                break
            assert codes <= {int(ErrorCode.NOT_COORDINATOR), int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}, commit
            assert time.monotonic() < deadline, commit
            time.sleep(0.2)
        other = q.nodes[next(i for i in q.nodes if i != coordinator)]
        node = q.nodes[coordinator]
        os.kill(node.pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30
            while (found := _find_coordinators(other, [group])[0]).error_code != COORDINATOR_NOT_AVAILABLE:
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
        finally:
            os.kill(node.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while True:
            found = _find_coordinators(other, [group])[0]
            if found.error_code == 0:
                with _wire(q.nodes[found.node_id]) as wire:
                    fetched = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                                                    "require_stable": False})
                if fetched.error_code == 0:
                    break
            assert time.monotonic() < deadline, found
            time.sleep(0.2)
        assert found.node_id == coordinator
        assert {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in fetched.topics
                for p in t.partitions} == {(topic, p): (40 + p, "m") for p in range(2)}
        resigned = [line for line in node.lines if "resigned [" in line and "resigned []" not in line]
        assert resigned, "\n".join(node.lines[-30:])
        regained = [line for line in node.lines if "gained [" in line and "gained []" not in line]
        assert len(regained) >= 2, regained   # at the topic's creation, and again after the fencing
        for i, n in q.nodes.items():
            assert n.stop() == 0, f"node {i}:\n" + "\n".join(n.lines[-15:])
            assert not [line for line in n.lines if "Traceback" in line], "\n".join(n.lines[-30:])

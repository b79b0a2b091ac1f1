"""Share groups on a 3-node cluster, klog and Apache Kafka 4.3 from the same properties: share-partition leaders
persist their state through the leader of its ``__share_group_state`` partition (WriteShareGroupState, 85, when
that is another broker), whose share coordinator prunes the records no state needs any more (every state
partition's log start moves); after the SIGKILL of a partition leader (and of the state partitions it led) the new
leaders resume from the pruned state: no accepted record is delivered again, and the records still held by then
come back."""

from __future__ import annotations

import contextlib
import time
import urllib.request
import uuid

import pytest

import klog
from klog.broker.coordinator.runtime import partition_for
from klog.broker.share_state import TOPIC as STATE_TOPIC
from klog.broker.share_state import coordinator_key
from klog.testing.cluster import KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs
from klog.testing.ports import free_port

# the crashed members' sessions run out (10 s) well within the wait for redelivery: Kafka's SimpleAssignor gives
# them partitions of their own until then. The internal topics are replicated to every node (klog's and Kafka's
# defaults, which KafkaCluster's single-node-friendly server.properties lower to 1): the state and the membership
# must outlive a node's SIGKILL
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "offsets.topic.replication.factor": 3, "share.coordinator.state.topic.replication.factor": 3,
              "share.coordinator.state.topic.min.isr": 2,
              "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
              "group.share.session.timeout.ms": 10000, "group.share.min.session.timeout.ms": 10000,
              "group.share.record.lock.duration.ms": 15000,
              # every state write a snapshot, pruned every second: the log start of each state partition moves
              # past a share-partition's first records as soon as it is written again
              "share.coordinator.snapshot.update.records.per.snapshot": 0,
              "share.coordinator.state.topic.prune.interval.ms": 1000}
PARTITIONS = 6


def make_cluster(kind: str, root) -> Cluster:
    if kind == "klog":
        return KlogCluster(root, 3, properties=PROPERTIES)
    try:
        find_kafka_libs()
    except KafkaStartError as exc:
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    return KafkaCluster(root, 3, properties=PROPERTIES, heap="384m")


def _produce(bootstrap, topic, values):
    with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:
        for i, v in enumerate(values):
            p.send(topic, value=v, partition=i % PARTITIONS)
        p.flush()


def _remote_state_partitions(cluster, group, topic, leaders):
    """The partitions of ``topic`` whose share state ``group`` keeps on another broker than their leader."""
    topic_id = cluster.metadata(leaders[0], [topic]).topics[0].topic_id
    state_leaders = cluster.leaders(leaders[0], STATE_TOPIC)
    assert state_leaders is not None
    return [p for p in range(PARTITIONS) if state_leaders[partition_for(
        coordinator_key(group, topic_id, p), len(state_leaders))] != leaders[p]]


def _state_partitions(cluster, node, group, topic, partitions=PARTITIONS):
    """The ``__share_group_state`` partitions holding ``group``'s state for ``topic`` (metadata asked of ``node``)."""
    topic_id = cluster.metadata(node, [topic]).topics[0].topic_id
    state_partitions = len(cluster.leaders(node, STATE_TOPIC) or {})
    return {partition_for(coordinator_key(group, topic_id, p), state_partitions) for p in range(partitions)}


def _log_starts(bootstrap, state_partitions):
    with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
        found = admin.list_offsets({(STATE_TOPIC, p): "earliest" for p in state_partitions})
    return {tp.partition: offset.offset for tp, offset in found.items()}


def ready_to_read(consumers, partitions):
    """Polls until every consumer is assigned some partitions and together they are assigned all ``partitions``
    (klog and Kafka's SimpleAssignor split them when there are more partitions than members), then once more after a second: with share.auto.offset.reset=latest a share-partition is
    initialized by a fetch, before the test produces."""
    deadline = time.monotonic() + 60
    while not (all(c._aio.assignment for c in consumers)
               and len(set().union(*(c._aio.assignment for c in consumers))) == partitions):
        assert time.monotonic() < deadline, "not assigned"
        for c in consumers:
            assert c.poll(timeout=0.2) == []
    time.sleep(1.0)
    for c in consumers:
        assert c.poll(timeout=0.5) == []


def _group_with_remote_state(cluster, bootstrap, topic, leaders):
    """A group name whose state for some partitions of ``topic`` lives away from their leaders. Partition
    leaders and ``__share_group_state``'s leaders are both striped over the brokers and a group's keys for
    consecutive partitions hash to consecutive state partitions, so a given name has its state either mostly
    remote or all local: a warm-up group makes the state topic exist, then names are tried until one is remote."""
    warm_topic = f"warm-{topic}"
    with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(warm_topic, 1, 3)])
    cluster.wait_for_topic(warm_topic, 1)
    warm = klog.ShareConsumer(warm_topic, bootstrap_servers=bootstrap, group_id=f"warm-{topic}")
    try:
        deadline = time.monotonic() + 60
        while len(warm._aio.assignment) != 1:
            assert time.monotonic() < deadline, "warm-up consumer not assigned"
            warm.poll(timeout=0.2)
        time.sleep(1.0)   # latest: the share-partition is initialized by a fetch before the record is produced
        warm.poll(timeout=0.5)
        with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:
            p.send(warm_topic, value=b"warm")
            p.flush()
        # the implicit acknowledgement of the record is persisted: that creates __share_group_state
        while cluster.leaders(leaders[0], STATE_TOPIC) is None:
            assert time.monotonic() < deadline, "__share_group_state never created"
            warm.poll(timeout=0.3)
    finally:
        warm.close()
    # the warm-up share-partition's state is written once and then idle: its snapshot holds back the pruning of
    # its state partition until a cold snapshot (share.coordinator.cold.partition.snapshot.interval.ms, 5 min), so
    # the group must keep its state in other partitions for the test's pruning wait to mean anything
    warm_state = _state_partitions(cluster, leaders[0], f"warm-{topic}", warm_topic, partitions=1)
    for i in range(50):
        group = f"g{i}-{topic}"
        if _remote_state_partitions(cluster, group, topic, leaders) \
                and not warm_state & _state_partitions(cluster, leaders[0], group, topic):
            return group
    raise AssertionError("no group name with remote share state in 50 tries")


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_share_state_written_through_the_share_coordinator_and_survives_leader_kill(tmp_path, kind):
    with make_cluster(kind, tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"share-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, PARTITIONS, 3)])
        leaders = cluster.wait_for_topic(topic, PARTITIONS)
        group = _group_with_remote_state(cluster, bootstrap, topic, leaders)
        consumers = [klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        acknowledgement_mode="explicit") for _ in range(2)]
        try:
            ready_to_read(consumers, PARTITIONS)
            values = [f"v{i}".encode() for i in range(120)]
            _produce(bootstrap, topic, values)
            seen: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(seen) < len(values) and time.monotonic() < deadline:
                for c in consumers:
                    for r in c.poll(timeout=0.3):
                        seen.append(r.value)
                        c.acknowledge(r, "accept")
                    outcome = c.commit_sync()
                    assert all(err is None for err in outcome.values()), outcome
            assert sorted(seen) == sorted(values)
            # every state partition holding the group's share-partitions is pruned past their first snapshots
            state_partitions = _state_partitions(cluster, leaders[0], group, topic)
            deadline = time.monotonic() + 30
            while min(_log_starts(bootstrap, state_partitions).values()) == 0:
                assert time.monotonic() < deadline, _log_starts(bootstrap, state_partitions)
                time.sleep(0.3)
            # the group was picked so that some share-partitions' state lives on another broker than their
            # partition's leader: those went through WriteShareGroupState; it still does after the run
            assert _remote_state_partitions(cluster, group, topic, leaders), leaders
            # a second round held (not acknowledged) when a partition leader dies
            held_values = [f"h{i}".encode() for i in range(PARTITIONS)]
            _produce(bootstrap, topic, held_values)
            held: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(held) < len(held_values) and time.monotonic() < deadline:
                for c in consumers:
                    held.extend(r.value for r in c.poll(timeout=0.3))
                    c._aio._delivered.clear()   # never acknowledged
            assert sorted(held) == sorted(held_values)
        finally:
            for c in consumers:
                c._aio._closed = True
                c._thread.stop()
                c._closed = True
        victim = leaders[0]
        cluster.kill(victim)
        for p in range(PARTITIONS):
            cluster.wait_for_leader(topic, p, exclude=victim)
        survivors = ",".join(f"127.0.0.1:{port}" for node, port in cluster.client_ports.items() if node != victim)
        # the state partitions' new leaders start past the pruned records too
        for p in state_partitions:
            cluster.wait_for_leader(STATE_TOPIC, p, exclude=victim)
        deadline = time.monotonic() + 30
        while min(_log_starts(survivors, state_partitions).values()) == 0:
            assert time.monotonic() < deadline, _log_starts(survivors, state_partitions)
            time.sleep(0.3)
        again = klog.ShareConsumer(topic, bootstrap_servers=survivors, group_id=group)
        try:
            redelivered: list[bytes] = []
            deadline = time.monotonic() + 40   # the held records' locks (15 s) run out where no leader moved
            while len(redelivered) < len(held_values) and time.monotonic() < deadline:
                redelivered.extend(r.value for r in again.poll(timeout=0.5))
            assert sorted(redelivered) == sorted(held_values)   # accepted ones never again
        finally:
            again.close()


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_share_acknowledgements_that_cannot_be_sent_are_reported_by_commit_sync(tmp_path, kind):
    """Records rejected on three partitions: one left without a leader (its only replica killed), one whose
    leadership moved to a broker the consumer has no share session with, one on a live leader. commit_sync reports
    an error for the first two (their acknowledgements could not be sent; before, they were dropped and the result
    had no entry for them, as if they had succeeded) and success for the third, whose rejection is made."""
    with make_cluster(kind, tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        a, b, c = cluster.node_ids
        solo, moved = f"solo-{uuid.uuid4().hex[:6]}", f"moved-{uuid.uuid4().hex[:6]}"
        leaderless, moving, live = (solo, 0), (moved, 0), (solo, 1)
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(solo, replica_assignment={0: [a], 1: [b]}),
                                 klog.client.NewTopic(moved, replica_assignment={0: [a, c]})])
        cluster.wait_for_topic(solo, 2)
        cluster.wait_for_topic(moved, 1)
        cluster.wait_for_isr(moved, 0, [a, c])
        group = f"g-{solo}"
        consumer = klog.ShareConsumer(solo, moved, bootstrap_servers=bootstrap, group_id=group,
                                      acknowledgement_mode="explicit")
        try:
            ready_to_read([consumer], 3)
            with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:
                for topic, partition in (leaderless, moving, live):
                    p.send(topic, value=f"{topic}-{partition}".encode(), partition=partition)
                p.flush()
            # the three records held at once (a poll with some of them releases those: they come again)
            deadline = time.monotonic() + 60
            while True:
                assert time.monotonic() < deadline, "the three records were not delivered together"
                records = consumer.poll(timeout=0.5)
                if {(r.topic, r.partition) for r in records} == {leaderless, moving, live}:
                    break
                for r in records:
                    consumer.acknowledge(r, "release")
            for r in records:
                consumer.acknowledge(r, "reject")
            cluster.kill(a)
            assert cluster.wait_for_leader(moved, 0, exclude=a) == c
            aio = consumer._aio
            deadline = time.monotonic() + 60
            while not (aio._leader(leaderless) is None and aio._leader(moving) == c):
                assert time.monotonic() < deadline, "the consumer's metadata never showed the leaders' change"
                with contextlib.suppress(Exception):
                    consumer._run(aio.cluster.refresh_metadata([solo, moved]))
                time.sleep(0.2)
            outcome = consumer.commit_sync()
            assert isinstance(outcome.get(leaderless), Exception), outcome
            assert isinstance(outcome.get(moving), Exception), outcome
            assert outcome.get(live, "missing") is None, outcome
            # the rejection reported made is: the group has nothing of the live partition left to deliver (lag 0;
            # Kafka keeps the start offset at the archived record)
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        starts: object = admin.list_share_group_offsets(group)
                    except Exception as exc:  # noqa: BLE001 - a coordinator moving: asked again
                        starts = exc
                    if isinstance(starts, dict) and starts.get(klog.client.TopicPartition(*live), (-1, -1))[1] == 0:
                        break
                    assert time.monotonic() < deadline, f"the rejected record of {live} is not done: {starts}"
                    time.sleep(0.3)
        finally:
            consumer.close()


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_share_group_lag_is_known_where_the_group_coordinator_has_no_replica(tmp_path, kind):
    """A share-partition's lag (DescribeShareGroupOffsets v1, KIP-1226) is its leader's end offset less the start
    offset and the records delivered to completion: Kafka's group coordinator asks the leader (ListOffsets). Three
    single-replica partitions, one per broker: whichever broker coordinates the group, two of them have no replica
    there. (klog read only a local log: their lag was -1.)"""
    with make_cluster(kind, tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"spread-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(
                topic, replica_assignment={i: [node] for i, node in enumerate(cluster.node_ids)})])
        cluster.wait_for_topic(topic, 3)
        group = f"g-{topic}"
        consumer = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
        try:
            ready_to_read([consumer], 3)
            with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:
                for partition in range(3):
                    for i in range(2):
                        p.send(topic, value=f"{partition}-{i}".encode(), partition=partition)
                p.flush()
            got: list = []
            deadline = time.monotonic() + 60
            while len(got) < 6:
                assert time.monotonic() < deadline, f"only {len(got)} of 6 records delivered"
                got.extend(consumer.poll(timeout=0.5))
            consumer.commit_sync()   # accepted: each partition's start offset moves past its two records
        finally:
            consumer.close()
        with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:   # partition p: p + 1 records not read
            for partition in range(3):
                for i in range(partition + 1):
                    p.send(topic, value=f"late-{partition}-{i}".encode(), partition=partition)
            p.flush()
        want = {klog.client.TopicPartition(topic, partition): partition + 1 for partition in range(3)}
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            deadline = time.monotonic() + 30
            while True:
                try:
                    offsets: object = admin.list_share_group_offsets(group)
                except Exception as exc:  # noqa: BLE001 - a state write still under way: asked again
                    offsets = exc
                if isinstance(offsets, dict) and {tp: lag for tp, (_, lag) in offsets.items()} == want:
                    break
                assert time.monotonic() < deadline, f"the lags are not {want}: {offsets}"
                time.sleep(0.3)


def _list_offsets_answered(metrics_port: int) -> float:
    """ListOffsets requests a klog node has answered (its Prometheus endpoint)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('kafka_network_requestmetrics_requests_total{') and 'request="ListOffsets"' in line)


def test_share_group_lags_ask_each_leader_once(tmp_path):
    """The group coordinator asks each partition leader for the end offsets of all that leader's share-partitions
    in one ListOffsets, the leaders at once (Kafka's PartitionMetadataClient batches per leader too). Six
    single-replica partitions, two per broker: describing the group's offsets sends each of the two brokers that
    are not the coordinator one ListOffsets. (klog asked partition by partition, each on a connection of its own:
    two each.)"""
    metrics = {node: free_port() for node in (1, 2, 3)}
    with KlogCluster(tmp_path / "cluster", 3, properties=PROPERTIES, node_properties={
            node: {"klog.metrics.listener": f"127.0.0.1:{port}"} for node, port in metrics.items()}) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"spread-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, replica_assignment={
                i: [cluster.node_ids[i % 3]] for i in range(6)})])
        cluster.wait_for_topic(topic, 6)
        group = f"g-{topic}"
        consumer = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
        try:
            ready_to_read([consumer], 6)
            _produce(bootstrap, topic, [f"r{i}".encode() for i in range(12)])
            got: list = []
            deadline = time.monotonic() + 60
            while len(got) < 12:
                assert time.monotonic() < deadline, f"only {len(got)} of 12 records delivered"
                got.extend(consumer.poll(timeout=0.5))
            consumer.commit_sync()
        finally:
            consumer.close()
        want = {klog.client.TopicPartition(topic, p): 0 for p in range(6)}
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            deadline = time.monotonic() + 30
            while True:   # every start offset written: each partition's lag 0, asked of its leader
                before = {node: _list_offsets_answered(port) for node, port in metrics.items()}
                offsets = admin.list_share_group_offsets(group)
                after = {node: _list_offsets_answered(port) for node, port in metrics.items()}
                if {tp: lag for tp, (_, lag) in offsets.items()} == want:
                    break
                assert time.monotonic() < deadline, f"the lags are not {want}: {offsets}"
                time.sleep(0.3)
        asked = {node: after[node] - before[node] for node in metrics}
        assert sorted(asked.values()) == [0, 1, 1], asked

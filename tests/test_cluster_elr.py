"""Eligible leader replicas, strict min ISR, replicated DeleteRecords and acks=all's errors on real clusters: one
script for klog (:class:`klog.testing.cluster.KlogCluster`) and Apache Kafka 4.x
(:class:`klog.testing.kafka.KafkaCluster`), answers read on the wire.

- ELR (KIP-966): with RF=3 and min.insync.replicas=2, followers paused out of the ISR (SIGSTOP, taken out by
  replica.lag.time.max.ms) leave it {leader} and the last one to leave in the ELR (DescribeTopicPartitions);
  acks=all is refused; the leader is SIGKILLed; once the followers run again the partition is led by the ELR
  member, which holds every acknowledged record, never by the replica that missed some (no unclean election).
- DeleteRecords on the leader answers once every live replica moved its log start: after a failover ListOffsets
  earliest on the new leader gives the deleted-to offset; a paused follower holds it back until timeout_ms.
- acks=all with a paused follower: REQUEST_TIMED_OUT when the request's timeout elapses before the ISR shrinks;
  when the ISR shrinks under min.insync.replicas under a waiting batch, the high watermark stays (strict min ISR)
  and the batch times out too, as in Kafka 4.x.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs
from replication_support import produce_until_accepted, produce_until_refused

pytestmark = pytest.mark.timeout(600)

NONE, REQUEST_TIMED_OUT = 0, 7
#: followers leave the ISR after this lag; sessions outlast every pause (no fencing while a node is paused)
LAG_MS = 3000
PROPERTIES = {**CLUSTER_TIMING, "replica.lag.time.max.ms": LAG_MS, "broker.session.timeout.ms": 20000,
              "min.insync.replicas": 2, "replica.fetch.wait.max.ms": 200}


def _open(kind: str, root: Any, size: int) -> Cluster:
    if kind == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        return KafkaCluster(root, size, properties=PROPERTIES, startup_timeout=300)
    return KlogCluster(root, size, properties=PROPERTIES)


@pytest.fixture(params=["klog", "kafka"], scope="module")
def three(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with _open(request.param, tmp_path_factory.mktemp(f"{request.param}-3"), 3) as cluster:
        cluster.wait_for_brokers()
        yield cluster


def _rf3_topic(cluster: Cluster, configs: dict[str, str] | None = None) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 60
    while (answer := cluster.create_topic(name, 1, 3, configs=configs))[0] != 0:
        assert time.monotonic() < deadline, answer
        time.sleep(0.3)
    cluster.wait_for_isr(name, 0, cluster.node_ids)
    return name


def _produce(cluster: Cluster, node: int, topic: str, values: list[bytes], acks: int = -1,
             timeout_ms: int = 15000) -> int:
    with cluster.wire(node, timeout=timeout_ms / 1000 + 15) as wire:
        answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0,
                                                       "records": encode_batch([{"value": v} for v in values])}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def _describe(cluster: Cluster, node: int, topic: str) -> Any:
    """DescribeTopicPartitions (75) v0: the partition's leader, ISR, ELR and last known ELR."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": topic}],
                                                                    "response_partition_limit": 100, "cursor": None})
    return answer.topics[0].partitions[0]


def _earliest(cluster: Cluster, node: int, topic: str) -> tuple[int, int]:
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
    p = answer.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


def _delete_records(cluster: Cluster, node: int, topic: str, offset: int, timeout_ms: int) -> tuple[int, int]:
    with cluster.wire(node, timeout=timeout_ms / 1000 + 15) as wire:
        answer = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}], "timeout_ms": timeout_ms})
    p = answer.topics[0].partitions[0]
    return int(p.error_code), int(p.low_watermark)


def _consume(cluster: Cluster, node: int, topic: str, expected: int, timeout: float = 40.0) -> list[bytes]:
    return [value for _, value in cluster.read(topic, [0], expected, via=node, timeout=timeout)]


def _follower_not_controller(cluster: Cluster, leader: int) -> int:
    """A follower to pause that is not the active controller (a paused controller holds every AlterPartition until
    the leader's controller request times out: Kafka's is 30 s)."""
    controller = cluster.wait_for_controller()
    return next(r for r in cluster.node_ids if r not in (leader, controller))


def _until(condition: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.2)
    return value


@pytest.mark.parametrize("kind", ["klog", "kafka"])
@pytest.mark.long
def test_an_eligible_leader_replica_takes_over_with_every_acknowledged_record_and_no_unclean_election(
        kind: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    # 5 combined nodes: the quorum outlives two paused replicas of the 3 (and comes back after the leader's kill)
    cluster = _open(kind, tmp_path_factory.mktemp(f"{kind}-5"), 5)
    with cluster:
        cluster.wait_for_brokers()
        topic = f"elr-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + 60
        while (answer := cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"}))[0] != 0:
            assert time.monotonic() < deadline, answer
            time.sleep(0.3)
        leader = cluster.wait_for_leader(topic, 0)
        replicas = list(_describe(cluster, leader, topic).replica_nodes)
        _until(lambda: sorted(_describe(cluster, leader, topic).isr_nodes) == sorted(replicas), "the full ISR")
        first, second = [r for r in replicas if r != leader]
        acked = [b"before-%d" % i for i in range(20)]
        assert _produce(cluster, leader, topic, acked) == NONE
        cluster.pause(first)
        _until(lambda: sorted(_describe(cluster, leader, topic).isr_nodes) == sorted([leader, second]),
               f"{first} out of the ISR")
        p = _describe(cluster, leader, topic)
        assert list(p.eligible_leader_replicas) == [], "at min.insync.replicas: no ELR"
        more = [b"while-%d-is-out-%d" % (first, i) for i in range(20)]
        assert _produce(cluster, leader, topic, more) == NONE   # acknowledged by the leader and `second` only
        acked += more
        cluster.pause(second)
        p = _until(lambda: (d := _describe(cluster, leader, topic)) and list(d.isr_nodes) == [leader] and d,
                   f"{second} out of the ISR")
        assert list(p.eligible_leader_replicas) == [second], (kind, p)
        produce_until_refused(lambda value: _produce(cluster, leader, topic, [value], timeout_ms=2000))
        assert _produce(cluster, leader, topic, [b"acks-1"], acks=1) == NONE   # beyond the frozen HW
        cluster.kill(leader)
        cluster.resume(first)
        cluster.resume(second)
        # `first` lacks acknowledged records: only `second` (an eligible leader replica) may lead
        new_leader = cluster.wait_for_leader(topic, 0, timeout=90)
        assert new_leader == second, (kind, new_leader, _describe(cluster, new_leader, topic))
        p = _describe(cluster, second, topic)
        # `first` may already be back in the ISR, but only after fetching what it lacked from `second`
        # (Kafka re-admits it within milliseconds of the resume); the killed leader never is
        assert p.leader_id == second and second in p.isr_nodes and set(p.isr_nodes) <= {second, first}, (kind, p)
        if list(p.isr_nodes) == [second]:
            assert leader in list(p.eligible_leader_replicas), (kind, p)
        got = _consume(cluster, second, topic, len(acked))
        assert got[:len(acked)] == acked, (kind, len(got))


@pytest.mark.long
def test_delete_records_moves_every_replicas_log_start_and_a_paused_follower_holds_it_back(three: Cluster) -> None:
    topic = _rf3_topic(three, {"min.insync.replicas": "2"})
    leader = three.wait_for_leader(topic, 0)
    assert _produce(three, leader, topic, [b"v%d" % i for i in range(50)]) == NONE
    assert _delete_records(three, leader, topic, 30, 15000) == (NONE, 30)
    assert _earliest(three, leader, topic) == (NONE, 30)
    # a paused follower (alive, not fenced) does not move its log start: the request times out
    follower = _follower_not_controller(three, leader)
    three.pause(follower)
    try:
        assert _delete_records(three, leader, topic, 40, 1500)[0] == REQUEST_TIMED_OUT
    finally:
        three.resume(follower)
    three.wait_for_isr(topic, 0, three.node_ids)
    # every replica moved: whichever leads next starts its log at 40
    three.kill(leader)
    try:
        new_leader = three.wait_for_leader(topic, 0, exclude=leader)
        assert _until(lambda: (e := _earliest(three, new_leader, topic))[0] == NONE and e, "ListOffsets") == \
            (NONE, 40)
        assert _produce(three, new_leader, topic, [b"after"]) == NONE
    finally:
        three.restart(leader)
    three.wait_for_isr(topic, 0, three.node_ids, timeout=90)


def test_acks_all_times_out_behind_a_paused_follower_and_behind_an_isr_shrunk_under_min_isr(three: Cluster) -> None:
    topic = _rf3_topic(three, {"min.insync.replicas": "3"})
    leader = three.wait_for_leader(topic, 0)
    assert _produce(three, leader, topic, [b"all-three"]) == NONE
    follower = _follower_not_controller(three, leader)
    three.pause(follower)
    try:
        # the request's timeout elapses before replica.lag.time.max.ms takes the follower out of the ISR
        started = time.monotonic()
        assert _produce(three, leader, topic, [b"timed-out"], timeout_ms=1000) == REQUEST_TIMED_OUT
        assert time.monotonic() - started < LAG_MS / 1000
        # now the ISR shrinks under min.insync.replicas=3 while the batch waits: the HW stays where it was
        # (strict min ISR), so the batch times out as well
        assert _produce(three, leader, topic, [b"waiting"], timeout_ms=3 * LAG_MS) == REQUEST_TIMED_OUT
        assert len(_describe(three, leader, topic).isr_nodes) == 2
        produce_until_refused(lambda value: _produce(three, leader, topic, [value], timeout_ms=2000))
    finally:
        three.resume(follower)
    three.wait_for_isr(topic, 0, three.node_ids, timeout=90)
    produce_until_accepted(lambda: _produce(three, leader, topic, [b"accepted-again"]))


@pytest.mark.long
def test_min_insync_replicas_counts_at_most_the_replication_factor(three: Cluster) -> None:
    # Kafka 4.x's effectiveMinIsr = min(min.insync.replicas, replicas): acks=all is accepted with every replica in sync
    single = f"rf1-{uuid.uuid4().hex[:8]}"
    assert three.create_topic(single, 1, 1, configs={"min.insync.replicas": "2"}) == (0, None)
    leader = three.wait_for_leader(single, 0)
    assert _until(lambda: (code := _produce(three, leader, single, [b"one"])) != 6 and [code], "a leader") == [NONE]
    topic = _rf3_topic(three, {"min.insync.replicas": "5"})
    assert _produce(three, three.wait_for_leader(topic, 0), topic, [b"three"]) == NONE

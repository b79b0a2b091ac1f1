"""Clean and unclean restarts told apart (KIP-966), one script for klog and Apache Kafka 4.x: 3 brokers and a
dedicated controller (the quorum outlives every broker), a topic with RF=3 and min.insync.replicas=2.

One follower's peer is SIGKILLed (ISR {leader, follower}, at min ISR: no ELR); the follower then stops, cleanly
(SIGTERM: a controlled shutdown, its logs closed and its broker epoch left in ``.kafka_cleanshutdown``) or by SIGKILL;
either way the ISR shrinks to {leader} and the follower enters the ELR. The leader is SIGKILLed and the follower
restarts alone. After a clean stop it registers with its previous broker epoch, keeps its ELR membership and is
elected from the ELR with every acknowledged record (unclean leader election stays off). After a SIGKILL it cannot
prove it lost nothing: the controller takes it out of the ELR when it registers and the partition stays leaderless.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs

pytestmark = pytest.mark.timeout(600)

NONE, NO_LEADER = 0, -1
PROPERTIES = {**CLUSTER_TIMING, "min.insync.replicas": 2, "replica.fetch.wait.max.ms": 200,
              "unclean.leader.election.enable": "false"}


def _open(kind: str, root: Any) -> Cluster:
    if kind == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        return KafkaCluster(root, 3, properties=PROPERTIES, controllers=1, startup_timeout=300)
    return KlogCluster(root, 3, properties=PROPERTIES, controllers=1)


def _describe(cluster: Cluster, node: int, topic: str) -> Any:
    """DescribeTopicPartitions (75) v0 at ``node``: leader, ISR, ELR of partition 0."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": topic}],
                                                                    "response_partition_limit": 100, "cursor": None})
    return answer.topics[0].partitions[0]


def _until(condition: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OSError, ConnectionError):   # a broker still starting
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.2)


def _produce(cluster: Cluster, node: int, topic: str, values: list[bytes]) -> int:
    with cluster.wire(node, timeout=30) as wire:
        answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 15000,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0, "records": encode_batch([{"value": v}
                                                                                            for v in values])}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def _high_watermark(cluster: Cluster, node: int, topic: str) -> int:
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    p = answer.topics[0].partitions[0]
    assert p.error_code == NONE, p
    return int(p.offset)


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_a_replica_stopped_cleanly_in_the_elr_is_elected_from_it_after_its_peers_die_and_a_killed_one_is_not(
        kind: str, stop: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    with _open(kind, tmp_path_factory.mktemp(f"{kind}-{stop}")) as cluster:
        cluster.wait_for_brokers()
        topic = f"restart-{uuid.uuid4().hex[:8]}"
        _until(lambda: cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})[0] == NONE,
               "CreateTopics", 60)
        leader = cluster.wait_for_leader(topic, 0)
        replicas = list(_describe(cluster, leader, topic).replica_nodes)
        _until(lambda: sorted(_describe(cluster, leader, topic).isr_nodes) == sorted(replicas), "the full ISR")
        peer, follower = sorted(r for r in replicas if r != leader)
        acked = [b"acked-%d" % i for i in range(30)]
        assert _produce(cluster, leader, topic, acked) == NONE

        cluster.kill(peer)
        p = _until(lambda: (d := _describe(cluster, leader, topic)) and sorted(d.isr_nodes) == sorted(
            [leader, follower]) and d, f"{peer} fenced and out of the ISR")
        assert list(p.eligible_leader_replicas) == [], "at min.insync.replicas: no ELR"
        marker = cluster.log_dir(follower) / ".kafka_cleanshutdown"
        if stop == "clean":
            cluster.stop_node(follower)
            # Kafka's CleanShutdownFileHandler content: the epoch of the registration it stopped under
            content = json.loads(marker.read_text())
            assert set(content) == {"version", "brokerEpoch"} and content["version"] == 0, content
            assert content["brokerEpoch"] > 0, content
        else:
            cluster.kill(follower)
            assert not marker.exists()
        p = _until(lambda: (d := _describe(cluster, leader, topic)) and list(d.isr_nodes) == [leader] and d,
                   f"{follower} out of the ISR")
        assert list(p.eligible_leader_replicas) == [follower], (kind, p)

        cluster.kill(leader)
        cluster.restart(follower)
        if stop == "clean":
            # an eligible leader replica that shut down cleanly: elected without unclean leader election
            assert cluster.wait_for_leader(topic, 0, timeout=90) == follower
            p = _describe(cluster, follower, topic)
            assert (p.leader_id, list(p.isr_nodes)) == (follower, [follower]), (kind, p)
            assert _high_watermark(cluster, follower, topic) == len(acked)
            got = [value for _, value in cluster.read(topic, [0], len(acked), via=follower, timeout=40)]
            assert got[:len(acked)] == acked, (kind, len(got))
        else:
            # its registration (which leaves the ELR) is applied before the unfencing that lists it as live
            _until(lambda: follower in cluster.live_brokers(follower), f"{follower} registered and unfenced")
            # and once the killed leader's session expired (it may outlive the restart), nobody may lead
            p = _until(lambda: (d := _describe(cluster, follower, topic)) and d.leader_id != leader and d,
                       f"the killed leader {leader} fenced")
            assert p.leader_id == NO_LEADER and follower not in list(p.eligible_leader_replicas), (kind, p)
            assert follower not in list(p.isr_nodes), (kind, p)

"""ListOffsets on replicated partitions (one real cluster of klog and one of Apache Kafka 4.x for the module, each a
controller-only node and 3 broker processes; the same checks pass on both): offsets past the high watermark are never answered to clients. A max timestamp or timestamp lookup finding a record
the ISR does not have yet answers -1 until the followers catch up, and a new leader whose high watermark is still
below the offset its leadership started at answers OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) instead of
a latest offset that would move consumers backwards (Kafka's ``Partition.fetchOffsetForTimestamp``).

Followers are paused with SIGSTOP; ``replica.lag.time.max.ms`` and ``broker.session.timeout.ms`` are far beyond the
module's length, so a paused follower stays in the ISR and holds the high watermark back until it is resumed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, cluster_of
from klog.testing.cluster_api import Cluster
from replication_support import check_clean, segment_bytes, wait

pytestmark = pytest.mark.timeout(240)

BASE = int(time.time() * 1000) - 100_000
NONE, LEADER_NOT_AVAILABLE = ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE
NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE = ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.OFFSET_NOT_AVAILABLE
PROPERTIES: dict[str, Any] = {**CLUSTER_TIMING, "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
                              "replica.lag.time.max.ms": 600_000, "broker.session.timeout.ms": 600_000,
                              "min.insync.replicas": 1}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """3 brokers and a controller of klog or of Apache Kafka, from the same properties; healed after each test."""
    with cluster_of(request.param, tmp_path_factory.mktemp(f"lo-{request.param}"), 3, controllers=1,
                    properties=PROPERTIES, heap="512m") as started:
        started.wait_for_brokers()
        yield started


@pytest.fixture(autouse=True)
def _resumed(cluster: Cluster) -> Iterator[None]:
    """A node a test paused runs again after it. A stopped node cannot restart within the module: its broker session
    (``broker.session.timeout.ms``) outlasts the module, and both Kafka's controller and klog's refuse the new
    registration (DUPLICATE_BROKER_REGISTRATION) while it lasts; the one test stopping a node runs last."""
    yield
    for node in list(cluster.paused):
        cluster.resume(node)
    check_clean(cluster)


def _produce(cluster: Cluster, node: int, topic: str, records: list[dict[str, Any]], acks: int) -> None:
    with cluster.wire(node) as wire:
        produced = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": encode_batch(records)}]}]})
    assert produced.responses[0].partition_responses[0].error_code == NONE


def _list(cluster: Cluster, node: int, topic: str, timestamp: int, version: int = 8,
          replica_id: int = -1) -> tuple[int, int, int]:
    """Node ``node``'s (error code, offset, timestamp) for one ListOffsets lookup of partition 0."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, version, {
            "replica_id": replica_id, "isolation_level": 0, "timeout_ms": 5000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": timestamp, "max_num_offsets": 1}]}]})
    p = answer.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def _replicated_topic(cluster: Cluster, replicas: int) -> tuple[str, list[int]]:
    """A new 1-partition topic on ``replicas`` brokers, every replica in its ISR; returns it and its replicas, the
    leader first."""
    topic = f"lo-{time.monotonic_ns()}"
    assert cluster.create_topic(topic, 1, replicas)[0] == NONE
    leader = cluster.wait_for_leader(topic, 0)
    meta = next(p for p in cluster.metadata(leader, [topic]).topics[0].partitions if p.partition_index == 0)
    order = list(meta.replica_nodes)
    cluster.wait_for_isr(topic, 0, order)
    assert order[0] == leader, (order, leader)   # a new topic's leader is its preferred (first) replica
    return topic, order


def test_max_timestamp_and_timestamp_lookups_answer_nothing_past_the_high_watermark_until_the_follower_catches_up(
        cluster: Cluster) -> None:
    topic, (leader, follower) = _replicated_topic(cluster, 2)
    _produce(cluster, leader, topic, [{"value": b"a", "timestamp": BASE}, {"value": b"b", "timestamp": BASE + 10}],
             acks=-1)
    cluster.pause(follower)
    try:
        # acks=1: in the leader's log (offset 2) with the partition's largest timestamp, not in the follower's
        _produce(cluster, leader, topic, [{"value": b"late", "timestamp": BASE + 1000}], acks=1)
        assert _list(cluster, leader, topic, -1) == (NONE, 2, -1)
        assert _list(cluster, leader, topic, -3) == (NONE, -1, -1)
        assert _list(cluster, leader, topic, BASE + 500) == (NONE, -1, -1)
        assert _list(cluster, leader, topic, BASE + 5) == (NONE, 1, BASE + 10)
        # a debugging request (replica id -2) is bounded by the log end, as Kafka's
        assert _list(cluster, leader, topic, -3, replica_id=-2) == (NONE, 2, BASE + 1000)
    finally:
        cluster.resume(follower)
    wait(lambda: _list(cluster, leader, topic, -1) == (NONE, 3, -1), "the high watermark at 3")
    assert _list(cluster, leader, topic, -3) == (NONE, 2, BASE + 1000)
    assert _list(cluster, leader, topic, BASE + 500) == (NONE, 2, BASE + 1000)


def test_a_new_leader_answers_offset_not_available_until_its_high_watermark_reaches_its_epoch_start(
        cluster: Cluster) -> None:
    """The leader's acks=1 records reach the next leader but not the paused third replica, so the high watermark
    stays at 2; the leader shuts down (controlled) and the next one leads from its log end, 5, with the high
    watermark it learnt, 2. Until the paused replica is back and fetches to 5, latest and lookups past 2 answer
    OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5); a consumer's latest never goes backwards. The old leader
    stays stopped: the module's last test."""
    topic, (old, new, paused) = _replicated_topic(cluster, 3)
    _produce(cluster, old, topic, [{"value": b"a", "timestamp": BASE}, {"value": b"b", "timestamp": BASE + 10}],
             acks=-1)
    cluster.pause(paused)
    try:
        _produce(cluster, old, topic, [{"value": b"%d" % i, "timestamp": BASE + 100 + i} for i in range(3)],
                 acks=1)
        wait(lambda: segment_bytes(cluster, new, topic, 0) == segment_bytes(cluster, old, topic, 0),
             "the next leader holding the acks=1 records")
        first = _list(cluster, old, topic, -1)
        assert first == (NONE, 2, -1)
        cluster.stop_node(old)   # a controlled shutdown: the next live ISR replica in order leads
        assert cluster.wait_for_leader(topic, 0, exclude=old) == new
        wait(lambda: _list(cluster, new, topic, -1)[0] != NOT_LEADER_OR_FOLLOWER, "the new leader leading")
        assert _list(cluster, new, topic, -1) == (OFFSET_NOT_AVAILABLE, -1, -1)
        assert _list(cluster, new, topic, -1, version=4) == (LEADER_NOT_AVAILABLE, -1, -1)
        assert _list(cluster, new, topic, -1, version=1) == (LEADER_NOT_AVAILABLE, -1, -1)
        assert _list(cluster, new, topic, -3) == (OFFSET_NOT_AVAILABLE, -1, -1)
        assert _list(cluster, new, topic, BASE + 50) == (OFFSET_NOT_AVAILABLE, -1, -1)
        # below the high watermark a lookup is answered; earliest is never held back
        assert _list(cluster, new, topic, BASE + 5) == (NONE, 1, BASE + 10)
        assert _list(cluster, new, topic, -2) == (NONE, 0, -1)
        assert _list(cluster, new, topic, -1, replica_id=-2) == (NONE, 5, -1)
    finally:
        cluster.resume(paused)
    seen = []

    def caught_up() -> bool:
        seen.append(_list(cluster, new, topic, -1))
        return seen[-1] == (NONE, 5, -1)

    wait(caught_up, "the new leader's high watermark at its epoch start")
    assert all(answer == (OFFSET_NOT_AVAILABLE, -1, -1) or answer[1] >= first[1] for answer in seen), seen
    assert _list(cluster, new, topic, -3) == (NONE, 4, BASE + 102)

"""A follower whose log ends before the leader's log start (a replica added by a reassignment after DeleteRecords
moved the leader's log start up) restarts its log at the leader's log start, as Kafka's ``truncateFullyAndStartAt``,
then catches up and joins the ISR. A 2-node klog cluster (real processes), wire requests and confluent-kafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, cluster_of
from klog.testing.cluster_api import Cluster
from replication_support import wait

pytestmark = pytest.mark.timeout(300)

TOPIC = "moved-start"
#: the leader's log start after DeleteRecords: past the end (0) of the empty log the new replica starts with
DELETED_BEFORE = 30


def _log_start(cluster: Cluster, node: int) -> int | None:
    """The partition's log start in the node's log-start-offset-checkpoint (written as the log start moves)."""
    path = cluster.log_dir(node) / "log-start-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if (name, partition) == (TOPIC, "0"):
            return int(offset)
    return None


def _segment_bases(cluster: Cluster, node: int) -> list[int]:
    return sorted(int(p.stem) for p in (cluster.log_dir(node) / f"{TOPIC}-0").glob("*.log"))


def test_a_replica_added_after_the_leaders_log_start_moved_past_its_end_restarts_there_and_joins_the_isr(
        tmp_path: Path) -> None:
    """Without the restart the new follower was refused every round (its log cut to its own start, then records
    deleted past a high watermark clamped to its log end): it never fetched a batch nor joined the ISR."""
    properties = {**CLUSTER_TIMING, "replica.fetch.backoff.ms": 200, "replica.fetch.wait.max.ms": 200}
    with cluster_of("klog", tmp_path, 2, properties=properties) as cluster:
        cluster.wait_for_brokers()
        with cluster.wire(1) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
                 "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                 "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
                "timeout_ms": 30000, "validate_only": False}).topics[0]
            assert created.error_code == 0, created
        cluster.wait_for_leader(TOPIC, 0)
        # one record a batch: the log start moves to a batch's first offset (a follower fetching from a log start
        # inside a batch is another case)
        producer = Producer({"bootstrap.servers": cluster.node_bootstrap(1), "acks": "all"})
        sent = {(0, b"before-%d" % i) for i in range(50)}
        for _, value in sorted(sent, key=lambda pair: int(pair[1].split(b"-")[1])):
            producer.produce(TOPIC, value=value, partition=0)
            assert producer.flush(30) == 0
        with cluster.wire(1) as wire:
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "offset": DELETED_BEFORE}]}], "timeout_ms": 30000})
        part = deleted.topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (0, DELETED_BEFORE)

        with cluster.wire(1) as wire:
            moved = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
        assert moved.error_code == 0 and [p.error_code for t in moved.responses for p in t.partitions] == [0]
        cluster.wait_for_isr(TOPIC, 0, [1, 2], timeout=40)

        # the follower's log starts where the leader's does, and holds the leader's batches from there
        wait(lambda: _log_start(cluster, 2) == DELETED_BEFORE, "node 2's log start checkpoint")
        assert _log_start(cluster, 1) == DELETED_BEFORE
        assert _segment_bases(cluster, 2)[0] == DELETED_BEFORE
        # acks=all with min.insync.replicas=2 needs the follower in the ISR
        after = cluster.produce(TOPIC, [0], 10, via=1, tag="after")
        got = cluster.consume(TOPIC, [0], 50 - DELETED_BEFORE + 10, via=1)
        assert after <= got and got & sent == {(0, b"before-%d" % i) for i in range(DELETED_BEFORE, 50)}

"""A follower whose log ends before the leader's log start (a replica added by a reassignment after DeleteRecords
moved the leader's log start up) restarts its log at the leader's log start, as Kafka's ``truncateFullyAndStartAt``,
then catches up and joins the ISR; when that log start is inside a batch, the follower's empty log restarts at the
batch's base to take it (Kafka's follower on an UnexpectedAppendOffsetException). A 2-node cluster of klog and of
Apache Kafka 4.x (real processes; the same checks pass on both), wire requests and confluent-kafka; a failed full
truncation (klog's log lines) on klog only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster, cluster_of
from klog.testing.cluster_api import Cluster
from replication_support import wait, wait_for_failed_log_dir

pytestmark = pytest.mark.timeout(300)

TOPIC = "moved-start"
RECORDS = 50
#: the leader's log start after DeleteRecords: past the end (0) of the empty log the new replica starts with
DELETED_BEFORE = 25


def _listed_log_start(cluster: Cluster, node: int, topic: str = TOPIC) -> int:
    """The node's replica's log start: ListOffsets earliest as a debugging request (replica id -2), which a follower
    answers too (Kafka's and klog's)."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -2, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return int(partition.offset)


def _log_start(cluster: Cluster, node: int, topic: str = TOPIC) -> int | None:
    """The partition's log start in the node's log-start-offset-checkpoint (klog writes it as the log start moves;
    Kafka every ``log.flush.start.offset.checkpoint.interval.ms``, and only a log start past the first segment's
    base, which a follower restarted at a batch's base does not have)."""
    path = cluster.log_dir(node) / "log-start-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if (name, partition) == (topic, "0"):
            return int(offset)
    return None


def _segment_bases(cluster: Cluster, node: int, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (cluster.log_dir(node) / f"{topic}-0").glob("*.log"))


@pytest.fixture(scope="module", params=["klog", "kafka"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 2-node cluster of klog or of Apache Kafka for the module (each test's topic its own)."""
    properties = {**CLUSTER_TIMING, "replica.fetch.backoff.ms": 200, "replica.fetch.wait.max.ms": 200}
    with cluster_of(request.param, tmp_path_factory.mktemp(f"tf-{request.param}"), 2, properties=properties,
                    heap="512m") as cluster:
        cluster.wait_for_brokers()
        yield cluster


@pytest.mark.parametrize("per_batch", [1, 10], ids=["log-start-at-a-batch", "log-start-inside-a-batch"])
def test_a_replica_added_after_the_leaders_log_start_moved_past_its_end_restarts_there_and_joins_the_isr(
        pair: Cluster, per_batch: int) -> None:
    """Without the restart the new follower was refused every round (its log cut to its own start, then records
    deleted past a high watermark clamped to its log end): it never fetched a batch nor joined the ISR. With the
    log start inside a batch (offsets 20-29 here), the batch it was sent from there was refused every round."""
    cluster, topic = pair, f"{TOPIC}-{per_batch}"
    with cluster.wire(1) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [1]}],
             "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
            "timeout_ms": 30000, "validate_only": False}).topics[0]
        assert created.error_code == 0, created
    cluster.wait_for_leader(topic, 0)
    with cluster.wire(1) as wire:
        for first in range(0, RECORDS, per_batch):
            answer = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{
                    "name": topic, "partition_data": [{"index": 0, "records": encode_batch(
                        [{"value": b"before-%d" % i} for i in range(first, first + per_batch)])}]}]})
            assert answer.responses[0].partition_responses[0].error_code == 0
    sent = {(0, b"before-%d" % i) for i in range(RECORDS)}
    with cluster.wire(1) as wire:
        deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": DELETED_BEFORE}]}], "timeout_ms": 30000})
    part = deleted.topics[0].partitions[0]
    assert (part.error_code, part.low_watermark) == (0, DELETED_BEFORE)

    with cluster.wire(1) as wire:
        moved = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
    assert moved.error_code == 0 and [p.error_code for t in moved.responses for p in t.partitions] == [0]
    cluster.wait_for_isr(topic, 0, [1, 2], timeout=40)

    # the follower's log starts where the leader's does, and holds the leader's batches from there
    wait(lambda: _listed_log_start(cluster, 2, topic) == DELETED_BEFORE, "node 2's log start")
    assert _listed_log_start(cluster, 1, topic) == DELETED_BEFORE
    if cluster.kind == "klog":   # klog's checkpoint follows the log start as it moves (see _log_start)
        wait(lambda: _log_start(cluster, 2, topic) == DELETED_BEFORE, "node 2's log start checkpoint")
        assert _log_start(cluster, 1, topic) == DELETED_BEFORE
    # (inside a batch: the follower's log took the batch whole, from its base, then moved its start up)
    assert _segment_bases(cluster, 2, topic)[0] == DELETED_BEFORE // per_batch * per_batch
    # acks=all with min.insync.replicas=2 needs the follower in the ISR
    after = cluster.produce(topic, [0], 10, via=1, tag="after")
    got = cluster.consume(topic, [0], RECORDS - DELETED_BEFORE + 10, via=1)
    assert after <= got and got & sent == {(0, b"before-%d" % i) for i in range(DELETED_BEFORE, RECORDS)}


def test_a_follower_whose_full_truncation_fails_midway_takes_its_log_dir_offline_and_stops_fetching_it(
        tmp_path: Path) -> None:
    """Node 2 (two log dirs) is down while the leader's log start moves past node 2's log end; a directory put where
    node 2's segment 0 is renamed when retired (``00000000000000000000.log.deleted``) makes its full truncation fail
    after the new segment was made (EISDIR), which closes the log until a restart. Before, the replica fetcher
    logged the closed log's error at every round for ever and the dir stayed online; now the dir goes offline as
    for a failed leader append: DescribeLogDirs answers KAFKA_STORAGE_ERROR for it (not for the other dir), the
    controller lists node 2 as the partition's offline replica, and the fetcher stops fetching it. klog only: it
    reads klog's log lines, and the failure is made by klog's segment retirement (the name it renames to)."""
    backoff_ms = 200
    properties = {**CLUSTER_TIMING, "replica.fetch.backoff.ms": backoff_ms, "replica.fetch.wait.max.ms": 200}
    dirs = [tmp_path / "node-2-a", tmp_path / "node-2-b"]
    cluster = KlogCluster(tmp_path / "cluster", 3, properties=properties)
    cluster.nodes[2].config["log.dirs"] = ",".join(map(str, dirs))
    with cluster:
        cluster.wait_for_brokers()
        with cluster.wire(1) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
                 "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}], "configs": []}],
                "timeout_ms": 30000, "validate_only": False}).topics[0]
            assert created.error_code == 0, created
        cluster.wait_for_isr(TOPIC, 0, [1, 2])
        [partition_dir] = [d / f"{TOPIC}-0" for d in dirs if (d / f"{TOPIC}-0").is_dir()]
        assert cluster.stop_node(2) == 0
        cluster.wait_for_isr(TOPIC, 0, [1])
        with cluster.wire(1) as wire:
            for i in range(RECORDS):
                answer = wire.request(ApiKey.PRODUCE, 9, {
                    "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{
                        "name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch(
                            [{"value": b"before-%d" % i}])}]}]})
                assert answer.responses[0].partition_responses[0].error_code == 0
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "offset": DELETED_BEFORE}]}], "timeout_ms": 30000})
        part = deleted.topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (0, DELETED_BEFORE)
        # node 2's log [0, 0) ends before the leader's start (25): it restarts at 25, and retiring segment 0
        # (renamed *.deleted, file.delete.delay.ms later removed) meets a directory
        assert sorted(p.name for p in partition_dir.glob("*.log")) == ["00000000000000000000.log"]
        (partition_dir / "00000000000000000000.log.deleted").mkdir()
        cluster.restart(2)
        cluster.wait_for_brokers()

        wait_for_failed_log_dir(cluster, 2, partition_dir.parent, next(d for d in dirs if d != partition_dir.parent),
                                TOPIC)
        # offline at the failed truncation itself, naming its error (before, only once the maintenance pass's
        # flush met the closed log: "log moved-start-0 is closed", the fetcher failing every round until then)
        lines = cluster.log_lines(2)
        [offline_line] = [line for line in lines if f"log dir {partition_dir.parent} is offline" in line]
        assert "rename for delete" in offline_line and "Is a directory" in offline_line, offline_line
        assert any(f"partition {TOPIC}-0: its log dir is offline; no longer fetching it" in line
                   for line in lines), lines
        # the fetcher stopped fetching it before its next round: one failed round, none after (waited for 10
        # rounds of replica.fetch.backoff.ms)
        time.sleep(10 * backoff_ms / 1000)
        failed_rounds = [line for line in cluster.log_lines(2) if "fetch from broker 1 failed" in line]
        assert len(failed_rounds) == 1, failed_rounds

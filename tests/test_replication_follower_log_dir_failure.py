"""A follower whose append fails with any storage error takes its log dir offline, as Kafka's ReplicaFetcherThread
does (an IOException from a log write goes to the LogDirFailureChannel): a 2-node cluster (real processes), node 2
with two log dirs, on klog and on Apache Kafka from the same steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.cluster import CLUSTER_TIMING
from klog.testing.cluster_api import Cluster
from jbod_support import open_cluster
from replication_support import wait, wait_for_failed_log_dir

pytestmark = pytest.mark.timeout(300)

TOPIC = "follower-write"
RECORDS = 20
#: a segment holds about 10 of the records: the follower rolls a segment part way through them (Kafka 4's smallest
#: segment.bytes is 1 MiB)
SEGMENT_BYTES = 1 << 20
VALUE = b"x" * 100_000


def _follower_with_two_dirs(kind: str, tmp_path: Path) -> tuple[Cluster, list[Path]]:
    """A 2-node cluster, node 2 with two log dirs (its metadata log in a third: Kafka halts a node whose metadata
    log dir fails), and TOPIC's one partition on nodes 1 (leader) and 2, both in its ISR. Returns the cluster (not
    yet entered: it is started) and node 2's log dirs."""
    dirs = [tmp_path / "node-2-a", tmp_path / "node-2-b"]
    properties = {**CLUSTER_TIMING, "replica.fetch.backoff.ms": 200, "replica.fetch.wait.max.ms": 200}
    cluster = open_cluster(kind, tmp_path / "cluster", 2, properties, ",".join(map(str, dirs)), node=2,
                           node_properties={"metadata.log.dir": str(tmp_path / "node-2-metadata")})
    return cluster, dirs


def _create(cluster: Cluster, dirs: list[Path]) -> Path:
    """TOPIC created on nodes 1 and 2, both in the ISR; returns node 2's partition directory."""
    cluster.wait_for_brokers()
    with cluster.wire(1) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
             "configs": [{"name": "segment.bytes", "value": str(SEGMENT_BYTES)}]}],
            "timeout_ms": 30000, "validate_only": False}).topics[0]
        assert created.error_code == 0, created
    cluster.wait_for_isr(TOPIC, 0, [1, 2])
    wait(lambda: any((d / f"{TOPIC}-0").is_dir() for d in dirs), "node 2's replica made")
    [partition_dir] = [d / f"{TOPIC}-0" for d in dirs if (d / f"{TOPIC}-0").is_dir()]
    return partition_dir


def _produce(cluster: Cluster, count: int) -> None:
    with cluster.wire(1) as wire:
        for _ in range(count):
            answer = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [{
                    "name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch([{"value": VALUE}])}]}]})
            assert answer.responses[0].partition_responses[0].error_code == 0


def _in_the_way(path: Path) -> None:
    """A non-empty directory at ``path``: no file can be renamed or created there (Kafka's roll deletes a file
    already at the new segment's path, and an empty directory)."""
    path.mkdir()
    (path / "in-the-way").touch()


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
def test_a_follower_append_failing_with_any_storage_error_takes_its_log_dir_offline(kind: str,
                                                                                    tmp_path: Path) -> None:
    """Directories put where node 2's next segment files go make the follower's segment roll fail (EISDIR for
    klog, DirectoryNotEmptyException for Kafka), an error that leaves the log open. Before, klog took a follower's
    log dir offline only for ENOSPC, EIO, EROFS and EDQUOT (or a closed log): the fetcher failed the same append at
    every round for ever, the dir stayed online, and the replica silently fell out of the ISR. Kafka takes the dir offline on any IOException of a
    log write; klog now does the same, naming the error."""
    cluster, dirs = _follower_with_two_dirs(kind, tmp_path)
    with cluster:
        partition_dir = _create(cluster, dirs)
        for offset in range(1, RECORDS + 1):   # wherever the roll happens, a directory is there
            _in_the_way(partition_dir / f"{offset:020d}.log")
        _produce(cluster, RECORDS)
        wait_for_failed_log_dir(cluster, 2, partition_dir.parent, next(d for d in dirs if d != partition_dir.parent),
                                TOPIC)
        if kind == "klog":
            [offline_line] = [line for line in cluster.log_lines(2)
                              if f"log dir {partition_dir.parent} is offline" in line]
            assert "create segment" in offline_line and "Is a directory" in offline_line, offline_line


def test_a_follower_whose_log_start_move_fails_takes_its_log_dir_offline(tmp_path: Path) -> None:
    """DeleteRecords moves the leader's log start past node 2's first segment; node 2 retires that segment when its
    fetch learns the new start, and a directory in the way of its ``.deleted`` name fails the rename. Before, that
    error went unreported (the log start had moved already, so no later round tried again): the dir stayed online
    with a storage error behind it. Now it goes offline as for the follower's other writes. (klog only: Kafka's
    follower deletes the segments below its log start in its retention thread, every 5 minutes by default, and takes
    the dir offline there.)"""
    cluster, dirs = _follower_with_two_dirs("klog", tmp_path)
    with cluster:
        partition_dir = _create(cluster, dirs)
        _produce(cluster, RECORDS)
        wait(lambda: len([p for p in partition_dir.glob("*.log") if p.is_file()]) > 1, "node 2 rolled a segment")
        _in_the_way(partition_dir / "00000000000000000000.log.deleted")
        second = min(int(p.stem) for p in partition_dir.glob("*.log") if int(p.stem) > 0)
        with cluster.wire(1) as wire:
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "offset": second}]}], "timeout_ms": 5000})
        assert deleted.topics[0].partitions[0].error_code in (0, int(ErrorCode.REQUEST_TIMED_OUT)), deleted
        wait_for_failed_log_dir(cluster, 2, partition_dir.parent, next(d for d in dirs if d != partition_dir.parent),
                                TOPIC)
        [offline_line] = [line for line in cluster.log_lines(2) if f"log dir {partition_dir.parent} is offline" in line]
        assert "rename for delete" in offline_line, offline_line

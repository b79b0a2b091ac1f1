"""Shared by the replication tests: a simulated partition log for the state machines' tests (one record per offset,
each with the leader epoch it was written in, and the epoch cache kept as the storage keeps it), and the helpers of
the tests on real 3-node clusters (klog's or Apache Kafka's, :class:`klog.testing.cluster_api.Cluster`): RF=3 topics,
replicas compared byte for byte, the cluster healed after each test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from klog.broker.replication.epochs import LeaderEpochCache
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster

#: every node's properties in the tests on real clusters (Kafka's names; Apache Kafka takes the same)
REPLICATION_PROPERTIES: dict[str, Any] = {
    **CLUSTER_TIMING,
    "min.insync.replicas": 2, "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
    # a paused follower leaves the ISR by its lag (5 s) well before its session expires (12 s): the tests pausing a
    # node stay within the lag or wait for the shrink
    "replica.lag.time.max.ms": 5000, "broker.session.timeout.ms": 12000, "broker.heartbeat.interval.ms": 500,
    # requests to a paused controller time out soon (klog's AlterPartition sender then asks the next one)
    "request.timeout.ms": 3000,
    # no metadata snapshot while the quorum forms: a member starting after the leader snapshotted and compacted its
    # log gets the image as a snapshot, which does not carry the cluster id, and waits for one forever (a
    # controller-node issue outside replication)
    "metadata.log.max.snapshot.interval.ms": 600000,
}
#: the first segment file of a partition (the tests write far less than a segment)
SEGMENT = "00000000000000000000.log"
REQUEST_TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
NOT_ENOUGH_REPLICAS = int(ErrorCode.NOT_ENOUGH_REPLICAS)


class SimLog:
    def __init__(self) -> None:
        self.start = 0
        self.records: list[tuple[int, int]] = []  # (offset, epoch), offsets contiguous from self.start
        self.epochs = LeaderEpochCache()
        self.high_watermark = 0

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.start + len(self.records)

    def append_as_leader(self, count: int, epoch: int) -> int:
        """Append ``count`` records in ``epoch``; the last offset."""
        assert count > 0
        for _ in range(count):
            self.epochs.assign(epoch, self.log_end_offset)
            self.records.append((self.log_end_offset, epoch))
        return self.log_end_offset - 1

    def append_as_follower(self, records: list[tuple[int, int]]) -> None:
        for offset, epoch in records:
            assert offset == self.log_end_offset, (offset, self.log_end_offset)
            self.epochs.assign(epoch, offset)
            self.records.append((offset, epoch))

    def read(self, offset: int, max_records: int) -> list[tuple[int, int]]:
        i = offset - self.start
        return self.records[i:i + max_records]

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset:
            del self.records[max(0, offset - self.start):]
            self.high_watermark = min(self.high_watermark, offset)
        # Always, as Kafka's UnifiedLog.truncateTo: a leader that appended nothing in its epoch left an entry at
        # the log end that conflicts with the new leader's history.
        self.epochs.truncate_from_end(min(offset, self.log_end_offset))

    def truncate_fully(self, start: int) -> None:
        self.records.clear()
        self.start = start
        self.epochs.clear()
        self.high_watermark = start

    def delete_before(self, offset: int) -> None:
        assert self.start <= offset <= self.log_end_offset
        del self.records[:offset - self.start]
        self.start = offset
        self.epochs.truncate_from_start(offset)


# ---- real clusters ------------------------------------------------------------------------------------------------

def three_node_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                       properties: Mapping[str, Any], node_properties: Mapping[int, Mapping[str, Any]] | None = None
                       ) -> Iterator[Cluster]:
    """A module fixture's body (``yield from``): a started 3-node cluster of the kind ``request.param`` names
    ("klog" or "kafka"), every broker registered; stopped when the module is done."""
    kind = KlogCluster if request.param == "klog" else KafkaCluster
    with kind(tmp_path_factory.mktemp(f"{request.param}-cluster"), 3, properties=properties,
              node_properties=node_properties) as started:
        started.wait_for_brokers()
        yield started


def create_rf3_topic(cluster: Cluster, partitions: int, configs: dict[str, str] | None = None) -> str:
    """Created through a live node (retried while the cluster settles); returned once every live node lists it
    with 3 in-sync replicas per partition."""
    name = f"r-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 60
    while True:
        code, message = cluster.create_topic(name, partitions, 3, configs=configs)
        if code == 0:
            break
        assert time.monotonic() < deadline, (code, message)
        time.sleep(0.5)
    for p in range(partitions):
        cluster.wait_for_leader(name, p)
        cluster.wait_for_isr(name, p, cluster.node_ids)
    return name


def segment_bytes(cluster: Cluster, node: int, topic: str, partition: int) -> bytes:
    path = cluster.log_dir(node) / f"{topic}-{partition}" / SEGMENT
    return path.read_bytes() if path.exists() else b""


def wait_same_logs(cluster: Cluster, topic: str, partitions: int, nodes: list[int], timeout: float = 60.0) -> None:
    """Every replica's first segment file holds the same bytes (what DumpLogSegments would print the same)."""
    deadline = time.monotonic() + timeout
    while True:
        sizes = {}
        same = True
        for p in range(partitions):
            logs = {n: segment_bytes(cluster, n, topic, p) for n in nodes}
            sizes[p] = {n: len(b) for n, b in logs.items()}
            same = same and len(set(logs.values())) == 1 and len(next(iter(logs.values()))) > 0
        if same:
            return
        assert time.monotonic() < deadline, f"replica logs differ: {sizes}"
        time.sleep(0.2)


def check_clean(cluster: Cluster) -> None:
    """No klog node logged a Python traceback."""
    if isinstance(cluster, KlogCluster):
        for i in cluster.node_ids:
            lines = cluster.log_lines(i)
            assert not [line for line in lines if "Traceback" in line], f"node {i}:\n" + "\n".join(lines[-40:])


def heal(cluster: Cluster) -> None:
    """Every node running and resumed (a paused one resumed, a stopped one restarted), every broker registered."""
    for node in cluster.node_ids:
        if node in cluster.paused:
            cluster.resume(node)
        if cluster.pid(node) is None:
            cluster.restart(node)
    cluster.wait_for_brokers(cluster.node_ids)
    check_clean(cluster)


def wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.2)


def describe_log_dirs(cluster: Cluster, node: int) -> dict[str, int]:
    """DescribeLogDirs v4 at ``node``: realpath of each log dir -> its error code."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert answer.error_code == 0, answer
    return {os.path.realpath(r.log_dir): r.error_code for r in answer.results}


def wait_for_failed_log_dir(cluster: Cluster, node: int, failed_dir: Any, other_dir: Any, topic: str) -> None:
    """``node``'s ``failed_dir`` answers KAFKA_STORAGE_ERROR in DescribeLogDirs (``other_dir`` still 0), and the
    controller lists ``node`` as partition 0 of ``topic``'s offline replica."""
    failed, other = os.path.realpath(failed_dir), os.path.realpath(other_dir)
    wait(lambda: describe_log_dirs(cluster, node).get(failed) == int(ErrorCode.KAFKA_STORAGE_ERROR),
         f"node {node}'s failed log dir answered KAFKA_STORAGE_ERROR in DescribeLogDirs")
    assert describe_log_dirs(cluster, node)[other] == 0
    wait(lambda: cluster.metadata(1, [topic]).topics[0].partitions[0].offline_replicas == [node],
         f"node {node} listed as the offline replica")


def produce_until_refused(produce: Callable[[bytes], int], timeout: float = 60.0) -> tuple[bytes, list[bytes]]:
    """The first acks=all write refused with NOT_ENOUGH_REPLICAS once the ISR is under min.insync.replicas.

    Metadata names a shrunk ISR once a node's metadata cache has it. Apache Kafka's leader enforces it once its own
    partition state has it too: seconds later on a loaded machine (CI saw a write wait 10 s for the paused
    replica). Until then a write is appended and times out, and its outcome is unknown: it may be committed later.
    So ``produce(value)`` (acks=all with a short request timeout; its error code) is called with new values until
    one is refused. Returns the refused value, which is never in the log, and the values whose writes timed out."""
    timed_out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        value = b"probe-%d" % len(timed_out)
        answer = produce(value)
        if answer != REQUEST_TIMED_OUT or time.monotonic() > deadline:
            assert answer == NOT_ENOUGH_REPLICAS, (answer, timed_out)
            return value, timed_out
        timed_out.append(value)


def produce_until_accepted(produce: Callable[[], int], timeout: float = 60.0) -> None:
    """An acks=all write accepted once the ISR is back at min.insync.replicas. The same lag the other way: until the
    leader's own state has the grown ISR, Apache Kafka refuses with NOT_ENOUGH_REPLICAS, before the append, so
    nothing was written and the write is sent again."""
    deadline = time.monotonic() + timeout
    while (answer := produce()) == NOT_ENOUGH_REPLICAS and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer == 0, answer


def list_latest(cluster: Cluster, node: int, topic: str, partition: int = 0) -> Any:
    """Node ``node``'s answer to a consumer's ListOffsets (latest) for the partition: its high watermark."""
    with cluster.wire(node) as wire:
        return wire.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]}).topics[0].partitions[0]


def latest_offsets(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """partition -> its high watermark, as its leader answers."""
    found: dict[int, int] = {}
    for p in range(partitions):
        answer = list_latest(cluster, cluster.wait_for_leader(topic, p), topic, p)
        assert answer.error_code == 0, (p, answer)
        found[p] = int(answer.offset)
    return found

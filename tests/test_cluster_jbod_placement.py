"""Which log dir a node with several ``log.dirs`` makes a new replica's log in, as Kafka 4.3's ``LogManager``: the dir
AlterReplicaLogDirs named for the partition before the node held it (``preferredLogDirs``), else the dir the partition
records name for the node's replica, else its own choice. Real processes, the same properties and steps on klog and on
Apache Kafka; the dirs are read off the disk."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import CLUSTER_TIMING

from jbod_support import open_cluster, placed

pytestmark = pytest.mark.timeout(240)

TOPIC = "placed"
FILLER = "filler"
PROPERTIES = {**CLUSTER_TIMING, "offsets.topic.num.partitions": 1}


def _open(kind, tmp_path):
    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    return open_cluster(kind, tmp_path / "cluster", 1, PROPERTIES, f"{a},{b}"), str(a), str(b)


def _alter(cluster, path, topic, partitions):
    """AlterReplicaLogDirs v2 at node 1 moving ``topic``'s ``partitions`` to ``path``: {partition: error code}."""
    with cluster.wire(1) as wire:
        answer = wire.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": path, "topics": [{"name": topic, "partitions": list(partitions)}]}]})
    return {p.partition_index: p.error_code for r in answer.results for p in r.partitions}


def _create(cluster, topic, partitions):
    assert cluster.create_topic(topic, partitions, 1) == (0, None)
    cluster.wait_for_topic(topic, partitions)


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java, pytest.mark.long])])
def test_a_dir_named_by_alter_replica_log_dirs_before_the_replica_exists_is_where_its_log_is_made(kind, tmp_path):
    """Node 1 (log.dirs=a,b) spreads a topic's four partitions over both dirs by itself. AlterReplicaLogDirs for
    partitions of a topic that does not exist yet answers UNKNOWN_TOPIC_OR_PARTITION (LOG_DIR_NOT_FOUND for a path
    that is not one of its log.dirs) and remembers the dir: the four partitions of the topic created afterwards are
    all made in it, and served."""
    cluster, a, b = _open(kind, tmp_path)
    with cluster:
        cluster.wait_for_brokers()
        _create(cluster, FILLER, 4)
        assert sorted(placed([a, b], FILLER, 4).values()) == [a, a, b, b]
        assert _alter(cluster, str(tmp_path / "elsewhere"), TOPIC, [0]) == {0: ErrorCode.LOG_DIR_NOT_FOUND}
        assert _alter(cluster, b, TOPIC, range(4)) == {p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for p in range(4)}
        _create(cluster, TOPIC, 4)
        assert placed([a, b], TOPIC, 4) == {p: b for p in range(4)}
        acked = cluster.produce(TOPIC, range(4), 2)
        assert cluster.consume(TOPIC, range(4), len(acked)) == acked


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java, pytest.mark.long])])
def test_a_replica_whose_log_is_gone_is_made_again_in_the_dir_its_partition_record_names(kind, tmp_path):
    """Node 1 (log.dirs=a,b) makes the topic's one partition in a dir X and tells the controller, so the partition
    record names X for it; three more partitions are put in X too (AlterReplicaLogDirs ahead of their creation).
    Stopped, the partition's directory deleted, restarted: the node makes its log again in X, the dir the record
    names, not in the other dir that holds no partition (its own choice), and serves it."""
    cluster, a, b = _open(kind, tmp_path)
    with cluster:
        cluster.wait_for_brokers()
        _create(cluster, TOPIC, 1)
        [named] = placed([a, b], TOPIC, 1).values()
        other = b if named == a else a
        assert _alter(cluster, named, FILLER, range(3)) == {p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for p in range(3)}
        _create(cluster, FILLER, 3)
        assert placed([a, b], FILLER, 3) == {p: named for p in range(3)}
        if kind == "klog":   # the controller has recorded the dirs (AssignReplicasToDirs answered)
            deadline = time.monotonic() + 20
            while sum("assigned" in line and "to their log dirs" in line for line in cluster.log_lines(1)) < 2:
                assert time.monotonic() < deadline, cluster.log_lines(1)[-20:]
                time.sleep(0.1)
        else:
            time.sleep(3)
        cluster.stop_node(1)
        shutil.rmtree(os.path.join(named, f"{TOPIC}-0"))
        cluster.restart(1)
        cluster.wait_for_brokers()
        assert placed([a, b], TOPIC, 1) == {0: named}
        assert not os.path.exists(os.path.join(other, f"{TOPIC}-0"))
        acked = cluster.produce(TOPIC, [0], 3, tag="after")
        assert cluster.consume(TOPIC, [0], 3) == acked

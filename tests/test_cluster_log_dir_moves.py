"""Moving a replica between the log dirs of one broker while it is served (AlterReplicaLogDirs, API 34), as an operator
does it: Kafka 4.3.1's ``kafka-reassign-partitions --execute`` with a reassignment JSON naming ``log_dirs`` and
``--replica-alter-log-dirs-throttle``, ``kafka-log-dirs --describe``/DescribeLogDirs showing the future replica while
it copies, ``--verify`` once it is done. The same properties and steps on klog and on Apache Kafka, real processes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import CLUSTER_TIMING

from jbod_support import Producing, open_cluster

pytestmark = pytest.mark.timeout(240)

TOPIC = "moving"
PARTITIONS = 2
#: small segments: a move copies several sealed ones and the active one
TOPIC_CONFIGS = {"segment.bytes": "1048576"}   # Kafka 4's least
PROPERTIES = {**CLUSTER_TIMING, "offsets.topic.num.partitions": 1}
#: what the partition holds before the move, and the throttle that makes the copy take a few seconds
PRELOAD_RECORDS, PRELOAD_VALUE_BYTES = 750, 2048
THROTTLE = 1_000_000
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _open(kind, root, log_dirs):
    return open_cluster(kind, root, 1, PROPERTIES, log_dirs)


def _dir_of(dirs, partition):
    """The log dir holding ``TOPIC``-``partition`` on disk (its current log, not a future one)."""
    found = [str(d) for d in dirs if os.path.isdir(os.path.join(d, f"{TOPIC}-{partition}"))]
    assert len(found) == 1, found
    return found[0]


def _describe(cluster):
    """DescribeLogDirs v4 at node 1: realpath of each log dir -> {(partition, is future): (size, offset lag)}."""
    with cluster.wire(1) as wire:
        answer = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": TOPIC, "partitions": [0, 1]}]})
    assert answer.error_code == 0, answer
    return {os.path.realpath(r.log_dir): {(p.partition_index, p.is_future_key): (p.partition_size, p.offset_lag)
                                          for t in r.topics if t.name == TOPIC for p in t.partitions}
            for r in answer.results}


def _preload(cluster, partition):
    """PRELOAD_RECORDS records of PRELOAD_VALUE_BYTES (incompressible) acknowledged in ``partition``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20})
    sent = set()
    for i in range(PRELOAD_RECORDS):
        value = f"pre-{i}-".encode() + os.urandom(PRELOAD_VALUE_BYTES // 2).hex().encode()
        producer.produce(TOPIC, value=value, partition=partition)
        sent.add((partition, value))
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return sent


def _reassign(cluster, tmp_path, partition, target, *args):
    """kafka-reassign-partitions with a reassignment of ``partition`` to node 1's log dir ``target``."""
    from klog.testing import kafka_tools

    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": partition, "replicas": [1], "log_dirs": [str(target)]}]}))
    return kafka_tools.run_kafka_tool(REASSIGN, "--bootstrap-server", cluster.bootstrap_servers,
                                      "--reassignment-json-file", str(plan), *args, timeout=120)


def _moved_partition(cluster, a, b):
    """Create the topic, preload the partition node 1 placed in ``a`` (a Kafka broker may put both in one dir: then
    the first partition, moved to the other); returns (partition, source dir, target dir, acknowledged records)."""
    assert cluster.create_topic(TOPIC, PARTITIONS, 1, configs=TOPIC_CONFIGS) == (0, None)
    cluster.wait_for_topic(TOPIC, PARTITIONS)
    deadline = time.monotonic() + 30
    while sum(os.path.isdir(os.path.join(d, f"{TOPIC}-{p}")) for p in range(PARTITIONS) for d in (a, b)) < PARTITIONS:
        assert time.monotonic() < deadline, (os.listdir(a), os.listdir(b))   # Kafka makes the logs a little later
        time.sleep(0.1)
    dirs = {p: _dir_of([a, b], p) for p in range(PARTITIONS)}
    partition = next((p for p, d in dirs.items() if d == str(a)), 0)
    source = dirs[partition]
    target = str(b) if source == str(a) else str(a)
    return partition, source, target, _preload(cluster, partition)


def _wait_moved(cluster, partition, source, target, timeout=90):
    """Until DescribeLogDirs lists ``partition`` in ``target`` only, with no future replica; returns whether a future
    replica was seen in ``target`` meanwhile."""
    seen_future = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = cluster._quietly(lambda: _describe(cluster))
        if described:
            seen_future |= (partition, True) in described[os.path.realpath(target)]
            if (partition, False) in described[os.path.realpath(target)] and not any(
                    k[0] == partition for k in described[os.path.realpath(source)]) and not any(
                    k == (partition, True) for d in described.values() for k in d):
                return seen_future
        time.sleep(0.1)
    raise AssertionError(f"not moved in {timeout} s: {cluster._quietly(lambda: _describe(cluster))}")


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java, pytest.mark.long])])
@pytest.mark.long
def test_a_replica_moved_to_another_log_dir_under_a_producer_keeps_every_acknowledged_record(kind, tmp_path):
    """Node 1 has log.dirs=a,b; a partition holding ~1.5 MB in one dir is moved to the other with kafka-reassign-partitions
    (throttled to 1 MB/s) while a producer writes to it. DescribeLogDirs lists the future replica in the target dir
    during the copy; afterwards the partition is in the target dir only (its old directory gone), --verify reports
    the move complete, the producer saw no error and every acknowledged record is read back."""
    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    cluster = _open(kind, tmp_path / "cluster", f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        partition, source, target, acked = _moved_partition(cluster, a, b)
        # the topic id file a Kafka broker keeps a log by (KIP-516) moves with the log
        topic_id_file = (Path(source) / f"{TOPIC}-{partition}" / "partition.metadata").read_text()
        with Producing(cluster.bootstrap_servers, TOPIC, PARTITIONS, timeout_ms=120000) as producing:
            time.sleep(1)
            started = time.monotonic()
            result = _reassign(cluster, tmp_path, partition, target, "--execute",
                               "--replica-alter-log-dirs-throttle", str(THROTTLE))
            assert result.returncode == 0, result.stdout + result.stderr
            seen_future = _wait_moved(cluster, partition, source, target)
            took = time.monotonic() - started
            time.sleep(1)   # appends go on to the moved replica
        held = "".join(f"; {line.rpartition('(')[2].rstrip(')')}" for line in cluster.log_lines(1)
                       if "moved the replica of" in line) if kind == "klog" else ""
        print(f"\n{kind}: moved {PRELOAD_RECORDS * PRELOAD_VALUE_BYTES / 1e6:.1f} MB between log dirs under a "
              f"producer in {took:.1f} s (throttle {THROTTLE / 1e6:.0f} MB/s, the tool's start included){held}")
        assert seen_future, "DescribeLogDirs never listed the future replica"
        assert not os.path.exists(os.path.join(source, f"{TOPIC}-{partition}"))
        assert (Path(target) / f"{TOPIC}-{partition}" / "partition.metadata").read_text() == topic_id_file
        assert not producing.errors, producing.errors[:3]
        acked |= producing.acked
        assert any(p == partition for p, _ in producing.acked)
        verify = _reassign(cluster, tmp_path, partition, target, "--verify")
        assert verify.returncode == 0 and "is complete" in verify.stdout, verify.stdout + verify.stderr
        got = cluster.consume(TOPIC, range(PARTITIONS), len(acked), timeout=60)
        missing = acked - got
        assert not missing, (len(missing), sorted(missing)[:3])
        # the broker restarts from the new dir with the same records
        cluster.restart(1)
        cluster.wait_for_brokers()
        assert _dir_of([a, b], partition) == target
        assert cluster.consume(TOPIC, [partition], len({r for r in acked if r[0] == partition}),
                               timeout=60) >= {r for r in acked if r[0] == partition}


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java, pytest.mark.long])])
def test_a_move_interrupted_by_a_crash_completes_after_the_restart(kind, tmp_path):
    """The broker is killed (SIGKILL) while DescribeLogDirs shows the future replica; after the restart the move
    completes on its own (Kafka resumes the future log; klog copies again), the partition ends in the target dir
    only and every acknowledged record is read."""
    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    cluster = _open(kind, tmp_path / "cluster", f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        partition, source, target, acked = _moved_partition(cluster, a, b)
        result = _reassign(cluster, tmp_path, partition, target, "--execute",
                           "--replica-alter-log-dirs-throttle", str(THROTTLE // 2))
        assert result.returncode == 0, result.stdout + result.stderr
        deadline = time.monotonic() + 30
        while (partition, True) not in _describe(cluster)[os.path.realpath(target)]:
            assert time.monotonic() < deadline, _describe(cluster)
            time.sleep(0.05)
        cluster.kill(1)
        assert any(name.startswith(f"{TOPIC}-{partition}.") and name.endswith("-future") for name in os.listdir(target))
        cluster.restart(1)   # not running: started again
        cluster.wait_for_brokers()
        _wait_moved(cluster, partition, source, target)
        assert _dir_of([a, b], partition) == target
        got = cluster.consume(TOPIC, [partition], len(acked), timeout=60)
        assert acked <= got, len(acked - got)


def test_alter_replica_log_dirs_answers_kafkas_errors(tmp_path):
    """AlterReplicaLogDirs v2 on the wire: a dir not in log.dirs is LOG_DIR_NOT_FOUND, a partition of no topic
    UNKNOWN_TOPIC_OR_PARTITION (as Kafka 4.3's; one the metadata places on other nodes is REPLICA_NOT_AVAILABLE), the
    dir the replica is in already NONE (nothing moves), and ApiVersions advertises API 34 v1-2."""
    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    cluster = _open("klog", tmp_path / "cluster", f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic(TOPIC, 1, 1) == (0, None)
        cluster.wait_for_topic(TOPIC, 1)
        current = _dir_of([a, b], 0)
        with cluster.wire(1) as wire:
            versions = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                              "client_software_version": "1"})
            [api] = [k for k in versions.api_keys if k.api_key == 34]
            assert (api.min_version, api.max_version) == (1, 2)
            def alter(path, topics):
                answer = wire.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [{"path": path, "topics": topics}]})
                return {(r.topic_name, p.partition_index): p.error_code for r in answer.results for p in r.partitions}

            assert alter(str(tmp_path / "elsewhere"), [{"name": TOPIC, "partitions": [0]}]) == \
                {(TOPIC, 0): ErrorCode.LOG_DIR_NOT_FOUND}
            assert alter(current, [{"name": TOPIC, "partitions": [0]}, {"name": "absent", "partitions": [3]}]) == \
                {(TOPIC, 0): ErrorCode.NONE, ("absent", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        time.sleep(0.5)
        assert _dir_of([a, b], 0) == current
        assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith("-future")]


def _create_with_replicas(cluster, replicas):
    """TOPIC with one partition on ``replicas`` (the first its preferred leader), min.insync.replicas=2."""
    with cluster.wire(cluster.live_nodes()[0], timeout=60) as wire:
        answer = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": list(replicas)}],
             "configs": [{"name": k, "value": v} for k, v in {**TOPIC_CONFIGS, "min.insync.replicas": "2"}.items()]}],
            "timeout_ms": 30000, "validate_only": False}).topics[0]
    assert answer.error_code == 0, answer


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
@pytest.mark.long   # a 3-node cluster and a throttled copy: about a minute on klog
@pytest.mark.timeout(600)
def test_a_followers_replica_moved_between_log_dirs_keeps_following_and_serves_every_record_once_it_leads(
        kind, tmp_path):
    """3 nodes, node 1 with log.dirs=a,b; a partition on replicas [2, 1, 3] (node 2 leads, node 1 follows) holding
    ~1.5 MB. kafka-reassign-partitions --execute moves node 1's replica to its other dir (the tool sends
    AlterReplicaLogDirs to node 1), throttled to 1 MB/s, while an acks=all producer writes to the partition: node 1
    goes on fetching from the leader into the replica being copied; DescribeLogDirs lists the future replica, then
    the replica in the target dir only; node 1 is in the ISR afterwards and --verify reports the move complete.
    Then node 2 stops, node 1 (the next replica in the ISR) leads, and every acknowledged record, those produced
    during the move included, is read from node 1."""
    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    cluster = open_cluster(kind, tmp_path / "cluster", 3, {**PROPERTIES, "replica.lag.time.max.ms": 30000},
                           f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        _create_with_replicas(cluster, [2, 1, 3])
        assert cluster.wait_for_topic(TOPIC, 1) == {0: 2}
        cluster.wait_for_isr(TOPIC, 0, [1, 2, 3])
        deadline = time.monotonic() + 30
        while not any(os.path.isdir(os.path.join(d, f"{TOPIC}-0")) for d in (a, b)):
            assert time.monotonic() < deadline, (os.listdir(a), os.listdir(b))
            time.sleep(0.1)
        source = _dir_of([a, b], 0)
        target = str(b) if source == str(a) else str(a)
        acked = _preload(cluster, 0)
        plan = tmp_path / "reassign.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [2, 1, 3], "log_dirs": ["any", target, "any"]}]}))
        from klog.testing import kafka_tools

        def reassign(*args):
            return kafka_tools.run_kafka_tool(REASSIGN, "--bootstrap-server", cluster.bootstrap_servers,
                                              "--reassignment-json-file", str(plan), *args, timeout=120)

        with Producing(cluster.bootstrap_servers, TOPIC, 1, timeout_ms=120000) as producing:
            time.sleep(1)
            started = time.monotonic()
            result = reassign("--execute", "--replica-alter-log-dirs-throttle", str(THROTTLE))
            assert result.returncode == 0, result.stdout + result.stderr
            seen_future = _wait_moved(cluster, 0, source, target, timeout=180)
            took = time.monotonic() - started
            during = len(producing.acked)
            time.sleep(1)   # the leader's appends go on reaching the moved replica
        print(f"\n{kind}: moved a follower's replica ({PRELOAD_RECORDS * PRELOAD_VALUE_BYTES / 1e6:.1f} MB) between "
              f"log dirs under an acks=all producer in {took:.1f} s (throttle {THROTTLE / 1e6:.0f} MB/s, the tool's "
              f"start included)")
        assert seen_future, "DescribeLogDirs never listed the future replica"
        assert not os.path.exists(os.path.join(source, f"{TOPIC}-0"))
        assert not producing.errors, producing.errors[:3]
        assert during > 0 and len(producing.acked) > during, (during, len(producing.acked))
        acked |= producing.acked
        cluster.wait_for_isr(TOPIC, 0, [1, 2, 3], timeout=90)   # the moved replica follows the leader
        verify = reassign("--verify")
        assert verify.returncode == 0 and "is complete" in verify.stdout, verify.stdout + verify.stderr
        # leadership onto the moved replica: node 2 stops, node 1 is the next replica of the ISR
        cluster.stop_node(2)
        assert cluster.wait_for_leader(TOPIC, 0, exclude=2, timeout=90) == 1
        got = cluster.consume(TOPIC, [0], len(acked), via=1, timeout=90)
        missing = acked - got
        assert not missing, (len(missing), sorted(missing)[:3])
        assert _dir_of([a, b], 0) == target

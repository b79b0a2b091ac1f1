"""JBOD on a quorum (KIP-858), on real processes: a node with two log dirs, one of them a real 2 MiB tmpfs that the
test fills. The failed dir's replicas leave their ISR and their leaderships move to other replicas, the node keeps
serving its other dir, and clients keep producing and consuming without losing an acknowledged record.

Needs root to mount the tmpfs (the ``small_fs`` fixture of tests/conftest.py skips, saying so, elsewhere)."""

from __future__ import annotations

import os
import re
import time

import pytest

from klog.testing.cluster import CLUSTER_TIMING
from klog.testing.kafka import KafkaCluster
from klog.testing.faults.netns import fill_disk, free_disk

from jbod_support import Producing, open_cluster

pytestmark = pytest.mark.timeout(300)

TOPIC = "jbod"
PARTITIONS = 6
PROPERTIES = {**CLUSTER_TIMING, "offsets.topic.num.partitions": 1, "replica.lag.time.max.ms": 30000}
#: the line each system logs when a log dir fails
FAILURE_LINE = {"klog": "is offline:", "kafka": "Stopping serving replicas in dir"}


def _partition_dirs(dirs, topic):
    """partition -> the log dir holding node 1's replica of it."""
    out = {}
    for d in dirs:
        for name in os.listdir(d):
            owner, _, number = name.rpartition("-")
            if owner == topic and number.isdigit():
                out[int(number)] = str(d)
    return out


def _open(kind, root, log_dirs):
    return open_cluster(kind, root, 3, PROPERTIES, log_dirs)


def _log_lines(cluster, node):
    if isinstance(cluster, KafkaCluster):
        return (cluster._dir(node) / "kafka.log").read_text(errors="replace").splitlines()
    return cluster.log_lines(node)


def _logged_at(lines, text):
    """The wall-clock time of the first of a node's log lines containing ``text``."""
    for line in lines:
        if text in line:
            stamp = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})", line)
            assert stamp, line
            return time.mktime(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")) + int(stamp.group(2)) / 1000
    raise AssertionError(f"no line with {text!r}")


def _describe_log_dirs(cluster, node):
    """DescribeLogDirs v4 at ``node``: realpath of each log dir -> (error code, {partition of TOPIC: (size, offset
    lag, is future)})."""
    from klog.protocol import ApiKey

    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert answer.error_code == 0, answer
    return {os.path.realpath(r.log_dir): (r.error_code, {p.partition_index: (p.partition_size, p.offset_lag,
                                                                           p.is_future_key)
                                                         for t in r.topics if t.name == TOPIC for p in t.partitions})
            for r in answer.results}


def _log_dirs_command(cluster, node):
    """Kafka 4.3.1's ``kafka-log-dirs --describe --broker-list <node> --topic-list TOPIC``: the node's logDirs."""
    import json

    from klog.testing import kafka_tools

    result = kafka_tools.run_kafka_tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server",
                                        cluster.node_bootstrap(node), "--describe", "--broker-list", str(node),
                                        "--topic-list", TOPIC, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))
    [entry] = report["brokers"]
    assert entry["broker"] == node, report
    return entry["logDirs"]


def _isr_and_leaders(cluster, node, topic):
    answer = cluster.metadata(node, [topic]).topics[0]
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes), sorted(p.offline_replicas))
            for p in answer.partitions}


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java, pytest.mark.long])])
@pytest.mark.long
def test_a_failed_log_dir_takes_only_its_replicas_offline_and_their_leadership_moves(kind, tmp_path, small_fs):
    """Node 1 has log.dirs=<a dir>,<a 2 MiB tmpfs>; RF=3 partitions are spread over both. Filling the tmpfs fails
    the appends there: node 1 reports the dir offline in its heartbeat, the controller takes node 1 out of the ISR
    and leadership of exactly the partitions in that dir (AssignReplicasToDirs told it which), node 1 stays a live
    broker leading and replicating its partitions in the other dir, and a producer running throughout loses no
    acknowledged record. Prints the time from the first failed append to the last moved leader. Once the disk is
    freed and node 1 restarted, its replicas in that dir catch up and rejoin every ISR."""
    big = tmp_path / "node-1-a"
    cluster = _open(kind, tmp_path / "cluster", f"{big},{small_fs}")
    with cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) == (0, None)
        cluster.wait_for_topic(TOPIC, PARTITIONS)
        # every partition led by node 1 (the preferred replica of a third of them otherwise): the failure must move
        # leaderships, not only ISRs
        dirs = {}
        deadline = time.monotonic() + 30
        while len(dirs) < PARTITIONS and time.monotonic() < deadline:
            dirs = _partition_dirs([big, small_fs], TOPIC)
            time.sleep(0.2)
        on_small = sorted(p for p, d in dirs.items() if d == str(small_fs))
        on_big = sorted(p for p, d in dirs.items() if d == str(big))
        assert on_small and on_big, dirs
        # DescribeLogDirs (kafka-log-dirs --describe) lists each partition under the dir its log is in
        described = _describe_log_dirs(cluster, 1)
        assert set(described) == {os.path.realpath(big), os.path.realpath(small_fs)}, described
        for d, parts in ((big, on_big), (small_fs, on_small)):
            code, listed = described[os.path.realpath(d)]
            assert code == 0 and sorted(listed) == parts, (d, described)
            assert all(lag == 0 and not future for _, lag, future in listed.values()), described
        before = _isr_and_leaders(cluster, 2, TOPIC)
        assert all(isr == [1, 2, 3] for _, isr, _ in before.values()), before
        led_on_small = [p for p in on_small if before[p][0] == 1]

        with Producing(cluster.bootstrap_servers, TOPIC, PARTITIONS) as producing:
            time.sleep(2)
            acked_before = len(producing.acked)
            fill_disk(small_fs)
            failed_at = time.monotonic()
            moved_at = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                now = cluster._quietly(lambda: _isr_and_leaders(cluster, 2, TOPIC))
                if now and all(now[p][0] != 1 and 1 not in now[p][1] for p in on_small):
                    moved_at = time.monotonic()
                    moved_wall = time.time()
                    break
                time.sleep(0.05)
            assert moved_at is not None, (cluster._quietly(lambda: _isr_and_leaders(cluster, 2, TOPIC)),
                                          "\n".join(_log_lines(cluster, 1)[-40:]))
            time.sleep(3)   # writes go on to the moved partitions and to node 1's other dir
            acked_after = len(producing.acked)
        after = _isr_and_leaders(cluster, 2, TOPIC)
        offline_at = _logged_at(_log_lines(cluster, 1), FAILURE_LINE[kind])
        print(f"\n{kind}: log dir failure (node 1's line {FAILURE_LINE[kind]!r}) -> every partition of the failed dir out "
              f"of node 1's ISR and leadership in Metadata: {moved_wall - offline_at:.2f} s (disk filled -> moved: "
              f"{moved_at - failed_at:.2f} s; {len(on_small)} partitions in the dir, {len(led_on_small)} led by node 1)")
        for p in on_small:
            leader, isr, offline = after[p]
            assert leader in (2, 3) and isr == [2, 3] and offline == [1], (p, after[p])
        for p in on_big:   # node 1's other dir is untouched: still in every ISR
            assert 1 in after[p][1] and after[p][2] == [], (p, after[p])
        assert 1 in cluster.live_brokers(2) and cluster.pid(1) is not None
        described = _describe_log_dirs(cluster, 1)   # the failed dir answers KAFKA_STORAGE_ERROR (56), no partitions
        assert described[os.path.realpath(small_fs)] == (56, {}), described
        assert described[os.path.realpath(big)][0] == 0 and sorted(described[os.path.realpath(big)][1]) == on_big
        # and Kafka's kafka-log-dirs --describe shows the same
        report = _log_dirs_command(cluster, 1)
        dirs_seen = {os.path.realpath(d["logDir"]): d for d in report}
        assert set(dirs_seen) == {os.path.realpath(big), os.path.realpath(small_fs)}, report
        assert dirs_seen[os.path.realpath(small_fs)]["error"] is not None, report
        assert dirs_seen[os.path.realpath(big)]["error"] is None, report
        assert sorted(p["partition"] for p in dirs_seen[os.path.realpath(big)]["partitions"]) == \
            sorted(f"{TOPIC}-{p}" for p in on_big), report
        assert acked_after > acked_before, (acked_before, acked_after, producing.errors[:3])
        assert not producing.errors, producing.errors[:3]
        # nothing acknowledged is lost: every acked record is read back, through the nodes now leading
        got = cluster.consume(TOPIC, range(PARTITIONS), len(producing.acked), timeout=60)
        missing = producing.acked - got
        assert not missing, (len(missing), sorted(missing)[:5])
        if kind == "klog":
            lines = cluster.log_lines(1)
            assert any("reporting offline log dir" in line for line in lines), lines[-20:]
            assert any("assigned" in line and "replica(s) to their log dirs" in line for line in lines), lines[-40:]

        # repaired: space freed and node 1 restarted, it registers the dir again and its replicas there catch up
        free_disk(small_fs)
        cluster.restart(1)
        for p in on_small:
            cluster.wait_for_isr(TOPIC, p, [1, 2, 3], timeout=90)
        assert cluster.consume(TOPIC, range(PARTITIONS), len(producing.acked), via=1, timeout=60) >= producing.acked


def test_a_node_restarted_with_a_failed_log_dir_serves_its_other_dir_and_reports_the_failed_one(tmp_path, small_fs):
    """Node 1 killed, its second log dir (a tmpfs) filled while it was down, node 1 started again: recovery cannot
    write that dir's indexes, so the dir is offline from the start, so node 1 registers only its other dir and reports the failed one in its first
    heartbeats; it rejoins the ISR of the partitions in its good dir and never of those in the failed one, whose
    logs it does not make again in its good dir."""
    big = tmp_path / "node-1-a"
    cluster = _open("klog", tmp_path / "cluster", f"{big},{small_fs}")
    with cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) == (0, None)
        cluster.wait_for_topic(TOPIC, PARTITIONS)
        acked = cluster.produce(TOPIC, range(PARTITIONS), 20, tag="before")
        dirs = _partition_dirs([big, small_fs], TOPIC)
        on_small = sorted(p for p, d in dirs.items() if d == str(small_fs))
        on_big = sorted(p for p, d in dirs.items() if d == str(big))
        assert on_small and on_big, dirs
        cluster.kill(1)
        fill_disk(small_fs)
        cluster.nodes[1].start()
        cluster.wait_for_brokers()
        for p in on_big:
            cluster.wait_for_isr(TOPIC, p, [1, 2, 3], timeout=90)
        acked |= cluster.produce(TOPIC, range(PARTITIONS), 20, tag="after")
        time.sleep(3)   # heartbeats and fetches go on: node 1 must stay out of the failed dir's ISRs
        after = _isr_and_leaders(cluster, 2, TOPIC)
        for p in on_small:
            leader, isr, offline = after[p]
            assert leader in (2, 3) and 1 not in isr and offline == [1], (p, after[p])
        # the failed dir may still hold these replicas' logs: node 1 makes none of them again in its good dir
        made_again = [p for p in on_small if (big / f"{TOPIC}-{p}").exists()]
        assert made_again == [], made_again
        described = _describe_log_dirs(cluster, 1)
        assert described[os.path.realpath(small_fs)] == (56, {}), described
        assert any("reporting offline log dir" in line for line in cluster.log_lines(1)), cluster.log_lines(1)[-30:]
        got = cluster.consume(TOPIC, range(PARTITIONS), len(acked), timeout=60)
        assert acked <= got, len(acked - got)



#: what both systems log about a log dir whose meta.properties cannot be read at startup (Kafka's
#: MetaPropertiesEnsemble.Loader)
STARTUP_FAILURE_LINE = "Error while reading meta.properties file"


def _elect_preferred(cluster, node, topic, partitions):
    """ElectLeaders (preferred) for ``partitions`` of ``topic``, sent to ``node``: {partition: error code}."""
    from klog.protocol import ApiKey

    with cluster.wire(node, timeout=60) as wire:
        answer = wire.request(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
            {"topic": topic, "partitions": list(partitions)}], "timeout_ms": 30000})
    return {p.partition_id: p.error_code for r in answer.replica_election_results for p in r.partition_result}


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
@pytest.mark.long   # the klog side takes about 20 s; tests/test_broker_log_dirs.py has the startup rule's short tests
@pytest.mark.timeout(600)
def test_a_node_restarted_with_a_log_dir_replaced_by_a_file_starts_with_that_dir_offline(kind, tmp_path):
    """Node 1 has log.dirs=a,b and RF=3 partitions in both. Stopped, b replaced by a plain file, started again: as
    Kafka's (MetaPropertiesEnsemble.Loader puts b among its failed dirs, LogManager starts it offline) the node starts
    with b offline and registers a only: DescribeLogDirs answers KAFKA_STORAGE_ERROR for b; the replicas b held are
    in no online dir of the node, so they get no log (none is made again in a), stay out of the ISR, are listed
    offline, and a preferred-leader election gives none of them back to node 1, while node 1 rejoins the ISR of a's
    partitions and leads again those it is the preferred replica of. Every acknowledged record is read back."""
    import shutil

    a, b = tmp_path / "node-1-a", tmp_path / "node-1-b"
    cluster = _open(kind, tmp_path / "cluster", f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) == (0, None)
        cluster.wait_for_topic(TOPIC, PARTITIONS)
        acked = cluster.produce(TOPIC, range(PARTITIONS), 20, tag="before")
        dirs = _partition_dirs([a, b], TOPIC)
        deadline = time.monotonic() + 30
        while len(dirs) < PARTITIONS and time.monotonic() < deadline:   # Kafka makes the logs just after
            time.sleep(0.2)
            dirs = _partition_dirs([a, b], TOPIC)
        on_a = sorted(p for p, d in dirs.items() if d == str(a))
        on_b = sorted(p for p, d in dirs.items() if d == str(b))
        assert on_a and on_b and len(dirs) == PARTITIONS, dirs
        replicas = {p.partition_index: list(p.replica_nodes) for p in cluster.metadata(2, [TOPIC]).topics[0].partitions}

        cluster.stop_node(1)
        shutil.rmtree(b)
        b.write_text("not a log dir\n")
        cluster.restart(1)   # on main klog refused: "cannot start: [Errno 20] Not a directory: .../meta.properties"
        cluster.wait_for_brokers()
        for p in on_a:
            cluster.wait_for_isr(TOPIC, p, [1, 2, 3], timeout=90)
        acked |= cluster.produce(TOPIC, range(PARTITIONS), 20, tag="after")
        elected = _elect_preferred(cluster, 2, TOPIC, range(PARTITIONS))
        time.sleep(3)   # heartbeats and fetches go on: node 1 must stay out of the failed dir's ISRs
        after = _isr_and_leaders(cluster, 2, TOPIC)
        for p in on_b:
            leader, isr, offline = after[p]
            assert leader in (2, 3) and 1 not in isr and offline == [1], (p, after[p], elected)
        for p in on_a:
            leader, isr, offline = after[p]
            assert 1 in isr and offline == [], (p, after[p])
            if replicas[p][0] == 1:   # node 1's good dir serves: it leads again where it is the preferred replica
                assert leader == 1, (p, after[p], elected)
        # the failed dir may hold these replicas' logs: none is made again in the good dir
        assert [p for p in on_b if (a / f"{TOPIC}-{p}").exists()] == []
        assert b.read_text() == "not a log dir\n"
        described = _describe_log_dirs(cluster, 1)
        assert described[os.path.realpath(b)] == (56, {}), described
        assert described[os.path.realpath(a)][0] == 0 and sorted(described[os.path.realpath(a)][1]) == on_a, described
        assert any(STARTUP_FAILURE_LINE in line and str(b) in line for line in _log_lines(cluster, 1)), \
            _log_lines(cluster, 1)[-30:]
        got = cluster.consume(TOPIC, range(PARTITIONS), len(acked), timeout=60)
        assert acked <= got, len(acked - got)


def _start_failing(cluster, node):
    """Start ``node`` again, expecting it to refuse: its log (klog's stderr, Kafka's kafka.log)."""
    with pytest.raises(Exception):
        cluster.restart(node)
    deadline = time.monotonic() + 30
    while cluster.pid(node) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster.pid(node) is None, "the node kept running"
    return _log_lines(cluster, node)


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
@pytest.mark.long   # the klog side takes about 20 s; tests/test_broker_log_dirs.py has the short EIO test
@pytest.mark.timeout(600)
def test_a_log_dir_whose_meta_properties_read_fails_with_eio_starts_offline(kind, tmp_path, faulty_device):
    """A real I/O error: node 1 has log.dirs=a,b with b on its own ext4 device (tests/conftest.py's FaultyDevice).
    Stopped, b's device made to fail every read of its meta.properties with EIO, started again: as Kafka's
    MetaPropertiesEnsemble.Loader (an IOException: a failed dir) and LogManager (started offline), the node starts
    with b offline (DescribeLogDirs answers it KAFKA_STORAGE_ERROR, logged as Kafka logs it, naming the I/O error)
    and serves a: a new topic's partitions are made there and take writes."""
    a, b = tmp_path / "node-1-a", faulty_device.mount_point / "b"
    cluster = _open_single(kind, tmp_path / "cluster", f"{a},{b}")
    with cluster:
        cluster.wait_for_brokers()
        assert (b / "meta.properties").is_file()
        cluster.stop_node(1)
        faulty_device.fail_reads(b / "meta.properties")
        with pytest.raises(OSError) as failed:
            (b / "meta.properties").read_bytes()
        assert failed.value.errno == 5, failed.value   # EIO
        cluster.restart(1)
        cluster.wait_for_brokers()
        described = _describe_log_dirs(cluster, 1)
        assert described[os.path.realpath(b)] == (56, {}), described
        assert described[os.path.realpath(a)][0] == 0, described
        assert cluster.create_topic(TOPIC, 2, 1) == (0, None)
        cluster.wait_for_topic(TOPIC, 2)
        acked = cluster.produce(TOPIC, range(2), 10, tag="eio")
        assert cluster.consume(TOPIC, range(2), len(acked), timeout=60) >= acked
        assert sorted(_describe_log_dirs(cluster, 1)[os.path.realpath(a)][1]) == [0, 1]
        lines = _log_lines(cluster, 1)
        assert any(STARTUP_FAILURE_LINE in line and str(b) in line for line in lines), lines[-30:]
        assert any("Input/output error" in line for line in lines), lines[-30:]   # Kafka: in the stack trace


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
@pytest.mark.parametrize("which", ["the metadata log dir", "every dir"])
@pytest.mark.long   # 12-30 s each on klog
@pytest.mark.timeout(600)
def test_an_eio_on_the_metadata_log_dirs_or_every_dirs_meta_properties_stops_the_start(kind, which, tmp_path,
                                                                                         faulty_device):
    """The same real I/O error on the metadata log dir's meta.properties (the first of log.dirs), or on every
    dir's (both on the faulty device): Kafka refuses to start, and so does klog, naming the dir."""
    first, second = faulty_device.mount_point / "a", (faulty_device.mount_point if which == "every dir" else
                                                      tmp_path) / "b"
    cluster = _open_single(kind, tmp_path / "cluster", f"{first},{second}")
    with cluster:
        cluster.wait_for_brokers()
        cluster.stop_node(1)
        failing = [first / "meta.properties"] + ([second / "meta.properties"] if which == "every dir" else [])
        faulty_device.fail_reads(*failing)
        lines = _start_failing(cluster, 1)
    text = "\n".join(lines)
    for path in failing:
        assert f"{STARTUP_FAILURE_LINE} {path}" in text or f"{STARTUP_FAILURE_LINE} {path.parent}" in text, \
            lines[-30:]
    refusal = (f"Encountered I/O error in metadata log directory {first}" if which == "the metadata log dir" else
               "No readable meta.properties files found")
    assert refusal in text, lines[-30:]


def _open_single(kind, root, log_dirs):
    return open_cluster(kind, root, 1, PROPERTIES, log_dirs)

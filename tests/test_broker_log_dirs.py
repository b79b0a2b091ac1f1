"""Log directory failure, as Kafka handles it: a log dir that cannot be written (here: a real, full 2 MiB tmpfs)
goes offline: its partitions answer produce with KAFKA_STORAGE_ERROR, their data is still served, partitions in
the other log dir keep taking writes; and the broker starts on the full disk (after a clean stop or a SIGKILL)
and serves what is there."""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from test_broker_robustness import log_lines_since
from test_metrics import _metrics_address

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

KAFKA_STORAGE_ERROR = 56
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_NOT_AVAILABLE = 15
VALUE_BYTES = 100_000
#: the records that fill a disk have timestamps FIRST_TIMESTAMP, FIRST_TIMESTAMP + 1, ...
FIRST_TIMESTAMP = int(time.time() * 1000) - 60_000




def _produce(wire, topic, partition, value, timestamp=None):
    record = {"value": value} if timestamp is None else {"value": value, "timestamp": timestamp}
    response = wire.request(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": encode_batch([record])}]}]})
    return response.responses[0].partition_responses[0].error_code


def _fetch_values(wire, topic, partition):
    code, values = _fetch(wire, topic, partition)
    assert code == 0
    return values


def _fetch(wire, topic, partition):
    """(error code, the values read from offset 0)"""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 50 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    from klog.records import decode_batches

    part = wire.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
    return part.error_code, [r.value for b in decode_batches(bytes(part.records or b"")) for r in b.records]


def _list_offsets(wire, topic, partition, timestamp):
    response = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
    part = response.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def _log_dir_errors(wire):
    """DescribeLogDirs: log dir -> its error code (KAFKA_STORAGE_ERROR once offline, as in Kafka)."""
    response = wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert response.error_code == 0
    return {r.log_dir: r.error_code for r in response.results}


def _offline_log_dirs_gauge(broker) -> float:
    """Kafka's OfflineLogDirectoryCount, scraped from the broker's /metrics."""
    host, port = _metrics_address(broker)
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return float(re.search(r"^kafka_log_logmanager_offlinelogdirectorycount (\S+)$", text, re.M)[1])


def _fill(directory: Path) -> None:
    """Take every byte left."""
    subprocess.run(["dd", "if=/dev/zero", f"of={directory / 'filler'}", "bs=4k"], capture_output=True)
    assert os.statvfs(directory).f_bavail == 0


def _create_topic(wire, topic, partitions=1):
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    return response.topics[0].error_code, response.topics[0].error_message


def _setup(broker, small_fs):
    """A topic with a partition in each log dir; returns (topic, partition on the small fs, the other one)."""
    with WireClient(broker.host, broker.port) as wire:
        return _topic_in_both_dirs(wire, small_fs)


def _topic_in_both_dirs(wire, small_fs):
    topic = f"dirs-{uuid.uuid4().hex[:8]}"
    assert _create_topic(wire, topic, 2) == (0, None)
    deadline = time.monotonic() + 10  # Kafka makes the directories once the controller's record arrives
    while not any((small_fs / f"{topic}-{p}").is_dir() for p in (0, 1)) and time.monotonic() < deadline:
        time.sleep(0.05)
    on_small = [p for p in (0, 1) if (small_fs / f"{topic}-{p}").is_dir()]
    assert len(on_small) == 1, os.listdir(small_fs)
    return topic, on_small[0], 1 - on_small[0]


def _fill_through_produce(wire, topic, partition) -> list[bytes]:
    """Produce to ``partition`` until its disk is full; returns the acknowledged values."""
    acked = []
    for i in range(100):
        value = b"%06d" % i + os.urandom(VALUE_BYTES)
        code = _produce(wire, topic, partition, value, FIRST_TIMESTAMP + i)
        if code == KAFKA_STORAGE_ERROR:
            return acked
        assert code == 0
        acked.append(value)
    raise AssertionError("the 2 MiB filesystem never filled")


def _assert_logged(broker, needle, also=""):
    """The broker logs a line with ``needle`` (and ``also``); lines trail the responses that cause them."""
    lines = log_lines_since(broker, 0, needle)
    assert lines and also in lines[0], broker.lines[-20:]


def _restart_on_a_full_disk(broker, small_fs, stop: str) -> None:
    """Stop the broker (``stop``: "clean" or "kill"), take the last bytes of ``small_fs``, start it again: it
    comes up with that log dir offline, saying so."""
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    _fill(small_fs)
    broker.config["listeners"] = "PLAINTEXT://127.0.0.1:0"
    broker.start()
    _assert_logged(broker, f"log dir {small_fs} is offline", "No space left")


def _config(tmp_path, small_fs):
    return {"log.dirs": f"{tmp_path / 'big'},{small_fs}", "offsets.topic.num.partitions": 1}


def test_a_full_log_dir_goes_offline_and_the_other_keeps_taking_writes(tmp_path, small_fs):
    config = {**_config(tmp_path, small_fs), "klog.metrics.listener": "127.0.0.1:0"}
    with BrokerProcess(tmp_path / "big", config) as broker:
        assert _offline_log_dirs_gauge(broker) == 0
        topic, full, other = _setup(broker, small_fs)
        with WireClient(broker.host, broker.port) as wire:
            acked = _fill_through_produce(wire, topic, full)
            assert acked
            _assert_logged(broker, f"log dir {small_fs} is offline", "No space left")
            _assert_logged(broker, f"append to {topic}-{full} failed", "No space left")
            # offline: refused at once (the disk is not touched again), one log line for the dir, not per request
            errors_before = sum("ERROR" in line for line in broker.lines)
            for _ in range(5):
                assert _produce(wire, topic, full, b"x") == KAFKA_STORAGE_ERROR
            assert _log_dir_errors(wire) == {str(small_fs): KAFKA_STORAGE_ERROR, str(tmp_path / "big"): 0}
            assert _offline_log_dirs_gauge(broker) == 1
            # reads of what was acknowledged are still served
            assert _fetch_values(wire, topic, full) == acked
            # the other log dir is not affected
            assert _produce(wire, topic, other, b"fine") == 0
            assert _fetch_values(wire, topic, other) == [b"fine"]
            # a new topic's partitions go to the online dir
            assert _create_topic(wire, "after", 2) == (0, None)
            _assert_logged(broker, "created topic after")  # logged after the refusals: their lines are in
            assert sum("ERROR" in line for line in broker.lines) == errors_before
            assert not [p for p in os.listdir(small_fs) if p.startswith("after-")]
            assert _produce(wire, "after", 1, b"ok") == 0


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_the_broker_starts_on_a_full_disk_and_serves_reads(tmp_path, small_fs, stop):
    with BrokerProcess(tmp_path / "big", _config(tmp_path, small_fs)) as broker:
        topic, full, other = _setup(broker, small_fs)
        with WireClient(broker.host, broker.port) as wire:
            acked = _fill_through_produce(wire, topic, full)
            assert _produce(wire, topic, other, b"before") == 0
        _restart_on_a_full_disk(broker, small_fs, stop)
        with WireClient(broker.host, broker.port) as wire:
            assert _fetch_values(wire, topic, full) == acked
            assert _produce(wire, topic, full, b"more") == KAFKA_STORAGE_ERROR
            assert _fetch_values(wire, topic, full) == acked
            assert _produce(wire, topic, other, b"after") == 0
            assert _fetch_values(wire, topic, other) == [b"before", b"after"]
        assert broker.stop() == 0


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_a_broker_whose_only_log_dir_is_full_starts_read_only(tmp_path, small_fs, stop):
    """The issue's case: one log dir, on a disk that filled up; the broker restarts on it."""
    with BrokerProcess(small_fs, {"offsets.topic.num.partitions": 1}) as broker:
        topic = f"full-{uuid.uuid4().hex[:8]}"
        with WireClient(broker.host, broker.port) as wire:
            assert _create_topic(wire, topic) == (0, None)
            acked = _fill_through_produce(wire, topic, 0)
        _restart_on_a_full_disk(broker, small_fs, stop)
        with WireClient(broker.host, broker.port) as wire:
            assert _fetch_values(wire, topic, 0) == acked
            assert _list_offsets(wire, topic, 0, -2) == 0 and _list_offsets(wire, topic, 0, -1) == len(acked)
            # a timestamp lookup is served from the time index rebuilt in memory
            assert _list_offsets(wire, topic, 0, FIRST_TIMESTAMP + 1) == 1
            assert _produce(wire, topic, 0, b"more") == KAFKA_STORAGE_ERROR
            # topic metadata lives in that dir too: admin changes are refused with the same code, up front
            code, message = _create_topic(wire, "another")
            assert code == KAFKA_STORAGE_ERROR and "__cluster_metadata-0" in message and "offline" in message, message
            # __consumer_offsets cannot be made there: the group coordinator is not available (not a dropped
            # connection)
            found = wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            assert found.error_code == COORDINATOR_NOT_AVAILABLE, found
            assert _fetch_values(wire, topic, 0) == acked
        assert broker.stop() == 0, "\n".join(broker.lines[-12:])
        assert not [line for line in broker.lines if "Traceback" in line]
        assert os.listdir(small_fs) and not [n for n in os.listdir(small_fs) if n.startswith("another")]


@pytest.mark.java
@pytest.mark.long
def test_apache_kafka_on_a_full_log_dir_refuses_writes_and_reads_of_its_partitions(tmp_path, small_fs):
    """The first test's filling against Apache Kafka 4: the same acknowledgements and KAFKA_STORAGE_ERROR, the
    other log dir unaffected; but Kafka stops serving reads of the offline partition, where klog keeps them."""
    from klog.testing.kafka import apache_kafka

    base = tmp_path / "kafka"
    with apache_kafka(base, config={"log.dirs": f"{base / 'kafka-data'},{small_fs}"}) as bootstrap:
        host, port = bootstrap.rsplit(":", 1)
        with WireClient(host, int(port)) as wire:
            topic, full, other = _topic_in_both_dirs(wire, small_fs)
            assert _fill_through_produce(wire, topic, full)
            # Kafka answers KAFKA_STORAGE_ERROR until its controller has taken the offline replica out of the
            # partition (the broker's next heartbeat names the dir), then NOT_LEADER_OR_FOLLOWER: it has no leader
            refused = (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER)
            assert _produce(wire, topic, full, b"x") in refused
            code, records = _fetch(wire, topic, full)
            assert code in refused and records == []
            assert _log_dir_errors(wire) == {str(small_fs): KAFKA_STORAGE_ERROR, str(base / "kafka-data"): 0}
            assert _produce(wire, topic, other, b"fine") == 0
            assert _fetch(wire, topic, other) == (0, [b"fine"])


def _delete_records(wire, topic, partition, offset):
    """DeleteRecords v2 of one partition: (error code, low watermark)."""
    answer = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "offset": offset}]}], "timeout_ms": 5000})
    part = answer.topics[0].partitions[0]
    return part.error_code, part.low_watermark


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
def test_delete_records_of_a_partition_whose_log_dir_is_offline_answers_kafka_storage_error(kind, tmp_path,
                                                                                             small_fs):
    """Kafka's ReplicaManager answers DeleteRecords of a partition in an offline log dir with KAFKA_STORAGE_ERROR
    (getPartitionOrException: the partition is Offline) and changes nothing. klog moved the offline log's start
    and answered NONE; the partition in the other dir still takes it."""
    import contextlib

    from klog.testing.kafka import apache_kafka

    with contextlib.ExitStack() as stack:
        if kind == "kafka":
            base = tmp_path / "kafka"
            host, port = stack.enter_context(apache_kafka(
                base, config={"log.dirs": f"{base / 'kafka-data'},{small_fs}"})).rsplit(":", 1)
        else:
            broker = stack.enter_context(BrokerProcess(tmp_path / "big", _config(tmp_path, small_fs)))
            host, port = broker.host, broker.port
        wire = stack.enter_context(WireClient(host, int(port)))
        topic, full, other = _topic_in_both_dirs(wire, small_fs)
        acked = _fill_through_produce(wire, topic, full)
        assert len(acked) > 1
        assert _produce(wire, topic, other, b"one") == 0 and _produce(wire, topic, other, b"two") == 0
        assert _delete_records(wire, topic, full, 1) == (KAFKA_STORAGE_ERROR, -1)
        assert _delete_records(wire, topic, other, 1) == (0, 1)
        if kind == "klog":   # (Kafka serves no read of an offline partition)
            assert _list_offsets(wire, topic, full, -2) == 0
            assert _fetch_values(wire, topic, full) == acked


def _two_dir_broker(stack, kind, tmp_path):
    """A broker (klog or Apache Kafka) with two log dirs; (wire client, the two dirs)."""
    from klog.testing.kafka import apache_kafka

    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    config = {"log.dirs": ",".join(map(str, dirs)), "log.retention.check.interval.ms": 1000,
              "offsets.topic.num.partitions": 1}
    if kind == "kafka":
        host, port = stack.enter_context(apache_kafka(tmp_path / "kafka", config=config)).rsplit(":", 1)
    else:
        broker = stack.enter_context(BrokerProcess(tmp_path / "klog", config))
        host, port = broker.host, broker.port
    return stack.enter_context(WireClient(host, int(port))), dirs


def _topic_of_1_mib_segments(wire, dirs, prefix):
    """A topic with a partition in each of ``dirs`` and 1 MiB segments; (topic, its partition in the second dir,
    which is not the metadata log's: Kafka halts when that one fails)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "segment.bytes", "value": str(1 << 20)}]}], "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0
    deadline = time.monotonic() + 10   # Kafka makes the directories once the controller's record arrives
    while sum((d / f"{topic}-{p}").is_dir() for d in dirs for p in (0, 1)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    on_second = [p for p in (0, 1) if (dirs[1] / f"{topic}-{p}").is_dir()]
    assert len(on_second) == 1, os.listdir(dirs[1])
    return topic, on_second[0]


def _await_dir_offline(wire, log_dir):
    deadline = time.monotonic() + 60
    while _log_dir_errors(wire).get(str(log_dir)) != KAFKA_STORAGE_ERROR:
        assert time.monotonic() < deadline, _log_dir_errors(wire)
        time.sleep(0.2)


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
def test_delete_records_whose_segment_cannot_be_retired_takes_its_log_dir_offline(kind, tmp_path):
    """A segment below the new log start cannot be renamed ``*.deleted`` (a non-empty directory holds that name):
    Kafka's deleteSegments hands the IOException to the LogDirFailureChannel and the dir goes offline (Kafka retires
    the segments after the answer, at its next retention check; klog at once, answering KAFKA_STORAGE_ERROR). klog
    answered KAFKA_STORAGE_ERROR but kept the dir online, and the retry answered NONE with the segment's files
    leaked on disk. The other dir keeps taking writes."""
    import contextlib

    with contextlib.ExitStack() as stack:
        wire, dirs = _two_dir_broker(stack, kind, tmp_path)
        topic, partition = _topic_of_1_mib_segments(wire, dirs, "retire")
        for _ in range(3):   # 600 kB a batch: each one rolls a new 1 MiB segment
            assert _produce(wire, topic, partition, os.urandom(600_000)) == 0
        failing = dirs[1] / f"{topic}-{partition}"
        assert (failing / "00000000000000000001.log").exists(), sorted(os.listdir(failing))
        (failing / "00000000000000000000.log.deleted" / "obstacle").mkdir(parents=True)
        code, _ = _delete_records(wire, topic, partition, 2)
        assert code in (0, KAFKA_STORAGE_ERROR)
        _await_dir_offline(wire, dirs[1])
        assert _log_dir_errors(wire)[str(dirs[0])] == 0
        assert _delete_records(wire, topic, partition, 2)[0] == KAFKA_STORAGE_ERROR
        assert _produce(wire, topic, 1 - partition, b"still taken") == 0


@pytest.mark.parametrize("kind", ["klog", pytest.param("kafka", marks=[pytest.mark.java])])
def test_a_leader_append_failing_with_any_storage_error_takes_its_log_dir_offline(kind, tmp_path):
    """The segment a leader's append rolls cannot be made (a non-empty directory holds its file name: EISDIR, no
    full disk or I/O error): the dir goes offline, as Kafka hands any IOException of an append to the
    LogDirFailureChannel. klog took the dir offline only on ENOSPC/EIO/EROFS/EDQUOT: this one stayed online with
    every append to the partition failing. The other dir keeps taking writes."""
    import contextlib

    with contextlib.ExitStack() as stack:
        wire, dirs = _two_dir_broker(stack, kind, tmp_path)
        topic, partition = _topic_of_1_mib_segments(wire, dirs, "roll")
        assert _produce(wire, topic, partition, os.urandom(600_000)) == 0
        (dirs[1] / f"{topic}-{partition}" / "00000000000000000001.log" / "obstacle").mkdir(parents=True)
        assert _produce(wire, topic, partition, os.urandom(600_000)) != 0   # it rolls onto the directory
        _await_dir_offline(wire, dirs[1])
        assert _log_dir_errors(wire)[str(dirs[0])] == 0
        assert _produce(wire, topic, 1 - partition, b"still taken") == 0


def test_admin_changes_that_cannot_be_stored_on_a_full_disk_are_refused_and_not_applied(small_fs):
    """The disk fills up behind the broker's back (no write of its own failed yet): a topic config change or a new
    topic that cannot be stored answers KAFKA_STORAGE_ERROR and leaves nothing changed."""
    with BrokerProcess(small_fs, {"offsets.topic.num.partitions": 1}) as broker:
        topic = f"cfg-{uuid.uuid4().hex[:8]}"
        with WireClient(broker.host, broker.port) as wire:
            assert _create_topic(wire, topic) == (0, None)
            _fill(small_fs)
            response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                {"resource_type": 2, "resource_name": topic, "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "5000"}]}], "validate_only": False})
            code = response.responses[0].error_code
            described = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {
                "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}],
                "include_synonyms": False, "include_documentation": False})
            # a ConfigRecord may still fit in the metadata log's last block: then it is committed and applied;
            # otherwise it is refused and nothing changes. Never answered one way and done the other.
            if code == 0:
                assert [c.value for c in described.results[0].configs] == ["5000"]
            else:
                assert code == KAFKA_STORAGE_ERROR, response
                assert [c.value for c in described.results[0].configs] == ["604800000"]  # the broker default still
            # likewise a new topic: refused with nothing left on disk, or committed and served
            code, message = _create_topic(wire, "never", 3)
            listed = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": "never"}], "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": False})
            if code == 0:
                assert listed.topics[0].error_code == 0 and len(listed.topics[0].partitions) == 3
            else:
                assert code == KAFKA_STORAGE_ERROR, message
                assert listed.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
                assert not [n for n in os.listdir(small_fs) if n.startswith("never")]
        assert broker.stop() == 0, "\n".join(broker.lines[-12:])
        assert not [line for line in broker.lines if "Traceback" in line]


def _start_quorum_node(tmp_path, log_dirs: str, extra: str = ""):
    """A one-voter quorum node (process.roles=broker,controller) on ``log_dirs``, answering: (process, port)."""
    from klog.testing.kafka import answers_api_versions, free_port
    from klog.testing.process import broker_command

    port, controller_port = free_port(), free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller_port}\n"
                     f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n"
                     "controller.listener.names=CONTROLLER\nlistener.security.protocol.map="
                     "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
                     f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={log_dirs}\n{extra}")
    proc = subprocess.Popen([*broker_command(), str(props)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 60
    while not answers_api_versions(port):  # a quorum of one elects itself and commits its bootstrap records
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the node did not start: {proc.communicate(timeout=10)[0]}")
        time.sleep(0.2)
    return proc, port


def _exit_output(proc) -> str:
    """What the node printed until it exited (killed if it has not within 60 s)."""
    try:
        return proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate(timeout=10)[0]


@pytest.mark.long
def test_a_full_metadata_log_halts_the_node_with_one_line(small_fs, tmp_path):
    """A quorum node (process.roles=broker,controller, the only voter) whose metadata log dir is full stops when
    the quorum's append fails, as Kafka halts when its metadata log dir fails: exit code 1 and one line naming the
    file, not the raft error raised a second time on the way out. (Before, a quorum of one never started: it
    committed its own leader change before the driver knew it led, and its bootstrap proposal was refused.)"""
    from klog.testing.faults.netns import fill_disk

    proc, port = _start_quorum_node(tmp_path, str(small_fs))
    try:
        fill_disk(small_fs)
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        # a metadata record to append, and nothing else to write (a new partition's files would fail first)
        admin.incremental_alter_configs([ConfigResource("BROKER", "1", incremental_configs=[
            ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])])
    finally:
        out = _exit_output(proc)
    assert proc.returncode == 1, out
    assert re.search(r"klog-broker: halted: controller: the raft member stopped: RaftError\('append to "
                     r"\S+__cluster_metadata-0\S+: No space left on device", out), out
    assert "During handling of the above exception" not in out, out


def test_a_cluster_broker_whose_only_log_dir_fails_halts_so_its_partitions_move(small_fs, tmp_path):
    """A quorum node whose only data log dir fills (its metadata log lives elsewhere, ``metadata.log.dir``) stops,
    as Kafka shuts a broker down once all its log dirs have failed: kept running, its heartbeats would keep it
    registered and leading partitions it cannot write. Exit code 1 and one line naming the dir."""
    proc, port = _start_quorum_node(tmp_path, str(small_fs),
                                    f"metadata.log.dir={tmp_path / 'metadata'}\noffsets.topic.num.partitions=1\n")
    try:
        with WireClient("127.0.0.1", port) as wire:
            assert _create_topic(wire, "full") == (0, None)
            deadline = time.monotonic() + 10
            while _produce(wire, "full", 0, b"first") != 0:
                assert time.monotonic() < deadline, "the new partition never took a write"
                time.sleep(0.1)
            try:
                _fill_through_produce(wire, "full", 0)
            except (OSError, ConnectionError):
                pass   # the node may stop before it answers the write that failed
    finally:
        out = _exit_output(proc)
    assert proc.returncode == 1, out
    assert re.search(rf"klog-broker: halted: all log dirs are offline \({re.escape(str(small_fs))}: .*No space left",
                     out), out


def _fail_log_dir(how: str, path: Path) -> None:
    """Make ``path`` a log dir whose meta.properties cannot be read, the ways Kafka's MetaPropertiesEnsemble.Loader
    counts as a failed dir (an I/O error, or a file that is not a valid meta.properties)."""
    if how == "a plain file":
        path.write_text("not a log dir\n")
    elif how == "a directory named meta.properties":
        (path / "meta.properties").mkdir(parents=True)
    else:
        path.mkdir()
        (path / "meta.properties").write_text("version=7\nnode.id=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")


def _tree(path: Path) -> list[tuple[str, bytes]]:
    if path.is_file():
        return [("", path.read_bytes())]
    return sorted((str(p.relative_to(path)), p.read_bytes() if p.is_file() else b"") for p in path.rglob("*"))


def _assert_serves_with_the_failed_dir_offline(broker: BrokerProcess, good: Path, failed: Path) -> None:
    """DescribeLogDirs answers ``failed`` KAFKA_STORAGE_ERROR; a new topic's partitions are made in ``good`` and
    served."""
    with WireClient(broker.host, broker.port) as wire:
        errors = {os.path.realpath(d): code for d, code in _log_dir_errors(wire).items()}
        assert errors == {os.path.realpath(good): 0, os.path.realpath(failed): KAFKA_STORAGE_ERROR}, errors
        assert _create_topic(wire, "served", 2) == (0, None)
        assert _produce(wire, "served", 1, b"v") == 0
        assert _fetch_values(wire, "served", 1) == [b"v"]
    assert (good / "served-0").is_dir() and (good / "served-1").is_dir()


@pytest.mark.parametrize("how", ["a plain file", "a directory named meta.properties", "an unknown version"])
def test_a_log_dir_whose_meta_properties_cannot_be_read_starts_offline_and_the_others_serve(tmp_path, how):
    """As Kafka's MetaPropertiesEnsemble.Loader and LogManager (``initialOfflineDirs``): a log dir whose
    meta.properties cannot be read is a failed dir, so the broker starts with it offline instead of refusing to start
    (klog refused with "[Errno 20] Not a directory: .../meta.properties"): DescribeLogDirs answers it with
    KAFKA_STORAGE_ERROR, the partitions of a new topic are made in the other dir and served, and the failed dir is
    never written."""
    good, failed = tmp_path / "a", tmp_path / "b"
    _fail_log_dir(how, failed)
    before = _tree(failed)
    with BrokerProcess(good, {"log.dirs": f"{good},{failed}"}) as broker:
        _assert_serves_with_the_failed_dir_offline(broker, good, failed)
        lines = broker.lines
        assert any(f"Error while reading meta.properties file {failed / 'meta.properties'}" in line for line in lines)
        assert any(f"log dir {failed} is offline" in line for line in lines), lines[-20:]
    assert _tree(failed) == before


def test_an_eio_reading_meta_properties_starts_the_dir_offline_and_stops_the_start_as_the_metadata_dir(
        tmp_path, faulty_device):
    """A real I/O error (tests/conftest.py's FaultyDevice: reads of the file fail with EIO from the block layer, not
    a permission problem): a log dir whose meta.properties read fails so is a failed dir, as in Kafka's
    MetaPropertiesEnsemble.Loader: the broker starts with it offline and serves its other dir; named first (the
    metadata log dir), it stops the start. tests/test_cluster_jbod.py runs the same fault on klog and Kafka."""
    from test_broker_startup import run_cli

    good, failed = tmp_path / "a", faulty_device.mount_point / "b"
    config = {"log.dirs": f"{good},{failed}"}
    with BrokerProcess(good, config):
        pass
    meta = failed / "meta.properties"
    assert meta.is_file()
    faulty_device.fail_reads(meta)
    with pytest.raises(OSError) as read:
        meta.read_bytes()
    assert read.value.errno == 5, read.value   # EIO
    with BrokerProcess(good, config) as broker:
        _assert_serves_with_the_failed_dir_offline(broker, good, failed)
        lines = broker.lines
        assert any(f"Error while reading meta.properties file {meta}: OSError: [Errno 5] Input/output error" in line
                   for line in lines), lines[-20:]
        assert any(f"log dir {failed} is offline" in line for line in lines), lines[-20:]
    result = run_cli("--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={failed},{good}",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert (f"klog-broker: cannot start: Encountered I/O error in metadata log directory {failed} (OSError: [Errno 5] "
            "Input/output error)") in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("failed, refusal", [
    ("a", "Encountered I/O error in metadata log directory {a} "),
    ("a,b", "log.dirs: cannot use the data directories {a}, {b}: No readable meta.properties files found"),
    ("garbage", "Error: node ID not found in {b} "),
])
def test_a_failed_metadata_log_dir_or_every_failed_dir_stops_the_start_naming_it(tmp_path, failed, refusal):
    """Kafka refuses to start when the metadata log dir (the first log dir) or every log dir failed, and on a
    readable meta.properties naming no node id (a file of plain garbage reads as one): so does klog, with one line
    naming the dir."""
    from test_broker_startup import run_cli

    a, b = tmp_path / "a", tmp_path / "b"
    for name in failed.split(","):
        if name == "garbage":
            b.mkdir()
            (b / "meta.properties").write_bytes(b"\x00\x01 not a properties file \xff\n")
        else:
            _fail_log_dir("a plain file", tmp_path / name)
    result = run_cli("--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={a},{b}",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"klog-broker: cannot start: {refusal.format(a=a, b=b)}" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_a_single_node_started_with_a_failed_log_dir_makes_none_of_its_logs_elsewhere(tmp_path):
    """A single node's metadata names no log dir per partition: while a log dir that failed at the start is offline,
    the partitions the node held when it started and has no log of (the failed dir may hold them) get no new, empty
    log in its other dir; new topics are made there. Once the dir is back, its partitions are served with their
    records again (not shadowed by empty copies: two copies of a partition would stop the start)."""
    a, b = tmp_path / "a", tmp_path / "b"
    config = {"log.dirs": f"{a},{b}"}
    with BrokerProcess(a, config) as broker, WireClient(broker.host, broker.port) as wire:
        assert _create_topic(wire, "spread", 4) == (0, None)
        for p in range(4):
            assert _produce(wire, "spread", p, f"v{p}".encode()) == 0
    on_b = sorted(p for p in range(4) if (b / f"spread-{p}").is_dir())
    on_a = sorted(p for p in range(4) if (a / f"spread-{p}").is_dir())
    assert on_a and on_b, (on_a, on_b)
    b.rename(tmp_path / "b-saved")
    _fail_log_dir("a plain file", b)
    with BrokerProcess(a, config) as broker, WireClient(broker.host, broker.port) as wire:
        for p in on_a:
            assert _fetch_values(wire, "spread", p) == [f"v{p}".encode()]
        for p in on_b:
            assert _fetch(wire, "spread", p)[0] != 0
        assert _create_topic(wire, "later", 2) == (0, None)
        assert _produce(wire, "later", 1, b"w") == 0
    assert [p for p in on_b if (a / f"spread-{p}").exists()] == []
    b.unlink()
    (tmp_path / "b-saved").rename(b)
    with BrokerProcess(a, config) as broker, WireClient(broker.host, broker.port) as wire:
        for p in range(4):
            assert _fetch_values(wire, "spread", p) == [f"v{p}".encode()]
        assert _fetch_values(wire, "later", 1) == [b"w"]


def test_a_dir_moves_copy_failing_with_any_storage_error_takes_the_target_dir_offline(tmp_path):
    """AlterReplicaLogDirs (KIP-113) moves a partition into the second dir, whose future log cannot be written (a
    non-empty directory holds the name of a file the copy writes: EISDIR, no full disk or I/O error): the target
    dir goes offline, as Kafka hands any IOException of the future log to the LogDirFailureChannel; the move stops,
    the partition stays in its dir and keeps taking writes. klog failed the dir only on ENOSPC/EIO/EROFS: the copy
    was retried, the obstacle removed with the future log, and the target stayed online. (klog only: Kafka's future
    log is made by its appends, whose files exist before a test could put an obstacle in their place.)"""
    import contextlib

    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    config = {"log.dirs": ",".join(map(str, dirs)), "offsets.topic.num.partitions": 1,
              # the copy of the 600 kB segment takes seconds: the future log is seen before its index is copied
              "replica.alter.log.dirs.io.max.bytes.per.second": 200_000}
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(BrokerProcess(tmp_path / "klog", config))
        wire = stack.enter_context(WireClient(broker.host, int(broker.port)))
        topic, in_target = _topic_of_1_mib_segments(wire, dirs, "move")
        moved = 1 - in_target
        assert _produce(wire, topic, moved, os.urandom(600_000)) == 0
        answer = wire.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": str(dirs[1]), "topics": [{"name": topic, "partitions": [moved]}]}]})
        assert [p.error_code for r in answer.results for p in r.partitions] == [0], answer
        deadline = time.monotonic() + 30
        while not (futures := [n for n in os.listdir(dirs[1]) if n.startswith(f"{topic}-{moved}.")]):
            assert time.monotonic() < deadline, os.listdir(dirs[1])
            time.sleep(0.02)
        future = dirs[1] / futures[0]
        for name in ("00000000000000000000.index", "00000000000000000000.timeindex", "leader-epoch-checkpoint"):
            (future / name / "obstacle").mkdir(parents=True, exist_ok=True)
        _await_dir_offline(wire, dirs[1])
        assert _log_dir_errors(wire)[str(dirs[0])] == 0
        assert (dirs[0] / f"{topic}-{moved}").is_dir()
        assert _produce(wire, topic, moved, b"still taken") == 0

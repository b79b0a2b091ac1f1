"""What a new user meets first (issue 19, item 4): klog-broker's command line and start-up errors, the
``__consumer_offsets`` topic made on first use, the unclean-shutdown notice, a group-less Consumer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import klog
from klog.client import KafkaError, TopicPartition
from klog.testing.process import BrokerProcess, broker_command

RUN_TIMEOUT_S = 60


def broker_run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(broker_command() + list(args), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def test_version_and_case_insensitive_log_level(tmp_path: Path) -> None:
    version = broker_run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"klog-broker {klog.__version__}"
    with BrokerProcess(tmp_path / "data", log_level="debug") as broker:
        deadline = time.monotonic() + 10  # the debug lines follow the "listening" line start() waits for
        while not any(" DEBUG " in line for line in broker.lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(" DEBUG " in line for line in broker.lines)


def test_a_mistyped_config_key_gets_a_suggestion(tmp_path: Path) -> None:
    r = broker_run("--override", "log.retention.hour=1", "--override", f"log.dirs={tmp_path}")
    assert r.returncode == 2
    assert "config 'log.retention.hour': unknown broker config (did you mean 'log.retention.hours'?" in r.stderr


def test_empty_log_dirs_is_refused(tmp_path: Path) -> None:
    r = broker_run("--override", "log.dirs=", cwd=tmp_path)
    assert r.returncode == 2 and "config 'log.dirs': is empty" in r.stderr
    assert os.listdir(tmp_path) == []


def test_an_unusable_data_directory_names_log_dirs_and_the_reason(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    r = broker_run("--override", f"log.dirs={not_a_dir}", "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert r.returncode == 1
    assert f"cannot start: log.dirs: cannot use the data directory {not_a_dir}" in r.stderr
    assert "Not a directory" in r.stderr
    assert "stopped" not in r.stderr and "Traceback" not in r.stderr


def test_a_port_in_use_leaves_no_data_directory_behind(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = tmp_path / "new-data"
        r = broker_run("--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}")
    assert r.returncode == 1 and "address already in use" in r.stderr
    assert not data.exists()
    assert "stopped" not in r.stderr


def _offsets_dirs(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith("__consumer_offsets-"))


def test_consumer_offsets_is_created_on_first_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, {"offsets.topic.num.partitions": 4}) as broker:
        with klog.AdminClient(broker.bootstrap_servers) as admin:
            admin.create_topics(["plain"], num_partitions=1)
            assert _offsets_dirs(data) == []
            assert "__consumer_offsets" not in admin.list_topics(internal=True)
            with klog.Consumer(bootstrap_servers=broker.bootstrap_servers, group_id="first-group",
                               auto_offset_reset="earliest") as consumer:
                consumer.assign([("plain", 0)])
                consumer.commit({("plain", 0): 0})
            assert _offsets_dirs(data) == [f"__consumer_offsets-{p}" for p in range(4)]
            described = admin.describe_topics(["__consumer_offsets"])["__consumer_offsets"]
            assert described.is_internal and len(described.partitions) == 4
        # After a restart the topic and the commit are still there.
        broker.restart()
        with klog.AdminClient(broker.bootstrap_servers) as admin:
            assert admin.list_group_offsets("first-group")[TopicPartition("plain", 0)].offset == 0


def test_one_line_reports_an_unclean_shutdown(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    try:
        with klog.Producer(broker.bootstrap_servers) as p:
            p.send("t", b"v").result(timeout=30)
        broker.restart()  # clean
        assert not [line for line in broker.lines if "unclean" in line]
        broker.kill()
        broker.start()
        notices = [line for line in broker.lines if "last shutdown was unclean" in line]
        assert len(notices) == 1, broker.log_text()
        assert str(data) in notices[0] and "no data was cut" in notices[0]
        # A crash in the middle of a write: half a batch at the end of the segment is cut by recovery.
        broker.kill()
        segment = data / "t-0" / f"{0:020d}.log"
        with open(segment, "ab") as handle:
            handle.write(bytes(12) + b"\x00\x00\x00\x40" + bytes(10))
        broker.start()
        notices = [line for line in broker.lines if "last shutdown was unclean" in line]
        assert len(notices) == 1 and "26 bytes of unfinished batches were cut from 1 partitions (t-0)" in notices[0], \
            broker.log_text()
        with klog.Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
            c.assign([("t", 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                got += [r.value for r in c.poll(timeout=0.5)]
        assert got == [b"v"]
    finally:
        broker.stop()


def test_consumer_without_a_group_reads_every_partition(klog_broker: klog.Broker) -> None:
    topic = f"nogroup-{uuid.uuid4().hex[:8]}"
    with klog.AdminClient(klog_broker.bootstrap_servers) as admin:
        admin.create_topics([topic], num_partitions=3)
    with klog.Producer(klog_broker.bootstrap_servers) as p:
        for i in range(30):
            p.send(topic, f"v{i}".encode(), partition=i % 3)
        p.flush()
    with klog.Consumer(topic, bootstrap_servers=klog_broker.bootstrap_servers, group_id=None,
                       auto_offset_reset="earliest") as c:
        got: list[klog.ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            got += c.poll(timeout=0.5)
        assert {tp.partition for tp in c.assignment()} == {0, 1, 2}
        with pytest.raises(KafkaError, match="group.id"):
            c.commit()
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(30))


def test_the_spark_source_without_pyspark_says_to_install_the_extra() -> None:
    # A fresh interpreter in which pyspark cannot be imported (whether or not it is installed here).
    code = """
import sys
class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'pyspark':
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoPySpark())
import klog.spark                       # the pure-Python parts import without PySpark
from klog.spark.planning import OffsetRange
try:
    klog.spark.register(object())
except ImportError as exc:
    print(exc)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert "pip install 'klog[spark]'" in r.stdout


@pytest.fixture(scope="module", params=["apache-kafka", "klog"])
def any_bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "apache-kafka":
        return str(request.getfixturevalue("apache_kafka_bootstrap"))
    return str(request.getfixturevalue("klog_broker").bootstrap_servers)


def test_the_spark_sink_writes_to_a_topic_auto_creation_makes(any_bootstrap: str) -> None:
    """Spark's Kafka sink writes through a Kafka producer, which has a missing topic auto-created; klog's sink
    asks for the same (the sink's task-side writer, without a Spark session)."""
    pytest.importorskip("pyspark")
    import pyarrow as pa

    from klog.spark.options import parse_sink_options
    from klog.spark.sink import _feed_arrow, _write

    topic = f"sink-auto-{uuid.uuid4().hex[:8]}"
    opts = parse_sink_options({"kafka.bootstrap.servers": any_bootstrap, "topic": topic})
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"a", b"b", b"c"], pa.binary())})
    written = _write(opts, iter([batch]), _feed_arrow)
    assert sum(written.records.values()) == 3
    with klog.AdminClient(any_bootstrap) as admin:
        assert topic in admin.list_topics()
    with klog.Consumer(topic, bootstrap_servers=any_bootstrap, auto_offset_reset="earliest") as c:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value for r in c.poll(timeout=0.5)]
    assert sorted(got) == [b"a", b"b", b"c"]

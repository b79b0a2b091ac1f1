"""Starting, configuring and stopping the real ``klog-broker`` process."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.kafka import free_port
from klog.testing.process import BrokerProcess, broker_command
from klog.testing.wire import WireClient, fetch_raw, until

pytestmark = pytest.mark.timeout(120)

KAFKA_SAMPLE = """\
# A trimmed copy of Kafka 4's config/server.properties (KRaft combined mode)
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={log_dirs}
num.partitions=3
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def run_cli(*args, cwd=None, timeout=30):
    return subprocess.run(broker_command() + list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_help_names_the_kafka_invocation():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "server.properties" in result.stdout and "--override" in result.stdout


def test_kafka_server_properties_file_starts_the_broker(tmp_path):
    props = tmp_path / "server.properties"
    # the sample's controller port moved to a free one: another test may hold 9093 (pytest -n runs them at once)
    props.write_text(KAFKA_SAMPLE.format(log_dirs=tmp_path / "data").replace(":9093", f":{free_port()}"))
    broker = BrokerProcess(tmp_path / "data", properties_file=props)
    broker.config = {}           # everything comes from the file
    with broker:
        with WireClient(broker.host, broker.port) as wire:
            body = {"topics": [{"name": "from-file"}], "allow_auto_topic_creation": True}
            # created after the first answer (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's), with num.partitions from the file
            created = until(lambda: wire.request(ApiKey.METADATA, 9, body).topics[0].partitions, "from-file created")
            assert len(created) == 3
        assert any("without effect in klog" in line and "num.io.threads" in line for line in broker.lines)


@pytest.mark.parametrize("args, key", [
    (["--override", "log.segmnet.bytes=1000"], "log.segmnet.bytes"),
    (["--override", "num.partitions=many"], "num.partitions"),
    (["--override", "listeners=SASL_SSL://127.0.0.1:9094"], "ssl.keystore.location"),
    (["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:9094"], "sasl.enabled.mechanisms"),
    (["--override", "listener.name.sasl_ssl.ssl.keystore.locaton=x"], "listener.name.sasl_ssl.ssl.keystore.locaton"),
    (["--override", "noequals"], "noequals"),
])
def test_unknown_keys_and_invalid_values_stop_startup_naming_the_key(tmp_path, args, key):
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert f"'{key}'" in result.stderr
    assert not (tmp_path / "klog-data").exists()


def test_unknown_key_in_properties_file_stops_startup(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0\nlog.retention.hourz=5\n")
    result = run_cli(str(props), cwd=tmp_path)
    assert result.returncode == 2 and "'log.retention.hourz'" in result.stderr


def test_missing_properties_file_is_reported(tmp_path):
    result = run_cli(str(tmp_path / "nope.properties"))
    assert result.returncode == 2 and "nope.properties" in result.stderr


def test_default_data_dir_is_klog_data_in_the_working_directory(tmp_path):
    broker = BrokerProcess(tmp_path / "unused", cwd=tmp_path)
    del broker.config["log.dirs"]
    with broker:
        assert (tmp_path / "klog-data" / "meta.properties").is_file()
        assert str(tmp_path / "klog-data") in broker.log_text()


def test_port_in_use_is_a_clear_startup_error(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        result = run_cli("--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override",
                         f"log.dirs={tmp_path}")
        assert result.returncode == 1
        assert "cannot start" in result.stderr and str(port) in result.stderr
    finally:
        holder.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_cleanly(tmp_path, signum):
    broker = BrokerProcess(tmp_path).start()
    with WireClient(broker.host, broker.port) as wire:
        wire.request(ApiKey.METADATA, 9, {"topics": [{"name": "sig"}], "allow_auto_topic_creation": True})
    proc = broker.proc
    started = time.monotonic()
    proc.send_signal(signum)
    assert proc.wait(20) == 0
    assert time.monotonic() - started < 10
    broker._reader.join(5)
    assert any("klog-broker stopped" in line for line in broker.lines)
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    broker.proc = None


def test_topics_configs_and_data_persist_across_restarts(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    try:
        with WireClient(broker.host, broker.port) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
                {"name": "kept", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                 "configs": [{"name": "retention.ms", "value": "123456"}]}], "timeout_ms": 5000,
                "validate_only": False})
            assert created.topics[0].error_code == 0
            produced = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                        "topic_data": [{"name": "kept", "partition_data": [
                                                            {"index": 2, "records": encode_batch([{"value": b"x"}])}]}]})
            assert produced.responses[0].partition_responses[0].error_code == 0
            topic_id = next(t.topic_id for t in wire.request(ApiKey.METADATA, 12, {"topics": None}).topics
                            if t.name == "kept")
        broker.restart()
        with WireClient(broker.host, broker.port) as wire:
            meta = wire.request(ApiKey.METADATA, 12, {"topics": None})
            topic = next(t for t in meta.topics if t.name == "kept")
            assert len(topic.partitions) == 3 and topic.topic_id == topic_id
            configs = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": 2, "resource_name": "kept", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": False, "include_documentation": False})
            entry = configs.results[0].configs[0]
            assert (entry.value, entry.config_source) == ("123456", 1)
        assert [r.value for b in fetch_raw(broker.host, broker.port, "kept", 2) for r in b.records] == [b"x"]
    finally:
        broker.stop()


def test_data_dir_of_another_node_id_is_refused(tmp_path):
    with BrokerProcess(tmp_path):
        pass
    result = run_cli("--override", "node.id=7", "--override", f"log.dirs={tmp_path}", "--override",
                     "listeners=PLAINTEXT://127.0.0.1:0")
    assert result.returncode == 1 and "node.id" in result.stderr


def test_log_level_debug_shows_the_effective_config(tmp_path):
    with BrokerProcess(tmp_path, log_level="DEBUG") as broker:
        pass
    assert any("effective config" in line and "num.partitions=1" in line for line in broker.lines)
    with BrokerProcess(tmp_path, log_level="INFO") as broker:
        pass
    assert broker.lines and not any("effective config" in line for line in broker.lines)


def test_retention_removes_old_segments_and_moves_the_log_start(tmp_path):
    config = {"log.retention.check.interval.ms": 200, "log.initial.task.delay.ms": 0,
              "log.segment.delete.delay.ms": 0}
    with BrokerProcess(tmp_path, config) as broker:
        with WireClient(broker.host, broker.port) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
                {"name": "short", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": [{"name": "segment.bytes", "value": "1024"},
                             {"name": "retention.bytes", "value": "2048"}]}],
                "timeout_ms": 5000, "validate_only": False})
            assert created.topics[0].error_code == 0
            for i in range(20):
                body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                    {"name": "short", "partition_data": [{"index": 0, "records": encode_batch(
                        [{"value": b"%03d" % i + b"x" * 400}])}]}]}
                assert wire.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0].error_code == 0
            deadline = time.monotonic() + 20
            start = 0
            while time.monotonic() < deadline:
                response = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": "short", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                      "timestamp": -2}]}]})
                start = response.topics[0].partitions[0].offset
                if start > 0:
                    break
                time.sleep(0.2)
            assert 0 < start < 20
            values = [r.value[:3] for b in fetch_raw(broker.host, broker.port, "short", 0, offset=start)
                      for r in b.records if r.offset >= start]
            assert values == [b"%03d" % i for i in range(start, 20)]


def test_advertised_listeners_are_what_metadata_reports(tmp_path):
    config = {"advertised.listeners": "PLAINTEXT://localhost:0", "node.id": 5}
    with BrokerProcess(tmp_path, config) as broker:
        with WireClient(broker.host, broker.port) as wire:
            meta = wire.request(ApiKey.METADATA, 9, {"topics": None})
            assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(5, "localhost", broker.port)]
            assert meta.controller_id == 5


def test_each_listener_advertises_its_own_address(tmp_path):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "advertised.listeners": "PLAINTEXT://localhost:0,INTERNAL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}
    with BrokerProcess(tmp_path, config) as broker:
        line = next(line for line in broker.lines if "listening on" in line)
        internal_port = int(line.split("INTERNAL://127.0.0.1:")[1].split(",")[0].split()[0])
        with WireClient(broker.host, broker.port) as wire:
            assert [(b.host, b.port) for b in wire.request(ApiKey.METADATA, 9, {"topics": None}).brokers] == [
                ("localhost", broker.port)]
        with WireClient(broker.host, internal_port) as wire:
            assert [(b.host, b.port) for b in wire.request(ApiKey.METADATA, 9, {"topics": None}).brokers] == [
                ("127.0.0.1", internal_port)]


def test_advertising_the_wildcard_address_is_refused(tmp_path):
    result = run_cli("--override", "listeners=PLAINTEXT://0.0.0.0:0", "--override", f"log.dirs={tmp_path}")
    assert result.returncode == 2 and "'advertised.listeners'" in result.stderr


def test_a_log_dir_whose_meta_properties_is_a_copy_of_another_stops_startup_naming_both(tmp_path):
    """Each log dir has a directory.id of its own (the controller tracks replicas by it, KIP-858): a second log dir
    holding a copy of the first one's meta.properties is refused at startup, naming both files."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    (first / "meta.properties").write_text("node.id=1\ndirectory.id=5zbm5ecJTmK0l1yJ6wPBeQ\nversion=1\n"
                                           "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")
    second.mkdir()
    (second / "meta.properties").write_text((first / "meta.properties").read_text())
    result = run_cli("--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={first},{second}",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"{second / 'meta.properties'} has the same directory.id as {first / 'meta.properties'}" in result.stderr

"""Kafka Connect in distributed mode and MirrorMaker 2, Apache Kafka 4.3.1's own (connect-runtime, connect-file,
connect-mirror from Maven Central, tools/kafka/pom.xml), unchanged, on klog and on Apache Kafka 4.3.1: the same
scenarios run on both and check Kafka's behaviour.

- ``ConnectDistributed`` (one worker, its REST listener on 127.0.0.1, its config/offset/status topics compacted
  with replication factor 1): a FileStreamSource connector tails a file into a topic and a FileStreamSink connector
  writes that topic into another file, both created, watched and deleted through the REST API; the worker is
  restarted with lines written while it was down, and every line reaches the sink file once; the offsets topic
  and ``GET /connectors/{name}/offsets`` hold the source's position.
- a worker with ``exactly.once.source.support=enabled`` (KIP-618): the source task writes in transactions
  (a read_committed consumer sees each line once, the topic holds the commit markers), and altering the offsets
  of the stopped connector (KIP-875) first fences its task's producers (InitProducerId bumps the epoch).
- ``MirrorMaker`` (dedicated mode, mm2.properties) from one broker to another (klog to klog, Kafka to Kafka): the
  target gets ``A.orders`` with the same records, the topic's configs (and a later change of one), and the
  consumer group's offsets translated (MirrorCheckpointConnector, ``sync.group.offsets.enabled``).

One JVM per worker start; each wait polls with a bounded deadline.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.kafka import find_kafka_libs, log4j2_file_properties, one_broker
from klog.testing.ports import free_port
from klog.testing.process import stop_process
from klog.testing.wire import WireClient

pytestmark = pytest.mark.java

#: how long one step (a worker's start, a connector reaching RUNNING, lines reaching the sink) may take
STEP_S = 60.0
#: how long a worker may take to stop (it commits its source offsets and leaves the group on the way)
STOP_S = 30.0
CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
MIRROR_MAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = STEP_S, *, log: Path | None = None) -> T:
    """``probe()`` until it returns something other than None (or False): that value; fails naming ``what``
    (with the tail of ``log``) when ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(0.3)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log and log.exists() else ""
    pytest.fail(f"{what}: not within {timeout:.0f} s (last: {last!r})\n{tail}")


def _java(main: str, props_file: Path, log: Path) -> list[str]:
    """The java command running ``main`` from Kafka's jars, logging to ``log``: a small heap and C1 only, so a
    start on 2 cores is quick."""
    log4j = props_file.with_name(props_file.stem + "-log4j2.properties")
    log4j.write_text(log4j2_file_properties(log))
    return ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{find_kafka_libs()}/*", main, str(props_file)]


def _write_properties(path: Path, props: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


@dataclass
class Worker:
    """A running Connect worker: its REST listener and its log."""

    port: int
    log: Path
    proc: subprocess.Popen[bytes]

    def rest(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """One REST call: (HTTP status, the JSON answer or None)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=STEP_S) as answer:
                status, text = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:   # Jetty's own HTML page, before the REST resources are up
            return status, text.decode(errors="replace")

    def rest_when_ready(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """A REST call that writes to the config topic, retried while the worker's group rebalances (409)."""
        def attempt() -> tuple[int, Any] | None:
            status, answer = self.rest(method, path, body)
            return None if status == 409 else (status, answer)
        return wait_for(f"{method} {path}", attempt, log=self.log)

    def await_states(self, connector: str, state: str, tasks: int = 1) -> dict[str, Any]:
        """The connector's status once it and its ``tasks`` tasks are in ``state``."""
        def probe() -> dict[str, Any] | None:
            status, answer = self.rest("GET", f"/connectors/{connector}/status")
            if status != 200 or answer["connector"]["state"] != state:
                return None
            task_states = [task["state"] for task in answer["tasks"]]
            return answer if task_states == [state] * tasks else None
        return wait_for(f"{connector} {state}", probe, log=self.log)


def worker_properties(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    """A distributed worker of the Connect cluster ``group``: its internal topics ``group``-configs/-offsets/
    -status, compacted, one partition each and replication factor 1 (one broker); string keys and values."""
    return {
        "bootstrap.servers": bootstrap, "group.id": group,
        "key.converter": STRING_CONVERTER, "value.converter": STRING_CONVERTER,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": 1, "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1, "offset.storage.partitions": 1, "status.storage.partitions": 1,
        "offset.flush.interval.ms": 500, "plugin.discovery": "only_scan", **extra,
    }


@contextlib.contextmanager
def connect_worker(root: Path, props: Mapping[str, object]) -> Iterator[Worker]:
    """``ConnectDistributed`` with ``props`` and a REST listener on a free 127.0.0.1 port, once its REST API
    answers; stopped (SIGTERM, as ``connect-distributed.sh`` is) on exit."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    props_file = _write_properties(root / "worker.properties", {**props, "listeners": f"http://127.0.0.1:{port}"})
    log = root / "connect.log"
    with open(root / "connect.stdout", "ab") as stdout:
        proc = subprocess.Popen(_java(CONNECT_MAIN, props_file, log), stdout=stdout, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    worker = Worker(port, log, proc)
    try:
        def serving() -> bool | None:
            assert proc.poll() is None, f"the worker exited with {proc.returncode}"
            with contextlib.suppress(OSError):
                return worker.rest("GET", "/connectors")[0] == 200
            return None
        wait_for("the worker's REST API", serving, log=log)
        yield worker
    finally:
        stop_process(proc, STOP_S)


def file_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def sink_holds(path: Path, count: int) -> Callable[[], list[str] | None]:
    def probe() -> list[str] | None:
        lines = file_lines(path)
        return lines if len(lines) >= count else None
    return probe


def append_lines(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def end_offsets(bootstrap: str, topic: str, partitions: int = 1) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, count: int, **config: object) -> list[tuple[int, bytes | None, bytes]]:
    """The first ``count`` records of ``topic`` from the start (partition, key, value), in each partition's order;
    fails when fewer come within a step."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    records: list[tuple[int, bytes | None, bytes]] = []
    try:
        deadline = time.monotonic() + STEP_S
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append((message.partition(), message.key(), message.value()))
        assert len(records) == count, f"{topic}: {len(records)} of {count} records"
        extra = consumer.poll(1.0)   # nothing more
        assert extra is None or extra.error() is not None, f"{topic}: more than {count} records"
        return records
    finally:
        consumer.close()


def topic_configs(bootstrap: str, topic: str, *names: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return {name: configs[name].value for name in names}


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets in ``topic`` (OffsetFetch by a consumer of the group that joins nothing),
    partition -> offset, the partitions without one left out."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=STEP_S)
        return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
    finally:
        consumer.close()


@pytest.fixture(scope="module", params=["klog", "kafka"])
def kind(request: pytest.FixtureRequest) -> str:
    if shutil.which("java") is None:
        pytest.skip("needs java")
    return str(request.param)


@pytest.fixture(scope="module")
def broker(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One broker of ``kind``: the Connect workers' and MirrorMaker's source cluster."""
    with one_broker(kind, tmp_path_factory.mktemp(f"connect-{kind}"), {"num.partitions": 1}) as bootstrap:
        yield bootstrap


def test_file_connectors_copy_every_line_once_across_a_worker_restart(broker: str, tmp_path: Path) -> None:
    group, topic = "connect-files", "file-lines"
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    props = worker_properties(broker, group)
    first = [f"line {n}" for n in range(20)]
    with connect_worker(tmp_path / "worker", props) as worker:
        assert worker.rest_when_ready("PUT", "/connectors/source/config", {
            "connector.class": FILE_SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1"})[0] == 201
        assert worker.rest_when_ready("PUT", "/connectors/sink/config", {
            "connector.class": FILE_SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1"})[0] == 201
        for connector in ("source", "sink"):
            assert worker.await_states(connector, "RUNNING")["type"] == connector
        assert sorted(worker.rest("GET", "/connectors")[1]) == ["sink", "source"]
        append_lines(source_file, first)
        assert wait_for("the first lines in the sink file", sink_holds(sink_file, len(first)),
                        log=worker.log) == first
    # the worker's internal topics, as it created them: compacted, one replica
    admin = AdminClient({"bootstrap.servers": broker})
    topics = admin.list_topics(timeout=30).topics
    for internal in (f"{group}-configs", f"{group}-offsets", f"{group}-status"):
        assert topic_configs(broker, internal, "cleanup.policy") == {"cleanup.policy": "compact"}
        assert [len(p.replicas) for p in topics[internal].partitions.values()] == [1]

    # lines written while no worker runs are picked up from the committed position by the next one
    second = [f"line {n}" for n in range(20, 30)]
    append_lines(source_file, second)
    with connect_worker(tmp_path / "worker", props) as worker:
        worker.await_states("source", "RUNNING")
        worker.await_states("sink", "RUNNING")
        third = [f"line {n}" for n in range(30, 35)]
        append_lines(source_file, third)
        every = first + second + third
        assert wait_for("every line in the sink file", sink_holds(sink_file, len(every)), log=worker.log) == every
        assert end_offsets(broker, topic) == [len(every)]   # the source wrote no line twice

        position = source_file.stat().st_size
        source_partition = {"filename": str(source_file)}
        offsets = wait_for("the source's offset at the end of the file", lambda: (
            lambda answer: answer if answer[1]["offsets"] and
            answer[1]["offsets"][0]["offset"]["position"] == position else None)(
                worker.rest("GET", "/connectors/source/offsets")), log=worker.log)
        assert offsets == (200, {"offsets": [{"partition": source_partition, "offset": {"position": position}}]})
        # the offsets topic: JSON [connector, partition] -> offset, the last one of the key the position now
        offsets_topic = f"{group}-offsets"
        stored = read_topic(broker, offsets_topic, end_offsets(broker, offsets_topic)[0])
        positions = [json.loads(value) for _, key, value in stored
                     if json.loads(key or b"null") == ["source", source_partition]]
        assert positions[-1] == {"position": position}

        assert worker.rest_when_ready("DELETE", "/connectors/source")[0] == 204
        assert worker.rest_when_ready("DELETE", "/connectors/sink")[0] == 204
        wait_for("no connector", lambda: worker.rest("GET", "/connectors") == (200, []), log=worker.log)
        assert worker.rest("GET", "/connectors/source/status")[0] == 404
    assert file_lines(sink_file) == every


def _wire(bootstrap: str) -> WireClient:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return WireClient(host, int(port), client_id="connect-probe")


def _producer(bootstrap: str, transactional_id: str) -> tuple[int, int]:
    """The transactional id's producer id and epoch (DescribeTransactions; one broker coordinates every id)."""
    with _wire(bootstrap) as wire:
        state = wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
                             ).transaction_states[0]
    assert state.error_code == 0, state
    return int(state.producer_id), int(state.producer_epoch)


def _end_transaction(bootstrap: str, transactional_id: str, producer: tuple[int, int], version: int) -> int:
    """EndTxn (commit) as the producer (id, epoch) would send it: its error code."""
    with _wire(bootstrap) as wire:
        return int(wire.request(ApiKey.END_TXN, version, {
            "transactional_id": transactional_id, "producer_id": producer[0], "producer_epoch": producer[1],
            "committed": True}).error_code)


def test_exactly_once_source_commits_in_transactions_and_fences_zombies(broker: str, tmp_path: Path) -> None:
    group, topic = "connect-eos", "eos-lines"
    source_file = tmp_path / "in.txt"
    source_file.write_text("")
    props = worker_properties(broker, group, **{"exactly.once.source.support": "enabled"})
    committed = {"isolation.level": "read_committed"}
    task_transactional_id = f"{group}-source-0"   # <group.id>-<connector>-<task>
    with connect_worker(tmp_path / "worker", props) as worker:
        assert worker.rest_when_ready("PUT", "/connectors/source/config", {
            "connector.class": FILE_SOURCE, "file": str(source_file), "topic": topic, "tasks.max": "1",
            "exactly.once.support": "required", "transaction.boundary": "poll"})[0] == 201
        worker.await_states("source", "RUNNING")
        first = [f"line {n}" for n in range(10)]
        append_lines(source_file, first)
        records = read_topic(broker, topic, len(first), **committed)
        assert [value.decode() for _, _, value in records] == first
        # every poll's batch ends with a commit marker, which takes an offset of its own
        assert end_offsets(broker, topic)[0] > len(first)
        task_producer = _producer(broker, task_transactional_id)

        # KIP-875: the stopped connector's offsets are altered only after its task's producers are fenced
        assert worker.rest_when_ready("PUT", "/connectors/source/stop")[0] == 204
        worker.await_states("source", "STOPPED", tasks=0)
        skipped, kept = [f"skipped {n}" for n in range(3)], [f"kept {n}" for n in range(4)]
        append_lines(source_file, skipped)
        skip_to = source_file.stat().st_size
        append_lines(source_file, kept)
        status, answer = worker.rest_when_ready("PATCH", "/connectors/source/offsets", {"offsets": [
            {"partition": {"filename": str(source_file)}, "offset": {"position": skip_to}}]})
        assert (status, answer) == (200, {"message": "The offsets for this connector have been altered "
                                                     "successfully"})
        # the task's producer as it was before the stop is a zombie now: its epoch was bumped, it is fenced
        producer_id, epoch = _producer(broker, task_transactional_id)
        assert producer_id == task_producer[0] and epoch > task_producer[1]
        for version in (3, 4, 5):
            assert _end_transaction(broker, task_transactional_id, task_producer, version) == E.PRODUCER_FENCED

        assert worker.rest_when_ready("PUT", "/connectors/source/resume")[0] == 202
        worker.await_states("source", "RUNNING")
        records = read_topic(broker, topic, len(first) + len(kept), **committed)
        assert [value.decode() for _, _, value in records] == first + kept
        assert worker.rest_when_ready("DELETE", "/connectors/source")[0] == 204


def _mirror_maker_properties(source: str, target: str) -> dict[str, object]:
    """MirrorMaker 2 from cluster A to cluster B, one broker each: topic ``orders`` and group ``g1``, every
    interval at a second so a test sees each sync soon; an offset sync per record (offset.lag.max 0), so a group's
    offset at the end of a partition translates exactly."""
    internal_rf = ("replication.factor", "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor",
                   "offset-syncs.topic.replication.factor", "offset.storage.replication.factor",
                   "status.storage.replication.factor", "config.storage.replication.factor")
    return {
        "clusters": "A, B", "A.bootstrap.servers": source, "B.bootstrap.servers": target,
        "A->B.enabled": "true", "A->B.topics": "orders", "A->B.groups": "g1", "B->A.enabled": "false",
        **{key: 1 for key in internal_rf},
        "offset.storage.partitions": 1, "status.storage.partitions": 1, "offset.flush.interval.ms": 500,
        "sync.group.offsets.enabled": "true", "offset.lag.max": 0,
        **{f"{interval}.interval.seconds": 1 for interval in (
            "sync.group.offsets", "emit.checkpoints", "refresh.topics", "refresh.groups", "sync.topic.configs",
            "emit.heartbeats")},
    }


def test_mirror_maker_replicates_records_topic_configs_and_group_offsets(kind: str, broker: str,
                                                                         tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "123456789",
                                                          "max.message.bytes": "500000"})])["orders"].result(30)
    producer = Producer({"bootstrap.servers": broker})
    for n in range(40):
        producer.produce("orders", key=f"k{n}", value=f"v{n}", partition=n % 2)
    assert producer.flush(30) == 0
    # group g1 reads every record on A and commits
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "g1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    source_records = []
    deadline = time.monotonic() + STEP_S
    while len(source_records) < 40 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            source_records.append((message.partition(), message.key(), message.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    assert group_offsets(broker, "g1", "orders", 2) == {0: 20, 1: 20}

    with one_broker(kind, tmp_path / "target", {"num.partitions": 1}) as target:
        props_file = _write_properties(tmp_path / "mm2.properties", _mirror_maker_properties(broker, target))
        log = tmp_path / "mm2.log"
        with open(tmp_path / "mm2.stdout", "ab") as stdout:
            proc = subprocess.Popen(_java(MIRROR_MAKER_MAIN, props_file, log), stdout=stdout,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            def translated() -> dict[int, int] | None:
                assert proc.poll() is None, f"MirrorMaker exited with {proc.returncode}"
                offsets = group_offsets(target, "g1", "A.orders", 2)
                return offsets if offsets == {0: 20, 1: 20} else None
            # the group's offsets follow the records; a translation short of the end would stay short
            wait_for("g1's offsets in A.orders translated on B", translated, log=log)
            mirrored = read_topic(target, "A.orders", 40)
            assert sorted(mirrored) == sorted(source_records)
            assert end_offsets(target, "A.orders", 2) == [20, 20]
            assert topic_configs(target, "A.orders", "retention.ms", "max.message.bytes") == {
                "retention.ms": "123456789", "max.message.bytes": "500000"}
            # a later change of a topic config on A reaches B
            resource = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[
                ConfigEntry("retention.ms", "987654321", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(30)
            wait_for("retention.ms synced to B", lambda: topic_configs(target, "A.orders", "retention.ms") == {
                "retention.ms": "987654321"}, log=log)
            topics = AdminClient({"bootstrap.servers": target}).list_topics(timeout=30).topics
            assert {"A.checkpoints.internal", "heartbeats", "A.heartbeats"} <= set(topics)
        finally:
            stop_process(proc, STOP_S)

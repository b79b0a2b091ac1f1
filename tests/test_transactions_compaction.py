"""Compaction of a topic written by transactions, on klog and on Apache Kafka 4.3 from the same properties, as
Kafka's LogCleaner does it: the records of aborted transactions are removed (and never shadow an earlier committed
value of their key), committed ones are compacted like any other, a transaction's marker stays while any record of
its transaction does and goes ``delete.retention.ms`` after the last one did. Kafka's ``kafka-dump-log``
(``DumpLogSegments``) reads the cleaned segments on both."""

from __future__ import annotations

import glob
import os
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(300)

CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
          "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false",
          "log.cleaner.backoff.ms": 200, "log.retention.check.interval.ms": 300}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": "200", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "3000"}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(bootstrap servers, the data directory to find the partition's segments in)."""
    if request.param == "klog":
        data = tmp_path_factory.mktemp("klog-txn-compaction")
        with BrokerProcess(data, CONFIG) as proc:
            yield proc.bootstrap_servers, str(data)
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Apache Kafka jars not installed (tools/install-peers.sh)")
    root = tmp_path_factory.mktemp("kafka-txn-compaction")
    try:
        with apache_kafka(root, config=CONFIG, libs=libs, heap="512m") as kafka:
            yield str(kafka), str(root)
    except KafkaStartError as exc:   # pragma: no cover - a machine without Java
        pytest.skip(str(exc))


#: (offset, key, value) of a record a consumer read
Record = tuple[int, bytes | None, bytes | None]


def read_records(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Record]:
    """(offset, key, value) of every record a read_uncommitted consumer reads of partition 0 from its start up to
    the end it sees."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cc-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(message.error())
            out.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout}s")


def read_uncommitted(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record :func:`read_records` reads."""
    return [(key, value) for _, key, value in read_records(bootstrap, topic)]


def dump_segments(data_dir: str, topic: str) -> str:
    """kafka-dump-log --deep-iteration --print-data-log over the partition's segments."""
    from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool

    if kafka_libs_dir() is None:
        pytest.skip("Apache Kafka jars not installed")
    segments = sorted(glob.glob(os.path.join(data_dir, "**", f"{topic}-0", "*.log"), recursive=True))
    assert segments, data_dir
    result = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--print-data-log",
                            "--files", ",".join(segments))
    assert result.returncode == 0, result.stderr
    return result.stdout


def dump_txn_indexes(data_dir: str, topic: str) -> str:
    """kafka-dump-log over the partition's .txnindex files (empty when it has none)."""
    from klog.testing.kafka_tools import run_kafka_tool

    indexes = sorted(glob.glob(os.path.join(data_dir, "**", f"{topic}-0", "*.txnindex"), recursive=True))
    if not indexes:
        return ""
    result = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(indexes))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_compaction_removes_aborted_records_then_their_markers_and_keeps_committed_ones(broker):
    bootstrap, data_dir = broker
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)], operation_timeout=10)[topic].result(15)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key in (b"k1", b"k2"):
        plain.produce(topic, key=key, value=b"c0", partition=0)
    assert plain.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"cc-{uuid.uuid4().hex[:6]}",
                    "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for key in (b"k1", b"k3"):
        txn.produce(topic, key=key, value=b"aborted", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    txn.begin_transaction()
    for key in (b"k2", b"k4"):
        txn.produce(topic, key=key, value=b"committed", partition=0)
    txn.commit_transaction(30)

    def filler(n: int) -> None:   # new segments (segment.ms) and dirty bytes so the cleaner keeps coming back
        plain.produce(topic, key=b"filler", value=b"%d" % n, partition=0)
        assert plain.flush(30) == 0

    n = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        filler(n := n + 1)
        if not any(v == b"aborted" for _, v in read_uncommitted(bootstrap, topic)):
            break
        time.sleep(0.3)
    latest = dict(read_uncommitted(bootstrap, topic))
    assert latest.get(b"k1") == b"c0" and latest.get(b"k2") == b"committed", latest
    assert latest.get(b"k4") == b"committed" and b"k3" not in latest, latest
    dumped = dump_segments(data_dir, topic)
    assert "payload: aborted" not in dumped, dumped[-4000:]
    assert "endTxnMarker: COMMIT" in dumped, dumped[-4000:]
    # the ABORT marker goes delete.retention.ms after its transaction's last record did
    deadline = time.monotonic() + 90
    while "endTxnMarker: ABORT" in dumped and time.monotonic() < deadline:
        filler(n := n + 1)
        time.sleep(0.5)
        dumped = dump_segments(data_dir, topic)
    assert "endTxnMarker: ABORT" not in dumped, dumped[-4000:]
    # nor does the aborted-transaction index name it any more (a consumer would skip the producer's later
    # transactions for an aborted one whose marker it never meets)
    assert "producerId" not in dump_txn_indexes(data_dir, topic)
    # the committed transaction's records and marker are still there; read_committed readers agree
    assert "endTxnMarker: COMMIT" in dumped and "payload: committed" in dumped, dumped[-4000:]
    latest = dict(read_uncommitted(bootstrap, topic))
    assert latest.get(b"k1") == b"c0" and latest.get(b"k2") == b"committed" and b"k3" not in latest, latest

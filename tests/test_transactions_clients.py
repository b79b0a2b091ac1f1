"""Transactions end to end with confluent-kafka (librdkafka) on klog and on Apache Kafka 4.x, from the same
properties: init, commit, abort, send_offsets_to_transaction (consume-transform-produce), a zombie fenced by a new
instance of its transactional id, the coordinator aborting a transaction past its timeout, and read_committed
consumers that never see an aborted record while read_uncommitted ones do. ``kafka-dump-log
--transaction-log-decoder`` reads the ``__transaction_state`` klog writes."""

from __future__ import annotations

import glob
import os
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(180)

CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
          "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[dict[str, str]]:
    if request.param == "klog":
        data = tmp_path_factory.mktemp("klog-txn")
        with BrokerProcess(data, CONFIG) as proc:
            yield {"name": "klog", "bootstrap": proc.bootstrap_servers, "data": str(data), "proc": proc}
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Apache Kafka jars not installed (tools/install-peers.sh)")
    try:
        with apache_kafka(tmp_path_factory.mktemp("kafka-txn"), config=CONFIG, libs=libs, heap="512m") as kafka:
            yield {"name": "kafka", "bootstrap": str(kafka), "data": ""}
    except KafkaStartError as exc:   # pragma: no cover - a machine without Java
        pytest.skip(str(exc))


def new_topic(broker: dict[str, str], partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker["bootstrap"]})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(15)
    return name


def producer(broker: dict[str, str], tid: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": broker["bootstrap"], "transactional.id": tid, "linger.ms": 5, **extra})


def read_all(broker: dict[str, str], topic: str, partitions: int, isolation: str,
             timeout: float = 20.0) -> list[tuple[int, int, bytes]]:
    """Every record a consumer with ``isolation`` reads from the start to the end it sees (partition EOF)."""
    consumer = Consumer({"bootstrap.servers": broker["bootstrap"], "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(message.partition())
                    continue
                raise AssertionError(message.error())
            eof.discard(message.partition())
            out.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert len(eof) == partitions, f"no end of partitions within {timeout}s"
    return out


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in records)


def test_commit_and_abort_read_committed_sees_only_committed(broker):
    topic = new_topic(broker)
    p = producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"c1-%02d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"ab-%02d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"c2-%02d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = values(read_all(broker, topic, 2, "read_committed"))
    assert committed == sorted([b"c1-%02d" % i for i in range(20)] + [b"c2-%02d" % i for i in range(4)])
    everything = values(read_all(broker, topic, 2, "read_uncommitted"))
    assert sorted(everything) == sorted(committed + [b"ab-%02d" % i for i in range(20)])


def test_an_open_transaction_holds_read_committed_back_at_its_first_offset(broker):
    topic = new_topic(broker, 1)
    plain = Producer({"bootstrap.servers": broker["bootstrap"]})
    plain.produce(topic, value=b"before")
    plain.flush(10)
    p = producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(10)
    plain.produce(topic, value=b"after")    # above the open transaction: not stable yet
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": broker["bootstrap"], "group.id": "lso-probe",
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        assert (low, high) == (0, 1)     # ListOffsets read_committed: the last stable offset
        assert values(read_all(broker, topic, 1, "read_committed")) == [b"before"]
        p.commit_transaction(30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
            if high == 4:   # before, open, after, and the COMMIT marker
                break
            time.sleep(0.1)
        assert high == 4
    finally:
        consumer.close()
    assert values(read_all(broker, topic, 1, "read_committed")) == [b"after", b"before", b"open"]


def test_send_offsets_to_transaction_commits_the_consumer_offsets_with_the_output(broker):
    source = new_topic(broker, 1)
    sink = new_topic(broker, 1)
    feed = Producer({"bootstrap.servers": broker["bootstrap"]})
    for i in range(10):
        feed.produce(source, value=b"in-%d" % i)
    feed.flush(10)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": broker["bootstrap"], "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([source])
    p = producer(broker, f"etl-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message)
        assert len(got) == 10
        # the first five go out in an aborted transaction: neither the output nor the offsets stay
        p.begin_transaction()
        for m in got[:5]:
            p.produce(sink, value=m.value().replace(b"in", b"out"))
        p.send_offsets_to_transaction([TopicPartition(source, 0, got[4].offset() + 1)],
                                      consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset < 0
        # then all ten in a committed one
        p.begin_transaction()
        for m in got:
            p.produce(sink, value=m.value().replace(b"in", b"out"))
        p.send_offsets_to_transaction([TopicPartition(source, 0, got[-1].offset() + 1)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 10
    finally:
        consumer.close()
    assert values(read_all(broker, sink, 1, "read_committed")) == sorted(b"out-%d" % i for i in range(10))


def test_a_new_instance_fences_the_zombie_and_its_open_transaction_is_aborted(broker):
    topic = new_topic(broker, 1)
    tid = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = producer(broker, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    fresh = producer(broker, tid)
    fresh.init_transactions(30)     # bumps the epoch: the zombie's open transaction is aborted
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh")
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic, value=b"zombie-late")
        zombie.commit_transaction(10)
    error = failed.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert values(read_all(broker, topic, 1, "read_committed")) == [b"fresh"]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker):
    topic = new_topic(broker, 1)
    slow = producer(broker, f"slow-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1500})
    slow.init_transactions(30)
    slow.begin_transaction()
    slow.produce(topic, value=b"too-slow")
    slow.flush(10)
    time.sleep(3.5)    # timeout 1.5 s, checked every 0.5 s
    with pytest.raises(KafkaException):
        slow.commit_transaction(10)
    other = producer(broker, f"other-{uuid.uuid4().hex[:6]}")
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(topic, value=b"in-time")
    other.commit_transaction(30)
    # the aborted transaction no longer holds the last stable offset back
    assert values(read_all(broker, topic, 1, "read_committed")) == [b"in-time"]


def test_init_producer_id_refuses_a_timeout_over_the_maximum(broker):
    p = producer(broker, f"long-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 900001})
    with pytest.raises(KafkaException) as failed:
        p.init_transactions(20)
    assert failed.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_kafka_dump_log_decodes_the_transaction_log_klog_writes(broker):
    if broker["name"] != "klog":
        pytest.skip("reads klog's data directory")
    from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool

    if kafka_libs_dir() is None:
        pytest.skip("Apache Kafka jars not installed")
    tid = f"dump-{uuid.uuid4().hex[:6]}"
    topic = new_topic(broker, 1)
    p = producer(broker, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x")
    p.commit_transaction(30)
    segments = [s for s in glob.glob(os.path.join(broker["data"], "**", "__transaction_state-*", "*.log"),
                                     recursive=True) if os.path.getsize(s) > 0]
    assert segments
    out = ""
    for segment in segments:
        result = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--transaction-log-decoder",
                                "--files", segment)
        assert result.returncode == 0, result.stderr
        out += result.stdout
    import re

    mine = [line for line in out.splitlines() if f'"transactionalId":"{tid}"' in line]
    statuses = [int(m.group(1)) for line in mine for m in [re.search(r'"transactionStatus":(\d+)', line)] if m]
    # Empty (InitProducerId), Ongoing (AddPartitionsToTxn), PrepareCommit, CompleteCommit: Kafka's ids
    assert statuses == [0, 1, 2, 4], out[-3000:]
    data_segments = glob.glob(os.path.join(broker["data"], "**", f"{topic}-0", "*.log"), recursive=True)
    dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--files",
                            ",".join(data_segments))
    assert dumped.returncode == 0, dumped.stderr
    assert "endTxnMarker: COMMIT" in dumped.stdout and "isTransactional: true" in dumped.stdout, dumped.stdout


def test_aborted_transactions_are_in_kafkas_txnindex_and_survive_a_kill_and_restart(broker):
    if broker["name"] != "klog":
        pytest.skip("reads and restarts klog's data directory")
    from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool

    topic = new_topic(broker, 1)
    p = producer(broker, f"index-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    for n, commit in enumerate((True, False, True, False)):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"%s-%d-%d" % (b"c" if commit else b"a", n, i))
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(10)
            p.abort_transaction(30)
    expected = sorted(b"c-%d-%d" % (n, i) for n in (0, 2) for i in range(3))
    assert values(read_all(broker, topic, 1, "read_committed")) == expected
    indexes = glob.glob(os.path.join(broker["data"], "**", f"{topic}-0", "*.txnindex"), recursive=True)
    assert len(indexes) == 1 and os.path.getsize(indexes[0]) == 2 * 34   # two aborted transactions
    if kafka_libs_dir() is not None:
        dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", indexes[0])
        assert dumped.returncode == 0, dumped.stderr
        # the aborted transactions: offsets 4-7 (marker at 7) and 12-15 (marker at 15)
        assert "firstOffset: 4 lastOffset: 7" in dumped.stdout and "firstOffset: 12 lastOffset: 15" in dumped.stdout, \
            dumped.stdout
    # SIGKILL (no clean snapshot of the producer state) and a restart: the index and the log rebuild it
    proc = broker["proc"]
    proc.kill()
    state = glob.glob(os.path.join(broker["data"], "**", "klog-producer-state.json"), recursive=True)
    for path in state:
        os.remove(path)
    proc.restart()
    assert values(read_all(broker, topic, 1, "read_committed")) == expected
    assert len(values(read_all(broker, topic, 1, "read_uncommitted"))) == 12


def test_kafka_transactions_list_and_describe_show_an_open_and_a_committed_transaction(broker):
    """Kafka's kafka-transactions tool (ListTransactions, DescribeTransactions) reads the coordinator's state."""
    from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool

    if kafka_libs_dir() is None:
        pytest.skip("Apache Kafka jars not installed")
    topic = new_topic(broker, 1)
    tid = f"tool-{uuid.uuid4().hex[:6]}"
    p = producer(broker, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(10)

    def tool(*args: str) -> str:
        result = run_kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                                broker["bootstrap"], *args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    listed = [line.split() for line in tool("list").splitlines()]
    assert listed[0][:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], listed
    mine = [row for row in listed if row[0] == tid]
    assert len(mine) == 1 and mine[0][3] == "Ongoing", listed
    described = tool("describe", "--transactional-id", tid)
    assert "Ongoing" in described and f"{topic}-0" in described, described
    p.commit_transaction(30)
    deadline = time.monotonic() + 10
    while "CompleteCommit" not in tool("describe", "--transactional-id", tid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "CompleteCommit" in tool("describe", "--transactional-id", tid)

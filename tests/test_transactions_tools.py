"""Operating transactions with Apache Kafka 4.3's ``kafka-transactions`` tool (``TransactionsCommand``), the same
scenario on klog and on Apache Kafka from the same properties: ``describe-producers`` (DescribeProducers) shows the
producers of a partition with the start offset of an open transaction; a transactional producer killed in the
middle of a transaction that its coordinator knows of holds read_committed consumers back and is not hanging; one
whose batch the coordinator never heard of (written without AddPartitionsToTxn, with Kafka's
``transaction.partition.verification.enable=false``, as a late retry of a pre-KIP-890 client would) is found by
``find-hanging``, and ``abort`` (WriteTxnMarkers to the partition leader, as the tool sends it) ends either, after
which read_committed consumers read on and the aborted records stay invisible to them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(240)

CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
          "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false",
          "transaction.partition.verification.enable": "false"}
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"

#: A transactional producer that writes one transactional batch of 3 records to partition 0 of argv[2] without
#: telling its coordinator (no AddPartitionsToTxn), says so on stdout and waits to be killed.
HANGING_PRODUCER = r"""
import asyncio, sys
from klog.client.connection import BrokerConnection
from klog.records import encode_batch

async def main(host, port, topic, tid):
    conn = await BrokerConnection.open(host, int(port), -1, client_id="hanging", request_timeout_ms=30000,
                                       max_response_bytes=1 << 20, connect_timeout_ms=5000)
    for _ in range(300):
        found = await conn.request(10, {"key_type": 1, "coordinator_keys": [tid]}, version=4)
        if found.coordinators[0].error_code == 0:
            break
        await asyncio.sleep(0.1)
    for _ in range(300):
        init = await conn.request(22, {"transactional_id": tid, "transaction_timeout_ms": 600000}, version=4)
        if init.error_code == 0:
            break
        await asyncio.sleep(0.1)
    assert init.error_code == 0, init
    batch = encode_batch([{"value": b"hanging-%d" % i} for i in range(3)], producer_id=init.producer_id,
                         producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)
    answer = await conn.request(0, {"transactional_id": tid, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == 0, answer
    print("written", init.producer_id, init.producer_epoch, part.base_offset, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(*sys.argv[1:]))
"""

#: A confluent-kafka transactional producer that begins a transaction, writes 3 records to partition 0 of argv[2]
#: (AddPartitionsToTxn first, as every client does), says so and waits to be killed.
OPEN_PRODUCER = r"""
import sys
from confluent_kafka import Producer
bootstrap, topic, tid = sys.argv[1:]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 600000})
p.init_transactions(60)
p.begin_transaction()
for i in range(3):
    p.produce(topic, value=b"open-%d" % i, partition=0)
p.flush(30)
print("written", flush=True)
import time
time.sleep(3600)
"""


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[str]:
    if request.param == "klog":
        with BrokerProcess(tmp_path_factory.mktemp("klog-txn-tools"), CONFIG) as proc:
            yield proc.bootstrap_servers
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Apache Kafka jars not installed (tools/install-peers.sh)")
    try:
        with apache_kafka(tmp_path_factory.mktemp("kafka-txn-tools"), config=CONFIG, libs=libs,
                          heap="512m") as kafka:
            yield str(kafka)
    except KafkaStartError as exc:   # pragma: no cover - a machine without Java
        pytest.skip(str(exc))


def tool(bootstrap: str, *args: str) -> str:
    from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool

    if kafka_libs_dir() is None:
        pytest.skip("Apache Kafka jars not installed")
    result = run_kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def rows(output: str) -> list[dict[str, str]]:
    """The tool's table (a header line, then one line per row) as dicts by column name."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    return [dict(zip(lines[0], line)) for line in lines[1:]]


def new_topic(bootstrap: str) -> str:
    name = f"ops-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(15)
    return name


def produce_plain(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0


def read_committed(bootstrap: str, topic: str, timeout: float = 30.0) -> list[bytes]:
    """What a read_committed consumer reads of partition 0 from the start to the end it sees (partition EOF)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ops-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
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
            out.append(message.value())
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout}s (read {out})")


def start_killable(script: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Runs ``script`` until it prints its ``written ...`` line: (the process, that line's words)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("written"):
        proc.kill()
        raise AssertionError(f"producer failed: {line} {proc.communicate(timeout=10)}")
    return proc, line.split()


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)


def test_describe_producers_shows_an_idempotent_producer_and_an_open_transaction(broker):
    topic = new_topic(broker)
    p = Producer({"bootstrap.servers": broker, "enable.idempotence": True})
    for i in range(4):
        p.produce(topic, value=b"idem-%d" % i, partition=0)
    assert p.flush(30) == 0
    described = rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    assert len(described) == 1, described
    assert described[0]["LastSequence"] == "3" and described[0]["CurrentTransactionStartOffset"] == "None", described
    assert described[0]["LatestCoordinatorEpoch"] == "-1", described
    tid = f"open-{uuid.uuid4().hex[:6]}"
    proc, _ = start_killable(OPEN_PRODUCER, broker, topic, tid)
    try:
        described = rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    finally:
        kill(proc)
    transactional = [r for r in described if r["CurrentTransactionStartOffset"] != "None"]
    assert len(described) == 2 and len(transactional) == 1, described
    assert transactional[0]["CurrentTransactionStartOffset"] == "4", described
    assert transactional[0]["LastSequence"] == "2", described


def describe_producers_wire(bootstrap: str, topics: list[tuple[str, list[int]]]) -> dict[tuple[str, int], int]:
    """DescribeProducers v0 on the wire: the error code per partition."""
    import asyncio

    from klog.client.connection import BrokerConnection

    async def ask() -> dict[tuple[str, int], int]:
        host, port = bootstrap.split(":")
        conn = await BrokerConnection.open(host, int(port), -1, client_id="ops-test", request_timeout_ms=30000,
                                           max_response_bytes=1 << 20, connect_timeout_ms=5000)
        try:
            answer = await conn.request(61, {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics]},
                                        version=0)
        finally:
            conn.close()
        return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}

    return asyncio.run(ask())


def test_describe_producers_answers_unknown_and_illegal_partitions_with_kafkas_codes(broker):
    from klog.protocol.error_codes import ErrorCode

    topic = new_topic(broker)
    request = [(topic, [0, 7]), ("no-such-topic", [0]), ("bad/name", [0])]
    codes = describe_producers_wire(broker, request)
    # a topic just created may not have its leader in place yet (Kafka answered NOT_LEADER_OR_FOLLOWER once): ask
    # again as a client does on that retriable error, bounded
    deadline = time.monotonic() + 30
    while codes[(topic, 0)] == ErrorCode.NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline:
        time.sleep(0.2)
        codes = describe_producers_wire(broker, request)
    assert codes == {(topic, 0): ErrorCode.NONE, (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("bad/name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION}, codes


def test_a_killed_producer_with_a_known_transaction_is_not_hanging_and_abort_releases_readers(broker):
    topic = new_topic(broker)
    produce_plain(broker, topic, [b"before"])
    tid = f"killed-{uuid.uuid4().hex[:6]}"
    proc, _ = start_killable(OPEN_PRODUCER, broker, topic, tid)
    kill(proc)
    produce_plain(broker, topic, [b"after"])
    # the open transaction starts at offset 1 and holds read_committed readers back there
    assert read_committed(broker, topic) == [b"before"]
    listed = [r for r in rows(tool(broker, "list")) if r["TransactionalId"] == tid]
    assert len(listed) == 1 and listed[0]["TransactionState"] == "Ongoing", listed
    # its coordinator knows the partition and the epoch: not hanging, even past any timeout
    assert rows(tool(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")) == []
    tool(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    assert read_committed(broker, topic) == [b"before", b"after"]
    described = rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    assert all(r["CurrentTransactionStartOffset"] == "None" for r in described), described


def test_find_hanging_finds_a_transaction_its_coordinator_never_heard_of_and_abort_ends_it(broker):
    topic = new_topic(broker)
    produce_plain(broker, topic, [b"c0", b"c1"])
    tid = f"hanging-{uuid.uuid4().hex[:6]}"
    proc, (_, producer_id, producer_epoch, start_offset) = start_killable(HANGING_PRODUCER, *broker.split(":"),
                                                                          topic, tid)
    kill(proc)
    assert start_offset == "2"
    produce_plain(broker, topic, [b"c2"])
    assert read_committed(broker, topic) == [b"c0", b"c1"]
    # the coordinator has the id with no transaction on the partition
    assert "Ongoing" not in tool(broker, "describe", "--transactional-id", tid)
    # within its 15-minute default scope nothing is old enough to be called hanging
    assert rows(tool(broker, "find-hanging", "--topic", topic)) == []
    hanging = rows(tool(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"))
    assert len(hanging) == 1, hanging
    row = hanging[0]
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["ProducerEpoch"], row["StartOffset"]) == (
        topic, "0", producer_id, producer_epoch, "2"), row
    tool(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert rows(tool(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")) == []
    assert read_committed(broker, topic) == [b"c0", b"c1", b"c2"]
    # the ABORT marker is the partition's: the producer's later batches start a new transaction
    described = rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    mine = [r for r in described if r["ProducerId"] == producer_id]
    assert mine and mine[0]["CurrentTransactionStartOffset"] == "None", described
    # the tool sends coordinator epoch 0 for a producer that never had a marker: the partition keeps it
    assert mine[0]["LatestCoordinatorEpoch"] == "0", described


def write_txn_markers_wire(bootstrap: str, topic: str, producer_id: int, producer_epoch: int,
                           coordinator_epoch: int) -> int:
    """An ABORT marker for the producer on partition 0 (WriteTxnMarkers v1, as the admin client sends it): the
    partition's error code."""
    import asyncio

    from klog.client.connection import BrokerConnection

    async def ask() -> int:
        host, port = bootstrap.split(":")
        conn = await BrokerConnection.open(host, int(port), -1, client_id="ops-test", request_timeout_ms=30000,
                                           max_response_bytes=1 << 20, connect_timeout_ms=5000)
        try:
            answer = await conn.request(27, {"markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": coordinator_epoch}]},
                version=1)
        finally:
            conn.close()
        return int(answer.markers[0].topics[0].partitions[0].error_code)

    return asyncio.run(ask())


def test_a_marker_from_an_older_coordinator_epoch_is_fenced_as_on_kafka(broker):
    from klog.protocol.error_codes import ErrorCode

    topic = new_topic(broker)
    tid = f"fenced-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(30)
    mine = [r for r in rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
            if r["CurrentTransactionStartOffset"] != "None"]
    assert len(mine) == 1, mine
    producer_id, producer_epoch = int(mine[0]["ProducerId"]), int(mine[0]["ProducerEpoch"])
    coordinator_epoch = int(mine[0]["LatestCoordinatorEpoch"])
    assert coordinator_epoch >= 0, mine
    assert write_txn_markers_wire(broker, topic, producer_id, producer_epoch,
                                  coordinator_epoch - 1) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert write_txn_markers_wire(broker, topic, producer_id, producer_epoch, coordinator_epoch) == ErrorCode.NONE
    described = rows(tool(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    assert all(r["CurrentTransactionStartOffset"] == "None" for r in described), described

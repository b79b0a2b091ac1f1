"""What one client writes, every other client reads back byte for byte (keys, values, nulls, headers,
timestamps), through a real klog-broker process."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest

from klog.testing import kafka_tools as kt
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

BASE_TS = 1_700_000_000_000
# Binary keys and values with the bytes text tools trip over (NUL, newline, tab, 0xff), nulls and headers.
RECORDS = [
    (bytes([i, 0, 10, 9, 255]) + b"key", None if i % 7 == 3 else bytes(range(i, i + 40)) + b"\n\t\x00",
     [("h", bytes([i, 0, 255])), ("trace", b"t%d" % i)], BASE_TS + i)
    for i in range(40)
] + [(None, b"keyless value", [], BASE_TS + 99)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cross"), {"num.partitions": 1}) as proc:
        yield proc


# ---- writers ---------------------------------------------------------------------------------------------

def write_confluent(servers, topic):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "compression.type": "lz4", "linger.ms": 10})
    for key, value, headers, ts in RECORDS:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=0)
    assert producer.flush(15) == 0


def write_kafka_python(servers, topic):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, compression_type="gzip")
    for key, value, headers, ts in RECORDS:
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
    producer.flush(15)
    producer.close()


def write_aiokafka(servers, topic):
    from aiokafka import AIOKafkaProducer

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=servers, compression_type="zstd")
        await producer.start()
        try:
            for key, value, headers, ts in RECORDS:
                await producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(go(), 30))


WRITERS = {"confluent-kafka": write_confluent, "kafka-python": write_kafka_python, "aiokafka": write_aiokafka}


# ---- readers: each returns [(key, value, headers, timestamp)] ---------------------------------------------

def read_confluent(servers, topic, n):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
    consumer.close()
    return out


def read_kafka_python(servers, topic, n):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    out = []
    deadline = time.monotonic() + 20
    while len(out) < n and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            out.extend((r.key, r.value, list(r.headers), r.timestamp) for r in batch)
    consumer.close()
    return out


def read_aiokafka(servers, topic, n):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go():
        consumer = AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            out = []
            deadline = time.monotonic() + 20
            while len(out) < n and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    out.extend((r.key, r.value, list(r.headers), r.timestamp) for r in batch)
            return out
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(go(), 40))


def read_kcat(servers, topic, n):
    # %K/%S print key/value lengths (-1 for null): the raw bytes in between parse exactly.
    result = subprocess.run(["kcat", "-b", servers, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                             "-c", str(n), "-f", "%K|%S|%T|%k%s"], capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr
    data, out, pos = result.stdout, [], 0
    while pos < len(data):
        fields = []
        for _ in range(3):
            end = data.index(b"|", pos)
            fields.append(int(data[pos:end]))
            pos = end + 1
        key_len, value_len, ts = fields
        key = None if key_len < 0 else data[pos:pos + key_len]
        pos += max(key_len, 0)
        value = None if value_len < 0 else data[pos:pos + value_len]
        pos += max(value_len, 0)
        out.append((key, value, None, ts))
    return out


READERS = {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka,
           "kcat": read_kcat}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_client_reads_what_another_wrote_byte_for_byte(broker, writer):
    topic = f"x-{writer}-{uuid.uuid4().hex[:8]}"
    WRITERS[writer](broker.bootstrap_servers, topic)
    for reader, read in READERS.items():
        got = read(broker.bootstrap_servers, topic, len(RECORDS))
        if reader == "kcat":   # kcat cannot print binary headers losslessly: keys, values, timestamps
            assert got == [(k, v, None, ts) for k, v, _, ts in RECORDS], (writer, reader)
        else:
            assert got == [(k, v, list(h), ts) for k, v, h, ts in RECORDS], (writer, reader)


def test_java_console_producer_text_is_read_by_every_client(broker):
    libs = kt.kafka_libs_dir(__file__)
    assert libs is not None, "Kafka jars missing: run tools/install-peers.sh"
    topic = f"x-java-{uuid.uuid4().hex[:8]}"
    subprocess.run(["kcat", "-b", broker.bootstrap_servers, "-L", "-t", topic], capture_output=True, timeout=30)
    lines = [(f"k{i}", f"value é {i} ✓") for i in range(20)]
    result = kt.run_kafka_tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap_servers, "--topic", topic,
                               "--reader-property", "parse.key=true", "--compression-codec", "snappy",
                               input="".join(f"{k}\t{v}\n" for k, v in lines), libs=libs)
    assert result.returncode == 0, result.stderr
    expected = [(k.encode(), v.encode()) for k, v in lines]
    for reader, read in READERS.items():
        got = read(broker.bootstrap_servers, topic, len(lines))
        assert [(k, v) for k, v, _, _ in got] == expected, reader


def test_kcat_output_is_read_by_the_java_console_consumer(broker):
    libs = kt.kafka_libs_dir(__file__)
    assert libs is not None
    topic = f"x-kcat-{uuid.uuid4().hex[:8]}"
    payload = "".join(f"key{i}:välue {i}\n" for i in range(15)).encode()
    subprocess.run(["kcat", "-b", broker.bootstrap_servers, "-P", "-t", topic, "-K", ":", "-z", "gzip"],
                   input=payload, check=True, timeout=30)
    result = kt.run_kafka_tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap_servers, "--topic", topic,
                               "--partition", "0", "--offset", "earliest", "--max-messages", "15",
                               "--timeout-ms", "20000", "--formatter-property", "print.key=true", libs=libs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"key{i}\tvälue {i}" for i in range(15)]

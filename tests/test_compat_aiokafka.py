"""aiokafka 0.14 (non-flexible versions only, ApiVersions v0) against a real klog-broker process."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from klog.partitioner import partition_for_key
from klog.testing.process import BrokerProcess
from klog.testing.wire import fetch_raw

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("aiokafka"), {"num.partitions": 1}) as proc:
        yield proc


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def create_topic(broker, partitions=1, configs=None):
    name = f"aio-{uuid.uuid4().hex[:10]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        await admin.close()
    return name


async def consume(broker, topic, partitions, expected):
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        records = []
        deadline = time.monotonic() + 20
        while len(records) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_producer_round_trip_with_each_codec(broker, codec):
    async def scenario():
        topic = await create_topic(broker)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec,
                                    linger_ms=20)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
                       for i in range(100)]
            offsets = [(await f).offset for f in futures]
        finally:
            await producer.stop()
        assert offsets == list(range(100))
        records = await consume(broker, topic, 1, 100)
        assert [(r.key, r.value) for r in records] == [(b"k%d" % i, b"v%d" % i) for i in range(100)]
        assert list(records[9].headers) == [("h", b"9")]
        return topic

    topic = run(scenario())
    expected = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    assert {b.attributes & 0x07 for b in fetch_raw(broker.host, broker.port, topic)} == {expected}


def test_idempotent_producer_null_values_and_timestamps(broker):
    async def scenario():
        topic = await create_topic(broker)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True)
        await producer.start()
        try:
            await producer.send_and_wait(topic, key=b"k", value=None, timestamp_ms=1_400_000_000_000)
            await producer.send_and_wait(topic, key=None, value=b"v", timestamp_ms=1_400_000_000_001)
        finally:
            await producer.stop()
        records = await consume(broker, topic, 1, 2)
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            (b"k", None, 1_400_000_000_000), (None, b"v", 1_400_000_000_001)]
        return topic

    topic = run(scenario())
    assert all(b.producer_id >= 0 for b in fetch_raw(broker.host, broker.port, topic))


def test_default_partitioner_matches_java(broker):
    async def scenario():
        topic = await create_topic(broker, partitions=4)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        keys = [f"order-{i}".encode() for i in range(40)]
        try:
            placed = [(await producer.send_and_wait(topic, key=k, value=k)).partition for k in keys]
        finally:
            await producer.stop()
        assert placed == [partition_for_key(k, 4) for k in keys]

    run(scenario())


def test_offsets_for_times_and_end_offsets(broker):
    async def scenario():
        topic = await create_topic(broker)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        base = int(time.time() * 1000) - 5_000
        try:
            for i in range(5):
                await producer.send_and_wait(topic, value=b"%d" % i, timestamp_ms=base + i * 10)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            assert (await consumer.end_offsets([tp]))[tp] == 5
            assert (await consumer.beginning_offsets([tp]))[tp] == 0
            assert (await consumer.offsets_for_times({tp: base + 15}))[tp].offset == 2
        finally:
            await consumer.stop()

    run(scenario())


def test_admin_describe_configs_and_delete_topics(broker):
    async def scenario():
        topic = await create_topic(broker, configs={"retention.ms": "60000"})
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            entries = {e[0]: e[1] for e in responses[0].resources[0][4]}
            assert entries["retention.ms"] == "60000"
            await admin.delete_topics([topic])
            assert topic not in await admin.list_topics()
        finally:
            await admin.close()

    run(scenario())


def test_consumer_group_subscribe_and_commit(broker):
    async def scenario():
        topic = await create_topic(broker, partitions=2)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, key=b"%d" % i, value=b"%d" % i)
        finally:
            await producer.stop()
        group = f"aiog-{uuid.uuid4().hex[:8]}"
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        seen = []
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 10 and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    seen.extend(batch)
            await consumer.commit()
            committed = await consumer.committed(TopicPartition(topic, 0))
        finally:
            await consumer.stop()
        assert sorted(int(r.value) for r in seen) == list(range(10))
        assert committed == max([r.offset for r in seen if r.partition == 0], default=-1) + 1

    run(scenario())

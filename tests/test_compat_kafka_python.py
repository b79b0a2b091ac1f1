"""kafka-python 3.x against a real klog-broker process: idempotent producer (its default), every codec,
headers, null values, timestamps, Java partitioning, consumer offsets, KafkaAdminClient."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import MessageSizeTooLargeError, PolicyViolationError, TopicAlreadyExistsError

from klog.partitioner import partition_for_key
from klog.testing.process import BrokerProcess
from klog.testing.wire import fetch_raw

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("kafka-python"), {"num.partitions": 1}) as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def create_topic(admin, partitions=1, configs=None):
    name = f"kp-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    return name


def consume(broker, topic, partitions, expected, timeout=20):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=2000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_producer_round_trip_with_each_codec(broker, admin, codec):
    topic = create_topic(admin)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=20)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)])
               for i in range(100)]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(100))
    producer.close()
    records = consume(broker, topic, 1, 100)
    assert [(r.key, r.value, r.offset) for r in records] == [(b"k%d" % i, b"v%d" % i, i) for i in range(100)]
    assert records[3].headers == [("n", b"3")]
    batches = fetch_raw(broker.host, broker.port, topic)
    expected = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    # kafka-python sends a batch uncompressed when the codec would not shrink it (DefaultRecordBatchBuilder._maybe_compress):
    # a batch of one or two records, cut early on a busy machine, can be one of those
    codecs = {b.attributes & 0x07 for b in batches}
    assert expected in codecs and codecs <= {0, expected}, codecs
    assert all(b.producer_id >= 0 for b in batches)       # kafka-python 3 is idempotent by default


def test_null_values_and_explicit_timestamps(broker, admin):
    topic = create_topic(admin)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send(topic, key=b"gone", value=None, timestamp_ms=1_500_000_000_000)
    producer.send(topic, key=None, value=b"keyless", timestamp_ms=1_500_000_000_001)
    producer.flush(10)
    producer.close()
    records = consume(broker, topic, 1, 2)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"gone", None, 1_500_000_000_000), (None, b"keyless", 1_500_000_000_001)]


def test_default_partitioner_matches_java(broker, admin):
    topic = create_topic(admin, partitions=5)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    keys = [f"account-{i}".encode() for i in range(60)]
    metadata = [producer.send(topic, key=k, value=k).get(10) for k in keys]
    producer.close()
    assert [m.partition for m in metadata] == [partition_for_key(k, 5) for k in keys]


def test_message_too_large_is_reported(broker, admin):
    topic = create_topic(admin, configs={"max.message.bytes": "100000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=1_000_000,
                             retries=0)
    with pytest.raises(MessageSizeTooLargeError):
        producer.send(topic, value=b"x" * 200_000).get(10)
    assert producer.send(topic, value=b"y" * 99_000).get(10).offset == 0
    producer.close()


def test_offsets_for_times_beginning_and_end(broker, admin):
    topic = create_topic(admin)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    base = int(time.time() * 1000) - 5_000
    for i in range(6):
        producer.send(topic, value=b"%d" % i, timestamp_ms=base + i * 10)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    tp = TopicPartition(topic, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 6
    assert consumer.offsets_for_times({tp: base + 25})[tp].offset == 3
    consumer.close()


def test_admin_client(broker, admin):
    topic = create_topic(admin, partitions=2, configs={"cleanup.policy": "compact"})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 1, 1)])
    admin.create_partitions({topic: NewPartitions(4)})
    described = admin.describe_topics([topic])
    assert len(described[0]["partitions"]) == 4
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {"cleanup.policy": "compact"}   # only overrides
    everything = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                        config_filter="all")["topic"][topic]
    assert everything["segment.bytes"]["value"] == "1073741824"
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "1000"})])
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    # kafka-python 3 carries the other overrides over so AlterConfigs does not reset them
    assert {k: v["value"] for k, v in modified.items()} == {"cleanup.policy": "compact", "retention.ms": "1000"}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(5):
        producer.send(topic, key=b"k", value=b"%d" % i, partition=0)
    producer.flush(10)
    producer.close()
    # a compact-only topic refuses DeleteRecords, as Kafka's (POLICY_VIOLATION); with ``delete`` among its
    # policies it takes it
    with pytest.raises(PolicyViolationError):
        admin.delete_records({TopicPartition(topic, 0): 3})
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": "compact,delete"})])
    low = admin.delete_records({TopicPartition(topic, 0): 3})
    assert low[TopicPartition(topic, 0)]["low_watermark"] == 3
    admin.delete_topics([topic])
    assert topic not in admin.list_topics()


def test_consumer_group_commits_and_resumes(broker, admin):
    topic = create_topic(admin, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(20):
        producer.send(topic, key=b"%d" % i, value=b"%d" % i)
    producer.flush(10)
    producer.close()
    group = f"kpg-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            seen.extend(batch)
    consumer.commit()
    consumer.close()
    assert sorted(int(r.value) for r in seen) == list(range(20))
    again = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000)
    assert list(again) == []          # everything was committed
    again.close()

"""confluent-kafka (recent librdkafka) against a real klog-broker process: producer (idempotent, all codecs,
headers, null values, explicit timestamps, Java-compatible partitioning), consumer, AdminClient."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from klog.partitioner import partition_for_key
from klog.testing.process import BrokerProcess
from klog.testing.wire import fetch_raw

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("confluent"), {"num.partitions": 1}) as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(admin, partitions=1, configs=None):
    name = f"ck-{uuid.uuid4().hex[:10]}"
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    futures[name].result(15)
    return name


def consume_all(broker, topic, partitions, expected, timeout=20):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_round_trip_with_each_codec(broker, admin, codec):
    topic = create_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "compression.type": codec, "linger.ms": 20})
    for i in range(200):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)])
    assert producer.flush(30) == 0
    messages = consume_all(broker, topic, 1, 200)
    assert [(m.key(), m.value(), m.offset()) for m in messages] == [(b"k%d" % i, b"v%d" % i, i) for i in range(200)]
    assert messages[7].headers() == [("n", b"7")]
    batches = fetch_raw(broker.host, broker.port, topic)
    assert {b.attributes & 0x07 for b in batches} == {["none", "gzip", "snappy", "lz4", "zstd"].index(codec)}
    assert all(b.producer_id >= 0 for b in batches)            # idempotent: a real producer id


def test_null_values_null_keys_and_explicit_timestamps(broker, admin):
    topic = create_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, key=b"tombstone", value=None, timestamp=1_600_000_000_000)
    producer.produce(topic, key=None, value=b"keyless", timestamp=1_600_000_000_123)
    producer.produce(topic, key=b"", value=b"", timestamp=1_600_000_000_456)
    assert producer.flush(10) == 0
    messages = consume_all(broker, topic, 1, 3)
    assert [(m.key(), m.value()) for m in messages] == [(b"tombstone", None), (None, b"keyless"), (b"", b"")]
    assert [m.timestamp()[1] for m in messages] == [1_600_000_000_000, 1_600_000_000_123, 1_600_000_000_456]


def test_murmur2_partitioner_places_keys_where_java_does(broker, admin):
    topic = create_topic(admin, partitions=7)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"})
    keys = [f"user-{i}".encode() for i in range(100)]
    for key in keys:
        producer.produce(topic, key=key, value=key)
    assert producer.flush(10) == 0
    messages = consume_all(broker, topic, 7, 100)
    assert {m.key(): m.partition() for m in messages} == {k: partition_for_key(k, 7) for k in keys}


def test_batches_near_message_max_bytes_and_too_large(broker, admin):
    topic = create_topic(admin, configs={"max.message.bytes": "300000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.max.bytes": 2_000_000,
                         "batch.size": 2_000_000, "linger.ms": 50})
    producer.produce(topic, value=b"n" * 299_000)
    assert producer.flush(10) == 0
    errors = []
    producer.produce(topic, value=b"x" * 400_000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"
    messages = consume_all(broker, topic, 1, 1)
    assert len(messages[0].value()) == 299_000


def test_offsets_for_times_and_watermarks(broker, admin):
    topic = create_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    base = int(time.time() * 1000) - 10_000
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, timestamp=base + i * 100)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 450)], timeout=10)
        assert found[0].offset == 5
    finally:
        consumer.close()


def test_admin_client_topics_partitions_configs_and_delete_records(broker, admin):
    topic = create_topic(admin, partitions=2, configs={"retention.ms": "3600000"})
    assert topic in admin.list_topics(timeout=10).topics
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(15)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    change = ConfigResource(ConfigResource.Type.TOPIC, topic,
                            incremental_configs=[ConfigEntry("retention.ms", "7200000",
                                                             incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(15)
    assert admin.describe_configs([resource])[resource].result(15)["retention.ms"].value == "7200000"

    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(15)
    assert broker_configs["num.partitions"].value == "1"

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0
    deleted = admin.delete_records([TopicPartition(topic, 0, 4)])
    result = list(deleted.values())[0].result(15)
    assert result.low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (4, 10)
    finally:
        consumer.close()

    admin.delete_topics([topic], operation_timeout=10)[topic].result(15)
    assert topic not in admin.list_topics(timeout=10).topics


def test_admin_create_topic_errors(admin):
    topic = create_topic(admin)
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    assert info.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("rf3-" + topic, 1, 3)])["rf3-" + topic].result(15)
    assert info.value.args[0].name() == "INVALID_REPLICATION_FACTOR"


def test_describe_cluster(broker, admin):
    cluster = admin.describe_cluster().result(15)
    assert cluster.controller.id == 1
    assert [(n.id, n.port) for n in cluster.nodes] == [(1, broker.port)]


def test_consumer_group_subscribe_commit_and_resume(broker, admin):
    topic = create_topic(admin, partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(30):
        producer.produce(topic, key=b"%d" % i, value=b"%d" % i)
    assert producer.flush(10) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    settings = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000}
    consumer = Consumer(settings)
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message)
            consumer.commit(message=message, asynchronous=False)
    consumer.close()
    assert len(seen) >= 20
    committed_per_partition = {}
    for m in seen:
        committed_per_partition[m.partition()] = max(committed_per_partition.get(m.partition(), -1), m.offset())
    resumed = Consumer(settings)
    resumed.subscribe([topic])
    rest = []
    deadline = time.monotonic() + 30
    while len(seen) + len(rest) < 30 and time.monotonic() < deadline:
        message = resumed.poll(0.5)
        if message is not None and message.error() is None:
            rest.append(message)
    resumed.close()
    assert sorted(int(m.value()) for m in seen + rest) == list(range(30))   # nothing re-read, nothing missed

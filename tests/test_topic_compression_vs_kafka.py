"""A topic's ``compression.type`` on klog and on Apache Kafka 4.x, from the same client calls: confluent-kafka's
AdminClient creates topics with each codec (and alters one), a producer sends batches with another codec, a
consumer reads back the same records, and Kafka's own DumpLogSegments (the oracle for what is stored) shows the
stored batches carrying the topic's codec: the leader recompressed them, as Kafka's LogValidator does. A batch
already in the topic's codec, or any batch of a ``producer`` topic, is stored as sent; transactional batches keep
their producer fields and their commit marker stays an uncompressed control batch."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from klog.testing import kafka_tools  # noqa: E402
from klog.testing.kafka import find_kafka_libs, one_broker  # noqa: E402

pytestmark = pytest.mark.java

#: topic codec -> the different codec the producer sends with
PRODUCER_CODEC = {"gzip": "lz4", "snappy": "zstd", "lz4": "none", "zstd": "lz4", "uncompressed": "gzip"}
#: compression.type -> the codec name DumpLogSegments prints for batches stored with it
STORED_NAME = {"uncompressed": "none", "none": "none"}


class Server:
    def __init__(self, bootstrap: str, data_dir: Path) -> None:
        self.bootstrap, self.data_dir = bootstrap, data_dir
        self.admin = AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    with one_broker(request.param, root, None) as bootstrap:
        yield Server(bootstrap, root / ("data" if request.param == "klog" else "kafka-data"))


def create_topic(server: Server, configs: dict[str, str]) -> str:
    topic = f"compressed-{uuid.uuid4().hex[:8]}"
    futures = server.admin.create_topics([NewTopic(topic, 1, 1, config=configs)])
    futures[topic].result(30)
    return topic


def described(server: Server, topic: str, key: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    for _ in range(100):  # a new topic reaches the broker's metadata a moment after CreateTopics answers
        try:
            entries = server.admin.describe_configs([resource])[resource].result(30)
            return entries[key].value
        except KafkaException as exc:
            if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                raise
    raise AssertionError(f"{topic} never became known")


def produce(server: Server, topic: str, codec: str, count: int, start: int = 0, **extra: str) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": codec, "linger.ms": 50,
                         **extra})
    failures: list[object] = []
    for i in range(start, start + count):
        producer.produce(topic, key=f"key-{i}".encode(), value=f"value {i} ".encode() * 20,
                         headers=[("n", str(i).encode())],
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(30) == 0 and failures == []


def consume(server: Server, topic: str, count: int, **extra: str) -> list[tuple[bytes, bytes, list]]:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, **extra})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[bytes, bytes, list]] = []
    try:
        for _ in range(300):
            if len(got) >= count:
                break
            for msg in consumer.consume(count - len(got), timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value(), msg.headers()))
    finally:
        consumer.close()
    return got


def expected(start: int, count: int) -> list[tuple[bytes, bytes, list]]:
    return [(f"key-{i}".encode(), f"value {i} ".encode() * 20, [("n", str(i).encode())])
            for i in range(start, start + count)]


def stored_batches(server: Server, topic: str) -> list[dict[str, str]]:
    """Every batch header line DumpLogSegments prints for the topic's first segment, as a dict."""
    segment = server.data_dir / f"{topic}-0" / f"{0:020d}.log"
    result = kafka_tools.run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", str(segment),
                                        libs=find_kafka_libs())
    assert result.returncode == 0, result.stderr
    return [dict(re.findall(r"(\w+): (\S+)", line)) for line in result.stdout.splitlines()
            if line.startswith("baseOffset:")]


@pytest.mark.parametrize("codec", sorted(PRODUCER_CODEC))
def test_batches_of_another_codec_are_stored_with_the_topics_codec(server, codec):
    topic = create_topic(server, {"compression.type": codec})
    assert described(server, topic, "compression.type") == codec
    produce(server, topic, PRODUCER_CODEC[codec], 40)
    assert consume(server, topic, 40) == expected(0, 40)
    batches = stored_batches(server, topic)
    assert batches and {b["compresscodec"] for b in batches} == {STORED_NAME.get(codec, codec)}, batches


def test_a_producer_topic_and_a_matching_codec_keep_batches_as_sent(server):
    as_sent = create_topic(server, {"compression.type": "producer"})
    produce(server, as_sent, "snappy", 10)
    matching = create_topic(server, {"compression.type": "lz4"})
    produce(server, matching, "lz4", 10)
    for topic, codec in ((as_sent, "snappy"), (matching, "lz4")):
        assert consume(server, topic, 10) == expected(0, 10)
        assert {b["compresscodec"] for b in stored_batches(server, topic)} == {codec}


def test_altering_the_codec_recompresses_new_batches_and_keeps_the_old_ones(server):
    topic = create_topic(server, {})
    assert described(server, topic, "compression.type") == "producer"
    produce(server, topic, "lz4", 10)
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("compression.zstd.level", "9", incremental_operation=AlterConfigOpType.SET)])
    server.admin.incremental_alter_configs([change])[change].result(30)
    assert described(server, topic, "compression.type") == "zstd"
    assert described(server, topic, "compression.zstd.level") == "9"
    # the broker applies the change from its metadata: batches are sent until one is stored with the new codec
    sent = 10
    for _ in range(50):
        produce(server, topic, "lz4", 5, start=sent)
        sent += 5
        codecs = [b["compresscodec"] for b in stored_batches(server, topic)]
        if codecs[-1] == "zstd":
            break
    assert codecs[0] == "lz4" and codecs[-1] == "zstd", codecs
    # once changed, every later batch carries the new codec
    assert codecs[codecs.index("zstd"):] == ["zstd"] * (len(codecs) - codecs.index("zstd"))
    assert consume(server, topic, sent) == expected(0, sent)


def test_transactional_batches_keep_their_producer_fields_and_markers_stay_uncompressed(server):
    topic = create_topic(server, {"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "lz4", "linger.ms": 20,
                         "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, key=f"key-{i}".encode(), value=f"value {i} ".encode() * 20,
                         headers=[("n", str(i).encode())])
    producer.commit_transaction(30)
    assert consume(server, topic, 20, **{"isolation.level": "read_committed"}) == expected(0, 20)
    batches = stored_batches(server, topic)
    data = [b for b in batches if b["isControl"] == "false"]
    markers = [b for b in batches if b["isControl"] == "true"]
    assert data and {(b["compresscodec"], b["isTransactional"]) for b in data} == {("zstd", "true")}, batches
    assert int(data[0]["producerId"]) >= 0 and data[0]["baseSequence"] == "0"
    assert [(m["compresscodec"], m["isTransactional"]) for m in markers] == [("none", "true")], batches


def test_unknown_codecs_and_levels_out_of_range_are_invalid_config(server):
    for configs in ({"compression.type": "brotli"}, {"compression.type": "none"}, {"compression.gzip.level": "10"},
                    {"compression.zstd.level": "23"}, {"compression.lz4.level": "0"}):
        topic = f"refused-{uuid.uuid4().hex[:8]}"
        future = server.admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic]
        with pytest.raises(KafkaException) as refused:
            future.result(30)
        assert refused.value.args[0].name() == "INVALID_CONFIG", configs

"""Broker-side recompression seen on the wire: batches built byte by byte, produced to topics whose
``compression.type`` differs from the batch's codec. What Kafka answers the same way runs against Apache Kafka
too (the ``target`` fixture): an idempotent retry of a recompressed batch is still a duplicate, and a batch whose
recompressed size passes ``max.message.bytes`` is MESSAGE_TOO_LARGE. klog alone: a body it cannot decompress is
CORRUPT_MESSAGE even with record validation off (recompression is then the first to read it), and a batch too
large to handle on the event loop is recompressed on a worker thread."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_hardening_validation import (  # noqa: F401 - the fixtures are used by name
    COMPRESS,
    CODECS,
    CONFIG,
    broker,
    fetch,
    init_producer_id,
    kafka,
    produce,
    record,
    records_section,
    seal,
    seeded_topic,
    target,
)

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.records import decode_batches
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def stored_codecs(wire: WireClient, topic: str) -> list[int]:
    """The codec id of every batch of the partition, as a consumer fetches them."""
    response = wire.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 50 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    records = bytes(response.responses[0].partitions[0].records or b"")
    return [batch.attributes & 0x07 for batch in decode_batches(records)]


def test_a_retried_idempotent_batch_is_still_a_duplicate_after_recompression(target):
    name, host, port = target
    with WireClient(host, port) as wire:
        topic, _ = seeded_topic(wire, compression_type="zstd")
        pid, epoch = init_producer_id(wire)
        batch = seal(COMPRESS["lz4"](records_section(5)), count=5, attributes=CODECS["lz4"],
                     producer=(pid, epoch, 0))
        first = produce(wire, topic, batch)
        assert (first.error_code, first.base_offset) == (E.NONE, 2)
        retried = produce(wire, topic, batch)
        assert (retried.error_code, retried.base_offset) == (E.NONE, 2)
        assert fetch(wire, topic)[0] == 7
        assert stored_codecs(wire, topic) == [CODECS["zstd"], CODECS["zstd"]]


def test_a_batch_over_max_message_bytes_once_recompressed_is_message_too_large(target):
    name, host, port = target
    with WireClient(host, port) as wire:
        topic = f"v-{uuid.uuid4().hex[:10]}"
        created = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [
                {"name": "compression.type", "value": "uncompressed"},
                {"name": "max.message.bytes", "value": "20000"}]}], "timeout_ms": 30000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        batch = seal(COMPRESS["gzip"](record(0, b"k", b"x" * 100_000)), count=1, attributes=CODECS["gzip"])
        assert len(batch) < 20_000
        for _ in range(150):  # a new Kafka topic may need a moment to get its leader
            answer = produce(wire, topic, batch)
            if answer.error_code != E.NOT_LEADER_OR_FOLLOWER and answer.error_code != E.UNKNOWN_TOPIC_OR_PARTITION:
                break
            time.sleep(0.2)
        assert answer.error_code == E.MESSAGE_TOO_LARGE, answer
        assert fetch(wire, topic)[0] == 0


@pytest.mark.parametrize("validation", ["true", "false"])
@pytest.mark.parametrize("codec", list(CODECS))
def test_an_unreadable_body_for_a_recompressing_topic_is_a_corrupt_message(tmp_path, codec, validation):
    config = {**CONFIG, "klog.produce.record.validation.enable": validation}
    with BrokerProcess(tmp_path, config) as proc, WireClient(proc.host, proc.port) as wire:
        topic_codec = "gzip" if codec != "gzip" else "zstd"
        topic, state = seeded_topic(wire, compression_type=topic_codec)
        body = COMPRESS[codec](records_section(500))
        truncated = seal(body[:len(body) // 2], count=500, attributes=CODECS[codec])
        answer = produce(wire, topic, truncated)
        assert answer.error_code == E.CORRUPT_MESSAGE, (answer.error_code, answer.error_message)
        assert fetch(wire, topic) == state
        whole = seal(body, count=500, attributes=CODECS[codec])
        assert produce(wire, topic, whole).error_code == E.NONE
        assert fetch(wire, topic)[0] == 502
        assert stored_codecs(wire, topic) == [CODECS[topic_codec]] * 2


def test_a_batch_too_large_for_the_event_loop_is_recompressed_on_a_worker(tmp_path):
    config = {**CONFIG, "klog.produce.validation.inline.bytes": 4096}
    with BrokerProcess(tmp_path, config) as proc, WireClient(proc.host, proc.port) as wire:
        topic, _ = seeded_topic(wire, compression_type="zstd")
        section = b"".join(record(i, b"k%d" % i, b"value %d " % i * 50) for i in range(2000))
        assert len(section) > 100 * 4096
        for codec, batch in (("none", seal(section, count=2000)),
                             ("gzip", seal(COMPRESS["gzip"](section), count=2000, attributes=CODECS["gzip"]))):
            assert produce(wire, topic, batch).error_code == E.NONE, codec
        high_watermark, rows = fetch(wire, topic)
        assert high_watermark == 4002
        assert rows[2:] == [(2 + i + n * 2000, b"k%d" % i, b"value %d " % i * 50) for n in range(2) for i in range(2000)]
        assert stored_codecs(wire, topic) == [CODECS["zstd"]] * 3


@pytest.mark.parametrize("name", ["klog", pytest.param("kafka", marks=pytest.mark.java)])
def test_the_brokers_compression_type_is_the_default_of_topics_without_one(tmp_path, name):
    from klog.testing.kafka import apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    defaults = {"compression.type": "gzip", "compression.gzip.level": "9"}
    if name == "klog":
        broker: Any = BrokerProcess(tmp_path, {**CONFIG, **defaults})
    else:
        broker = apache_kafka(tmp_path, config=defaults, libs=kafka_libs_dir(Path(__file__).resolve().parent), heap="512m")
    with broker as started:
        host, port = (started.host, started.port) if name == "klog" else str(started).rsplit(":", 1)
        with WireClient(host, int(port)) as wire:
            topic, _ = seeded_topic(wire)
            described = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": 2, "resource_name": topic, "configuration_keys": ["compression.type"]}],
                "include_synonyms": False, "include_documentation": False})
            entry = described.results[0].configs[0]
            assert (entry.name, entry.value, entry.config_source) == ("compression.type", "gzip", 4)  # STATIC_BROKER
            assert stored_codecs(wire, topic) == [CODECS["gzip"]]


def test_a_produce_before_version_7_to_a_zstd_topic_is_answered_as_kafka_does(target):
    name, host, port = target
    with WireClient(host, port) as wire:
        topic, state = seeded_topic(wire, compression_type="zstd")
        # a client too old to send zstd still writes to a zstd topic: the broker compresses, the client never sees it
        answer = produce(wire, topic, seal(records_section(3), count=3), version=6)
        assert (answer.error_code, answer.base_offset) == (E.NONE, 2), answer
        assert stored_codecs(wire, topic) == [CODECS["zstd"]] * 2

"""What topic configs do to the data, on klog and on Apache Kafka 4.3 from the same raw requests (one broker of
each kind for the module, started from the same properties, retention checked every half second): the timestamps a
batch is stored with and what Fetch, ListOffsets and retention then see."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import decode_batches, encode_batch
from klog.testing.kafka import one_broker
from test_produce_fetch_edges_vs_kafka import PYTHON_PATHS
from test_produce_fetch_edges_vs_kafka import Wire as EdgesWire

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

HOUR = 3_600_000


@pytest.fixture(scope="module", params=["klog", "klog-python", "kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """klog twice: with its native Produce/Fetch paths (the default) and with every request on its Python handlers."""
    kind = "kafka" if request.param == "kafka" else "klog"
    properties = PYTHON_PATHS if request.param == "klog-python" else {}
    with one_broker(kind, tmp_path_factory.mktemp(request.param),
                    {"log.retention.check.interval.ms": 500, **properties}) as servers:
        yield servers


class Wire(EdgesWire):
    def create_topic(self, **configs: str) -> str:
        """A one-partition topic with ``configs`` (``_`` for ``.``), once its leader takes requests."""
        name = super().create_topic(**configs)
        for _ in range(200):
            if self.list_offset(name, -1)[0] == ErrorCode.NONE:
                return name
            time.sleep(0.05)
        raise AssertionError(f"{name} has no leader")

    def produce_one(self, topic: str, records: bytes) -> tuple[int, int, list[int]]:
        """(error code, base offset, the indexes of its record errors) of one Produce v9 of ``records`` to partition
        0."""
        answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0, "records": records}]}]})
        p = answer.responses[0].partition_responses[0]
        return p.error_code, p.base_offset, [e.batch_index for e in p.record_errors]

    def list_offset(self, topic: str, timestamp: int) -> tuple[int, int, int]:
        """(error code, offset, timestamp) ListOffsets v8 answers for partition 0 and ``timestamp``."""
        answer = self.request(ApiKey.LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": timestamp}]}]})
        p = answer.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    def batches(self, topic: str, offset: int = 0) -> list[Any]:
        """The batches one Fetch v12 of partition 0 from ``offset`` returns."""
        answer = self.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        p = answer.responses[0].partitions[0]
        assert p.error_code == ErrorCode.NONE, p
        return decode_batches(bytes(p.records or b""))


@pytest.mark.parametrize("claimed", ["none", "old", "future"])
@pytest.mark.parametrize("codec,topic_codec", [("none", "producer"), ("gzip", "producer"), ("gzip", "lz4")])
def test_a_create_time_batch_is_stored_with_its_records_largest_timestamp(bootstrap: str, codec: str,
                                                                         topic_codec: str, claimed: str) -> None:
    """Kafka's LogValidator sets a CreateTime batch's max timestamp to its records' largest (setMaxTimestamp),
    whatever the producer's header claims, in place or recompressed: Fetch, ListOffsets' max timestamp and
    retention see the records' time. klog stored the header as sent until 2026-12-07: a batch of new records
    claiming an old max timestamp was deleted by the next retention check (data lost), one claiming a future
    one outlived its retention."""
    now = int(time.time() * 1000)
    stamps = [now - 3000, now - 1000, now - 2000]
    header_max = {"none": -1, "old": now - 2 * HOUR, "future": now + 2 * HOUR}[claimed]
    batch = encode_batch([{"key": b"k%d" % i, "value": b"v" * 50, "timestamp": ts} for i, ts in enumerate(stamps)],
                         compression=codec, max_timestamp=header_max)
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(compression_type=topic_codec, retention_ms=str(HOUR))
        assert wire.produce_one(topic, batch) == (ErrorCode.NONE, 0, [])
        time.sleep(1.5)   # three retention checks
        assert wire.list_offset(topic, -2)[:2] == (ErrorCode.NONE, 0)
        [stored] = wire.batches(topic)
        assert (stored.max_timestamp, [r.timestamp for r in stored.records]) == (now - 1000, stamps)
        assert wire.list_offset(topic, -3) == (ErrorCode.NONE, 1, now - 1000)


def test_a_batch_claiming_log_append_time_is_refused_or_stored_as_create_time(bootstrap: str) -> None:
    """Kafka's LogValidator.validateTimestamp refuses a batch whose producer set LogAppendTime on a LogAppendTime topic
    (INVALID_TIMESTAMP, a record error for each record), and a CreateTime topic stores it as CreateTime with its max
    timestamp (setMaxTimestamp(CREATE_TIME, ...)): its records then read with their own timestamps. klog appended it
    to a LogAppendTime topic, and stored it on a CreateTime topic as LogAppendTime, until 2026-12-07."""
    now = int(time.time() * 1000)
    stamps = [now - 5000, now - 4000]
    batch = encode_batch([{"key": b"k%d" % i, "value": b"v", "timestamp": ts} for i, ts in enumerate(stamps)],
                         timestamp_type="log_append", max_timestamp=now)
    with Wire(bootstrap) as wire:
        log_append = wire.create_topic(message_timestamp_type="LogAppendTime")
        assert wire.produce_one(log_append, batch) == (ErrorCode.INVALID_TIMESTAMP, -1, [0, 1])
        assert wire.list_offset(log_append, -1)[:2] == (ErrorCode.NONE, 0)
        create_time = wire.create_topic()
        assert wire.produce_one(create_time, batch) == (ErrorCode.NONE, 0, [])
        [stored] = wire.batches(create_time)
        assert (stored.timestamp_type, stored.max_timestamp, [r.timestamp for r in stored.records]) == (
            "create", now, stamps)

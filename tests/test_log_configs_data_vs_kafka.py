"""What topic configs do to the data, on klog and on Apache Kafka 4.3 from the same raw requests (one broker of
each kind for the module, started from the same properties, retention checked every half second from the start): the
timestamps a batch is stored with, and what Fetch, ListOffsets and retention then see."""

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
                    {"log.retention.check.interval.ms": 500, "log.initial.task.delay.ms": 0, **properties}) as servers:
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
        p = self.produce_answer(topic, records)
        return p.error_code, p.base_offset, [e.batch_index for e in p.record_errors]

    def produce_answer(self, topic: str, records: bytes) -> Any:
        """The partition's answer to one Produce v9 of ``records`` to partition 0."""
        answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0, "records": records}]}]})
        return answer.responses[0].partition_responses[0]

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


def _until_log_start(wire: Wire, topic: str, offset: int) -> None:
    for _ in range(100):
        if wire.list_offset(topic, -2)[1] == offset:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}'s log start never reached {offset}: {wire.list_offset(topic, -2)}")


def test_retention_deletes_whole_expired_or_excess_segments_and_moves_the_log_start(bootstrap: str) -> None:
    """Each batch whose records' timestamps jump past segment.ms rolls a segment (Kafka's timeWaitedForRoll); a check
    deletes the oldest segments whose largest timestamp is older than retention.ms, or while the log stays above
    retention.bytes without them, and the log start moves to the next segment's base: ListOffsets earliest answers
    it, a Fetch below it OFFSET_OUT_OF_RANGE, a timestamp lookup finds the first record kept. With every segment
    expired, the active one too is rolled and deleted: the log start is the log end and the next append continues
    there."""
    now = int(time.time() * 1000)

    def batch(timestamp: int, value: bytes = b"v") -> bytes:
        return encode_batch([{"key": b"k%d" % i, "value": value, "timestamp": timestamp + i} for i in range(2)])

    with Wire(bootstrap) as wire:
        expiring = wire.create_topic(segment_ms="1000", retention_ms=str(HOUR))
        for i in range(5):
            assert wire.produce_one(expiring, batch(now - 2 * HOUR + i * 600_000))[0] == ErrorCode.NONE
        assert wire.produce_one(expiring, batch(now))[:2] == (ErrorCode.NONE, 10)
        _until_log_start(wire, expiring, 10)
        assert wire.list_offset(expiring, -1)[:2] == (ErrorCode.NONE, 12)
        assert wire.fetch(expiring, 9)["partitions"][0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert wire.list_offset(expiring, 0) == (ErrorCode.NONE, 10, now)

        expired = wire.create_topic(segment_ms="1000", retention_ms=str(HOUR))
        for i in range(3):
            assert wire.produce_one(expired, batch(now - 2 * HOUR + i * 600_000))[0] == ErrorCode.NONE
        _until_log_start(wire, expired, 6)
        assert wire.list_offset(expired, -1)[:2] == (ErrorCode.NONE, 6)
        assert wire.list_offset(expired, -3) == (ErrorCode.NONE, -1, -1)
        assert wire.produce_one(expired, batch(now)) == (ErrorCode.NONE, 6, [])

        sized = wire.create_topic(segment_ms="1000", retention_bytes="300")
        for i in range(5):
            assert wire.produce_one(sized, batch(now - 50_000 + i * 2000, b"v" * 50))[0] == ErrorCode.NONE
        _until_log_start(wire, sized, 6)
        time.sleep(1.5)   # three more checks: nothing more goes
        assert wire.list_offset(sized, -2)[:2] == (ErrorCode.NONE, 6)


def test_a_batch_refused_for_its_records_is_answered_with_the_log_start_offset(bootstrap: str) -> None:
    """Kafka answers a RecordValidationException (INVALID_TIMESTAMP, INVALID_RECORD with record errors) with the
    partition's log start offset and the exception's message (ReplicaManager.appendToLocalLog's processFailedRecord);
    klog answered -1 until 2026-12-07."""
    now = int(time.time() * 1000)
    with Wire(bootstrap) as wire:
        bounded = wire.create_topic(message_timestamp_before_max_ms="60000")
        compacted = wire.create_topic(cleanup_policy="compact,delete")   # DeleteRecords needs delete
        for topic in (bounded, compacted):
            assert wire.produce_one(topic, encode_batch([{"key": b"k", "value": b"v"}] * 2))[0] == ErrorCode.NONE
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "offset": 1}]}], "timeout_ms": 30000})
            assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
        refusals = {
            bounded: (encode_batch([{"key": b"k", "value": b"v", "timestamp": now - HOUR}]), ErrorCode.INVALID_TIMESTAMP,
                      "One or more records have been rejected due to invalid timestamp"),
            compacted: (encode_batch([{"key": None, "value": b"v"}]), ErrorCode.INVALID_RECORD,
                        "One or more records have been rejected due to 1 record errors in total"),
        }
        for topic, (records, code, message) in refusals.items():
            p = wire.produce_answer(topic, records)
            assert (p.error_code, p.base_offset, p.log_start_offset, [e.batch_index for e in p.record_errors]) == (
                code, -1, 1, [0])
            assert p.error_message.startswith(message), p.error_message

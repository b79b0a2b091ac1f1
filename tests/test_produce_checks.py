"""The produce checks' native API: ``validate_produce_batch`` reads a Produce partition's batch once into a
``ProducedBatch`` (the fields the producer-state check, the append and the response need), and
``PartitionLog.append`` takes that in place of the records without parsing the header again."""

from __future__ import annotations

from typing import Any

import pytest

from klog._native import (
    CorruptRecordError,
    InvalidRecordError,
    LogConfig,
    LogManager,
    ProducedBatch,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    validate_produce_batch,
)
from klog.records import decode_batches, encode_batch

NOW = 1_700_000_000_000
POLICY: dict[str, Any] = {"version": 9, "max_message_bytes": 1 << 20, "compacted": False, "topic_partition": "t-0",
                          "create_time": True, "now_ms": NOW, "before_max_ms": 2**62, "after_max_ms": 2**62,
                          "max_decompressed_bytes": 64 << 20}


def batch(count: int = 3, **options: Any) -> bytes:
    return encode_batch([{"key": b"k%d" % i, "value": b"v" * 10, "timestamp": NOW + i} for i in range(count)],
                        **options)


def checked(records: Any, **overrides: Any) -> ProducedBatch:
    produced = validate_produce_batch(records, **{**POLICY, **overrides})
    assert produced is not None
    return produced


@pytest.fixture
def log(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    yield manager.create("t", 0)
    manager.close()


def test_the_produced_batch_carries_the_header_fields_the_broker_needs():
    records = batch(3, compression="lz4", producer_id=42, producer_epoch=2, base_sequence=2**31 - 2)
    produced = checked(records)
    assert (produced.producer_id, produced.producer_epoch, produced.base_sequence) == (42, 2, 2**31 - 2)
    assert produced.last_sequence == 0   # wrapped after 2**31 - 1
    assert (produced.records_count, produced.max_timestamp) == (3, NOW + 2)
    assert (produced.size, produced.compression, produced.is_transactional) == (len(records), 3, False)
    assert produced.has_valid_crc()
    assert checked(batch(1)).last_sequence == -1


def test_each_refusal_raises_the_exception_of_its_kafka_error_code():
    with pytest.raises(UnsupportedCompressionTypeError):
        checked(batch(compression="zstd"), version=6)
    with pytest.raises(RecordTooLargeError, match="larger than the topic's max.message.bytes 100"):
        checked(batch(), max_message_bytes=100)
    with pytest.raises(InvalidRecordError, match="exactly one record batch"):
        checked(batch() + batch())
    with pytest.raises(InvalidRecordError, match="at least one record batch"):
        checked(batch()[:40])   # Kafka's batch iterator finds no batch in fewer bytes than its length says
    with pytest.raises(CorruptRecordError, match="Invalid magic found in record: 3"):
        checked(batch()[:16] + b"\x03" + batch()[17:])
    keyless = encode_batch([{"key": None, "value": b"v"}])
    with pytest.raises(InvalidRecordError) as refused:
        checked(keyless, compacted=True)
    assert refused.value.args[1] == [
        (0, "Compacted topic cannot accept message without key in topic partition t-0")]
    # without the record checks only the request's rules are applied
    assert checked(keyless, compacted=True, check_records=False).records_count == 1


def test_records_over_the_work_budget_are_left_undecided():
    assert validate_produce_batch(batch(50), **POLICY, work_budget=16) is None
    assert checked(batch(50), work_budget=None).records_count == 50


def test_a_produced_batch_is_appended_as_its_records_would_be(log):
    records = batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    first = log.append(checked(memoryview(records)), leader_epoch=4)
    second = log.append(records, leader_epoch=4)
    assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 2, 3, 5)
    assert (first.max_timestamp, first.offset_of_max_timestamp) == (second.max_timestamp, 2)
    stored = decode_batches(log.read(0, 1 << 20).to_bytes())
    assert [(b.base_offset, b.partition_leader_epoch, b.producer_id) for b in stored] == [(0, 4, 7), (3, 4, 7)]
    assert [r.key for r in stored[0].records] == [r.key for r in stored[1].records] == [b"k0", b"k1", b"k2"]


def test_records_changed_after_their_checks_are_not_appended(log):
    records = bytearray(batch(3))
    produced = checked(records)
    records[-1] ^= 1   # a record byte: the append's CRC check catches it
    assert not produced.has_valid_crc()
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(produced, leader_epoch=0)
    records[-1] ^= 1
    records[57:61] = (9).to_bytes(4, "big")   # a header field: not the header that was checked
    with pytest.raises(CorruptRecordError, match="not the batch"):
        log.append(produced, leader_epoch=0)
    assert log.log_end_offset == 0

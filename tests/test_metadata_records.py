"""KRaft metadata records: schemas compiled by the protocol codegen, Kafka's framing, record batches.

Byte-level compatibility with Apache Kafka is proven in tests/test_metadata_storage.py (Kafka's own
DumpLogSegments decodes what we write, and we re-encode what Kafka wrote to the same bytes); this file checks
the codec's own contract without Java.
"""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from klog.metadata.records import (
    MAX_RECORDS_PER_BATCH,
    ControlRecord,
    ControlRecordType,
    MetadataRecord,
    MetadataRecordError,
    MetadataRecordType,
    control,
    decode_batch,
    decode_batches,
    decode_record,
    encode_batch,
    encode_record,
    record,
)
from klog.protocol.codegen import uvarint
from klog.protocol.data import CONTROL_RECORD_SCHEMAS, METADATA_RECORD_SCHEMAS, decode_data, encode_data
from klog.protocol.samples import expected_decoded, plain, sample_struct
from klog.records import crc32c

TOPIC_ID = uuid.UUID("cbe07bd0-55d1-4333-8e29-360960467579")


def test_every_metadata_record_type_and_version_round_trips_random_values():
    rng = random.Random(15)
    for key, schema in METADATA_RECORD_SCHEMAS.items():
        for version in range(schema.min_version, schema.max_version + 1):
            for _ in range(20):
                value = sample_struct(schema.message.fields, version, True, rng)
                data = encode_data(schema, version, value)
                decoded, end = decode_data(schema, version, data)
                assert end == len(data)
                assert plain(decoded) == expected_decoded(schema.message.fields, version, value), (schema, version)
                rec = decode_record(encode_record(MetadataRecord(MetadataRecordType(key), version, decoded)))
                assert rec.version == version and rec.data == decoded


def test_every_control_record_type_round_trips_in_a_control_batch():
    rng = random.Random(16)
    for kind, schema in CONTROL_RECORD_SCHEMAS.items():
        value = sample_struct(schema.message.fields, 0, True, rng)
        (rec,) = decode_batch(encode_batch([control(kind, **value.__dict__)]))
        assert isinstance(rec, ControlRecord) and rec.type == ControlRecordType(kind)
        assert plain(rec.data) == expected_decoded(schema.message.fields, 0, value)


def test_topic_record_value_is_framed_as_kafka_writes_it():
    value = encode_record(record("TopicRecord", name="orders", topic_id=TOPIC_ID))
    # frame version 1, api key 2, version 0; compact string (length + 1); uuid; empty tagged fields
    assert value == b"\x01\x02\x00" + bytes([7]) + b"orders" + TOPIC_ID.bytes + b"\x00"


def test_partition_change_record_writes_only_the_fields_that_changed():
    value = encode_record(record("PartitionChangeRecord", 0, partition_id=3, topic_id=TOPIC_ID, leader=2))
    # tagged section: one tag (1 = Leader) of 4 bytes; ISR, replicas... (null = no change) are not written
    assert value == b"\x01\x05\x00" + struct.pack(">i", 3) + TOPIC_ID.bytes + b"\x01\x01\x04" + struct.pack(">i", 2)
    rec = decode_record(value)
    assert rec.data.isr is None and rec.data.replicas is None and rec.data.leader == 2
    assert rec.data.leader_recovery_state == -1


def test_record_builder_fills_defaults_and_rejects_unknown_fields():
    rec = record("RegisterBrokerRecord", broker_id=1, end_points=[{"name": "PLAINTEXT", "host": "h", "port": 9092}])
    assert rec.version == METADATA_RECORD_SCHEMAS[0].max_version
    assert rec.data.fenced is True and rec.data.rack == "" and rec.data.end_points[0].security_protocol == 0
    assert decode_record(encode_record(rec)) == rec
    with pytest.raises(TypeError, match="no field colour"):
        record("TopicRecord", colour="red")
    with pytest.raises(TypeError, match=r"RegisterBrokerRecord.end_points\[0\] has no field hostname"):
        record("RegisterBrokerRecord", end_points=[{"hostname": "h"}])
    with pytest.raises(ValueError, match="versions 0-0, not 3"):
        record("TopicRecord", 3)


def test_batch_round_trip_keeps_order_types_and_epoch():
    recs = [record("FeatureLevelRecord", name="metadata.version", feature_level=30),
            record("TopicRecord", name="t", topic_id=TOPIC_ID),
            record("PartitionRecord", partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1], leader=1,
                   leader_epoch=0, partition_epoch=0, directories=[uuid.UUID(int=0)] * 2)]
    data = encode_batch(recs, base_offset=40, epoch=7, timestamp=1_700_000_000_000)
    (batch,) = decode_batches(data)
    assert (batch.base_offset, batch.last_offset, batch.epoch, batch.is_control) == (40, 42, 7, False)
    assert batch.append_timestamp == 1_700_000_000_000
    assert list(batch.records) == recs == decode_batch(data)


def test_raft_storage_may_rewrite_base_offset_and_epoch_without_breaking_the_crc():
    """The Raft contract: an entry is encode_batch(records) at base offset 0; storage sets the base offset and
    partitionLeaderEpoch (bytes 0-7 and 12-15), which lie outside the CRC (it covers bytes 21..)."""
    recs = [record("NoOpRecord"), record("NoOpRecord")]
    entry = bytearray(encode_batch(recs))
    crc = struct.unpack_from(">I", entry, 17)[0]
    struct.pack_into(">q", entry, 0, 1234)
    struct.pack_into(">i", entry, 12, 9)
    assert crc32c(bytes(entry[21:])) == crc
    (batch,) = decode_batches(bytes(entry))
    assert (batch.base_offset, batch.epoch, batch.next_offset) == (1234, 9, 1236)


def test_a_batch_holds_metadata_or_control_records_not_both():
    with pytest.raises(MetadataRecordError, match="either metadata records or control records"):
        encode_batch([record("NoOpRecord"), control("SnapshotFooterRecord")])
    with pytest.raises(MetadataRecordError, match="at least one record"):
        encode_batch([])
    with pytest.raises(MetadataRecordError, match="MAX_RECORDS_PER_BATCH"):
        encode_batch([record("NoOpRecord")] * (MAX_RECORDS_PER_BATCH + 1))


def test_decode_batch_wants_exactly_one_batch():
    one = encode_batch([record("NoOpRecord")])
    with pytest.raises(MetadataRecordError, match="exactly one record batch, found 2"):
        decode_batch(one + one)


def _batch_with_values(values: list[bytes], base_offset: int = 100) -> bytes:
    from klog.records import encode_batch as raw_batch
    return raw_batch([{"key": None, "value": v, "timestamp": 1} for v in values], base_offset=base_offset)


def test_unknown_record_type_names_its_offset():
    good = encode_record(record("NoOpRecord"))
    bad = uvarint(1) + uvarint(99) + uvarint(0)
    with pytest.raises(MetadataRecordError, match=r"offset 101: unknown metadata record type 99") as info:
        decode_batches(_batch_with_values([good, bad]))
    assert info.value.offset == 101


def test_unknown_version_names_record_and_offset():
    bad = uvarint(1) + uvarint(2) + uvarint(5) + b"\x00"
    with pytest.raises(MetadataRecordError, match=r"offset 100: unsupported version 5 of TopicRecord \(this codec "
                                                  r"reads 0-0\)"):
        decode_batches(_batch_with_values([bad]))


@pytest.mark.parametrize("value, message", [
    (b"\x00\x02\x00", "frame version 0"),
    (b"\x01", "truncated or malformed record type varint"),
    (b"\x01\x02\x00\x07orders", r"malformed TopicRecord v0: .*field topic_id.*truncated"),
    (encode_record(record("NoOpRecord")) + b"\x00", r"1 byte\(s\) of garbage after NoOpRecord v0"),
    (b"\x01\xff\xff\xff\xff\x7f", "record type 34359738367 is larger than an int16"),
    (b"\x01\xff\xff\xff\xff\xff\x01", "truncated or malformed record type varint"),
])
def test_malformed_record_values_raise_errors_naming_the_offset(value, message):
    with pytest.raises(MetadataRecordError, match=message) as info:
        decode_batches(_batch_with_values([value], base_offset=7))
    assert info.value.offset == 7


def test_control_batch_with_an_unknown_control_type_is_an_error():
    from klog.records import encode_batch as raw_batch
    data = raw_batch([{"key": b"\x00\x00\x00\x09", "value": b"\x00\x00", "timestamp": 1}], is_control=True,
                     base_offset=3)
    with pytest.raises(MetadataRecordError, match="offset 3: unexpected control record type 9"):
        decode_batches(data)


def test_corrupt_batch_bytes_raise_a_metadata_error():
    data = bytearray(encode_batch([record("NoOpRecord")]))
    data[-1] ^= 0xFF
    with pytest.raises(MetadataRecordError, match="corrupt record batch"):
        decode_batches(bytes(data))

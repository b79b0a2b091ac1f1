"""Record batch encode/decode through the public Python API (klog.records)."""

from __future__ import annotations

import dataclasses
import os
import struct

import pytest

from klog._native import CorruptRecordError
from klog.records import (
    COMPRESSION_TYPES,
    CONTROL_TYPE_COMMIT,
    crc32c,
    decode_batches,
    encode_batch,
    encode_control_batch,
    parse_control_record_key,
)

RECORDS = [
    {"key": b"k1", "value": b"v1", "timestamp": 1_700_000_000_000, "headers": [("h", b"x"), ("n", None), ("e", b"")]},
    {"key": None, "value": b"", "timestamp": 1_700_000_000_005},
    {"key": b"", "value": None, "timestamp": 1_699_999_999_990, "headers": [("été", b"\x00\xff")]},
    {"key": None, "value": None, "timestamp": 1_700_000_000_001, "headers": []},
]


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_records_round_trip_with_null_and_empty_distinct(compression: str) -> None:
    data = encode_batch(RECORDS, compression=compression, base_offset=100, partition_leader_epoch=3)
    [batch] = decode_batches(data)
    assert batch.compression == compression
    assert batch.base_offset == 100
    assert batch.partition_leader_epoch == 3
    assert batch.magic == 2
    assert batch.records_count == 4 == batch.last_offset_delta + 1
    assert batch.base_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_000_005
    assert batch.timestamp_type == "create"
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control
    assert batch.size == len(data)
    assert batch.crc == struct.unpack(">I", data[17:21])[0] == crc32c(data[21:])
    for i, (want, got) in enumerate(zip(RECORDS, batch.records)):
        assert got.offset == 100 + i
        assert got.timestamp == want["timestamp"]
        assert got.key == want["key"]
        assert got.value == want["value"]
        assert got.headers == list(want.get("headers", []))


def test_records_can_be_objects_and_missing_timestamp_means_now() -> None:
    @dataclasses.dataclass
    class Rec:
        key: bytes | None
        value: bytes | None
        headers: list[tuple[str, bytes | None]] | None = None

    import time

    before = int(time.time() * 1000)
    [batch] = decode_batches(encode_batch([Rec(b"a", b"b"), Rec(None, b"c", [("x", b"y")])]))
    after = int(time.time() * 1000)
    assert [r.key for r in batch.records] == [b"a", None]
    assert batch.records[1].headers == [("x", b"y")]
    assert before <= batch.records[0].timestamp <= after


def test_decoded_records_can_be_re_encoded() -> None:
    [batch] = decode_batches(encode_batch(RECORDS))
    [again] = decode_batches(encode_batch(batch.records))
    assert again.records == batch.records


def test_producer_fields_and_transactional_flag_round_trip() -> None:
    data = encode_batch(
        RECORDS, producer_id=77, producer_epoch=3, base_sequence=40, is_transactional=True, compression="lz4"
    )
    [b] = decode_batches(data)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (77, 3, 40, True)
    assert b.attributes == 0x10 | 3


def test_log_append_time_records_carry_the_batch_max_timestamp() -> None:
    data = encode_batch(RECORDS, timestamp_type="log_append", max_timestamp=123)
    [b] = decode_batches(data)
    assert b.timestamp_type == "log_append"
    assert [r.timestamp for r in b.records] == [123] * 4


def test_control_batches_are_recognised() -> None:
    data = encode_control_batch(CONTROL_TYPE_COMMIT, producer_id=5, producer_epoch=2, coordinator_epoch=9)
    [b] = decode_batches(data)
    assert b.is_control and b.is_transactional and b.control_type == CONTROL_TYPE_COMMIT
    assert parse_control_record_key(b.records[0].key) == (0, 1)
    assert b.records[0].value == b"\x00\x00\x00\x00\x00\x09"


def test_several_batches_in_one_buffer_and_positions() -> None:
    a = encode_batch(RECORDS[:2], base_offset=0)
    b = encode_batch(RECORDS[2:], base_offset=2, compression="gzip")
    batches = decode_batches(a + b)
    assert [x.position for x in batches] == [0, len(a)]
    assert [r.offset for x in batches for r in x.records] == [0, 1, 2, 3]


def test_partial_trailing_batch_is_an_error_unless_allowed() -> None:
    a = encode_batch(RECORDS)
    data = a + a[:-10]
    with pytest.raises(CorruptRecordError, match=rf"truncated batch at byte {len(a)}"):
        decode_batches(data)
    assert len(decode_batches(data, allow_partial_trailing=True)) == 1
    assert len(decode_batches(a + a[:5], allow_partial_trailing=True)) == 1


def test_crc_mismatch_names_the_batch_offset_and_can_be_skipped() -> None:
    a = encode_batch([{"key": None, "value": b"abc", "timestamp": 0}])
    bad = bytearray(a + a)
    bad[-3] ^= 1  # second batch's value b"abc" -> b"acc"
    with pytest.raises(CorruptRecordError, match=rf"CRC mismatch in batch at byte {len(a)}"):
        decode_batches(bytes(bad))
    unchecked = decode_batches(bytes(bad), verify_crc=False)
    assert [b.records[0].value for b in unchecked] == [b"abc", b"acc"]


def test_corrupt_record_error_is_a_value_error_naming_field_and_offset() -> None:
    data = bytearray(encode_batch([{"key": b"key", "value": b"value", "timestamp": 0}]))
    data[65] = 0x7E  # key length larger than the record
    data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
    with pytest.raises(ValueError, match=r"record\.key at byte 66"):
        decode_batches(bytes(data))


def test_records_count_must_equal_last_offset_delta_plus_one() -> None:
    data = bytearray(encode_batch(RECORDS))
    data[23:27] = struct.pack(">i", 7)
    data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match=r"batch\.records_count at byte 57"):
        decode_batches(bytes(data))


def test_decompression_limit_is_enforced() -> None:
    data = encode_batch([{"value": bytes(1 << 20), "timestamp": 0}], compression="zstd")
    with pytest.raises(CorruptRecordError, match="limit of 1000 bytes"):
        decode_batches(data, max_decompressed_size=1000)
    assert decode_batches(data)[0].records[0].value == bytes(1 << 20)


def test_bad_inputs_to_encode_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])
    with pytest.raises(ValueError, match="compression"):
        encode_batch(RECORDS, compression="brotli")
    with pytest.raises(TypeError, match="record 0: value must be bytes"):
        encode_batch([{"value": "text"}])
    with pytest.raises(TypeError, match="record 1: key"):
        encode_batch([{"value": b""}, {"key": 5}])
    with pytest.raises(TypeError, match="header 0"):
        encode_batch([{"value": b"", "headers": [("only-key",)]}])


def test_memoryview_and_bytearray_inputs_are_accepted() -> None:
    data = encode_batch([{"key": memoryview(b"xk")[1:], "value": bytearray(b"v"), "timestamp": 1}])
    [b] = decode_batches(memoryview(data))
    assert (b.records[0].key, b.records[0].value) == (b"k", b"v")
    assert decode_batches(bytearray(data))[0].records == b.records


def test_crc32c_matches_the_rfc3720_check_value_and_the_crc32c_package() -> None:
    import crc32c as crc32c_pkg

    assert crc32c(b"123456789") == 0xE3069283
    for n in (0, 1, 7, 64, 1000, 100_000, 1 << 20):
        data = os.urandom(n)
        assert crc32c(data) == crc32c_pkg.crc32c(data)

"""Columnar decoding (NumPy / Arrow) agrees with object decoding and copies nothing per record."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from klog._native import CorruptRecordError
from klog.records import (
    COMPRESSION_TYPES,
    CONTROL_TYPE_ABORT,
    decode_batches,
    decode_columns,
    decode_to_arrow,
    encode_batch,
    encode_control_batch,
)


def random_records(rng: random.Random, n: int) -> list[dict]:
    def maybe_bytes(maxlen: int) -> bytes | None:
        return None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, maxlen))

    return [
        {
            "key": maybe_bytes(20),
            "value": maybe_bytes(200),
            "timestamp": 1_700_000_000_000 + rng.randrange(-1000, 1000),
            "headers": [(f"h{j}é", maybe_bytes(10)) for j in range(rng.randrange(0, 4))],
        }
        for _ in range(n)
    ]


def buffer_of_batches(seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out, offset = b"", 0
    for i in range(12):
        n = rng.randrange(1, 40)
        out += encode_batch(
            random_records(rng, n),
            compression=COMPRESSION_TYPES[i % len(COMPRESSION_TYPES)],
            base_offset=offset,
            partition_leader_epoch=i,
            producer_id=100 + i,
            producer_epoch=i % 3,
            is_transactional=i % 2 == 1,
        )
        offset += n
    return out


def expected_rows(data: bytes, min_offset: int | None = None) -> list[dict]:
    return [
        {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key": r.key,
            "value": r.value,
            "headers": [{"key": k, "value": v} for k, v in r.headers],
            "partition_leader_epoch": b.partition_leader_epoch,
            "producer_id": b.producer_id,
            "producer_epoch": b.producer_epoch,
            "is_transactional": b.is_transactional,
        }
        for b in decode_batches(data)
        if not b.is_control
        for r in b.records
        if min_offset is None or r.offset >= min_offset
    ]


def test_arrow_rows_equal_object_decoding_for_every_codec() -> None:
    data = buffer_of_batches()
    table = decode_to_arrow(data, batch_columns=True)
    table.validate(full=True)
    rows = table.to_pylist()
    for row in rows:
        row["timestamp"] = int(row["timestamp"].timestamp() * 1000)
    assert rows == expected_rows(data)


def test_arrow_schema_is_documented_one() -> None:
    table = decode_to_arrow(buffer_of_batches())
    assert table.schema.names == ["offset", "timestamp", "key", "value", "headers"]
    assert table.schema.field("offset").type == pa.int64()
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert table.schema.field("key").type == pa.binary()
    assert table.schema.field("value").type == pa.binary()
    assert table.schema.field("headers").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())])
    )


def test_numpy_columns_match_records_and_are_views_of_native_buffers() -> None:
    data = buffer_of_batches(2)
    cols = decode_columns(data)
    records = [r for b in decode_batches(data) for r in b.records]
    assert cols.offsets.dtype == np.int64 and cols.timestamps.dtype == np.int64
    assert cols.offsets.tolist() == [r.offset for r in records]
    assert cols.timestamps.tolist() == [r.timestamp for r in records]
    assert [cols.keys[i] for i in range(len(cols))] == [r.key for r in records]
    assert [cols.values[i] for i in range(len(cols))] == [r.value for r in records]
    assert cols.keys.null_count == sum(r.key is None for r in records)
    # No copy: the arrays are read-only views whose base is the Rust-owned buffer.
    assert not cols.values.data.flags.writeable
    assert type(cols.values.data.base).__name__ == "NativeBuffer"
    arrow_values = cols.values.to_arrow()
    assert arrow_values.buffers()[2].address == cols.values.data.ctypes.data
    assert cols.batches["num_rows"].sum() == len(cols)
    assert cols.batches["partition_leader_epoch"].tolist() == list(range(12))


def test_columns_outlive_everything_but_themselves() -> None:
    values = decode_columns(encode_batch([{"value": b"x" * 1000, "timestamp": 0}] * 100)).values.data
    import gc

    gc.collect()
    assert values.tobytes() == b"x" * 100_000


def test_min_offset_and_control_batches() -> None:
    data = buffer_of_batches(3)
    marker = encode_control_batch(CONTROL_TYPE_ABORT, producer_id=1, producer_epoch=0, base_offset=10_000)
    cols = decode_columns(data + marker, min_offset=25)
    assert cols.offsets.tolist() == [r["offset"] for r in expected_rows(data, 25)]
    assert cols.batches["control_type"][-1] == CONTROL_TYPE_ABORT
    assert cols.batches["num_rows"][-1] == 0
    with_control = decode_columns(data + marker, skip_control=False)
    assert with_control.offsets[-1] == 10_000
    table = decode_to_arrow(data + marker, min_offset=25)
    table.validate(full=True)
    assert table.column("offset").to_pylist() == cols.offsets.tolist()


def test_empty_input_gives_an_empty_table() -> None:
    table = decode_to_arrow(b"")
    assert table.num_rows == 0
    table.validate(full=True)


def test_columnar_decoding_validates_like_object_decoding() -> None:
    data = bytearray(buffer_of_batches())
    data[200] ^= 0x40
    with pytest.raises(CorruptRecordError) as a:
        decode_batches(bytes(data))
    with pytest.raises(CorruptRecordError) as b:
        decode_to_arrow(bytes(data))
    assert str(a.value) == str(b.value)
    whole = buffer_of_batches()
    assert decode_to_arrow(whole + whole[:30], allow_partial_trailing=True).num_rows == len(expected_rows(whole))
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_columns(whole + whole[:30])

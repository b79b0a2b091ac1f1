"""``klog.records.encode_columns``: record batches from columns (Arrow, NumPy, lists) are
byte-identical to ``encode_batch`` of the same records, read by kafka-python and aiokafka, split
by size/count with continuing sequences; and bytes-taking functions read any buffer in place."""

from __future__ import annotations

import mmap
import random
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioReader
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpReader

from klog._native import _core
from klog.partitioner import murmur2, partition_for_key
from klog.records import (
    COMPRESSION_TYPES,
    CorruptRecordError,
    crc32c,
    decode_batches,
    decode_columns,
    decode_to_arrow,
    encode_batch,
    encode_columns,
    parse_control_record_key,
    partitions_for_keys,
    set_producer_fields,
    with_producer_fields,
)

TS = 1_700_000_000_000


def records_of(values: list[bytes | None], keys: list[bytes | None] | None = None, timestamps: Any = TS,
               headers: Any = None) -> list[dict[str, Any]]:
    out = []
    for i, v in enumerate(values):
        ts = timestamps if isinstance(timestamps, int) else timestamps[i]
        h = headers[i] if isinstance(headers, list) and headers and isinstance(headers[0], (list, type(None))) else headers
        out.append({"key": None if keys is None else keys[i], "value": v, "timestamp": ts, "headers": h or []})
    return out


VALUES = [b"v%03d" % i if i % 5 else None for i in range(40)]
FIXED = [b"%06d" % i for i in range(40)]

#: Ways to hand a column of bytes|None to encode_columns.
NULLABLE_COLUMNS: dict[str, Callable[[list[bytes | None]], Any]] = {
    "list": lambda vs: vs,
    "tuple": tuple,
    "numpy object": lambda vs: np.array(vs, dtype=object),
    "arrow binary": lambda vs: pa.array(vs, pa.binary()),
    "arrow large_binary": lambda vs: pa.array(vs, pa.large_binary()),
    "arrow string": lambda vs: pa.array([None if v is None else v.decode() for v in vs], pa.string()),
    "arrow large_string": lambda vs: pa.array([None if v is None else v.decode() for v in vs], pa.large_string()),
    "arrow sliced": lambda vs: pa.array([b"before"] + vs + [b"after"], pa.binary()).slice(1, len(vs)),
    "arrow chunked": lambda vs: pa.chunked_array([pa.array(vs[:7], pa.binary()), pa.array([], pa.binary()),
                                                  pa.array(vs[7:], pa.large_binary()).cast(pa.binary())]),
    "arrow chunked sliced": lambda vs: pa.chunked_array(
        [pa.array([b"x"] + vs[:13], pa.binary()).slice(1), pa.array(vs[13:] + [b"y"], pa.binary()).slice(0, len(vs) - 13)]),
}

FIXED_COLUMNS: dict[str, Callable[[list[bytes]], Any]] = {
    "numpy S": lambda vs: np.array(vs, dtype="S6"),
    "numpy 2-D uint8": lambda vs: np.frombuffer(b"".join(vs), dtype=np.uint8).reshape(len(vs), 6),
    "arrow fixed_size_binary": lambda vs: pa.array(vs, pa.binary(6)),
    "arrow fixed_size_binary sliced": lambda vs: pa.array([b"000000"] + vs, pa.binary(6)).slice(1),
    "numpy S sliced view": lambda vs: np.array([b"zzzzzz"] + vs, dtype="S6")[1:],
}


@pytest.mark.parametrize("kind", sorted(NULLABLE_COLUMNS))
def test_nullable_columns_encode_byte_identically_to_encode_batch(kind: str) -> None:
    make = NULLABLE_COLUMNS[kind]
    keys = [None if i % 3 == 0 else b"k%d" % (i % 4) for i in range(len(VALUES))]
    [(raw, count)] = encode_columns(make(VALUES), make(keys), timestamps=TS)
    assert count == len(VALUES)
    assert raw == encode_batch(records_of(VALUES, keys))


@pytest.mark.parametrize("kind", sorted(FIXED_COLUMNS))
def test_fixed_width_columns_encode_byte_identically_to_encode_batch(kind: str) -> None:
    [(raw, count)] = encode_columns(FIXED_COLUMNS[kind](FIXED), timestamps=TS)
    assert count == len(FIXED)
    assert raw == encode_batch(records_of(FIXED))  # type: ignore[arg-type]


def test_numpy_bytes_arrays_drop_trailing_nuls_like_numpy_items() -> None:
    arr = np.array([b"a", b"bcd", b"", b"\x00x"])
    [(raw, _)] = encode_columns(arr, timestamps=TS)
    assert raw == encode_batch(records_of([bytes(v) for v in arr]))
    # 2-D uint8 rows keep every byte.
    rows = np.zeros((2, 3), dtype=np.uint8)
    [(raw, _)] = encode_columns(rows, timestamps=TS)
    assert [r.value for r in decode_batches(raw)[0].records] == [b"\x00" * 3] * 2


@pytest.mark.parametrize("codec", COMPRESSION_TYPES)
def test_every_codec_with_keys_headers_and_timestamps_matches_encode_batch(codec: str) -> None:
    rng = random.Random(codec)
    n = 300
    values = [rng.randbytes(rng.randrange(0, 200)) if i % 7 else None for i in range(n)]
    keys = [b"key-%d" % (i % 13) if i % 4 else None for i in range(n)]
    ts = [TS + rng.randrange(-5000, 5000) for _ in range(n)]
    headers = [[("trace", b"t%d" % i), ("nullable", None)][: i % 3] for i in range(n)]
    batches = encode_columns(pa.array(values, pa.binary()), keys, timestamps=np.array(ts, dtype=np.int64),
                             headers=headers, compression=codec, producer_id=9, producer_epoch=1,
                             base_sequence=100, is_transactional=True)
    assert len(batches) == 1
    expect = encode_batch(records_of(values, keys, ts, headers), compression=codec, producer_id=9,
                          producer_epoch=1, base_sequence=100, is_transactional=True)
    assert batches[0] == (expect, n)


def test_arrow_list_of_struct_headers_as_spark_writes_them() -> None:
    header_type = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
    headers = [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, [], [{"key": "ü", "value": b""}]]
    arr = pa.array([None] + headers, header_type).slice(1)
    values = [b"w", b"x", b"y", b"z"]
    [(raw, _)] = encode_columns(values, headers=arr, timestamps=TS)
    as_pairs = [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in headers]
    assert raw == encode_batch(records_of(values, None, TS, as_pairs))  # type: ignore[arg-type]
    # large_list and chunked forms too
    large = pa.chunked_array([pa.array(headers[:1], pa.large_list(header_type.value_type)),
                              pa.array(headers[1:], pa.large_list(header_type.value_type))])
    assert encode_columns(values, headers=large, timestamps=TS)[0][0] == raw


def test_shared_headers_go_on_every_record() -> None:
    values = [b"a", b"b", None]
    shared = [("h", b"1"), ("n", None)]
    [(raw, _)] = encode_columns(values, shared_headers=shared, timestamps=TS)
    assert raw == encode_batch(records_of(values, None, TS, shared))
    assert encode_columns(values, shared_headers={"h": b"1", "n": None}, timestamps=TS)[0][0] == raw
    with pytest.raises(ValueError, match="not both"):
        encode_columns(values, headers=[[("a", b"")]] * 3, shared_headers=shared)


def test_timestamp_forms() -> None:
    values = [b"a", b"b", b"c"]
    ms = [TS, TS + 1, TS - 7]
    expect = encode_batch(records_of(values, None, ms))
    forms = [
        ms,
        np.array(ms, dtype=np.int64),
        np.array(ms, dtype="datetime64[ms]"),
        np.array(ms, dtype="datetime64[ms]").astype("datetime64[ns]"),
        pa.array(ms, pa.int64()),
        pa.array(ms, pa.timestamp("ms", tz="UTC")),
        pa.array([t * 1000 for t in ms], pa.timestamp("us", tz="UTC")),
        pa.chunked_array([pa.array(ms[:1], pa.int64()), pa.array(ms[1:], pa.int64())]),
        pa.array([0] + ms, pa.int64()).slice(1),
    ]
    for f in forms:
        assert encode_columns(values, timestamps=f)[0][0] == expect, type(f)
    # None (or null) means now.
    [(raw, _)] = encode_columns(values, timestamps=[TS, None, TS])
    (batch,) = decode_batches(raw)
    assert abs(batch.records[1].timestamp - batch.records[0].timestamp) > 10**9
    [(raw, _)] = encode_columns(values, timestamps=pa.array([TS, None, TS], pa.int64()))
    assert decode_batches(raw)[0].records[1].timestamp > TS + 10**9


@pytest.mark.parametrize("codec", COMPRESSION_TYPES)
@pytest.mark.parametrize("reader", [KpReader, AioReader], ids=["kafka-python", "aiokafka"])
def test_split_batches_are_read_by_other_clients(codec: str, reader: Any) -> None:
    n = 500
    values = [b"value-%d-" % i * (i % 9) for i in range(n)]
    keys = [b"k%d" % i for i in range(n)]
    batches = encode_columns(values, keys, timestamps=TS, shared_headers=[("h", b"x")], compression=codec,
                             max_batch_bytes=4096, producer_id=5, producer_epoch=0, base_sequence=10)
    assert len(batches) > 3 and sum(c for _, c in batches) == n
    seen = []
    seq = 10
    for raw, count in batches:
        b = reader(raw)
        assert b.validate_crc()
        assert (b.producer_id, b.base_sequence) == (5, seq)
        seq += count
        recs = list(b)
        assert len(recs) == count
        seen += [(r.key, r.value, list(r.headers)) for r in recs]
        if codec == "none":
            assert len(raw) <= 4096
    assert seen == [(k, v, [("h", b"x")]) for k, v in zip(keys, values)]


def test_each_split_batch_equals_encode_batch_of_its_records() -> None:
    values = [b"x" * (i % 50) for i in range(1000)]
    start = 0
    for raw, count in encode_columns(values, timestamps=TS, max_batch_records=128, compression="lz4",
                                     base_sequence=0, producer_id=1, producer_epoch=0):
        assert raw == encode_batch(records_of(values[start:start + count]), compression="lz4",
                                   base_sequence=start, producer_id=1, producer_epoch=0)
        assert count <= 128
        start += count
    assert start == 1000


def test_rows_selects_and_orders_records() -> None:
    values = pa.array([b"a", b"b", None, b"d"], pa.binary())
    keys = [b"k0", b"k1", b"k2", b"k3"]
    for rows in ([3, 0, 2], np.array([3, 0, 2], dtype=np.int64), np.array([3, 0, 2], dtype=np.int32)):
        [(raw, count)] = encode_columns(values, keys, timestamps=[1, 2, 3, 4], rows=rows)
        assert count == 3
        assert raw == encode_batch([{"key": b"k3", "value": b"d", "timestamp": 4},
                                    {"key": b"k0", "value": b"a", "timestamp": 1},
                                    {"key": b"k2", "value": None, "timestamp": 3}])
    assert encode_columns(values, rows=[]) == []
    assert encode_columns([]) == []


def test_str_and_buffer_items_in_lists() -> None:
    [(raw, _)] = encode_columns(["é", bytearray(b"ba"), memoryview(b"mv"), np.bytes_(b"np")], timestamps=TS)
    assert raw == encode_batch(records_of(["é".encode(), b"ba", b"mv", b"np"]))  # type: ignore[list-item]


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: encode_columns([b"a", 5]), TypeError, r"values\[1\] must be bytes, str or None, not int"),
    (lambda: encode_columns(b"abc"), TypeError, "values must be a column"),
    (lambda: encode_columns(7), TypeError, "values must be a list"),
    (lambda: encode_columns(pa.array([1, 2])), TypeError, "values: Arrow arrays must be binary"),
    (lambda: encode_columns(pa.array(["a", "b"]).dictionary_encode()), TypeError, "dictionary"),
    (lambda: encode_columns(np.zeros(4, dtype=np.uint8)), TypeError, "1-D uint8 array is one value"),
    (lambda: encode_columns([b"a"], [b"k", b"l"]), ValueError, "keys: has 2 rows but values has 1"),
    (lambda: encode_columns([b"a"], timestamps=[1, 2]), ValueError, "timestamps: has 2 rows"),
    (lambda: encode_columns([b"a"], timestamps=["x"]), TypeError, r"timestamps\[0\] must be an int"),
    (lambda: encode_columns([b"a"], timestamps=np.zeros(1, np.float64)), TypeError, "timestamps: arrays must be 1-D int64"),
    (lambda: encode_columns([b"a"], timestamps=object()), TypeError,
     r"timestamps must be None, an int, or a column of ints \(.*\), not object"),
    (lambda: encode_columns([b"a"], headers=5), TypeError, r"headers must be one header list per row .*, not int"),
    (lambda: encode_columns([b"a"], headers=[5]), TypeError,
     r"headers\[0\] must be a list of \(str, bytes \| None\) pairs, not int"),
    (lambda: encode_columns([b"a"], shared_headers=5), TypeError,
     r"shared_headers must be a list of \(str, bytes \| None\) pairs, not int"),
    (lambda: encode_columns(iter([b"a", 5])), TypeError, r"values\[1\] must be bytes, str or None, not int"),
    (lambda: encode_columns([b"a"], headers=[[("k", 5)]]), TypeError, r"headers\[0\]\[0\]: header value"),
    (lambda: encode_columns([b"a"], headers=[[("k",)]]), TypeError, r"headers\[0\]\[0\] must be a \(str, bytes \| None\) pair"),
    (lambda: encode_columns([b"a"], shared_headers=[(None, b"")]), TypeError, r"shared_headers\[0\]: header key"),
    (lambda: encode_columns([b"a"], shared_headers=[(b"\xff", b"")]), CorruptRecordError, "record 0: .*UTF-8"),
    (lambda: encode_columns([b"a", b"b"], rows=[0, 2]), ValueError, r"rows\[1\]: row 2 is out of range for 2 values"),
    (lambda: encode_columns([b"a"], rows=[-1]), ValueError, r"rows\[0\]: row -1 is out of range"),
    (lambda: encode_columns([b"a"], compression="brotli"), ValueError, "unknown compression"),
    (lambda: encode_columns([b"a"], max_batch_records=0), ValueError, "max_batch_records"),
    (lambda: partitions_for_keys([b"a"], 0), ValueError, "num_partitions"),
])
def test_bad_input_raises_clear_errors(call: Callable[[], Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_arrow_headers_with_null_struct_entry_are_rejected() -> None:
    t = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    arr = pa.array([[{"key": "a", "value": b""}, None]], pa.list_(t))
    with pytest.raises(ValueError, match=r"headers\[0\]: header 1 is null"):
        encode_columns([b"v"], headers=arr)
    arr = pa.array([[{"key": None, "value": b""}]], pa.list_(t))
    with pytest.raises(ValueError, match=r"headers\[0\]: header 0 has a null key"):
        encode_columns([b"v"], headers=arr)


def test_partitions_for_keys_match_the_java_partitioner() -> None:
    keys = [None if i % 10 == 0 else b"key-%d" % i for i in range(200)]
    expect = [-1 if k is None else partition_for_key(k, 7) for k in keys]
    for form in (keys, pa.array(keys, pa.binary()), pa.array([k and k.decode() for k in keys])):
        got = partitions_for_keys(form, 7)
        assert got.dtype == np.int32 and got.tolist() == expect
    assert partitions_for_keys(keys, 7, null_partition=3).tolist() == [3 if p < 0 else p for p in expect]


def test_with_producer_fields_equals_encoding_with_them() -> None:
    recs = records_of([b"a", b"b"])
    plain = encode_batch(recs, compression="zstd")
    assert with_producer_fields(plain, 77, 3, 1000) == encode_batch(
        recs, compression="zstd", producer_id=77, producer_epoch=3, base_sequence=1000)
    with pytest.raises(CorruptRecordError):
        with_producer_fields(b"short", 1, 1, 1)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=20),
                               st.integers(-(2**40), 2**40),
                               st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3)),
                     min_size=1, max_size=60),
       codec=st.sampled_from(COMPRESSION_TYPES))
def test_any_records_encode_identically_from_columns_and_dicts(rows: list[Any], codec: str) -> None:
    values = [r[0] for r in rows]
    keys = [r[1] for r in rows]
    ts = [r[2] for r in rows]
    headers = [r[3] for r in rows]
    [(raw, _)] = encode_columns(pa.array(values, pa.binary()), keys, timestamps=pa.array(ts, pa.int64()),
                                headers=headers, compression=codec)
    assert raw == encode_batch(records_of(values, keys, ts, headers), compression=codec)


# --------------------------------------------------------------------------- buffer-protocol inputs

def buffer_forms(data: bytes, tmp_path: Any) -> dict[str, Any]:
    path = tmp_path / "batches.bin"
    path.write_bytes(data)
    f = open(path, "rb")  # noqa: SIM115 - closed by the mmap's owner at test end
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    f.close()
    return {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "memoryview slice": memoryview(b"\x00" * 3 + data)[3:],
        "numpy uint8": np.frombuffer(data, dtype=np.uint8),
        "mmap": mm,
    }


def test_decoders_read_every_contiguous_buffer_type(tmp_path: Any) -> None:
    recs = records_of([b"v%d" % i for i in range(20)], [b"k"] * 20, TS, [("h", b"1")])
    data = encode_batch(recs, compression="gzip") + encode_batch(recs)
    expect_rows = decode_to_arrow(data).to_pylist()
    for name, form in buffer_forms(data, tmp_path).items():
        assert [len(b.records) for b in decode_batches(form)] == [20, 20], name
        assert decode_columns(form).values[3] == b"v3", name
        assert decode_to_arrow(form).to_pylist() == expect_rows, name
        assert crc32c(form) == crc32c(data), name
        assert murmur2(form) == murmur2(data), name
    key = (0).to_bytes(2, "big") + (1).to_bytes(2, "big")
    assert parse_control_record_key(memoryview(key)) == parse_control_record_key(bytearray(key)) == (0, 1)


def test_decoded_results_do_not_depend_on_the_input_afterwards() -> None:
    data = bytearray(encode_batch(records_of([b"abc", b"def"])))
    table = decode_to_arrow(data)
    cols = decode_columns(memoryview(data))
    data[:] = b"\x00" * len(data)
    data.extend(b"grow")  # no export remains once a call returns
    assert table.column("value").to_pylist() == [b"abc", b"def"]
    assert cols.values[1] == b"def"


def test_non_contiguous_or_text_inputs_are_type_errors() -> None:
    data = encode_batch(records_of([b"a"]))
    strided = memoryview(data * 2)[::2]
    for bad in (strided, "text", 5, None):
        with pytest.raises(TypeError, match="bytes-like"):
            decode_batches(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        crc32c(np.frombuffer(data * 2, dtype=np.uint8)[::2])
    with pytest.raises(TypeError, match="str"):
        murmur2("text")  # type: ignore[arg-type]


def test_mutable_output_and_in_place_producer_fields() -> None:
    values = [b"a", b"bb", b"ccc"]
    for codec in ("none", "lz4"):
        [(raw, _)] = encode_columns(values, timestamps=TS, compression=codec, mutable=True)
        assert isinstance(raw, bytearray)
        set_producer_fields(raw, 42, 1, 7)
        assert bytes(raw) == encode_batch(records_of(values), compression=codec, producer_id=42, producer_epoch=1,
                                          base_sequence=7)
    with pytest.raises(TypeError, match="writable"):
        set_producer_fields(encode_batch(records_of(values)), 1, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(CorruptRecordError):
        set_producer_fields(bytearray(10), 1, 1, 1)


def test_malformed_arrow_buffers_are_value_errors_not_crashes() -> None:
    data = pa.py_buffer(b"abcdef")
    decreasing = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(np.array([0, 4, 2], np.int32).tobytes()), data])
    with pytest.raises(ValueError, match=r"values\[1\]: offsets decrease \(4 then 2\)"):
        encode_columns(decreasing)
    with pytest.raises(ValueError, match=r"keys\[1\]: offsets decrease"):
        partitions_for_keys(decreasing, 3)


def _allocated(buf: bytearray) -> int:
    """Bytes allocated for a bytearray's data (``__sizeof__`` counts the allocation, not the length): a new
    batch has exactly ``len + 1``, a rewritten larger buffer keeps its bigger allocation."""
    return buf.__sizeof__() - bytearray().__sizeof__()


def test_reuse_rewrites_free_bytearrays_in_place_byte_identically() -> None:
    values = [b"v%05d" % i for i in range(3000)]
    fresh = _core.encode_columns(values, timestamps=TS, max_batch_bytes=20_000, mutable=True)
    assert len(fresh) > 2 and all(_allocated(b) == len(b) + 1 for b, _ in fresh)
    # One free buffer short of the batch count, each larger than a batch and dirty: the first batches (taken from
    # the end of the list) are written over them, the last one is new.
    free = [bytearray(b"\xff" * 25_000) for _ in range(len(fresh) - 1)]
    got = _core.encode_columns(values, timestamps=TS, max_batch_bytes=20_000, mutable=True, reuse=free)
    assert free == []
    assert [(bytes(b), n) for b, n in got] == [(bytes(b), n) for b, n in fresh]
    assert all(type(b) is bytearray for b, _ in got)
    assert [_allocated(b) for b, _ in got[:-1]] == [25_001] * (len(fresh) - 1)
    assert _allocated(got[-1][0]) == len(got[-1][0]) + 1


def test_reuse_never_rewrites_a_bytearray_something_still_references() -> None:
    values = [b"v%05d" % i for i in range(3000)]
    fresh = _core.encode_columns(values, timestamps=TS, max_batch_bytes=20_000, mutable=True)
    viewed = bytearray(b"a" * 25_000)
    view = memoryview(viewed)[100:200]  # an export: a reader of the old bytes
    referenced = bytearray(b"b" * 25_000)
    free = [viewed, referenced, bytearray(b"c" * 25_000)]
    del viewed  # the memoryview alone keeps it alive
    got = _core.encode_columns(values, timestamps=TS, max_batch_bytes=20_000, mutable=True, reuse=free)
    # The referenced ones stay in the list, untouched (the pool keeps them until their readers let go).
    assert len(free) == 2 and free[1] is referenced and free[0] is view.obj
    assert [bytes(b) for b, _ in got] == [bytes(b) for b, _ in fresh]
    assert bytes(view) == b"a" * 100 and view.obj == bytearray(b"a" * 25_000)
    assert referenced == bytearray(b"b" * 25_000)
    assert _allocated(got[0][0]) == 25_001  # the free one, rewritten
    assert [_allocated(b) for b, _ in got[1:]] == [len(b) + 1 for b, _ in got[1:]]  # new ones


def test_reuse_takes_the_shortest_free_bytearray_a_batch_fits_in() -> None:
    # A batch written over a buffer too short for it would be reallocated (fresh pages after all): of the free
    # ones, the shortest that fits is taken, and the small one is left for a small batch.
    values = [b"v%05d" % i for i in range(500)]
    (batch, _), = _core.encode_columns(values, timestamps=TS, mutable=True)
    # Only the list may reference a reusable buffer: keep ids, not the objects.
    free = [bytearray(len(batch) * 3), bytearray(len(batch) + 10), bytearray(100)]
    large, snug, small = (id(b) for b in free)
    got = _core.encode_columns(values, timestamps=TS, mutable=True, reuse=free)
    assert id(got[0][0]) == snug and bytes(got[0][0]) == bytes(batch)
    assert [id(b) for b in free] == [large, small]


def test_reuse_skips_other_objects_and_needs_mutable_output() -> None:
    values = [b"x" * 50] * 10
    free: list[Any] = [b"immutable bytes", memoryview(bytearray(100))]
    got = _core.encode_columns(values, timestamps=TS, mutable=True, reuse=free)
    assert free[0] == b"immutable bytes" and len(free) == 2  # left alone, neither rewritten nor used
    assert bytes(got[0][0]) == bytes(_core.encode_columns(values, timestamps=TS)[0][0])
    with pytest.raises(ValueError, match="mutable=True"):
        _core.encode_columns(values, reuse=[bytearray(100)])

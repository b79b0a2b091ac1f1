"""``send_batch``'s encoder (klog.client.batch_encode) without a broker: partitioning like ``send``,
batch.size splits, codecs, producer fields written when drained, windows, errors. Batches are checked by
decoding them with klog's codec and kafka-python's reader."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch as KpReader

from klog.client import batch_encode
from klog.client.batch_encode import BatchBufferPool, LazyBatch, encode_value_batches
from klog.client.errors import RecordTooLargeError
from klog.client.accumulator import RecordAccumulator
from klog.partitioner import partition_for_key
from klog.records import decode_batches

TS = 1_700_000_000_000


def core(batch_size: int = 16384, max_request_size: int = 1048576, compression: str = "none",
         ignore_keys: bool = False) -> Any:
    """The ProducerCore attributes the encoder reads, around a real RecordAccumulator."""
    acc = RecordAccumulator(batch_size=batch_size, buffer_memory=1 << 30, max_request_size=max_request_size,
                            linger_ms=0, asyncio_futures=False, wake=lambda: None)
    return SimpleNamespace(accumulator=acc, compression=compression, compression_level=None,
                           ignore_keys=ignore_keys, random_partitioner=False, batch_buffers=BatchBufferPool())


def run(c: Any, values: Any, keys: Any = None, headers: Any = None, partition: int | None = None,
        nparts: int = 6) -> list[tuple[int, LazyBatch, int]]:
    parts = (list(range(nparts)), list(range(nparts)))
    return list(encode_value_batches(c, "t", values, keys, headers, partition, parts, TS))


def decoded(out: list[tuple[int, LazyBatch, int]]) -> list[tuple[int, Any]]:
    rows = []
    for part, batch, count in out:
        (b,) = decode_batches(batch.encode(-1, -1, -1))
        assert len(b.records) == count
        rows += [(part, r) for r in b.records]
    return rows


@pytest.mark.parametrize("form", ["list", "arrow", "numpy S"])
def test_keyed_rows_go_to_their_murmur2_partitions_in_input_order(form: str) -> None:
    n = 5000
    keys = [b"key-%05d" % (i * 7919 % n) for i in range(n)]
    values = [b"value-%05d" % i for i in range(n)]
    make = {"list": lambda x: x, "arrow": lambda x: pa.array(x, pa.binary()),
            "numpy S": lambda x: np.array(x)}[form]
    out = run(core(), make(values), make(keys), headers=[("h", b"1")])
    rows = decoded(out)
    assert sorted(r.value for _, r in rows) == sorted(values)
    for part, r in rows:
        assert part == partition_for_key(r.key, 6)
        assert r.headers == [("h", b"1")] and r.timestamp == TS
    for p in range(6):
        assert [r.value for q, r in rows if q == p] == [v for k, v in zip(keys, values) if partition_for_key(k, 6) == p]


def test_null_keys_go_to_one_sticky_partition() -> None:
    keys = [None if i % 2 else b"k%d" % i for i in range(100)]
    rows = decoded(run(core(), [b"v"] * 100, keys))
    null_parts = {p for p, r in rows if r.key is None}
    assert len(null_parts) == 1
    assert all(p == partition_for_key(r.key, 6) for p, r in rows if r.key is not None)


def test_keyless_rows_fill_batches_up_to_batch_size_on_one_partition() -> None:
    values = np.frombuffer(bytes(range(256)) * 400, dtype=np.uint8).reshape(-1, 100)
    out = run(core(batch_size=4096), values)
    assert len({p for p, _, _ in out}) == 1 and len(out) > 10
    assert all(len(b) <= 4096 for _, b, _ in out)
    assert [r.value for _, r in decoded(out)] == [row.tobytes() for row in values]


def test_explicit_partition_and_ignore_keys() -> None:
    out = run(core(), [b"a", b"b"], [b"x", b"y"], partition=4)
    assert {p for p, _, _ in out} == {4}
    out = run(core(ignore_keys=True), [b"a", b"b"] * 50, [b"x", b"y"] * 50)
    assert len({p for p, _, _ in out}) == 1
    assert [r.key for _, r in decoded(out)] == [b"x", b"y"] * 50  # keys are still written


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_configured_compression_is_used(codec: str) -> None:
    values = [b"compressible value %d " % (i % 10) * 5 for i in range(3000)]
    out = run(core(compression=codec), values)
    for _, b, _ in out:
        assert decode_batches(b.encode(-1, -1, -1))[0].compression == codec
    assert [r.value for _, r in decoded(out)] == values


def test_lazy_batches_get_producer_fields_when_drained() -> None:
    out = run(core(), [b"v%d" % i for i in range(10)])
    (_, lazy, count) = out[0]
    raw = bytes(lazy.encode(1234, 5, 77))
    b = KpReader(raw)
    assert b.validate_crc()
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1234, 5, 77)
    assert [r.value for r in b] == [b"v%d" % i for i in range(count)]
    # The same fields again: the same buffer; new ones (an epoch bump before a retry): a patched copy.
    assert lazy.encode(1234, 5, 77).obj is lazy.raw  # type: ignore[union-attr]
    again = lazy.encode(1234, 6, 77)
    assert isinstance(again, bytes) and KpReader(again).producer_epoch == 6
    assert KpReader(bytes(lazy.raw)).producer_epoch == 5


def test_inputs_larger_than_a_window_are_encoded_in_several_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_encode, "WINDOW_ROWS", 1000)
    n = 4500
    values = [b"%d" % i for i in range(n)]
    keys = [b"k%d" % (i % 17) for i in range(n)]
    for v, k in [(values, None), (pa.array(values), pa.array(keys)), (values, keys), (np.array(values), keys)]:
        rows = decoded(run(core(), v, k))
        assert sorted(r.value for _, r in rows) == sorted(values)


def test_unicode_numpy_arrays_are_utf8() -> None:
    rows = decoded(run(core(), np.array(["é", "ab"]), np.array(["k", "ü"])))
    assert sorted((r.key, r.value) for _, r in rows) == sorted([(b"k", "é".encode()), ("ü".encode(), b"ab")])


def test_errors() -> None:
    with pytest.raises(ValueError, match="keys has 1 entries but values has 2"):
        run(core(), [b"a", b"b"], [b"k"])
    with pytest.raises(TypeError, match=r"values\[1\] must be bytes, str or None, not int"):
        run(core(), [b"a", 1])
    with pytest.raises(TypeError, match=r"keys\[0\]"):
        run(core(), [b"a"], [3.5])
    with pytest.raises(RecordTooLargeError, match="max.request.size"):
        run(core(batch_size=1000, max_request_size=1000), [b"x" * 2000])
    assert run(core(), []) == []


def test_large_numpy_and_arrow_rows_are_encoded_a_few_batches_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # A call allocates all its batches before buffer.memory is checked: with known row sizes it is bounded to
    # WINDOW_BATCHES batches, so a producer under back-pressure can write each over a finished batch's buffer.
    calls: list[int] = []
    encode = batch_encode._core.encode_columns

    def counting(values: Any, *args: Any, **kw: Any) -> Any:
        out = encode(values, *args, **kw)
        calls.append(len(out))
        return out

    monkeypatch.setattr(batch_encode._core, "encode_columns", counting)
    values = np.frombuffer(b"x" * 1000 * 3000, dtype="S1000")
    for v in (values, pa.array(values.tolist(), pa.binary())):
        calls.clear()
        out = run(core(batch_size=20_000), v)
        assert sum(n for _, _, n in out) == 3000 and len(calls) > 10
        assert max(calls) <= batch_encode.WINDOW_BATCHES + 1  # row sizes are estimated without framing
        assert [r.value for _, r in decoded(out)] == [b"x" * 1000] * 3000

"""Record batch codec speed: klog vs kafka-python's pure-Python codec and the ``crc32c`` package,
measured in the same run on the same machine.

Run: ``.venv/bin/pytest benches/bench_codec.py -p benchmark -o addopts="" --benchmark-only``

Workload: one ~1 MiB uncompressed batch of 100-byte records (random 100-byte values, 8-byte
keys, no headers), as a producer would send it; 1 MiB of random bytes for CRC-32C.

Targets, checked by ``test_codec_targets`` at the end from the medians measured above:
- CRC-32C within 1.2x of the ``crc32c`` package's time;
- decode to columns at least 1 GB/s on one core and at least 50x kafka-python's decode;
- encode at least 5x kafka-python's builder (a regression floor; no issue target).

Columnar encode (``test_encode_columns_targets``, issues 6/7: ``send_batch`` and the Spark sink): one
~1 MiB batch of 100 B and of 1 KiB values with 8-byte keys, encoded by ``encode_columns`` from Arrow
arrays and from Python lists, by ``encode_batch`` from prebuilt per-record dicts and from dicts built in
the loop (what ``send_batch`` did before), and by kafka-python's builder. Regression floors at 100 B:
``encode_columns`` from Arrow at least 1.5x ``encode_batch`` from prebuilt dicts, 4x building dicts +
``encode_batch``, 30x kafka-python.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable

import pytest

from klog.records import crc32c, decode_batches, decode_columns, decode_to_arrow, encode_batch, encode_columns

kp_records = pytest.importorskip("kafka.record.default_records")
crc32c_pkg = pytest.importorskip("crc32c")

BATCH_BYTES = 1 << 20
VALUE_SIZE = 100


def _records() -> list[dict[str, Any]]:
    rng = random.Random(42)
    n = BATCH_BYTES // (VALUE_SIZE + 8 + 10)  # value + key + per-record framing
    return [
        {"key": b"key-%04d" % (i % 10_000), "value": rng.randbytes(VALUE_SIZE), "timestamp": 1_700_000_000_000 + i}
        for i in range(n)
    ]


RECORDS = _records()
BATCH = encode_batch(RECORDS)
BATCH_ZSTD = encode_batch(RECORDS, compression="zstd")
RANDOM_MIB = os.urandom(1 << 20)

_STATS: dict[str, dict[str, float]] = {}


def _record(benchmark: Any, group: str, impl: str, fn: Callable[[], Any]) -> Any:
    benchmark.group = group
    result = benchmark(fn)
    _STATS.setdefault(group, {})[impl] = benchmark.stats.stats.median
    return result


def _kp_decode(data: bytes) -> int:
    n = 0
    for rec in kp_records.DefaultRecordBatch(data):
        rec.offset, rec.timestamp, rec.key, rec.value, rec.headers
        n += 1
    return n


def _kp_encode(records: list[dict[str, Any]]) -> bytes:
    b = kp_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=4 * BATCH_BYTES,
    )
    for i, r in enumerate(records):
        b.append(i, timestamp=r["timestamp"], key=r["key"], value=r["value"], headers=[])
    return bytes(b.build())


def test_crc32c_1mib_klog(benchmark: Any) -> None:
    assert _record(benchmark, "crc32c-1MiB", "klog", lambda: crc32c(RANDOM_MIB)) == crc32c_pkg.crc32c(RANDOM_MIB)


def test_crc32c_1mib_crc32c_package(benchmark: Any) -> None:
    _record(benchmark, "crc32c-1MiB", "crc32c-package", lambda: crc32c_pkg.crc32c(RANDOM_MIB))


def test_decode_columns_klog(benchmark: Any) -> None:
    cols = _record(benchmark, "decode-1MiB", "klog-columns", lambda: decode_columns(BATCH))
    assert len(cols) == len(RECORDS)


def test_decode_arrow_klog(benchmark: Any) -> None:
    table = _record(benchmark, "decode-1MiB", "klog-arrow", lambda: decode_to_arrow(BATCH))
    assert table.num_rows == len(RECORDS)


def test_decode_objects_klog(benchmark: Any) -> None:
    [batch] = _record(benchmark, "decode-1MiB", "klog-objects", lambda: decode_batches(BATCH))
    assert len(batch.records) == len(RECORDS)


def test_decode_kafka_python(benchmark: Any) -> None:
    assert _record(benchmark, "decode-1MiB", "kafka-python", lambda: _kp_decode(BATCH)) == len(RECORDS)


def test_decode_columns_zstd_klog(benchmark: Any) -> None:
    cols = _record(benchmark, "decode-1MiB-zstd", "klog-columns", lambda: decode_columns(BATCH_ZSTD))
    assert len(cols) == len(RECORDS)


def test_encode_klog(benchmark: Any) -> None:
    assert _record(benchmark, "encode-1MiB", "klog", lambda: encode_batch(RECORDS)) == BATCH


def test_encode_kafka_python(benchmark: Any) -> None:
    out = _record(benchmark, "encode-1MiB", "kafka-python", lambda: _kp_encode(RECORDS))
    assert out[16:] == BATCH[16:]  # same bytes (kafka-python writes leader epoch 0): a fair comparison


def _column_workload(value_size: int) -> tuple[list[dict[str, Any]], list[bytes], list[bytes], Any, Any, bytes]:
    import pyarrow as pa

    rng = random.Random(value_size)
    n = BATCH_BYTES // (value_size + 8 + 10)
    keys = [b"key-%04d" % (i % 10_000) for i in range(n)]
    values = [rng.randbytes(value_size) for _ in range(n)]
    records = [{"key": k, "value": v, "timestamp": 1_700_000_000_000} for k, v in zip(keys, values)]
    return records, keys, values, pa.array(keys, pa.binary()), pa.array(values, pa.binary()), encode_batch(records)


COLUMN_WORKLOADS = {"100B": _column_workload(100), "1KiB": _column_workload(1024)}
COLUMN_IMPLS = ("klog-columns-arrow", "klog-columns-list", "klog-encode_batch-dicts", "klog-build-dicts+encode_batch",
                "kafka-python")


@pytest.mark.parametrize("impl", COLUMN_IMPLS)
@pytest.mark.parametrize("size", sorted(COLUMN_WORKLOADS))
def test_encode_columns(benchmark: Any, size: str, impl: str) -> None:
    records, keys, values, akeys, avalues, expect = COLUMN_WORKLOADS[size]
    ts = 1_700_000_000_000
    fn: Callable[[], Any] = {
        "klog-columns-arrow": lambda: encode_columns(avalues, akeys, timestamps=ts)[0][0],
        "klog-columns-list": lambda: encode_columns(values, keys, timestamps=ts)[0][0],
        "klog-encode_batch-dicts": lambda: encode_batch(records),
        # What send_batch did before encode_columns: one dict per record, then encode_batch.
        "klog-build-dicts+encode_batch": lambda: encode_batch(
            [{"key": k, "value": v, "timestamp": ts} for k, v in zip(keys, values)]),
        "kafka-python": lambda: _kp_encode(records),
    }[impl]
    out = _record(benchmark, f"encode-columns-{size}", impl, fn)
    assert out[16:] == expect[16:]  # the same batch (kafka-python writes leader epoch 0)


def test_encode_columns_targets(benchmark: Any) -> None:
    """Ratios of the columnar-encode medians above (same run); runs after them."""
    benchmark.group = "summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert all(len(_STATS.get(f"encode-columns-{s}", {})) == len(COLUMN_IMPLS) for s in COLUMN_WORKLOADS), \
        "run all test_encode_columns benchmarks"
    figures = {}
    for size in sorted(COLUMN_WORKLOADS):
        st = _STATS[f"encode-columns-{size}"]
        n = len(COLUMN_WORKLOADS[size][0])
        figures[f"{size} encode_columns(arrow) Mrecords/s"] = n / st["klog-columns-arrow"] / 1e6
        figures[f"{size} encode_columns(arrow) GB/s"] = len(COLUMN_WORKLOADS[size][5]) / st["klog-columns-arrow"] / 1e9
        figures[f"{size} encode_columns(list) Mrecords/s"] = n / st["klog-columns-list"] / 1e6
        figures[f"{size} encode_batch(dicts) Mrecords/s"] = n / st["klog-encode_batch-dicts"] / 1e6
        figures[f"{size} kafka-python Mrecords/s"] = n / st["kafka-python"] / 1e6
        figures[f"{size} columns(arrow) speedup vs encode_batch(dicts)"] = st["klog-encode_batch-dicts"] / st["klog-columns-arrow"]
        figures[f"{size} columns(list) speedup vs encode_batch(dicts)"] = st["klog-encode_batch-dicts"] / st["klog-columns-list"]
        figures[f"{size} columns(arrow) speedup vs build dicts + encode_batch"] = (
            st["klog-build-dicts+encode_batch"] / st["klog-columns-arrow"])
        figures[f"{size} columns(list) speedup vs build dicts + encode_batch"] = (
            st["klog-build-dicts+encode_batch"] / st["klog-columns-list"])
        figures[f"{size} columns(arrow) speedup vs kafka-python"] = st["kafka-python"] / st["klog-columns-arrow"]
    for name, value in figures.items():
        print(f"{name}: {value:.2f}")
    benchmark.extra_info.update(figures)
    assert figures["100B columns(arrow) speedup vs encode_batch(dicts)"] >= 1.5
    assert figures["100B columns(arrow) speedup vs build dicts + encode_batch"] >= 4
    assert figures["100B columns(arrow) speedup vs kafka-python"] >= 30


def test_codec_targets(benchmark: Any) -> None:
    """Ratios of the medians measured above (same run, same machine); runs last in this module."""
    benchmark.group = "summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    need = {"crc32c-1MiB": 2, "decode-1MiB": 4, "encode-1MiB": 2}
    assert all(len(_STATS.get(g, {})) == n for g, n in need.items()), "run the whole module"
    crc, dec, enc = _STATS["crc32c-1MiB"], _STATS["decode-1MiB"], _STATS["encode-1MiB"]
    mib = len(BATCH)
    figures = {
        "crc32c klog / crc32c package time": crc["klog"] / crc["crc32c-package"],
        "decode columns GB/s": mib / dec["klog-columns"] / 1e9,
        "decode arrow GB/s": mib / dec["klog-arrow"] / 1e9,
        "decode columns speedup vs kafka-python": dec["kafka-python"] / dec["klog-columns"],
        "decode arrow speedup vs kafka-python": dec["kafka-python"] / dec["klog-arrow"],
        "decode objects speedup vs kafka-python": dec["kafka-python"] / dec["klog-objects"],
        "encode speedup vs kafka-python": enc["kafka-python"] / enc["klog"],
    }
    if "decode-1MiB-zstd" in _STATS:
        figures["decode columns zstd GB/s (of uncompressed batch)"] = mib / _STATS["decode-1MiB-zstd"]["klog-columns"] / 1e9
    for name, value in figures.items():
        print(f"{name}: {value:.2f}")
    benchmark.extra_info.update(figures)
    assert figures["crc32c klog / crc32c package time"] <= 1.2
    assert figures["decode columns GB/s"] >= 1.0
    assert figures["decode columns speedup vs kafka-python"] >= 50
    assert figures["encode speedup vs kafka-python"] >= 5

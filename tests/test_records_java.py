"""klog's codec against Apache Kafka's own Java record batch code (kafka-clients), run through
tests/java/RecordBatchOracle.java: Kafka-built batches (every codec, a transaction marker) decode
identically in klog, Kafka validates (CRC, sizes) and reads every batch klog encodes, and
uncompressed batches are byte-identical."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from klog.records import (
    COMPRESSION_TYPES,
    CONTROL_TYPE_COMMIT,
    decode_batches,
    decode_to_arrow,
    encode_batch,
    encode_control_batch,
)
from klog.testing.kafka_tools import java_available, kafka_libs_dir

pytestmark = pytest.mark.java

REPO = Path(__file__).resolve().parent.parent
PRODUCER = {"producer_id": 4242, "producer_epoch": 7, "base_sequence": 100, "partition_leader_epoch": 3,
            "is_transactional": True}


def sample_records() -> list[dict[str, Any]]:
    out = []
    for i in range(50):
        kind = i % 5
        key = None if kind == 0 else b"" if kind == 1 else b"key-%d" % (i % 7)
        value = None if kind == 2 else b"" if kind == 3 else b"value-%d|" % i * (1 + i % 9)
        headers = [("trace", b"\x00\xff" * (i % 3)), ("nullable", None), ("ünï", b"")][: i % 4]
        out.append({"key": key, "value": value, "timestamp": 1_700_000_000_000 + 13 * i - 40 * (i % 4),
                    "headers": headers})
    return out


def _hex(b: bytes | None) -> str:
    return "-" if b is None else b.hex()


def _line(ts: int, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]) -> str:
    hs = ",".join(f"{k.encode().hex()}={_hex(v)}" for k, v in headers)
    return f"{ts}\t{_hex(key)}\t{_hex(value)}\t{hs}"


RECORDS = sample_records()
KLOG_BATCHES = {
    **{codec: encode_batch(RECORDS, compression=codec, base_offset=500, **PRODUCER) for codec in COMPRESSION_TYPES},
    # Several batches back to back, the last a transaction marker.
    "multi": encode_batch(RECORDS[:10], base_offset=0, compression="lz4")
    + encode_batch(RECORDS[10:], base_offset=10, compression="zstd")
    + encode_control_batch(CONTROL_TYPE_COMMIT, producer_id=4242, producer_epoch=7, coordinator_epoch=11,
                           base_offset=50, timestamp=1_700_000_000_000),
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    libs = kafka_libs_dir(REPO)
    if libs is None or not java_available():
        pytest.fail("Apache Kafka jars or java not found: run `bash tools/install-peers.sh`")
    d = tmp_path_factory.mktemp("java-records")
    (d / "records.txt").write_text("".join(_line(r["timestamp"], r["key"], r["value"], r["headers"]) + "\n"
                                          for r in RECORDS))
    for name, data in KLOG_BATCHES.items():
        (d / f"klog-{name}.bin").write_bytes(data)
    proc = subprocess.run(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", os.path.join(libs, "*"),
         str(REPO / "tests" / "java" / "RecordBatchOracle.java"), str(d)],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return d


@pytest.mark.parametrize("codec", COMPRESSION_TYPES)
def test_batches_built_by_kafka_decode_identically(oracle: Path, codec: str) -> None:
    data = (oracle / f"java-{codec}.bin").read_bytes()
    if codec == "snappy":
        assert data[61:69] == b"\x82SNAPPY\x00"  # Java writes xerial framing
    [b] = decode_batches(data)
    assert b.compression == codec
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch) == (
        500, 4242, 7, 100, 3)
    assert b.is_transactional and not b.is_control
    assert b.base_timestamp == RECORDS[0]["timestamp"]
    assert b.max_timestamp == max(r["timestamp"] for r in RECORDS)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records]
    assert got == [(500 + i, r["timestamp"], r["key"], r["value"], r["headers"]) for i, r in enumerate(RECORDS)]
    assert decode_to_arrow(data).column("value").to_pylist() == [r["value"] for r in RECORDS]


def test_uncompressed_batches_are_byte_identical_to_kafkas(oracle: Path) -> None:
    assert (oracle / "java-none.bin").read_bytes() == KLOG_BATCHES["none"]


def test_transaction_markers_are_byte_identical_to_kafkas(oracle: Path) -> None:
    java = (oracle / "java-control.bin").read_bytes()
    ours = encode_control_batch(CONTROL_TYPE_COMMIT, producer_id=4242, producer_epoch=7, coordinator_epoch=11,
                                base_offset=900, partition_leader_epoch=3, timestamp=1_700_000_000_000)
    assert ours == java
    [b] = decode_batches(java)
    assert b.is_control and b.control_type == CONTROL_TYPE_COMMIT


@pytest.mark.parametrize("name", sorted(KLOG_BATCHES))
def test_kafka_validates_and_reads_batches_klog_encodes(oracle: Path, name: str) -> None:
    lines = (oracle / f"klog-{name}.txt").read_text().splitlines()
    batches = [line.split("\t") for line in lines if line.startswith("batch\t")]
    records = [line for line in lines if not line.startswith("batch\t")]
    ours = decode_batches(KLOG_BATCHES[name])
    assert len(batches) == len(ours)
    for fields, b in zip(batches, ours):
        assert fields[1:] == [str(b.base_offset), str(b.last_offset), b.compression, str(b.producer_id),
                              str(b.producer_epoch), str(b.base_sequence), str(b.is_transactional).lower(),
                              str(b.is_control).lower(), str(b.partition_leader_epoch)]
    expected = [f"{r.offset}\t{_line(r.timestamp, r.key, r.value, r.headers)}" for b in ours for r in b.records]
    assert records == expected

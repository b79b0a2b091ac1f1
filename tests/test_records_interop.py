"""klog's codec against independent implementations: kafka-python's and aiokafka's record
batch builders and readers, the ``crc32c`` package, and raw snappy as librdkafka writes it."""

from __future__ import annotations

import os
import random
import struct
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioReader
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpReader
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from klog.records import COMPRESSION_TYPES, crc32c, decode_batches, decode_to_arrow, encode_batch

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BUILDERS = {"kafka-python": KpBuilder, "aiokafka": AioBuilder}
READERS = {"kafka-python": KpReader, "aiokafka": AioReader}


def sample_records(seed: int, n: int = 60) -> list[dict[str, Any]]:
    """Compressible records covering null/empty keys, values and header values."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 5
        key = None if kind == 0 else b"" if kind == 1 else f"key-{i % 7}".encode()
        value = None if kind == 2 else b"" if kind == 3 else (b"value-%d-" % i) * rng.randrange(1, 20)
        headers = [("trace-id", b"abc" * (i % 3)), ("nullable", None), ("ünïcode-kéy", b"")][: i % 4]
        out.append({"key": key, "value": value, "timestamp": 1_700_000_000_000 + i * 7 - (i % 3) * 50, "headers": headers})
    return out


def build_with(library: str, records: list[dict[str, Any]], codec: str, **kw: Any) -> bytes:
    builder = BUILDERS[library](
        magic=2,
        compression_type=CODEC_IDS[codec],
        is_transactional=kw.get("is_transactional", False),
        producer_id=kw.get("producer_id", -1),
        producer_epoch=kw.get("producer_epoch", -1),
        base_sequence=kw.get("base_sequence", -1),
        batch_size=1 << 22,
    )
    for i, r in enumerate(records):
        assert builder.append(i, timestamp=r["timestamp"], key=r["key"], value=r["value"], headers=r["headers"]) is not None
    return bytes(builder.build())


def as_tuples(records: Any) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


def expected(records: list[dict[str, Any]], base_offset: int = 0) -> list[tuple[Any, ...]]:
    return [(base_offset + i, r["timestamp"], r["key"], r["value"], list(r["headers"])) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", COMPRESSION_TYPES)
@pytest.mark.parametrize("library", sorted(BUILDERS))
def test_batches_built_by_other_clients_decode_identically(library: str, codec: str) -> None:
    records = sample_records(seed=len(codec))
    data = build_with(library, records, codec, producer_id=4242, producer_epoch=7, base_sequence=100)
    [batch] = decode_batches(data)
    # The builders silently fall back to no compression when it does not help: make sure it did.
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 100)
    assert batch.records_count == len(records) == batch.last_offset_delta + 1
    assert batch.base_timestamp == records[0]["timestamp"]
    assert batch.max_timestamp == max(r["timestamp"] for r in records)
    assert as_tuples(batch.records) == expected(records)
    # ...and the same as the builder library's own reader sees it.
    assert as_tuples(batch.records) == as_tuples(READERS[library](data))
    # The columnar path agrees too.
    rows = decode_to_arrow(data).to_pylist()
    assert [(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]]) for r in rows] == [
        (r["key"], r["value"], r["headers"]) for r in records
    ]


@pytest.mark.parametrize("codec", COMPRESSION_TYPES)
@pytest.mark.parametrize("library", sorted(READERS))
def test_batches_klog_encodes_are_read_by_other_clients(library: str, codec: str) -> None:
    records = sample_records(seed=10 + len(codec))
    data = encode_batch(
        records,
        compression=codec,
        base_offset=1000,
        producer_id=99,
        producer_epoch=1,
        base_sequence=5,
        is_transactional=True,
        partition_leader_epoch=3,
    )
    reader = READERS[library](data)
    assert reader.validate_crc()
    assert reader.compression_type == CODEC_IDS[codec]
    assert reader.is_transactional
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (99, 1, 5)
    assert reader.base_offset == 1000
    assert as_tuples(reader) == expected(records, base_offset=1000)


@pytest.mark.parametrize("library", sorted(BUILDERS))
def test_klog_batches_are_byte_identical_to_other_clients_when_uncompressed(library: str) -> None:
    # Same records, same producer fields: the wire bytes (CRC included) must be equal, except
    # the partition leader epoch (broker-owned, outside the CRC), which kafka-python sets to 0.
    records = sample_records(seed=3)
    theirs = build_with(library, records, "none")
    ours = encode_batch(records, compression="none")
    assert len(ours) == len(theirs)
    assert ours[:12] == theirs[:12]
    assert ours[16:] == theirs[16:]


def test_raw_snappy_as_librdkafka_writes_it_is_read() -> None:
    import snappy

    records = sample_records(seed=5)
    plain = bytearray(encode_batch(records))
    raw = snappy.compress(bytes(plain[61:]))
    batch = plain[:61] + raw
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, CODEC_IDS["snappy"])
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    [b] = decode_batches(bytes(batch))
    assert b.compression == "snappy"
    assert as_tuples(b.records) == expected(records)


def test_xerial_snappy_klog_writes_is_read_by_python_snappy_stream_decoder() -> None:
    from kafka.codec import snappy_decode

    records = sample_records(seed=6)
    data = encode_batch(records, compression="snappy")
    assert data[61:69] == b"\x82SNAPPY\x00"
    assert snappy_decode(data[61:]) == encode_batch(records)[61:]


def test_lz4_and_zstd_sections_are_standard_frames() -> None:
    import lz4.frame
    import zstandard

    records = sample_records(seed=8)
    plain = encode_batch(records)[61:]
    assert lz4.frame.decompress(encode_batch(records, compression="lz4")[61:]) == plain
    assert zstandard.ZstdDecompressor().decompressobj().decompress(encode_batch(records, compression="zstd")[61:]) == plain
    import gzip

    assert gzip.decompress(encode_batch(records, compression="gzip")[61:]) == plain


def test_crc32c_equals_the_crc32c_package_on_random_data() -> None:
    import crc32c as crc32c_pkg

    rng = random.Random(11)
    for _ in range(300):
        data = rng.randbytes(rng.choice([rng.randrange(0, 64), rng.randrange(0, 5000), rng.randrange(0, 300_000)]))
        assert crc32c(data) == crc32c_pkg.crc32c(data)
    big = os.urandom(3 << 20)
    assert crc32c(big) == crc32c_pkg.crc32c(big)

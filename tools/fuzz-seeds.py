"""Write the seed inputs of the cargo-fuzz targets (rust/klog-core/fuzz/seeds/<target>/): real batches of
every codec, keyed and keyless, with and without headers, each behind the targets' one leading mode byte.

    .venv/bin/python tools/fuzz-seeds.py
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

import cramjam

from klog.records import encode_batch

SEEDS = Path(__file__).resolve().parent.parent / "rust" / "klog-core" / "fuzz" / "seeds"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
NOW = 1_700_000_000_000


def batches() -> list[bytes]:
    out = []
    for codec in CODECS:
        for n in (1, 3, 20):
            records = [{"key": b"k%d" % i if i % 3 else None, "value": b"v" * (i % 5), "timestamp": NOW + i,
                        "headers": [("h", b"x")] if i % 2 else []} for i in range(n)]
            out.append(bytes(encode_batch(records, compression=codec)))
    return out


def as_raw_snappy(batch: bytes) -> bytes:
    """An uncompressed batch re-framed as librdkafka writes snappy: one raw block, no xerial header (the targets
    re-seal the CRC)."""
    body = bytes(cramjam.snappy.compress_raw(batch[61:]))
    attributes = struct.unpack_from(">h", batch, 21)[0] | 2
    header = bytearray(batch[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    struct.pack_into(">h", header, 21, attributes)
    return bytes(header) + body


def more_batches() -> list[bytes]:
    """Snappy as librdkafka writes it (raw), and xerial framing of several blocks (over 32 KiB of records)."""
    small = [bytes(encode_batch([{"key": b"k%d" % i, "value": b"v", "timestamp": NOW + i} for i in range(n)]))
             for n in (1, 3, 20)]
    large = bytes(encode_batch([{"key": b"k%d" % (i % 10), "value": bytes(40), "timestamp": NOW} for i in range(800)],
                               compression="snappy"))
    assert len(large) < 8000 and xerial_blocks(large[61:]) >= 2  # within the fuzzers' -max_len
    return [as_raw_snappy(b) for b in small] + [large]


def xerial_blocks(body: bytes) -> int:
    pos, blocks = 16, 0
    while pos < len(body):
        pos += 4 + struct.unpack_from(">i", body, pos)[0]
        blocks += 1
    return blocks


def write(target: str, inputs: list[bytes]) -> None:
    directory = SEEDS / target
    directory.mkdir(parents=True, exist_ok=True)
    for data in inputs:
        (directory / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def main() -> int:
    framed = batches()
    snappy = more_batches()
    # mode byte 0 (CRC re-sealed, plain policy) and 6 (compacted, CreateTime bounds)
    write("validate_produce", [bytes([mode]) + b for b in framed + snappy for mode in (0, 6)])
    write("decode_batches", [b"\x00" + b for b in framed] + [b"\x00" + framed[0] + framed[5]])
    write("decode_columns", [b"\x00" + b for b in framed])
    write("prepare_append", [bytes([mode]) + b for b in framed[:3] for mode in (0, 2)])
    write("decompress", [bytes([codec_byte]) + b[61:] for b in framed + snappy
                         for codec_byte in range(4) if b[22] & 7 == (1, 2, 3, 4)[codec_byte]])
    return 0


if __name__ == "__main__":
    sys.exit(main())

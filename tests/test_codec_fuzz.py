"""Property tests: mutated, truncated or random input never crashes, hangs or panics; it is either
decoded or rejected with a CorruptRecordError naming the field and the byte offset."""

from __future__ import annotations

import re
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klog._native import CorruptRecordError
from klog.records import COMPRESSION_TYPES, crc32c, decode_batches, decode_columns, encode_batch

# Every CodecError message has one of these shapes: a field and "at byte N".
ERROR_SHAPE = re.compile(
    r"^(truncated|invalid) [a-z_.]+ at byte \d+: "
    r"|^CRC mismatch in batch at byte \d+: "
    r"|^(gzip|snappy|lz4|zstd) decompression failed for batch at byte \d+: "
)

maybe_bytes = st.none() | st.binary(max_size=60)
records_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "key": maybe_bytes,
            "value": maybe_bytes,
            "timestamp": st.integers(-(2**40), 2**42),
            "headers": st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3),
        }
    ),
    min_size=1,
    max_size=12,
)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Bytes outside the CRC that a decoder cannot validate: base offset and partition leader epoch.
UNCHECKED = set(range(0, 8)) | set(range(12, 16))


def decode_both(data: bytes) -> tuple[object, object]:
    """Decode with both decoders; return each result or the error message."""
    results: list[object] = []
    for fn in (decode_batches, decode_columns):
        try:
            out = fn(data)
            if isinstance(out, list):  # rows as the columnar decoder counts them: no control records
                results.append(sum(len(b.records) for b in out if not b.is_control))
            else:
                results.append(out.num_rows)
        except CorruptRecordError as e:
            assert isinstance(e, ValueError)
            assert ERROR_SHAPE.match(str(e)), str(e)
            offsets = [int(m) for m in re.findall(r"at byte (\d+)", str(e))]
            assert offsets and offsets[0] <= len(data), str(e)
            results.append(str(e))
    return results[0], results[1]


@FUZZ
@given(
    records=records_strategy,
    codec=st.sampled_from(COMPRESSION_TYPES),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_mutated_batches_are_rejected_with_field_and_offset(records, codec, flips) -> None:
    good = encode_batch(records, compression=codec)
    data = bytearray(good)
    for pos, x in flips:
        data[pos % len(data)] ^= x
    touched = {i for i in range(len(data)) if data[i] != good[i]}
    objects, columns = decode_both(bytes(data))
    if touched <= UNCHECKED:
        # Only broker-owned fields changed (or the flips cancelled out): still a valid batch.
        assert objects == columns == len(records)
    else:
        assert isinstance(objects, str), f"mutation at {sorted(touched)} was not detected"
        assert objects == columns


@FUZZ
@given(
    records=records_strategy,
    codec=st.sampled_from(COMPRESSION_TYPES),
    flips=st.lists(st.tuples(st.integers(21, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_mutations_behind_a_valid_crc_never_crash(records, codec, flips) -> None:
    # Recompute the CRC so that the mutation reaches the record parser and the decompressors.
    data = bytearray(encode_batch(records, compression=codec))
    for pos, x in flips:
        data[21 + pos % (len(data) - 21)] ^= x
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    objects, columns = decode_both(bytes(data))
    assert objects == columns or (isinstance(objects, str) and isinstance(columns, str))


@FUZZ
@given(records=records_strategy, codec=st.sampled_from(COMPRESSION_TYPES), cut=st.integers(1, 10**6), repeat=st.integers(1, 3))
def test_truncated_buffers_error_in_strict_mode_and_are_ignored_in_fetch_mode(records, codec, cut, repeat) -> None:
    one = encode_batch(records, compression=codec)
    data = one * repeat
    cut = cut % (len(data) - 1) + 1
    truncated = data[:cut]
    whole = cut // len(one)
    if cut % len(one) == 0:
        assert len(decode_batches(truncated)) == whole
    else:
        objects, columns = decode_both(truncated)
        assert isinstance(objects, str) and objects == columns
        assert str(whole * len(one)) in objects  # the error names where the partial batch starts
    assert len(decode_batches(truncated, allow_partial_trailing=True)) == whole


@FUZZ
@given(data=st.binary(min_size=1, max_size=400))
def test_random_bytes_never_crash(data: bytes) -> None:
    objects, columns = decode_both(data)
    assert isinstance(objects, str) and isinstance(columns, str)


@FUZZ
@given(data=st.binary(min_size=0, max_size=300), codec=st.sampled_from(COMPRESSION_TYPES[1:]))
def test_random_compressed_sections_never_crash(data: bytes, codec: str) -> None:
    batch = bytearray(encode_batch([{"value": b"x", "timestamp": 0}]))[:61] + data
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, COMPRESSION_TYPES.index(codec))
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    decode_both(bytes(batch))

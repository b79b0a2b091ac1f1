"""Round trips, headers, framing and error reporting of the sans-IO protocol codec (klog.protocol)."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest

from klog.protocol import (
    API_SCHEMAS,
    ApiKey,
    EncodeError,
    FileRegion,
    BufferedFrameReader,
    FrameBufferPool,
    FrameReader,
    FrameTooLarge,
    ProtocolError,
    Struct,
    UnknownApiKey,
    UnsupportedVersion,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    errors,
    versions,
)
from klog.protocol.framing import HEAD_WINDOW_BYTES, SharedReadBuffer
from klog.protocol.samples import expected_decoded, plain, sample_struct

ALL_VERSIONS = [(k, v) for k, s in sorted(API_SCHEMAS.items()) for v in range(s.valid[0], s.valid[1] + 1)]


def _ids(kv: tuple[int, int]) -> str:
    return f"{API_SCHEMAS[kv[0]].name}-v{kv[1]}"


def _join(chunks: list) -> bytes:
    out = []
    for c in chunks:
        assert not isinstance(c, FileRegion)
        out.append(bytes(c))
    return b"".join(out)


# --------------------------------------------------------------------------------------------------------------
# Schema coverage


def test_every_contracted_api_has_at_least_the_required_versions() -> None:
    required_max = {
        ApiKey.PRODUCE: 13, ApiKey.FETCH: 17, ApiKey.LIST_OFFSETS: 10, ApiKey.METADATA: 13,
        ApiKey.API_VERSIONS: 4, ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9, ApiKey.JOIN_GROUP: 9,
        ApiKey.SYNC_GROUP: 5, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 5, ApiKey.FIND_COORDINATOR: 6,
        ApiKey.CREATE_TOPICS: 7, ApiKey.DELETE_TOPICS: 6, ApiKey.DESCRIBE_CONFIGS: 4, ApiKey.INIT_PRODUCER_ID: 5,
    }
    for key, top in required_max.items():
        assert versions(key)[1] >= top, key
    # Old versions that real clients still send must be decodable.
    for key in (ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.API_VERSIONS,
                ApiKey.INIT_PRODUCER_ID, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_COMMIT):
        assert versions(key)[0] == 0, key


def test_flexible_versions_start_where_kafka_says() -> None:
    first_flexible = {
        ApiKey.PRODUCE: 9, ApiKey.FETCH: 12, ApiKey.LIST_OFFSETS: 6, ApiKey.METADATA: 9, ApiKey.OFFSET_COMMIT: 8,
        ApiKey.OFFSET_FETCH: 6, ApiKey.FIND_COORDINATOR: 3, ApiKey.JOIN_GROUP: 6, ApiKey.SYNC_GROUP: 4,
        ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 4, ApiKey.CREATE_TOPICS: 5, ApiKey.DELETE_TOPICS: 4,
        ApiKey.INIT_PRODUCER_ID: 2, ApiKey.API_VERSIONS: 3, ApiKey.DESCRIBE_CONFIGS: 4,
    }
    for key, v in first_flexible.items():
        s = API_SCHEMAS[key]
        assert not s.is_flexible(v - 1) and s.is_flexible(v), key


def test_unknown_api_and_version_are_reported() -> None:
    with pytest.raises(UnknownApiKey):
        versions(9999)
    frame = encode_request(ApiKey.METADATA, 1, 5, "c", {"topics": None})[4:]
    header, off = decode_request_header(frame)
    header.api_version = 99
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(header, frame, off)
    assert info.value.api_key == ApiKey.METADATA and info.value.api_version == 99
    with pytest.raises(UnknownApiKey):
        encode_response(1234, 0, 1, {})


# --------------------------------------------------------------------------------------------------------------
# Round trips of every API at every version


@pytest.mark.parametrize("api_version", ALL_VERSIONS, ids=_ids)
def test_request_round_trips_at_every_version(api_version: tuple[int, int]) -> None:
    key, version = api_version
    s = API_SCHEMAS[key]
    rng = random.Random(f"req-{key}-{version}")
    for _ in range(6):
        body = sample_struct(s.request.fields, version, s.is_flexible(version), rng)
        frame = encode_request(key, version, 0x1234, "klog-ü", body)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        header, off = decode_request_header(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            key, version, 0x1234, "klog-ü")
        decoded = decode_request(header, frame[4:], off)
        assert plain(decoded) == expected_decoded(s.request.fields, version, body)
        # Re-encoding the decoded object gives the same bytes.
        assert encode_request(key, version, 0x1234, "klog-ü", decoded) == frame


@pytest.mark.parametrize("api_version", ALL_VERSIONS, ids=_ids)
def test_response_round_trips_at_every_version(api_version: tuple[int, int]) -> None:
    key, version = api_version
    s = API_SCHEMAS[key]
    rng = random.Random(f"resp-{key}-{version}")
    for _ in range(6):
        body = sample_struct(s.response.fields, version, s.is_flexible(version), rng)
        frame = _join(encode_response(key, version, 77, body))
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        cid, decoded = decode_response(key, version, frame[4:])
        assert cid == 77
        assert plain(decoded) == expected_decoded(s.response.fields, version, body)
        assert _join(encode_response(key, version, 77, decoded)) == frame


def test_encoder_accepts_dicts_plain_objects_and_omitted_fields() -> None:
    class Partition:
        def __init__(self) -> None:
            self.partition_index = 3
            self.error_code = 0
            self.high_watermark = 10
            self.records = b"abc"

    body = {"responses": [{"topic": "t", "partitions": [Partition()]}]}
    cid, decoded = decode_response(ApiKey.FETCH, 11, _join(encode_response(ApiKey.FETCH, 11, 1, body))[4:])
    p = decoded.responses[0].partitions[0]
    assert (p.partition_index, p.high_watermark, bytes(p.records)) == (3, 10, b"abc")
    # Omitted fields take the schema defaults.
    assert (p.last_stable_offset, p.log_start_offset, p.preferred_read_replica) == (-1, -1, -1)
    assert p.aborted_transactions == [] and decoded.session_id == 0 and decoded.throttle_time_ms == 0


def test_fields_absent_from_the_decoded_version_hold_defaults() -> None:
    frame = encode_request(ApiKey.FETCH, 4, 1, "c", {"max_wait_ms": 500, "min_bytes": 1, "topics": []})[4:]
    header, off = decode_request_header(frame)
    req = decode_request(header, frame, off)
    assert req.session_id == 0 and req.session_epoch == -1 and req.rack_id == "" and req.cluster_id is None
    assert req.max_bytes == 0x7FFFFFFF and req.replica_id == -1 and req.forgotten_topics_data == []
    assert req.replica_state == Struct(replica_id=-1, replica_epoch=-1)


def test_tagged_fields_are_written_only_when_not_default_and_read_back() -> None:
    base = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b""}]}]}
    plain_frame = _join(encode_response(ApiKey.FETCH, 12, 1, base))
    tagged = {"responses": [{"topic": "t", "partitions": [{
        "partition_index": 0, "records": b"", "current_leader": {"leader_id": 4, "leader_epoch": 9},
        "diverging_epoch": Struct(epoch=-1, end_offset=-1)}]}]}
    tagged_frame = _join(encode_response(ApiKey.FETCH, 12, 1, tagged))
    # Only current_leader differs from its default: tag 1, 8 bytes + its own empty tag section.
    assert len(tagged_frame) == len(plain_frame) + 1 + 1 + 9
    _, decoded = decode_response(ApiKey.FETCH, 12, tagged_frame[4:])
    p = decoded.responses[0].partitions[0]
    assert p.current_leader == Struct(leader_id=4, leader_epoch=9)
    assert p.diverging_epoch == Struct(epoch=-1, end_offset=-1)


def test_tagged_nulls_are_written_where_the_default_is_not_null_with_kafkas_markers() -> None:
    # Kafka marks a null or present tagged struct with an unsigned varint 0 / 1 (an untagged one with int8 -1 / 1),
    # and writes a tagged null whenever the schema's default is not null.
    from klog.protocol.data import DataSchema, decode_data, encode_data
    from klog.protocol.schema import MessageSchema, build_fields

    fields = build_fields((
        ('meta', 'Meta', '0+', {'nullable': '0+', 'tag': 0}, (('timeout', 'int32', '0+'),)),
        ('epochs', '[]int32', '0+', {'nullable': '0+', 'tag': 1}),
        ('plain', 'Plain', '0+', {'nullable': '0+'}, (('timeout', 'int32', '0+'),)),
    ))
    schema = DataSchema(-1, MessageSchema("TaggedNulls", (0, 0), (0, 0), fields))
    nulls = {"meta": None, "epochs": None, "plain": None}
    assert encode_data(schema, 0, nulls) == bytes([0xFF, 2, 0, 1, 0, 1, 1, 0])
    assert decode_data(schema, 0, encode_data(schema, 0, nulls))[0] == Struct(**nulls)
    present = {"meta": {"timeout": 7}, "epochs": [], "plain": {"timeout": 7}}
    assert encode_data(schema, 0, present) == bytes([1, 0, 0, 0, 7, 0, 1, 0, 6, 1, 0, 0, 0, 7, 0])
    defaults = decode_data(schema, 0, encode_data(schema, 0, {"plain": None}))[0]
    assert defaults == Struct(meta=Struct(timeout=0), epochs=[], plain=None)


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    body = Struct(error_code=0, api_keys=[], throttle_time_ms=0, _unknown_tags={7: b"hello", 99: b""})
    frame = _join(encode_response(ApiKey.API_VERSIONS, 3, 1, body))
    _, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert decoded._unknown_tags == {7: b"hello", 99: b""}
    assert _join(encode_response(ApiKey.API_VERSIONS, 3, 1, decoded)) == frame


def test_unicode_strings_round_trip() -> None:
    name = "tópico-日本-\U0001f680"
    frame = encode_request(ApiKey.CREATE_TOPICS, 5, 1, "ü", {"topics": [{"name": name, "num_partitions": 3,
                                                                         "replication_factor": 1}]})[4:]
    header, off = decode_request_header(frame)
    req = decode_request(header, frame, off)
    assert req.topics[0].name == name and header.client_id == "ü"


# --------------------------------------------------------------------------------------------------------------
# Records: zero-copy decode, chunked encode


def test_produce_records_decode_as_views_of_the_input() -> None:
    batch = bytes(range(256)) * 20
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "p", {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
    buf = memoryview(frame)[4:]
    header, off = decode_request_header(buf)
    req = decode_request(header, buf, off)
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and records.tobytes() == batch


def test_produce_request_with_large_records_of_every_buffer_type_has_the_right_size_prefix() -> None:
    big = [bytes([i]) * (5000 + i) for i in range(3)]
    records = [big[0], bytearray(big[1]), memoryview(big[2]), b"small"]
    for version in (3, 9):
        frame = encode_request(ApiKey.PRODUCE, version, 7, "p", {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": r} for i, r in enumerate(records)]}]})
        assert isinstance(frame, bytes) and struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        header, off = decode_request_header(memoryview(frame)[4:])
        req = decode_request(header, memoryview(frame)[4:], off)
        assert header.correlation_id == 7
        assert [bytes(p.records) for p in req.topic_data[0].partition_data] == [*big, b"small"]


def test_fetch_response_emits_file_regions_and_large_records_as_separate_chunks() -> None:
    region = FileRegion(fd=5, position=4096, length=70000)
    big = b"B" * 10000
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": region},
        {"partition_index": 1, "records": big},
        {"partition_index": 2, "records": b"small"},
        {"partition_index": 3, "records": [FileRegion(5, 0, 10), FileRegion(6, 0, 20)]},
        {"partition_index": 4, "records": None},
    ]}]}
    for version in (4, 11, 12, 16):
        chunks = encode_response(ApiKey.FETCH, version, 3, body)
        assert len(chunks[0]) == 4
        total = sum(c.length if isinstance(c, FileRegion) else len(c) for c in chunks[1:])
        assert struct.unpack(">i", chunks[0])[0] == total
        assert region in chunks and FileRegion(6, 0, 20) in chunks
        assert any(c is big for c in chunks)
        # Replace the regions by the bytes a sendfile would send and decode.
        fake = b"".join(b"F" * c.length if isinstance(c, FileRegion) else bytes(c) for c in chunks)
        _, decoded = decode_response(ApiKey.FETCH, version, fake[4:])
        parts = decoded.responses[0].partitions
        assert [p.partition_index for p in parts] == [0, 1, 2, 3, 4]
        assert bytes(parts[0].records) == b"F" * 70000 and bytes(parts[1].records) == big
        assert bytes(parts[2].records) == b"small" and bytes(parts[3].records) == b"F" * 30
        assert parts[4].records is None


def test_file_regions_are_refused_in_requests() -> None:
    with pytest.raises(EncodeError):
        encode_request(ApiKey.PRODUCE, 3, 1, "c", {"topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": FileRegion(1, 0, 10000)}]}]})


# --------------------------------------------------------------------------------------------------------------
# Headers


def test_request_header_version_follows_flexible_versions() -> None:
    for key, version in ALL_VERSIONS:
        frame = encode_request(key, version, 1, None, {})[4:]
        header, off = decode_request_header(frame)
        flexible = API_SCHEMAS[key].is_flexible(version)
        assert header.header_version == (2 if flexible else 1)
        assert off == 10 + (1 if flexible else 0)  # null client_id, then the empty tag section
        assert header.client_id is None


def test_api_versions_response_always_uses_header_v0() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    for version in range(0, 5):
        frame = _join(encode_response(ApiKey.API_VERSIONS, version, 0x01020304, body))
        assert frame[4:8] == b"\x01\x02\x03\x04"
        # Body starts right after the correlation id: error_code int16 = 0.
        assert frame[8:10] == b"\x00\x00"
        assert decode_response(ApiKey.API_VERSIONS, version, frame[4:])[1].api_keys[0].max_version == 4


def test_flexible_responses_use_header_v1() -> None:
    frame = _join(encode_response(ApiKey.METADATA, 9, 5, {}))
    assert frame[4:9] == b"\x00\x00\x00\x05\x00"  # correlation id + empty tagged fields
    frame = _join(encode_response(ApiKey.METADATA, 8, 5, {}))
    assert frame[4:8] == b"\x00\x00\x00\x05" and len(frame) == 8 + 4 + 4 + 2 + 4 + 4 + 4  # no tag byte


def test_too_new_api_versions_request_header_still_parses() -> None:
    # A client newer than us sends ApiVersions v9: we still read the header (as flexible v2) to answer v0.
    frame = struct.pack(">hhih", 18, 9, 42, 3) + b"cli" + b"\x00" + b"garbage"
    header, off = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 9, 42, "cli")
    assert header.header_version == 2 and off == 14
    with pytest.raises(UnsupportedVersion):
        decode_request(header, frame, off)


def test_truncated_request_headers_name_the_field() -> None:
    frame = encode_request(ApiKey.METADATA, 9, 1, "client", {"topics": None})[4:]
    expected = [(0, "request_api_key", 0), (3, "request_api_version", 2), (7, "correlation_id", 4),
                (9, "client_id", 8), (12, "client_id", 8), (16, "_tagged_fields", 16)]
    for cut, field, offset in expected:
        with pytest.raises(ProtocolError) as info:
            decode_request_header(frame[:cut])
        assert (info.value.field, info.value.offset) == (field, offset), cut


# --------------------------------------------------------------------------------------------------------------
# Malformed input


def test_truncated_bodies_raise_protocol_error_naming_field_and_offset() -> None:
    frame = encode_request(ApiKey.PRODUCE, 3, 1, "c", {"transactional_id": None, "acks": 1, "timeout_ms": 10,
                                                      "topic_data": [{"name": "tp", "partition_data": [
                                                          {"index": 7, "records": b"x" * 40}]}]})[4:]
    header, off = decode_request_header(frame)
    # Layout after the header: txn id (2), acks (2), timeout (4), topics count (4), name (2+2),
    # partitions count (4), index (4), records (4+40).
    fields = {off: "transactional_id", off + 2: "acks", off + 4: "timeout_ms", off + 8: "topic_data",
              off + 12: "topic_data[0].name", off + 16: "topic_data[0].partition_data",
              off + 20: "topic_data[0].partition_data[0].index",
              off + 24: "topic_data[0].partition_data[0].records"}
    for cut in range(off, len(frame)):
        with pytest.raises(ProtocolError) as info:
            decode_request(header, frame[:cut], off)
        err = info.value
        start = max(k for k in fields if k <= cut)
        # Cut right after an array count: the count itself claims more elements than there are bytes.
        expected = {off + 12: "topic_data", off + 20: "topic_data[0].partition_data"}.get(cut, fields[start])
        assert err.field == expected, (cut, err)
        assert err.api_key == ApiKey.PRODUCE and err.api_version == 3
        assert isinstance(err.offset, int) and off <= err.offset <= cut
        assert err.field in str(err) and f"byte offset {err.offset}" in str(err)


def test_negative_lengths_for_non_nullable_fields_are_errors() -> None:
    body = struct.pack(">hhi", -1, 1, 10) + struct.pack(">i", -1)  # topic_data = null
    frame = struct.pack(">hhih", 0, 3, 1, -1) + body
    header, off = decode_request_header(frame)
    with pytest.raises(ProtocolError) as info:
        decode_request(header, frame, off)
    assert info.value.field == "topic_data" and "not nullable" in str(info.value)


def test_huge_array_counts_fail_fast() -> None:
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1)
    header, off = decode_request_header(frame)
    with pytest.raises(ProtocolError) as info:
        decode_request(header, frame, off)
    assert info.value.field == "topics" and "exceeds" in str(info.value)


def test_invalid_utf8_is_a_protocol_error() -> None:
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">ih", 1, 2) + b"\xff\xfe"
    header, off = decode_request_header(frame)
    with pytest.raises(ProtocolError) as info:
        decode_request(header, frame, off)
    assert info.value.field == "topics[0].name" and "UTF-8" in str(info.value)


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(EncodeError) as info:
        encode_request(ApiKey.PRODUCE, 9, 1, None, {"acks": 1, "topic_data": [
            {"name": "t", "partition_data": [{"index": 2**40}]}]})
    assert info.value.field == "topic_data[0].partition_data[0].index"
    with pytest.raises(EncodeError) as info:
        encode_response(ApiKey.METADATA, 1, 1, {"topics": [{"name": None}]})
    assert info.value.field == "topics[0].name" and "null" in str(info.value)
    with pytest.raises(EncodeError) as info:
        encode_response(ApiKey.METADATA, 1, 1, {"brokers": [None]})
    assert info.value.field == "brokers[0]"


# --------------------------------------------------------------------------------------------------------------
# Framing


def test_frame_reader_splits_a_stream_in_any_chunking() -> None:
    frames = [encode_request(ApiKey.METADATA, v, i, "c", {"topics": [{"name": "t" * i}]}) for i, v in
              enumerate([1, 4, 9, 12, 0])]
    stream = b"".join(frames)
    rng = random.Random(1)
    for _ in range(50):
        reader = FrameReader(1 << 20)
        got = []
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 40)
            reader.feed(stream[pos:pos + step])
            pos += step
            got.extend(bytes(f) for f in reader)
        assert got == [f[4:] for f in frames]
        assert reader.buffered == 0


def test_frames_within_one_chunk_are_zero_copy_views() -> None:
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"de"
    reader = FrameReader(100)
    reader.feed(data)
    frames = list(reader)
    assert [bytes(f) for f in frames] == [b"abc", b"de"] and all(f.obj is data for f in frames)


def test_frame_reader_rejects_oversized_and_negative_sizes_early() -> None:
    reader = FrameReader(1000)
    reader.feed(struct.pack(">i", 1001))  # only the prefix has arrived
    with pytest.raises(FrameTooLarge) as info:
        next(iter(reader))
    assert info.value.size == 1001 and isinstance(info.value, ProtocolError)
    reader = FrameReader(1000)
    reader.feed(struct.pack(">i", -5) + b"x")
    with pytest.raises(FrameTooLarge) as info:
        list(reader)
    assert info.value.size == -5


def test_frame_reader_allows_empty_frames_and_waits_for_partial_ones() -> None:
    reader = FrameReader(10)
    reader.feed(b"\x00\x00\x00\x00\x00\x00")
    assert [bytes(f) for f in reader] == [b""]
    assert reader.pending_frame_size() is None and reader.buffered == 2
    reader.feed(b"\x00\x02a")
    assert list(reader) == [] and reader.pending_frame_size() == 2
    reader.feed(b"b")
    assert [bytes(f) for f in reader] == [b"ab"]


def _feed_buffered(reader: BufferedFrameReader, data: bytes, rng: random.Random, max_step: int) -> list[Any]:
    """Deliver ``data`` as a BufferedProtocol transport would, in reads of random size; return the frames."""
    got: list[Any] = []
    pos = 0
    while pos < len(data):
        buf = reader.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), rng.randint(1, max_step), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        reader.buffer_updated(n)
        got.extend(reader)
    return got


def test_buffered_frame_reader_splits_small_and_large_frames_in_any_chunking() -> None:
    rng = random.Random(2)
    payloads = [rng.randbytes(rng.choice([0, 1, 100, 5000, 70_000, 300_000])) for _ in range(30)]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    for max_step in (3, 4096, 100_000, 1 << 20):
        reader = BufferedFrameReader(1 << 20, read_buffer_bytes=128 * 1024, small_frame_bytes=64 * 1024)
        frames = _feed_buffered(reader, stream, rng, max_step)
        # every frame still holds its own bytes after all later ones arrived (no buffer reused under it)
        assert [bytes(f) for f in frames] == payloads
        assert reader.buffered == 0
        large = [f for f in frames if len(f) > 64 * 1024]
        assert large and all(type(f) is memoryview and f.readonly for f in large)


def test_readers_sharing_a_read_buffer_cut_their_own_streams_and_allocate_only_for_a_partial_frame() -> None:
    # connections of one event loop read into one shared buffer while they hold nothing; what a read leaves (part
    # of a frame) moves to a buffer of the reader's own before the next connection reads
    rng = random.Random(7)
    shared = SharedReadBuffer(128 * 1024)
    streams, expected = [], []
    for _ in range(5):
        payloads = [rng.randbytes(rng.choice([0, 1, 100, 5000, 70_000, 200_000])) for _ in range(20)]
        expected.append(payloads)
        streams.append(b"".join(struct.pack(">i", len(p)) + p for p in payloads))
    readers = [BufferedFrameReader(1 << 20, read_buffer_bytes=128 * 1024, small_frame_bytes=64 * 1024,
                                   shared=shared) for _ in streams]
    got: list[list[Any]] = [[] for _ in streams]
    pos = [0] * len(streams)
    while any(p < len(s) for p, s in zip(pos, streams)):
        i = rng.randrange(len(streams))
        if pos[i] == len(streams[i]):
            continue
        buf = readers[i].get_buffer()
        n = min(len(buf), rng.choice([3, 500, 4096, 100_000]), len(streams[i]) - pos[i])
        buf[:n] = streams[i][pos[i]:pos[i] + n]
        pos[i] += n
        readers[i].buffer_updated(n)
        got[i].extend(readers[i])
    assert [[bytes(f) for f in frames] for frames in got] == expected
    assert all(r.buffered == 0 for r in readers)
    # whole frames in every read: the reader never needs a buffer of its own
    idle = BufferedFrameReader(1 << 20, read_buffer_bytes=128 * 1024, small_frame_bytes=64 * 1024, shared=shared)
    for payload in (b"a" * 100, b"b" * 1000):
        frame = struct.pack(">i", len(payload)) + payload
        buf = idle.get_buffer()
        assert buf.obj is shared.view.obj
        buf[:len(frame)] = frame
        idle.buffer_updated(len(frame))
        assert [bytes(f) for f in idle] == [payload]
    # a partial frame: kept in the reader's own buffer, and the shared one's next user may overwrite its copy
    buf = idle.get_buffer()
    buf[:10] = struct.pack(">i", 100) + b"c" * 6
    idle.buffer_updated(10)
    assert list(idle) == []
    shared.view[:] = b"z" * len(shared.view)
    buf = idle.get_buffer()
    assert buf.obj is not shared.view.obj
    buf[:94] = b"c" * 94
    idle.buffer_updated(94)
    assert [bytes(f) for f in idle] == [b"c" * 100]


def test_a_large_frame_is_read_into_its_own_buffer_after_its_first_read() -> None:
    reader = BufferedFrameReader(1 << 20, read_buffer_bytes=128 * 1024, small_frame_bytes=64 * 1024)
    payload = bytes(range(256)) * 1000
    data = struct.pack(">i", len(payload)) + payload
    first = reader.get_buffer()
    first[:1000] = data[:1000]
    reader.buffer_updated(1000)
    assert reader.next_frame() is None
    rest = reader.get_buffer()
    assert len(rest) == len(payload) - 996, "the rest of the frame goes straight into a buffer sized to it"
    rest[:] = data[1000:]
    reader.buffer_updated(len(rest))
    frame = reader.next_frame()
    assert frame is not None and bytes(frame) == payload
    assert len(reader.get_buffer()) == HEAD_WINDOW_BYTES, "after a large frame only a little is read ahead"


def test_the_head_window_after_a_large_frame_outlasts_reads_that_find_nothing() -> None:
    # an event loop asks for a buffer before every read, also before one that finds the socket empty (EAGAIN):
    # the next frame's first bytes still go into the small head window, not the whole shared buffer (from which
    # they would be copied again into the next large frame's own buffer)
    reader = BufferedFrameReader(1 << 20, read_buffer_bytes=128 * 1024, small_frame_bytes=64 * 1024)
    payload = bytes(range(256)) * 1000
    data = struct.pack(">i", len(payload)) + payload
    stream = data + data
    pos = 0
    frames = []
    while pos < len(data):
        buf = reader.get_buffer()
        n = min(len(buf), len(data) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        reader.buffer_updated(n)
        while (frame := reader.next_frame()) is not None:
            frames.append(frame)
    assert [bytes(f) for f in frames] == [payload]
    for _ in range(3):   # reads that find nothing: the window stays small
        assert len(reader.get_buffer()) == HEAD_WINDOW_BYTES
    buf = reader.get_buffer()
    buf[:] = stream[pos:pos + len(buf)]
    pos += len(buf)
    reader.buffer_updated(len(buf))
    assert reader.next_frame() is None
    rest = reader.get_buffer()
    assert len(rest) == len(payload) - (HEAD_WINDOW_BYTES - 4), "only the head window was copied"
    rest[:] = stream[pos:]
    reader.buffer_updated(len(rest))
    frame = reader.next_frame()
    assert frame is not None and bytes(frame) == payload
    assert len(reader.get_buffer()) == HEAD_WINDOW_BYTES


def test_buffered_frame_reader_rejects_oversized_and_negative_sizes_before_buffering() -> None:
    for size in (1001, -5):
        reader = BufferedFrameReader(1000)
        buf = reader.get_buffer()
        buf[:4] = struct.pack(">i", size)
        reader.buffer_updated(4)
        with pytest.raises(FrameTooLarge) as info:
            reader.next_frame()
        assert info.value.size == size
    reader = BufferedFrameReader(1000)
    assert [bytes(f) for f in _feed_buffered(reader, struct.pack(">i", 1000) + b"x" * 1000, random.Random(1),
                                             300)] == [b"x" * 1000]


def test_pooled_frame_buffers_are_reused_only_when_nothing_references_them() -> None:
    pool = FrameBufferPool(max_buffers=2, max_buffer_bytes=8 << 20)
    first = pool.take(3_000_000)
    first[:] = b"a" * len(first)
    held = first.toreadonly()[10:20]  # a slice kept by a handler (records in purgatory) keeps the buffer alive
    del first
    second = pool.take(3_000_000)
    second[:] = b"b" * len(second)
    assert bytes(held) == b"a" * 10, "a buffer still referenced must not be handed out again"
    second_buffer = id(second.obj)  # an id, not a reference (which would keep it busy); the pool keeps it alive
    del second
    third = pool.take(2_500_000)  # free again and large enough: the same buffer, no new allocation
    assert id(third.obj) == second_buffer and len(third) == 2_500_000
    del third, held
    assert len(pool.take(9_000_000)) == 9_000_000  # above max_buffer_bytes: a buffer of its own, not pooled
    assert pool.pooled_bytes == 2 * (4 << 20)
    assert pool.release() == 2 * (4 << 20) and pool.pooled_bytes == 0


# --------------------------------------------------------------------------------------------------------------
# Error codes


def test_error_table_matches_known_codes_and_retriability() -> None:
    E = errors.ErrorCode
    assert (E.NONE, E.UNKNOWN_SERVER_ERROR, E.NOT_COORDINATOR, E.UNSUPPORTED_VERSION, E.UNKNOWN_TOPIC_ID) == (
        0, -1, 16, 35, 100)
    assert E.MEMBER_ID_REQUIRED == 79 and E.FENCED_INSTANCE_ID == 82 and E.INVALID_RECORD == 87
    assert errors.error_info(16).retriable and errors.error_info(3).retriable
    assert not errors.error_info(35).retriable and not errors.error_info(36).retriable
    assert sorted(errors.ERRORS) == list(range(-1, max(errors.ERRORS) + 1))


def test_exceptions_per_code_carry_code_and_message() -> None:
    err = errors.for_code(16)
    assert isinstance(err, errors.KafkaError) and type(err) is errors.NotCoordinatorError
    assert err.code == 16 and err.retriable and err.message == "This is not the correct coordinator."
    assert errors.for_code(25, "gone").message == "gone"
    assert errors.exception_class(36) is errors.TopicAlreadyExistsError
    unknown = errors.for_code(5000)
    assert type(unknown) is errors.KafkaError and unknown.code == 5000
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        raise errors.for_code(3)


def test_struct_equality_and_repr() -> None:
    a = Struct(x=1, y=[Struct(z="q")])
    assert a == Struct(x=1, y=[Struct(z="q")]) and a != Struct(x=2, y=[])
    assert repr(a) == "Struct(x=1, y=[Struct(z='q')])"
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = a.nope
    assert a.to_dict() == {"x": 1, "y": [{"z": "q"}]}
    assert Struct(u=uuid.UUID(int=0)) == Struct(u=uuid.UUID(int=0))


def test_api_versions_response_in_v0_format_is_read_when_a_higher_version_was_asked() -> None:
    # The broker did not support our v3 request and answered UNSUPPORTED_VERSION in v0 format (KIP-511).
    v0 = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    frame = _join(encode_response(ApiKey.API_VERSIONS, 0, 11, v0))
    cid, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert cid == 11 and decoded.error_code == 35 and decoded.api_keys[0].max_version == 2


def test_client_can_read_the_correlation_id_before_knowing_the_api() -> None:
    from klog.protocol import peek_correlation_id

    frame = _join(encode_response(ApiKey.HEARTBEAT, 4, 0x7ABCDEF0, {"error_code": 27}))[4:]
    assert peek_correlation_id(frame) == 0x7ABCDEF0
    assert decode_response(ApiKey.HEARTBEAT, 4, frame)[1].error_code == 27
    with pytest.raises(ProtocolError):
        peek_correlation_id(b"\x00\x01")

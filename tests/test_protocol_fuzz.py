"""Bounded fuzzing of the protocol decoders: mutated and truncated valid messages and random bytes either decode
or raise ProtocolError naming a field and a byte offset - never another exception, a hang or a huge allocation."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klog.protocol import (
    API_SCHEMAS,
    FrameReader,
    FrameTooLarge,
    ProtocolError,
    Struct,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from klog.protocol.samples import sample_struct

ALL_VERSIONS = [(k, v) for k, s in sorted(API_SCHEMAS.items()) for v in range(s.valid[0], s.valid[1] + 1)]

FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid_request(index: int, seed: int) -> bytes:
    key, version = ALL_VERSIONS[index % len(ALL_VERSIONS)]
    s = API_SCHEMAS[key]
    body = sample_struct(s.request.fields, version, s.is_flexible(version), random.Random(seed))
    return encode_request(key, version, seed, "fuzz", body)[4:]


def _valid_response(index: int, seed: int) -> tuple[int, int, bytes]:
    key, version = ALL_VERSIONS[index % len(ALL_VERSIONS)]
    s = API_SCHEMAS[key]
    body = sample_struct(s.response.fields, version, s.is_flexible(version), random.Random(seed))
    return key, version, b"".join(bytes(c) for c in encode_response(key, version, seed, body))[4:]


mutations = st.lists(
    st.tuples(st.sampled_from(["flip", "set", "cut", "insert", "delete"]), st.integers(0, 10**6),
              st.integers(0, 255)),
    min_size=1, max_size=4,
)


def _mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    b = bytearray(data)
    for op, where, value in ops:
        if not b:
            break
        i = where % len(b)
        if op == "flip":
            b[i] ^= 1 << (value % 8)
        elif op == "set":
            b[i] = value
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = bytes([value]) * (1 + value % 5)
        else:
            del b[i:i + 1 + value % 8]
    return bytes(b)


def _check_error(err: ProtocolError, length: int) -> None:
    assert err.field, err
    assert isinstance(err.offset, int) and 0 <= err.offset <= length, err


@FUZZ
@given(st.integers(0, len(ALL_VERSIONS) - 1), st.integers(0, 2**31 - 1), mutations)
def test_mutated_requests_decode_or_raise_protocol_error(index: int, seed: int,
                                                          ops: list[tuple[str, int, int]]) -> None:
    data = _mutate(_valid_request(index, seed), ops)
    try:
        header, offset = decode_request_header(data)
    except ProtocolError as err:
        _check_error(err, len(data))
        return
    try:
        body = decode_request(header, data, offset)
    except ProtocolError as err:
        if err.field is None:  # unknown API key / unsupported version: no body was read
            assert err.api_key == header.api_key
            return
        _check_error(err, len(data))
        return
    assert isinstance(body, Struct)


@FUZZ
@given(st.integers(0, len(ALL_VERSIONS) - 1), st.integers(0, 2**31 - 1), mutations)
def test_mutated_responses_decode_or_raise_protocol_error(index: int, seed: int,
                                                           ops: list[tuple[str, int, int]]) -> None:
    key, version, frame = _valid_response(index, seed)
    data = _mutate(frame, ops)
    try:
        _, body = decode_response(key, version, data)
    except ProtocolError as err:
        _check_error(err, len(data))
        return
    assert isinstance(body, Struct)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_never_escape_as_other_exceptions(data: bytes) -> None:
    try:
        header, offset = decode_request_header(data)
        decode_request(header, data, offset)
    except ProtocolError:
        pass
    for key, version in ((0, 3), (1, 12), (3, 9), (18, 3), (11, 5)):
        try:
            decode_response(key, version, data)
        except ProtocolError as err:
            _check_error(err, len(data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(1, 50), max_size=20))
def test_frame_reader_on_arbitrary_streams(data: bytes, cuts: list[int]) -> None:
    reader = FrameReader(64)
    pos = 0
    total = 0
    try:
        for step in cuts + [len(data)]:
            reader.feed(data[pos:pos + step])
            pos += step
            for frame in reader:
                assert len(frame) <= 64
                total += 4 + len(frame)
    except FrameTooLarge as err:
        assert err.size < 0 or err.size > 64
        return
    assert total + reader.buffered == min(pos, len(data))

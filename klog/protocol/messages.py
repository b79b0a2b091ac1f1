"""Request/response encoding and decoding: headers, bodies and the API registry."""

from __future__ import annotations

import struct as _struct
from enum import IntEnum
from typing import Any, Callable

from . import codegen
from .codegen import read_unknown_tags, uvarint, write_tags
from .exceptions import EncodeError, ProtocolError, UnknownApiKey, UnsupportedVersion
from .schema import ApiSchema, MessageSchema, build_fields, parse_versions
from .schemas import API_DEFINITIONS, HEADER_DEFINITIONS
from .struct import Struct


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


def _build_registry() -> dict[int, ApiSchema]:
    out: dict[int, ApiSchema] = {}
    for api_key, name, versions, flexible, request, response in API_DEFINITIONS:
        valid = parse_versions(versions)
        flex = parse_versions(flexible)
        assert valid is not None
        out[api_key] = ApiSchema(api_key, name, valid, flex, request, response)   # fields built on first use
    return out


API_SCHEMAS: dict[int, ApiSchema] = _build_registry()
assert set(API_SCHEMAS) == {k.value for k in ApiKey}, "ApiKey and schemas disagree"


def schema(api_key: int) -> ApiSchema:
    """The schema of an API; raises UnknownApiKey for keys this codec does not know."""
    try:
        return API_SCHEMAS[api_key]
    except KeyError:
        raise UnknownApiKey(f"unknown API key {api_key}", field="request_api_key") from None


def versions(api_key: int) -> tuple[int, int]:
    """(min, max) versions this codec supports for an API."""
    return schema(api_key).valid


def api_name(api_key: int) -> str:
    s = API_SCHEMAS.get(api_key)
    return s.name if s is not None else f"Unknown{api_key}"


# ---------------------------------------------------------------------------------------------------------------
# Compiled codecs, built lazily per (api, version).

_REQUEST_DECODERS: dict[tuple[int, int], Callable] = {}
_REQUEST_ENCODERS: dict[tuple[int, int], Callable] = {}
_RESPONSE_DECODERS: dict[tuple[int, int], Callable] = {}
_RESPONSE_ENCODERS: dict[tuple[int, int], Callable] = {}


def _check(api_key: int, api_version: int) -> ApiSchema:
    s = API_SCHEMAS.get(api_key)
    if s is None:
        raise UnknownApiKey(f"unknown API key {api_key}", api_key=api_key, api_version=api_version)
    if not s.valid[0] <= api_version <= s.valid[1]:
        raise UnsupportedVersion(
            f"unsupported version {api_version} (this codec has {s.valid[0]}-{s.valid[1]})",
            api_key=api_key, api_version=api_version, api_name=s.name,
        )
    return s


def _compiled(cache: dict, api_key: int, api_version: int, response: bool, encode: bool) -> Callable:
    s = _check(api_key, api_version)
    msg: MessageSchema = s.response if response else s.request
    label = f"{msg.name} v{api_version} {'encode' if encode else 'decode'}"
    fn = (codegen.compile_encoder if encode else codegen.compile_decoder)(msg, api_version, label)
    cache[(api_key, api_version)] = fn
    return fn


def request_decoder(api_key: int, api_version: int) -> Callable:
    fn = _REQUEST_DECODERS.get((api_key, api_version))
    return fn if fn is not None else _compiled(_REQUEST_DECODERS, api_key, api_version, False, False)


def request_encoder(api_key: int, api_version: int) -> Callable:
    fn = _REQUEST_ENCODERS.get((api_key, api_version))
    return fn if fn is not None else _compiled(_REQUEST_ENCODERS, api_key, api_version, False, True)


def response_decoder(api_key: int, api_version: int) -> Callable:
    fn = _RESPONSE_DECODERS.get((api_key, api_version))
    return fn if fn is not None else _compiled(_RESPONSE_DECODERS, api_key, api_version, True, False)


def response_encoder(api_key: int, api_version: int) -> Callable:
    fn = _RESPONSE_ENCODERS.get((api_key, api_version))
    return fn if fn is not None else _compiled(_RESPONSE_ENCODERS, api_key, api_version, True, True)


def precompile(api_keys: list[int] | None = None) -> None:
    """Compile every version of the given APIs (default: all) now instead of on first use."""
    for key in api_keys if api_keys is not None else list(API_SCHEMAS):
        lo, hi = API_SCHEMAS[key].valid
        for v in range(lo, hi + 1):
            request_decoder(key, v)
            request_encoder(key, v)
            response_decoder(key, v)
            response_encoder(key, v)


# ---------------------------------------------------------------------------------------------------------------
# Headers.

_REQUEST_HEADER_FIELDS = build_fields(HEADER_DEFINITIONS["RequestHeader"][2])
_RESPONSE_HEADER_FIELDS = build_fields(HEADER_DEFINITIONS["ResponseHeader"][2])
_S_HHI = _struct.Struct(">hhi")
_S_HHIH = _struct.Struct(">hhih")
_S_I = _struct.Struct(">i")
_S_II = _struct.Struct(">ii")


class RequestHeader:
    """A decoded request header. ``header_version`` is 1 (classic) or 2 (flexible, with tagged fields)."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version", "unknown_tags")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None,
                 header_version: int = 1, unknown_tags: dict[int, bytes] | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version
        self.unknown_tags = unknown_tags

    # Kafka's JSON names, for symmetry with the schema.
    @property
    def request_api_key(self) -> int:
        return self.api_key

    @property
    def request_api_version(self) -> int:
        return self.api_version

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, "
                f"header_version={self.header_version})")


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1.

    Versions above the highest we know are treated as flexible if the API is flexible at its top version
    (Kafka does the same), so a too-new ApiVersions request still parses and can get the v0 fallback answer.
    Unknown API keys get header v1.
    """
    s = API_SCHEMAS.get(api_key)
    if s is None or s.flexible is None:
        return 1
    return 2 if api_version >= s.flexible[0] else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible response versions, else 0. ApiVersions responses always use header v0 (KIP-511), so a
    client that does not know the broker's versions can still read the answer."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    s = API_SCHEMAS.get(api_key)
    if s is None:
        return 0
    return 1 if s.is_flexible(api_version) else 0


def _as_view(buf: Any) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of one frame (without its size prefix).

    Returns the header and the offset of the body. Raises ProtocolError on truncated or malformed headers.
    """
    mv = _as_view(buf)
    end = len(mv)
    if end < 10:
        for field, offset, need in (("request_api_key", 0, 2), ("request_api_version", 2, 4),
                                    ("correlation_id", 4, 8), ("client_id", 8, 10)):
            if end < need:
                raise ProtocolError(f"truncated request header ({end} bytes)", field=field, offset=offset)
    api_key, api_version, correlation_id, n = _S_HHIH.unpack_from(mv, 0)
    pos = 10
    if n < 0:
        client_id = None
    else:
        if pos + n > end:
            raise ProtocolError(f"client_id length {n} exceeds the {end - pos} remaining bytes",
                                field="client_id", offset=8)
        try:
            client_id = str(mv[pos:pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"invalid UTF-8 in client_id: {e.reason}", field="client_id", offset=pos) from None
        pos += n
    version = request_header_version(api_key, api_version)
    unknown = None
    if version >= 2:
        start = pos
        try:
            unknown, pos = read_unknown_tags(mv, pos, end)
        except (IndexError, codegen._Malformed) as e:
            reason = str(e) if isinstance(e, codegen._Malformed) else "truncated tagged fields"
            raise ProtocolError(reason, field="_tagged_fields", offset=start) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, version, unknown), pos


def decode_request(header: RequestHeader, buf: bytes | bytearray | memoryview, offset: int) -> Struct:
    """Decode a request body that starts at ``offset`` of ``buf`` (as returned by decode_request_header).

    ``records`` fields are memoryview slices of ``buf``. Raises UnsupportedVersion/UnknownApiKey for versions
    or APIs we have no schema for and ProtocolError (naming field and byte offset) for malformed bodies.
    """
    api_key = header.api_key
    api_version = header.api_version
    fn = _REQUEST_DECODERS.get((api_key, api_version))
    if fn is None:
        fn = _compiled(_REQUEST_DECODERS, api_key, api_version, False, False)
    mv = buf if type(buf) is memoryview and buf.format == "B" else _as_view(buf)
    try:
        body, _ = fn(mv, offset, len(mv))
    except Exception as e:
        raise codegen.decode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e
    return body


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """Encode a whole request frame: size prefix, header (v1 or v2) and body."""
    parts = encode_request_chunks(api_key, api_version, correlation_id, client_id, body)
    return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)


def encode_request_chunks(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                          body: Any) -> list[bytes | bytearray | memoryview]:
    """Encode a request frame as chunks to write back to back (``writelines``): large ``records`` values are
    passed through uncopied. The first chunk starts with the frame's size prefix."""
    fn = _REQUEST_ENCODERS.get((api_key, api_version))
    if fn is None:
        fn = _compiled(_REQUEST_ENCODERS, api_key, api_version, False, True)
    w = bytearray(4) + _S_HHI.pack(api_key, api_version, correlation_id)
    if client_id is None:
        w += b"\xff\xff"
    else:
        cid = client_id.encode("utf-8")
        if len(cid) > 32767:
            raise EncodeError("client_id longer than 32767 bytes", field="client_id")
        w += _struct.pack(">h", len(cid))
        w += cid
    if request_header_version(api_key, api_version) >= 2:
        w.append(0)
    chunks: list = []
    try:
        fn(body, w, chunks)
    except Exception as e:
        raise codegen.encode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e
    if not chunks:
        _S_I.pack_into(w, 0, len(w) - 4)
        return [w]
    size = -4
    for c in chunks:
        if isinstance(c, (bytes, bytearray)):
            size += len(c)
        elif isinstance(c, memoryview):
            size += c.nbytes
        else:
            raise EncodeError("file regions cannot be encoded into a request (records must be bytes)",
                              field="records", api_key=api_key, api_version=api_version)
    if w:
        chunks.append(w)
        size += len(w)
    head = bytearray(chunks[0])  # the header bytes written before the first large records value
    _S_I.pack_into(head, 0, size)
    chunks[0] = head
    return chunks


def _chunk_length(c: Any) -> int:
    if isinstance(c, memoryview):
        return c.nbytes
    if isinstance(c, (bytes, bytearray)):
        return len(c)
    return c.length


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> list:
    """Encode a whole response frame as a list of chunks: the 4-byte size prefix first, then bytes, memoryviews
    and FileRegion-like objects (from ``records`` values) in wire order. Small records are copied in; large
    ones and file regions are separate chunks, ready for ``writelines``/``sendfile``.
    """
    fn = _RESPONSE_ENCODERS.get((api_key, api_version))
    if fn is None:
        fn = _compiled(_RESPONSE_ENCODERS, api_key, api_version, True, True)
    if response_header_version(api_key, api_version) >= 1:
        w = bytearray(_S_I.pack(correlation_id))
        w.append(0)
    else:
        w = bytearray(_S_I.pack(correlation_id))
    chunks: list = []
    try:
        fn(body, w, chunks)
    except Exception as e:
        raise codegen.encode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e
    if not chunks:
        return [_S_I.pack(len(w)), bytes(w)]
    if w:
        chunks.append(bytes(w))
    size = 0
    for c in chunks:
        size += _chunk_length(c)
    if size > 0x7FFFFFFF:
        raise EncodeError(f"response of {size} bytes does not fit a Kafka frame", api_key=api_key,
                          api_version=api_version, api_name=api_name(api_key))
    chunks.insert(0, _S_I.pack(size))
    return chunks


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame (without size prefix), to find the in-flight request
    (and so the api key and version) before decoding the rest."""
    if len(frame) < 4:
        raise ProtocolError(f"truncated response header ({len(frame)} bytes)", field="correlation_id", offset=0)
    return int(_S_I.unpack_from(frame, 0)[0])


def decode_response(api_key: int, api_version: int, buf: bytes | bytearray | memoryview) -> tuple[int, Struct]:
    """Decode one response frame (without its size prefix): returns (correlation_id, body)."""
    fn = _RESPONSE_DECODERS.get((api_key, api_version))
    if fn is None:
        fn = _compiled(_RESPONSE_DECODERS, api_key, api_version, True, False)
    mv = _as_view(buf)
    end = len(mv)
    if end < 4:
        raise ProtocolError(f"truncated response header ({end} bytes)", field="correlation_id", offset=0,
                            api_key=api_key, api_version=api_version, api_name=api_name(api_key))
    (correlation_id,) = _S_I.unpack_from(mv, 0)
    pos = 4
    if response_header_version(api_key, api_version) >= 1:
        try:
            _, pos = read_unknown_tags(mv, pos, end)
        except (IndexError, codegen._Malformed) as e:
            reason = str(e) if isinstance(e, codegen._Malformed) else "truncated tagged fields"
            raise ProtocolError(reason, field="_tagged_fields", offset=4, api_key=api_key,
                                api_version=api_version, api_name=api_name(api_key)) from None
    try:
        body, _ = fn(mv, pos, end)
    except Exception as e:
        if api_key == ApiKey.API_VERSIONS and api_version > 0:
            # KIP-511: a broker that does not support our ApiVersions version answers in v0 (with
            # UNSUPPORTED_VERSION and its version ranges). Kafka's client falls back to parsing v0 the same way.
            try:
                body, _ = response_decoder(api_key, 0)(mv, pos, end)
                return correlation_id, body
            except Exception:
                pass
        raise codegen.decode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e
    return correlation_id, body


def encode_body(api_key: int, api_version: int, body: Any, *, response: bool) -> bytes:
    """Encode only a message body (no size prefix, no header); file regions are not allowed."""
    fn = response_encoder(api_key, api_version) if response else request_encoder(api_key, api_version)
    w = bytearray()
    chunks: list = []
    try:
        fn(body, w, chunks)
    except Exception as e:
        raise codegen.encode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e
    if chunks:
        return b"".join([*chunks, w])
    return bytes(w)


def decode_body(api_key: int, api_version: int, buf: bytes | bytearray | memoryview, *, response: bool,
                offset: int = 0) -> tuple[Struct, int]:
    """Decode only a message body starting at ``offset``; returns (body, end offset)."""
    fn = response_decoder(api_key, api_version) if response else request_decoder(api_key, api_version)
    mv = _as_view(buf)
    try:
        return fn(mv, offset, len(mv))  # type: ignore[no-any-return]
    except Exception as e:
        raise codegen.decode_error(e, api_key=api_key, api_version=api_version, api_name=api_name(api_key)) from e


__all__ = [
    "API_SCHEMAS", "ApiKey", "RequestHeader", "api_name", "decode_body", "decode_request",
    "decode_request_header", "decode_response", "encode_body", "encode_request", "encode_response",
    "peek_correlation_id", "precompile", "request_header_version", "response_header_version", "schema",
    "versions", "uvarint", "write_tags",
]

"""Sans-IO Kafka wire-protocol codec: bytes <-> request/response objects, no sockets, no clocks.

Shared by the broker and the Python client. Every API is declared once (:mod:`klog.protocol.schemas`, transcribed
from Apache Kafka's message definitions) and compiled per version into plain Python functions on first use.

Typical broker loop::

    reader = FrameReader(max_frame_bytes)
    reader.feed(data)
    for frame in reader:
        header, offset = decode_request_header(frame)
        request = decode_request(header, frame, offset)
        ...
        transport.writelines(encode_response(header.api_key, header.api_version, header.correlation_id, body))

Values: messages decode to :class:`Struct` objects whose attributes are Kafka's field names in snake_case (every
field of the schema; those absent from the decoded version hold their defaults). Encoders take Structs, dicts or
any object with attributes; a missing attribute means the schema default. ``None`` is written as null where the
version allows it; for a non-nullable nested struct it means "all defaults"; elsewhere it is an EncodeError
naming the field. Tagged fields are written only when they differ from their default (as Kafka does); unknown
tags read from the wire are kept in ``_unknown_tags`` and written back.

``records`` decode as zero-copy memoryview slices of the input; to encode them pass bytes, a memoryview, a
:class:`FileRegion` (or any object with ``fd``, ``position``, ``length``) or a list of those. Responses come back
as chunks (size prefix first) so file regions can be sent with ``sendfile``.

Errors: malformed input raises :class:`ProtocolError` with ``api_key``, ``api_version``, ``field`` (dotted path
with array indexes, e.g. ``topic_data[0].partition_data[3].records``) and ``offset``; unknown versions raise
:class:`UnsupportedVersion` and unknown API keys :class:`UnknownApiKey` (both ProtocolErrors). Kafka's error codes
and per-code exception classes are in :mod:`klog.protocol.errors`.
"""

from . import errors
from .exceptions import EncodeError, FrameTooLarge, ProtocolError, UnknownApiKey, UnsupportedVersion
from .framing import DEFAULT_MAX_FRAME_BYTES, BufferedFrameReader, FrameBufferPool, FrameReader
from .messages import (
    API_SCHEMAS,
    ApiKey,
    RequestHeader,
    api_name,
    decode_body,
    decode_request,
    decode_request_header,
    decode_response,
    encode_body,
    encode_request,
    encode_request_chunks,
    encode_response,
    peek_correlation_id,
    precompile,
    request_header_version,
    response_header_version,
    schema,
    versions,
)
from .schema import ApiSchema, Field, MessageSchema
from .struct import FileRegion, Struct

__all__ = [
    "API_SCHEMAS",
    "DEFAULT_MAX_FRAME_BYTES",
    "ApiKey",
    "ApiSchema",
    "EncodeError",
    "Field",
    "FileRegion",
    "BufferedFrameReader",
    "FrameBufferPool",
    "FrameReader",
    "FrameTooLarge",
    "MessageSchema",
    "ProtocolError",
    "RequestHeader",
    "Struct",
    "UnknownApiKey",
    "UnsupportedVersion",
    "api_name",
    "decode_body",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_body",
    "encode_request",
    "encode_request_chunks",
    "encode_response",
    "errors",
    "peek_correlation_id",
    "precompile",
    "request_header_version",
    "response_header_version",
    "schema",
    "versions",
]

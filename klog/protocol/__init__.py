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
"""

from . import errors
from .exceptions import EncodeError, FrameTooLarge, ProtocolError, UnknownApiKey, UnsupportedVersion
from .framing import DEFAULT_MAX_FRAME_BYTES, FrameReader
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
    encode_response,
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
    "encode_response",
    "errors",
    "precompile",
    "request_header_version",
    "response_header_version",
    "schema",
    "versions",
]

"""The embedded "consumer" protocol of classic groups: Subscription and Assignment blobs.

JoinGroup carries each member's ``ConsumerProtocolSubscription`` and SyncGroup each member's
``ConsumerProtocolAssignment`` as opaque bytes: an int16 version followed by the struct (Kafka's
``clients/src/main/resources/common/message/ConsumerProtocol{Subscription,Assignment}.json``). The schemas are
declared here in :mod:`klog.protocol`'s format and compiled by its code generator, so the bytes match Java's.
The client's consumer encodes and decodes them; the broker's classic group coordinator reads the subscribed
topics (to expire offsets of topics a group no longer reads, as Kafka does).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from . import codegen as _codegen
from .exceptions import ProtocolError
from .schema import MessageSchema, build_fields, parse_versions
from .struct import Struct

__all__ = ["Subscription", "Assignment", "encode_subscription", "decode_subscription", "encode_assignment",
           "decode_assignment"]

_SUBSCRIPTION_FIELDS = (
    ("topics", "[]string", "0+"),
    ("user_data", "bytes", "0+", {"nullable": "0+", "default": None}),
    ("owned_partitions", "[]TopicPartition", "1+", (
        ("topic", "string", "1+"),
        ("partitions", "[]int32", "1+"),
    )),
    ("generation_id", "int32", "2+", {"default": -1}),
    ("rack_id", "string", "3+", {"nullable": "3+", "default": None}),
)
_ASSIGNMENT_FIELDS = (
    ("assigned_partitions", "[]TopicPartition", "0+", (
        ("topic", "string", "0+"),
        ("partitions", "[]int32", "0+"),
    )),
    ("user_data", "bytes", "0+", {"nullable": "0+", "default": None}),
)
_MAX_VERSION = 3

_SUB_SCHEMA = MessageSchema("ConsumerProtocolSubscription", (0, _MAX_VERSION), parse_versions(None),
                            build_fields(_SUBSCRIPTION_FIELDS))
_ASSIGN_SCHEMA = MessageSchema("ConsumerProtocolAssignment", (0, _MAX_VERSION), parse_versions(None),
                               build_fields(_ASSIGNMENT_FIELDS))
_codecs: dict[tuple[str, int, str], Callable[..., Any]] = {}
_VERSION = struct.Struct(">h")


def _codec(schema: MessageSchema, version: int, direction: str) -> Callable[..., Any]:
    key = (schema.name, version, direction)
    fn = _codecs.get(key)
    if fn is None:
        label = f"{schema.name} v{version} {direction}"
        if direction == "encode":
            fn = _codegen.compile_encoder(schema, version, label)
        else:
            fn = _codegen.compile_decoder(schema, version, label)
        _codecs[key] = fn
    return fn


@dataclass
class Subscription:
    """What a member subscribes to, plus the partitions it owns (cooperative rebalancing)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = _MAX_VERSION


@dataclass
class Assignment:
    """The partitions the leader assigned to a member."""

    partitions: dict[str, list[int]]
    user_data: bytes | None = None
    version: int = _MAX_VERSION


def _encode(schema: MessageSchema, version: int, body: Any) -> bytes:
    w = bytearray(_VERSION.pack(version))
    _codec(schema, version, "encode")(body, w, [])
    return bytes(w)


def _decode(schema: MessageSchema, data: bytes | memoryview) -> tuple[int, Any]:
    mv = memoryview(data)
    if len(mv) < 2:
        raise ProtocolError(f"{schema.name} of {len(mv)} bytes has no version", field="version", offset=0)
    (version,) = _VERSION.unpack_from(mv, 0)
    if version < 0:
        raise ProtocolError(f"{schema.name} has negative version {version}", field="version", offset=0)
    # Newer versions only append fields: read them with the newest schema this client knows.
    try:
        body, _ = _codec(schema, min(version, _MAX_VERSION), "decode")(mv, 2, len(mv))
    except Exception as e:  # the generated decoder's internal errors (truncation, bad lengths)
        raise ProtocolError(f"{schema.name} v{version}: {e}", offset=None) from None
    return version, body


def encode_subscription(s: Subscription) -> bytes:
    body = Struct(
        topics=list(s.topics),
        user_data=s.user_data,
        owned_partitions=[Struct(topic=t, partitions=sorted(ps)) for t, ps in sorted(s.owned_partitions.items())],
        generation_id=s.generation_id,
        rack_id=s.rack_id,
    )
    return _encode(_SUB_SCHEMA, s.version, body)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    version, b = _decode(_SUB_SCHEMA, data)
    ud = b.user_data
    return Subscription(
        topics=list(b.topics),
        user_data=bytes(ud) if ud is not None else None,
        owned_partitions={tp.topic: list(tp.partitions) for tp in (b.owned_partitions or [])},
        generation_id=b.generation_id,
        rack_id=b.rack_id,
        version=version,
    )


def encode_assignment(a: Assignment) -> bytes:
    body = Struct(
        assigned_partitions=[Struct(topic=t, partitions=sorted(ps)) for t, ps in sorted(a.partitions.items()) if ps],
        user_data=a.user_data,
    )
    return _encode(_ASSIGN_SCHEMA, a.version, body)


def decode_assignment(data: bytes | memoryview) -> Assignment:
    if len(data) == 0:
        return Assignment({})
    version, b = _decode(_ASSIGN_SCHEMA, data)
    ud = b.user_data
    return Assignment({tp.topic: list(tp.partitions) for tp in b.assigned_partitions},
                      bytes(ud) if ud is not None else None, version)

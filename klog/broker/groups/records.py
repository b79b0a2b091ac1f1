"""Records of the ``__consumer_offsets`` topic, byte-compatible with Apache Kafka's group coordinator.

Every record's key is an int16 *record type* followed by the key struct; every value is an int16 *value
version* followed by the value struct; a null value is a tombstone (the topic is compacted). The structs are
Kafka's generated messages, declared in :mod:`klog.protocol.coordinator_record_schemas` and compiled by the
protocol codegen (:mod:`klog.protocol.data`) like every other Kafka message.

Decoded records are plain dicts keyed by Kafka's field names in snake_case (``commit_timestamp``); fields a
version lacks take Kafka's defaults. Unknown tagged fields are skipped when reading (forward compatible, as
Kafka does). Malformed bytes raise :class:`RecordFormatError` naming the record, field and byte offset; values
that cannot be encoded raise :class:`klog.protocol.EncodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from klog.protocol import ProtocolError, UnsupportedVersion
from klog.protocol.data import COORDINATOR_KEY_SCHEMAS, COORDINATOR_VALUE_SCHEMAS, DataSchema, decode_data, \
    encode_data

# Record type (the key's int16 prefix). Types 0 and 1 are both offset commits (0 is the legacy key version;
# Kafka writes 1). Share groups (KIP-932) are 10-15, streams groups (KIP-1071) 17 and 19-23; a type klog does
# not know (16, Kafka's ConsumerGroupRegularExpression) is recognised as such and skipped on load.
LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
#: the record types of share groups
SHARE_GROUP_RECORD_TYPES = frozenset((10, 11, 12, 13, 14, 15))
STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
#: the record types of streams groups
STREAMS_GROUP_RECORD_TYPES = frozenset((17, 19, 20, 21, 22, 23))


def _value_schema(record_type: int) -> DataSchema:
    # klog reads a legacy commit's value as an OffsetCommitValue (Kafka's LegacyOffsetCommitValue is its v0).
    return COORDINATOR_VALUE_SCHEMAS[OFFSET_COMMIT if record_type == LEGACY_OFFSET_COMMIT else record_type]


#: Record type -> (name, key schema, value schema).
RECORD_TYPES: dict[int, tuple[str, DataSchema, DataSchema]] = {
    t: (_value_schema(t).name.removesuffix("Value"), key_schema, _value_schema(t))
    for t, key_schema in COORDINATOR_KEY_SCHEMAS.items()
}

#: Value versions klog writes, as Kafka 4.x does (the highest non-flexible version for the classic records;
#: OffsetCommitValue v1 only when the commit carries an explicit expire timestamp).
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

# --- errors ------------------------------------------------------------------------------------------------


class RecordFormatError(ValueError):
    """Bytes of a ``__consumer_offsets`` record that do not match Kafka's layout."""

    def __init__(self, schema: str, version: int, field: str, offset: int, reason: str) -> None:
        super().__init__(f"{schema} v{version}, field {field}, byte offset {offset}: {reason}")
        self.schema = schema
        self.version = version
        self.field = field
        self.offset = offset


# --- record keys and values --------------------------------------------------------------------------------

_INT16 = struct.Struct(">h")


def encode_key(record_type: int, key: Any) -> bytes:
    """``int16 record type`` + key struct (keys are never flexible)."""
    _, key_schema, _ = _record_type(record_type)
    return _INT16.pack(record_type) + encode_data(key_schema, 0, key)


def encode_value(record_type: int, version: int, value: Any) -> bytes:
    """``int16 version`` + value struct."""
    _, _, value_schema = _record_type(record_type)
    return _INT16.pack(version) + encode_data(value_schema, version, value)


def _decode(schema: DataSchema, version: int, data: memoryview) -> dict[str, Any]:
    """``data`` decoded as ``schema`` at ``version``; trailing bytes are ignored, as Kafka reads records."""
    try:
        value, _ = decode_data(schema, version, data)
    except ProtocolError as e:
        field = e.field or ("<version>" if isinstance(e, UnsupportedVersion) else "<struct>")
        raise RecordFormatError(schema.name, version, field, e.offset or 0, e.reason) from None
    return value.to_dict()


@dataclass
class CoordinatorRecord:
    """One decoded ``__consumer_offsets`` record. ``value`` is None for a tombstone."""

    type: int
    key: dict[str, Any]
    value_version: int | None
    value: dict[str, Any] | None

    @property
    def name(self) -> str:
        return RECORD_TYPES[self.type][0]


class UnknownRecordType(RecordFormatError):
    """A record type klog does not load (Kafka's ConsumerGroupRegularExpression, 16). Loaders skip these."""


def _record_type(record_type: int) -> tuple[str, DataSchema, DataSchema]:
    try:
        return RECORD_TYPES[record_type]
    except KeyError:
        raise UnknownRecordType("CoordinatorRecord", record_type, "<key type>", 0,
                                f"unknown record type {record_type}") from None


def decode_record(key: bytes | memoryview | None, value: bytes | memoryview | None) -> CoordinatorRecord:
    """Decodes one record's key and value bytes (value None = tombstone)."""
    if key is None or len(key) < 2:
        raise RecordFormatError("CoordinatorRecord", 0, "<key type>", 0, "key shorter than its 2-byte type")
    (record_type,) = _INT16.unpack(bytes(key[:2]))
    _, key_schema, value_schema = _record_type(record_type)
    # Kafka reads keys leniently (older writers used the key version as type): trailing key bytes are ignored.
    key_obj = _decode(key_schema, 0, memoryview(key)[2:])
    if value is None:
        return CoordinatorRecord(record_type, key_obj, None, None)
    if len(value) < 2:
        raise RecordFormatError(value_schema.name, 0, "<version>", 0, "value shorter than its 2-byte version")
    (version,) = _INT16.unpack(bytes(value[:2]))
    value_obj = _decode(value_schema, version, memoryview(value)[2:])
    return CoordinatorRecord(record_type, key_obj, version, value_obj)


# --- constructors for the records the coordinator writes ----------------------------------------------------


def offset_commit_record(group: str, topic: str, partition: int, *, offset: int, leader_epoch: int,
                         metadata: str, commit_timestamp: int,
                         expire_timestamp: int | None = None) -> tuple[bytes, bytes]:
    """(key, value) of an offset commit, as Kafka writes it (value v3, or v1 with an expire timestamp)."""
    key = encode_key(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition})
    value_obj = {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
                 "commit_timestamp": commit_timestamp,
                 "expire_timestamp": -1 if expire_timestamp is None else expire_timestamp}
    version = OFFSET_COMMIT_VALUE_VERSION if expire_timestamp is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return key, encode_value(OFFSET_COMMIT, version, value_obj)


def offset_commit_tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    return encode_key(OFFSET_COMMIT, {"group": group, "topic": topic, "partition": partition}), None


def group_metadata_record(group: str, value: dict[str, Any]) -> tuple[bytes, bytes]:
    return (encode_key(GROUP_METADATA, {"group": group}),
            encode_value(GROUP_METADATA, GROUP_METADATA_VALUE_VERSION, value))


def group_metadata_tombstone(group: str) -> tuple[bytes, None]:
    return encode_key(GROUP_METADATA, {"group": group}), None


def consumer_group_record(record_type: int, key: dict[str, Any], value: Any) -> tuple[bytes, bytes | None]:
    """(key, value) of a KIP-848 consumer-group, KIP-932 share-group or KIP-1071 streams-group record (value None
    writes a tombstone)."""
    return encode_key(record_type, key), None if value is None else encode_value(record_type, 0, value)

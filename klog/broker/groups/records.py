"""Record layouts of the ``__consumer_offsets`` topic, byte-compatible with Apache Kafka's group coordinator.

Every record's key is an int16 *record type* followed by the key struct; every value is an int16 *value
version* followed by the value struct; a null value is a tombstone (the topic is compacted). The structs are
Kafka's generated messages (``group-coordinator/src/main/resources/common/message/*.json``, 4.x), encoded with
Kafka's rules: classic versions use int16-length strings, int32-length bytes and arrays; flexible versions use
compact (uvarint length + 1) strings/bytes/arrays and end every struct with a tagged-field section.

Decoded records are plain dicts keyed by Kafka's field names in snake_case (``commit_timestamp``); fields a
version lacks take Kafka's defaults. Unknown tagged fields are skipped when reading (forward compatible, as
Kafka does). Malformed bytes raise :class:`RecordFormatError` naming the record, field and byte offset.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

# --- schema model ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One field of a record struct. ``type`` is a primitive name, ``[]T`` for arrays, or a tuple of Fields
    (a struct; ``array=True`` makes it an array of that struct)."""

    name: str
    type: Any
    versions: tuple[int, int] = (0, 32767)
    nullable: tuple[int, int] | None = None
    default: Any = None
    tag: int | None = None  # tagged field number (flexible versions only)
    array: bool = False

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]


@dataclass(frozen=True)
class Schema:
    name: str
    fields: tuple[Field, ...]
    versions: tuple[int, int]
    flexible_from: int | None  # first flexible version, None = never

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


ALL = (0, 32767)
ZERO_UUID = uuid.UUID(int=0)


def _v(lo: int, hi: int = 32767) -> tuple[int, int]:
    return (lo, hi)


# --- Kafka's schemas (group coordinator 4.x) ---------------------------------------------------------------

OFFSET_COMMIT_KEY = Schema("OffsetCommitKey", (
    Field("group", "string"), Field("topic", "string"), Field("partition", "int32"),
), (0, 0), None)

OFFSET_COMMIT_VALUE = Schema("OffsetCommitValue", (
    Field("offset", "int64"),
    Field("leader_epoch", "int32", _v(3), default=-1),
    Field("metadata", "string"),
    Field("commit_timestamp", "int64"),
    Field("expire_timestamp", "int64", (1, 1), default=-1),
    Field("topic_id", "uuid", _v(4), default=ZERO_UUID, tag=0),
), (0, 4), 4)

GROUP_METADATA_KEY = Schema("GroupMetadataKey", (Field("group", "string"),), (0, 0), None)

_MEMBER_METADATA = (
    Field("member_id", "string"),
    Field("group_instance_id", "string", _v(3), nullable=_v(3), default=None),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("rebalance_timeout", "int32", _v(1), default=-1),
    Field("session_timeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
)

GROUP_METADATA_VALUE = Schema("GroupMetadataValue", (
    Field("protocol_type", "string"),
    Field("generation", "int32"),
    Field("protocol", "string", nullable=ALL),
    Field("leader", "string", nullable=ALL),
    Field("current_state_timestamp", "int64", _v(2), default=-1),
    Field("members", _MEMBER_METADATA, array=True, default=[]),
), (0, 4), 4)


def _group_key(name: str) -> Schema:
    return Schema(name, (Field("group_id", "string"),), (0, 0), None)


def _member_key(name: str) -> Schema:
    return Schema(name, (Field("group_id", "string"), Field("member_id", "string")), (0, 0), None)


CONSUMER_GROUP_METADATA_KEY = _group_key("ConsumerGroupMetadataKey")
CONSUMER_GROUP_METADATA_VALUE = Schema("ConsumerGroupMetadataValue", (
    Field("epoch", "int32"),
    Field("metadata_hash", "int64", default=0, tag=0),
), (0, 0), 0)

CONSUMER_GROUP_PARTITION_METADATA_KEY = _group_key("ConsumerGroupPartitionMetadataKey")
CONSUMER_GROUP_PARTITION_METADATA_VALUE = Schema("ConsumerGroupPartitionMetadataValue", (
    Field("topics", (
        Field("topic_id", "uuid"),
        Field("topic_name", "string"),
        Field("num_partitions", "int32"),
        Field("partition_metadata", (
            Field("partition", "int32"),
            Field("racks", "[]string"),
        ), array=True, default=[]),
    ), array=True, default=[]),
), (0, 0), 0)

CONSUMER_GROUP_MEMBER_METADATA_KEY = _member_key("ConsumerGroupMemberMetadataKey")
CONSUMER_GROUP_MEMBER_METADATA_VALUE = Schema("ConsumerGroupMemberMetadataValue", (
    Field("instance_id", "string", nullable=ALL),
    Field("rack_id", "string", nullable=ALL),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("subscribed_topic_names", "[]string", default=[]),
    Field("subscribed_topic_regex", "string", nullable=ALL),
    Field("rebalance_timeout_ms", "int32", default=-1),
    Field("server_assignor", "string", nullable=ALL),
    Field("classic_member_metadata", (
        Field("session_timeout_ms", "int32"),
        Field("supported_protocols", (
            Field("name", "string"),
            Field("metadata", "bytes"),
        ), array=True, default=[]),
    ), nullable=ALL, default={"session_timeout_ms": 0, "supported_protocols": []}, tag=0),
), (0, 0), 0)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ConsumerGroupTargetAssignmentMetadataKey")
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Schema("ConsumerGroupTargetAssignmentMetadataValue", (
    Field("assignment_epoch", "int32"),
    Field("assignment_timestamp", "int64", default=-1, tag=0),
), (0, 0), 0)

_TOPIC_PARTITIONS = (Field("topic_id", "uuid"), Field("partitions", "[]int32", default=[]))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _member_key("ConsumerGroupTargetAssignmentMemberKey")
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Schema("ConsumerGroupTargetAssignmentMemberValue", (
    Field("topic_partitions", _TOPIC_PARTITIONS, array=True, default=[]),
), (0, 0), 0)

_TOPIC_PARTITIONS_WITH_EPOCHS = _TOPIC_PARTITIONS + (
    Field("assignment_epochs", "[]int32", nullable=ALL, default=[], tag=0),
)

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key("ConsumerGroupCurrentMemberAssignmentKey")
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Schema("ConsumerGroupCurrentMemberAssignmentValue", (
    Field("member_epoch", "int32"),
    Field("previous_member_epoch", "int32"),
    Field("state", "int8"),
    Field("assigned_partitions", _TOPIC_PARTITIONS_WITH_EPOCHS, array=True, default=[]),
    Field("partitions_pending_revocation", _TOPIC_PARTITIONS_WITH_EPOCHS, array=True, default=[]),
), (0, 0), 0)

# Record type (the key's int16 prefix) -> (name, key schema, value schema). Types 0 and 1 are both offset
# commits (0 is the legacy key version; Kafka writes 1). Share/streams groups (9+) are not klog features; their
# records are recognised by type and skipped on load.
OFFSET_COMMIT = 1
LEGACY_OFFSET_COMMIT = 0
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8

RECORD_TYPES: dict[int, tuple[str, Schema, Schema]] = {
    LEGACY_OFFSET_COMMIT: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    OFFSET_COMMIT: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    GROUP_METADATA: ("GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    CONSUMER_GROUP_METADATA: ("ConsumerGroupMetadata", CONSUMER_GROUP_METADATA_KEY,
                              CONSUMER_GROUP_METADATA_VALUE),
    CONSUMER_GROUP_PARTITION_METADATA: ("ConsumerGroupPartitionMetadata", CONSUMER_GROUP_PARTITION_METADATA_KEY,
                                        CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    CONSUMER_GROUP_MEMBER_METADATA: ("ConsumerGroupMemberMetadata", CONSUMER_GROUP_MEMBER_METADATA_KEY,
                                     CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ("ConsumerGroupTargetAssignmentMetadata",
                                                CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
                                                CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ("ConsumerGroupTargetAssignmentMember",
                                              CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                                              CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ("ConsumerGroupCurrentMemberAssignment",
                                               CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                                               CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
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


# --- encoding ----------------------------------------------------------------------------------------------

_INT = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
        "int64": struct.Struct(">q")}


def _uvarint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


class _Writer:
    def __init__(self, schema: Schema, version: int) -> None:
        self.schema = schema
        self.version = version
        self.flexible = schema.flexible(version)
        self.out = bytearray()

    def fail(self, path: str, reason: str) -> RecordFormatError:
        return RecordFormatError(self.schema.name, self.version, path, len(self.out), reason)

    def length(self, n: int | None) -> None:
        """Length prefix of a string/bytes/array (None = null)."""
        raise NotImplementedError

    def write_struct(self, fields: tuple[Field, ...], obj: Any, path: str) -> None:
        tagged: list[tuple[int, bytes]] = []
        for f in fields:
            if not f.present(self.version):
                continue
            value = _get(obj, f)
            fpath = f"{path}{f.name}"
            if f.tag is not None:
                if not self.flexible or value == f.default:
                    continue
                sub = _Writer(self.schema, self.version)
                sub.write_field(f, value, fpath)
                tagged.append((f.tag, bytes(sub.out)))
                continue
            self.write_field(f, value, fpath)
        if self.flexible:
            tagged.sort()
            _uvarint(len(tagged), self.out)
            for tag, data in tagged:
                _uvarint(tag, self.out)
                _uvarint(len(data), self.out)
                self.out += data

    def write_field(self, f: Field, value: Any, path: str) -> None:
        if value is None and not f.is_nullable(self.version) and not isinstance(f.type, str):
            raise self.fail(path, "null is not allowed here")
        if isinstance(f.type, tuple):
            if f.array:
                self.write_array(value, path, lambda item, p: self.write_struct(f.type, item, p + "."))
            elif value is None:
                # Null struct: int8 -1, or in flexible versions an unsigned varint 0.
                self.out += b"\x00" if self.flexible else b"\xff"
            else:
                if f.is_nullable(self.version):
                    self.out += b"\x01"
                self.write_struct(f.type, value, path + ".")
            return
        t = f.type
        if t.startswith("[]"):
            elem = t[2:]
            self.write_array(value, path, lambda item, p: self.write_primitive(elem, item, p, False))
        else:
            self.write_primitive(t, value, path, f.is_nullable(self.version))

    def write_array(self, items: Any, path: str, write_item: Any) -> None:
        if items is None:
            self.write_len(None)
            return
        items = list(items)
        self.write_len(len(items))
        for i, item in enumerate(items):
            write_item(item, f"{path}[{i}]")

    def write_len(self, n: int | None) -> None:
        if self.flexible:
            _uvarint(0 if n is None else n + 1, self.out)
        else:
            self.out += _INT["int32"].pack(-1 if n is None else n)

    def write_primitive(self, t: str, value: Any, path: str, nullable: bool) -> None:
        if t in _INT:
            try:
                self.out += _INT[t].pack(value)
            except (struct.error, TypeError) as e:
                raise self.fail(path, f"not a {t}: {value!r} ({e})") from None
        elif t == "string" or t == "bytes":
            if value is None:
                if not nullable:
                    raise self.fail(path, "null is not allowed here")
                if self.flexible:
                    self.out += b"\x00"
                else:
                    self.out += (_INT["int16"] if t == "string" else _INT["int32"]).pack(-1)
                return
            if t == "string":
                if not isinstance(value, str):
                    raise self.fail(path, f"not a string: {value!r}")
                data = value.encode("utf-8")
                if not self.flexible and len(data) > 32767:
                    raise self.fail(path, f"string of {len(data)} bytes exceeds 32767")
            else:
                if not isinstance(value, (bytes, bytearray, memoryview)):
                    raise self.fail(path, f"not bytes: {type(value).__name__}")
                data = bytes(value)
            if self.flexible:
                _uvarint(len(data) + 1, self.out)
            else:
                self.out += (_INT["int16"] if t == "string" else _INT["int32"]).pack(len(data))
            self.out += data
        elif t == "uuid":
            if value is None:
                value = uuid.UUID(int=0)
            if not isinstance(value, uuid.UUID):
                raise self.fail(path, f"not a UUID: {value!r}")
            self.out += value.bytes
        else:  # pragma: no cover - schema programming error
            raise AssertionError(f"unknown type {t}")


def _get(obj: Any, f: Field) -> Any:
    if isinstance(obj, dict):
        return obj.get(f.name, f.default)
    return getattr(obj, f.name, f.default)


def encode_struct(schema: Schema, version: int, obj: Any) -> bytes:
    """Encodes ``obj`` (a dict, or any object with the fields as attributes) as ``schema`` at ``version``."""
    if not schema.versions[0] <= version <= schema.versions[1]:
        raise RecordFormatError(schema.name, version, "<version>", 0, f"unsupported version (valid "
                                f"{schema.versions[0]}-{schema.versions[1]})")
    w = _Writer(schema, version)
    w.write_struct(schema.fields, obj, "")
    return bytes(w.out)


# --- decoding ----------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, schema: Schema, version: int, data: bytes | memoryview, pos: int = 0) -> None:
        self.schema = schema
        self.version = version
        self.flexible = schema.flexible(version)
        self.data = memoryview(data)
        self.pos = pos

    def fail(self, path: str, reason: str, at: int | None = None) -> RecordFormatError:
        return RecordFormatError(self.schema.name, self.version, path or "<struct>",
                                 self.pos if at is None else at, reason)

    def take(self, n: int, path: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(path, f"needs {n} bytes, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def uvarint(self, path: str) -> int:
        result = shift = 0
        start = self.pos
        while True:
            if self.pos >= len(self.data):
                raise self.fail(path, "truncated varint", start)
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise self.fail(path, "varint longer than 5 bytes", start)

    def read_struct(self, fields: tuple[Field, ...], path: str) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for f in fields:
            if f.tag is not None or not f.present(self.version):
                obj[f.name] = _copy_default(f.default)
                continue
            obj[f.name] = self.read_field(f, f"{path}{f.name}")
        if self.flexible:
            by_tag = {f.tag: f for f in fields if f.tag is not None and f.present(self.version)}
            count = self.uvarint(f"{path}<tagged fields>")
            last = -1
            for _ in range(count):
                start = self.pos
                tag = self.uvarint(f"{path}<tag>")
                if tag <= last:
                    raise self.fail(f"{path}<tag {tag}>", "tags out of order", start)
                last = tag
                size = self.uvarint(f"{path}<tag {tag} size>")
                end = self.pos + size
                if end > len(self.data):
                    raise self.fail(f"{path}<tag {tag}>", f"needs {size} bytes, {len(self.data) - self.pos} left")
                tagged = by_tag.get(tag)
                if tagged is None:
                    self.pos = end  # unknown tag: skipped, as Kafka does
                    continue
                obj[tagged.name] = self.read_field(tagged, f"{path}{tagged.name}")
                if self.pos != end:
                    raise self.fail(f"{path}{tagged.name}", f"tagged field size {size} does not match its content",
                                    start)
        return obj

    def read_len(self, path: str) -> int | None:
        if self.flexible:
            n = self.uvarint(path)
            return None if n == 0 else n - 1
        (n,) = _INT["int32"].unpack(self.take(4, path))
        return None if n < 0 else n

    def read_field(self, f: Field, path: str) -> Any:
        if isinstance(f.type, tuple):
            if f.array:
                n = self.read_array_len(f, path)
                return None if n is None else [self.read_struct(f.type, f"{path}[{i}].") for i in range(n)]
            if f.is_nullable(self.version):
                (marker,) = _INT["int8"].unpack(self.take(1, path))
                if marker < 0 or (self.flexible and marker == 0):
                    return None
            return self.read_struct(f.type, path + ".")
        t = f.type
        if t.startswith("[]"):
            n = self.read_array_len(f, path)
            return None if n is None else [self.read_primitive(t[2:], f"{path}[{i}]", False) for i in range(n)]
        return self.read_primitive(t, path, f.is_nullable(self.version))

    def read_array_len(self, f: Field, path: str) -> int | None:
        """An array field's element count; None for a null array, an error where the schema forbids one."""
        n = self.read_len(path)
        if n is None:
            if not f.is_nullable(self.version):
                raise self.fail(path, "null array where the schema does not allow it")
            return None
        self._check_count(n, path)
        return n

    def _check_count(self, n: int, path: str) -> None:
        if n > len(self.data) - self.pos:  # every element takes at least one byte
            raise self.fail(path, f"array of {n} elements cannot fit in {len(self.data) - self.pos} bytes")

    def read_primitive(self, t: str, path: str, nullable: bool) -> Any:
        codec = _INT.get(t)
        if codec is not None:
            return codec.unpack(self.take(codec.size, path))[0]
        if t == "uuid":
            return uuid.UUID(bytes=bytes(self.take(16, path)))
        start = self.pos
        if self.flexible:
            n = self.uvarint(path)
            size = None if n == 0 else n - 1
        elif t == "string":
            (size,) = _INT["int16"].unpack(self.take(2, path))
        else:
            (size,) = _INT["int32"].unpack(self.take(4, path))
        if size is None or size < 0:
            if size is not None and size != -1:
                raise self.fail(path, f"negative length {size}", start)
            if not nullable:
                raise self.fail(path, "null where the schema does not allow it", start)
            return None
        raw = self.take(size, path)
        if t == "string":
            try:
                return str(raw, "utf-8")
            except UnicodeDecodeError as e:
                raise self.fail(path, f"invalid UTF-8 ({e.reason})", start) from None
        return bytes(raw)


def _copy_default(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return {k: _copy_default(v) for k, v in value.items()}
    return value


def decode_struct(schema: Schema, version: int, data: bytes | memoryview, *, exact: bool = True) -> dict[str, Any]:
    """Decodes ``data`` as ``schema`` at ``version``. With ``exact`` trailing bytes are an error."""
    if not schema.versions[0] <= version <= schema.versions[1]:
        raise RecordFormatError(schema.name, version, "<version>", 0,
                                f"unsupported version (valid {schema.versions[0]}-{schema.versions[1]})")
    r = _Reader(schema, version, data)
    obj = r.read_struct(schema.fields, "")
    if exact and r.pos != len(r.data):
        raise r.fail("<end>", f"{len(r.data) - r.pos} trailing bytes")
    return obj


# --- record keys and values --------------------------------------------------------------------------------


def encode_key(record_type: int, key: Any) -> bytes:
    """``int16 record type`` + key struct (keys are never flexible)."""
    _, key_schema, _ = _record_type(record_type)
    return _INT["int16"].pack(record_type) + encode_struct(key_schema, 0, key)


def encode_value(record_type: int, version: int, value: Any) -> bytes:
    """``int16 version`` + value struct."""
    _, _, value_schema = _record_type(record_type)
    return _INT["int16"].pack(version) + encode_struct(value_schema, version, value)


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
    """A record type klog does not load (share/streams group records). Loaders skip these."""


def _record_type(record_type: int) -> tuple[str, Schema, Schema]:
    try:
        return RECORD_TYPES[record_type]
    except KeyError:
        raise UnknownRecordType("CoordinatorRecord", record_type, "<key type>", 0,
                                f"unknown record type {record_type}") from None


def decode_record(key: bytes | memoryview | None, value: bytes | memoryview | None) -> CoordinatorRecord:
    """Decodes one record's key and value bytes (value None = tombstone)."""
    if key is None or len(key) < 2:
        raise RecordFormatError("CoordinatorRecord", 0, "<key type>", 0, "key shorter than its 2-byte type")
    (record_type,) = _INT["int16"].unpack(bytes(key[:2]))
    _, key_schema, value_schema = _record_type(record_type)
    # Kafka reads keys leniently (older writers used the key version as type): ignore trailing key bytes.
    key_obj = decode_struct(key_schema, 0, memoryview(key)[2:], exact=False)
    if value is None:
        return CoordinatorRecord(record_type, key_obj, None, None)
    if len(value) < 2:
        raise RecordFormatError(value_schema.name, 0, "<version>", 0, "value shorter than its 2-byte version")
    (version,) = _INT["int16"].unpack(bytes(value[:2]))
    value_obj = decode_struct(value_schema, version, memoryview(value)[2:], exact=False)
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
    """(key, value) of a KIP-848 consumer-group record (value None writes a tombstone)."""
    return encode_key(record_type, key), None if value is None else encode_value(record_type, 0, value)

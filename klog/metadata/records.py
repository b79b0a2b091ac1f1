"""KRaft metadata records and their framing in record batches, byte-compatible with Apache Kafka.

A metadata record is the value of a record (key null) in the ``__cluster_metadata`` log:
``[frame_version=1 uvarint][api_key uvarint][version uvarint][message]`` (Kafka's ``AbstractApiMessageSerde``).
The Raft layer's own records (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters) live in control
batches: key ``[version=0 int16][type int16]``, value the message at version 0 (Kafka's ``ControlRecordUtils``).
A batch holds either metadata records or control records, never both.

Raft contract: one Raft entry's data is one v2 record batch from :func:`encode_batch` (base offset 0); the
Raft storage rewrites the base offset and partitionLeaderEpoch (= term) when it persists, both outside the
batch CRC, so Kafka offsets advance by record count. :func:`decode_batch` reads one such entry back.

Bad input raises :class:`MetadataRecordError` naming the log offset (and the field and byte when the message
body is malformed); an unknown record type or version is such an error, never skipped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Union

from klog import records as _batches
from klog.protocol.codegen import read_uvarint, uvarint
from klog.protocol.data import CONTROL_RECORD_SCHEMAS, METADATA_RECORD_SCHEMAS, DataSchema, decode_data, encode_data
from klog.protocol.exceptions import ProtocolError
from klog.protocol.schema import Field
from klog.protocol.struct import Struct

__all__ = [
    "CONTROL_RECORD_VERSION",
    "FRAME_VERSION",
    "MAX_RECORDS_PER_BATCH",
    "ControlRecord",
    "ControlRecordType",
    "MetadataBatch",
    "MetadataRecord",
    "MetadataRecordError",
    "MetadataRecordType",
    "control",
    "decode_batch",
    "decode_batches",
    "decode_record",
    "encode_batch",
    "encode_record",
    "record",
]

#: The only frame version Kafka writes and reads (0 was KRaft's 2.8 preview).
FRAME_VERSION = 1
#: Control record values are read and written at this version (Kafka's ``*_CURRENT_VERSION`` constants).
CONTROL_RECORD_VERSION = 0
#: Bound on records in one batch this module writes (Kafka's controller caps a batch at 10,000 records via
#: ``max.records.per.user.op``; a snapshot writer cuts at 1,024). Larger record lists are split by callers.
MAX_RECORDS_PER_BATCH = 10_000


class MetadataRecordType(IntEnum):
    """Kafka's ``MetadataRecordType``: the api key of each metadata record."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    FENCE_BROKER_RECORD = 7
    UNFENCE_BROKER_RECORD = 8
    REMOVE_TOPIC_RECORD = 9
    DELEGATION_TOKEN_RECORD = 10
    USER_SCRAM_CREDENTIAL_RECORD = 11
    FEATURE_LEVEL_RECORD = 12
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    ZK_MIGRATION_STATE_RECORD = 21
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
    BEGIN_TRANSACTION_RECORD = 23
    END_TRANSACTION_RECORD = 24
    ABORT_TRANSACTION_RECORD = 25
    REMOVE_DELEGATION_TOKEN_RECORD = 26
    REGISTER_CONTROLLER_RECORD = 27
    CLEAR_ELR_RECORD = 28


class ControlRecordType(IntEnum):
    """Kafka's ``ControlRecordType``: the type in a control record's key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


assert {t.value for t in MetadataRecordType} == set(METADATA_RECORD_SCHEMAS), "record types and schemas disagree"
assert set(CONTROL_RECORD_SCHEMAS) <= {t.value for t in ControlRecordType}

_SCHEMAS_BY_NAME: dict[str, DataSchema] = {s.name: s for s in METADATA_RECORD_SCHEMAS.values()}
_CONTROL_BY_NAME: dict[str, DataSchema] = {s.name: s for s in CONTROL_RECORD_SCHEMAS.values()}


class MetadataRecordError(ValueError):
    """A metadata record or batch that cannot be read or written. ``offset`` is the log offset of the record
    (``None`` when unknown), ``cause`` the codec error naming field and byte where there is one."""

    def __init__(self, reason: str, *, offset: int | None = None) -> None:
        self.reason = reason
        self.offset = offset
        super().__init__(f"offset {offset}: {reason}" if offset is not None else reason)


@dataclass(frozen=True)
class MetadataRecord:
    """One metadata record: its type (api key), version and body (a Struct of Kafka's fields in snake_case)."""

    type: MetadataRecordType
    version: int
    data: Struct

    @property
    def name(self) -> str:
        return METADATA_RECORD_SCHEMAS[self.type].name


@dataclass(frozen=True)
class ControlRecord:
    """One Raft control record (LeaderChange, SnapshotHeader, ...): its type and body (at version 0)."""

    type: ControlRecordType
    data: Struct

    @property
    def name(self) -> str:
        return CONTROL_RECORD_SCHEMAS[self.type].name


AnyRecord = Union[MetadataRecord, ControlRecord]


def _struct(schema_fields: tuple[Field, ...], values: Any, where: str) -> Struct:
    """A Struct with every field: the given values (a dict, Struct or object) over the schema defaults; nested
    structs given as dicts become Structs too, so built records equal decoded ones."""
    if isinstance(values, Struct):
        values = values.__dict__
    elif not isinstance(values, dict):
        values = {f.name: getattr(values, f.name) for f in schema_fields if hasattr(values, f.name)}
    body = {f.name: f.default_value() for f in schema_fields}
    unknown = set(values) - set(body) - {"_unknown_tags"}
    if unknown:
        raise TypeError(f"{where} has no field {', '.join(sorted(unknown))} (fields: {', '.join(body)})")
    for f in schema_fields:
        if f.name not in values:
            continue
        v = values[f.name]
        if f.fields is not None and v is not None:
            if f.kind == "array":
                v = [_struct(f.fields, e, f"{where}.{f.name}[{i}]") for i, e in enumerate(v)]
            else:
                v = _struct(f.fields, v, f"{where}.{f.name}")
        elif f.kind == "array" and v is not None:
            v = list(v)
        body[f.name] = v
    out = Struct(**body)
    if values.get("_unknown_tags"):  # tagged fields this codec does not know, kept as read (or as given)
        out.__dict__["_unknown_tags"] = dict(values["_unknown_tags"])
    return out


def _body(schema: DataSchema, version: int, fields: dict[str, Any]) -> Struct:
    return _struct(schema.message.fields, fields, schema.name)


def record(kind: str | int, version: int | None = None, /, **fields: Any) -> MetadataRecord:
    """Build a metadata record: ``record("TopicRecord", name="t", topic_id=uid)`` or by api key. Fields not
    given take Kafka's defaults; ``version`` defaults to the newest this codec knows."""
    schema = _SCHEMAS_BY_NAME.get(kind) if isinstance(kind, str) else METADATA_RECORD_SCHEMAS.get(kind)
    if schema is None:
        raise ValueError(f"unknown metadata record {kind!r}")
    v = schema.max_version if version is None else version
    if not schema.supports(v):
        raise ValueError(f"{schema.name} has versions {schema.min_version}-{schema.max_version}, not {v}")
    return MetadataRecord(MetadataRecordType(schema.key), v, _body(schema, v, fields))


def control(kind: str | int, /, **fields: Any) -> ControlRecord:
    """Build a control record: ``control("SnapshotFooterRecord")`` or ``control(ControlRecordType.LEADER_CHANGE,
    leader_id=1, ...)``."""
    schema = _CONTROL_BY_NAME.get(kind) if isinstance(kind, str) else CONTROL_RECORD_SCHEMAS.get(kind)
    if schema is None:
        raise ValueError(f"unknown control record {kind!r}")
    return ControlRecord(ControlRecordType(schema.key), _body(schema, CONTROL_RECORD_VERSION, fields))


# ---------------------------------------------------------------------------------------------------------------
# One record value.


def encode_record(rec: MetadataRecord) -> bytes:
    """The framed value of one metadata record: frame version, api key, version, then the message."""
    schema = METADATA_RECORD_SCHEMAS.get(int(rec.type))
    if schema is None:
        raise MetadataRecordError(f"unknown metadata record type {int(rec.type)}")
    try:
        body = encode_data(schema, rec.version, rec.data)
    except ProtocolError as e:
        raise MetadataRecordError(f"cannot encode {schema.name} v{rec.version}: {e}") from e
    return uvarint(FRAME_VERSION) + uvarint(int(rec.type)) + uvarint(rec.version) + body


def _read_header_varint(value: memoryview, pos: int, what: str, offset: int | None) -> tuple[int, int]:
    try:
        n, pos = read_uvarint(value, pos)
    except Exception as e:  # IndexError when truncated, the codec's error for a varint over 5 bytes
        raise MetadataRecordError(f"truncated or malformed {what} varint at byte {pos} of the record value",
                                  offset=offset) from e
    if n > 0x7FFF:
        raise MetadataRecordError(f"{what} {n} is larger than an int16", offset=offset)
    return n, pos


def decode_record(value: bytes | bytearray | memoryview, offset: int | None = None) -> MetadataRecord:
    """Decode one framed metadata record value (``offset`` is only used in error messages)."""
    mv = memoryview(value).cast("B") if not isinstance(value, memoryview) else value
    frame, pos = _read_header_varint(mv, 0, "frame version", offset)
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"unknown metadata record frame version {frame} (only {FRAME_VERSION} is "
                                  f"supported)", offset=offset)
    api_key, pos = _read_header_varint(mv, pos, "record type", offset)
    version, pos = _read_header_varint(mv, pos, "record version", offset)
    schema = METADATA_RECORD_SCHEMAS.get(api_key)
    if schema is None:
        raise MetadataRecordError(f"unknown metadata record type {api_key} (version {version})", offset=offset)
    if not schema.supports(version):
        raise MetadataRecordError(f"unsupported version {version} of {schema.name} (this codec reads "
                                  f"{schema.min_version}-{schema.max_version})", offset=offset)
    try:
        body, end = decode_data(schema, version, mv, pos)
    except ProtocolError as e:
        raise MetadataRecordError(f"malformed {schema.name} v{version}: {e}", offset=offset) from e
    if end != len(mv):
        raise MetadataRecordError(f"{len(mv) - end} byte(s) of garbage after {schema.name} v{version}",
                                  offset=offset)
    return MetadataRecord(MetadataRecordType(api_key), version, body)


def _control_key(kind: ControlRecordType) -> bytes:
    return (0).to_bytes(2, "big") + int(kind).to_bytes(2, "big", signed=True)


def _decode_control(key: bytes | None, value: bytes | None, offset: int) -> ControlRecord:
    if key is None or len(key) < 4:
        raise MetadataRecordError(f"control record key of {0 if key is None else len(key)} bytes (needs 4)",
                                  offset=offset)
    kind = int.from_bytes(key[2:4], "big", signed=True)
    schema = CONTROL_RECORD_SCHEMAS.get(kind)
    if schema is None:
        raise MetadataRecordError(f"unexpected control record type {kind} in the metadata log", offset=offset)
    if value is None:
        raise MetadataRecordError(f"{schema.name} control record with a null value", offset=offset)
    try:
        body, _ = decode_data(schema, CONTROL_RECORD_VERSION, value)
    except ProtocolError as e:
        raise MetadataRecordError(f"malformed {schema.name}: {e}", offset=offset) from e
    return ControlRecord(ControlRecordType(kind), body)


# ---------------------------------------------------------------------------------------------------------------
# Batches.


@dataclass(frozen=True)
class MetadataBatch:
    """One decoded batch of the metadata log or a snapshot. ``epoch`` is its partitionLeaderEpoch (the Raft
    term), ``append_timestamp`` its max timestamp; record ``i`` has offset ``base_offset + i``."""

    base_offset: int
    epoch: int
    append_timestamp: int
    is_control: bool
    records: tuple[AnyRecord, ...]
    size_in_bytes: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


def encode_batch(records: Sequence[AnyRecord], *, base_offset: int = 0, epoch: int = -1,
                 timestamp: int | None = None, compression: str = "none") -> bytes:
    """Encode records as one v2 record batch (a control batch when they are control records).

    ``epoch`` goes into partitionLeaderEpoch; ``timestamp`` (ms, default now) is every record's CreateTime.
    """
    if not records:
        raise MetadataRecordError("a metadata batch needs at least one record")
    if len(records) > MAX_RECORDS_PER_BATCH:
        raise MetadataRecordError(f"{len(records)} records exceed MAX_RECORDS_PER_BATCH={MAX_RECORDS_PER_BATCH}")
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    is_control = isinstance(records[0], ControlRecord)
    rows: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        if isinstance(rec, ControlRecord) != is_control:
            raise MetadataRecordError(f"record {i} ({type(rec).__name__}): a batch holds either metadata records "
                                      f"or control records, not both")
        if is_control:
            schema = CONTROL_RECORD_SCHEMAS[int(rec.type)]
            try:
                value = encode_data(schema, CONTROL_RECORD_VERSION, rec.data)
            except ProtocolError as e:
                raise MetadataRecordError(f"record {i}: cannot encode {schema.name}: {e}") from e
            rows.append({"key": _control_key(ControlRecordType(rec.type)), "value": value, "timestamp": ts})
        elif isinstance(rec, MetadataRecord):
            rows.append({"key": None, "value": encode_record(rec), "timestamp": ts})
        else:
            raise MetadataRecordError(f"record {i}: expected a MetadataRecord or ControlRecord, not "
                                      f"{type(rec).__name__}")
    return _batches.encode_batch(rows, base_offset=base_offset, partition_leader_epoch=epoch,
                                 is_control=is_control, compression=compression)


def _decode_one(batch: _batches.Batch) -> MetadataBatch:
    out: list[AnyRecord] = []
    for r in batch.records:
        if batch.is_control:
            out.append(_decode_control(r.key, r.value, r.offset))
        else:
            if r.value is None:
                raise MetadataRecordError("metadata record with a null value", offset=r.offset)
            out.append(decode_record(r.value, r.offset))
    return MetadataBatch(batch.base_offset, batch.partition_leader_epoch, batch.max_timestamp, batch.is_control,
                         tuple(out), batch.size)


def decode_batches(data: bytes | bytearray | memoryview, *, allow_partial_trailing: bool = False
                   ) -> list[MetadataBatch]:
    """Decode every batch in ``data`` (log segment bytes, a read of the log, a snapshot file).

    ``allow_partial_trailing`` ignores a cut last batch (a read bounded by bytes). Batch-level corruption raises
    :class:`klog.records.CorruptRecordError` (naming byte and field); record-level problems raise
    :class:`MetadataRecordError` naming the offset.
    """
    try:
        batches = _batches.decode_batches(data, allow_partial_trailing=allow_partial_trailing)
    except _batches.CorruptRecordError as e:
        raise MetadataRecordError(f"corrupt record batch: {e}") from e
    return [_decode_one(b) for b in batches]


def decode_batch(data: bytes | bytearray | memoryview) -> list[AnyRecord]:
    """The records of exactly one batch (one Raft entry's data): the inverse of :func:`encode_batch`."""
    batches = decode_batches(data)
    if len(batches) != 1:
        raise MetadataRecordError(f"expected exactly one record batch, found {len(batches)}")
    return list(batches[0].records)


def iter_records(batches: Iterable[MetadataBatch]) -> Iterable[tuple[int, AnyRecord]]:
    """(offset, record) for every record of the batches, in log order."""
    for b in batches:
        for i, rec in enumerate(b.records):
            yield b.base_offset + i, rec

"""Messages that are not requests or responses: KRaft metadata records, Raft control records and the group
coordinator's ``__consumer_offsets`` records.

Kafka declares these in the same JSON message format as its wire protocol (``"type": "metadata"`` / ``"data"``),
so they are compiled by the same codegen (:mod:`klog.protocol.codegen`) into per-version encoders and decoders.
The definitions are in :mod:`klog.protocol.record_schemas` and :mod:`klog.protocol.coordinator_record_schemas`.
Framing (the frame version, api key and version varints of a metadata record value; the int16 record type and
value version of a coordinator record) is the caller's business: see :mod:`klog.metadata.records` and
:mod:`klog.broker.groups.records`.
"""

from __future__ import annotations

from typing import Any, Callable

from . import codegen
from .coordinator_record_schemas import COORDINATOR_KEY_DEFINITIONS, COORDINATOR_VALUE_DEFINITIONS, \
    SHARE_STATE_KEY_DEFINITIONS, SHARE_STATE_VALUE_DEFINITIONS, TRANSACTION_LOG_KEY_DEFINITIONS, \
    TRANSACTION_LOG_VALUE_DEFINITIONS
from .exceptions import UnsupportedVersion
from .record_schemas import CONTROL_RECORD_DEFINITIONS, METADATA_RECORD_DEFINITIONS
from .schema import MessageSchema, build_fields, parse_versions
from .struct import Struct


class DataSchema:
    """One record type: its key (metadata record api key, or control record type), name and message schema."""

    __slots__ = ("key", "name", "message")

    def __init__(self, key: int, message: MessageSchema) -> None:
        self.key = key
        self.name = message.name
        self.message = message

    @property
    def min_version(self) -> int:
        return self.message.valid[0]

    @property
    def max_version(self) -> int:
        return self.message.valid[1]

    def supports(self, version: int) -> bool:
        lo, hi = self.message.valid
        return lo <= version <= hi

    def __repr__(self) -> str:
        return f"DataSchema({self.key}, {self.name!r}, {self.min_version}-{self.max_version})"


def _registry(definitions: list[tuple[int, str, str, str, tuple]]) -> dict[int, DataSchema]:
    out: dict[int, DataSchema] = {}
    for key, name, versions, flexible, fields in definitions:
        valid = parse_versions(versions)
        assert valid is not None and key not in out, (key, name)
        out[key] = DataSchema(key, MessageSchema(name, valid, parse_versions(flexible), build_fields(fields)))
    return out


#: KRaft metadata records by api key (``MetadataRecordType`` in Kafka).
METADATA_RECORD_SCHEMAS: dict[int, DataSchema] = _registry(METADATA_RECORD_DEFINITIONS)
#: Raft control records by control record type (``ControlRecordType`` in Kafka).
CONTROL_RECORD_SCHEMAS: dict[int, DataSchema] = _registry(CONTROL_RECORD_DEFINITIONS)
#: Keys and values of the group coordinator's records by record type (``CoordinatorRecordType`` in Kafka).
COORDINATOR_KEY_SCHEMAS: dict[int, DataSchema] = _registry(COORDINATOR_KEY_DEFINITIONS)
COORDINATOR_VALUE_SCHEMAS: dict[int, DataSchema] = _registry(COORDINATOR_VALUE_DEFINITIONS)
#: The transaction coordinator's ``__transaction_state`` key and value (one record type, 0).
TRANSACTION_LOG_KEY_SCHEMA: DataSchema = _registry(TRANSACTION_LOG_KEY_DEFINITIONS)[0]
TRANSACTION_LOG_VALUE_SCHEMA: DataSchema = _registry(TRANSACTION_LOG_VALUE_DEFINITIONS)[0]
#: The share coordinator's ``__share_group_state`` ShareSnapshot key and value (record type 0) ...
SHARE_SNAPSHOT_KEY_SCHEMA: DataSchema = _registry(SHARE_STATE_KEY_DEFINITIONS)[0]
SHARE_SNAPSHOT_VALUE_SCHEMA: DataSchema = _registry(SHARE_STATE_VALUE_DEFINITIONS)[0]
#: ... and its ShareUpdate key and value (record type 1: Kafka's delta over the snapshot)
SHARE_UPDATE_KEY_SCHEMA: DataSchema = _registry(SHARE_STATE_KEY_DEFINITIONS)[1]
SHARE_UPDATE_VALUE_SCHEMA: DataSchema = _registry(SHARE_STATE_VALUE_DEFINITIONS)[1]

_ENCODERS: dict[tuple[str, int], Callable] = {}
_DECODERS: dict[tuple[str, int], Callable] = {}


def _check(schema: DataSchema, version: int) -> None:
    if not schema.supports(version):
        raise UnsupportedVersion(
            f"unsupported version {version} of {schema.name} (this codec has {schema.min_version}-"
            f"{schema.max_version})", api_key=schema.key, api_version=version, api_name=schema.name,
        )


def encode_data(schema: DataSchema, version: int, value: Any) -> bytes:
    """Encode one record body (a Struct, dict or object with attributes; missing fields take defaults)."""
    fn = _ENCODERS.get((schema.name, version))
    if fn is None:
        _check(schema, version)
        fn = codegen.compile_encoder(schema.message, version, f"{schema.name} v{version} encode")
        _ENCODERS[(schema.name, version)] = fn
    w = bytearray()
    chunks: list = []
    try:
        fn(value, w, chunks)
    except Exception as e:
        raise codegen.encode_error(e, api_key=schema.key, api_version=version, api_name=schema.name) from e
    assert not chunks, "record schemas have no records fields"
    return bytes(w)


def decode_data(schema: DataSchema, version: int, buf: bytes | bytearray | memoryview, offset: int = 0,
                end: int | None = None) -> tuple[Struct, int]:
    """Decode one record body from ``buf[offset:end]``; returns (value, end offset of the body).

    Raises UnsupportedVersion for versions without a schema and ProtocolError naming field and byte offset.
    """
    fn = _DECODERS.get((schema.name, version))
    if fn is None:
        _check(schema, version)
        fn = codegen.compile_decoder(schema.message, version, f"{schema.name} v{version} decode")
        _DECODERS[(schema.name, version)] = fn
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    stop = len(mv) if end is None else end
    if stop < len(mv):
        mv = mv[:stop]  # fixed-size fields are unpacked without an end check: cut the view at the body's end
    try:
        value, pos = fn(mv, offset, stop)
    except Exception as e:
        raise codegen.decode_error(e, api_key=schema.key, api_version=version, api_name=schema.name) from e
    return value, pos

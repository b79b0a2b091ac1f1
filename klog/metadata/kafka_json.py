"""Metadata and Raft control records as Kafka's generated JSON converters print them.

``kafka-dump-log --cluster-metadata-decoder`` shows each record of ``__cluster_metadata`` as
``{"type":"TOPIC_RECORD","version":0,"data":{...}}`` and each control record as its message's JSON. The rules
are those of Kafka's ``*JsonConverter.write``: fields in camelCase; a field absent from the record's version is
left out; a tagged field only when it differs from its default; UUIDs in Kafka's URL-safe base64 form, bytes in
standard base64. ``klog dump-log`` uses this, so its output can be compared with Kafka's tool record by record.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from klog.protocol.data import CONTROL_RECORD_SCHEMAS, METADATA_RECORD_SCHEMAS
from klog.protocol.schema import Field
from klog.protocol.struct import Struct

from .records import CONTROL_RECORD_VERSION, ControlRecord, ControlRecordType, MetadataRecord
from .storage import kafka_uuid  # Kafka's Uuid.toString(), as quorum-state writes it

__all__ = ["control_record_text", "kafka_uuid", "metadata_record_json", "to_json"]

#: Field names whose camelCase is not the plain conversion of our snake_case (Kafka's "KRaft" prefix).
_CAMEL_OVERRIDES = {"kraft_version": "kRaftVersion", "kraft_version_feature": "kRaftVersionFeature"}

#: How Kafka's DumpLogSegments labels each Raft control record (``ClusterMetadataLogMessageParser``).
CONTROL_LABELS = {
    ControlRecordType.LEADER_CHANGE: "LeaderChange:",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


def _camel(name: str) -> str:
    if name in _CAMEL_OVERRIDES:
        return _CAMEL_OVERRIDES[name]
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _value(field: Field, value: Any, version: int) -> Any:
    if value is None:
        return None
    if field.kind == "uuid":
        return kafka_uuid(value)
    if field.kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if field.kind == "struct":
        return _fields(field.fields or (), value, version)
    if field.kind == "array":
        if field.fields is not None:
            return [_fields(field.fields, item, version) for item in value]
        if field.elem == "uuid":
            return [kafka_uuid(item) for item in value]
        return list(value)
    return value


def _fields(fields: tuple[Field, ...], data: Struct, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in fields:
        if not field.present(version):
            continue
        value = getattr(data, field.name, None)
        if field.is_tagged(version) and value == field.default_value():
            continue  # Kafka writes a tagged field only when it is not its default
        out[_camel(field.name)] = _value(field, value, version)
    return out


def to_json(obj: Any) -> str:
    """Compact JSON as Jackson writes it (no spaces)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def metadata_record_json(rec: MetadataRecord) -> dict[str, Any]:
    """``{"type": "TOPIC_RECORD", "version": 0, "data": {...}}`` (Kafka's ``MetadataJsonConverters``)."""
    schema = METADATA_RECORD_SCHEMAS[int(rec.type)]
    return {"type": rec.type.name, "version": rec.version,
            "data": _fields(schema.message.fields, rec.data, rec.version)}


def control_record_text(rec: ControlRecord) -> str:
    """A control record as DumpLogSegments prints it: ``LeaderChange: {...}``, ``SnapshotHeader {...}``."""
    schema = CONTROL_RECORD_SCHEMAS[int(rec.type)]
    label = CONTROL_LABELS.get(ControlRecordType(rec.type), ControlRecordType(rec.type).name)
    return f"{label} {to_json(_fields(schema.message.fields, rec.data, CONTROL_RECORD_VERSION))}"

"""Client quotas (Kafka's ``ClientQuotaControlManager``): AlterClientQuotas decided on the committed image as
``ClientQuotaRecord``s (a value set, or ``remove``). Pure: no IO; the caller commits the records
(klog.controller.apis.ControllerApis).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.controller.result import ControllerResult
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode
from klog.security.quotas import quota_keys, unknown_entity_type, validate_entity, validate_value

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterClientQuotasRequestEntryData,
        AlterClientQuotasRequestOpData,
        AlterClientQuotasResponseEntityData,
        AlterClientQuotasResponseEntryData,
    )

__all__ = ["alter_client_quotas"]


def alter_client_quotas(entries: list[AlterClientQuotasRequestEntryData], image: MetadataImage, *,
                        validate_only: bool = False) -> ControllerResult[list[AlterClientQuotasResponseEntryData]]:
    """One result per entry, in request order. An entry with an error changes nothing; the others are applied
    (Kafka's per-entity semantics). ``validate_only``: the results, no records."""
    out: list[MetadataRecord] = []
    results: list[AlterClientQuotasResponseEntryData] = []
    for entry in entries:
        entity_list = [(e.entity_type, e.entity_name) for e in entry.entity]
        answer_entity: list[AlterClientQuotasResponseEntityData] = [
            {"entity_type": t, "entity_name": n} for t, n in entity_list]
        code, message, records = _alter_one(dict(entity_list), list(entry.ops), image)
        results.append({"error_code": code, "error_message": message, "entity": answer_entity})
        if code == ErrorCode.NONE:
            out += records
    return ControllerResult([] if validate_only else out, results)


def _alter_one(entity: dict[str, str | None], ops: list[AlterClientQuotasRequestOpData], image: MetadataImage
               ) -> tuple[int, str | None, list[MetadataRecord]]:
    unknown = unknown_entity_type(entity)
    if unknown is not None:
        return ErrorCode.UNSUPPORTED_VERSION, f"Unhandled client quota entity type: {unknown}", []
    problem = validate_entity(entity)
    if problem is not None:
        return ErrorCode.INVALID_REQUEST, problem, []
    keys, problem = quota_keys(entity)
    if keys is None:
        return ErrorCode.INVALID_REQUEST, problem, []
    wanted: dict[str, float | None] = {}
    for op in ops:   # a key named twice: the last op wins, as Kafka's map of the request
        wanted[op.key] = None if op.remove else float(op.value)
    for key, value in wanted.items():
        if value is None:
            continue   # removing a key the entity does not have: nothing to do (Kafka does not check it)
        problem = validate_value(keys, key, value)
        if problem is not None:
            return ErrorCode.INVALID_REQUEST, problem, []
    current = image.client_quotas.get(tuple(sorted(entity.items(), key=lambda kv: kv[0])), {})
    entity_data = [{"entity_type": t, "entity_name": n} for t, n in entity.items()]
    records: list[MetadataRecord] = []
    for key, value in wanted.items():
        if value is None:
            if key in current:
                records.append(record("ClientQuotaRecord", entity=entity_data, key=key, value=0.0, remove=True))
        elif current.get(key) != value:   # only a changed value is written
            records.append(record("ClientQuotaRecord", entity=entity_data, key=key, value=value, remove=False))
    return ErrorCode.NONE, None, records

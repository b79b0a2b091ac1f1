"""Client quotas (Kafka's ``ClientQuotaControlManager``): AlterClientQuotas decided on the committed image as
``ClientQuotaRecord``s (a value set, or ``remove``). Pure: no IO; the caller commits the records
(klog.controller.apis.ControllerApis).
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING

from klog.controller.result import ControllerResult
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode
from klog.security.quotas import (
    ip_entity_host_names,
    java_hash_map_order,
    quota_keys,
    validate_entity,
    validate_value,
)

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterClientQuotasRequestEntryData,
        AlterClientQuotasRequestOpData,
        AlterClientQuotasResponseEntryData,
    )

__all__ = ["alter_client_quotas", "ip_host_names"]


def ip_host_names(entries: list[AlterClientQuotasRequestEntryData]) -> set[str]:
    """The host names of the request's IP entities: what the caller resolves before :func:`alter_client_quotas`."""
    return ip_entity_host_names({e.entity_type: e.entity_name for e in entry.entity} for entry in entries)


def alter_client_quotas(entries: list[AlterClientQuotasRequestEntryData], image: MetadataImage, *,
                        validate_only: bool = False, resolvable_hosts: Container[str] = frozenset()
                        ) -> ControllerResult[list[AlterClientQuotasResponseEntryData]]:
    """One result per entity, in first-seen order (Kafka's: its hash map's), as Kafka's
    ``ClientQuotaControlManager.alterClientQuotas``: an entry with an error changes nothing, the others are
    applied; an entity named again (or given a key twice) answers INVALID_REQUEST "Ignoring duplicate entity",
    what its first entry changed standing. ``validate_only``: the results, no records. ``resolvable_hosts``: the
    IP entities' host names that resolved (:func:`ip_host_names`, looked up by the caller)."""
    out: list[MetadataRecord] = []
    results: dict[tuple[tuple[str, str | None], ...], AlterClientQuotasResponseEntryData] = {}
    for entry in entries:
        entity = _kafka_order({e.entity_type: e.entity_name for e in entry.entity}, len(entry.entity))
        key = tuple(entity.items())
        ops = list(entry.ops)
        code: int
        message: str | None
        records: list[MetadataRecord]
        if key in results or len({op.key for op in ops}) < len(ops):
            code, message, records = ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {_java(entity)}", []
        else:
            code, message, records = _alter_one(entity, ops, image, resolvable_hosts)
        results[key] = {"error_code": code, "error_message": message,
                        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()]}
        if code == ErrorCode.NONE:
            out += records
    return ControllerResult([] if validate_only else out, list(results.values()))


def _kafka_order(entity: dict[str, str | None], parts: int) -> dict[str, str | None]:
    """The entity in the order of Kafka's ClientQuotaEntity map (its answers, messages and checks'), a
    ``HashMap`` sized by the request's ``parts``."""
    return {t: entity[t] for t in java_hash_map_order(entity, parts)}


def _java(entity: dict[str, str | None]) -> str:
    """Kafka's ``ClientQuotaEntity.toString``."""
    inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity.items())
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _alter_one(entity: dict[str, str | None], ops: list[AlterClientQuotasRequestOpData], image: MetadataImage,
               resolvable_hosts: Container[str]) -> tuple[int, str | None, list[MetadataRecord]]:
    problem = validate_entity(entity, resolvable_hosts)
    if problem is not None:
        return ErrorCode.INVALID_REQUEST, problem, []
    keys, problem = quota_keys(entity)
    if keys is None:
        return ErrorCode.INVALID_REQUEST, problem, []
    wanted: dict[str, float | None] = {}
    for op in ops:   # (a key named twice is refused by the caller)
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

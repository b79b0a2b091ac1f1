"""Client quotas as Kafka defines them (``QuotaConfig``, ``ClientQuotaControlManager``'s validation): which quota
keys each entity combination takes and which values are valid. Pure: no IO.

Entities are Kafka's ``ClientQuotaEntity``: a mapping of entity type (``user``, ``client-id``, ``ip``) to a name,
None being the default entity of that type (``--entity-default``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

__all__ = ["CLIENT_ID", "IP", "IP_QUOTA_KEYS", "USER", "USER_CLIENT_QUOTA_KEYS", "quota_keys",
           "validate_entity", "validate_value"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"

#: the quota keys of a user, a client id or both, with Kafka's config type (QuotaConfig.userAndClientQuotaConfigs)
USER_CLIENT_QUOTA_KEYS: Mapping[str, str] = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
#: the quota keys of an IP (QuotaConfig.ipConfigs)
IP_QUOTA_KEYS: Mapping[str, str] = {"connection_creation_rate": "int"}

_MAX = {"short": 2 ** 15 - 1, "int": 2 ** 31 - 1, "long": 2 ** 63 - 1}


def validate_entity(entity: Mapping[str, str | None]) -> str | None:
    """Kafka's ClientQuotaControlManager.validateEntity: an error message (INVALID_REQUEST), or None. Unknown
    entity types are :func:`unknown_entity_type`'s (UNSUPPORTED_VERSION)."""
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity.items():
        if entity_type == IP and name is not None and not _valid_ip(name):
            return f"{name} is not a valid IP or resolvable host."
        if name is not None and name == "":
            return f"Empty {entity_type} not supported"
    return None


def unknown_entity_type(entity: Mapping[str, str | None]) -> str | None:
    """The first entity type Kafka does not handle, or None."""
    return next((t for t in entity if t not in (USER, CLIENT_ID, IP)), None)


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def quota_keys(entity: Mapping[str, str | None]) -> tuple[Mapping[str, str] | None, str | None]:
    """(the quota keys the entity combination takes, None) or (None, the error: INVALID_REQUEST)."""
    has_user, has_client, has_ip = USER in entity, CLIENT_ID in entity, IP in entity
    if has_ip:
        if has_user or has_client:
            return None, "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
        return IP_QUOTA_KEYS, None
    if has_user or has_client:
        return USER_CLIENT_QUOTA_KEYS, None
    return None, "Invalid empty client quota entity"


def validate_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    """Kafka's validateQuotaKeyValue: an error message (INVALID_REQUEST), or None."""
    config_type = keys.get(key)
    if config_type is None:
        return f"Invalid configuration key {key}"
    if value != value or value <= 0.0:   # NaN too
        return f"Quota {key} must be greater than 0"
    if config_type == "double":
        return None
    if value > _MAX[config_type]:
        return f"Proposed value for {key} is too large for a {config_type.upper()}."
    if abs(value % 1.0) > 1e-10:
        return f"{key} cannot be a fractional value."
    return None

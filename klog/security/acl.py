"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions (their wire bytes), ACL
bindings and the filters of DescribeAcls/DeleteAcls (``AclBindingFilter.matches``), and the checks Kafka makes
before an ACL is stored (``AclApis.handleCreateAcls`` then ``AclControlManager.validateNewAcl``).

Pure: no IO. The stored form of an ACL is :class:`klog.metadata.image.AclEntry` (an AccessControlEntryRecord).
"""

from __future__ import annotations

from enum import IntEnum

from klog.metadata.image import AclEntry
from klog.protocol.errors import ErrorCode

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "create_error",
    "filter_error",
    "has_unknown_code",
    "is_filter_only",
]

#: the one name of the CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``)
CLUSTER_NAME = "kafka-cluster"
#: a LITERAL ACL on this name matches every resource of its type; ACL host ``*`` matches every host
WILDCARD = "*"
#: an ACL for this principal matches every ``User`` principal
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's ``PatternType`` codes (MATCH and ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    """Kafka's ``AclPermissionType`` codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return "UNKNOWN"


def has_unknown_code(entry: AclEntry | AclFilter) -> bool:
    """A creation or filter Kafka cannot even parse (a code 0, UNKNOWN; any other code it does not know parses
    as UNKNOWN and is answered): its broker closes the connection."""
    return 0 in (entry.resource_type, entry.pattern_type, entry.operation, entry.permission_type)


def is_filter_only(entry: AclEntry) -> bool:
    """A creation holding a filter-only value (ANY, MATCH): Kafka cannot build its AclBinding, and the whole
    CreateAcls request fails (every creation UNKNOWN_SERVER_ERROR, nothing stored)."""
    return entry.resource_type == ResourceType.ANY or entry.pattern_type in (PatternType.ANY, PatternType.MATCH) \
        or entry.operation == AclOperation.ANY or entry.permission_type == AclPermissionType.ANY


def create_error(entry: AclEntry) -> tuple[int, str | None] | None:
    """Why Kafka refuses to create ``entry`` (error code and message), None when it is valid: a filter-only
    value (ANY, MATCH) fails building Kafka's AclBinding (UNKNOWN_SERVER_ERROR, no message: :func:`is_filter_only`
    fails the whole request); then the broker's checks (``AclApis.handleCreateAcls``) and the controller's
    (``validateNewAcl``: the codes, then the principal's form), INVALID_REQUEST with Kafka's messages."""
    if is_filter_only(entry):
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    problem = _create_problem(entry)
    return None if problem is None else (ErrorCode.INVALID_REQUEST, problem)


def _create_problem(entry: AclEntry) -> str | None:
    if entry.resource_type == ResourceType.CLUSTER and entry.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if entry.resource_name == "":
        return "Invalid empty resource name"
    if entry.resource_type not in _CONCRETE_RESOURCE_TYPES:
        return f"Invalid resourceType {_name(ResourceType, entry.resource_type)}"
    if entry.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, entry.pattern_type)}"
    if entry.operation not in _CONCRETE_OPERATIONS:
        return f"Invalid operation {_name(AclOperation, entry.operation)}"
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {_name(AclPermissionType, entry.permission_type)}"
    if ":" not in entry.principal:
        return (f"Could not parse principal from `{entry.principal}` (no colon is present separating the "
                f"principal type from the principal name)")
    return None


_CONCRETE_RESOURCE_TYPES = frozenset(t.value for t in ResourceType if t not in (ResourceType.UNKNOWN,
                                                                               ResourceType.ANY))
_CONCRETE_OPERATIONS = frozenset(o.value for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
_KNOWN_RESOURCE_TYPES = frozenset(t.value for t in ResourceType)
_KNOWN_PATTERN_TYPES = frozenset(t.value for t in PatternType)
_KNOWN_OPERATIONS = frozenset(o.value for o in AclOperation)
_KNOWN_PERMISSIONS = frozenset(p.value for p in AclPermissionType)


class AclFilter:
    """Kafka's ``AclBindingFilter``: None for a string field matches anything; ANY for a code field too;
    pattern type MATCH matches the ACLs that would apply to the named resource (the literal name, the
    wildcard ``*`` and every prefix of it)."""

    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                 "permission_type")

    def __init__(self, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                 host: str | None, operation: int, permission_type: int) -> None:
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.pattern_type = pattern_type
        self.principal = principal
        self.host = host
        self.operation = operation
        self.permission_type = permission_type

    def matches(self, acl: AclEntry) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt in (PatternType.ANY, acl.pattern_type):
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:   # MATCH
                if name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif acl.pattern_type == PatternType.PREFIXED:
                if not name.startswith(acl.resource_name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type


def filter_error(f: AclFilter) -> str | None:
    """Why Kafka's controller refuses a DeleteAcls filter (INVALID_REQUEST with this message), None when it is
    usable: a code it does not know, parsed as UNKNOWN (Kafka's ``AclBindingFilter.isUnknown``; a code 0 itself
    makes Kafka's broker close the connection: :func:`has_unknown_code`). DescribeAcls answers such a filter
    with no ACLs: it matches none."""
    if f.resource_type not in _KNOWN_RESOURCE_TYPES or f.resource_type == ResourceType.UNKNOWN \
            or f.pattern_type not in _KNOWN_PATTERN_TYPES or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation not in _KNOWN_OPERATIONS or f.operation == AclOperation.UNKNOWN \
            or f.permission_type not in _KNOWN_PERMISSIONS or f.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None

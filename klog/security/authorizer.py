"""The ACL authorizer: Kafka's ``StandardAuthorizer`` as a pure function of the image's ACLs, the principal, the
client host, the operation and the resource.

Rules (Kafka's ``StandardAuthorizerData``):

- a principal named in ``super.users`` may do everything;
- the ACLs that apply to a resource are the LITERAL ones on its name, the LITERAL ones on ``*`` and the PREFIXED
  ones on any prefix of its name (its whole name included), of its resource type;
- an ACL matches when its principal is the request's (or ``User:*``), its host is the client's address (or ``*``)
  and its operation is the one asked (or ALL); an ALLOW ACL on READ, WRITE, DELETE or ALTER also allows
  DESCRIBE, and one on ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies nothing);
- a matching DENY wins over every ALLOW; without a matching ALLOW the answer is no, unless the resource has no
  ACL at all (for anyone), where ``allow.everyone.if.no.acl.found`` decides.

:class:`AclIndex` is built once per ACL set (the image's ``acls`` mapping is replaced only when an ACL record is
applied, so the authorizer keeps the index of the last mapping it saw): ACLs by resource type, then LITERAL by
name and PREFIXED by prefix, with the set of prefix lengths present, so one check is a few dict lookups whatever
the number of ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from klog.metadata.image import AclEntry

from .acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from .principal import KafkaPrincipal

__all__ = [
    "STANDARD_AUTHORIZER",
    "SUPPORTED_OPERATIONS",
    "AclIndex",
    "StandardAuthorizer",
    "authorizer_from_config",
]

#: the authorizer.class.name values that turn authorization on (Kafka's KRaft authorizer; the ZooKeeper-era
#: AclAuthorizer name is refused by Kafka 4 and so here)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY
_ALL = AclOperation.ALL
_DESCRIBE = AclOperation.DESCRIBE
_DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS
_IMPLIES_DESCRIBE = frozenset((AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))

#: Kafka's ``AclEntry.supportedOperations``: what ``authorized_operations`` reports per resource type
SUPPORTED_OPERATIONS: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class _Section:
    """The ACLs of one resource type."""

    literal: Mapping[str, tuple[AclEntry, ...]]
    prefixed: Mapping[str, tuple[AclEntry, ...]]
    #: the lengths of the PREFIXED names, ascending
    prefix_lengths: tuple[int, ...]
    every: tuple[AclEntry, ...]


class AclIndex:
    """The ACLs of one image, indexed for :meth:`StandardAuthorizer.authorize`."""

    __slots__ = ("sections",)

    def __init__(self, acls: Iterable[AclEntry]) -> None:
        literal: dict[int, dict[str, list[AclEntry]]] = {}
        prefixed: dict[int, dict[str, list[AclEntry]]] = {}
        every: dict[int, list[AclEntry]] = {}
        for acl in acls:
            every.setdefault(acl.resource_type, []).append(acl)
            if acl.pattern_type == PatternType.LITERAL:
                literal.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(acl)
        self.sections: dict[int, _Section] = {}
        for rtype, acl_list in every.items():
            lit = {k: tuple(v) for k, v in literal.get(rtype, {}).items()}
            pre = {k: tuple(v) for k, v in prefixed.get(rtype, {}).items()}
            self.sections[rtype] = _Section(lit, pre, tuple(sorted({len(k) for k in pre})), tuple(acl_list))

    def applicable(self, resource_type: int, name: str) -> list[tuple[AclEntry, ...]]:
        """The groups of ACLs that apply to the resource ``(resource_type, name)``."""
        section = self.sections.get(resource_type)
        if section is None:
            return []
        groups = []
        found = section.literal.get(name)
        if found:
            groups.append(found)
        if name != WILDCARD:
            found = section.literal.get(WILDCARD)
            if found:
                groups.append(found)
        if section.prefix_lengths:
            size = len(name)
            for length in section.prefix_lengths:
                if length > size:
                    break
                found = section.prefixed.get(name[:length])
                if found:
                    groups.append(found)
        return groups


def _matches(acl: AclEntry, principals: tuple[str, str], host: str, operation: int) -> int:
    """0 when ``acl`` does not decide the action, else its permission (ALLOW or DENY)."""
    if acl.principal not in principals:
        return 0
    if acl.host != WILDCARD and acl.host != host:
        return 0
    op = acl.operation
    if op != _ALL:
        if acl.permission_type == _ALLOW:
            if operation == _DESCRIBE:
                if op not in _IMPLIES_DESCRIBE:
                    return 0
            elif operation == _DESCRIBE_CONFIGS:
                if op not in _IMPLIES_DESCRIBE_CONFIGS:
                    return 0
            elif op != operation:
                return 0
        elif op != operation:
            return 0
    return acl.permission_type


class StandardAuthorizer:
    """``super_users``: principals (``User:admin``) allowed everything; ``allow_everyone_if_no_acl_found``:
    a resource without any ACL is open to all (Kafka's default: closed)."""

    def __init__(self, super_users: Iterable[str] = (), *, allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(s.strip() for s in super_users if s.strip())
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._source: Mapping[Any, AclEntry] | None = None
        self._index = AclIndex(())

    def index(self, acls: Mapping[Any, AclEntry]) -> AclIndex:
        """The index of ``acls`` (the image's mapping), rebuilt only when the mapping is a new one."""
        if acls is not self._source:
            self._index = AclIndex(acls.values())
            self._source = acls
        return self._index

    def is_super_user(self, principal: KafkaPrincipal | str) -> bool:
        return str(principal) in self.super_users

    def authorize(self, acls: Mapping[Any, AclEntry], principal: KafkaPrincipal | str, host: str, operation: int,
                  resource_type: int, name: str) -> bool:
        """May ``principal`` connecting from ``host`` (an IP address) do ``operation`` on the resource?"""
        text = str(principal)
        if text in self.super_users:
            return True
        groups = self.index(acls).applicable(resource_type, name)
        if not groups:
            return self.allow_everyone_if_no_acl_found
        principals = (text, WILDCARD_PRINCIPAL)
        allowed = False
        for group in groups:
            for acl in group:
                verdict = _matches(acl, principals, host, operation)
                if verdict == _DENY:
                    return False
                if verdict == _ALLOW:
                    allowed = True
        return allowed

    def authorized_operations(self, acls: Mapping[Any, AclEntry], principal: KafkaPrincipal | str, host: str,
                              resource_type: int, name: str) -> int:
        """Kafka's ``authorized_operations`` bit field: bit ``op`` set for each supported operation allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(acls, principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_any(self, acls: Mapping[Any, AclEntry], principal: KafkaPrincipal | str, host: str,
                      operation: int, resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on at least one resource of
        the type? True when an ALLOW ACL for it exists that no DENY of the same or a shorter pattern covers
        (a DENY on the LITERAL ``*`` covers everything), or when the type has no ACL and
        ``allow.everyone.if.no.acl.found`` is set."""
        text = str(principal)
        if text in self.super_users:
            return True
        section = self.index(acls).sections.get(resource_type)
        if section is None:
            return self.allow_everyone_if_no_acl_found
        principals = (text, WILDCARD_PRINCIPAL)
        allows: list[AclEntry] = []
        denies: list[AclEntry] = []
        for acl in section.every:
            if acl.principal not in principals or (acl.host != WILDCARD and acl.host != host):
                continue
            if acl.operation != _ALL and acl.operation != operation:
                continue
            (allows if acl.permission_type == _ALLOW else denies).append(acl)
        for deny in denies:
            if deny.pattern_type == PatternType.LITERAL and deny.resource_name == WILDCARD:
                return False
        for allow in allows:
            if not any(_covers(deny, allow) for deny in denies):
                return True
        return False


def _covers(deny: AclEntry, allow: AclEntry) -> bool:
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name)
    return allow.pattern_type == PatternType.LITERAL and allow.resource_name == deny.resource_name


def authorizer_from_config(class_name: str | None, super_users: Iterable[str],
                           allow_everyone_if_no_acl_found: bool) -> StandardAuthorizer | None:
    """The node's authorizer from ``authorizer.class.name`` (empty: none, everything is allowed); a ValueError
    names a class klog does not implement."""
    if not class_name:
        return None
    if class_name.strip() != STANDARD_AUTHORIZER:
        raise ValueError(f"{class_name!r}: klog implements {STANDARD_AUTHORIZER} only")
    return StandardAuthorizer(super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)


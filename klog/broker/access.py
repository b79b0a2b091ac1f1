"""The broker's authorization hook: one question, "may this principal, from this host, do this operation on this
resource?" (:meth:`AccessControl.check`), asked by every handler before it serves a resource (and by the native
request path, issue 38).

:class:`AccessControl` holds the node's :class:`klog.security.authorizer.StandardAuthorizer` and reads the ACLs of
the broker's current metadata image on each check (the authorizer re-indexes them only when an ACL record has
changed them); it counts the denials per resource type and operation for the metrics. A broker without
``authorizer.class.name`` has no AccessControl (``broker.access`` is None) and every request is allowed, as
before ACLs existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from klog.security.authorizer import StandardAuthorizer, authorizer_from_config
from klog.security.principal import KafkaPrincipal

__all__ = ["AccessControl", "access_control"]


class AccessControl:
    """``acls()``: the ACLs of the image the broker serves now (``image.acls``)."""

    def __init__(self, authorizer: StandardAuthorizer, acls: Callable[[], Mapping[Any, Any]]) -> None:
        self.authorizer = authorizer
        self._acls = acls
        #: (resource type, operation) -> denied checks since start (klog_authorizer_denied_total)
        self.denied: dict[tuple[int, int], int] = {}
        #: checks answered (allowed or denied)
        self.checks = 0

    def check(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str,
              *, count: bool = True) -> bool:
        """The hook: may ``principal`` from ``host`` do ``operation`` on ``(resource_type, name)``?
        ``count=False`` for checks that only shape an answer (authorized_operations, listing filters)."""
        self.checks += 1
        ok = self.authorizer.authorize(self._acls(), principal, host, operation, resource_type, name)
        if not ok and count:
            key = (resource_type, operation)
            self.denied[key] = self.denied.get(key, 0) + 1
        return ok

    def check_any(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int) -> bool:
        return self.authorizer.authorize_any(self._acls(), principal, host, operation, resource_type)

    def operations(self, principal: KafkaPrincipal, host: str, resource_type: int, name: str) -> int:
        return self.authorizer.authorized_operations(self._acls(), principal, host, resource_type, name)


def access_control(config: Mapping[str, Any], acls: Callable[[], Mapping[Any, Any]]) -> AccessControl | None:
    """The node's hook from its config (``authorizer.class.name``, ``super.users``,
    ``allow.everyone.if.no.acl.found``), None without an authorizer."""
    authorizer = authorizer_from_config(config["authorizer.class.name"], config["super.users"].split(";"),
                                        config["allow.everyone.if.no.acl.found"])
    return None if authorizer is None else AccessControl(authorizer, acls)

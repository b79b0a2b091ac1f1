"""Who a controller-listener connection is, and what it may do there (Kafka's ``ControllerApis`` with its
``AuthHelper``), on every security protocol.

The principal: ``User:ANONYMOUS`` on ``PLAINTEXT``; on ``SSL`` the client certificate's subject after the listener's
``ssl.principal.mapping.rules`` (``User:ANONYMOUS`` without a certificate), as on the broker listeners; on
``SASL_PLAINTEXT``/``SASL_SSL`` the logged-in user (:class:`klog.controller.listener_login.ControllerLogin`).

With ``authorizer.class.name`` set each request is authorized as Kafka 4.3's controller does
(:data:`CLUSTER_OPERATION_NEEDED`): the nodes' own requests (broker registrations and heartbeats, AlterPartition,
AllocateProducerIds, AssignReplicasToDirs, UpdateRaftVoter, envelopes) and the Raft and observer connections need
ClusterAction on the Cluster, UnregisterBroker, AddRaftVoter/RemoveRaftVoter and DescribeCluster Alter, DescribeQuorum Describe; the
admin requests sent to the listener directly (``--bootstrap-controller``) are authorized as their sender with the
ACLs Kafka checks for each (:mod:`klog.controller.authorize`). Until the controller's metadata image holds the
ACLs only ``super.users`` pass, so a PLAINTEXT controller listener needs ``super.users=User:ANONYMOUS``, as on
Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from klog.metadata.config import BrokerConfig, ConfigError
from klog.protocol.errors import ErrorCode
from klog.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from klog.security.authorizer import StandardAuthorizer, authorizer_from_config
from klog.security.principal import ANONYMOUS, KafkaPrincipal
from klog.security.tls import PrincipalMapper, TlsConfigError

if TYPE_CHECKING:
    import asyncio

__all__ = ["CLUSTER_OPERATION_NEEDED", "TOKEN_APIS", "ControllerAccess", "peer_host"]

log = logging.getLogger("klog.controller.access")

#: the Cluster operation each API the controller listener serves itself needs (Kafka 4.3's ControllerApis; None:
#: nothing). The admin APIs it decides for brokers (CreateTopics, CreateAcls, ...) are authorized per API by
#: klog.controller.authorize instead.
CLUSTER_OPERATION_NEEDED: dict[int, int | None] = {
    18: None,                              # ApiVersions
    55: AclOperation.DESCRIBE,             # DescribeQuorum
    60: AclOperation.ALTER,                # DescribeCluster ("unlike on the broker", Kafka's comment says)
    64: AclOperation.ALTER,                # UnregisterBroker
    80: AclOperation.ALTER,                # AddRaftVoter
    81: AclOperation.ALTER,                # RemoveRaftVoter
    56: AclOperation.CLUSTER_ACTION,       # AlterPartition
    58: AclOperation.CLUSTER_ACTION,       # Envelope (then its request is authorized as the principal it names)
    62: AclOperation.CLUSTER_ACTION,       # BrokerRegistration
    63: AclOperation.CLUSTER_ACTION,       # BrokerHeartbeat
    67: AclOperation.CLUSTER_ACTION,       # AllocateProducerIds
    73: AclOperation.CLUSTER_ACTION,       # AssignReplicasToDirs
    82: AclOperation.CLUSTER_ACTION,       # UpdateRaftVoter
}


#: CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken: sent directly, Kafka's controller refuses them
#: where a token could not be safely handed out (``ControllerApis.allowTokenRequests``)
TOKEN_APIS = frozenset({38, 39, 40})


def peer_host(peer: Any) -> str:
    """The client address of a peer name (``writer.get_extra_info("peername")``)."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


class ControllerAccess:
    """A controller listener's principals and authorization. ``image_of()``: the controller's metadata image (its
    ACLs), None before it has one; ``authorizer`` None: everything is allowed; ``principal_mapper``: an SSL
    listener's ``ssl.principal.mapping.rules`` (None: every connection not logged in is ``User:ANONYMOUS``)."""

    def __init__(self, listener: str, image_of: Callable[[], Any], *, authorizer: StandardAuthorizer | None = None,
                 principal_mapper: PrincipalMapper | None = None, protocol: str = "PLAINTEXT") -> None:
        self.listener = listener
        self.protocol = protocol
        self.image_of = image_of
        self.authorizer = authorizer
        self.principal_mapper = principal_mapper
        #: requests and connections refused for want of an ACL (what the log lines count)
        self.refused_unauthorized = 0

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str, protocol: str, image_of: Callable[[], Any]
                    ) -> ControllerAccess:
        try:
            authorizer = authorizer_from_config(config["authorizer.class.name"], config["super.users"].split(";"),
                                                config["allow.everyone.if.no.acl.found"])
        except ValueError as exc:
            raise ConfigError("authorizer.class.name", str(exc)) from None
        mapper = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                mapper = PrincipalMapper(config.listener_security(listener)["ssl.principal.mapping.rules"])
            except TlsConfigError as exc:
                raise ConfigError(f"listener.name.{listener.lower()}.ssl.principal.mapping.rules",
                                  str(exc).partition(": ")[2] or str(exc)) from None
        return cls(listener, image_of, authorizer=authorizer, principal_mapper=mapper, protocol=protocol)

    def principal_of(self, writer: asyncio.StreamWriter) -> KafkaPrincipal:
        """The principal of a connection that did not log in: its client certificate's on an SSL listener (mapped
        as the broker listeners map it), else ``User:ANONYMOUS``."""
        if self.principal_mapper is None:
            return ANONYMOUS
        try:
            principal = self.principal_mapper.principal(writer.get_extra_info("peercert"))
        except Exception:   # an unmappable certificate: ANONYMOUS, as Kafka without a matching rule
            principal = None
        return principal or ANONYMOUS

    def may(self, principal: KafkaPrincipal, host: str, operation: int = AclOperation.CLUSTER_ACTION,
            resource_type: int = ResourceType.CLUSTER, name: str = CLUSTER_NAME) -> bool:
        """May ``principal`` from ``host`` do ``operation`` on the resource (True without an authorizer)?"""
        if self.authorizer is None:
            return True
        image = self.image_of()
        acls = image.acls if image is not None else {}
        return self.authorizer.authorize(acls, principal, host, operation, resource_type, name)

    def token_refusal(self, api_key: int, request: Any, principal: KafkaPrincipal, host: str
                      ) -> dict[str, Any] | None:
        """The answer refusing a delegation-token request sent to this listener directly (Kafka's controller: not
        on PLAINTEXT, not as ANONYMOUS on SSL; a token for another owner needs CreateTokens on that User), None
        when it may go on."""
        code: int = ErrorCode.NONE
        if self.protocol == "PLAINTEXT" or (self.protocol == "SSL" and principal == ANONYMOUS):
            code = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        owner = principal
        if api_key == 38 and getattr(request, "owner_principal_name", None):
            owner = KafkaPrincipal(request.owner_principal_type or "User", request.owner_principal_name)
            if not code and owner != principal and not self.may(principal, host, AclOperation.CREATE_TOKENS,
                                                                 ResourceType.USER, str(owner)):
                code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        if not code:
            return None
        if api_key == 38:
            return {"error_code": code, "principal_type": owner.principal_type, "principal_name": owner.name,
                    "token_requester_principal_type": principal.principal_type,
                    "token_requester_principal_name": principal.name, "issue_timestamp_ms": -1,
                    "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "", "hmac": b"",
                    "throttle_time_ms": 0}
        return {"error_code": code, "expiry_timestamp_ms": -1, "throttle_time_ms": 0}

    def refuse_unauthorized(self, principal: KafkaPrincipal, peer: Any, what: str,
                            operation: int = AclOperation.CLUSTER_ACTION) -> None:
        self.refused_unauthorized += 1
        needed = "".join(part.title() for part in AclOperation(operation).name.split("_"))   # Kafka's spelling
        log.warning("controller listener %s: refused %s from %s as %s: it needs %s on the Cluster (name the nodes' "
                    "principals in super.users: User:ANONYMOUS on a PLAINTEXT listener)", self.listener, what,
                    _peer_text(peer), principal, needed)


def _peer_text(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)

"""Delegation tokens (Kafka's ``DelegationTokenControlManager``): CreateDelegationToken, RenewDelegationToken and
ExpireDelegationToken decided on the committed image as ``DelegationTokenRecord``/``RemoveDelegationTokenRecord``,
and the periodic removal of expired tokens (``delegation.token.expiry.check.interval.ms``).

The records never hold a token's HMAC: the controller computes it for CreateDelegationToken's answer and to find
the token a Renew/Expire request names by its HMAC, from ``delegation.token.secret.key`` as every broker does
(:mod:`klog.security.tokens`).

Pure: no IO, the time is an argument; the caller commits the records (klog.controller.apis.ControllerApis).
"""

from __future__ import annotations

import hmac as _hmac
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klog.controller.result import ControllerResult, empty
from klog.metadata.image import DelegationToken, MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.metadata.storage import kafka_uuid
from klog.protocol.errors import ErrorCode
from klog.security.principal import ANONYMOUS, KafkaPrincipal
from klog.security.tokens import token_hmac

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreateDelegationTokenRequest,
        CreateDelegationTokenResponse,
        ExpireDelegationTokenResponse,
        RenewDelegationTokenResponse,
    )

__all__ = ["TokenSettings", "create_delegation_token", "create_refusal", "expire_delegation_token",
           "expired_tokens", "renew_delegation_token", "requested_owner", "token_by_hmac"]

NONE = ErrorCode.NONE
USER_TYPE = "User"


@dataclass(frozen=True)
class TokenSettings:
    """The controller's ``delegation.token.*`` settings (``secret_key`` None: tokens are disabled)."""

    secret_key: str | None
    max_lifetime_ms: int
    expiry_time_ms: int


def _token_record(token_id: str, token: DelegationToken) -> MetadataRecord:
    return record("DelegationTokenRecord", owner=token.owner, requester=token.requester,
                  renewers=list(token.renewers), issue_timestamp=token.issue_timestamp,
                  max_timestamp=token.max_timestamp, expiration_timestamp=token.expiration_timestamp,
                  token_id=token_id)


def token_by_hmac(secret_key: str, hmac: bytes, image: MetadataImage) -> tuple[str, DelegationToken] | None:
    """The token whose HMAC is ``hmac`` (Kafka's ``tokenForHmac``), or None."""
    for token_id, token in image.delegation_tokens.items():
        if _hmac.compare_digest(token_hmac(secret_key, token_id), hmac):
            return token_id, token
    return None


def requested_owner(request: CreateDelegationTokenRequest, requester: KafkaPrincipal) -> KafkaPrincipal | None:
    """A new token's owner: the one the request names (v3) or the requester; None for an owner named without a
    type (Kafka cannot make that principal and answers UNKNOWN_SERVER_ERROR, see :func:`create_refusal`)."""
    if not request.owner_principal_name:
        return requester
    if request.owner_principal_type is None:
        return None
    return KafkaPrincipal(request.owner_principal_type, request.owner_principal_name)


def create_refusal(code: int, owner: KafkaPrincipal = ANONYMOUS, requester: KafkaPrincipal = ANONYMOUS
                   ) -> CreateDelegationTokenResponse:
    """CreateDelegationToken refused as Kafka's brokers refuse it (no token, times -1); a request Kafka cannot
    handle names ANONYMOUS as owner and requester."""
    return {"error_code": code, "principal_type": owner.principal_type, "principal_name": owner.name,
            "token_requester_principal_type": requester.principal_type,
            "token_requester_principal_name": requester.name, "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1,
            "max_timestamp_ms": -1, "token_id": "", "hmac": b"", "throttle_time_ms": 0}


def create_delegation_token(request: CreateDelegationTokenRequest, requester: KafkaPrincipal, owner: KafkaPrincipal,
                            settings: TokenSettings, now_ms: int, *, token_id: str | None = None
                            ) -> ControllerResult[CreateDelegationTokenResponse]:
    """A new token of ``owner`` (:func:`requested_owner`), renewable by the request's renewers, for
    ``max_lifetime_ms`` (capped by ``delegation.token.max.lifetime.ms``) and expiring
    ``delegation.token.expiry.time.ms`` from now unless renewed."""
    response = create_refusal(NONE, owner, requester)
    # Kafka's broker refuses a renewer that is not a User before forwarding (its times -1); the controller then
    # answers a disabled feature with its response's defaults (times 0)
    renewers: list[str] = []
    for renewer in request.renewers:
        if renewer.principal_type != USER_TYPE:
            response["error_code"] = ErrorCode.INVALID_PRINCIPAL_TYPE
            return empty(response)
        renewers.append(str(KafkaPrincipal(renewer.principal_type, renewer.principal_name)))
    if settings.secret_key is None:
        response.update({"error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, "issue_timestamp_ms": 0,
                         "expiry_timestamp_ms": 0, "max_timestamp_ms": 0})
        return empty(response)
    max_life = settings.max_lifetime_ms
    if request.max_lifetime_ms > 0:
        max_life = min(max_life, int(request.max_lifetime_ms))
    max_timestamp = now_ms + max_life
    expiry = min(max_timestamp, now_ms + settings.expiry_time_ms)
    token_id = token_id or kafka_uuid(uuid.uuid4())   # Kafka's Uuid.randomUuid().toString(): base64url
    token = DelegationToken(str(owner), str(requester), tuple(renewers), now_ms, max_timestamp, expiry)
    response.update({"issue_timestamp_ms": now_ms, "expiry_timestamp_ms": expiry, "max_timestamp_ms": max_timestamp,
                     "token_id": token_id, "hmac": token_hmac(settings.secret_key, token_id)})
    return ControllerResult([_token_record(token_id, token)], response)


def _owner_or_renewer(token: DelegationToken, principal: KafkaPrincipal) -> bool:
    """Kafka's ``allowedToRenew``: the token's owner or one of its renewers."""
    name = str(principal)
    return token.owner == name or name in token.renewers


def _expired(token: DelegationToken, now_ms: int) -> bool:
    return token.max_timestamp < now_ms or token.expiration_timestamp < now_ms


def _find(hmac: bytes, principal: KafkaPrincipal, settings: TokenSettings, image: MetadataImage, now_ms: int,
          *, expired_first: bool = True) -> tuple[str, DelegationToken] | int:
    """The token a Renew/Expire request names and may change, or the error code answering it. Kafka's Renew
    refuses an expired token before a principal that may not renew it; its Expire checks the principal only
    (the expiry is checked by :func:`expire_delegation_token`)."""
    if settings.secret_key is None:
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    found = token_by_hmac(settings.secret_key, hmac, image)
    if found is None:
        return ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    token = found[1]
    if expired_first and _expired(token, now_ms):
        return ErrorCode.DELEGATION_TOKEN_EXPIRED
    if not _owner_or_renewer(token, principal):
        return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    return found


#: a refused Renew/Expire: Kafka's controller answers its response's default expiry, 0
_REFUSED_EXPIRY = 0


def renew_delegation_token(hmac: bytes, renew_period_ms: int, principal: KafkaPrincipal, settings: TokenSettings,
                           image: MetadataImage, now_ms: int) -> ControllerResult[RenewDelegationTokenResponse]:
    """The token's expiry moved to now + ``renew_period_ms`` (at most ``delegation.token.expiry.time.ms``; 0 or
    less: that default), never past its max timestamp."""
    found = _find(hmac, principal, settings, image, now_ms)
    if isinstance(found, int):
        return empty({"error_code": found, "expiry_timestamp_ms": _REFUSED_EXPIRY, "throttle_time_ms": 0})
    token_id, token = found
    period = settings.expiry_time_ms if renew_period_ms <= 0 else min(settings.expiry_time_ms, renew_period_ms)
    expiry = min(token.max_timestamp, now_ms + period)
    renewed = DelegationToken(token.owner, token.requester, token.renewers, token.issue_timestamp,
                              token.max_timestamp, expiry)
    return ControllerResult([_token_record(token_id, renewed)],
                            {"error_code": NONE, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0})


def expire_delegation_token(hmac: bytes, expiry_time_period_ms: int, principal: KafkaPrincipal,
                            settings: TokenSettings, image: MetadataImage, now_ms: int
                            ) -> ControllerResult[ExpireDelegationTokenResponse]:
    """A negative ``expiry_time_period_ms`` removes the token at once, even one already expired
    (RemoveDelegationTokenRecord, answered with the current time as Kafka 4.3 does); otherwise an expired token
    is refused and a live one's expiry becomes now + the period, never past its max timestamp."""
    found = _find(hmac, principal, settings, image, now_ms, expired_first=False)
    if isinstance(found, int):
        return empty({"error_code": found, "expiry_timestamp_ms": _REFUSED_EXPIRY, "throttle_time_ms": 0})
    token_id, token = found
    if expiry_time_period_ms < 0:
        return ControllerResult([record("RemoveDelegationTokenRecord", token_id=token_id)],
                                {"error_code": NONE, "expiry_timestamp_ms": now_ms, "throttle_time_ms": 0})
    if _expired(token, now_ms):
        return empty({"error_code": ErrorCode.DELEGATION_TOKEN_EXPIRED, "expiry_timestamp_ms": _REFUSED_EXPIRY,
                      "throttle_time_ms": 0})
    expiry = min(token.max_timestamp, now_ms + expiry_time_period_ms)
    changed = DelegationToken(token.owner, token.requester, token.renewers, token.issue_timestamp,
                              token.max_timestamp, expiry)
    return ControllerResult([_token_record(token_id, changed)],
                            {"error_code": NONE, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0})


def expired_tokens(image: MetadataImage, now_ms: int) -> ControllerResult[list[str]]:
    """The periodic check (Kafka's ``sweepExpiredDelegationTokens``): a RemoveDelegationTokenRecord for each
    token past its expiry or max timestamp; the response lists their ids."""
    gone = sorted(token_id for token_id, token in image.delegation_tokens.items() if _expired(token, now_ms))
    return ControllerResult([record("RemoveDelegationTokenRecord", token_id=t) for t in gone], gone)

"""Delegation tokens (KIP-48): CreateDelegationToken (38), RenewDelegationToken (39) and ExpireDelegationToken
(40), checked here as Kafka's brokers check them and decided by the active controller (klog.controller.tokens:
DelegationTokenRecords in the metadata log), and DescribeDelegationToken (41), answered from this broker's image.

As Kafka: no token request on a PLAINTEXT connection, a one-way SSL one (ANONYMOUS) or a connection that logged in
with a token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a token for another owner needs CreateTokens on that User;
DescribeDelegationToken lists the tokens the principal owns, requested or may renew, and the others only with
Describe on the DelegationToken (its id) or DescribeTokens on the owner's User resource.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, Union, cast

from klog.broker import errors
from klog.broker.handlers import RequestContext, authz, handler
from klog.broker.handlers.context import HandlerBroker
from klog.controller.apis import CONTROLLER_API_VERSIONS
from klog.controller.tokens import create_refusal, requested_owner
from klog.protocol.errors import ErrorCode
from klog.security.acl import AclOperation, ResourceType
from klog.security.principal import ANONYMOUS, KafkaPrincipal
from klog.security.tokens import token_hmac, token_secret_key

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreateDelegationTokenRequest,
        CreateDelegationTokenResponse,
        DescribeDelegationTokenRequest,
        DescribeDelegationTokenResponse,
        DescribeDelegationTokenResponseDescribedDelegationToken,
        ExpireDelegationTokenRequest,
        ExpireDelegationTokenResponse,
        RenewDelegationTokenRequest,
        RenewDelegationTokenResponse,
    )

R = TypeVar("R")
#: the token requests the active controller decides
TokenRequest = Union["CreateDelegationTokenRequest", "RenewDelegationTokenRequest", "ExpireDelegationTokenRequest"]


def token_requests_allowed(broker: HandlerBroker, ctx: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``: not over PLAINTEXT, not over SSL without a client certificate, not as a
    principal that logged in with a token (tokens cannot make tokens)."""
    protocol = next((lst.security_protocol for lst in broker.config.listeners if lst.name == ctx.listener),
                    "PLAINTEXT")
    if ctx.principal.token_authenticated or protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and ctx.principal == ANONYMOUS)


async def _decide(broker: HandlerBroker, ctx: RequestContext, request: TokenRequest,
                  local: Callable[[], Awaitable[R]]) -> R:
    """The active controller's answer: in process on a single voter (or while this node leads), else forwarded
    in an EnvelopeRequest naming the client's principal (KIP-590)."""
    forwarder = broker.forwarder
    if forwarder is None:
        return await local()
    return cast(R, await forwarder.handle(int(ctx.header.api_key), ctx.api_version, ctx.header.client_id, request,
                                          local, principal=ctx.principal, client_host=ctx.client_host))


@handler(38, *CONTROLLER_API_VERSIONS[38])
async def handle_create_delegation_token(broker: HandlerBroker, ctx: RequestContext,
                                         request: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    requester = ctx.principal
    owner = requested_owner(request, requester)
    if owner is None:   # an owner named without a type
        return create_refusal(ErrorCode.UNKNOWN_SERVER_ERROR)
    if not token_requests_allowed(broker, ctx):
        return create_refusal(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    # a principal may always make its own tokens; another's need CreateTokens on that User
    if owner != requester and not authz.allowed(broker, ctx, AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                str(owner)):
        return create_refusal(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    return await _decide(broker, ctx, request,
                         lambda: broker.controller_apis.create_delegation_token(request, requester))


async def _change_expiry(broker: HandlerBroker, ctx: RequestContext, request: TokenRequest, refused: R,
                         decide: Callable[[KafkaPrincipal], Awaitable[R]]) -> R:
    """Renew and Expire alike: ``refused`` where token requests are not allowed on this connection, else the
    controller's decision for the requesting principal."""
    if not token_requests_allowed(broker, ctx):
        return refused
    principal = ctx.principal
    return await _decide(broker, ctx, request, lambda: decide(principal))


@handler(39, *CONTROLLER_API_VERSIONS[39])
async def handle_renew_delegation_token(broker: HandlerBroker, ctx: RequestContext,
                                        request: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse:
    return await _change_expiry(broker, ctx, request, {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                                       "expiry_timestamp_ms": -1, "throttle_time_ms": 0},
                                lambda who: broker.controller_apis.renew_delegation_token(request, who))


@handler(40, *CONTROLLER_API_VERSIONS[40])
async def handle_expire_delegation_token(broker: HandlerBroker, ctx: RequestContext,
                                         request: ExpireDelegationTokenRequest) -> ExpireDelegationTokenResponse:
    return await _change_expiry(broker, ctx, request, {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                                       "expiry_timestamp_ms": -1, "throttle_time_ms": 0},
                                lambda who: broker.controller_apis.expire_delegation_token(request, who))


@handler(41, 1, 3)
def handle_describe_delegation_token(broker: HandlerBroker, ctx: RequestContext,
                                     request: DescribeDelegationTokenRequest) -> DescribeDelegationTokenResponse:
    if not token_requests_allowed(broker, ctx):
        return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "tokens": [], "throttle_time_ms": 0}
    secret = token_secret_key(broker.config)
    if secret is None:
        return {"error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, "tokens": [], "throttle_time_ms": 0}
    owners = None if request.owners is None else \
        {str(KafkaPrincipal(o.principal_type, o.principal_name)) for o in request.owners}
    me = str(ctx.principal)
    tokens: list[DescribeDelegationTokenResponseDescribedDelegationToken] = []
    by_issue = sorted(broker.metadata.image.delegation_tokens.items(), key=lambda kv: (kv[1].issue_timestamp, kv[0]))
    for token_id, token in by_issue:
        concerned = {token.owner, token.requester, *token.renewers}   # Kafka's TokenInformation.ownerOrRenewer
        if owners is not None and not owners & concerned:
            continue
        if me not in concerned and not (
                authz.allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id,
                              count=False)
                or authz.allowed(broker, ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner,
                                 count=False)):
            continue
        owner = KafkaPrincipal.stored(token.owner)
        requester = KafkaPrincipal.stored(token.requester) if token.requester else owner
        tokens.append({
            "principal_type": owner.principal_type, "principal_name": owner.name,
            "token_requester_principal_type": requester.principal_type,
            "token_requester_principal_name": requester.name, "issue_timestamp": token.issue_timestamp,
            "expiry_timestamp": token.expiration_timestamp, "max_timestamp": token.max_timestamp,
            "token_id": token_id, "hmac": token_hmac(secret, token_id),
            "renewers": [{"principal_type": r.principal_type, "principal_name": r.name}
                         for r in map(KafkaPrincipal.stored, token.renewers)]})
    return {"error_code": errors.NONE, "tokens": tokens, "throttle_time_ms": 0}

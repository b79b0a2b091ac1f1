"""SaslHandshake (17) and SaslAuthenticate (36): a client's login on a SASL listener (KIP-152 framing: the tokens
travel in SaslAuthenticate requests), and KIP-368 re-authentication.

Each connection of a SASL listener has a :class:`ConnectionAuth` (``ctx.session``); the SASL mechanics are
:class:`klog.security.sasl.SaslSession`'s. A failed login is answered SASL_AUTHENTICATION_FAILED after
``connection.failed.authentication.delay.ms``, logged once without secrets, and the connection is then closed
(as Kafka does). On any other listener both APIs answer ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from klog.broker import errors
from klog.protocol.errors import ErrorCode
from klog.broker.handlers import CloseConnection, RequestContext, handler
from klog.broker.handlers.context import HandlerBroker
from klog.security.principal import KafkaPrincipal
from klog.security.sasl import AuthenticationFailed, SaslSession, principal_changed, reauth_mechanism_refusal

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

log = logging.getLogger("klog.broker.sasl")

ILLEGAL_SASL_STATE = ErrorCode.ILLEGAL_SASL_STATE
UNSUPPORTED_SASL_MECHANISM = ErrorCode.UNSUPPORTED_SASL_MECHANISM
#: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a connection starts at most one re-authentication a
#: second
MIN_REAUTH_INTERVAL_S = 1.0
SASL_AUTHENTICATION_FAILED = ErrorCode.SASL_AUTHENTICATION_FAILED


class ConnectionAuth:
    """One SASL connection's login state: the session in progress, the principal once authenticated, when the
    session expires (``connections.max.reauth.ms``), and whether the connection must close after the answer."""

    def __init__(self, listener: str, new_session: Callable[[], SaslSession], *, failed_delay_s: float,
                 reauth_ms: int, max_receive_size: int) -> None:
        self.listener = listener
        self._new_session = new_session
        self.session: SaslSession | None = None
        self.failed_delay_s = failed_delay_s
        self.reauth_ms = reauth_ms
        self.max_receive_size = max_receive_size
        self.principal: KafkaPrincipal | None = None
        #: the SASL mechanism of the connection's first login: a re-authentication must use it (as Kafka)
        self.mechanism: str | None = None
        #: a re-authentication's SaslHandshake named another mechanism: Kafka answers it, then ends the connection
        #: at its next request without an answer (after ``connection.failed.authentication.delay.ms``); the reason
        self.refused: str | None = None
        #: monotonic time the session ends (None: never)
        self.expires_at: float | None = None
        #: when this connection last started a re-authentication (monotonic seconds; None: never)
        self.last_reauth_start: float | None = None
        #: the answer just sent ends the connection (a failed login, an unsupported mechanism)
        self.close_after_answer = False
        self.close_reason = ""

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def fail(self, reason: str) -> None:
        self.close_after_answer = True
        self.close_reason = reason

    @property
    def in_login(self) -> bool:
        """Between a SaslHandshake and the SaslAuthenticate completing its login (also a KIP-368
        re-authentication's): Kafka's SaslServerAuthenticator is in its AUTHENTICATE state."""
        session = self.session
        return session is not None and session.mechanism is not None and not session.authenticated


def _handshake_answer(code: int, mechanisms: list[str]) -> SaslHandshakeResponse:
    return {"error_code": code, "mechanisms": mechanisms}


@handler(17, 0, 1)
def handle_sasl_handshake(broker: HandlerBroker, ctx: RequestContext, request: SaslHandshakeRequest
                          ) -> SaslHandshakeResponse:
    auth: ConnectionAuth | None = ctx.session
    if auth is None:
        return _handshake_answer(ILLEGAL_SASL_STATE, [])
    if auth.session is not None and auth.session.mechanism is not None and not auth.session.authenticated:
        auth.fail("SaslHandshake twice in one login")
        return _handshake_answer(ILLEGAL_SASL_STATE, [])
    if auth.authenticated:
        # KIP-368 re-authentication, only when sessions expire and at most once a second; otherwise Kafka handles
        # the handshake as any request of an authenticated connection: ILLEGAL_SASL_STATE, the connection open
        now = time.monotonic()
        if auth.expires_at is None or (auth.last_reauth_start is not None
                                       and now - auth.last_reauth_start < MIN_REAUTH_INTERVAL_S):
            return _handshake_answer(ILLEGAL_SASL_STATE, [])
        auth.last_reauth_start = now
    reauthenticating = auth.authenticated
    session = auth._new_session()
    if ctx.api_version == 0:
        # v0 handshakes are followed by raw tokens without a request header (before KIP-152): not served
        auth.fail("SaslHandshake v0 (raw SASL tokens) is not supported; clients since Kafka 1.0 use v1")
        return _handshake_answer(ILLEGAL_SASL_STATE, session.enabled)
    mechanism = request.mechanism
    if not session.handshake(mechanism):
        if reauthenticating:   # Kafka fails a re-authentication's handshake without an answer
            raise CloseConnection(f"unsupported SASL mechanism {mechanism!r} in a re-authentication")
        auth.fail(f"unsupported SASL mechanism {mechanism!r}")
        return _handshake_answer(UNSUPPORTED_SASL_MECHANISM, session.enabled)
    if reauthenticating and auth.mechanism is not None:
        refused = reauth_mechanism_refusal(auth.mechanism, mechanism)
        if refused is not None:
            # answered, as Kafka's SaslServerAuthenticator does, but no longer authenticated: the connection's
            # next request ends it (klog/broker/network/connection.py)
            auth.refused, auth.principal, auth.session = refused, None, None
            return _handshake_answer(errors.NONE, session.enabled)
    auth.session = session
    return _handshake_answer(errors.NONE, session.enabled)


def _authenticate_answer(code: int, message: str | None, token: bytes = b"",
                         lifetime_ms: int = 0) -> SaslAuthenticateResponse:
    return {"error_code": code, "error_message": message, "auth_bytes": token, "session_lifetime_ms": lifetime_ms}


@handler(36, 0, 2)
async def handle_sasl_authenticate(broker: HandlerBroker, ctx: RequestContext, request: SaslAuthenticateRequest
                                   ) -> SaslAuthenticateResponse:
    auth: ConnectionAuth | None = ctx.session
    if auth is None:
        return _authenticate_answer(ILLEGAL_SASL_STATE, "SaslAuthenticate on a listener without SASL")
    session = auth.session
    if session is None or session.mechanism is None or session.authenticated:
        auth.fail("SaslAuthenticate without a SaslHandshake")
        return _authenticate_answer(ILLEGAL_SASL_STATE, "Unexpected SASL request: send SaslHandshake first")
    token = bytes(request.auth_bytes or b"")
    try:
        if len(token) > auth.max_receive_size:
            raise AuthenticationFailed(f"Authentication failed during authentication due to: SASL token of "
                                       f"{len(token)} bytes is above sasl.server.max.receive.size",
                                       f"SASL token of {len(token)} bytes")
        # a JWKS-checked OAUTHBEARER token may need the key set fetched: off the event loop
        answer = await asyncio.to_thread(session.authenticate, token) if session.blocking \
            else session.authenticate(token)
        principal = session.principal
        if principal is not None and auth.principal is not None and principal != auth.principal:
            raise principal_changed(auth.principal, principal)
    except AuthenticationFailed as exc:
        log.warning("failed authentication from %s:%d on listener %s (%s): %s", ctx.client_host, ctx.client_port,
                    auth.listener, session.mechanism, exc.log_reason)
        auth.fail(f"failed authentication ({session.mechanism})")
        if auth.failed_delay_s > 0:
            await asyncio.sleep(auth.failed_delay_s)
        return _authenticate_answer(SASL_AUTHENTICATION_FAILED, str(exc))
    lifetime_ms = 0
    if principal is not None:
        auth.principal = principal
        auth.mechanism = session.mechanism
        # connections.max.reauth.ms, no later than a token's expiry (as Kafka's, also without the setting)
        lifetime = session.session_lifetime_ms(auth.reauth_ms)
        auth.expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000
        lifetime_ms = lifetime or 0
    return _authenticate_answer(errors.NONE, None, answer, lifetime_ms if ctx.api_version >= 1 else 0)

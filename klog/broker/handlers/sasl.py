"""SaslHandshake (17) and SaslAuthenticate (36): a client's login on a SASL listener (KIP-152 framing: the tokens
travel in SaslAuthenticate requests), and KIP-368 re-authentication.

Each connection of a SASL listener has a :class:`ConnectionAuth` (``ctx.session``); the SASL mechanics are
:class:`klog.security.sasl.SaslSession`'s. A failed login is answered SASL_AUTHENTICATION_FAILED after
``connection.failed.authentication.delay.ms``, logged once without secrets, and the connection is then closed
(as Kafka does). After SaslHandshake v0 the tokens travel as bare frames (before KIP-152), which the connection
hands to :func:`authenticate_raw_token`. On any other listener, and on an authenticated connection outside a
KIP-368 re-authentication, both APIs answer ILLEGAL_SASL_STATE (Kafka's KafkaApis).
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
SASL_HANDSHAKE_KEY = 17
API_VERSIONS_KEY = 18
#: Kafka's answer (KafkaApis) to a SaslAuthenticate outside a login: on an authenticated connection, on a listener
#: without SASL
AUTHENTICATE_AFTER_LOGIN = "SaslAuthenticate request received after successful authentication"


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
        #: an ApiVersions request was answered before the login: Kafka takes no second one
        self.api_versions_answered = False
        #: SaslHandshake v0 chose the mechanism: the login's tokens come as bare frames (before KIP-152), no
        #: request header, answered as bare frames
        self.raw_tokens = False

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def fail(self, reason: str) -> None:
        self.close_after_answer = True
        self.close_reason = reason

    def refusal_before_login(self, api_key: int) -> str | None:
        """Why a request before the login's SaslHandshake closes the connection unanswered, as Kafka's
        SaslServerAuthenticator: only one answered ApiVersions and the SaslHandshake may come first. None: served."""
        if api_key == SASL_HANDSHAKE_KEY or (api_key == API_VERSIONS_KEY and not self.api_versions_answered):
            return None
        if api_key == API_VERSIONS_KEY:
            return "a second ApiVersions request before SASL authentication"
        return f"unexpected request (api key {api_key}) before SASL authentication"

    def frame_limit(self, max_frame_bytes: int) -> int:
        """The largest request frame the connection takes now: ``sasl.server.max.receive.size`` until the login (or
        a re-authentication) is complete, as Kafka's SaslServerAuthenticator reads them; then ``max_frame_bytes``
        (socket.request.max.bytes)."""
        if self.authenticated and not self.in_login:
            return max_frame_bytes
        return min(self.max_receive_size, max_frame_bytes)

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
    # v0: the login's tokens follow as bare frames (klog/broker/network/connection.py serves them)
    auth.raw_tokens = ctx.api_version == 0
    return _handshake_answer(errors.NONE, session.enabled)


def _authenticate_answer(code: int, message: str | None, token: bytes = b"",
                         lifetime_ms: int = 0) -> SaslAuthenticateResponse:
    return {"error_code": code, "error_message": message, "auth_bytes": token, "session_lifetime_ms": lifetime_ms}


@handler(36, 0, 2)
async def handle_sasl_authenticate(broker: HandlerBroker, ctx: RequestContext, request: SaslAuthenticateRequest
                                   ) -> SaslAuthenticateResponse:
    auth: ConnectionAuth | None = ctx.session
    if auth is None or (auth.authenticated and not auth.in_login):
        return _authenticate_answer(ILLEGAL_SASL_STATE, AUTHENTICATE_AFTER_LOGIN)
    try:
        answer, lifetime_ms = await authenticate_token(auth, bytes(request.auth_bytes or b""), ctx.client_host,
                                                       ctx.client_port)
    except AuthenticationFailed as exc:
        return _authenticate_answer(SASL_AUTHENTICATION_FAILED, str(exc))
    # Kafka's answer carries an empty message, not a null one
    return _authenticate_answer(errors.NONE, "", answer, lifetime_ms if ctx.api_version >= 1 else 0)


async def authenticate_token(auth: ConnectionAuth, token: bytes, client_host: str, client_port: int
                             ) -> tuple[bytes, int]:
    """One token of the connection's login (a SaslAuthenticate's, or a bare frame after SaslHandshake v0): the
    answer token and, once the login is complete, the session's lifetime in ms (0: none, or not complete). A
    refused login raises AuthenticationFailed (the client's message) after it was logged and
    connection.failed.authentication.delay.ms passed; the connection is then closed after the answer."""
    session = auth.session
    if session is None or session.mechanism is None or session.authenticated:
        # the connection closes it unanswered before the handshake (ConnectionAuth.refusal_before_login)
        raise CloseConnection("SaslAuthenticate without a SaslHandshake")
    try:
        # a JWKS-checked OAUTHBEARER token may need the key set fetched: off the event loop
        answer = await asyncio.to_thread(session.authenticate, token) if session.blocking \
            else session.authenticate(token)
        principal = session.principal
        if principal is not None and auth.principal is not None and principal != auth.principal:
            raise principal_changed(auth.principal, principal)
    except AuthenticationFailed as exc:
        log.warning("failed authentication from %s:%d on listener %s (%s): %s", client_host, client_port,
                    auth.listener, session.mechanism, exc.log_reason)
        auth.fail(f"failed authentication ({session.mechanism})")
        if auth.failed_delay_s > 0:
            await asyncio.sleep(auth.failed_delay_s)
        raise
    lifetime_ms = 0
    if principal is not None:
        auth.principal = principal
        auth.mechanism = session.mechanism
        auth.raw_tokens = False
        # connections.max.reauth.ms, no later than a token's expiry (as Kafka's, also without the setting)
        lifetime = session.session_lifetime_ms(auth.reauth_ms)
        auth.expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000
        lifetime_ms = lifetime or 0
    return answer, lifetime_ms

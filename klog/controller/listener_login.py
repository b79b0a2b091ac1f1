"""The login and the ClusterAction check of a ``SASL_PLAINTEXT``/``SASL_SSL`` controller listener.

Every connection to such a listener logs in first, as on Kafka's SaslServerAuthenticator: one ApiVersions, then
SaslHandshake v1 and SaslAuthenticate (KIP-152 framing), or SaslHandshake v0 and bare token frames, until the client
is authenticated; then it speaks what it came for (the raft transport, an
observer's metadata fetches, or Kafka requests). :meth:`ControllerLogin.login` runs that exchange on the raw stream
(the raft driver calls it for every accepted connection before it reads the connection's first bytes), answering a
failed login SASL_AUTHENTICATION_FAILED after ``connection.failed.authentication.delay.ms`` with one log line
naming the peer, the mechanism and the user (never a password), then closing the connection.

Mechanisms: PLAIN (the ``user_<name>`` options of ``listener.name.<l>.plain.sasl.jaas.config``), SCRAM-SHA-256/512
(the credentials of this controller's metadata image: usable once the quorum committed them, so controllers log in
to each other with PLAIN, as Kafka's documentation advises) and OAUTHBEARER for clients (the listener's token
validator, chosen as a broker listener's: :func:`klog.security.sasl.listener_oauth_validator`). A session lasts
``connections.max.reauth.ms``, no longer than its token (:meth:`klog.security.sasl.SaslSession.session_lifetime_ms`,
the broker listeners' rule).

What the logged-in principal may do is :class:`klog.controller.listener_access.ControllerAccess`'s question, asked
on every controller listener whatever its protocol.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.metadata.config import SASL_MECHANISMS, BrokerConfig, ConfigError
from klog.protocol import ProtocolError, decode_request, decode_request_header, encode_response
from klog.protocol.errors import ErrorCode
from klog.security.principal import KafkaPrincipal
from klog.security.oauth import Validator
from klog.security.sasl import (OAUTHBEARER, AuthenticationFailed, SaslSession, listener_jaas, listener_oauth_validator,
                                principal_changed, reauth_mechanism_refusal, unexpected_during_login)
from klog.security.scram import ScramCredential, mechanism_type

__all__ = ["ControllerLogin", "LastAnswer", "LoginSettings", "Reauthentication", "login_settings"]

log = logging.getLogger("klog.controller.login")

_SIZE = struct.Struct(">i")
#: what a client may send before it logged in: ApiVersions, SaslHandshake, SaslAuthenticate
SASL_APIS: dict[int, tuple[int, int]] = {18: (0, 4), 17: (0, 1), 36: (0, 2)}
#: a login (every exchange of it) must end within this long
LOGIN_TIMEOUT_S = 10.0
#: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a connection starts at most one re-authentication a
#: second
MIN_REAUTH_INTERVAL_S = 1.0
#: the first bytes of klog's own protocols (raft peers, observers): sent without a login, they are named in the log
_KLOG_PREAMBLES = (b"KLRA", b"KLOB")


@dataclass(frozen=True)
class LoginSettings:
    """A SASL controller listener's server side (from ``listener.name.<l>.*`` first, as every listener's)."""

    listener: str
    protocol: str
    #: the mechanisms offered (sasl.enabled.mechanisms that klog serves)
    mechanisms: tuple[str, ...]
    #: PLAIN's users (user_<name> options of the listener's PlainLoginModule JAAS config)
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: connection.failed.authentication.delay.ms, in seconds
    failed_delay_s: float = 0.1
    #: sasl.server.max.receive.size
    max_receive_size: int = 524288
    #: connections.max.reauth.ms (0: sessions never expire)
    reauth_ms: int = 0
    #: how OAUTHBEARER tokens are checked (None: the listener does not offer OAUTHBEARER)
    oauth_validator: Validator | None = field(default=None, repr=False)

    def new_session(self, scram_lookup: Callable[[str, str], ScramCredential | None]) -> SaslSession:
        return SaslSession(list(self.mechanisms), self.plain_users, scram_lookup, oauth_validator=self.oauth_validator)


def login_settings(config: BrokerConfig, listener: str, protocol: str) -> LoginSettings:
    """The server side of SASL listener ``listener``; a ConfigError names a setting that cannot be used."""
    settings = config.listener_security(listener)
    served = tuple(m for m in settings["sasl.enabled.mechanisms"] if m in SASL_MECHANISMS or m == OAUTHBEARER)
    if not served:
        raise ConfigError(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms",
                          f"controller listener {listener} ({protocol}) offers "
                          f"{', '.join(settings['sasl.enabled.mechanisms'])}; klog's controllers serve "
                          f"{', '.join((*SASL_MECHANISMS, OAUTHBEARER))}")
    users: dict[str, str] = {}
    if "PLAIN" in served:
        jaas = listener_jaas(config, listener, "PLAIN")
        users = jaas.plain_users() if jaas is not None else {}
    validator = listener_oauth_validator(config, listener) if OAUTHBEARER in served else None
    return LoginSettings(listener, protocol, served, users,
                         failed_delay_s=settings["connection.failed.authentication.delay.ms"] / 1000,
                         max_receive_size=settings["sasl.server.max.receive.size"],
                         reauth_ms=settings["connections.max.reauth.ms"], oauth_validator=validator)


class ControllerLogin:
    """Logs in the connections of a SASL controller listener. ``image_of()``: this controller's metadata image (SCRAM
    credentials), None before it has one."""

    def __init__(self, settings: LoginSettings, image_of: Callable[[], Any], *,
                 apis: Mapping[int, tuple[int, int]] | None = None) -> None:
        """``apis``: what ApiVersions lists before the login (the listener's APIs; the login's are added)."""
        self.settings = settings
        self.apis = {**(apis or {}), **SASL_APIS}
        self.image_of = image_of
        #: logins refused (what the log lines count)
        self.failed_logins = 0
        #: when each open connection's session ends (monotonic seconds; absent: never)
        self._session_ends: weakref.WeakKeyDictionary[asyncio.StreamWriter, float] = weakref.WeakKeyDictionary()
        #: each open connection's SASL mechanism (a re-authentication must use it, as on Kafka)
        self._mechanisms: weakref.WeakKeyDictionary[asyncio.StreamWriter, str] = weakref.WeakKeyDictionary()

    # -- the login -------------------------------------------------------------------------------------------
    def _scram_lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        image = self.image_of()
        stored = image.scram_credentials.get((user, mechanism_type(mechanism))) if image is not None else None
        if stored is None:
            return None
        return ScramCredential(stored.salt, stored.stored_key, stored.server_key, stored.iterations)

    async def login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> KafkaPrincipal | None:
        """Serve the login on a new connection: its principal, or None (the connection must be closed: the login
        failed, the client sent something else first, or it went silent)."""
        peer = writer.get_extra_info("peername")
        try:
            return await asyncio.wait_for(self._login(reader, writer, peer), LOGIN_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.warning("controller listener %s: %s did not log in within %.0f s; closing", self.settings.listener,
                        _peer_text(peer), LOGIN_TIMEOUT_S)
        except ProtocolError as exc:
            log.warning("controller listener %s: bad login request from %s: %s; closing", self.settings.listener,
                        _peer_text(peer), exc)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        return None

    async def _login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Any
                     ) -> KafkaPrincipal | None:
        settings = self.settings
        session: SaslSession | None = None
        api_versions_answered = False   # Kafka takes one ApiVersions before the SaslHandshake
        raw_tokens = False   # SaslHandshake v0: the login's tokens come and go as bare frames (before KIP-152)
        while True:
            head = await reader.readexactly(_SIZE.size)
            if head in _KLOG_PREAMBLES:
                log.warning("controller listener %s (%s): %s opened a klog %s connection without logging in "
                            "(does it set listener.security.protocol.map and sasl.mechanism.controller.protocol "
                            "as this node does?); closing", settings.listener, settings.protocol, _peer_text(peer),
                            "raft" if head == _KLOG_PREAMBLES[0] else "observer")
                return None
            (size,) = _SIZE.unpack(head)
            if not 0 <= size <= settings.max_receive_size:   # Kafka's sasl.server.max.receive.size, unanswered
                log.warning("controller listener %s: %s sent a %d-byte frame before logging in (above "
                            "sasl.server.max.receive.size); closing", settings.listener, _peer_text(peer), size)
                return None
            frame = await reader.readexactly(size)
            if raw_tokens:
                assert session is not None
                try:
                    answer = await _authenticate(session, frame)
                except AuthenticationFailed as exc:   # no header to answer: closed, as Kafka's authenticator
                    await self._failed(session, peer, exc)
                    return None
                writer.write(_SIZE.pack(len(answer)) + answer)
                await writer.drain()
                if session.principal is not None:
                    return self._logged_in(session, writer, session.session_lifetime_ms(settings.reauth_ms))
                continue
            header, offset = decode_request_header(frame)
            api_key, version = int(header.api_key), int(header.api_version)
            allowed = SASL_APIS.get(api_key)
            if allowed is None or not allowed[0] <= version <= allowed[1]:
                if api_key == 18:   # KIP-511: a too-new ApiVersions is answered in v0 with ApiVersions's versions
                    low, high = self.apis[18]
                    self._answer(writer, 18, 0, header.correlation_id,
                                 {"error_code": ErrorCode.UNSUPPORTED_VERSION,
                                  "api_keys": [{"api_key": 18, "min_version": low, "max_version": high}]})
                    await writer.drain()
                    continue
                log.warning("controller listener %s (%s): %s sent api %d v%d before logging in; closing",
                            settings.listener, settings.protocol, _peer_text(peer), api_key, version)
                return None
            request = decode_request(header, frame, offset)
            if api_key == 18:
                if api_versions_answered or session is not None:
                    log.warning("controller listener %s: %s sent ApiVersions again before logging in; closing",
                                settings.listener, _peer_text(peer))
                    return None
                api_versions_answered = True
                self._answer(writer, 18, version, header.correlation_id,
                             {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "api_keys": self._api_keys()})
            elif api_key == 17:
                if session is not None:
                    log.warning("controller listener %s: %s sent SaslHandshake twice; closing", settings.listener,
                                _peer_text(peer))
                    return None
                session = settings.new_session(self._scram_lookup)
                mechanism = str(getattr(request, "mechanism", ""))
                if not session.handshake(mechanism):
                    self.failed_logins += 1
                    log.warning("failed authentication from %s on controller listener %s: unsupported SASL "
                                "mechanism %r (it offers %s)", _peer_text(peer), settings.listener, mechanism,
                                ", ".join(session.enabled))
                    self._answer(writer, 17, version, header.correlation_id,
                                 {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": session.enabled})
                    await writer.drain()
                    return None
                self._answer(writer, 17, version, header.correlation_id,
                             {"error_code": ErrorCode.NONE, "mechanisms": session.enabled})
                raw_tokens = version == 0
            else:
                if session is None or session.mechanism is None:
                    log.warning("controller listener %s: %s sent SaslAuthenticate before SaslHandshake; closing",
                                settings.listener, _peer_text(peer))
                    return None
                token = bytes(getattr(request, "auth_bytes", None) or b"")
                try:
                    if len(token) > settings.max_receive_size:
                        raise AuthenticationFailed(
                            f"Authentication failed during authentication due to: SASL token of {len(token)} bytes "
                            "is above sasl.server.max.receive.size", f"SASL token of {len(token)} bytes")
                    answer = await _authenticate(session, token)
                except AuthenticationFailed as exc:
                    await self._failed(session, peer, exc)
                    self._answer(writer, 36, version, header.correlation_id,
                                 {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc),
                                  "auth_bytes": b"", "session_lifetime_ms": 0})
                    await writer.drain()
                    return None
                # a v0 client is told no lifetime, but its session ends too (KIP-368)
                lifetime = session.session_lifetime_ms(settings.reauth_ms)
                self._answer(writer, 36, version, header.correlation_id,
                             {"error_code": ErrorCode.NONE, "error_message": "", "auth_bytes": answer,
                              "session_lifetime_ms": (lifetime or 0) if version >= 1 else 0})
                if session.principal is not None:
                    await writer.drain()
                    return self._logged_in(session, writer, lifetime)
            await writer.drain()

    async def _failed(self, session: SaslSession, peer: Any, exc: AuthenticationFailed) -> None:
        """A refused login: counted, logged (peer, mechanism, why; never a password) and held
        ``connection.failed.authentication.delay.ms`` before its answer or the close."""
        self.failed_logins += 1
        log.warning("failed authentication from %s on controller listener %s (%s): %s",
                    _peer_text(peer), self.settings.listener, session.mechanism, exc.log_reason)
        if self.settings.failed_delay_s > 0:
            await asyncio.sleep(self.settings.failed_delay_s)

    def _logged_in(self, session: SaslSession, writer: asyncio.StreamWriter, lifetime_ms: int | None
                   ) -> KafkaPrincipal | None:
        """A completed login: its session's end and mechanism kept for the connection; its principal."""
        if lifetime_ms is not None:
            self._session_ends[writer] = time.monotonic() + lifetime_ms / 1000
        if session.mechanism is not None:
            self._mechanisms[writer] = session.mechanism
        return session.principal

    def session_end(self, writer: asyncio.StreamWriter) -> float | None:
        """When the session of ``writer``'s connection ends (monotonic seconds: its login plus
        ``connections.max.reauth.ms``, no later than its token's expiry, :meth:`SaslSession.session_lifetime_ms`);
        None: never. klog's own protocols on the
        listener (Raft peers, observers) do not log in again in band: their connection is closed once it ended."""
        return self._session_ends.get(writer)

    def mechanism(self, writer: asyncio.StreamWriter) -> str | None:
        """The SASL mechanism ``writer``'s connection logged in with."""
        return self._mechanisms.get(writer)

    def _api_keys(self) -> list[dict[str, int]]:
        """ApiVersions' list before the login (the full list comes once the client logged in)."""
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(self.apis.items())]

    @staticmethod
    def _answer(writer: asyncio.StreamWriter, api_key: int, version: int, correlation_id: int,
                body: Mapping[str, Any]) -> None:
        writer.writelines(encode_response(api_key, version, correlation_id, body))


async def _authenticate(session: SaslSession, token: bytes) -> bytes:
    """``session.authenticate(token)``, off the event loop when it may block (a JWKS fetched), as on the broker
    listeners."""
    return await asyncio.to_thread(session.authenticate, token) if session.blocking else session.authenticate(token)


class Reauthentication:
    """KIP-368 on one logged-in Kafka connection of the controller listener (as Kafka's controllers, whose clients
    are the brokers' and the admin tools' NetworkClients): with ``connections.max.reauth.ms`` set the session ends
    that long after the login, no later than its token's expiry (which ends it also without the setting, as on
    Kafka); a request after its end closes the connection,
    and the client logs in again on the open connection (SaslHandshake then SaslAuthenticate, the same principal) at
    most once a second. ``session_end``: when the login's session ends (:meth:`ControllerLogin.session_end`)."""

    def __init__(self, login: ControllerLogin, principal: KafkaPrincipal, peer: Any, session_end: float | None,
                 mechanism: str | None = None) -> None:
        self.login = login
        self.principal = principal
        #: the login's SASL mechanism; a re-authentication naming another one is refused (as Kafka)
        self.mechanism = mechanism
        #: why the connection's next request ends it unanswered (a re-authentication's handshake named another
        #: mechanism: Kafka's REAUTH_BAD_MECHANISM); None while it is served
        self.refused: str | None = None
        self.peer = peer
        #: monotonic time the session ends (None: never)
        self.expires_at = session_end
        self._session: SaslSession | None = None
        self._last_start: float | None = None

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def handshake(self, version: int, mechanism: str) -> dict[str, Any]:
        """SaslHandshake on the logged-in connection: ILLEGAL_SASL_STATE unless sessions expire (and not twice
        a second), as Kafka; a mechanism not offered ends the connection unanswered; another offered mechanism than
        the login's is answered, and the next request ends the connection (:meth:`refuse`)."""
        now = time.monotonic()
        if self.expires_at is None or version < 1 or (self._last_start is not None
                                                      and now - self._last_start < MIN_REAUTH_INTERVAL_S):
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        self._last_start = now
        settings = self.login.settings
        session = settings.new_session(self.login._scram_lookup)
        if not session.handshake(mechanism):
            log.warning("failed re-authentication from %s on controller listener %s: unsupported SASL mechanism %r",
                        _peer_text(self.peer), settings.listener, mechanism)
            raise ConnectionAbortedError("unsupported SASL mechanism in a re-authentication")
        if self.mechanism is not None:
            self.refused = reauth_mechanism_refusal(self.mechanism, mechanism)
            if self.refused is not None:
                return {"error_code": ErrorCode.NONE, "mechanisms": session.enabled}
        self._session = session
        return {"error_code": ErrorCode.NONE, "mechanisms": session.enabled}

    @property
    def in_login(self) -> bool:
        """Between a re-authentication's SaslHandshake and the SaslAuthenticate completing it."""
        session = self._session
        return session is not None and session.mechanism is not None and not session.authenticated

    async def unexpected(self, api_key: int, request: object) -> dict[str, Any]:
        """A request other than SaslAuthenticate :attr:`in_login`: as Kafka's SaslServerAuthenticator, its
        ILLEGAL_SASL_STATE error response after ``connection.failed.authentication.delay.ms``, then the connection
        closed."""
        log.warning("failed re-authentication from %s on controller listener %s: api key %d during SASL "
                    "authentication", _peer_text(self.peer), self.login.settings.listener, api_key)
        if self.login.settings.failed_delay_s > 0:
            await asyncio.sleep(self.login.settings.failed_delay_s)
        raise LastAnswer(unexpected_during_login(api_key, request))

    async def refuse(self) -> dict[str, Any]:
        """The request after a handshake :attr:`refused`: no answer, the connection closed after
        ``connection.failed.authentication.delay.ms`` (as Kafka)."""
        self.login.failed_logins += 1
        log.warning("failed re-authentication from %s on controller listener %s: %s", _peer_text(self.peer),
                    self.login.settings.listener, self.refused)
        if self.login.settings.failed_delay_s > 0:
            await asyncio.sleep(self.login.settings.failed_delay_s)
        raise ConnectionAbortedError(self.refused)

    async def authenticate(self, version: int, token: bytes) -> dict[str, Any]:
        """SaslAuthenticate of a re-authentication: the new session's end, or SASL_AUTHENTICATION_FAILED (a wrong
        credential, another principal) and the connection closed after the answer."""
        session, settings = self._session, self.login.settings
        if session is None or session.mechanism is None or session.authenticated:
            raise LastAnswer({"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
                              "error_message": "Unexpected SASL request: send SaslHandshake first"})
        try:
            if len(token) > settings.max_receive_size:
                raise AuthenticationFailed(f"Authentication failed during authentication due to: SASL token of "
                                           f"{len(token)} bytes is above sasl.server.max.receive.size",
                                           f"SASL token of {len(token)} bytes")
            answer = await _authenticate(session, token)
            if session.principal is not None and session.principal != self.principal:
                raise principal_changed(self.principal, session.principal)
        except AuthenticationFailed as exc:
            self.login.failed_logins += 1
            log.warning("failed re-authentication from %s on controller listener %s (%s): %s", _peer_text(self.peer),
                        settings.listener, session.mechanism, exc.log_reason)
            if settings.failed_delay_s > 0:
                await asyncio.sleep(settings.failed_delay_s)
            raise LastAnswer({"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc),
                              "auth_bytes": b"", "session_lifetime_ms": 0}) from None
        lifetime = session.session_lifetime_ms(settings.reauth_ms)
        if session.principal is not None:
            self.expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000
            self._session = None
        return {"error_code": ErrorCode.NONE, "error_message": "", "auth_bytes": answer,
                "session_lifetime_ms": (lifetime or 0) if version >= 1 else 0}


class LastAnswer(ConnectionAbortedError):
    """The answer to send before the connection closes (a refused re-authentication)."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        super().__init__("closing after the answer")
        self.answer = answer


def _peer_text(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)

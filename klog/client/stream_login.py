"""Connections that speak Kafka's framing only to log in: a node's connections to a controller listener (Raft peers,
observers fetching the metadata log, forwarded and DescribeQuorum requests) open TLS when the listener is ``SSL``
or ``SASL_SSL`` and, on a ``SASL_*`` listener, log in with SaslHandshake v1 and SaslAuthenticate (KIP-152), as
every Kafka client does, before they speak their own protocol on the same stream.

KIP-368: with ``connections.max.reauth.ms`` on the listener the login's SaslAuthenticate answer names the session's
lifetime, and the listener closes the connection once it ended. These connections do not log in again in band (their
own protocols follow the login): :func:`open_session` tells when to move to a new logged-in connection (at
:data:`~klog.client.connection.SESSION_RENEWAL_FRACTION` of the lifetime, as klog's Kafka clients do).

A login the listener refuses raises :class:`LoginRefused` (a ConnectionError, so callers that reconnect on
connection errors retry it with their backoff) and logs one warning per address and reason a minute, naming the
listener's answer, the mechanism and the user (never the password).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import NamedTuple

from klog.protocol import ProtocolError, decode_response, encode_request
from klog.protocol.errors import ErrorCode
from klog.security.scram import ScramError

from .connection import SESSION_RENEWAL_FRACTION
from .security import ClientSecurity

__all__ = ["LoggedInStream", "LoginRefused", "open_logged_in", "open_session", "stream_login"]

log = logging.getLogger("klog.client.login")

_SIZE = struct.Struct(">i")
#: the largest login answer read (a SCRAM server-first message, an error message)
MAX_LOGIN_RESPONSE_BYTES = 1 << 16
#: the same refusal of one address is logged at most this often
REFUSAL_LOG_INTERVAL_S = 60.0
_logged: dict[tuple[str, int, str], float] = {}


class LoginRefused(ConnectionError):
    """The listener refused this connection's SASL login (the message is the listener's answer)."""


def _warn_once(host: str, port: int, message: str) -> None:
    now = time.monotonic()
    key = (host, port, message)
    if now - _logged.get(key, -REFUSAL_LOG_INTERVAL_S) >= REFUSAL_LOG_INTERVAL_S:
        if len(_logged) > 1024:
            _logged.clear()
        _logged[key] = now
        log.warning("%s:%d refused this node's login: %s", host, port, message)


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int, version: int,
                correlation: int, client_id: str, body: dict[str, object]) -> object:
    writer.write(encode_request(api_key, version, correlation, client_id, body))
    await writer.drain()
    (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
    if not 0 < size <= MAX_LOGIN_RESPONSE_BYTES:
        raise ProtocolError(f"a {size}-byte answer to a SASL request", field="size", offset=0)
    got, answer = decode_response(api_key, version, await reader.readexactly(size))
    if got != correlation:
        raise ProtocolError(f"correlation id {got} answered, {correlation} sent", field="correlation_id", offset=0)
    return answer


async def stream_login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: ClientSecurity, *,
                       host: str = "", port: int = 0, client_id: str = "klog-node") -> int:
    """Log in on an open stream with ``security``'s mechanism and credentials: the session's lifetime in ms as the
    listener answered it (0: it never ends); LoginRefused if refused."""
    mechanism = security.mechanism or ""
    who = f"{mechanism} as {security.username!r}"
    handshake = await _call(reader, writer, 17, 1, 1, client_id, {"mechanism": mechanism})
    code = int(getattr(handshake, "error_code", 0))
    if code != ErrorCode.NONE:
        offered = ", ".join(getattr(handshake, "mechanisms", None) or []) or "none"
        message = f"{ErrorCode(code).name}: the listener does not offer {mechanism} (it offers {offered})"
        _warn_once(host, port, message)
        raise LoginRefused(message)
    login = security.authenticator()
    token: bytes | None = login.first()
    correlation = 1
    lifetime_ms = 0
    while token is not None:
        correlation += 1
        answer = await _call(reader, writer, 36, 2, correlation, client_id, {"auth_bytes": token})
        code = int(getattr(answer, "error_code", 0))
        if code != ErrorCode.NONE:
            message = f"{ErrorCode(code).name} ({who}): {getattr(answer, 'error_message', None) or 'refused'}"
            _warn_once(host, port, message)
            raise LoginRefused(message)
        lifetime_ms = int(getattr(answer, "session_lifetime_ms", 0) or 0)
        try:
            token = login.next(bytes(getattr(answer, "auth_bytes", None) or b""))
        except ScramError as exc:
            message = f"the listener's SCRAM answer does not verify ({who}): {exc}"
            _warn_once(host, port, message)
            raise LoginRefused(message) from None
    return lifetime_ms


class LoggedInStream(NamedTuple):
    """A logged-in stream and when to replace it."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    #: monotonic time to move to a new logged-in connection, before the listener ends the session (None: never)
    renew_at: float | None


async def open_logged_in(host: str, port: int, security: ClientSecurity | None, timeout_s: float, *,
                         client_id: str = "klog-node") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A stream to ``host:port``: TLS when ``security`` has a context (the host name checked as the context says),
    logged in when it has a SASL mechanism; the connection and the login each within ``timeout_s``."""
    reader, writer, _ = await open_session(host, port, security, timeout_s, client_id=client_id)
    return reader, writer


async def open_session(host: str, port: int, security: ClientSecurity | None, timeout_s: float, *,
                       client_id: str = "klog-node") -> LoggedInStream:
    """:func:`open_logged_in`, with when to renew the session of a connection that stays open."""
    tls = security.tls() if security is not None else None
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=tls), timeout_s)
    if security is None or not security.sasl:
        return LoggedInStream(reader, writer, None)
    try:
        lifetime_ms = await asyncio.wait_for(stream_login(reader, writer, security, host=host, port=port, client_id=client_id),
                               timeout_s)
    except BaseException:
        writer.close()
        raise
    renew_at = time.monotonic() + SESSION_RENEWAL_FRACTION * lifetime_ms / 1000 if lifetime_ms > 0 else None
    return LoggedInStream(reader, writer, renew_at)

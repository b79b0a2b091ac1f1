"""One asyncio TCP connection to one broker.

Requests are pipelined: each gets a correlation id and a future, is written immediately, and responses
(which Kafka returns in request order per connection) are matched back by correlation id. The first request on
a connection is ApiVersions; afterwards :meth:`BrokerConnection.version` picks, per API, the highest version
both the broker and this client support.

Receiving uses :class:`asyncio.BufferedProtocol`: small frames are parsed out of a reusable read buffer and
copied once; a large frame (a fetch response) is read straight into a buffer of its own so that record data is
never copied again on its way to the native decoder. Those large buffers come from a small per-connection pool
and are reused once nothing references them any more: a fresh buffer costs the kernel a page fault and a
zero-fill per page, as much CPU as the socket read itself.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
import time
from typing import Any

from klog.protocol import (
    ApiKey,
    FrameTooLarge,
    ProtocolError,
    Struct,
    decode_response,
    encode_request_chunks,
    versions,
)
from klog.protocol.framing import BufferedFrameReader, FrameBufferPool
from klog.security.scram import ScramError

from .security import ClientSecurity
from .errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedFeatureError,
    for_code,
)

__all__ = ["BrokerConnection", "CLIENT_MAX_VERSIONS", "SOFTWARE_NAME", "software_version"]

log = logging.getLogger("klog.client")

SOFTWARE_NAME = "klog-python"


def software_version() -> str:
    """klog's installed version, sent in ApiVersions; looked up on first use: importlib.metadata (with email, zipfile,
    csv...) is not loaded by a broker, which imports this module for its controller channel."""
    global _software_version
    if _software_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _software_version = version("klog")
        except PackageNotFoundError:  # a source tree without an install
            _software_version = "0.0.0"
    return _software_version


_software_version: str | None = None

#: Highest versions this client speaks where it must stop below the codec's maximum: the versions after these
#: address topics by id (KIP-516) and this client addresses them by name.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 12,
    ApiKey.FETCH: 12,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
}

#: ApiVersions is first tried at this version (v3+ carries the client software name).
_API_VERSIONS_FIRST = 3

#: Frames up to this size are copied out of the shared read buffer; larger ones get a buffer of their own.
_SMALL_FRAME = 64 * 1024
#: Size of the shared read buffer.
_READ_BUFFER = 256 * 1024
#: Large-frame receive buffers kept for reuse per connection, and the largest one kept (bigger frames get a
#: buffer of their own that is freed after use).
_POOLED_BUFFERS = 4
_POOLED_BUFFER_MAX = 64 * 1024 * 1024
#: How often in-flight requests are checked against their deadlines.
_WATCHDOG_PERIOD_S = 0.5
#: when a SASL session with an end is renewed (a new connection), as a fraction of its lifetime (KIP-368: Kafka's
#: clients re-authenticate at 85-95% of it)
SESSION_RENEWAL_FRACTION = 0.85



class _Pending:
    __slots__ = ("correlation_id", "api_key", "version", "future", "deadline")

    def __init__(self, correlation_id: int, api_key: int, version: int, future: asyncio.Future[Any],
                 deadline: float) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.future = future
        self.deadline = deadline


class BrokerConnection(asyncio.BufferedProtocol):
    """A connection to one broker (``node_id`` -1 and below for bootstrap addresses).

    Use :meth:`open` to connect and negotiate versions, then :meth:`send` (returns a future) or
    :meth:`request` (awaits the response body, a :class:`klog.protocol.Struct`).
    """

    def __init__(self, host: str, port: int, node_id: int, *, client_id: str, request_timeout_ms: int,
                 max_response_bytes: int) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000.0
        self.max_response_bytes = max_response_bytes
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._chosen: dict[int, int] = {}
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._next_id = 1
        self._in_flight: collections.deque[_Pending] = collections.deque()
        self._closed = False
        self._close_error: Exception | None = None
        self._connected = self._loop.create_future()
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        #: Called when a paused transport can take writes again (the producer's sender waits for this).
        self.on_writable: list[Any] = []
        self._watchdog: asyncio.TimerHandle | None = None
        self.last_activity = time.monotonic()
        #: when to log in again on a new connection (KIP-368: the listener ends the SASL session after the
        #: ``session_lifetime_ms`` it answered; klog's clients reconnect at 85% of it, Kafka's lower bound for a
        #: re-authentication); None: the session never ends
        self.renew_by: float | None = None
        # receive state
        self._frames = BufferedFrameReader(max_response_bytes, read_buffer_bytes=_READ_BUFFER,
                                           small_frame_bytes=_SMALL_FRAME,
                                           pool=FrameBufferPool(_POOLED_BUFFERS, _POOLED_BUFFER_MAX))

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def open(cls, host: str, port: int, node_id: int, *, client_id: str, request_timeout_ms: int,
                   max_response_bytes: int, connect_timeout_ms: int,
                   security: ClientSecurity | None = None) -> BrokerConnection:
        """Connect (TLS when ``security`` has a context), negotiate API versions, log in (SASL) and return the
        ready connection."""
        loop = asyncio.get_running_loop()
        conn = cls(host, port, node_id, client_id=client_id, request_timeout_ms=request_timeout_ms,
                   max_response_bytes=max_response_bytes)
        tls = security.tls() if security is not None else None
        try:
            await asyncio.wait_for(loop.create_connection(lambda: conn, host, port, ssl=tls,
                                                          server_hostname=host if tls is not None else None),
                                   connect_timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            raise KafkaConnectionError(f"connecting to {host}:{port} timed out") from None
        except ssl.SSLError as e:
            raise KafkaConnectionError(f"TLS handshake with {host}:{port} failed: {e}") from None
        except OSError as e:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {e}") from None
        try:
            await conn._negotiate_versions()
            if security is not None and security.sasl:
                await conn._authenticate(security)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate requests (KIP-152)."""
        mechanism = security.mechanism
        answer = await self._send(ApiKey.SASL_HANDSHAKE, 1, Struct(mechanism=mechanism), True,
                                  self.request_timeout_s)
        if answer.error_code:
            raise for_code(answer.error_code, f"broker {self.host}:{self.port} does not offer SASL mechanism "
                                              f"{mechanism} (it offers {', '.join(answer.mechanisms)})")
        version = self.version(ApiKey.SASL_AUTHENTICATE)
        login = security.authenticator()
        token: bytes | None = login.first()
        while token is not None:
            answer = await self._send(ApiKey.SASL_AUTHENTICATE, version, Struct(auth_bytes=token), True,
                                      self.request_timeout_s)
            if answer.error_code:
                raise for_code(answer.error_code, answer.error_message or "SASL authentication failed")
            try:
                token = login.next(bytes(answer.auth_bytes or b""))
            except ScramError as exc:
                raise for_code(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
            lifetime_ms = int(getattr(answer, "session_lifetime_ms", 0) or 0)
            if lifetime_ms > 0:
                self.renew_by = time.monotonic() + SESSION_RENEWAL_FRACTION * lifetime_ms / 1000

    def session_ending(self) -> bool:
        """The listener's SASL session is near its end: new requests should go on a new connection."""
        return self.renew_by is not None and time.monotonic() >= self.renew_by

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not TCP
                pass
        # Large writes (produce requests) go out without piling up in the transport buffer.
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)  # type: ignore[attr-defined]
        self._watchdog = self._loop.call_later(_WATCHDOG_PERIOD_S, self._check_deadlines)
        if not self._connected.done():
            self._connected.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail_all(KafkaConnectionError(
            f"connection to broker {self.node_id} ({self.host}:{self.port}) lost"
            + (f": {exc}" if exc else "")))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def write_paused(self) -> bool:
        """The transport's write buffer is above its high-water mark."""
        return self._write_paused

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._in_flight)

    def close(self, error: Exception | None = None) -> None:
        """Close the socket; requests in flight fail with ``error`` (a connection error by default)."""
        self._fail_all(error or KafkaConnectionError(f"connection to broker {self.node_id} closed"))

    def _fail_all(self, error: Exception) -> None:
        if not self._closed:
            self._closed = True
            self._close_error = error
            if self._watchdog is not None:
                self._watchdog.cancel()
            if self._transport is not None:
                self._transport.abort()
        pending, self._in_flight = self._in_flight, collections.deque()
        for p in pending:
            if not p.future.done():
                p.future.set_exception(error)
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(error)
        self._drain_waiters.clear()
        self._frames.pool.release()

    def _check_deadlines(self) -> None:
        if self._closed:
            return
        now = time.monotonic()
        for p in self._in_flight:
            if p.deadline <= now:
                log.warning("request %s v%d to broker %d timed out; closing the connection",
                            ApiKey(p.api_key).name, p.version, self.node_id)
                self._fail_all(KafkaTimeoutError(
                    f"{ApiKey(p.api_key).name} request to broker {self.node_id} ({self.host}:{self.port}) "
                    f"timed out"))
                return
        self._watchdog = self._loop.call_later(_WATCHDOG_PERIOD_S, self._check_deadlines)

    # ------------------------------------------------------------------ versions
    async def _negotiate_versions(self) -> None:
        version = _API_VERSIONS_FIRST
        for _attempt in range(3):
            body = Struct(client_software_name=SOFTWARE_NAME, client_software_version=software_version())
            fut = self._send(ApiKey.API_VERSIONS, version, body, True, self.request_timeout_s)
            response = await fut
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                # UNSUPPORTED_VERSION: the v0-format answer lists what the broker has.
                theirs = {k.api_key: k.max_version for k in response.api_keys}
                version = min(theirs.get(ApiKey.API_VERSIONS, 0), _API_VERSIONS_FIRST)
                continue
            if response.error_code:
                raise for_code(response.error_code, "ApiVersions failed")
            self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            self._chosen.clear()
            return
        raise UnsupportedFeatureError(f"broker {self.host}:{self.port} did not agree on an ApiVersions version")

    def version(self, api_key: int, *, minimum: int = 0) -> int:
        """Highest version of ``api_key`` both sides support; UnsupportedFeatureError if none (or < minimum)."""
        v = self._chosen.get(api_key)
        if v is not None and v >= minimum:
            return v
        ours_min, ours_max = versions(api_key)
        ours_max = min(ours_max, CLIENT_MAX_VERSIONS.get(api_key, ours_max))
        theirs = self.broker_versions.get(api_key)
        if theirs is None:
            raise UnsupportedFeatureError(
                f"broker {self.node_id} ({self.host}:{self.port}) does not support {ApiKey(api_key).name}")
        v = min(ours_max, theirs[1])
        if v < max(ours_min, theirs[0], minimum):
            raise UnsupportedFeatureError(
                f"no common version of {ApiKey(api_key).name}: broker {theirs[0]}-{theirs[1]}, "
                f"client {max(ours_min, minimum)}-{ours_max}")
        self._chosen[api_key] = v
        return v

    def supports(self, api_key: int, minimum: int = 0) -> bool:
        try:
            self.version(api_key, minimum=minimum)
            return True
        except UnsupportedFeatureError:
            return False

    # ------------------------------------------------------------------ sending
    def send(self, api_key: int, body: Any, *, version: int | None = None, expect_response: bool = True,
             timeout: float | None = None) -> asyncio.Future[Any]:
        """Write a request now; the returned future resolves to the decoded response body.

        With ``expect_response=False`` (Produce with acks=0) the future resolves to None once written.
        ``timeout`` (seconds) extends ``request.timeout.ms`` for requests the broker may hold (Fetch).
        """
        if self._closed:
            fut = self._loop.create_future()
            fut.set_exception(self._close_error or KafkaConnectionError("connection closed"))
            return fut
        v = self.version(api_key) if version is None else version
        return self._send(api_key, v, body, expect_response, self.request_timeout_s + (timeout or 0.0))

    async def request(self, api_key: int, body: Any, *, version: int | None = None,
                      timeout: float | None = None) -> Any:
        """Send a request and await its response body (waits for the socket buffer to drain first)."""
        if self._write_paused:
            await self.drain()
        return await self.send(api_key, body, version=version, timeout=timeout)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._write_paused and not self._closed:
            w = self._loop.create_future()
            self._drain_waiters.append(w)
            await w

    def _send(self, api_key: int, version: int, body: Any, expect_response: bool,
              timeout_s: float) -> asyncio.Future[Any]:
        cid = self._next_id
        self._next_id = cid + 1 if cid < 0x7FFFFFFF else 1
        # Chunks, not one joined frame: large record batches go to the socket without another copy.
        frame = encode_request_chunks(api_key, version, cid, self.client_id, body)
        fut: asyncio.Future[Any] = self._loop.create_future()
        transport = self._transport
        assert transport is not None
        if expect_response:
            self._in_flight.append(_Pending(cid, api_key, version, fut, time.monotonic() + timeout_s))
        if len(frame) == 1:
            transport.write(frame[0])
        else:
            transport.writelines(frame)
        if not expect_response:
            fut.set_result(None)
        self.last_activity = time.monotonic()
        return fut

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for cb in self.on_writable:
            cb()
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ------------------------------------------------------------------ receiving
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = time.monotonic()
        frames = self._frames
        frames.buffer_updated(nbytes)
        while not self._closed:
            try:
                frame = frames.next_frame()
            except FrameTooLarge as e:
                self._fail_bad_frame_size(e.size)
                return
            if frame is None:
                return
            if len(frame) < 4:  # not even a correlation id
                self._fail_bad_frame_size(len(frame))
                return
            self._dispatch(frame)

    def _fail_bad_frame_size(self, size: int) -> None:
        self._fail_all(KafkaConnectionError(
            f"broker {self.node_id} sent a frame of {size} bytes (limit max.response.bytes="
            f"{self.max_response_bytes})"))

    def _dispatch(self, frame: bytes | memoryview) -> None:
        if not self._in_flight:
            self._fail_all(KafkaConnectionError(f"broker {self.node_id} sent a response nobody asked for"))
            return
        pending = self._in_flight.popleft()
        version = pending.version
        if pending.api_key == ApiKey.API_VERSIONS and version > 0 and frame[4:6] == b"\x00\x23":
            # UNSUPPORTED_VERSION (35): the broker answers in v0 format, listing the versions it has.
            version = 0
        try:
            correlation_id, body = decode_response(pending.api_key, version, frame)
        except ProtocolError as e:
            self._fail_all(KafkaConnectionError(f"undecodable response from broker {self.node_id}: {e}"))
            if not pending.future.done():
                pending.future.set_exception(e)
            return
        if correlation_id != pending.correlation_id:
            err = KafkaConnectionError(
                f"broker {self.node_id} answered correlation id {correlation_id}, expected "
                f"{pending.correlation_id}")
            if not pending.future.done():
                pending.future.set_exception(err)
            self._fail_all(err)
            return
        if not pending.future.done():
            pending.future.set_result(body)

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}{' closed' if self._closed else ''}>"

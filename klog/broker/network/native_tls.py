"""TLS listeners served by klog's native TLS session (``klog.tls.engine=native``): a plain TCP transport whose socket
reads (up to 256 KiB) are decrypted in one ``klog._native.TlsServerSession.receive_into`` call each (more when the
connection's buffer fills), every TLS record of the read at once, in place in the buffer the socket was read into,
and their plaintext copied once into the connection's buffer (the partial record at the end of a read waits in the
session), where uvloop's SSL transport makes one OpenSSL call per record (docs/security.md, "Costs").

:class:`NativeTlsProtocol` sits between the TCP transport and the connection's protocol: it runs the handshake
(dropping a client that has not finished it in the listener's handshake timeout), hands the connection a
:class:`NativeTlsTransport` once it is done (as uvloop's SSL transport calls ``connection_made`` after the
handshake), decrypts into the connection's buffers, holds the rest of a read while the connection has paused
reading, and encrypts what the connection writes. A client's close_notify is an end of stream; a TLS error sends
its alert and closes the socket.

A listener on the default engine whose dynamic ssl.* settings the native session cannot serve (an Ed448 or DSA key) serves
its new connections with :class:`SslModuleSession` instead: Python's ssl module over memory BIOs, the same methods
as ``TlsServerSession``, under the same protocol.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any, Union, cast

from klog._native import TlsError, TlsServerConfig, TlsServerSession
from klog.security.tls import peercert_of

log = logging.getLogger("klog.broker.server")

#: bytes read from the socket at a time: every TLS record among them is decrypted in one call. A connection starts
#: with the small buffer (thousands of idle ones must not pin 256 KiB each) and takes the large one at its first read
#: that fills the small one (a producer's)
READ_BYTES = 256 * 1024
FIRST_READ_BYTES = 16 * 1024
#: A large request still missing more than this many bytes: the socket wakes the event loop only once that much
#: more (up to READ_BYTES) has arrived (SO_RCVLOWAT), not at every segment the client's TLS records come in, so a
#: producer's request is read and decrypted in a few large reads instead of many small ones (each a wake-up, a
#: read, an ACK and a pass through this protocol). What is less than a TLS record (up to 16 KiB of plaintext) may
#: wait in the session undecrypted: that much is kept out of the watermark so it never waits for bytes the client
#: has sent already. Linux caps the watermark to half the socket's receive buffer and wakes the reader anyway when
#: the window closes, so the client is never stalled by it; an end of stream wakes it whatever the watermark.
COALESCE_MIN_BYTES = 64 * 1024
_RECORD_MARGIN_BYTES = 17 * 1024
#: the target of the handshake's records (no application data is taken before the connection is made)
_NO_ROOM = bytearray()
_EMPTY = memoryview(b"")


class SslModuleSession:
    """One TLS connection's server side served by Python's ssl module (OpenSSL, the ``ssl`` engine) over memory
    BIOs, with the methods of ``klog._native.TlsServerSession`` that :class:`NativeTlsProtocol` calls: what a
    listener of the native engine serves a new connection with when its current settings are ones only the ssl
    module serves."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshaking = True
        self.peer_closed = False

    def receive_into(self, data: bytes | bytearray | memoryview, target: bytearray | memoryview | Any
                     ) -> tuple[int, int]:
        """As ``TlsServerSession.receive_into``: all of ``data`` is taken (what is not decrypted yet waits in the
        incoming BIO), plaintext written into ``target`` until it is full."""
        if data:
            self._incoming.write(data)
        view = memoryview(target)
        room, written = len(view), 0
        try:
            if self.handshaking:
                self._tls.do_handshake()
                self.handshaking = False
            while written < room and not self.peer_closed:
                count = cast(int, self._tls.read(room - written, view[written:]))   # with a buffer: a count
                if count == 0:   # close_notify
                    self.peer_closed = True
                written += count
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.peer_closed = True
        except ssl.SSLError as exc:
            raise TlsError(str(exc)) from None
        return len(data), written

    def send(self, data: bytes | bytearray | memoryview) -> bytes:
        view = memoryview(data)
        try:
            while view:
                view = view[self._tls.write(view):]
        except ssl.SSLError as exc:
            raise TlsError(str(exc)) from None
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        return self._outgoing.read()

    def close(self) -> bytes:
        try:
            self._tls.unwrap()
        except (ssl.SSLError, ValueError):   # the peer's close_notify not there (yet): ours is sent anyway
            pass
        return self._outgoing.read()

    @property
    def protocol_version(self) -> str | None:
        return self._tls.version()

    @property
    def cipher_suite(self) -> str | None:
        cipher = self._tls.cipher()
        return cipher[0] if cipher else None

    @property
    def server_name(self) -> str | None:
        return None   # the ssl module gives it to the server-name callback only

    def peer_certificates(self) -> list[bytes]:
        der = None if self.handshaking else self._tls.getpeercert(binary_form=True)
        return [der] if der else []


#: what serves one connection's TLS under NativeTlsProtocol
ServerSession = Union[TlsServerSession, SslModuleSession]


class NativeTlsTransport(asyncio.Transport):
    """What the connection writes to and reads from: its writes encrypted onto the TCP transport."""

    def __init__(self, tls: NativeTlsProtocol) -> None:
        super().__init__()
        self._tls = tls
        self._peercert: dict[str, Any] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        self._tls.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._tls.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        tls = self._tls
        if name == "peercert":
            if self._peercert is None:
                chain = tls.session.peer_certificates()
                self._peercert = peercert_of(chain[0]) if chain else {}
            return self._peercert or default
        if name == "cipher":
            return (tls.session.cipher_suite, tls.session.protocol_version, None)
        if name == "server_hostname":
            return tls.session.server_name
        if name in ("sslcontext", "ssl_object"):
            return default
        return tls.raw.get_extra_info(name, default) if tls.raw is not None else default

    def pause_reading(self) -> None:
        self._tls.pause_reading()

    def resume_reading(self) -> None:
        self._tls.resume_reading()

    def is_reading(self) -> bool:
        return not self._tls.paused

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self._tls.raw is not None:
            self._tls.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._tls.raw.get_write_buffer_size() if self._tls.raw is not None else 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._tls.raw.get_write_buffer_limits() if self._tls.raw is not None else (0, 0)

    def is_closing(self) -> bool:
        return self._tls.closing

    def close(self) -> None:
        self._tls.close()

    def abort(self) -> None:
        self._tls.abort()

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._tls.app

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        raise NotImplementedError("the connection's protocol is fixed")


class NativeTlsProtocol(asyncio.BufferedProtocol):
    """The TCP side of one TLS connection (see the module's docstring). ``app``: the connection's protocol (a
    BufferedProtocol); ``tls``: the listener's current TLS settings, the native session's, or an ssl module
    context (the connection is then served by :class:`SslModuleSession`)."""

    def __init__(self, app: asyncio.BufferedProtocol, tls: TlsServerConfig | ssl.SSLContext,
                 loop: asyncio.AbstractEventLoop, handshake_timeout_s: float) -> None:
        self.app = app
        self.session: ServerSession = SslModuleSession(tls) if isinstance(tls, ssl.SSLContext) \
            else TlsServerSession(tls)
        self.loop = loop
        self.handshake_timeout_s = handshake_timeout_s
        self.raw: asyncio.Transport | None = None
        self.transport: NativeTlsTransport | None = None
        self.buffer = memoryview(bytearray(FIRST_READ_BYTES))
        #: the connection paused reading: the ciphertext left of the last read waits in ``held``
        self.paused = False
        self.held: memoryview | None = None
        self.closing = False
        self._timer: asyncio.TimerHandle | None = None
        #: the TCP socket (SO_RCVLOWAT) and the low watermark set on it
        self._sock: Any = None
        self._low_watermark = 1

    # ---- the TCP transport's callbacks --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport   # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            self._sock = sock
        self._timer = self.loop.call_later(self.handshake_timeout_s, self._handshake_timed_out)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        data = self.buffer[:nbytes]
        if nbytes == len(self.buffer) < READ_BYTES:
            self.buffer = memoryview(bytearray(READ_BYTES))
        if self.held is not None:   # not expected (reading was paused with it): keep the order anyway
            data, self.held = memoryview(bytes(self.held) + bytes(data)), None
        self._feed(data)

    def eof_received(self) -> bool | None:
        if self.transport is None or self.closing:
            return None   # the TCP transport closes
        keep_open = self.app.eof_received()
        if not keep_open:
            self.close()
        return True   # close() closes the TCP transport after close_notify

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.closing = True
        self.held = None
        if self.transport is not None:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.app.resume_writing()

    # ---- what the connection's transport asks -------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing or self.raw is None or not data:
            return
        try:
            self.raw.write(self.session.send(data))
        except TlsError as exc:
            self._failed(exc)

    def pause_reading(self) -> None:
        if not self.paused:
            self.paused = True
            if self.raw is not None and not self.closing:
                self.raw.pause_reading()

    def resume_reading(self) -> None:
        if not self.paused:
            return
        self.paused = False
        held, self.held = self.held, None
        if self.transport is not None:
            self._feed(held if held is not None else _EMPTY)   # plaintext may wait in the session too
        if not self.paused and self.raw is not None and not self.closing:
            self.raw.resume_reading()

    def close(self) -> None:
        if self.closing or self.raw is None:
            return
        self.closing = True
        self.raw.write(self.session.close())
        self.raw.close()

    def abort(self) -> None:
        self.closing = True
        if self.raw is not None:
            self.raw.abort()

    # ---- inside -------------------------------------------------------------------------------------------------

    def _feed(self, data: memoryview) -> None:
        """Decrypt ``data`` (ciphertext: the read buffer, decrypted in place) into the connection's buffers; while the
        connection has paused reading the rest waits in ``held`` (and plaintext that did not fit, in the session)."""
        session, app = self.session, self.app
        try:
            if self.transport is None:
                consumed, _ = session.receive_into(data, _NO_ROOM)   # the handshake's records
                data = data[consumed:]
                self._flush_outgoing()
                if session.handshaking or self.closing:
                    return
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                self.transport = NativeTlsTransport(self)
                app.connection_made(self.transport)
            while not self.closing:
                if self.paused:
                    self.held = data if data else None
                    return
                target = app.get_buffer(-1)
                room = len(memoryview(target))
                if room == 0:   # never expected: end the connection rather than spin
                    log.error("TLS connection: the connection's protocol gave no buffer to read into")
                    self.abort()
                    return
                consumed, written = session.receive_into(data, target)
                data = data[consumed:]
                if written:
                    app.buffer_updated(written)
                if written < room and not data:
                    break   # all of it delivered (a partial record waits in the session)
                if consumed == 0 and written == 0:
                    break
        except TlsError as exc:
            self._failed(exc)
            return
        self._flush_outgoing()   # session tickets, key updates
        if session.peer_closed and not self.closing:
            self.eof_received()
        elif not self.paused and not self.closing:
            self._wait_for_more(app)

    def _wait_for_more(self, app: asyncio.BufferedProtocol) -> None:
        """Set the socket's low watermark for what the connection's large request still misses (see
        COALESCE_MIN_BYTES); back to 1 byte once none is."""
        missing = getattr(app, "frame_bytes_missing", None)
        want = min(missing() - _RECORD_MARGIN_BYTES, READ_BYTES) if missing is not None else 0
        want = want if want >= COALESCE_MIN_BYTES else 1
        if want != self._low_watermark and self._sock is not None:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            except OSError:
                self._sock = None   # not settable here: reads stay as they come
                return
            self._low_watermark = want

    def _flush_outgoing(self) -> None:
        out = self.session.outgoing()
        if out and self.raw is not None and not self.closing:
            self.raw.write(out)

    def _failed(self, exc: TlsError) -> None:
        peer = self.raw.get_extra_info("peername") if self.raw is not None else None
        log.info("TLS connection from %s failed: %s", peer, exc)
        out = self.session.outgoing()   # the alert that tells the client why
        if self.raw is not None and not self.closing:
            self.closing = True
            if out:
                self.raw.write(out)
            self.raw.close()

    def _handshake_timed_out(self) -> None:
        self._timer = None
        if self.transport is None and self.raw is not None:
            log.info("TLS client %s did not finish its handshake in %.0f s", self.raw.get_extra_info("peername"),
                     self.handshake_timeout_s)
            self.abort()

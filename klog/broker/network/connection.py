"""One client connection: an asyncio BufferedProtocol composing the network pieces, and request dispatch.

Requests are cut by the :class:`~klog.broker.network.frame_reader.RequestReader` (within the memory admitted by
:class:`~klog.broker.network.request_memory.ConnectionMemory`) and answered strictly in order, one at a time, as
Kafka does, with one exception: produce requests whose batches are appended and whose answers only wait for the
ISR (acks=all) let the next produce requests of the connection be appended meanwhile
(:class:`~klog.broker.network.pipeline.ResponsePipeline`). Responses leave through the
:class:`~klog.broker.network.writer.ResponseWriter`. A bad frame (garbage, unknown API key, undecodable body,
oversized) closes that one connection with one log line; everyone else keeps being served.

Client quotas (:mod:`klog.broker.quotas`): a request over its client's quota is answered at once with its
``throttle_time_ms``, then the connection processes no further request until that time has passed (KIP-219's
muted channel: the requests wait unread in the connection's bounded buffer).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
import types
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

from klog.broker.context import BrokerState
from klog.broker.handlers import AnswerWhenReplicated, CloseConnection, Handler, RequestContext
from klog.broker.handlers.api_versions import unsupported_version_response
from klog.broker.handlers.sasl import ConnectionAuth, authenticate_token
from klog.broker.metrics import FETCH_FOLLOWER_KEY, BrokerMetrics
from klog.broker import native_fetch, native_produce
from klog.broker.native_produce import EncodedResponse
from klog.security.acl import AclOperation, ResourceType
from klog.broker.network.frame_reader import RequestReader
from klog.broker.network.front import FrontLink
from klog.broker.network.listener import Acceptor
from klog.broker.network.pipeline import ResponsePipeline
from klog.broker.security import PRE_AUTH_APIS, scram_lookup
from klog.broker.network.request_memory import ConnectionMemory, RequestAdmission
from klog.broker.network.writer import ResponseWriter, SendPaths, WriteTimeout
from klog.protocol import ProtocolError, RequestHeader, decode_request, decode_request_header, encode_response
from klog.protocol.framing import SMALL_FRAME_BYTES
from klog.security.principal import ANONYMOUS, KafkaPrincipal
from klog.security.sasl import AuthenticationFailed, unexpected_during_login

#: the logger the network front has always used (operators filter on it)
log = logging.getLogger("klog.broker.server")

API_VERSIONS_KEY = 18
FETCH_KEY = 1
METADATA_KEY = 3
HEARTBEAT_KEY = 12
SASL_AUTHENTICATE_KEY = 36
PRODUCE_KEY = 0
#: CreateTopics, DeleteTopics, CreatePartitions: answers the controller mutation quota may throttle (KIP-599), the
#: client's connection then muted as Kafka's broker does for a forwarded answer's throttle time
MUTATION_KEYS = frozenset({19, 20, 37})
#: a connection the front gave back at a Produce it never serves, or at a transaction coordinator's request
#: (FrontLink.declines), stays on the event loop this long, doubled at each such request in a row up to
#: FRONT_DECLINED_MAX_DOUBLINGS times (2 ms, 4 ms, ... about 1 s)
FRONT_DECLINED_STAY_S = 0.001
FRONT_DECLINED_MAX_DOUBLINGS = 10
#: what a synchronous handler returns when it has to wait after all (the connection awaits it)
_CoroutineType = types.CoroutineType


#: what the native Produce path returns when the Python path must serve the frame
_NOT_NATIVE: Any = object()

#: where the bytes of a connection closed later (connection_creation_rate) go
_DISCARDED = memoryview(bytearray(65536))


async def _answered(response: Any) -> Any:
    return response



class ServingBroker(Protocol):
    """What a connection asks of the broker whose requests it carries."""

    loop: asyncio.AbstractEventLoop
    state: BrokerState
    handlers: dict[int, Handler]
    metrics: BrokerMetrics | None
    @property
    def trace_requests(self) -> bool:
        """Log every request at DEBUG (klog.broker.server's level, which may change at runtime)."""
        ...

    requests_handled: int
    native_produce_requests: int
    native_fetch_requests: int
    native_fetch_session_requests: int
    #: the native front (klog/broker/network/front.py; None: klog.network.native.front.enable is off)
    front: FrontLink | None

    def produce_checks(self) -> native_produce.ProduceChecks:
        """The native Produce path's checks, shared by the broker's connections."""
        ...


class Connection(asyncio.BufferedProtocol):
    """One client connection. Requests are processed sequentially (produce requests may be appended while earlier
    acks=all answers wait); responses keep request order."""

    # Slots, not a __dict__: with over 30 attributes an instance's dict is a full one of its own, about 1.5 KiB a
    # connection (0.75 MiB at 500 connections).
    __slots__ = ("_continuation", "_fd", "_from_front", "_front", "_front_after", "_front_declined", "_front_rest",
                 "_in_transaction", "_parked", "_parked_fetches", "_replicated", "_task", "_throttles",
                 "_wakeup", "acceptor", "admission", "auth", "broker", "client_host", "client_port", "client_software",
                 "closed", "frames", "front_owned", "id", "last_active", "limits", "listener_name", "memory",
                 "native_fetch", "native_produce", "peer", "pipeline", "principal", "regions", "requests", "security",
                 "sends", "throttled_until", "tls", "transport", "writer", "zero_copy")

    def __init__(self, listener_name: str, broker: ServingBroker, acceptor: Acceptor, admission: RequestAdmission,
                 sends: SendPaths) -> None:
        self.listener_name = listener_name
        self.id = acceptor.next_id()
        #: handlers, state and metrics of the broker the requests are for
        self.broker = broker
        self.acceptor = acceptor
        self.limits = acceptor.limits
        #: the broker-wide pieces this connection's own ones draw on
        self.admission = admission
        self.sends = sends
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = ""
        self.client_port = 0
        self.closed = False
        # the pieces, made once the connection is accepted (connection_made)
        self.memory: ConnectionMemory
        self.requests: RequestReader
        #: the complete requests waiting (``requests.frames``)
        self.frames: Any
        self.writer: ResponseWriter
        self.pipeline: ResponsePipeline
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        #: a request started in the read callback that has to wait; the connection's task awaits it next
        self._continuation: Coroutine[Any, Any, None] | None = None
        self.last_active = time.monotonic()
        security = acceptor.security[listener_name]
        self.security = security
        #: TLS connections send everything through the transport (no sendfile, no native writer)
        self.tls = security.ssl_context is not None
        self.zero_copy = sends.sendfile_enabled and not self.tls
        #: fetched records travel as file regions to the writer (sendfile; on TLS read and encrypted a slice at a
        #: time by the writer) unless sendfile is off on plaintext (then as bytes, read natively)
        self.regions = self.zero_copy or self.tls
        #: the principal requests run as: the mTLS certificate's (after ssl.principal.mapping.rules), else
        #: ANONYMOUS; on a SASL listener the logged-in user's
        self.principal: KafkaPrincipal = ANONYMOUS
        #: KIP-511 client software (name, version) from ApiVersions v3+, matched by client metrics subscriptions
        self.client_software: tuple[str, str] = ("", "")
        #: the SASL login state (None: not a SASL listener)
        self.auth: ConnectionAuth | None = None
        #: client quotas: no request is processed before this time (time.monotonic(); 0: not throttled)
        self.throttled_until = 0.0
        #: correlation id -> the throttle time a request earned before its answer (a produce's bytes, handler time)
        self._throttles: dict[int, int] = {}
        #: Produce frames are offered to the native path first (klog.produce.native.enable)
        self.native_produce = False
        #: the acks=all check of the native path on replicated partitions (native_produce.replicated_check)
        self._replicated: Callable[[list[tuple[str, int]]], bool]
        #: the transactional producers' check of the native path (native_produce.transaction_check)
        self._in_transaction: Callable[[str, int, str, int, int, int, int, int], bool]
        #: Fetch frames are offered to the native path first (klog.fetch.native.enable)
        self.native_fetch = False
        #: the long poll parked in the native wait table (klog/broker/native_fetch.py): (park id, frame, when it
        #: started, the authorization hook); taken back before the next request is served
        self._parked: tuple[int, Any, float, Callable[[str], bool] | None] | None = None
        self._parked_fetches: native_fetch.ParkedFetches | None = None
        #: the native front this connection may be handed to when idle (None: not on this connection)
        self._front: FrontLink | None = None
        #: the native front reads this connection now (the transport's reading is paused)
        self.front_owned = False
        #: bytes the front gave back are being fed to the reader (not handed to the front meanwhile)
        self._from_front = False
        #: what is left of the bytes the front gave back while a large request among them waits for request memory
        #: (queued.max.request.bytes): read, before the socket, once it is admitted
        self._front_rest: memoryview | None = None
        #: Produce requests in a row the front gave back as ones it never serves (a transactional producer's), and until
        #: when (time.monotonic()) the connection stays on the event loop because of them
        self._front_declined = 0
        self._front_after = 0.0
        self._fd = -1

    # ---- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base_transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
            self.peer = f"{self.client_host}:{self.client_port}"
        acceptor = self.acceptor
        refusal = acceptor.refusal_reason(self.client_host, self.broker.state.partitions)
        if refusal is not None:
            acceptor.refuse(self.peer, refusal)
            self.closed = True
            transport.abort()
            return
        quotas = acceptor.connection_quotas
        now_ms = time.monotonic() * 1000
        delay_ms = quotas.accept_delay_ms(self.listener_name, now_ms)
        ip_throttle_ms = quotas.ip_throttle_ms(self.client_host, now_ms + delay_ms)
        if ip_throttle_ms > 0:   # Kafka's ConnectionThrottledException: closed once the address's rate allows
            acceptor.refuse(self.peer, f"connection_creation_rate of {self.client_host} exceeded: closing in "
                            f"{delay_ms + ip_throttle_ms:.0f} ms")
            self.closed = True
            transport.pause_reading()
            self.broker.loop.call_later((delay_ms + ip_throttle_ms) / 1000, transport.abort)
            return
        if delay_ms > 0:   # max.connection.creation.rate: not served until the listener's rate allows (muted)
            self._mute(int(delay_ms))
        sock: socket.socket | None = transport.get_extra_info("socket")
        acceptor.accepted(self, sock)
        security = self.security
        if self.tls:
            sock = None   # the bytes on the socket are TLS records: only the transport may write
            if security.principal_mapper is not None:
                try:
                    principal = security.principal_mapper.principal(transport.get_extra_info("peercert"))
                except Exception:   # an unmappable certificate: ANONYMOUS, as Kafka without a matching rule
                    principal = None
                if principal is not None:
                    self.principal = principal
        if security.sasl:
            state = self.broker.state
            lookup = scram_lookup(lambda: state.metadata.image)
            tokens = state.token_credentials
            self.auth = ConnectionAuth(security.name, lambda: security.new_session(lookup, tokens.lookup),
                                       failed_delay_s=security.failed_auth_delay_s, reauth_ms=security.reauth_ms,
                                       max_receive_size=security.max_receive_size)
        limits = self.limits
        loop = self.broker.loop
        self.memory = ConnectionMemory(self.admission, limits.max_buffered_bytes, SMALL_FRAME_BYTES,
                                       resume=self._cut_frames)
        self.requests = RequestReader(transport, limits, self.memory)
        self.frames = self.requests.frames
        self.writer = ResponseWriter(transport, sock, self.sends, limits, loop, close_connection=self.close,
                                     zero_copy=self.zero_copy)
        self.pipeline = ResponsePipeline(loop, limits.produce_pipeline_depth, finish=self._finish,
                                         flush=self.writer.flush_pending, fail=self._close_after_failure)
        self.native_produce = self.broker.state.partitions.native_routes is not None
        if self.native_produce:
            self._replicated, self._in_transaction = self.broker.produce_checks()
        self.native_fetch = self.broker.state.partitions.fetch_routes is not None
        front = self.broker.front
        if front is not None and sock is not None and self.auth is None and self.writer.queue is not None \
                and self.native_produce:
            self._front = front
            self._fd = sock.fileno()
        if self.native_fetch and self.writer.queue is not None and self.zero_copy:
            self._parked_fetches = native_fetch.parked_fetches(self.broker.state, loop)
        self._task = loop.create_task(self._run())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.closed:   # a connection refused but not closed yet (a delayed close): what it sends is dropped
            return _DISCARDED
        return self.requests.reader.get_buffer()

    def frame_bytes_missing(self) -> int:
        """Bytes of the large request being read straight into its own buffer still to arrive (0: none is); the
        TLS engine waits for them in larger reads (klog.broker.network.native_tls)."""
        return 0 if self.closed else self.requests.reader.missing

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self.last_active = time.monotonic()
        reader = self.requests.reader
        reader.buffer_updated(nbytes)
        if reader.missing and self._front_rest is None:
            # the middle of a large request, read straight into its own buffer: nothing to cut until it is whole
            # (a transactional producer's MiB arrives in ~10 reads; each cut here cost the event loop ~10 µs)
            return
        self._cut_frames()

    def _cut_frames(self) -> None:
        """Take the complete frames the reader holds, pause or resume reading, and start answering."""
        auth = self.auth
        if auth is not None:   # sasl.server.max.receive.size until logged in, as Kafka
            self.requests.reader.max_frame_bytes = auth.frame_limit(self.limits.max_frame_bytes)
        bad_frame = self.requests.cut()
        if bad_frame is not None:
            self.close(bad_frame)
            return
        rest = self._front_rest
        if rest is not None and not self._from_front and self.memory.wait is None:
            # the large request the front's bytes stopped at was admitted: the rest of them, before the socket
            self._front_rest = None
            self._from_front = True
            try:
                self._feed(rest)
            finally:
                self._from_front = False
        wakeup = self._wakeup
        if self.frames and wakeup is not None and not wakeup.done():
            # The connection's task is idle (every earlier request answered): answer synchronous requests
            # right here, saving a task switch per request; the task takes over at the first one that waits.
            self._process_inline()
            if (self.frames or self._continuation is not None) and not wakeup.done():
                wakeup.set_result(None)
            elif self._front is not None and not self._from_front:
                self._to_front()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._task is None:   # refused: nothing was set up
            return
        self.acceptor.closed(self)
        self.memory.close()
        if self.front_owned:
            self._leave_front()
        if self._parked is not None:   # its wait ends here (its slot in the native table is freed)
            self._take_parked()
        if not self._task.done():
            self._task.cancel()
        self.pipeline.cancel()
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.cancel()
        self.writer.connection_lost(exc)
        self.frames.clear()
        if self._continuation is not None:
            self._continuation.close()  # never started: nothing to finish
            self._continuation = None
        self._front_rest = None

    def pause_writing(self) -> None:
        self.writer.write_paused = True

    def resume_writing(self) -> None:
        self.writer.resume_writing()

    # ---- processing ---------------------------------------------------------------------------------

    def close(self, reason: str | None = None, *, graceful: bool = False) -> None:
        """Close this connection. ``graceful``: first send the answers to earlier requests (a protocol error
        in a later pipelined request does not lose them); otherwise drop everything buffered."""
        if reason:
            log.warning("closing connection %d from %s: %s", self.id, self.peer, reason)
        if not self.closed:
            self.closed = True
            self.writer.close(graceful)
        if self.front_owned:
            self._leave_front()
        self.acceptor.closed(self)
        self.memory.close()

    # ---- the native front (klog/broker/network/front.py) ---------------------------------------------------

    def _to_front(self) -> None:
        """Hand this idle connection to the native front: every request answered or queued in order, nothing
        buffered, nothing that needs Python per request (a throttle, write back-pressure). A long poll parked in the
        native wait table goes with it when the front parks long polls (else the connection stays)."""
        front = self._front
        assert front is not None
        parked = self._parked
        if self.closed or self.front_owned or self.frames or self._continuation is not None \
                or self._front_rest is not None or (parked is not None and not front.fetch) or self.pipeline.answers \
                or self._throttles:
            return
        requests = self.requests
        writer = self.writer
        if requests.reader.buffered or requests.paused or self.memory.wait is not None or writer.write_paused \
                or (self.throttled_until and time.monotonic() < self.throttled_until) \
                or (self._front_after and time.monotonic() < self._front_after):
            return
        if not front.refresh():
            return
        if writer.out:   # the answers so far go first: the front's answers join the same queue after them
            writer.flush_out()
        transport = self.transport
        assert transport is not None
        transport.pause_reading()
        try:
            held = front.hold(self, self._fd, writer.queue, fetch=self._parked_fetches is not None,
                              parked=None if parked is None else (parked[0], bytes(parked[1])))
        except OSError:
            transport.resume_reading()
            return
        if not held:   # its long poll was sent back to the Python path: served here
            transport.resume_reading()
            return
        if parked is not None:
            self._parked = None
            assert self._parked_fetches is not None
            self._parked_fetches.connections.pop(parked[0], None)
        self.front_owned = True

    def from_front(self, data: bytes, ended: bool, parked: tuple[int, bytes] | None = None) -> None:
        """The native front gave this connection back at a frame it does not serve, or at the end of its stream
        (``ended``: never handed to the front again, the event loop reads the end and closes it): read the socket
        again, after ``data`` (the bytes the front held, from that frame on). ``parked``: (park id, frame) of the
        long poll the front parked in the native wait table, not known answered: the connection's own now (taken
        back before its next request; served in Python now if the table sent it back, which may be why)."""
        self.front_owned = False
        if ended:
            self._front = None
        returned = False
        if parked is not None:
            parked_id, parked_frame = parked
            parked_fetches = self._parked_fetches
            assert parked_fetches is not None
            parked_fetches.connections[parked_id] = self
            self._parked = (parked_id, parked_frame, time.perf_counter(), None)
            returned = self.broker.state.partitions.fetch_routes.disown(parked_id)
        if self.closed:
            if self._parked is not None:
                self._take_parked()   # closed: returns nothing to await
            return
        self._note_front_declined(data)
        transport = self.transport
        assert transport is not None
        transport.resume_reading()
        self.last_active = time.monotonic()
        self._from_front = True
        try:
            self._feed(memoryview(data))
        finally:
            self._from_front = False
        if returned and parked is not None:
            self.resume_parked(parked[0])
        wakeup = self._wakeup
        if self._front is not None and not self.closed and not self.frames and self._continuation is None \
                and wakeup is not None and not wakeup.done():
            self._to_front()

    def _feed(self, data: memoryview) -> None:
        """Read ``data`` (bytes the front gave back) as if received. A large request among them that request memory
        does not admit yet stops it (the reader's buffer holds no more than the start of that request): the rest
        waits in ``_front_rest`` (the socket is paused meanwhile) and is read once it is admitted (``_cut_frames``)."""
        reader = self.requests.reader
        pos, end = 0, len(data)
        while pos < end and not self.closed:
            if self.memory.wait is not None:
                self._front_rest = data[pos:]
                return
            buf = reader.get_buffer()
            n = min(len(buf), end - pos)
            buf[:n] = data[pos:pos + n]
            pos += n
            self.buffer_updated(n)

    def _note_front_declined(self, data: bytes) -> None:
        """Given back at a Produce the front never serves (a transactional producer's: its next one
        would be given back too) or at a transaction coordinator's request (a transactional producer's
        AddPartitionsToTxn, EndTxn, ...: the front serves none): stay on the event loop 2 ms, twice as long at each
        such request in a row, up to about 1 s, instead of going back and forth at every request."""
        front = self._front
        if front is not None and front.declines(data):
            self._front_declined = min(self._front_declined + 1, FRONT_DECLINED_MAX_DOUBLINGS)
            self._front_after = time.monotonic() + FRONT_DECLINED_STAY_S * (1 << self._front_declined)
        else:
            self._front_declined = 0

    def _leave_front(self) -> None:
        self.front_owned = False
        front = self._front
        assert front is not None
        front.drop(self)

    def note_front_activity(self, now: float) -> None:
        """The maintenance pass: a connection the front reads was active when the front last read it."""
        if self.front_owned:
            front = self._front
            assert front is not None
            idle = front.idle_seconds(self)
            if idle is not None:
                self.last_active = max(self.last_active, now - idle)

    def waiting_for_requests(self) -> bool:
        """Every request answered and nothing received: the connection is idle."""
        return not self.frames and not self.pipeline.answers and self._wakeup is not None

    def _process_inline(self) -> None:
        """Answer queued requests whose handlers are synchronous, in the read callback. Stops at the first
        request with an asynchronous handler (left to the task) or the first that has to wait (its
        continuation is left in ``_continuation`` for the task)."""
        handlers = self.broker.handlers
        try:
            frames = self.frames
            while frames and self._continuation is None and not self.closed:
                frame = frames[0]
                entry = handlers.get(int.from_bytes(frame[0:2], "big")) if len(frame) >= 2 else None
                if entry is None or (entry.is_async and frame[0:2] != b"\x00\x0c"):
                    # the task answers it (or closes the connection over it); a Heartbeat may be answered here
                    # (klog/broker/heartbeat_answers.py), else its handler is left to the task as a continuation
                    return
                self._continuation = self._process_sync(self.requests.take())
            if not frames and self._continuation is None:
                self.memory.release_processed()
                if self.writer.out:
                    self.writer.flush_out()
            self.last_active = time.monotonic()
        except Exception as exc:
            self._close_after_failure(exc)

    def _close_after_failure(self, exc: Exception) -> None:
        """Close this connection over an exception from serving it (called in the ``except`` block): a socket
        error closes it quietly, so does a client that reads nothing (the write timeout); anything else is a bug
        in a handler, logged, and must not stop the broker."""
        if isinstance(exc, (ConnectionError, OSError)):
            if not self.closed:
                self.close(f"socket error: {exc}")
            return
        if isinstance(exc, WriteTimeout):
            self.close(f"client read nothing for {self.limits.write_timeout_s:.0f}s "
                       "(klog.connection.write.timeout.ms)")
            return
        log.exception("closing connection %d from %s after an internal error", self.id, self.peer)
        self.close()

    async def _run(self) -> None:
        loop = self.broker.loop
        requests = self.requests
        writer = self.writer
        try:
            while not self.closed:
                continuation = self._continuation
                if continuation is not None:
                    # a request started in the read callback that has to wait: finish it first (order)
                    self._continuation = None
                    await continuation
                elif not self.frames:
                    self.memory.release_processed()
                    self._wakeup = loop.create_future()
                    if self._front is not None and not self._from_front:
                        self._to_front()
                    await self._wakeup
                    self._wakeup = None
                    continue
                else:
                    continuation = self._process_sync(requests.take())
                    if continuation is not None:
                        await continuation
                if not self.frames and writer.out:
                    writer.flush_out()
                self.last_active = time.monotonic()
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self._close_after_failure(exc)

    def _process_sync(self, frame: Any, *, native: bool = True) -> Coroutine[Any, Any, None] | None:
        """Decode, dispatch and answer one request as far as that is possible without waiting; return what
        is left to await (an asynchronous handler, a drain, a sendfile), or None when the answer is queued.
        ``native``: False to skip the native paths (a native Fetch that has to go back to the Python path)."""
        if self._parked is not None:   # a long poll parked natively comes first (requests are answered in order)
            waiting = self._take_parked()
            if waiting is not None:
                return self._after_parked(waiting, frame)
        if self.throttled_until and time.monotonic() < self.throttled_until:
            return self._after_throttle(frame)   # muted: nothing more is processed until the throttle ends
        auth = self.auth
        if auth is not None and auth.raw_tokens:
            return self._raw_token(auth, frame)
        pipeline = self.pipeline
        if native:
            # a produce may be appended while earlier acks=all answers wait (the pipeline keeps their order)
            if self.native_produce and frame[0:2] == b"\x00\x00":
                answered = self._produce_natively(frame)
                if answered is not _NOT_NATIVE:
                    return answered   # type: ignore[no-any-return]
            elif self.native_fetch and not pipeline.answers and frame[0:2] == b"\x00\x01":
                answered = self._fetch_natively(frame)
                if answered is not _NOT_NATIVE:
                    return answered   # type: ignore[no-any-return]
        if pipeline.answers and int.from_bytes(frame[0:2], "big") != PRODUCE_KEY:
            # only produce requests are taken while earlier answers wait (appends keep request order); anything
            # else is processed once they are sent, as if each request had been answered before the next
            return pipeline.when_answered(self._process_later(frame))
        broker = self.broker
        if frame[0:2] == b"\x00\x0c":   # Heartbeat: a common one answered here (klog/broker/heartbeat_answers.py)?
            heartbeats = broker.state.heartbeat_answers
            if heartbeats is not None and not self._throttles and self._native_allowed():
                metrics = broker.metrics
                started = time.perf_counter() if metrics is not None else 0.0
                answer = heartbeats.answer(frame)
                if answer is not None:
                    broker.requests_handled += 1
                    continuation = self.writer.send([answer])
                    if metrics is not None:
                        metrics.request_done(HEARTBEAT_KEY, time.perf_counter() - started)
                    return continuation
        elif frame[0:2] == b"\x00\x03":   # Metadata: an answer kept encoded (klog/broker/metadata_answers.py)?
            answers = broker.state.metadata_answers
            if answers is not None and not self._throttles and self._native_allowed():
                metrics = broker.metrics
                started = time.perf_counter() if metrics is not None else 0.0
                kept = answers.answer(self.listener_name, frame)
                if kept is not None:
                    broker.requests_handled += 1
                    continuation = self.writer.send([kept])
                    if metrics is not None:
                        metrics.request_done(METADATA_KEY, time.perf_counter() - started)
                    return continuation
        try:
            header, offset = decode_request_header(frame)
        except ProtocolError as exc:
            self.close(f"malformed request header: {exc}", graceful=True)
            return None
        api_key = header.api_key
        version = header.api_version
        entry = broker.handlers.get(api_key)
        advertised = broker.state.api_versions.get(api_key)
        if entry is None or advertised is None:
            self.close(f"unsupported api key {api_key} (v{version}, client {header.client_id!r})", graceful=True)
            return None
        if not advertised[0] <= version <= advertised[1]:
            if api_key == API_VERSIONS_KEY:
                # KIP-511: a too-new ApiVersions gets v0 format, UNSUPPORTED_VERSION and ApiVersions's versions
                return self.writer.send(encode_response(API_VERSIONS_KEY, 0, header.correlation_id,
                                                        unsupported_version_response(broker.state)))
            self.close(f"unsupported version {version} of api key {api_key} (advertised "
                       f"{advertised[0]}-{advertised[1]}, client {header.client_id!r})", graceful=True)
            return None
        auth = self.auth
        if auth is not None and auth.refused is not None:
            return self._refuse_reauthentication(auth, header)
        if auth is not None and api_key != SASL_AUTHENTICATE_KEY and auth.in_login:
            return self._refuse_during_login(auth, header, frame, offset)
        if auth is not None and not auth.authenticated and not auth.in_login:
            refusal = auth.refusal_before_login(api_key)
            if refusal is not None:   # as Kafka's SaslServerAuthenticator: closed unanswered
                self.close(f"{refusal} on listener {self.listener_name} (client {header.client_id!r})", graceful=True)
                return None
        elif auth is not None and api_key not in PRE_AUTH_APIS:
            if auth.expired(time.monotonic()):
                self.close(f"SASL session expired (connections.max.reauth.ms) and was not re-authenticated "
                           f"(client {header.client_id!r})", graceful=True)
                return None
        try:
            request = decode_request(header, frame, offset)
        except ProtocolError as exc:
            self.close(f"malformed request: {exc} (client {header.client_id!r})", graceful=True)
            return None
        if api_key == API_VERSIONS_KEY and version >= 3:
            self.client_software = (request.client_software_name or "", request.client_software_version or "")
        ctx = RequestContext(header, self.client_host, self.client_port, self.id, zero_copy=self.regions,
                             listener=self.listener_name,
                             principal=auth.principal or ANONYMOUS if auth is not None else self.principal,
                             session=auth, client_software=self.client_software)
        if broker.trace_requests:
            software = ""
            if api_key == API_VERSIONS_KEY and version >= 3:
                software = f" software={request.client_software_name}/{request.client_software_version}"
            log.debug("request api_key=%d version=%d client_id=%r connection=%d%s", api_key, version,
                      header.client_id, self.id, software)
        broker.requests_handled += 1
        metrics = broker.metrics
        quotas = broker.state.quotas
        throttled = quotas.refresh()
        started = time.perf_counter() if metrics is not None or throttled else 0.0
        if throttled and api_key == PRODUCE_KEY:
            throttle = quotas.produce(ctx.principal, header.client_id, len(frame), time.monotonic() * 1000)
            if throttle:   # muted at once: the produce requests pipelined behind it wait (acks=all appends)
                self._throttles[header.correlation_id] = throttle
                self._mute(throttle)
        # a Metadata answer computed from this image may be kept encoded (klog/broker/metadata_answers.py)
        image = broker.state.metadata.image if api_key == METADATA_KEY else None
        if entry.is_async:
            # the handler may wait (long poll, rebalance): answers queued before it must not wait with it
            if self.writer.out:
                self.writer.flush_out()
            return self._finish(entry.func(broker.state, ctx, request), header, started, request)
        try:
            response = entry.func(broker.state, ctx, request)
            if throttled:   # request_percentage: the handler's time on the event loop
                throttle = quotas.request(ctx.principal, header.client_id, time.perf_counter() - started,
                                          time.monotonic() * 1000)
                if throttle > self._throttles.get(header.correlation_id, 0):
                    self._throttles[header.correlation_id] = throttle
                    self._mute(throttle)
        except CloseConnection as exc:
            if pipeline.answers:   # the answers to earlier requests are sent first
                return pipeline.when_answered(self._close_later(f"{exc} (client {header.client_id!r})"))
            self.close(f"{exc} (client {header.client_id!r})", graceful=True)
            return None
        if type(response) is AnswerWhenReplicated:
            return pipeline.answer_in_turn(response.answer, header, started)
        if type(response) is _CoroutineType:
            # a synchronous handler's slow path (e.g. Metadata auto-creating topics, a produce validating a
            # large batch off the loop before appending it)
            if self.writer.out:
                self.writer.flush_out()
            if pipeline.answers:
                return pipeline.when_answered(self._finish(response, header, started, request))
            return self._finish(response, header, started, request)
        if pipeline.answers:   # a produce answered at once (acks=1) goes after the answers still waiting
            return pipeline.answer_in_turn(_answered(response), header, started)
        answers = broker.state.metadata_answers
        if image is not None and answers is not None and type(response) is dict and not throttled \
                and not self._throttles and not self.closed:
            chunks = encode_response(METADATA_KEY, version, header.correlation_id, response)
            answers.store(self.listener_name, frame, image, chunks)
            continuation = self.writer.send(chunks)
        else:
            continuation = self._respond(response, header)
        if auth is not None and auth.close_after_answer:
            self.close(f"{auth.close_reason} (client {header.client_id!r})", graceful=True)
            return None
        if metrics is not None:
            metrics.request_done(api_key, time.perf_counter() - started)
        return continuation

    def _produce_natively(self, frame: Any) -> Any:
        """Serve a Produce frame in one native call (klog/broker/native_produce.py): what is left to await, or
        ``_NOT_NATIVE`` when the Python path must serve it (nothing was appended). Not taken while a client quota
        is set (the Python path measures the request), before a SASL login is complete, or while tracing."""
        broker = self.broker
        state = broker.state
        if broker.trace_requests or state.quotas.refresh():
            return _NOT_NATIVE
        auth = self.auth
        if auth is not None and (not auth.authenticated or auth.close_after_answer or auth.in_login
                                 or auth.expired(time.monotonic())):
            return _NOT_NATIVE
        started = time.perf_counter()
        outcome = native_produce.serve(state, frame, None if state.access is None else self._may_write,
                                       self._replicated, self._in_transaction)
        if outcome is None:
            return _NOT_NATIVE
        broker.requests_handled += 1
        broker.native_produce_requests += 1
        close_reason = native_produce.account(state, outcome)
        pipeline = self.pipeline
        if close_reason is not None:
            reason = f"{close_reason} (client {outcome.client_id!r})"
            if pipeline.answers:   # the answers to earlier requests are sent first
                return pipeline.when_answered(self._close_later(reason))
            self.close(reason, graceful=True)
            return None
        response = outcome.response
        if outcome.waits:   # acks=all on replicated partitions: the answer waits for the ISR
            answer = native_produce.answer(state, outcome)
            if not isinstance(answer, bytes):
                header = RequestHeader(PRODUCE_KEY, outcome.api_version, outcome.correlation_id, outcome.client_id)
                return pipeline.answer_in_turn(answer, header, started)
            response = answer
        if pipeline.answers:   # answered at once, after the answers still waiting
            header = RequestHeader(PRODUCE_KEY, outcome.api_version, outcome.correlation_id, outcome.client_id)
            return pipeline.answer_in_turn(_answered(None if response is None else EncodedResponse(response)), header,
                                           started)
        continuation = None if response is None else self.writer.send([response])
        metrics = broker.metrics
        if metrics is not None:
            metrics.request_done(PRODUCE_KEY, time.perf_counter() - started)
        return continuation

    def _native_allowed(self) -> bool:
        """Whether a request may take a native path: not while a client quota is set (the Python path measures
        the request), before a SASL login is complete, or while tracing."""
        broker = self.broker
        if broker.trace_requests or broker.state.quotas.refresh():
            return False
        auth = self.auth
        return auth is None or (auth.authenticated and not auth.close_after_answer and not auth.in_login
                                and not auth.expired(time.monotonic()))

    def _fetch_natively(self, frame: Any) -> Any:
        """Serve a Fetch frame in one native call (klog/broker/native_fetch.py): what is left to await (a long
        poll's wait in Python, a sendfile), or ``_NOT_NATIVE`` when the Python path must serve it (nothing was
        changed). A long poll parked in the native wait table leaves nothing to await: the table answers it."""
        if not self._native_allowed():
            return _NOT_NATIVE
        broker = self.broker
        state = broker.state
        started = time.perf_counter()
        allow = None if state.access is None else self._may_read
        parked_fetches = self._parked_fetches
        if parked_fetches is not None:
            native_fetch.drain_answered(state, broker, broker.metrics)
            if self.writer.out:   # the answers queued before it go first: the wait table may answer at once
                self.writer.flush_out()
            outcome = native_fetch.serve(state, frame, allow, zero_copy=self.regions, park=self.writer.queue)
        else:
            outcome = native_fetch.serve(state, frame, allow, zero_copy=self.regions)
        if outcome is None:
            return _NOT_NATIVE
        broker.requests_handled += 1
        broker.native_fetch_requests += 1
        if outcome.chunks is None:   # a long poll: nothing to return yet
            if outcome.parked:
                assert parked_fetches is not None
                parked_fetches.connections[outcome.parked] = self
                self._parked = (outcome.parked, frame, started, allow)
                return None
            if self.writer.out:   # the answers queued before it must not wait with it
                self.writer.flush_out()
            deadline = time.monotonic() + max(outcome.max_wait_ms, 0) / 1000
            return self._fetch_natively_after_wait(frame, deadline, outcome.wait_keys, started, allow,
                                                   replica=outcome.replica)
        return self._send_native_fetch(outcome, started)

    def _take_parked(self) -> Coroutine[Any, Any, None] | None:
        """Take the long poll parked in the native wait table back: None if the table answered it (its answer is
        queued), else its wait in Python for what is left of ``max_wait_ms`` (then its answer)."""
        parked = self._parked
        assert parked is not None
        self._parked = None
        parked_id, frame, started, allow = parked
        parked_fetches = self._parked_fetches
        assert parked_fetches is not None
        parked_fetches.connections.pop(parked_id, None)
        state = self.broker.state
        left_ms = state.partitions.fetch_routes.take_back(parked_id)
        native_fetch.drain_answered(state, self.broker, self.broker.metrics)
        if left_ms is None or self.closed:
            return None
        return self._fetch_natively_after_wait(frame, time.monotonic() + left_ms / 1000, None, started, allow)

    def resume_parked(self, parked_id: int) -> None:
        """The native wait table sent parked long poll ``parked_id`` back: serve it in Python now."""
        parked = self._parked
        if parked is None or parked[0] != parked_id or self.closed or self._continuation is not None:
            return
        waiting = self._take_parked()
        if waiting is None:
            return
        self._continuation = waiting
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def _after_parked(self, waiting: Coroutine[Any, Any, None], frame: Any) -> None:
        await waiting
        if self.closed:
            return
        continuation = self._process_sync(frame)
        if continuation is not None:
            await continuation

    def _send_native_fetch(self, outcome: Any, started: float) -> Coroutine[Any, Any, None] | None:
        state = self.broker.state
        native_fetch.account(state, outcome)
        if outcome.session_id:
            self.broker.native_fetch_session_requests += 1
        continuation = self.writer.send(outcome.chunks)
        metrics = self.broker.metrics
        if metrics is not None:
            metrics.request_done(FETCH_KEY, time.perf_counter() - started)
        return continuation

    async def _fetch_natively_after_wait(self, frame: Any, deadline: float, keys: Any, started: float,
                                         allow: Callable[[str], bool] | None, *, replica: bool = False) -> None:
        """A native long poll waiting in Python: wait on its partitions (``keys``; None: serve it again first) as
        the Python path does (woken by a moved high watermark, for a ``replica``'s fetch by an append, or at
        ``deadline``), then answer with what there is. A replica's fetch is served again without being judged
        again (as the Python path judges it once). A partition that changed meanwhile (a route forgotten, an error)
        sends the request to the Python path, which answers it."""
        broker = self.broker
        state = broker.state
        while True:
            if keys is not None:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    await state.partitions.wait_for_append(keys, remaining, replica=replica)
                if self.closed:
                    return
            final = time.monotonic() >= deadline
            if not final and keys is not None:
                await asyncio.sleep(0)
            outcome = native_fetch.serve(state, frame, allow, zero_copy=self.regions, may_wait=not final, judged=True)
            if outcome is None:
                broker.requests_handled -= 1
                broker.native_fetch_requests -= 1
                continuation = self._process_sync(frame, native=False)
                if continuation is not None:
                    await continuation
                return
            if outcome.chunks is not None:
                break
            keys = outcome.wait_keys
            replica = outcome.replica
        continuation = self._send_native_fetch(outcome, started)
        if continuation is not None:
            await continuation

    def _may_read(self, topic: str) -> bool:
        """The native Fetch path's authorization hook: may this connection's principal Read ``topic``? Not counted
        as a denial: the Python path then answers the request, and counts it."""
        access = self.broker.state.access
        return access is None or access.check(self._principal(), self.client_host, AclOperation.READ,
                                              ResourceType.TOPIC, topic, count=False)

    def _may_write(self, topic: str) -> bool:
        """The native Produce path's authorization hook: may this connection's principal Write ``topic``? Not
        counted as a denial: the Python path then answers the request, and counts it."""
        access = self.broker.state.access
        return access is None or access.check(self._principal(), self.client_host, AclOperation.WRITE,
                                              ResourceType.TOPIC, topic, count=False)

    async def _refuse_reauthentication(self, auth: ConnectionAuth, header: Any) -> None:
        """The request after a re-authentication's SaslHandshake named another mechanism: as Kafka (its
        REAUTH_BAD_MECHANISM state), no answer, the connection closed after connection.failed.authentication.delay.ms."""
        if auth.failed_delay_s > 0:
            await asyncio.sleep(auth.failed_delay_s)
        self.close(f"failed re-authentication: {auth.refused} (client {header.client_id!r})", graceful=True)

    async def _refuse_during_login(self, auth: ConnectionAuth, header: Any, frame: Any, offset: int) -> None:
        """A request other than SaslAuthenticate between a SaslHandshake and the end of its login (also a KIP-368
        re-authentication's): as Kafka's SaslServerAuthenticator, its error response (ILLEGAL_SASL_STATE) after
        connection.failed.authentication.delay.ms, then the connection closed."""
        try:
            request = decode_request(header, frame, offset)
        except ProtocolError as exc:
            self.close(f"malformed request: {exc} (client {header.client_id!r})", graceful=True)
            return
        if auth.failed_delay_s > 0:
            await asyncio.sleep(auth.failed_delay_s)
        if not self.closed:
            continuation = self.writer.send(encode_response(header.api_key, header.api_version, header.correlation_id,
                                                            unexpected_during_login(header.api_key, request)))
            if continuation is not None:
                await continuation
        self.close(f"unexpected request (api key {header.api_key}) during SASL authentication on listener "
                   f"{self.listener_name} (client {header.client_id!r})", graceful=True)

    async def _raw_token(self, auth: ConnectionAuth, frame: Any) -> None:
        """A bare SASL token after SaslHandshake v0 (no request header, before KIP-152), answered by a bare
        frame, as Kafka's SaslServerAuthenticator; a refused one closes the connection unanswered."""
        try:
            answer, _ = await authenticate_token(auth, bytes(frame), self.client_host, self.client_port)
        except (AuthenticationFailed, CloseConnection) as exc:
            self.close(f"failed authentication with bare SASL tokens (SaslHandshake v0): {exc}", graceful=True)
            return
        if not self.closed:
            continuation = self.writer.send([struct.pack(">i", len(answer)) + answer])
            if continuation is not None:
                await continuation

    async def _close_later(self, reason: str) -> None:
        self.close(reason, graceful=True)

    async def _process_later(self, frame: Any) -> None:
        continuation = self._process_sync(frame)
        if continuation is not None:
            await continuation

    async def _finish(self, pending: Coroutine[Any, Any, Any], header: Any, started: float, request: Any) -> None:
        """Await a handler's answer, then send it."""
        try:
            response = await pending
        except CloseConnection as exc:
            self.close(f"{exc} (client {header.client_id!r})", graceful=True)
            return
        continuation = self._respond(response, header)
        auth = self.auth
        if auth is not None and auth.close_after_answer:
            self.close(f"{auth.close_reason} (client {header.client_id!r})", graceful=True)
            return
        metrics = self.broker.metrics
        if metrics is not None:
            api_key = header.api_key
            if api_key == FETCH_KEY and _replica_fetch(request):
                api_key = FETCH_FOLLOWER_KEY
            metrics.request_done(api_key, time.perf_counter() - started)
        if continuation is not None:
            await continuation

    def _respond(self, response: Any, header: Any) -> Coroutine[Any, Any, None] | None:
        # the throttle time the request earned (its connection is muted already; acks=0: no answer, muted all the
        # same)
        throttle = self._throttles.pop(header.correlation_id, 0) if self._throttles else 0
        if response is None or self.closed:
            return None
        if type(response) is EncodedResponse:   # the native Produce path's answer, encoded already
            return self.writer.send([response.frame])
        if header.api_key in MUTATION_KEYS:   # the controller's mutation quota throttled it: muted for that long
            decided = _throttle_time_ms(response)
            self.broker.state.quotas.mutation_throttled(decided)
            if decided > throttle:
                self._mute(decided)
                throttle = decided
        elif header.api_key == FETCH_KEY:   # consumer_byte_rate: the handler answered a throttled fetch empty
            decided = _throttle_time_ms(response)
            if decided > throttle:
                self._mute(decided)
                throttle = decided
        if throttle and type(response) is dict and header.api_version >= 1:   # answered with its throttle time
            response["throttle_time_ms"] = throttle
        return self.writer.send(encode_response(header.api_key, header.api_version, header.correlation_id, response))

    def _principal(self) -> KafkaPrincipal:
        auth = self.auth
        return auth.principal or ANONYMOUS if auth is not None else self.principal

    def _mute(self, throttle_ms: int) -> None:
        """Process no further request for ``throttle_ms`` (Kafka's throttled channel)."""
        self.throttled_until = max(self.throttled_until, time.monotonic() + throttle_ms / 1000)

    async def _after_throttle(self, frame: Any) -> None:
        if self.writer.out:   # the answers given so far (with their throttle times) leave now, not after the wait
            self.writer.flush_out()
        delay = self.throttled_until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        continuation = self._process_sync(frame)
        if continuation is not None:
            await continuation


def _throttle_time_ms(response: Any) -> int:
    """The throttle time a handler's answer (a dict, or a forwarded answer's decoded Struct) carries."""
    value = response.get("throttle_time_ms") if type(response) is dict else getattr(response, "throttle_time_ms", 0)
    return int(value or 0)


def _replica_fetch(request: Any) -> bool:
    """A follower's (or a controller's) fetch, never throttled by client quotas."""
    return max(getattr(request, "replica_id", -1),
               getattr(getattr(request, "replica_state", None), "replica_id", -1)) >= 0

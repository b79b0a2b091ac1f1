"""The network front: listeners, connections, framing, limits, request dispatch, zero-copy fetch sends.

One asyncio BufferedProtocol per connection. Frames are cut by klog.protocol's BufferedFrameReader (bounded by
``socket.request.max.bytes``) and answered strictly in order, one at a time, as Kafka does, with one exception:
produce requests whose batches are appended and whose answers only wait for the ISR (acks=all) let the next
produce requests of the connection be appended meanwhile (up to ``klog.produce.pipeline.depth``); reading runs ahead
by at most ``klog.connection.max.inflight.requests`` frames or ``klog.connection.max.buffered.bytes`` bytes,
then the socket is no longer read until the backlog drains. A bad frame (garbage, unknown API key,
undecodable body, oversized) closes that one connection with one log line; everyone else keeps being served.

Request bytes are bounded twice before their buffers are allocated: per connection (a large request must fit in
``klog.connection.max.buffered.bytes`` with what the connection already holds) and across all connections
(``queued.max.request.bytes``, see klog.broker.network.request_memory). A request that does not fit stops its connection
being read (the kernel's socket buffers then push back on the client) until bytes are released.

Fetch responses carry file regions of segment files: on plaintext connections they go from the page cache to
the socket with ``sendfile`` (zero copy); otherwise (or with ``klog.fetch.sendfile.enable=false``) they are
read into memory and written. Responses whose file regions total less than ``klog.fetch.sendfile.min.bytes``
are copied (natively, without the GIL) and written with their header in one system call: for a few KiB a
write() plus a sendfile() costs more than the copy.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import socket
import time
import types
from collections import deque
from collections.abc import Coroutine
from typing import Any, cast

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.descriptors import DESCRIPTORS_PER_CONNECTION
from klog.broker.log_limit import RateLimitedLog
from klog.broker.handlers import AnswerWhenReplicated, CloseConnection, RequestContext, load_all
from klog.broker.handlers.api_versions import unsupported_version_response
from klog.broker.network.request_memory import RequestMemory
from klog.broker.metrics import FETCH_FOLLOWER_KEY, BrokerMetrics, MetricsListener, parse_listener
from klog.protocol import (
    BufferedFrameReader,
    FrameTooLarge,
    ProtocolError,
    decode_request,
    decode_request_header,
    encode_response,
)

log = logging.getLogger("klog.broker.server")

API_VERSIONS_KEY = 18
FETCH_KEY = 1
PRODUCE_KEY = 0
#: the first bytes of a TLS ClientHello / HTTP request, to say something useful about common mistakes
_TLS_HANDSHAKE = 0x16


#: descriptors asked for beyond max.connections' own when raising the open-files limit (segment files, partitions)
FD_RESERVE = 4096
#: pipelined responses are gathered up to this many bytes before one write
COALESCE_BYTES = 256 * 1024
#: what a synchronous handler returns when it has to wait after all (the server awaits it)
_CoroutineType = types.CoroutineType
#: a connection idle this long gives back its pooled large-frame receive buffers (up to
#: framing.POOLED_BUFFERS x POOLED_BUFFER_MAX_BYTES each): a busy producer reuses them request after request, but
#: thousands of idle connections must not each pin megabytes
POOL_RELEASE_IDLE_S = 10.0
#: chunk types written as they are (anything else in a response is a file region)
_BYTE_TYPES = frozenset((bytes, bytearray, memoryview))


def _region_bytes(region: Any) -> bytes:
    """The bytes of a file region (a native FileSlice copies them without the GIL)."""
    to_bytes = getattr(region, "to_bytes", None)
    data = to_bytes() if to_bytes is not None else os.pread(region.fd, region.length, region.position)
    if len(data) != region.length:
        raise OSError(errno.EIO, f"segment file shorter than expected ({len(data)} of {region.length} bytes)")
    return data


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _WriteTimeout(Exception):
    pass


async def _answered(response: Any) -> Any:
    return response


class Connection(asyncio.BufferedProtocol):
    """One client connection. Requests are processed sequentially (produce requests may be appended while earlier
    acks=all answers wait); responses keep request order."""

    def __init__(self, server: BrokerServer, listener_name: str) -> None:
        self.server = server
        self.listener_name = listener_name
        self.id = next(server._connection_ids)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = ""
        self.client_port = 0
        #: cuts frames; large ones are read straight into pooled buffers of their own (no join copy), once
        #: admitted by ``_admit`` (memory bounds)
        self.reader = BufferedFrameReader(server.limits.max_frame_bytes, admit=self._admit)
        self.frames: deque[Any] = deque()
        #: bytes of the complete requests in ``frames``
        self.buffered_in = 0
        #: bytes of every request this connection holds: being received (admitted), queued, being processed
        self.held_bytes = 0
        #: the part of ``held_bytes`` admitted as large requests (counted so in ``server.request_memory``)
        self._held_large = 0
        #: the request being processed (released when the next is taken, or when the connection is idle)
        self._processing_bytes = 0
        self.reading_paused = False
        #: a large request is waiting to be admitted: "connection" (its own bound) or "broker" (the global one)
        self._memory_wait: str | None = None
        self.closed = False
        self._wakeup: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._write_paused = False
        self._task: asyncio.Task[None] | None = None
        self._sendfile_fd = -1
        self._out: list[Any] = []
        self._out_bytes = 0
        #: a request started in the read callback that has to wait; the connection's task awaits it next
        self._continuation: Coroutine[Any, Any, None] | None = None
        #: produce requests appended whose answers wait (acks=all), oldest first: each task sends its answer
        #: after the one before it (at most ``klog.produce.pipeline.depth``)
        self._answers: deque[asyncio.Task[None]] = deque()
        #: this connection's send queue on the native writer thread (None: the transport writes)
        self._queue: Any = None
        self._queue_closing = False
        self.last_active = time.monotonic()

    # ---- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base_transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
            self.peer = f"{self.client_host}:{self.client_port}"
        server = self.server
        limits = server.limits
        refusal = server.refusal_reason(self.client_host)
        if refusal is not None:
            server.refuse(self.peer, refusal)
            self.closed = True
            transport.abort()
            return
        server.connections.add(self)
        if server.metrics is not None:
            server.metrics.connections_created += 1
        sock = transport.get_extra_info("socket")
        if server.socket_writer is not None and sock is not None:
            self._queue = server.socket_writer.register(sock.fileno())
            server.queues[self._queue.id] = self
        # Pause (stop processing new requests) above the buffered-bytes limit; resume once fully drained.
        transport.set_write_buffer_limits(high=limits.max_buffered_bytes, low=0)
        if sock is not None:
            config = server.config
            for key, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                                ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
                # Only when set explicitly: fixed buffers disable the kernel's autotuning, which is faster.
                if config.is_set(key) and config[key] > 0:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, option, config[key])
                    except OSError:
                        pass
        self._task = server.loop.create_task(self._run())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self.last_active = time.monotonic()
        self.reader.buffer_updated(nbytes)
        self._cut_frames()

    def _cut_frames(self) -> None:
        """Take the complete frames the reader holds, pause or resume reading, and start answering."""
        reader = self.reader
        small_frame_bytes = reader.small_frame_bytes
        try:
            for frame in reader:
                size = len(frame)
                self.frames.append(frame)
                self.buffered_in += size
                if size <= small_frame_bytes:  # large ones were counted when admitted
                    self.held_bytes += size
                    self.server.request_memory.add_small(size)
        except FrameTooLarge as exc:  # or a negative size prefix
            first = exc.size >> 24 & 0xFF
            hint = " (looks like TLS: this listener is PLAINTEXT)" if first == _TLS_HANDSHAKE else ""
            self.close(f"bad frame: {exc}{hint}")
            return
        self._update_reading()
        wakeup = self._wakeup
        if self.frames and wakeup is not None and not wakeup.done():
            # The connection's task is idle (every earlier request answered): answer synchronous requests
            # right here, saving a task switch per request; the task takes over at the first one that waits.
            self._process_inline()
            if (self.frames or self._continuation is not None) and not wakeup.done():
                wakeup.set_result(None)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self._release_all()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        for answer in self._answers:
            answer.cancel()
        for future in (self._wakeup, self._drained):
            if future is not None and not future.done():
                future.cancel()
        self._close_sendfile_fd()
        self._close_queue(flush=exc is None)
        self.frames.clear()
        if self._continuation is not None:
            self._continuation.close()  # never started: nothing to finish
            self._continuation = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # ---- processing ---------------------------------------------------------------------------------

    def close(self, reason: str | None = None, *, graceful: bool = False) -> None:
        """Close this connection. ``graceful``: first send the answers to earlier requests (a protocol error
        in a later pipelined request does not lose them); otherwise drop everything buffered."""
        if reason:
            log.warning("closing connection %d from %s: %s", self.id, self.peer, reason)
        if not self.closed:
            if graceful and self._out:
                self._flush_out()
            self.closed = True
            if self.transport is not None:
                if graceful:
                    self.transport.close()
                else:
                    self.transport.abort()
            self._close_queue(flush=graceful)
        self.server.connections.discard(self)
        self._release_all()

    def _close_queue(self, flush: bool) -> None:
        """Flush (then close) or drop the native send queue; the peer sees the end of the stream once both
        the transport's descriptor and the queue's duplicate are closed."""
        queue = self._queue
        if queue is None or self._queue_closing:
            return
        self._queue_closing = True
        server = self.server
        server.queues.pop(queue.id, None)
        if flush:
            queue.close_after_flush()
            server.kick_writer()
        else:
            queue.abort()
            if server.socket_writer is not None:
                server.socket_writer.reap(queue)

    def queue_drained(self) -> None:
        """The native send queue emptied (or failed) after ``notify_when_empty``."""
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _take_frame(self) -> Any:
        """The next request to process (the previous one is answered: requests are processed one at a time)."""
        self._release_processed()
        frame = self.frames.popleft()
        size = len(frame)
        self.buffered_in -= size
        self._processing_bytes = size
        self._update_reading()
        return frame

    # ---- request memory -----------------------------------------------------------------------------

    def _update_reading(self) -> None:
        """Pause reading while the read-ahead backlog is full or a large request waits to be admitted; resume
        once the backlog is down to half and nothing waits."""
        if self.transport is None or self.closed:
            return
        limits = self.server.limits
        if self.reading_paused:
            if self._memory_wait is None and len(self.frames) < limits.max_inflight // 2 + 1 \
                    and self.buffered_in < limits.max_buffered_bytes // 2:
                self.reading_paused = False
                self.transport.resume_reading()
        elif (self._memory_wait is not None or len(self.frames) >= limits.max_inflight
              or self.buffered_in >= limits.max_buffered_bytes):
            self.reading_paused = True
            self.transport.pause_reading()

    def _admit(self, size: int) -> bool:
        """The reader's question before it allocates a large request's buffer: does it fit this connection's
        bound (klog.connection.max.buffered.bytes, unless the connection holds nothing) and the broker's
        (queued.max.request.bytes)? If not, this connection waits (and stops being read)."""
        if self.closed:
            return False
        if self.held_bytes and self.held_bytes + size > self.server.limits.max_buffered_bytes:
            self._memory_wait = "connection"  # retried when this connection releases a request
            return False
        memory = self.server.request_memory
        if not memory.try_admit_large(size):
            if self._memory_wait != "broker":
                self._memory_wait = "broker"
                memory.waiting.append(self)
                self.server.memory_exhausted()
            return False
        self._memory_wait = None
        self.held_bytes += size
        self._held_large += size
        return True

    def _retry_admission(self) -> bool:
        """Try again to admit the waiting large request (room was released); True if it was admitted."""
        if self.closed or self._memory_wait is None:
            return True
        self._memory_wait = None
        self._cut_frames()  # asks ``_admit`` again; waits again if it still does not fit
        return self._memory_wait is None

    def _release(self, size: int) -> None:
        large = min(size, self._held_large) if size > self.reader.small_frame_bytes else 0
        self.held_bytes -= size
        self._held_large -= large
        assert self.held_bytes >= 0 and self._held_large >= 0, (self.held_bytes, self._held_large)
        self.server.release_request_memory(size, large)
        if self._memory_wait == "connection":
            self.server.loop.call_soon(self._retry_admission)

    def _release_processed(self) -> None:
        """The request being processed is answered: its bytes are free."""
        size = self._processing_bytes
        if size:
            self._processing_bytes = 0
            self._release(size)

    def _release_all(self) -> None:
        """The connection is closed: every request byte it held (queued, partly received) is free."""
        if self.held_bytes:
            self.server.release_request_memory(self.held_bytes, self._held_large)
            self.held_bytes = self._held_large = self._processing_bytes = 0
        self._memory_wait = None

    def _process_inline(self) -> None:
        """Answer queued requests whose handlers are synchronous, in the read callback. Stops at the first
        request with an asynchronous handler (left to the task) or the first that has to wait (its
        continuation is left in ``_continuation`` for the task)."""
        handlers = self.server.handlers
        try:
            frames = self.frames
            while frames and self._continuation is None and not self.closed:
                frame = frames[0]
                entry = handlers.get(int.from_bytes(frame[0:2], "big")) if len(frame) >= 2 else None
                if entry is None or entry.is_async:
                    return  # the task answers it (or closes the connection over it)
                self._continuation = self._process_sync(self._take_frame())
            if not frames and self._continuation is None:
                self._release_processed()
                if self._out:
                    self._flush_out()
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
        if isinstance(exc, _WriteTimeout):
            self.close(f"client read nothing for {self.server.limits.write_timeout_s:.0f}s "
                       "(klog.connection.write.timeout.ms)")
            return
        log.exception("closing connection %d from %s after an internal error", self.id, self.peer)
        self.close()

    async def _run(self) -> None:
        loop = self.server.loop
        try:
            while not self.closed:
                continuation = self._continuation
                if continuation is not None:
                    # a request started in the read callback that has to wait: finish it first (order)
                    self._continuation = None
                    await continuation
                elif not self.frames:
                    self._release_processed()
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                else:
                    continuation = self._process_sync(self._take_frame())
                    if continuation is not None:
                        await continuation
                if not self.frames and self._out:
                    self._flush_out()
                self.last_active = time.monotonic()
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            self._close_after_failure(exc)

    def _process_sync(self, frame: Any) -> Coroutine[Any, Any, None] | None:
        """Decode, dispatch and answer one request as far as that is possible without waiting; return what
        is left to await (an asynchronous handler, a drain, a sendfile), or None when the answer is queued."""
        if self._answers and int.from_bytes(frame[0:2], "big") != PRODUCE_KEY:
            # only produce requests are taken while earlier answers wait (appends keep request order); anything
            # else is processed once they are sent, as if each request had been answered before the next
            return self._when_answered(self._process_later(frame))
        server = self.server
        try:
            header, offset = decode_request_header(frame)
        except ProtocolError as exc:
            self.close(f"malformed request header: {exc}", graceful=True)
            return None
        api_key = header.api_key
        version = header.api_version
        entry = server.handlers.get(api_key)
        advertised = server.state.api_versions.get(api_key)
        if entry is None or advertised is None:
            self.close(f"unsupported api key {api_key} (v{version}, client {header.client_id!r})", graceful=True)
            return None
        if not advertised[0] <= version <= advertised[1]:
            if api_key == API_VERSIONS_KEY:
                # KIP-511: answer a too-new ApiVersions in v0 format with UNSUPPORTED_VERSION and the full list.
                self._send(encode_response(API_VERSIONS_KEY, 0, header.correlation_id,
                                           unsupported_version_response(server.state)))
                return self._drain() if self._write_paused or self._out_bytes >= COALESCE_BYTES else None
            self.close(f"unsupported version {version} of api key {api_key} (advertised "
                       f"{advertised[0]}-{advertised[1]}, client {header.client_id!r})", graceful=True)
            return None
        try:
            request = decode_request(header, frame, offset)
        except ProtocolError as exc:
            self.close(f"malformed request: {exc} (client {header.client_id!r})", graceful=True)
            return None
        ctx = RequestContext(header, self.client_host, self.client_port, self.id,
                             zero_copy=server.sendfile_enabled, listener=self.listener_name)
        if server.trace_requests:
            software = ""
            if api_key == API_VERSIONS_KEY and version >= 3:
                software = f" software={request.client_software_name}/{request.client_software_version}"
            log.debug("request api_key=%d version=%d client_id=%r connection=%d%s", api_key, version,
                      header.client_id, self.id, software)
        server.requests_handled += 1
        metrics = server.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        if entry.is_async:
            # the handler may wait (long poll, rebalance): answers queued before it must not wait with it
            if self._out:
                self._flush_out()
            return self._finish(entry.func(server.state, ctx, request), header, started, request)
        try:
            response = entry.func(server.state, ctx, request)
        except CloseConnection as exc:
            if self._answers:   # the answers to earlier requests are sent first
                return self._when_answered(self._close_later(f"{exc} (client {header.client_id!r})"))
            self.close(f"{exc} (client {header.client_id!r})", graceful=True)
            return None
        if type(response) is AnswerWhenReplicated:
            return self._answer_in_turn(response.answer, header, started)
        if type(response) is _CoroutineType:
            # a synchronous handler's slow path (e.g. Metadata auto-creating topics, a produce validating a
            # large batch off the loop before appending it)
            if self._out:
                self._flush_out()
            if self._answers:
                return self._when_answered(self._finish(response, header, started, request))
            return self._finish(response, header, started, request)
        if self._answers:   # a produce answered at once (acks=1) goes after the answers still waiting
            return self._answer_in_turn(_answered(response), header, started)
        continuation = self._respond(response, header)
        if metrics is not None:
            metrics.request_done(api_key, time.perf_counter() - started)
        return continuation

    # ---- produce pipelining -------------------------------------------------------------------------
    # Kafka answers a connection's requests one at a time, so an acks=all producer gets one request's worth of
    # records replicated per ISR round trip per connection, whatever its max.in.flight. klog appends the next
    # produce requests of the connection while earlier ones wait for the ISR: appends and answers keep request
    # order, and any other request is processed only once every earlier answer is sent.

    def _answer_in_turn(self, answer: Coroutine[Any, Any, Any], header: Any,
                        started: float) -> Coroutine[Any, Any, None] | None:
        """Send ``answer``'s response after those of earlier produce requests. Returns what the connection
        awaits before taking its next request: nothing while fewer than ``klog.produce.pipeline.depth``
        answers wait, else the oldest answer. The request itself is not kept: its bytes count as released once
        the next request is taken (request memory), so nothing may hold views of them meanwhile."""
        previous = self._answers[-1] if self._answers else None
        task = self.server.loop.create_task(self._send_in_turn(previous, answer, header, started))
        self._answers.append(task)
        if len(self._answers) >= self.server.limits.produce_pipeline_depth:
            return self._answer_sent(self._answers[0])
        return None

    async def _send_in_turn(self, previous: asyncio.Task[None] | None, answer: Coroutine[Any, Any, Any],
                            header: Any, started: float) -> None:
        this = asyncio.current_task()
        try:
            if previous is not None:
                await previous
            await self._finish(answer, header, started, None)
            if self._out and not self.closed:
                self._flush_out()
        except asyncio.CancelledError:
            pass   # the connection closed
        except Exception as exc:
            self._close_after_failure(exc)
        finally:
            answer.close()   # no-op once it ran; a coroutine never started must not be left unawaited
            if self._answers and self._answers[0] is this:
                self._answers.popleft()
            else:   # cancelled out of turn: the connection closed
                self._answers = deque(task for task in self._answers if task is not this)

    @staticmethod
    async def _answer_sent(answer: asyncio.Task[None]) -> None:
        await answer

    async def _when_answered(self, then: Coroutine[Any, Any, None]) -> None:
        """Await ``then`` once every waiting produce answer is sent."""
        try:
            while self._answers:
                await self._answers[-1]
        except BaseException:
            then.close()
            raise
        await then

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
        metrics = self.server.metrics
        if metrics is not None:
            api_key = header.api_key
            if api_key == FETCH_KEY and max(getattr(request, "replica_id", -1),
                                            getattr(getattr(request, "replica_state", None), "replica_id", -1)) >= 0:
                api_key = FETCH_FOLLOWER_KEY
            metrics.request_done(api_key, time.perf_counter() - started)
        if continuation is not None:
            await continuation

    def _respond(self, response: Any, header: Any) -> Coroutine[Any, Any, None] | None:
        if response is None or self.closed:
            return None
        self._send(encode_response(header.api_key, header.api_version, header.correlation_id, response))
        if self._has_regions:
            return self._send_regions_and_drain()
        if self._write_paused or self._out_bytes >= COALESCE_BYTES:
            return self._drain()
        return None

    async def _send_regions_and_drain(self) -> None:
        await self._send_with_regions()
        if self._write_paused or self._out_bytes >= COALESCE_BYTES:
            await self._drain()

    # ---- writing ------------------------------------------------------------------------------------

    _has_regions = False
    _pending: list[Any] | None = None

    def _send(self, chunks: list[Any]) -> None:
        """Queue a response. Byte responses are coalesced while more pipelined requests wait, and written
        in one system call (``_flush_out``); file regions go out through ``_send_with_regions``."""
        # Hot path (one call per response): a plain loop, no generator objects.
        size = 0
        region_bytes = 0
        has_regions = False
        for chunk in chunks:
            if type(chunk) in _BYTE_TYPES or isinstance(chunk, (bytes, bytearray, memoryview)):
                size += len(chunk)
            else:
                has_regions = True
                region_bytes += chunk.length
        if has_regions:
            server = self.server
            if region_bytes >= server.sendfile_min_bytes:
                if self._queue is not None and server.sendfile_enabled:
                    # the writer thread sends header and file regions in order (sendfile, zero copy)
                    if self._out:
                        self._flush_out()
                    server.sendfile_responses += 1
                    server.sendfile_bytes += region_bytes
                    if not self.closed:
                        self._queue_send(chunks)
                    return
                self._has_regions = True
                self._pending = chunks
                return
            # Small regions: one copy (native, GIL released) and a single write with the header beats a
            # write() plus a sendfile() for a few KiB.
            chunks = [c if type(c) in _BYTE_TYPES or isinstance(c, (bytes, bytearray, memoryview))
                      else _region_bytes(c) for c in chunks]
            size += region_bytes
            server.fetch_copied_bytes += region_bytes
            server.fetch_copied_responses += 1
        self._out += chunks
        self._out_bytes += size
        if self._out_bytes >= COALESCE_BYTES:
            self._flush_out()

    def _flush_out(self) -> None:
        out = self._out
        self._out = []
        self._out_bytes = 0
        if self.transport is not None and not self.closed:
            if self._queue is not None:
                self._queue_send(out)
            elif len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)

    def _queue_send(self, chunks: list[Any]) -> None:
        """Hand bytes to the native writer thread (sent after this loop iteration's kick)."""
        try:
            queued = self._queue.send(chunks)
        except OSError as exc:  # an earlier send failed (peer gone): stop here
            self.close(f"socket error: {exc}")
            return
        self.server.kick_writer()
        if queued >= self.server.limits.max_buffered_bytes:
            self._write_paused = True  # _drain waits until the queue is empty (as the transport's low mark 0)

    def _write(self, data: Any) -> None:
        if self._queue is not None:
            if not self.closed:
                self._queue_send([data])
        else:
            assert self.transport is not None
            self.transport.write(data)

    async def _send_with_regions(self) -> None:
        if self._out:
            self._flush_out()
        chunks = self._pending or []
        self._pending = None
        self._has_regions = False
        transport = self.transport
        assert transport is not None
        server = self.server
        use_sendfile = server.sendfile_enabled
        if use_sendfile:
            server.sendfile_responses += 1
        else:
            server.fetch_copied_responses += 1
        run: list[Any] = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                run.append(chunk)
                continue
            if run:
                self._write(b"".join(run))
                run = []
            if chunk.length == 0:
                continue
            if use_sendfile:
                await self._sendfile(chunk.fd, chunk.position, chunk.length)
            else:
                data = os.pread(chunk.fd, chunk.length, chunk.position)
                if len(data) != chunk.length:
                    raise OSError(errno.EIO, f"segment file shorter than expected ({len(data)} of "
                                             f"{chunk.length} bytes)")
                server.fetch_copied_bytes += len(data)
                self._write(data)
                if self._write_paused:
                    await self._drain()
        if run:
            self._write(b"".join(run))

    async def _drain(self) -> None:
        """Wait until the transport's buffer is below the pause threshold (bounded by the write timeout)."""
        if self._out_bytes >= COALESCE_BYTES:
            self._flush_out()
        if not self._write_paused or self.closed:
            return
        if self._queue is not None:
            await self._wait_queue_empty()
            self._write_paused = False
            return
        await self._await_drain_notice()

    async def _await_drain_notice(self) -> None:
        """Wait for ``resume_writing`` or the native writer's drain notice to resolve ``_drained``, at most
        the write timeout."""
        self._drained = self.server.loop.create_future()
        try:
            await asyncio.wait_for(self._drained, self.server.limits.write_timeout_s)
        except asyncio.TimeoutError:
            raise _WriteTimeout() from None
        finally:
            self._drained = None

    async def _wait_queue_empty(self) -> None:
        """Wait until the native writer sent everything queued (bounded by the write timeout)."""
        queue = self._queue
        if queue.notify_when_empty():
            await self._await_drain_notice()
        if queue.error is not None:
            raise OSError(queue.error, os.strerror(queue.error))
        if self.closed:
            raise ConnectionResetError("connection closed")

    async def _wait_transport_empty(self) -> None:
        if self._queue is not None:
            if self._out:
                self._flush_out()
            await self._wait_queue_empty()
            return
        transport = self.transport
        assert transport is not None
        if transport.get_write_buffer_size() == 0:
            return
        limits = self.server.limits
        # Temporarily pause at any buffered byte so resume_writing fires exactly when the buffer empties.
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            if transport.get_write_buffer_size() > 0:
                self._write_paused = True
                await self._drain()
        finally:
            if not self.closed:
                transport.set_write_buffer_limits(high=limits.max_buffered_bytes, low=0)

    async def _sendfile(self, in_fd: int, position: int, count: int) -> None:
        """Zero-copy: segment file -> socket. Writes straight to the socket once the transport's own buffer is
        empty (so bytes stay in order), waiting for writability through a duplicate descriptor (the loop
        refuses watchers on a descriptor owned by a transport)."""
        await self._wait_transport_empty()
        if self.closed:
            raise ConnectionResetError("connection closed")
        if self._sendfile_fd < 0:
            sock = self.transport.get_extra_info("socket") if self.transport else None
            if sock is None:
                raise OSError(errno.ENOTSOCK, "no socket for sendfile")
            self._sendfile_fd = os.dup(sock.fileno())
        out_fd = self._sendfile_fd
        loop = self.server.loop
        sendfile = self.server.sendfile_impl
        end = position + count
        while position < end:
            try:
                sent = sendfile(out_fd, in_fd, position, end - position)
            except BlockingIOError:
                sent = -1
            if sent == 0:
                raise OSError(errno.EIO, "segment file ended before the fetched range")
            if sent > 0:
                position += sent
                self.server.sendfile_bytes += sent
                continue
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(out_fd, _resolve, writable)
            try:
                await asyncio.wait_for(writable, self.server.limits.write_timeout_s)
            except asyncio.TimeoutError:
                raise _WriteTimeout() from None
            finally:
                loop.remove_writer(out_fd)
                if self.closed:
                    raise ConnectionResetError("connection closed")

    def _close_sendfile_fd(self) -> None:
        if self._sendfile_fd >= 0:
            try:
                self.server.loop.remove_writer(self._sendfile_fd)
            except Exception:
                pass
            os.close(self._sendfile_fd)
            self._sendfile_fd = -1


class Limits:
    """Every network limit, named after its config key."""

    def __init__(self, config: BrokerConfig) -> None:
        self.max_frame_bytes: int = config["socket.request.max.bytes"]
        self.max_connections: int = config["max.connections"]
        self.max_connections_per_ip: int = config["max.connections.per.ip"]
        self.max_inflight: int = config["klog.connection.max.inflight.requests"]
        self.max_buffered_bytes: int = config["klog.connection.max.buffered.bytes"]
        self.produce_pipeline_depth: int = config["klog.produce.pipeline.depth"]
        queued = config["queued.max.request.bytes"]
        #: queued.max.request.bytes (None: unbounded, Kafka's -1)
        self.max_queued_request_bytes: int | None = None if queued < 0 else queued
        self.write_timeout_s: float = config["klog.connection.write.timeout.ms"] / 1000
        idle = config["connections.max.idle.ms"]
        self.idle_timeout_s: float | None = None if idle < 0 else idle / 1000


def _native_sendfile() -> Any:
    try:
        from klog._native import sendfile as native

        def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
            return int(native(out_fd, in_fd, offset, count))

        return sendfile
    except ImportError:
        return os.sendfile


class BrokerServer:
    """Owns the broker state, the listeners and all connections. ``await start()``, ``await stop()``."""

    def __init__(self, config: BrokerConfig, controller: Any = None) -> None:
        self.config = config
        #: the node's ControllerNode on a multi-node quorum (see BrokerState)
        self.controller = controller
        self.limits = Limits(config)
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.state: BrokerState = None  # type: ignore[assignment]
        self.connections: set[Connection] = set()
        self._connection_ids = itertools.count(1)
        self._servers: list[asyncio.base_events.Server] = []
        self._started = False
        self._tasks: list[asyncio.Task[None]] = []
        #: the maintenance pass's flush/checkpoint running on a worker thread, if any
        self._maintenance_io: asyncio.Future[float | None] | None = None
        self.handlers = load_all()
        self.sendfile_enabled: bool = config["klog.fetch.sendfile.enable"] and hasattr(os, "sendfile")
        self.sendfile_impl = _native_sendfile()
        #: responses whose file regions total at least this many bytes go out with sendfile (when enabled);
        #: smaller ones are copied and written together with their header in one system call
        self.sendfile_min_bytes: int = config["klog.fetch.sendfile.min.bytes"]
        #: counters of the two fetch send paths (see ``stats``)
        self.sendfile_bytes = 0
        self.sendfile_responses = 0
        self.fetch_copied_bytes = 0
        self.fetch_copied_responses = 0
        self.requests_handled = 0
        self.trace_requests = log.isEnabledFor(logging.DEBUG)
        self.refused_connections = 0
        self._refusal_log = RateLimitedLog(log, "refused connections")
        self.bound: list[tuple[str, int]] = []
        #: the native thread that sends responses (klog.network.writer.thread.enable), its queues by id
        self.socket_writer: Any = None
        self.queues: dict[int, Connection] = {}
        self._kick_scheduled = False
        #: bytes of requests held across all connections (queued.max.request.bytes)
        self.request_memory = RequestMemory(self.limits.max_queued_request_bytes)
        self._memory_wake_scheduled = False
        self._pools_released_at = 0.0
        #: Prometheus counters, kept only when klog.metrics.listener is set (None: no per-request cost)
        self.metrics: BrokerMetrics | None = BrokerMetrics() if config["klog.metrics.listener"] else None
        self.metrics_listener: MetricsListener | None = None

    def stats(self) -> dict[str, int]:
        """Counters of this broker's network front (for tests, benchmarks and operators)."""
        return {"connections": len(self.connections), "requests_handled": self.requests_handled,
                "request_bytes_held": self.request_memory.held, "request_bytes_peak": self.request_memory.peak,
                "refused_connections": self.refused_connections, "sendfile_bytes": self.sendfile_bytes,
                "sendfile_responses": self.sendfile_responses, "fetch_copied_bytes": self.fetch_copied_bytes,
                "fetch_copied_responses": self.fetch_copied_responses}

    def refusal_reason(self, client_host: str) -> str | None:
        """Why a new connection from ``client_host`` must be refused (None: it may be served)."""
        limits = self.limits
        count = len(self.connections)
        if count >= limits.max_connections:
            return f"max.connections={limits.max_connections} reached"
        partitions = self.state.partitions
        room = partitions.descriptors.max_connections(partitions.partitions_total)
        if room is not None and count >= room:
            return (f"descriptor budget reached: {count} connections and {partitions.partitions_total} partitions "
                    f"({partitions.descriptors.describe()})")
        if limits.max_connections_per_ip < limits.max_connections:
            same_ip = sum(1 for c in self.connections if c.client_host == client_host)
            if same_ip >= limits.max_connections_per_ip:
                return f"max.connections.per.ip={limits.max_connections_per_ip} reached"
        return None

    def refuse(self, peer: str, reason: str) -> None:
        """Count a refused connection; log it, at most one line a second (a flood of connects must not become a
        flood of log lines)."""
        self.refused_connections += 1
        self._refusal_log.warning(f"refusing connection from {peer}: {reason}")

    def release_request_memory(self, nbytes: int, large: int) -> None:
        memory = self.request_memory
        memory.release(nbytes, large)
        if memory.waiting and not self._memory_wake_scheduled and memory.has_room():
            self._memory_wake_scheduled = True
            self.loop.call_soon(self._wake_memory_waiters)

    def _wake_memory_waiters(self) -> None:
        """Let connections waiting for request memory try again, first come first served; stop at the first
        whose request still does not fit (it keeps its place)."""
        self._memory_wake_scheduled = False
        waiting = self.request_memory.waiting
        while waiting and self.request_memory.has_room():
            conn = waiting.popleft()
            if conn.closed or conn._memory_wait != "broker":
                continue
            if not conn._retry_admission():
                if conn._memory_wait == "broker":  # waiting again: it went to the back of the line; back in front
                    waiting.pop()
                    waiting.appendleft(conn)
                break

    def memory_exhausted(self) -> None:
        """A large request did not fit queued.max.request.bytes: drop the idle connections' pooled receive
        buffers now (at most once a second) rather than after POOL_RELEASE_IDLE_S, so they do not add to the
        broker's memory while requests wait."""
        now = time.monotonic()
        if now - self._pools_released_at < 1.0:
            return
        self._pools_released_at = now
        for conn in self.connections:
            if not conn.frames and not conn.held_bytes:
                conn.reader.pool.release()

    def kick_writer(self) -> None:
        """Wake the writer thread once per loop iteration for everything queued in it."""
        if not self._kick_scheduled:
            self._kick_scheduled = True
            self.loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self.socket_writer is not None:
            self.socket_writer.kick()

    def _on_queues_drained(self) -> None:
        for queue_id in self.socket_writer.take_drained():
            conn = self.queues.get(queue_id)
            if conn is not None:
                error = conn._queue.error
                if error is not None and not conn.closed:
                    # a send failed (peer gone, or a segment file shorter than its range): a response is cut
                    quiet = error in (errno.EPIPE, errno.ECONNRESET)  # the client went away: not worth a line
                    conn.close(None if quiet else f"socket error: {os.strerror(error)}")
                conn.queue_drained()

    def _start_socket_writer(self) -> None:
        if not self.config["klog.network.writer.thread.enable"]:
            return
        try:
            from klog._native import SocketWriter
        except ImportError:  # not Linux: the event loop sends
            log.info("klog.network.writer.thread.enable: no native writer on this platform; the event loop sends")
            return
        self.socket_writer = SocketWriter()
        self.loop.add_reader(self.socket_writer.notify_fd, self._on_queues_drained)

    def _raise_fd_limit(self) -> None:
        """Each connection needs two descriptors and each partition and open segment one: raise the soft limit
        toward the hard one so max.connections is reachable (a 1024 soft limit is common)."""
        try:
            import resource
        except ImportError:  # not on this platform
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = DESCRIPTORS_PER_CONNECTION * self.limits.max_connections + FD_RESERVE
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            except (ValueError, OSError) as exc:
                log.warning("could not raise the open-files limit from %d to %d: %s", soft, wanted, exc)
                return
        # what fits in the limit is logged with the descriptor budget (klog.broker.descriptors); connections
        # beyond it are refused, not failed with EMFILE

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        started = time.monotonic()
        self._raise_fd_limit()
        # Bind first, serve last: a port in use fails the start before any data directory is created.
        for listener in self.config.listeners:
            self._servers.append(await self.loop.create_server(
                lambda name=listener.name: Connection(self, name), host=listener.host or None,
                port=listener.port, backlog=self.config["socket.listen.backlog.size"], reuse_address=True,
                start_serving=False))
        try:
            self.state = BrokerState(self.config, self.loop, self.controller)
        except OSError as exc:
            where = exc.filename or ",".join(self.config.log_dirs)
            raise RuntimeError(f"log.dirs: cannot use the data directory {where}: "
                               f"{exc.strerror or exc}") from None
        from klog.broker.handlers.groups import create_coordinator

        self.state.coordinator = create_coordinator(self.state)
        self.state.api_versions = self._advertised_versions()
        if self.controller is not None:   # a quorum member's broker forwards controller requests to the leader
            from klog.broker.forwarding import ControllerForwarder, forwarding_handlers

            self.state.forwarder = ControllerForwarder(self.config.node_id, self.controller.driver)
            self.handlers = forwarding_handlers(self.handlers, self.state.forwarder)
        self.state.metrics = self.metrics
        self._start_socket_writer()
        await self.state.coordinator.start()
        for listener, server in zip(self.config.listeners, self._servers):
            sockname = server.sockets[0].getsockname()
            self.bound.append((sockname[0], sockname[1]))
            host, port = self.state.endpoints[listener.name]
            if port == 0:
                self.state.endpoints[listener.name] = (host, sockname[1])
        if self.controller is not None:
            # A quorum member registers with the active controller (its bound ports known) and, as a Kafka
            # broker, serves clients only once unfenced: before that its Metadata would list no broker.
            self.state.metadata.start_lifecycle()
            await self.state.metadata.wait_until_unfenced()
        for server in self._servers:
            await server.start_serving()
        self.state.replicas.start()
        self._tasks.append(self.loop.create_task(self._maintenance()))
        if self.metrics is not None:
            address = self.config["klog.metrics.listener"]
            host, port = parse_listener(address)
            try:
                self.metrics_listener = MetricsListener(self, host, port)
            except OSError as exc:
                raise OSError(exc.errno, f"klog.metrics.listener={address}: {exc.strerror}") from exc
            log.info("metrics on http://%s:%d/metrics (klog.metrics.listener)", *self.metrics_listener.address)
        slice_us = self.config["klog.event.loop.slice.us"]
        if slice_us:
            from klog.broker.sched import request_slice

            problem = request_slice(slice_us)
            if problem:
                log.warning("klog.event.loop.slice.us=%d not applied: %s", slice_us, problem)
            else:
                log.info("event-loop thread asks for a %d us scheduler slice", slice_us)
        self._started = True
        log.info("klog-broker started in %.0f ms: node %d, cluster %s, listening on %s, advertised as %s:%d, "
                 "data in %s", (time.monotonic() - started) * 1000, self.state.node_id, self.state.cluster_id,
                 ", ".join(f"{lst.name}://{h}:{p}" for lst, (h, p) in zip(self.config.listeners, self.bound)),
                 self.state.host, self.state.port, ",".join(self.config.log_dirs))
        if log.isEnabledFor(logging.DEBUG):
            from klog.broker.config import BROKER_KEYS

            log.debug("effective config: %s", ", ".join(
                f"{key}={BROKER_KEYS[key].format(value)}" for key, value in sorted(self.config.items())
                if not BROKER_KEYS[key].sensitive))
        ignored = self.config.ignored_keys()
        if ignored:
            log.info("config keys accepted for Kafka compatibility but without effect in klog: %s",
                     ", ".join(ignored))

    def decide_forwarded(self, header: Any, request: Any, peer: Any) -> Any:
        """A request another broker forwarded to this node's controller listener, decided by this broker's own
        handler (an awaitable answer; NOT_CONTROLLER on every item when this node does not lead the quorum)."""
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else ("", -1)
        ctx = RequestContext(header, host, port, -1, zero_copy=False,
                             listener=self.config.controller_listeners[0].name)
        return load_all()[header.api_key].func(self.state, ctx, request)

    def forwarded_versions(self) -> dict[int, tuple[int, int]]:
        from klog.broker.forwarding import FORWARDED_APIS

        return {k: v for k, v in self.state.api_versions.items() if k in FORWARDED_APIS}

    def _advertised_versions(self) -> dict[int, tuple[int, int]]:
        from klog.protocol import versions

        from klog.broker.groups.api import GROUP_API_KEYS

        table: dict[int, tuple[int, int]] = {}
        coordinator_apis = getattr(self.state.coordinator, "SUPPORTED_APIS", {})
        for api_key, entry in self.handlers.items():
            lo, hi = entry.min_version, entry.max_version
            if api_key in GROUP_API_KEYS:
                if api_key not in coordinator_apis:
                    continue
                lo, hi = max(lo, coordinator_apis[api_key][0]), min(hi, coordinator_apis[api_key][1])
            try:
                codec_lo, codec_hi = versions(api_key)
            except Exception:
                continue
            lo, hi = max(lo, codec_lo), min(hi, codec_hi)
            if lo <= hi:
                table[api_key] = (lo, hi)
        return dict(sorted(table.items()))

    async def _maintenance(self) -> None:
        """Retention, checkpoints, producer-id expiry and idle-connection sweeps."""
        config = self.config
        retention_every = config["log.retention.check.interval.ms"] / 1000
        checkpoint_every = config["log.flush.offset.checkpoint.interval.ms"] / 1000
        next_retention = time.monotonic() + min(retention_every, config["log.initial.task.delay.ms"] / 1000)
        next_checkpoint = time.monotonic() + checkpoint_every
        idle = self.limits.idle_timeout_s
        tick = 1.0
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            try:
                if now >= next_retention:
                    next_retention = now + retention_every
                    removed = self.state.partitions.apply_retention()
                    if removed:
                        log.info("retention removed %d segment(s)", removed)
                    self.state.producers.expire(int(time.time() * 1000))
                self.state.metadata.maybe_snapshot()   # metadata.log.max.snapshot.interval.ms
                checkpoint_due = now >= next_checkpoint
                if checkpoint_due:
                    next_checkpoint = now + checkpoint_every
                # fsyncs (due flushes, checkpoint files) run on a worker thread (the native calls release the
                # GIL): on a busy disk one takes tens of ms, and every connection would wait on the loop.
                self._maintenance_io = asyncio.ensure_future(
                    asyncio.to_thread(self._flush_and_checkpoint, checkpoint_due))
                flush_s = await asyncio.shield(self._maintenance_io)
                self._maintenance_io = None
                if flush_s is not None and self.metrics is not None:
                    self.metrics.flush_time_ms.observe(flush_s * 1000)
                if checkpoint_due:
                    self.state.save_producer_state()
            except Exception:
                log.exception("maintenance pass failed")
            self._refusal_log.flush()
            for conn in self.connections:
                if now - conn.last_active > POOL_RELEASE_IDLE_S and not conn.frames:
                    conn.reader.pool.release()
            if idle is not None:
                for conn in [c for c in self.connections if now - c.last_active > idle
                             and not c.frames and not c._answers and c._wakeup is not None]:
                    conn.close(f"idle for more than {idle:.0f}s (connections.max.idle.ms)")

    def _flush_and_checkpoint(self, checkpoint: bool) -> float | None:
        """Returns how long the flush took when it fsynced at least one log (the flush-time metric)."""
        partitions = self.state.partitions
        started = time.perf_counter()
        flushed = partitions.flush_due()
        flush_s = time.perf_counter() - started if flushed else None
        if checkpoint:
            partitions.checkpoint()
        return flush_s

    async def stop(self) -> None:
        if self._started and self.controller is not None:   # still serving while the controller moves leaders
            await self.state.metadata.controlled_shutdown()
        if self.metrics_listener is not None:
            # its thread waits on this loop for snapshots: stop it while the loop still runs
            await asyncio.to_thread(self.metrics_listener.close)
            self.metrics_listener = None
        for server in self._servers:
            server.close()
        for task in self._tasks:
            task.cancel()
        if self._maintenance_io is not None:
            # a checkpoint being written on a worker thread must finish before close() writes the final one
            try:
                await self._maintenance_io
            except Exception:
                log.exception("maintenance pass failed")
            self._maintenance_io = None
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass
        if self.socket_writer is not None:
            self.loop.remove_reader(self.socket_writer.notify_fd)
            self.socket_writer = None  # joins the writer thread
        if self.state is not None:
            self.state.metadata.stop_publishing()   # no partition is opened or moved while they close
            try:
                await self.state.replicas.stop()
            except Exception:
                log.exception("replica manager failed to stop cleanly")
            if self.state.coordinator is not None:
                try:
                    await self.state.coordinator.stop()
                except Exception:
                    log.exception("group coordinator failed to stop cleanly")
            self.state.close()
        if self._started:  # nothing to report after a start that failed
            log.info("klog-broker stopped")

"""Putting responses on the socket: coalescing, the native writer thread, zero-copy fetch sends, back-pressure.

Responses of pipelined requests are gathered up to ``COALESCE_BYTES`` and written in one system call. With
``klog.network.writer.thread.enable`` a native thread sends them (one queue per connection); otherwise the
transport writes. Processing pauses while more than ``klog.connection.max.buffered.bytes`` wait to be sent, until
they are all sent, for at most ``klog.connection.write.timeout.ms``.

Fetch responses carry file regions of segment files: on plaintext connections they go from the page cache to
the socket with ``sendfile`` (zero copy); otherwise (TLS, or ``klog.fetch.sendfile.enable=false``) they are read
and written in slices of ``COPY_SLICE_BYTES``, each handed to the transport before the next is read, waiting while
the transport holds one back: on TLS the encryption then works on one slice at a time in a small buffer (a whole
fetch response written at once made Python's ssl layer grow its memory BIO to the response's size, with a
reallocation, a zeroing and a copy of every byte, and a fresh bytes object as large, zeroed first). Responses whose file regions total less than ``klog.fetch.sendfile.min.bytes``
are copied (natively, without the GIL) and written with their header in one system call: for a few KiB a
write() plus a sendfile() costs more than the copy.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from klog.broker.config import BrokerConfig
from klog.broker.network.limits import Limits

#: the logger the network front has always used (operators filter on it)
log = logging.getLogger("klog.broker.server")

#: pipelined responses are gathered up to this many bytes before one write
COALESCE_BYTES = 256 * 1024
#: a file region sent through the transport (TLS, or sendfile off) is read and written this much at a time: big
#: enough that the per-slice Python work is small beside its encryption, small enough that the TLS layer's buffers
#: stay in the CPU's cache (Python's ssl alone, TLS 1.3 AES-GCM, CPU per GB: 10 MiB writes 1.09 s, 1 MiB 0.68 s,
#: 256 KiB 0.63 s, 64 KiB 0.56 s, 16 KiB 0.63 s; the broker's whole CPU per GB consumed over SSL on 2026-12-03:
#: 64 KiB 1.08-1.16 s, 128 KiB 0.92-1.24 s, 512 KiB 1.08-1.72 s, 2 MiB 1.32-1.96 s, before slicing 1.40-1.92 s)
COPY_SLICE_BYTES = 128 * 1024
#: chunk types written as they are (anything else in a response is a file region)
_BYTE_TYPES = frozenset((bytes, bytearray, memoryview))

Sendfile = Callable[[int, int, int, int], int]


class WriteTimeout(Exception):
    """The client read nothing for ``klog.connection.write.timeout.ms``."""


def region_bytes(region: Any) -> bytes:
    """The bytes of a file region (a native FileSlice copies them without the GIL)."""
    to_bytes = getattr(region, "to_bytes", None)
    data = to_bytes() if to_bytes is not None else os.pread(region.fd, region.length, region.position)
    if len(data) != region.length:
        raise OSError(errno.EIO, f"segment file shorter than expected ({len(data)} of {region.length} bytes)")
    return data


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def native_sendfile() -> Sendfile:
    try:
        from klog._native import sendfile as native

        def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
            return int(native(out_fd, in_fd, offset, count))

        return sendfile
    except ImportError:
        return os.sendfile


class SendPaths:
    """The broker's ways of sending responses, shared by its connections: the native writer thread and its
    queues (``klog.network.writer.thread.enable``), sendfile (``klog.fetch.sendfile.enable``,
    ``klog.fetch.sendfile.min.bytes``), and the counters of the two fetch send paths."""

    def __init__(self, config: BrokerConfig) -> None:
        self.sendfile_enabled: bool = config["klog.fetch.sendfile.enable"] and hasattr(os, "sendfile")
        self.sendfile_impl: Sendfile = native_sendfile()
        #: responses whose file regions total at least this many bytes go out with sendfile (when enabled);
        #: smaller ones are copied and written together with their header in one system call
        self.sendfile_min_bytes: int = config["klog.fetch.sendfile.min.bytes"]
        self.writer_thread_enabled: bool = config["klog.network.writer.thread.enable"]
        self.sendfile_bytes = 0
        self.sendfile_responses = 0
        self.fetch_copied_bytes = 0
        self.fetch_copied_responses = 0
        #: the native thread that sends responses, and its queues by id (None: the transports write)
        self.socket_writer: Any = None
        self.queues: dict[int, ResponseWriter] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick_scheduled = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if not self.writer_thread_enabled:
            return
        try:
            from klog._native import SocketWriter
        except ImportError:  # not Linux: the event loop sends
            log.info("klog.network.writer.thread.enable: no native writer on this platform; the event loop sends")
            return
        self.socket_writer = SocketWriter()
        loop.add_reader(self.socket_writer.notify_fd, self._on_queues_drained)

    def stop(self) -> None:
        if self.socket_writer is not None and self._loop is not None:
            self._loop.remove_reader(self.socket_writer.notify_fd)
            self.socket_writer = None  # joins the writer thread

    def register(self, writer: ResponseWriter, fd: int) -> Any:
        """A send queue on the writer thread for the socket ``fd`` (None: no writer thread)."""
        if self.socket_writer is None:
            return None
        queue = self.socket_writer.register(fd)
        self.queues[queue.id] = writer
        return queue

    def unregister(self, queue: Any, *, flush: bool) -> None:
        """Flush (then close) or drop a send queue."""
        self.queues.pop(queue.id, None)
        if flush:
            queue.close_after_flush()
            self.kick()
        else:
            queue.abort()
            if self.socket_writer is not None:
                self.socket_writer.reap(queue)

    def kick(self) -> None:
        """Wake the writer thread once per loop iteration for everything queued in it."""
        if not self._kick_scheduled and self._loop is not None:
            self._kick_scheduled = True
            self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self.socket_writer is not None:
            self.socket_writer.kick()

    def _on_queues_drained(self) -> None:
        for queue_id in self.socket_writer.take_drained():
            writer = self.queues.get(queue_id)
            if writer is not None:
                writer.queue_drained()


class ResponseWriter:
    """How one connection's responses leave: coalesced writes, file regions by sendfile or copy, and waiting
    for the client to read (the write timeout)."""

    __slots__ = ("transport", "sends", "loop", "close_connection", "max_buffered_bytes", "write_timeout_s", "queue",
                 "closed", "write_paused", "out", "out_bytes", "_drained", "_sendfile_fd", "_queue_closing",
                 "zero_copy")

    def __init__(self, transport: asyncio.Transport, sock: socket.socket | None, sends: SendPaths, limits: Limits,
                 loop: asyncio.AbstractEventLoop, close_connection: Callable[[str | None], None], *,
                 zero_copy: bool = True) -> None:
        self.transport = transport
        #: file regions may go out with sendfile (False on TLS: ``sock`` is then None and the transport encrypts)
        self.zero_copy = zero_copy and sends.sendfile_enabled
        self.sends = sends
        self.loop = loop
        #: closes the connection over a failed send (a reason to log, or None)
        self.close_connection = close_connection
        self.max_buffered_bytes = limits.max_buffered_bytes
        self.write_timeout_s = limits.write_timeout_s
        #: this connection's send queue on the native writer thread (None: the transport writes)
        self.queue: Any = sends.register(self, sock.fileno()) if sock is not None else None
        self.closed = False
        self.write_paused = False
        #: coalesced responses not yet written
        self.out: list[Any] = []
        self.out_bytes = 0
        self._drained: asyncio.Future[None] | None = None
        self._sendfile_fd = -1
        self._queue_closing = False
        # Pause (stop processing new requests) above the buffered-bytes limit; resume once fully drained.
        transport.set_write_buffer_limits(high=limits.max_buffered_bytes, low=0)

    def send(self, chunks: list[Any]) -> Coroutine[Any, Any, None] | None:
        """Queue a response; return what to await before the next one (file regions to send, a drain), or None.
        Byte responses are coalesced while more pipelined requests wait, and written in one system call."""
        # Hot path (one call per response): a plain loop, no generator objects.
        size = 0
        region_total = 0
        has_regions = False
        for chunk in chunks:
            if type(chunk) in _BYTE_TYPES or isinstance(chunk, (bytes, bytearray, memoryview)):
                size += len(chunk)
            else:
                has_regions = True
                region_total += chunk.length
        if has_regions:
            sends = self.sends
            if region_total >= sends.sendfile_min_bytes:
                if self.queue is not None and self.zero_copy:
                    # the writer thread sends header and file regions in order (sendfile, zero copy)
                    if self.out:
                        self.flush_out()
                    sends.sendfile_responses += 1
                    sends.sendfile_bytes += region_total
                    if not self.closed:
                        self._queue_send(chunks)
                    return self.drain() if self.write_paused or self.out_bytes >= COALESCE_BYTES else None
                return self._send_regions_and_drain(chunks)
            # Small regions: one copy (native, GIL released) and a single write with the header beats a
            # write() plus a sendfile() for a few KiB.
            chunks = [c if type(c) in _BYTE_TYPES or isinstance(c, (bytes, bytearray, memoryview))
                      else region_bytes(c) for c in chunks]
            size += region_total
            sends.fetch_copied_bytes += region_total
            sends.fetch_copied_responses += 1
        self.out += chunks
        self.out_bytes += size
        if self.out_bytes >= COALESCE_BYTES:
            self.flush_out()
        if self.write_paused or self.out_bytes >= COALESCE_BYTES:
            return self.drain()
        return None

    def flush_out(self) -> None:
        """Write the coalesced responses (one system call)."""
        out = self.out
        self.out = []
        self.out_bytes = 0
        if not self.closed:
            if self.queue is not None:
                self._queue_send(out)
            elif len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)

    def flush_pending(self) -> None:
        if self.out and not self.closed:
            self.flush_out()

    def _queue_send(self, chunks: list[Any]) -> None:
        """Hand bytes to the native writer thread (sent after this loop iteration's kick)."""
        try:
            queued = self.queue.send(chunks)
        except OSError as exc:  # an earlier send failed (peer gone): stop here
            self.close_connection(f"socket error: {exc}")
            return
        self.sends.kick()
        if queued >= self.max_buffered_bytes:
            self.write_paused = True  # drain waits until the queue is empty (as the transport's low mark 0)

    def _write(self, data: Any) -> None:
        if self.queue is not None:
            if not self.closed:
                self._queue_send([data])
        else:
            self.transport.write(data)

    async def _send_regions_and_drain(self, chunks: list[Any]) -> None:
        await self._send_with_regions(chunks)
        if self.write_paused or self.out_bytes >= COALESCE_BYTES:
            await self.drain()

    async def _send_with_regions(self, chunks: list[Any]) -> None:
        if self.out:
            self.flush_out()
        sends = self.sends
        use_sendfile = self.zero_copy
        if use_sendfile:
            sends.sendfile_responses += 1
        else:
            sends.fetch_copied_responses += 1
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
                await self._copy_region(chunk.fd, chunk.position, chunk.length)
        if run:
            self._write(b"".join(run))

    async def _copy_region(self, fd: int, position: int, length: int) -> None:
        """A file region through the transport (TLS, or sendfile off): read and written ``COPY_SLICE_BYTES`` at a
        time, the next slice read only once the transport handed the last one on (its buffer empty), so a TLS
        transport encrypts into a buffer of one slice, not of the whole response."""
        sends = self.sends
        transport = self.transport
        end = position + length
        while position < end:
            size = min(COPY_SLICE_BYTES, end - position)
            data = os.pread(fd, size, position)
            if len(data) != size:
                raise OSError(errno.EIO, f"segment file shorter than expected ({len(data)} of {size} bytes at "
                                         f"{position})")
            position += size
            sends.fetch_copied_bytes += size
            if self.closed:
                raise ConnectionResetError("connection closed")
            if self.queue is not None:   # sendfile off on plaintext, with the native writer thread
                self._queue_send([data])
                if self.write_paused:
                    await self.drain()
                continue
            transport.write(data)
            if position < end and transport.get_write_buffer_size() > 0:
                await self._wait_transport_empty()

    async def drain(self) -> None:
        """Wait until the transport's buffer is below the pause threshold (bounded by the write timeout)."""
        if self.out_bytes >= COALESCE_BYTES:
            self.flush_out()
        if not self.write_paused or self.closed:
            return
        if self.queue is not None:
            await self._wait_queue_empty()
            self.write_paused = False
            return
        await self._await_drain_notice()

    async def _await_drain_notice(self) -> None:
        """Wait for ``resume_writing`` or the native writer's drain notice to resolve ``_drained``, at most
        the write timeout."""
        self._drained = self.loop.create_future()
        try:
            await asyncio.wait_for(self._drained, self.write_timeout_s)
        except asyncio.TimeoutError:
            raise WriteTimeout() from None
        finally:
            self._drained = None

    async def _wait_queue_empty(self) -> None:
        """Wait until the native writer sent everything queued (bounded by the write timeout)."""
        queue = self.queue
        if queue.notify_when_empty():
            await self._await_drain_notice()
        if queue.error is not None:
            raise OSError(queue.error, os.strerror(queue.error))
        if self.closed:
            raise ConnectionResetError("connection closed")

    async def _wait_transport_empty(self) -> None:
        if self.queue is not None:
            if self.out:
                self.flush_out()
            await self._wait_queue_empty()
            return
        transport = self.transport
        if transport.get_write_buffer_size() == 0:
            return
        # Temporarily pause at any buffered byte so resume_writing fires exactly when the buffer empties.
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            if transport.get_write_buffer_size() > 0:
                self.write_paused = True
                await self.drain()
        finally:
            if not self.closed:
                transport.set_write_buffer_limits(high=self.max_buffered_bytes, low=0)

    async def _sendfile(self, in_fd: int, position: int, count: int) -> None:
        """Zero-copy: segment file -> socket. Writes straight to the socket once the transport's own buffer is
        empty (so bytes stay in order), waiting for writability through a duplicate descriptor (the loop
        refuses watchers on a descriptor owned by a transport)."""
        await self._wait_transport_empty()
        if self.closed:
            raise ConnectionResetError("connection closed")
        if self._sendfile_fd < 0:
            sock = self.transport.get_extra_info("socket")
            if sock is None:
                raise OSError(errno.ENOTSOCK, "no socket for sendfile")
            self._sendfile_fd = os.dup(sock.fileno())
        out_fd = self._sendfile_fd
        loop = self.loop
        sends = self.sends
        sendfile = sends.sendfile_impl
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
                sends.sendfile_bytes += sent
                continue
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(out_fd, _resolve, writable)
            try:
                await asyncio.wait_for(writable, self.write_timeout_s)
            except asyncio.TimeoutError:
                raise WriteTimeout() from None
            finally:
                loop.remove_writer(out_fd)
                if self.closed:
                    raise ConnectionResetError("connection closed")

    # ---- flow control and closing (called by the connection) -----------------------------------------

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def queue_drained(self) -> None:
        """The native send queue emptied (or failed) after ``notify_when_empty``."""
        error = self.queue.error
        if error is not None and not self.closed:
            # a send failed (peer gone, or a segment file shorter than its range): a response is cut
            quiet = error in (errno.EPIPE, errno.ECONNRESET)  # the client went away: not worth a line
            self.close_connection(None if quiet else f"socket error: {os.strerror(error)}")
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def close(self, graceful: bool) -> None:
        """Close the connection. ``graceful``: first send the coalesced responses, and let the writer thread
        send what it holds; otherwise drop everything buffered."""
        if graceful and self.out:
            self.flush_out()
        self.closed = True
        if graceful:
            self.transport.close()
        else:
            self.transport.abort()
        self._close_queue(flush=graceful)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._drained is not None and not self._drained.done():
            self._drained.cancel()
        if self._sendfile_fd >= 0:
            try:
                self.loop.remove_writer(self._sendfile_fd)
            except Exception:
                pass
            os.close(self._sendfile_fd)
            self._sendfile_fd = -1
        self._close_queue(flush=exc is None)

    def _close_queue(self, flush: bool) -> None:
        """Flush (then close) or drop the native send queue; the peer sees the end of the stream once both
        the transport's descriptor and the queue's duplicate are closed."""
        if self.queue is None or self._queue_closing:
            return
        self._queue_closing = True
        self.sends.unregister(self.queue, flush=flush)

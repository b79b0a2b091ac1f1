"""Cutting requests out of a connection's bytes, within bounds.

Frames are cut by klog.protocol's BufferedFrameReader, each bounded by ``socket.request.max.bytes``; a large one is
read straight into a pooled buffer of its own once :class:`~klog.broker.network.request_memory.ConnectionMemory`
admits it. Reading runs ahead of processing by at most ``klog.connection.max.inflight.requests`` frames or
``klog.connection.max.buffered.bytes`` bytes; then the socket is no longer read (the kernel's socket buffers
push back on the client) until the backlog is down to half.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

from klog.broker.network.limits import Limits
from klog.broker.network.request_memory import ConnectionMemory
from klog.protocol import BufferedFrameReader, FrameTooLarge
from klog.protocol.framing import READ_BUFFER_BYTES, SharedReadBuffer

#: the read buffer the connections of this thread's event loop read into while they hold nothing (per thread:
#: a buffer is filled and emptied within one read callback)
_shared_buffers = threading.local()


def shared_read_buffer() -> SharedReadBuffer:
    buffer: SharedReadBuffer | None = getattr(_shared_buffers, "buffer", None)
    if buffer is None:
        buffer = _shared_buffers.buffer = SharedReadBuffer(READ_BUFFER_BYTES)
    return buffer

#: the first byte of a TLS ClientHello, to say something useful about a common mistake
_TLS_HANDSHAKE = 0x16


class RequestReader:
    """A connection's received requests: complete frames waiting to be processed, and the reading they allow."""

    __slots__ = ("transport", "memory", "reader", "frames", "buffered_in", "paused", "max_inflight",
                 "max_buffered_bytes")

    def __init__(self, transport: asyncio.Transport, limits: Limits, memory: ConnectionMemory) -> None:
        self.transport = transport
        self.memory = memory
        #: cuts frames; asks ``memory`` before it allocates a large frame's buffer
        self.reader = BufferedFrameReader(limits.max_frame_bytes, small_frame_bytes=memory.small_frame_bytes,
                                          admit=memory.admit, shared=shared_read_buffer())
        #: complete requests, oldest first
        self.frames: deque[Any] = deque()
        #: bytes of the requests in ``frames``
        self.buffered_in = 0
        self.paused = False
        #: klog.connection.max.inflight.requests
        self.max_inflight = limits.max_inflight
        #: klog.connection.max.buffered.bytes
        self.max_buffered_bytes = limits.max_buffered_bytes

    def cut(self) -> str | None:
        """Take the complete frames the reader holds and pause or resume reading; returns why the connection
        must be closed (a bad frame: the stream is out of sync), or None."""
        memory = self.memory
        frames = self.frames
        small_frame_bytes = memory.small_frame_bytes
        try:
            for frame in self.reader:
                size = len(frame)
                frames.append(frame)
                self.buffered_in += size
                if size <= small_frame_bytes:  # large ones were counted when admitted
                    memory.add_small(size)
        except FrameTooLarge as exc:  # or a negative size prefix
            first = exc.size >> 24 & 0xFF
            hint = " (looks like TLS: this listener is PLAINTEXT)" if first == _TLS_HANDSHAKE else ""
            return f"bad frame: {exc}{hint}"
        self.update_reading()
        return None

    def take(self) -> Any:
        """The next request to process (the previous one is answered: requests are processed one at a time)."""
        frame = self.frames.popleft()
        size = len(frame)
        self.buffered_in -= size
        self.memory.start_processing(size)
        self.update_reading()
        return frame

    def update_reading(self) -> None:
        """Pause reading while the read-ahead backlog is full or a large request waits to be admitted; resume
        once the backlog is down to half and nothing waits."""
        memory = self.memory
        if memory.closed:
            return
        if self.paused:
            if memory.wait is None and len(self.frames) < self.max_inflight // 2 + 1 \
                    and self.buffered_in < self.max_buffered_bytes // 2:
                self.paused = False
                self.transport.resume_reading()
        elif (memory.wait is not None or len(self.frames) >= self.max_inflight
              or self.buffered_in >= self.max_buffered_bytes):
            self.paused = True
            self.transport.pause_reading()

    def release_pooled_buffers(self) -> None:
        """Give back the pooled large-frame receive buffers (an idle connection must not pin megabytes)."""
        self.reader.pool.release()

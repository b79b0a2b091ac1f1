"""Sans-IO framing: split a byte stream into Kafka frames (int32 size prefix + payload)."""

from __future__ import annotations

import mmap as _mmap
import struct as _struct
import sys as _sys
from collections import deque
from typing import Callable, Iterator, Union

from .exceptions import FrameTooLarge

_unpack_size = _struct.Struct(">i").unpack_from

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class FrameReader:
    """Feed it bytes as they arrive; iterate to get each complete frame (without the size prefix) as a
    memoryview.

    Frames that lie inside one fed chunk are returned as zero-copy views of that chunk; a frame split across
    chunks is joined once. The size limit is checked as soon as a size prefix arrives, before buffering the
    frame: a size above ``max_frame_bytes`` or below zero raises :class:`FrameTooLarge` (the stream is then out of
    sync and the connection should be closed).
    """

    __slots__ = ("max_frame_bytes", "_chunks", "_offset", "_buffered")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # consumed bytes of _chunks[0]
        self._buffered = 0  # unconsumed bytes over all chunks

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._buffered

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        # Keep immutable copies only: returned frames are views of these chunks.
        chunk = data if type(data) is bytes else bytes(data)
        self._chunks.append(chunk)
        self._buffered += len(chunk)

    def __iter__(self) -> Iterator[memoryview]:
        return self

    def __next__(self) -> memoryview:
        frame = self.next_frame()
        if frame is None:
            raise StopIteration
        return frame

    def pending_frame_size(self) -> int | None:
        """Size of the frame being received (once its prefix arrived), else None."""
        if self._buffered < 4:
            return None
        self._gather(4)
        (size,) = _unpack_size(self._chunks[0], self._offset)
        return int(size)

    def next_frame(self) -> memoryview | None:
        if self._buffered < 4:
            return None
        self._gather(4)
        head = self._chunks[0]
        off = self._offset
        (size,) = _unpack_size(head, off)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        total = 4 + size
        if self._buffered < total:
            return None
        if len(head) - off < total:
            self._gather(total)
            head = self._chunks[0]
            off = self._offset
        frame = memoryview(head)[off + 4:off + total]
        off += total
        self._buffered -= total
        if off == len(head):
            self._chunks.popleft()
            self._offset = 0
        else:
            self._offset = off
        return frame

    def _gather(self, n: int) -> None:
        """Make the first chunk hold at least ``n`` unconsumed bytes (n <= buffered)."""
        head = self._chunks[0]
        if len(head) - self._offset >= n:
            return
        parts = [memoryview(head)[self._offset:]]
        have = len(head) - self._offset
        self._chunks.popleft()
        while have < n:
            c = self._chunks.popleft()
            parts.append(memoryview(c))
            have += len(c)
        self._chunks.appendleft(b"".join(parts))
        self._offset = 0


#: Frames up to this size are copied out of the shared read buffer; larger ones get a buffer of their own.
SMALL_FRAME_BYTES = 64 * 1024
#: Size of a connection's shared read buffer (small frames, and the start of every frame).
READ_BUFFER_BYTES = 128 * 1024
#: After a large frame, the next read into the shared buffer asks for at most this many bytes: if the next frame
#: is large too, only this much of it is copied before the rest is read straight into its own buffer.
HEAD_WINDOW_BYTES = 8 * 1024
#: Large-frame buffers kept for reuse per reader, and the largest one kept (bigger frames get a buffer of their
#: own that is freed after use). Few and bounded: an idle connection should not pin much memory.
POOLED_BUFFERS = 4
POOLED_BUFFER_MAX_BYTES = 16 * 1024 * 1024

#: An uninitialised buffer: private anonymous memory, whose pages stay unmapped (no RSS) until written, where a
#: zero-filled bytearray would make every page resident up front. (NumPy's ``empty`` did this before, but loading
#: NumPy cost every broker about 16 MiB of RSS.)
_Buffer = Union[_mmap.mmap, bytearray]


def _uninitialised(size: int) -> _Buffer:
    return _mmap.mmap(-1, size, flags=_mmap.MAP_PRIVATE) if size > 0 else bytearray()


class FrameBufferPool:
    """Receive buffers for large frames, reused once nothing references them any more.

    A frame handed out is a view of a pooled buffer; whatever keeps that view or a slice of it (a decoded request's
    records, a purgatory entry) keeps the buffer referenced. A buffer whose only references are the pool's own is
    free: reusing it costs no page faults, where a fresh allocation costs the kernel a fault and a zero-fill per
    page, as much CPU as the socket read itself.
    """

    __slots__ = ("_buffers", "max_buffers", "max_buffer_bytes")

    #: References to a free pooled buffer seen by ``sys.getrefcount`` in :meth:`take`: the pool's list, the loop
    #: variable and getrefcount's argument.
    _FREE_REFS = 3

    def __init__(self, max_buffers: int = POOLED_BUFFERS, max_buffer_bytes: int = POOLED_BUFFER_MAX_BYTES) -> None:
        self._buffers: list[_Buffer] = []
        self.max_buffers = max_buffers
        self.max_buffer_bytes = max_buffer_bytes

    @property
    def pooled_bytes(self) -> int:
        return sum(len(b) for b in self._buffers)

    def take(self, size: int) -> memoryview:
        """A writable buffer of exactly ``size`` bytes (uninitialised)."""
        for buf in self._buffers:
            # A view's managed buffer holds one reference to ``buf`` until the last view of it is gone.
            if len(buf) >= size and _sys.getrefcount(buf) == self._FREE_REFS:
                return memoryview(buf)[:size]
        if size > self.max_buffer_bytes:
            return memoryview(_uninitialised(size))
        # Round up so that frames of varying size can share buffers; pages never written stay unmapped.
        capacity = min(1 << (size - 1).bit_length(), self.max_buffer_bytes) if size > 1 else 1
        buf = _uninitialised(capacity)
        buffers = self._buffers
        if len(buffers) < self.max_buffers:
            buffers.append(buf)
        elif buffers:
            # All pooled buffers busy (requests held by handlers): replace a smaller one, else use this one once.
            smallest = min(range(len(buffers)), key=lambda i: len(buffers[i]))
            if len(buffers[smallest]) < capacity:
                buffers[smallest] = buf
        return memoryview(buf)[:size]

    def release(self) -> int:
        """Drop every pooled buffer (those still referenced live on until their last user lets go); returns
        the bytes dropped."""
        freed = self.pooled_bytes
        self._buffers.clear()
        return freed


class SharedReadBuffer:
    """A read buffer the connections of one event loop lend for reads while they hold nothing (see
    :class:`BufferedFrameReader`'s ``shared``): most reads carry whole requests, so hundreds of idle connections
    need not each keep pages of a buffer of their own resident. Used by one thread at a time: a receiver takes
    every complete frame out (and the reader moves what is left to a buffer of the connection's own) before the
    next connection reads."""

    __slots__ = ("view",)

    def __init__(self, size: int = READ_BUFFER_BYTES) -> None:
        self.view = memoryview(_uninitialised(size))


class BufferedFrameReader:
    """Framing for a buffer-oriented receiver (``asyncio.BufferedProtocol``): the receiver asks
    :meth:`get_buffer` where to put the next bytes, reports how many arrived with :meth:`buffer_updated`, then
    takes complete frames (without the size prefix) from :meth:`next_frame` until it returns None, before it
    asks for the next buffer.

    Small frames are read into a shared buffer and copied out (``bytes``). A frame above ``small_frame_bytes``
    gets a buffer of its own, sized to the frame, from a :class:`FrameBufferPool`; the rest of that frame is read
    straight into it, so it is never copied again, and it is handed out as a read-only view of that buffer (valid
    for as long as anyone holds it). The size limit is checked as soon as a size prefix arrives, before buffering
    the frame: a size above ``max_frame_bytes`` or below zero raises :class:`FrameTooLarge` (the stream is then
    out of sync and the connection should be closed).

    ``admit(size)``, if given, is asked before a large frame's buffer is allocated: when it answers False,
    :meth:`next_frame` returns None and leaves the frame where it is; the receiver should stop reading (nothing
    more fits before that frame) and call :meth:`next_frame` again once the frame may be admitted.

    ``shared`` (a :class:`SharedReadBuffer` of ``read_buffer_bytes``, used by this thread only): while the reader
    holds nothing and has no buffer of its own, bytes are read into the shared buffer; when :meth:`next_frame`
    returns None, what is left there (part of a frame) moves to a buffer of the reader's own, kept from then on.
    The receiver must then take frames until None before another reader of the same shared buffer reads.
    """

    __slots__ = ("max_frame_bytes", "small_frame_bytes", "pool", "admit", "_buf", "_view", "_start", "_end",
                 "_big", "_big_pos", "_after_big", "_shared", "_lent", "_read_buffer_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, *,
                 read_buffer_bytes: int = READ_BUFFER_BYTES, small_frame_bytes: int = SMALL_FRAME_BYTES,
                 pool: FrameBufferPool | None = None, admit: Callable[[int], bool] | None = None,
                 shared: SharedReadBuffer | None = None) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        if not 0 <= small_frame_bytes <= read_buffer_bytes - 4:
            raise ValueError("small_frame_bytes must fit the read buffer with its size prefix")
        self.max_frame_bytes = max_frame_bytes
        self.small_frame_bytes = small_frame_bytes
        self.pool = pool if pool is not None else FrameBufferPool()
        self.admit = admit
        if shared is not None and len(shared.view) != read_buffer_bytes:
            raise ValueError("the shared read buffer must be read_buffer_bytes long")
        self._read_buffer_bytes = read_buffer_bytes
        self._shared = shared
        #: reading into the shared buffer now (holding nothing of its own)
        self._lent = False
        # Uninitialised: a zero-filled buffer would make every connection's pages resident up front. With a shared
        # buffer, allocated only when a read leaves part of a frame.
        self._buf: _Buffer | None = None
        self._view: memoryview | None = None
        if shared is None:
            self._buf = _uninitialised(read_buffer_bytes)
            self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte of _buf
        self._end = 0  # end of the received bytes in _buf
        self._big: memoryview | None = None  # the large frame being received
        self._big_pos = 0  # bytes of _big received
        self._after_big = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._end - self._start + (self._big_pos if self._big is not None else 0)

    @property
    def missing(self) -> int:
        """Bytes of the large frame being received that have not arrived yet (0 when none is)."""
        big = self._big
        return len(big) - self._big_pos if big is not None else 0

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        big = self._big
        if big is not None:
            return big[self._big_pos:]
        if self._view is None:
            assert self._shared is not None
            self._view = self._shared.view
            self._lent = True
        start, end = self._start, self._end
        if end == len(self._view):
            if start == 0:
                raise RuntimeError("get_buffer() called before next_frame() returned None")
            # Move the unparsed tail (less than a size prefix, or a small frame) to the front.
            self._view[:end - start] = self._view[start:end]
            self._start, self._end = 0, end - start
            end -= start
        if self._after_big and end == 0:
            # Kept until bytes arrive: an event loop asks for a buffer before each read, also for the read that
            # finds the socket empty (EAGAIN), so clearing it here gave the next response the whole buffer and
            # copied its first hundreds of KiB out of it again.
            return self._view[:HEAD_WINDOW_BYTES]
        return self._view[end:]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` bytes were written at the start of the last buffer from :meth:`get_buffer`."""
        if self._big is not None:
            self._big_pos += nbytes
        else:
            self._end += nbytes
            if nbytes:
                self._after_big = False

    def next_frame(self) -> bytes | memoryview | None:
        big = self._big
        if big is not None:
            if self._big_pos < len(big):
                return None
            self._big = None
            self._big_pos = 0
            self._after_big = True
            return big.toreadonly()
        view = self._view
        if view is None:
            return None
        start = self._start
        avail = self._end - start
        if avail < 4:
            if avail == 0:
                self._start = self._end = 0
            self._settle()
            return None
        (size,) = _unpack_size(view, start)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        total = 4 + size
        if size > self.small_frame_bytes:
            if self.admit is not None and not self.admit(size):
                self._settle()
                return None  # not yet: the receiver stops reading until it may be admitted
            # A buffer of its own: copy what has arrived, the rest is read straight into it.
            big = self.pool.take(size)
            have = min(avail - 4, size)
            big[:have] = view[start + 4:start + 4 + have]
            if have == size:
                self._consumed(start + total)
                self._after_big = True
                return big.toreadonly()
            self._start = self._end = 0
            self._big, self._big_pos = big, have
            self._settle()
            return None
        if avail >= total:
            frame = bytes(view[start + 4:start + total])
            self._consumed(start + total)
            return frame
        if start + total > len(view):
            # Make room for the rest of this small frame.
            view[:avail] = view[start:self._end]
            self._start, self._end = 0, avail
        self._settle()
        return None

    def _settle(self) -> None:
        """Every complete frame taken: give the shared buffer back, moving what is left of it (part of a frame)
        to a buffer of this reader's own."""
        if not self._lent:
            return
        self._lent = False
        start, end = self._start, self._end
        if start == end:
            self._view = None
            self._start = self._end = 0
            return
        shared = self._view
        assert shared is not None
        self._buf = _uninitialised(self._read_buffer_bytes)
        own = self._view = memoryview(self._buf)
        own[:end - start] = shared[start:end]
        self._start, self._end = 0, end - start

    def _consumed(self, start: int) -> None:
        if start == self._end:
            self._start = self._end = 0
        else:
            self._start = start

    def __iter__(self) -> Iterator[bytes | memoryview]:
        return self

    def __next__(self) -> bytes | memoryview:
        frame = self.next_frame()
        if frame is None:
            raise StopIteration
        return frame

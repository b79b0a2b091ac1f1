"""Sans-IO framing: split a byte stream into Kafka frames (int32 size prefix + payload)."""

from __future__ import annotations

import struct as _struct
from collections import deque
from typing import Iterator

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

"""Record batch buffers shared by the producer and ``send_batch``'s encoder: :class:`BatchBufferPool` (free
buffers rewritten in place by the next batch) and :class:`LazyBatch` (a batch whose producer fields are written
when it is drained).

Below both :mod:`klog.client.producer` and :mod:`klog.client.batch_encode`, so neither imports the other's
internals.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from klog._native import _core

__all__ = ["BatchBufferPool", "LazyBatch", "POOL_MAX_BUFFERS", "POOL_MAX_BYTES"]


#: Most free batch buffers a producer keeps for reuse, and most bytes they may hold (capped further by
#: buffer.memory). A batch that was acknowledged (or failed for good) gives its buffer back, and the next
#: send_batch rewrites it in place instead of allocating: a fresh buffer of up to batch.size bytes comes from a
#: new mmap whose every page is faulted in and zeroed by the kernel (measured: about 40% of the client's CPU
#: with 1 KiB records). The bounds keep what an idle producer holds on to small: 64 buffers cover a window of
#: batches in flight at batch.size 1 MB, and 64 MiB caps it for bigger batch sizes.
POOL_MAX_BUFFERS = 64
POOL_MAX_BYTES = 64 << 20


class BatchBufferPool:
    """Free record batch buffers (bytearrays) of one producer. Thread-safe: batches give buffers back on the
    event loop, ``send_batch`` takes them on the caller's thread. A buffer is handed to the native encoder only
    as a candidate: the encoder rewrites it only if nothing else references it (no memoryview, no request
    still holding it), so a buffer given back too early is dropped, never overwritten under a reader."""

    __slots__ = ("max_buffers", "max_bytes", "reused", "_free", "_bytes", "_lock")

    def __init__(self, max_buffers: int = POOL_MAX_BUFFERS, max_bytes: int = POOL_MAX_BYTES) -> None:
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        #: Buffers an encoding call took out of a lent list (rewritten with a new batch) since creation.
        self.reused = 0
        self._free: list[bytearray] = []
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._free)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def give(self, buf: object) -> None:
        """Keep ``buf`` (the raw bytes of a finished batch) for reuse if it is a bytearray and fits the bounds."""
        if type(buf) is not bytearray:
            return
        n = len(buf)
        with self._lock:
            if len(self._free) < self.max_buffers and self._bytes + n <= self.max_bytes:
                self._free.append(buf)
                self._bytes += n

    def take_all(self) -> list[bytearray]:
        """Every free buffer, for one encoding call; :meth:`put_back` returns those it did not use."""
        with self._lock:
            free, self._free, self._bytes = self._free, [], 0
        return free

    def put_back(self, unused: list[bytearray]) -> None:
        for buf in unused:
            self.give(buf)

    @contextlib.contextmanager
    def lent(self) -> Iterator[list[bytearray]]:
        """Every free buffer, for one encoding call (the encoder takes out those it rewrites); the rest come
        back afterwards."""
        free = self.take_all()
        lent = len(free)
        try:
            yield free
        finally:
            with self._lock:
                self.reused += lent - len(free)
            self.put_back(free)


class LazyBatch:
    """A batch encoded by ``send_batch`` without producer fields. The producer id, epoch and base sequence (known
    only when the batch is drained) are written natively in place the first time (the buffer was never sent);
    later changes (an epoch bump before a retry) go into a copy, as an earlier attempt may still reference it."""

    __slots__ = ("raw", "fields")

    def __init__(self, raw: bytes | bytearray) -> None:
        self.raw = raw
        #: The producer fields in ``raw`` once it was handed out (None: never encoded yet).
        self.fields: tuple[int, int, int] | None = None

    def __len__(self) -> int:
        return len(self.raw)

    def encode(self, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes | memoryview:
        fields = (producer_id, producer_epoch, base_sequence)
        if self.fields is None:
            if fields != (-1, -1, -1):
                _core.set_producer_fields(self.raw, producer_id, producer_epoch, base_sequence)
            self.fields = fields
        if fields == self.fields:
            return memoryview(self.raw)
        return _core.with_producer_fields(self.raw, producer_id, producer_epoch, base_sequence)  # type: ignore[no-any-return]

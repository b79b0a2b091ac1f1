"""Request memory admission: request bytes are bounded before their buffers are allocated, per connection
(``klog.connection.max.buffered.bytes``, :class:`ConnectionMemory`) and across all connections
(``queued.max.request.bytes``, one bound on the bytes of requests the broker holds).

:class:`RequestMemory` is sans-IO bookkeeping (Kafka's MemoryPool for requests): a large request (above the framing's small-frame size) is
admitted when its size prefix arrives, before a byte of its buffer is allocated, and only if it fits; a connection
whose request does not fit stops being read (back-pressure) and waits in line until bytes are released. Small
requests are always admitted and only counted: they are bounded per connection by
``klog.connection.max.inflight.requests`` (and the read buffer), and admitting them keeps a full pool from
stopping small clients (Metadata, heartbeats, commits) behind large producers. Bytes are held from admission until
the request has been answered (or its connection closed).

Progress: while no large request is held, the next one is admitted whatever its size (at most
``socket.request.max.bytes``), so a bound below the frame limit slows large requests to one at a time instead of
refusing them forever.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class RequestMemory:
    """Bytes of requests being received, queued or processed, and the connections waiting for room."""

    __slots__ = ("capacity", "held", "large_held", "waiting", "peak")

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError("capacity must be positive (None: unbounded)")
        #: queued.max.request.bytes (None: unbounded, Kafka's -1)
        self.capacity = capacity
        #: every request byte admitted and not yet released
        self.held = 0
        #: the part of ``held`` admitted through :meth:`try_admit_large`
        self.large_held = 0
        #: connections whose large request did not fit, first come first served
        self.waiting: deque[ConnectionMemory] = deque()
        #: the most ``held`` has been (for tests and operators)
        self.peak = 0

    def try_admit_large(self, nbytes: int) -> bool:
        """Admit a large request of ``nbytes`` if it fits (or if no large request is held)."""
        assert nbytes > 0
        if self.capacity is not None and self.large_held and self.held + nbytes > self.capacity:
            return False
        self.held += nbytes
        self.large_held += nbytes
        if self.held > self.peak:
            self.peak = self.held
        return True

    def add_small(self, nbytes: int) -> None:
        """Count a small request (always admitted)."""
        self.held += nbytes
        if self.held > self.peak:
            self.peak = self.held

    def release(self, nbytes: int, large: int = 0) -> None:
        """Give back ``nbytes`` held bytes, ``large`` of them admitted as large requests."""
        assert 0 <= large <= nbytes
        self.held -= nbytes
        self.large_held -= large
        assert self.held >= 0 and self.large_held >= 0, (self.held, self.large_held)

    def has_room(self) -> bool:
        """Whether a waiting connection may try again (its request might fit now)."""
        return self.capacity is None or self.held < self.capacity or not self.large_held


class RequestAdmission:
    """:class:`RequestMemory` on the broker's event loop: connections whose large request did not fit wait in
    line and are let in, first come first served, as bytes are released."""

    __slots__ = ("memory", "on_exhausted", "_wake_scheduled")

    def __init__(self, capacity: int | None, on_exhausted: Callable[[], None]) -> None:
        self.memory = RequestMemory(capacity)
        #: called when a large request did not fit (idle connections then give back their pooled buffers)
        self.on_exhausted = on_exhausted
        self._wake_scheduled = False

    def release(self, nbytes: int, large: int) -> None:
        memory = self.memory
        memory.release(nbytes, large)
        if memory.waiting and not self._wake_scheduled and memory.has_room():
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake_waiters)

    def _wake_waiters(self) -> None:
        """Let connections waiting for request memory try again, first come first served; stop at the first
        whose request still does not fit (it keeps its place)."""
        self._wake_scheduled = False
        memory = self.memory
        waiting = memory.waiting
        while waiting and memory.has_room():
            waiter = waiting.popleft()
            if waiter.closed or waiter.wait != "broker":
                continue
            if not waiter.retry():
                if waiter.wait == "broker":  # waiting again: it went to the back of the line; back in front
                    waiting.pop()
                    waiting.appendleft(waiter)
                break


class ConnectionMemory:
    """The request bytes one connection holds, from admission (a large request: when its size prefix arrives;
    a small one: once received) until it is answered or the connection closes. A large request must fit
    ``klog.connection.max.buffered.bytes`` with what the connection already holds (unless it holds nothing) and
    the broker's :class:`RequestAdmission`; if not, the connection waits (``wait``) and ``resume`` is called
    to read on once room was released."""

    __slots__ = ("shared", "max_bytes", "small_frame_bytes", "resume", "held", "held_large", "processing", "wait",
                 "closed")

    def __init__(self, shared: RequestAdmission, max_bytes: int, small_frame_bytes: int,
                 resume: Callable[[], None]) -> None:
        self.shared = shared
        #: klog.connection.max.buffered.bytes
        self.max_bytes = max_bytes
        #: frames up to this size are small: counted once received, never refused
        self.small_frame_bytes = small_frame_bytes
        #: asks the frame reader again for the waiting request (which calls :meth:`admit` again)
        self.resume = resume
        #: bytes of every request this connection holds: being received (admitted), queued, being processed
        self.held = 0
        #: the part of ``held`` admitted as large requests (counted so in the broker's RequestMemory)
        self.held_large = 0
        #: the request being processed (released when the next is taken, or when the connection is idle)
        self.processing = 0
        #: a large request is waiting to be admitted: "connection" (its own bound) or "broker" (the global one)
        self.wait: str | None = None
        self.closed = False

    def admit(self, size: int) -> bool:
        """The frame reader's question before it allocates a large request's buffer: does it fit this
        connection's bound and the broker's? If not, this connection waits (and stops being read)."""
        if self.closed:
            return False
        if self.held and self.held + size > self.max_bytes:
            self.wait = "connection"  # retried when this connection releases a request
            return False
        shared = self.shared
        memory = shared.memory
        if not memory.try_admit_large(size):
            if self.wait != "broker":
                self.wait = "broker"
                memory.waiting.append(self)
                shared.on_exhausted()
            return False
        self.wait = None
        self.held += size
        self.held_large += size
        return True

    def add_small(self, size: int) -> None:
        """Count a small request received whole."""
        self.held += size
        self.shared.memory.add_small(size)

    def start_processing(self, size: int) -> None:
        """The next request (of ``size`` bytes) is taken: the one before it is answered, its bytes are free."""
        self.release_processed()
        self.processing = size

    def release_processed(self) -> None:
        """The request being processed is answered: its bytes are free."""
        size = self.processing
        if size:
            self.processing = 0
            large = min(size, self.held_large) if size > self.small_frame_bytes else 0
            self.held -= size
            self.held_large -= large
            assert self.held >= 0 and self.held_large >= 0, (self.held, self.held_large)
            self.shared.release(size, large)
            if self.wait == "connection":
                asyncio.get_running_loop().call_soon(self.retry)

    def retry(self) -> bool:
        """Try again to admit the waiting large request (room was released); True if it was admitted."""
        if self.closed or self.wait is None:
            return True
        self.wait = None
        self.resume()  # asks ``admit`` again; waits again if it still does not fit
        return self.wait is None

    def close(self) -> None:
        """The connection is closed: every request byte it held (queued, partly received) is free."""
        self.closed = True
        if self.held:
            self.shared.release(self.held, self.held_large)
            self.held = self.held_large = self.processing = 0
        self.wait = None

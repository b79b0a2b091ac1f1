"""``queued.max.request.bytes``: one bound on the bytes of requests the broker holds across all connections.

Sans-IO bookkeeping (Kafka's MemoryPool for requests): a large request (above the framing's small-frame size) is
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

from collections import deque
from typing import Any


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
        self.waiting: deque[Any] = deque()
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

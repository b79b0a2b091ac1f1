"""The coordinator's timers over the native :class:`klog._native.SessionTracker`.

Every member gets one integer key for its lifetime (``register``); a heartbeat re-arms that key
(``arm`` = one native hash update), so thousands of members cost little. Group-level timers (join, sync,
initial rebalance delay) use named keys (``schedule``) that replace any pending timer of the same name.
Callbacks run from ``poll`` - in production from the coordinator's background task, in tests from a fake
clock - never re-entrantly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

from klog._native import SessionTracker

log = logging.getLogger("klog.coordinator")
Clock = Callable[[], int]
#: ``poll`` runs at most this many batches of due timers, so callbacks that keep re-arming cannot spin it.
MAX_POLL_ROUNDS = 64
MAX_KEYS_PER_ROUND = 4096


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Timer:
    def __init__(self, clock: Clock = wall_clock_ms, on_earlier_deadline: Callable[[int], None] | None = None):
        self.clock = clock
        self._tracker = SessionTracker()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._named: dict[Hashable, int] = {}
        self._next_key = 1
        #: Called with a deadline earlier than any pending one, so a sleeping poller can wake up sooner.
        self.on_earlier_deadline = on_earlier_deadline
        self._earliest: int | None = None

    def now(self) -> int:
        return self.clock()

    # -- keys owned by callers (members) ----------------------------------------------------------------------
    def register(self, callback: Callable[[], None]) -> int:
        """A new key whose expiry runs ``callback``; unarmed until ``arm``."""
        key = self._next_key
        self._next_key += 1
        self._callbacks[key] = callback
        return key

    def arm(self, key: int, delay_ms: int) -> None:
        deadline = self.clock() + max(0, delay_ms)
        self._tracker.schedule(key, deadline)
        if self.on_earlier_deadline is not None and (self._earliest is None or deadline < self._earliest):
            self._earliest = deadline
            self.on_earlier_deadline(deadline)

    def disarm(self, key: int) -> None:
        self._tracker.cancel(key)

    def release(self, key: int) -> None:
        self._tracker.cancel(key)
        self._callbacks.pop(key, None)

    def deadline(self, key: int) -> int | None:
        return self._tracker.deadline(key)

    # -- named one-shot timers --------------------------------------------------------------------------------
    def schedule(self, name: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        """Runs ``callback`` after ``delay_ms``, replacing a pending timer called ``name``."""
        self.cancel(name)

        def fire() -> None:
            if self._named.get(name) == key:
                del self._named[name]
                self._callbacks.pop(key, None)
            callback()

        key = self.register(fire)
        self._named[name] = key
        self.arm(key, delay_ms)

    def cancel(self, name: Hashable) -> bool:
        key = self._named.pop(name, None)
        if key is None:
            return False
        self.release(key)
        return True

    def is_scheduled(self, name: Hashable) -> bool:
        return name in self._named

    # -- running ----------------------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        return self._tracker.next_deadline()

    def poll(self, now: int | None = None) -> int:
        """Runs the callbacks of every key whose deadline passed; returns how many ran."""
        now = self.clock() if now is None else now
        ran = 0
        # Callbacks may schedule timers that are already due (zero delays): run those too, within a bound.
        for _ in range(MAX_POLL_ROUNDS):
            keys = self._tracker.expired(now, MAX_KEYS_PER_ROUND)
            if not keys:
                break
            for key in keys:
                cb = self._callbacks.get(key)
                if cb is not None:
                    try:
                        cb()
                    except Exception:  # noqa: BLE001 - one failing timer must not starve the others
                        log.exception("coordinator timer %d failed", key)
                    ran += 1
        self._earliest = self._tracker.next_deadline()
        return ran

    def __len__(self) -> int:
        return len(self._tracker)

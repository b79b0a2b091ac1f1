"""Log lines a client can cause by the thousand (refused connections, rejected requests) at most once per
interval, counting the ones left out, so a flood of bad input never becomes a flood of log lines."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    """At most one warning per ``interval_s``; the next line says how many were left out, and ``flush`` (called
    now and then) reports those left out after the last line once the interval has passed."""

    def __init__(self, logger: logging.Logger, what: str, interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        assert interval_s >= 0
        self.logger = logger
        #: what the lines are about, plural ("refused connections")
        self.what = what
        self.interval_s = interval_s
        self.clock = clock
        self._logged_at = -float("inf")
        self._left_out = 0
        self._last_left_out = ""

    def warning(self, message: str) -> bool:
        """Log ``message`` unless a line was logged less than ``interval_s`` ago; True if it was logged."""
        now = self.clock()
        if now - self._logged_at < self.interval_s:
            self._left_out += 1
            self._last_left_out = message
            return False
        more = f" ({self._left_out} more {self.what} not logged)" if self._left_out else ""
        self.logger.warning("%s%s", message, more)
        self._logged_at, self._left_out = now, 0
        return True

    def flush(self) -> None:
        """Report the lines left out since the last one, if the interval has passed."""
        now = self.clock()
        if self._left_out and now - self._logged_at >= self.interval_s:
            self.logger.warning("%d more %s not logged; the last: %s", self._left_out, self.what,
                                self._last_left_out)
            self._logged_at, self._left_out = now, 0

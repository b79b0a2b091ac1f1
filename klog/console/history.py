"""Bounded time series the console keeps in memory: consumer lag over time and rates from metric counters.

Pure state (time is passed in): the sampler thread feeds it, pages read it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable

#: samples kept per series (at the default 5 s interval: the last hour)
MAX_SAMPLES = 720
#: series kept at most (topics x partitions x groups can be many; the oldest-updated are dropped beyond this)
MAX_SERIES = 20_000


class History:
    """Named series of ``(unix time s, value)``, each bounded to ``max_samples``; thread-safe."""

    def __init__(self, max_samples: int = MAX_SAMPLES, max_series: int = MAX_SERIES) -> None:
        assert max_samples >= 2 and max_series >= 1
        self.max_samples = max_samples
        self.max_series = max_series
        self._series: dict[Hashable, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, key: Hashable, t: float, value: float) -> None:
        with self._lock:
            series = self._series.pop(key, None)
            if series is None:
                series = deque(maxlen=self.max_samples)
                if len(self._series) >= self.max_series:
                    del self._series[next(iter(self._series))]   # the least recently updated
            series.append((t, value))
            self._series[key] = series   # re-inserted: dict order is update order

    def series(self, key: Hashable) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._series.get(key, ()))

    def values(self, key: Hashable) -> list[float]:
        return [v for _, v in self.series(key)]

    def __len__(self) -> int:
        return len(self._series)


class Rates:
    """Per-second rates from monotonically increasing counters (a counter that goes down restarted: no rate
    for that interval). Rates land in a :class:`History` under the counter's key."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._last: dict[Hashable, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def observe(self, key: Hashable, t: float, counter: float) -> None:
        with self._lock:
            last = self._last.get(key)
            self._last[key] = (t, counter)
        if last is None:
            return
        dt = t - last[0]
        if dt > 0 and counter >= last[1]:
            self.history.add(key, t, (counter - last[1]) / dt)

"""The history of a fault run: one JSON object per line, Jepsen's vocabulary.

Every operation is logged twice by the process that performs it: an ``invoke`` before it starts and a
completion after it ends, ``ok`` (it happened), ``fail`` (it certainly did not happen) or ``info``
(indeterminate: a timeout, a lost connection; it may or may not have happened). Fault steps are logged by
the ``nemesis`` process with ``f="fault"`` and ``phase`` ``start``/``end``.

Fields (absent when not relevant):

- ``time``: ``time.monotonic_ns()`` (CLOCK_MONOTONIC is machine-wide, so several processes' files merge by it)
- ``process``: who did it (``p0`` producer 0, ``c1`` consumer 1, ``nemesis``)
- ``type``: ``invoke`` | ``ok`` | ``fail`` | ``info``
- ``f``: ``send`` | ``poll`` | ``commit`` | ``txn`` | ``fault``
- ``partition``, ``value``, ``offset``: for ``send`` (the offset once acknowledged) and ``commit``
- ``records``: for a ``poll`` completion, ``[[partition, offset, value], ...]``
- ``mode`` (``assign``/``subscribe``) and ``generation`` for polls: a consumer's offsets must advance by one
  within one generation (a new assignment or seek starts a new one)
- ``txn``, ``values`` (``[[partition, value], ...]``), ``intent`` (``commit``/``abort``): for a transaction
  (``f="txn"``) of the transactional workload: ``ok`` it committed, ``fail`` it certainly aborted (aborted on
  purpose, or never asked to commit), ``info`` its commit failed or timed out (committed or aborted, unknown)
- ``fault``, ``phase``, ``nodes``, ``detail``: for fault events
- ``error``: the error text of a ``fail``/``info``

Each worker process writes its own file (:class:`HistoryWriter`); :func:`merge` joins them sorted by time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["Event", "HistoryWriter", "read_history", "merge", "OP_TYPES", "OPERATIONS"]

#: An event as read back: a plain dict with the fields described above.
Event = dict[str, Any]
OP_TYPES = ("invoke", "ok", "fail", "info")
OPERATIONS = ("send", "poll", "commit", "txn", "fault")


class HistoryWriter:
    """Appends events of one process to a JSON-lines file, one ``write`` per line, flushed at once (a killed
    run keeps everything logged so far). Thread-safe: confluent-kafka's delivery callbacks may log."""

    def __init__(self, path: str | os.PathLike[str], process: str) -> None:
        self.path = Path(path)
        self.process = process
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def log(self, type: str, f: str, *, process: str | None = None, **fields: Any) -> Event:
        """Log one event now; ``process`` overrides the writer's own name (a producer's new incarnation)."""
        assert type in OP_TYPES, type
        assert f in OPERATIONS, f
        event: Event = {"time": time.monotonic_ns(), "process": process or self.process, "type": type, "f": f}
        event.update({k: v for k, v in fields.items() if v is not None})
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
        return event

    def fault(self, fault: str, phase: str, **fields: Any) -> Event:
        return self.log("info", "fault", fault=fault, phase=phase, **fields)

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: str | os.PathLike[str]) -> list[Event]:
    """The events of one file, in file order. A torn last line (the writer was killed mid-write) is dropped."""
    events: list[Event] = []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines) - 1:  # only the very last line may be torn
                raise ValueError(f"{path}:{number}: not a JSON event: {line[:80]!r}") from None
    return events


def merge(paths: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str]) -> list[Event]:
    """Join several processes' files into ``out`` sorted by time (stable within one process)."""
    events = sorted((e for p in paths for e in read_history(p)), key=lambda e: int(e["time"]))
    with open(out, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    return events


"""The checker: a pure function from a history and a final read to counts of anomalies (no IO, no clock).

``check(events, final_reads, replica_logs=None, high_watermarks=None)``:

- ``events``: the merged history (see :mod:`klog.testing.faults.history`)
- ``final_reads``: ``{partition: [(offset, value), ...]}``, every record of each partition read after healing
- ``replica_logs`` (optional): ``{partition: {replica_id: [(offset, value), ...]}}``, each replica's log read
  from its own disk, with ``high_watermarks`` ``{partition: hw}``: replicas must agree below the HW

Anomalies (names are the keys of :attr:`CheckResult.counts`):

- ``lost``: a send acknowledged (``ok``) whose value is absent from the final read of its partition.
  Indeterminate (``info``) and failed sends are never counted lost.
- ``duplicate``: a value stored more than once in the final read of a partition.
- ``offset_two_values``: one (partition, offset) seen with two different values anywhere (acknowledged
  offsets, polls, the final read).
- ``value_two_offsets``: one value seen at two different (partition, offset) positions anywhere (e.g.
  acknowledged at offset 5, read at offset 7) -- Jepsen's "inconsistent offsets" from the value's side.
- ``reorder``: two acknowledged sends of one producer to one partition, invoked in one order and stored
  (final read, else acknowledged offset) in the other.
- ``poll_backwards`` / ``poll_skip``: within one consumer generation, a partition's polled offset not after
  the previous one, or jumping over records the final read holds.
- ``replica_divergence``: replicas of a partition disagreeing (missing or different value) at an offset below
  the high watermark.

With transactions in the history (``f="txn"``, the transactional workload; its consumers and the final read are
read_committed), Jepsen's transactional anomalies:

- ``aborted_read`` (G1a): a value of an aborted transaction polled by a consumer or in the final read.
- ``torn_transaction``: a transaction (committed, aborted or unknown) partly in the final read: some of its values
  there, others not.
- ``lost_committed``: a committed transaction with values missing from the final read.

Each anomaly's details carry the offending partition/offsets/values, the time it became visible and the last
fault event that started before it (``fault_before``), plus for lost writes the first fault after the ack
(``fault_after``, the likely culprit).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from klog.testing.faults.history import Event

__all__ = ["ANOMALIES", "TXN_OUTCOMES", "CheckResult", "check"]

ANOMALIES = ("lost", "duplicate", "offset_two_values", "value_two_offsets", "reorder", "poll_backwards",
             "poll_skip", "replica_divergence", "aborted_read", "torn_transaction", "lost_committed")
#: what the history says of a transaction's end (``f="txn"`` completion types)
TXN_OUTCOMES = {"ok": "committed", "fail": "aborted", "info": "unknown"}

Record = tuple[int, Any]  # (offset, value)


@dataclass
class CheckResult:
    counts: dict[str, int]
    details: dict[str, list[dict[str, Any]]]
    #: acknowledged / failed / indeterminate sends, records polled, records in the final read
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def summary(self) -> str:
        head = ", ".join(f"{k}={v}" for k, v in self.stats.items())
        body = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"{'VALID' if self.valid else 'INVALID'}: {body} ({head})"

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "counts": self.counts, "stats": self.stats, "details": self.details}


class _Faults:
    """Fault start events sorted by time, to name the one before/after a moment."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.starts = [e for e in events if e.get("f") == "fault" and e.get("phase") == "start"]
        self.times = [int(e["time"]) for e in self.starts]

    @staticmethod
    def _describe(e: Event) -> dict[str, Any]:
        return {k: e[k] for k in ("time", "fault", "nodes", "detail") if k in e}

    def before(self, t: int | None) -> dict[str, Any] | None:
        if t is None:
            return None
        i = bisect.bisect_right(self.times, t)
        return self._describe(self.starts[i - 1]) if i else None

    def after(self, t: int | None) -> dict[str, Any] | None:
        if t is None:
            return None
        i = bisect.bisect_right(self.times, t)
        return self._describe(self.starts[i]) if i < len(self.starts) else None


def check(events: Sequence[Event], final_reads: Mapping[int, Sequence[Record]],
          replica_logs: Mapping[int, Mapping[int, Sequence[Record]]] | None = None,
          high_watermarks: Mapping[int, int] | None = None) -> CheckResult:
    events = sorted(events, key=lambda e: int(e["time"]))
    faults = _Faults(events)
    t: int | None
    details: dict[str, list[dict[str, Any]]] = {a: [] for a in ANOMALIES}

    # -- sends: pair each completion with its invocation by (process, value) ------------------------------------
    invoked: dict[tuple[str, Any], Event] = {}
    acked: list[tuple[Event, Event]] = []  # (invoke, ok)
    stats = {"acknowledged": 0, "failed": 0, "indeterminate": 0, "polled": 0, "final_read": 0, "faults": 0}
    for e in events:
        if e.get("f") != "send":
            continue
        key = (e["process"], e["value"])
        if e["type"] == "invoke":
            invoked[key] = e
        elif e["type"] == "ok":
            stats["acknowledged"] += 1
            acked.append((invoked.get(key, e), e))
        elif e["type"] == "fail":
            stats["failed"] += 1
        else:
            stats["indeterminate"] += 1
    stats["faults"] = len(faults.starts)

    # -- final read: where each value is stored ------------------------------------------------------------------
    stored: dict[tuple[int, Any], list[int]] = defaultdict(list)  # (partition, value) -> offsets
    final_offsets: dict[int, list[int]] = {}
    for p, records in final_reads.items():
        stats["final_read"] += len(records)
        final_offsets[p] = sorted(o for o, _ in records)
        for o, v in records:
            stored[(p, v)].append(o)
    for (p, v), offsets in stored.items():
        if len(offsets) > 1:
            details["duplicate"].append({"partition": p, "value": v, "offsets": sorted(offsets)})

    # -- lost acknowledged writes --------------------------------------------------------------------------------
    for inv, ok in acked:
        p, v = ok["partition"], ok["value"]
        if (p, v) not in stored:
            t = int(ok["time"])
            details["lost"].append({"partition": p, "value": v, "offset": ok.get("offset"), "process": ok["process"],
                                    "acked_at": t, "fault_before": faults.before(t), "fault_after": faults.after(t)})

    # -- every observation of (partition, offset, value) ---------------------------------------------------------
    observed: list[tuple[int, int, Any, int | None, str]] = []  # partition, offset, value, time, source
    for _, ok in acked:
        if ok.get("offset") is not None and ok["offset"] >= 0:
            observed.append((ok["partition"], ok["offset"], ok["value"], int(ok["time"]), f"ack by {ok['process']}"))
    for e in events:
        if e.get("f") == "poll" and e["type"] == "ok":
            for p, o, v in e.get("records", ()):
                stats["polled"] += 1
                observed.append((p, o, v, int(e["time"]), f"poll by {e['process']}"))
    for p, records in final_reads.items():
        for o, v in records:
            observed.append((p, o, v, None, "final read"))
    values_at: dict[tuple[int, int], dict[Any, tuple[int | None, str]]] = defaultdict(dict)
    positions_of: dict[Any, dict[tuple[int, int], tuple[int | None, str]]] = defaultdict(dict)
    for p, o, v, t, source in observed:
        values_at[(p, o)].setdefault(v, (t, source))
        positions_of[v].setdefault((p, o), (t, source))
    for (p, o), seen in sorted(values_at.items()):
        if len(seen) > 1:
            t = _latest(seen.values())
            details["offset_two_values"].append({
                "partition": p, "offset": o, "values": {str(v): s for v, (_, s) in seen.items()},
                "seen_at": t, "fault_before": faults.before(t)})
    for v, seen_pos in positions_of.items():
        if len(seen_pos) > 1:
            t = _latest(seen_pos.values())
            details["value_two_offsets"].append({
                "value": v, "positions": {f"{p}:{o}": s for (p, o), (_, s) in sorted(seen_pos.items())},
                "seen_at": t, "fault_before": faults.before(t)})

    # -- per producer and partition: acknowledged order must be stored order --------------------------------------
    by_producer: dict[tuple[str, int], list[tuple[int, Any, int, int]]] = defaultdict(list)
    for inv, ok in acked:
        p, v = ok["partition"], ok["value"]
        stored_at = stored.get((p, v))
        where = min(stored_at) if stored_at else ok.get("offset")
        if where is None or where < 0:
            continue
        by_producer[(ok["process"], p)].append((int(inv["time"]), v, where, int(ok["time"])))
    for (process, p), writes in by_producer.items():
        writes.sort()
        highest: tuple[int, Any] | None = None
        for _, v, where, t in writes:
            if highest is not None and where < highest[0]:
                details["reorder"].append({"process": process, "partition": p, "value": v, "offset": where,
                                           "after_value": highest[1], "after_offset": highest[0],
                                           "seen_at": t, "fault_before": faults.before(t)})
            if highest is None or where > highest[0]:
                highest = (where, v)

    # -- consumers: within one generation each partition's offsets advance by exactly the records in between ---
    last: dict[tuple[Any, Any, Any], int] = {}
    for e in events:
        if e.get("f") != "poll" or e["type"] != "ok":
            continue
        for p, o, v in e.get("records", ()):
            consumer_key = (e["process"], e.get("generation"), p)
            prev = last.get(consumer_key)
            t = int(e["time"])
            if prev is not None:
                if o <= prev:
                    details["poll_backwards"].append({"process": e["process"], "generation": e.get("generation"),
                                                      "partition": p, "from_offset": prev, "to_offset": o,
                                                      "seen_at": t, "fault_before": faults.before(t)})
                else:
                    offs = final_offsets.get(p, [])
                    lo, hi = bisect.bisect_right(offs, prev), bisect.bisect_left(offs, o)
                    if hi > lo:
                        details["poll_skip"].append({"process": e["process"], "generation": e.get("generation"),
                                                     "partition": p, "from_offset": prev, "to_offset": o,
                                                     "skipped": offs[lo:hi][:20], "seen_at": t,
                                                     "fault_before": faults.before(t)})
            last[consumer_key] = o

    # -- replicas on disk below the high watermark ---------------------------------------------------------------
    for p, replicas in (replica_logs or {}).items():
        hw = (high_watermarks or {}).get(p)
        if hw is None:
            raise ValueError(f"replica logs of partition {p} given without its high watermark")
        logs = {r: dict(records) for r, records in replicas.items()}
        for o in range(hw):
            vals = {r: log.get(o) for r, log in logs.items()}
            if len(set(map(repr, vals.values()))) > 1:
                details["replica_divergence"].append({"partition": p, "offset": o, "high_watermark": hw,
                                                      "replicas": {str(r): v for r, v in vals.items()}})

    _check_transactions(events, stored, faults, details, stats)
    counts = {a: len(d) for a, d in details.items()}
    return CheckResult(counts=counts, details=details, stats=stats)


def _check_transactions(events: Sequence[Event], stored: Mapping[tuple[int, Any], list[int]], faults: _Faults,
                        details: dict[str, list[dict[str, Any]]], stats: dict[str, int]) -> None:
    """Aborted reads, torn transactions and lost committed transactions (see the module docstring)."""
    values: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    ended: dict[tuple[str, str], Event] = {}
    for e in events:
        if e.get("f") != "txn":
            continue
        key = (e["process"], e["txn"])
        if e["type"] == "invoke":
            values[key] = [(int(p), v) for p, v in e["values"]]
        else:
            ended[key] = e
    if not values:
        return
    outcome = {key: TXN_OUTCOMES[ended[key]["type"]] if key in ended else "unknown" for key in values}
    for what in ("committed", "aborted", "unknown"):
        stats[f"txn_{what}"] = sum(1 for o in outcome.values() if o == what)
    aborted_values = {(p, v): key for key, o in outcome.items() if o == "aborted" for p, v in values[key]}
    for key, written in values.items():
        present = [pv for pv in written if pv in stored]
        t = int(ended[key]["time"]) if key in ended else None
        about = {"process": key[0], "txn": key[1], "outcome": outcome[key], "ended_at": t,
                 "fault_before": faults.before(t)}
        if outcome[key] == "aborted" and present:
            details["aborted_read"].append({**about, "source": "final read", "values": [v for _, v in present]})
        if outcome[key] == "committed" and len(present) < len(written):
            details["lost_committed"].append({**about, "missing": [v for pv in written if pv not in stored
                                                                   for v in pv[1:]]})
        if 0 < len(present) < len(written):
            details["torn_transaction"].append({**about, "present": [v for _, v in present],
                                                "missing": [v for pv in written if pv not in present for v in pv[1:]]})
    for e in events:
        if e.get("f") == "poll" and e["type"] == "ok":
            seen = [(p, o, v) for p, o, v in e.get("records", ()) if (p, v) in aborted_values]
            if seen:
                t = int(e["time"])
                details["aborted_read"].append({"process": e["process"], "source": "poll", "records": seen[:20],
                                                "txns": sorted({aborted_values[(p, v)][1] for p, _, v in seen}),
                                                "seen_at": t, "fault_before": faults.before(t)})


def _latest(seen: Iterable[tuple[int | None, str]]) -> int | None:
    times = [t for t, _ in seen if t is not None]
    return max(times) if times else None

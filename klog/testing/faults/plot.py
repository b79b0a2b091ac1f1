"""Throughput and latency over time with the faults shaded: a PNG beside the history (matplotlib, Agg)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from klog.testing.faults.history import Event

__all__ = ["plot_history"]

_COLORS = {"kill": "tab:red", "pause": "tab:orange", "isolate": "tab:purple", "isolate-leader": "tab:purple",
           "split": "tab:brown", "netem": "tab:gray"}


def plot_history(events: Sequence[Event], out: str | Path, title: str = "", lost_acked_at: Sequence[int] = ()) -> Path:
    """``lost_acked_at``: the acknowledgement times (monotonic ns) of writes the checker found lost, drawn as
    black ticks under the latency panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not events:
        raise ValueError("empty history: nothing to plot")
    t0 = min(int(e["time"]) for e in events)
    invoked: dict[tuple[str, object], int] = {}
    ok_per_s: dict[int, int] = defaultdict(int)
    info_per_s: dict[int, int] = defaultdict(int)
    latency: list[tuple[float, float, str]] = []
    open_faults: dict[tuple[str, str], float] = {}
    spans: list[tuple[float, float, str]] = []
    for e in sorted(events, key=lambda e: int(e["time"])):
        t = (int(e["time"]) - t0) / 1e9
        if e.get("f") in ("send", "txn"):   # a transaction counts as one write, its latency to its commit
            key = (e["process"], e.get("value", e.get("txn")))
            if e["type"] == "invoke":
                invoked[key] = int(e["time"])
            elif key in invoked:
                ms = (int(e["time"]) - invoked.pop(key)) / 1e6
                if e["f"] == "txn" and e["type"] == "fail":
                    continue   # aborted, on purpose or after an abortable error: neither acknowledged nor unknown
                latency.append((t, ms, e["type"]))
                (ok_per_s if e["type"] == "ok" else info_per_s)[int(t)] += 1
        elif e.get("f") == "fault":
            key = (str(e.get("fault")), str(e.get("nodes")))
            if e.get("phase") == "start":
                open_faults[key] = t
            elif key in open_faults:
                spans.append((open_faults.pop(key), t, str(e.get("fault"))))
    end = (max(int(e["time"]) for e in events) - t0) / 1e9
    spans += [(start, end, key[0]) for key, start in open_faults.items()]

    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(12, 6))
    seconds = range(int(end) + 1)
    ax1.plot(list(seconds), [ok_per_s.get(s, 0) for s in seconds], label="acknowledged/s", color="tab:green")
    ax1.plot(list(seconds), [info_per_s.get(s, 0) for s in seconds], label="indeterminate/s", color="tab:red")
    ax1.set_ylabel("sends per second")
    ax1.legend(loc="upper right")
    ok = [(t, ms) for t, ms, kind in latency if kind == "ok"]
    if ok:
        ax2.scatter([t for t, _ in ok], [ms for _, ms in ok], s=2, color="tab:blue", label="acknowledged")
    bad = [(t, ms) for t, ms, kind in latency if kind != "ok"]
    if bad:
        ax2.scatter([t for t, _ in bad], [ms for _, ms in bad], s=4, color="tab:red", label="indeterminate")
    if lost_acked_at:
        ax2.scatter([(t - t0) / 1e9 for t in lost_acked_at], [1.0] * len(lost_acked_at), marker="|", s=60,
                    color="black", label=f"lost ({len(lost_acked_at)})")
    ax2.set_yscale("log")
    ax2.set_ylabel("send latency (ms)")
    ax2.set_xlabel("seconds since start")
    ax2.legend(loc="upper right")
    seen: set[str] = set()
    for start, stop, kind in spans:
        for ax in (ax1, ax2):
            ax.axvspan(start, stop, alpha=0.2, color=_COLORS.get(kind, "tab:gray"),
                       label=kind if ax is ax1 and kind not in seen else None)
        seen.add(kind)
    if spans:
        ax1.legend(loc="upper right", fontsize="small")
    fig.suptitle(title or "fault run", fontsize="small", wrap=True)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out

"""Turn a results JSON into docs/performance.md and PNG charts (matplotlib) in docs/img/.

Every figure is the median over the repeated runs with its min-max spread. A ratio is klog/Kafka per pair
(the two measurements of one workload in one run, taken seconds apart), then the median over the runs; a
summary ratio is the geometric mean of those over the workloads. A pair measured while other processes kept
more threads runnable than the machine has cores is marked unreliable. The "What limits klog" section is
computed from the same figures (:func:`limits_analysis`), so it never outlives the data it describes.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .brokers import SEGMENT_BYTES, shared_properties
from .workloads import (BATCH_SIZE, CONNECTION_RECORDS_PER_REQUEST, LATENCY_LINGER_MS, LATENCY_RATE, LINGER_MS)

BROKERS = ("kafka", "klog")
LABEL = {"kafka": "Apache Kafka", "klog": "klog"}
COLOR = {"kafka": "#7f7f7f", "klog": "#1f77b4"}
#: "What limits klog" reads a broker as CPU-bound when it kept at least this many cores busy ...
BUSY_CORES = 0.8
#: ... and as short of CPU when its threads waited at least this long for a CPU per CPU second they ran.
WAITED_PER_CPU_S = 0.5

#: The single-node targets of issues 36 and 38 (klog/Kafka): (metric, comparison, bound). Consume must also reach
#: 1x on its slowest workload, and end-to-end p99 holds for its worst workload.
TARGETS = {
    "produce MB/s": (">=", 2.0),
    "consume MB/s": (">=", 1.5),
    "consume MB/s, slowest workload": (">=", 1.0),
    "end-to-end p99": ("<=", 0.5),
    "CPU s/GB": ("<=", 0.1),
    "peak RSS": ("<=", 0.03),
}


class Stat:
    """Median and spread of one metric over the runs that produced it."""

    def __init__(self, values: list[Any]) -> None:
        self.values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]

    def __bool__(self) -> bool:
        return bool(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)

    def fmt(self, digits: int = 3, scale: float = 1.0) -> str:
        if not self:
            return "n/a"
        m, lo, hi = self.median * scale, self.lo * scale, self.hi * scale
        if len(self.values) == 1:
            return _num(m, digits)
        return f"{_num(m, digits)} ({_num(lo, digits)}–{_num(hi, digits)})"


def _num(v: float, digits: int = 3) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


class Results:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        #: (broker, workload) -> run -> result, for pairing the two brokers' measurements of a run
        self.per_run: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
        self.errors: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.info: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in data["sessions"]:
            self.info[s["broker"]].append(s["info"])
            for wid, r in s["results"].items():
                if "error" in r:
                    self.errors[(s["broker"], wid)].append(r["error"])
                else:
                    self.by[(s["broker"], wid)].append(r)
                    self.per_run[(s["broker"], wid)][s["run"]] = r
        self.workloads = data["workloads"]
        self.cpus = data["machine"].get("cpus") or 1
        self.paired = data.get("mode") == "paired"

    def stat(self, broker: str, wid: str, metric: str) -> Stat:
        return Stat([r.get(metric) for r in self.by[(broker, wid)]])

    def pair_ratios(self, wid: str, metric: str) -> list[tuple[int, float]]:
        """(run, klog/Kafka) for every run that measured ``metric`` of ``wid`` on both brokers."""
        out = []
        kafka, klog = self.per_run[("kafka", wid)], self.per_run[("klog", wid)]
        for run in sorted(set(kafka) & set(klog)):
            k, g = kafka[run].get(metric), klog[run].get(metric)
            if k is None or g is None or math.isnan(k) or math.isnan(g) or k == 0:
                continue
            out.append((run, g / k))
        return out

    def ratio(self, wid: str, metric: str) -> float | None:
        """Median over the runs of the per-pair klog/Kafka ratios."""
        ratios = [r for _, r in self.pair_ratios(wid, metric)]
        return statistics.median(ratios) if ratios else None

    def measurement_load(self, r: dict[str, Any]) -> float | None:
        """The other load a measurement competed with: runnable threads of processes outside the benchmark
        (older results without it: the 1-minute load average before the workload)."""
        for key in ("other_runnable", "loadavg_1m", "loadavg_before"):
            v = r.get(key)
            if v is not None and not math.isnan(v):
                return float(v)
        return None

    def loaded_runs(self, wid: str) -> list[int]:
        """Runs whose pair for ``wid`` was measured while the other load exceeded the machine's cores."""
        out = []
        for run in sorted(set(self.per_run[("kafka", wid)]) | set(self.per_run[("klog", wid)])):
            loads = [self.measurement_load(self.per_run[(b, wid)][run]) for b in BROKERS
                     if run in self.per_run[(b, wid)]]
            if any(v is not None and v > self.cpus for v in loads):
                out.append(run)
        return out

    def pair_cell(self, wid: str, metric: str) -> str:
        """The ratio for a table: median of the pair ratios, their range, and † when a pair was loaded."""
        ratios = [r for _, r in self.pair_ratios(wid, metric)]
        if not ratios:
            return "n/a"
        text = f"{statistics.median(ratios):.2f}×"
        if len(ratios) > 1:
            text += f" ({min(ratios):.2f}–{max(ratios):.2f})"
        loaded = self.loaded_runs(wid)
        if loaded:
            text += f" †{len(loaded)}/{len(ratios)}" if len(ratios) > 1 else " †"
        return text

    def gap_s(self, wid: str) -> Stat:
        """Seconds between the starts of a pair's two measurements."""
        out = []
        for run in set(self.per_run[("kafka", wid)]) & set(self.per_run[("klog", wid)]):
            a, b = (self.per_run[(br, wid)][run].get("started_unix_s") for br in BROKERS)
            if a is not None and b is not None:
                out.append(abs(a - b))
        return Stat(out)

    def busy(self, broker: str, wid: str) -> Stat:
        """Broker CPU seconds per wall second during the workload: 1.0 = one core fully used."""
        return Stat([r["cpu_s"] / r["wall_s"] for r in self.by[(broker, wid)] if r.get("wall_s")])

    def waited_per_cpu_s(self, broker: str, wid: str) -> Stat:
        """Seconds the broker's threads waited runnable for a CPU per CPU second they used (schedstat)."""
        return Stat([r["runqueue_wait_s"] / r["cpu_s"] for r in self.by[(broker, wid)]
                     if r.get("cpu_s") and r.get("runqueue_wait_s") is not None])

    def load_stat(self, key: str, broker: str | None = None, wid: str | None = None) -> Stat:
        """``key`` (loadavg_1m, other_runnable, ...) over the measurements of a broker and/or workload."""
        return Stat([r.get(key, r.get("loadavg_before") if key == "loadavg_1m" else None)
                     for (b, w), rs in self.by.items()
                     if (broker is None or b == broker) and (wid is None or w == wid) for r in rs])

    def session_stat(self, broker: str, key: str) -> Stat:
        return Stat([i.get(key) for i in self.info[broker] if "error" not in i])

    def peak_rss_per_run(self, broker: str) -> dict[int, float]:
        """Per session: the highest peak RSS over all its workloads."""
        per_run: dict[int, float] = {}
        for s in self.data["sessions"]:
            if s["broker"] == broker and s["results"]:
                peaks = [r["peak_rss"] for r in s["results"].values() if "peak_rss" in r]
                if peaks:
                    per_run[s["run"]] = max(peaks)
        return per_run

    def peak_rss(self, broker: str) -> Stat:
        return Stat(list(self.peak_rss_per_run(broker).values()))

    def session_ratio(self, per_run: dict[str, dict[int, float]]) -> Stat:
        """Per run klog/Kafka of a per-session figure (e.g. the highest peak RSS)."""
        k, g = per_run["kafka"], per_run["klog"]
        return Stat([g[r] / k[r] for r in sorted(set(k) & set(g)) if k[r]])

    def session_values(self, broker: str, key: str) -> dict[int, float]:
        return {s["run"]: s["info"][key] for s in self.data["sessions"]
                if s["broker"] == broker and s["info"].get(key) is not None and "error" not in s["info"]}

    def ids(self, kind: str) -> list[str]:
        return [w["id"] for w in self.workloads if w["kind"] == kind]


def _geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def _ratio_cell(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}×"


def _err_note(res: Results, wid: str) -> str:
    notes = []
    for b in BROKERS:
        errs = res.errors.get((b, wid))
        if errs:
            notes.append(f"{LABEL[b]} failed {len(errs)}×: {errs[0].splitlines()[0][:160]}")
        incomplete = [r for r in res.by[(b, wid)] if r.get("complete") is False]
        if incomplete:
            notes.append(f"{LABEL[b]} hit the time limit in {len(incomplete)} run(s) (rate from its windows)")
    return "; ".join(notes)


def _short(wid: str) -> str:
    return wid.split("/", 1)[1]


# ---- charts ----------------------------------------------------------------------------------------------

def _bars(ax: Any, res: Results, ids: list[str], metric: str, title: str, unit: str, scale: float = 1.0,
          full_labels: bool = False) -> None:
    import numpy as np

    y = np.arange(len(ids))
    h = 0.38
    for i, b in enumerate(BROKERS):
        stats = [res.stat(b, wid, metric) for wid in ids]
        med = [s.median * scale if s else 0 for s in stats]
        lo = [(s.median - s.lo) * scale if s else 0 for s in stats]
        hi = [(s.hi - s.median) * scale if s else 0 for s in stats]
        ax.barh(y + (i - 0.5) * h, med, h, xerr=[lo, hi], label=LABEL[b], color=COLOR[b], capsize=2)
        for yy, wid, s in zip(y, ids, stats):
            if not s:
                failed = bool(res.errors.get((b, wid)))
                ax.text(0, yy + (i - 0.5) * h, " failed" if failed else " not run", va="center", fontsize=7,
                        color="red" if failed else "gray")
    ax.set_yticks(y, [w if full_labels else _short(w) for w in ids], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)


def charts(res: Results, img: Path) -> dict[str, str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    img.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(img / name, dpi=110)
        plt.close(fig)
        out[name] = f"img/{name}"

    produce = res.ids("produce")
    if produce:
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(produce) + 1.2))
        _bars(ax, res, produce, "mb_per_s", "Produce throughput (median, min–max over runs)", "MB/s (2^20 B)")
        save(fig, "perf-produce.png")
    consume = res.ids("consume")
    if consume:
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(consume) + 1.2))
        _bars(ax, res, consume, "mb_per_s", "Consume throughput from page cache", "MB/s (2^20 B)")
        save(fig, "perf-consume.png")
    lat = res.ids("e2e") + res.ids("produce-latency")
    if lat:
        fig, axes = plt.subplots(1, 3, figsize=(11, 0.5 * len(lat) + 1.6), sharey=True)
        for ax, (metric, name) in zip(axes, (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))):
            _bars(ax, res, lat, metric, f"{name} latency at {LATENCY_RATE:,} records/s", "ms", full_labels=True)
            if metric != "p50_ms":
                ax.get_legend().remove()
        save(fig, "perf-latency.png")
    thr = produce + consume
    if thr:
        fig, axes = plt.subplots(1, 2, figsize=(12, 0.42 * len(thr) + 1.4))
        _bars(axes[0], res, thr, "cpu_s_per_gb", "Broker CPU seconds per GB moved", "CPU s / GB",
              full_labels=True)
        _bars(axes[1], res, thr, "peak_rss", "Broker peak RSS during the workload", "MiB", scale=1 / 2**20)
        axes[1].set_yticks([])
        save(fig, "perf-resources.png")
    heads = headline_ratios(res)
    if heads:
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(heads) + 1.2))
        names = list(heads)
        vals = [heads[n][0] or 0 for n in names]
        colors = []
        for n, v in zip(names, vals):
            target = TARGETS.get(n)
            ok = target is None or (v >= target[1] if target[0] == ">=" else v <= target[1])
            colors.append("#2ca02c" if ok and target else ("#d62728" if target else COLOR["klog"]))
        yy = np.arange(len(names))
        ax.barh(yy, vals, color=colors)
        for y0, n in zip(yy, names):
            if n in TARGETS:
                ax.plot([TARGETS[n][1]] * 2, [y0 - 0.4, y0 + 0.4], color="black", lw=2)
        ax.axvline(1.0, color="gray", ls="--", lw=1)
        ax.set_yticks(yy, names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("klog / Apache Kafka (log scale; black ticks: milestone targets)")
        ax.set_title("klog relative to Apache Kafka, same machine, same run", fontsize=10)
        save(fig, "perf-ratios.png")
    return out


# ---- text ------------------------------------------------------------------------------------------------

def headline_ratios(res: Results) -> dict[str, tuple[float | None, str]]:
    """Metric -> (klog/Kafka, how it was summarised)."""
    heads: dict[str, tuple[float | None, str]] = {}

    def summarise(name: str, ids: list[str], metric: str, worst: bool = False, lowest: bool = False) -> None:
        ratios = [res.ratio(w, metric) for w in ids]
        known = [r for r in ratios if r is not None]
        pairs = [(r, w) for r, w in zip(ratios, ids) if r is not None]
        spread = ""
        if len(pairs) > 1:
            (lo, lo_w), (hi, hi_w) = min(pairs), max(pairs)
            spread = f"; range {lo:.2f}× ({_short(lo_w)}) to {hi:.2f}× ({_short(hi_w)})"
        if not ids:
            return
        if not known:
            heads[name] = (None, "no workload measured on both brokers")
            return
        if worst or lowest:  # a target that must hold for every workload, not on average
            edge, edge_w = max(pairs) if worst else min(pairs)
            mark = " †" if res.loaded_runs(edge_w) else ""
            heads[name] = (edge, f"{'worst' if worst else 'slowest'} of {len(known)} workloads "
                                 f"({_short(edge_w)}{mark}){spread}")
            return
        loaded = sum(1 for r, w in pairs if res.loaded_runs(w))
        caveat = f"; {loaded} of them with a pair measured under load (†)" if loaded else ""
        if len(known) < len(ratios) and any(res.errors.get(("klog", w)) for w in ids):
            heads[name] = (_geomean(known), f"geometric mean of {len(known)} of {len(ids)} workloads "
                                            f"(klog failed the others){spread}{caveat}")
        else:
            heads[name] = (_geomean(known), f"geometric mean over {len(known)} workloads{spread}{caveat}")

    summarise("produce MB/s", res.ids("produce"), "mb_per_s")
    summarise("consume MB/s", res.ids("consume"), "mb_per_s")
    summarise("consume MB/s, slowest workload", res.ids("consume"), "mb_per_s", lowest=True)
    for pct, key in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
        summarise(f"end-to-end {pct}", res.ids("e2e"), key, worst=True)
    summarise("CPU s/GB", res.ids("produce") + res.ids("consume"), "cpu_s_per_gb")
    summarise("produce CPU s/GB", res.ids("produce"), "cpu_s_per_gb")
    floors = kernel_floor_ratios(res)
    if floors:
        heads["produce CPU s/GB at the kernel's floor"] = (
            _geomean(list(floors.values())),
            f"the ratio a broker spending only the kernel's CPU on a produce's bytes (this run: "
            f"{res.data['machine']['produce_floor_cpu_s_per_gb']:.2f} s/GB, 'This machine's limits') would show "
            f"against Kafka's, geometric mean over the same {len(floors)} workloads: the lowest any broker can "
            "reach here")
    kernel_share = klog_system_ratios(res)
    if kernel_share:
        heads["produce CPU s/GB, klog's system time alone"] = (
            _geomean(list(kernel_share.values())),
            "the ratio klog would show if its own code cost nothing and the kernel's work it causes (system calls, "
            f"wake-ups, the page cache; its system CPU time) stayed as it is, geometric mean over {len(kernel_share)} "
            "produce workloads: what klog's CPU per GB cannot go below without fewer system calls and wake-ups")
    peak = res.session_ratio({b: res.peak_rss_per_run(b) for b in BROKERS})
    if peak:
        heads["peak RSS"] = (peak.median, "highest peak RSS of a run, per-run ratio, median over runs")
    idle = res.session_ratio({b: res.session_values(b, "idle_rss") for b in BROKERS})
    if idle:
        heads["idle RSS"] = (idle.median, "after start-up and warm-up, per-run ratio, median over runs")
    return heads


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _throughput_table(res: Results, ids: list[str]) -> list[str]:
    rows = []
    for wid in ids:
        k, g = res.stat("kafka", wid, "mb_per_s"), res.stat("klog", wid, "mb_per_s")
        kc, gc = res.stat("kafka", wid, "cpu_s_per_gb"), res.stat("klog", wid, "cpu_s_per_gb")
        ku, gu = res.busy("kafka", wid), res.busy("klog", wid)
        rows.append([_short(wid), k.fmt(), g.fmt(), res.pair_cell(wid, "mb_per_s"), kc.fmt(),
                     gc.fmt(), res.pair_cell(wid, "cpu_s_per_gb"), ku.fmt(2), gu.fmt(2),
                     _err_note(res, wid)])
    return _table(["workload", "Kafka MB/s", "klog MB/s", "klog/Kafka", "Kafka CPU s/GB", "klog CPU s/GB",
                   "klog/Kafka", "Kafka cores busy", "klog cores busy", "notes"], rows)


def _latency_table(res: Results, ids: list[str]) -> list[str]:
    rows = []
    for wid in ids:
        for pct, key in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
            rows.append([_short(wid), pct, res.stat("kafka", wid, key).fmt(), res.stat("klog", wid, key).fmt(),
                         res.pair_cell(wid, key), _err_note(res, wid) if pct == "p50" else ""])
        kw, gw = res.waited_per_cpu_s("kafka", wid), res.waited_per_cpu_s("klog", wid)
        if kw or gw:
            # how long the broker's threads were runnable but had no CPU, per CPU second they got: the
            # machine's other load, not the broker's own work
            ratio = gw.median / kw.median if kw and gw and kw.median else None
            rows.append([_short(wid), "s waiting for a CPU per CPU s", kw.fmt(), gw.fmt(), _ratio_cell(ratio),
                         "broker threads' run-queue wait / CPU time"])
    return _table(["workload", "percentile", "Kafka ms", "klog ms", "klog/Kafka", "notes"], rows)


def _mib(stat: Stat) -> str:
    return stat.fmt(scale=1 / 2**20)


def _limits(res: Results) -> list[str]:
    m = res.data["machine"]
    best_produce = max((res.stat("klog", w, "mb_per_s").median for w in res.ids("produce")
                        if res.stat("klog", w, "mb_per_s")), default=None)
    best_consume = max((res.stat("klog", w, "mb_per_s").median for w in res.ids("consume")
                        if res.stat("klog", w, "mb_per_s")), default=None)

    def frac(mbps: float | None, gbps: float) -> str:
        return "n/a" if mbps is None else f"{mbps * 2**20 / 1e9 / gbps:.1%}"

    rows = [
        ["page-cache write (write() 1 MiB, no fsync)", f"{m['page_cache_write_gbps']:.2f} GB/s",
         f"best klog produce: {frac(best_produce, m['page_cache_write_gbps'])}"],
        ["loopback TCP (send/recv 1 MiB)", f"{m['loopback_tcp_gbps']:.2f} GB/s",
         f"best klog consume: {frac(best_consume, m['loopback_tcp_gbps'])}"],
        ["sendfile from page cache over loopback", f"{m['sendfile_loopback_gbps']:.2f} GB/s",
         f"best klog consume: {frac(best_consume, m['sendfile_loopback_gbps'])}"],
        ["CRC-32C (klog._native, one core)", f"{m['crc32c_gbps']:.2f} GB/s",
         f"best klog produce: {frac(best_produce, m['crc32c_gbps'])}"],
    ]
    floor = m.get("produce_floor_cpu_s_per_gb")
    if floor is not None:   # results from before the floors were measured have neither row
        lowest = min((res.stat("klog", w, "cpu_s_per_gb").median for w in res.ids("produce")
                      if res.stat("klog", w, "cpu_s_per_gb")), default=None)
        rows.append(["a produce's kernel work: recv() from loopback into 1 MiB, write() into the page cache "
                     "(that process's CPU)", f"{floor:.3f} CPU s/GB",
                     "n/a" if lowest is None else f"lowest klog produce CPU/GB: {lowest / floor:.2f}× it"])
        rows.append(["sendfile() from page cache to loopback, 1 MiB (the sender's CPU; not a floor: part of a "
                     "send runs on the reader's CPU when it lags)", f"{m['consume_floor_cpu_s_per_gb']:.3f} CPU s/GB",
                     ""])
    return _table(["limit", "measured", "klog's best as a fraction"], rows)


def kernel_floor_ratios(res: Results) -> dict[str, float]:
    """Produce workload -> this run's kernel floor (machine.produce_floor_cpu_s_per_gb: a produce's bytes read from
    loopback and written into the page cache, nothing else) over Kafka's CPU per GB on it: the lowest klog/Kafka
    CPU-per-GB ratio any broker could show on that workload here, since every broker pays the kernel's copies.
    Consume has no such floor over loopback (who pays a send depends on the reader's pace). Empty for results
    measured before the floor was."""
    floor = res.data["machine"].get("produce_floor_cpu_s_per_gb")
    if floor is None:
        return {}
    out = {}
    for w in res.ids("produce"):
        kafka = res.stat("kafka", w, "cpu_s_per_gb")
        if kafka and kafka.median > 0:
            out[w] = floor / kafka.median
    return out


def klog_system_ratios(res: Results) -> dict[str, float]:
    """Produce workload -> klog's system CPU per GB (the kernel's work for it) over Kafka's whole CPU per GB: the
    ratio klog would show if its own code cost nothing. Empty for results measured before the system time was."""
    out = {}
    for w in res.ids("produce"):
        system, kafka = res.stat("klog", w, "system_s_per_gb"), res.stat("kafka", w, "cpu_s_per_gb")
        if system and kafka and kafka.median > 0:
            out[w] = system.median / kafka.median
    return out


def _peer_busy(res: Results, broker: str) -> Stat:
    """Cores ``broker`` kept busy while idle, during the other broker's measurements."""
    other = next(b for b in BROKERS if b != broker)
    return Stat([r["peer_cpu_s"] / r["wall_s"] for (b, _), rs in res.by.items() if b == other
                 for r in rs if r.get("peer_cpu_s") is not None and r.get("wall_s")])


def _paired_intro(res: Results, versions: dict[str, str]) -> list[str]:
    d = res.data
    gaps = Stat([g for w in res.workloads for g in res.gap_s(w["id"]).values])
    return [
        f"Measured {d['generated']} on one machine. Both brokers run at once (each on its own port and data "
        f"directory, the same settings) and every workload is measured on one, then at once on the other, so "
        f"each klog/Kafka ratio compares two measurements taken seconds apart (the starts of a pair's two "
        f"measurements were {gaps.fmt(2)} s apart: median, min–max) under the same machine load; which broker "
        f"goes first alternates per workload and per run (which also evens out what one measurement leaves "
        f"to the next, such as the kernel writing back the previous one's data). {d['runs']} run(s). "
        f"Versions: {versions['kafka']}, {versions['klog']}.", "",
        "Every figure is the median over the runs with the min–max spread in parentheses. A ratio is klog/Kafka "
        "per pair, then the median over the runs (range of the pair ratios in parentheses); a summary ratio is "
        "the geometric mean of those over the workloads. **†** marks a ratio with a pair measured while other "
        f"processes kept more threads runnable than the machine has cores ({res.cpus}): unreliable, the brokers "
        "were competing with other load (†n/m: n of m pairs). MB = 2^20 bytes (as Kafka's tools print it), "
        "GB = 10^9 bytes."]


def _load_summary(res: Results) -> list[str]:
    la, other = res.load_stat("loadavg_1m"), res.load_stat("other_runnable")
    if not la:
        return []
    flagged = [w["id"] for w in res.workloads if res.loaded_runs(w["id"])]
    text = (f"Machine load over the measurements ({res.cpus} cores): 1-minute load average {la.lo:.1f}–{la.hi:.1f} "
            f"(median {la.median:.1f}; it includes the benchmark's own broker and load-generator threads)")
    if other:
        text += (f"; runnable threads of other processes {other.lo:.1f}–{other.hi:.1f} (median "
                 f"{other.median:.1f})")
    text += ". " + (f"{len(flagged)} of {len(res.workloads)} workloads had a pair measured under other load above "
                    f"the core count (†): " + ", ".join(f"`{w}`" for w in flagged) + "." if flagged else
                    "No pair was measured under other load above the core count.")
    idle = {b: _peer_busy(res, b) for b in BROKERS}
    if all(idle.values()):
        text += (" The idle broker of a pair kept " + " and ".join(
            f"{LABEL[b]} {idle[b].median:.3f} cores (max {idle[b].hi:.3f})" for b in BROKERS)
            + " busy in the background (median over the measurements of the other).")
    return [text]


def _load_section(res: Results) -> list[str]:
    L = ["## Machine load during each workload", "",
         "For every measurement: the 1-minute load average when it began (it also counts this benchmark's "
         "own threads: a throughput workload keeps the cores busy by design), the mean number of runnable "
         "threads of *other* processes while it ran (sampled from /proc every "
         "0.5 s; kernel threads, some of which do the benchmark's own writeback and loopback work, are left "
         "out), and the broker threads' run-queue wait per CPU second they used (`/proc/<pid>/task/*/schedstat`: "
         "how long they were runnable but had no CPU). Median over the runs, min–max in parentheses.", ""]
    rows = []
    for w in res.workloads:
        wid = w["id"]
        loaded = res.loaded_runs(wid)
        rows.append([wid, res.load_stat("loadavg_1m", "kafka", wid).fmt(2),
                     res.load_stat("loadavg_1m", "klog", wid).fmt(2),
                     res.load_stat("other_runnable", "kafka", wid).fmt(2),
                     res.load_stat("other_runnable", "klog", wid).fmt(2),
                     res.waited_per_cpu_s("kafka", wid).fmt(2), res.waited_per_cpu_s("klog", wid).fmt(2),
                     res.gap_s(wid).fmt(2), f"† runs {', '.join(map(str, loaded))}" if loaded else ""])
    L += _table(["workload", "load 1m (Kafka)", "load 1m (klog)", "others runnable (Kafka)",
                 "others runnable (klog)", "Kafka wait/CPU s", "klog wait/CPU s", "pair starts s apart",
                 "unreliable"], rows)
    return L


def _group_ratio(res: Results, ids: list[str], metric: str) -> tuple[float | None, list[tuple[float, str]]]:
    pairs = [(r, w) for w in ids if (r := res.ratio(w, metric)) is not None]
    return _geomean([r for r, _ in pairs]), pairs


#: a load generator's own CPU over its timed window, by mode (benches/sidebyside/pyload.py)
WINDOW_CPU_KEYS = ("producer_process_cpu_s", "consumer_process_cpu_s")


def _per_gb(res: Results, broker: str, wid: str, key: str) -> float | None:
    """``key`` (CPU seconds) per GB of payload of ``wid`` on ``broker``, median over the runs."""
    cpu, gb = res.stat(broker, wid, key), res.stat(broker, wid, "payload_gb")
    if not cpu or not gb or gb.median <= 0:
        return None
    return cpu.median / gb.median


def _window_cpu_per_gb(res: Results, broker: str, wid: str) -> float | None:
    """The load generator's CPU per GB over its timed window (the first of WINDOW_CPU_KEYS it reports)."""
    for key in WINDOW_CPU_KEYS:
        per_gb = _per_gb(res, broker, wid, key)
        if per_gb is not None:
            return per_gb
    return None


def _cores_ceiling(res: Results, ids: list[str]) -> list[str]:
    """The load generators' CPU per GB beside the brokers' for a throughput group, and the klog/Kafka ratio the
    machine's cores allow: with both the broker and its load generators on the same cores and the cores the
    limit, rates go as 1 / (client + broker CPU per GB), so klog can be at most (C + B) on Kafka over (C + B) on
    klog; and what the broker's own CPU per GB would allow with the load generators on cores of their own."""
    ceilings: list[float] = []
    client: dict[str, list[float]] = {b: [] for b in BROKERS}
    kafka_b: list[float] = []
    klog_b: list[float] = []
    timed: list[str] = []
    for w in ids:
        kafka_cpu, klog_cpu = _per_gb(res, "kafka", w, "cpu_s"), _per_gb(res, "klog", w, "cpu_s")
        if kafka_cpu is None or not klog_cpu:
            continue
        kafka_b.append(kafka_cpu)
        klog_b.append(klog_cpu)
        whole = {b: _per_gb(res, b, w, "loadgen_cpu_s") for b in BROKERS}
        if whole["kafka"] is not None and whole["klog"] is not None:
            client["kafka"].append(whole["kafka"])
            client["klog"].append(whole["klog"])
        # the ceiling needs the load generator's CPU over the timed window (confluent-kafka's processes report
        # it; a JVM's whole life includes its start-up and JIT before the tool's clock starts)
        kafka_c, klog_c = _window_cpu_per_gb(res, "kafka", w), _window_cpu_per_gb(res, "klog", w)
        if kafka_c is not None and klog_c is not None:
            ceilings.append((kafka_c + kafka_cpu) / (klog_c + klog_cpu))
            timed.append(w)
    if not client["klog"]:
        return []   # results from before the load generators' CPU was recorded
    per_core = _geomean([k / g for k, g in zip(kafka_b, klog_b)])
    line = (f"  - Who used the cores: the load generators spent {Stat(client['klog']).fmt(2)} CPU s/GB against "
            f"klog and {Stat(client['kafka']).fmt(2)} against Kafka (per workload, median, min–max; their whole "
            f"processes, start-up and a JVM's JIT included), the brokers klog {Stat(klog_b).fmt(2)} and Kafka "
            f"{Stat(kafka_b).fmt(2)}.")
    if ceilings:
        sub = _geomean([r for r in (res.ratio(w, "mb_per_s") for w in timed) if r is not None])
        line += (f" With the 2 cores the limit, rates go as 1 / (load generator + broker CPU per GB): over the "
                 f"{len(timed)} workloads whose load generator gives its CPU over the timed window (confluent-kafka's) klog could "
                 f"be at most {_geomean(ceilings):.2f}× Kafka's rate here (geometric mean; "
                 f"{min(ceilings):.2f}–{max(ceilings):.2f}× per workload)"
                 + (f", measured {sub:.2f}× on them" if sub is not None else "") + ".")
    line += (f" With the load generators on cores of their own, the brokers' CPU per GB would allow "
             f"{per_core:.2f}× Kafka's rate per broker core (Kafka's over klog's, geometric mean over the "
             f"{len(klog_b)} workloads).")
    return [line]


def limits_analysis(res: Results) -> list[str]:
    """"What limits klog", read off this run's figures: for every group of workloads, where klog stands
    against Kafka and, where it is behind, whether its broker was CPU-bound (cores busy), short of CPU on the
    machine (run-queue wait per CPU second) or neither (the time went elsewhere: clients, round trips)."""
    L = ["## What limits klog (from this run's figures)", "",
         f"Computed from the tables above, not written by hand. A workload where klog is behind is read as "
         f"*CPU-bound* when klog's broker kept ≥ {BUSY_CORES} cores busy, as *short of CPU* when its "
         f"threads waited ≥ {WAITED_PER_CPU_S} s for a CPU per CPU second they ran (the cores were contended: "
         "the load generators run on the same cores, plus any other load; compare Kafka's wait in the same "
         "pair), and otherwise as *not limited by broker CPU* (the broker had CPU to spare and did not wait "
         "for it: the time went to the clients, the round trips or the kernel). These are readings of "
         "counters, not explanations; where the time goes inside the broker needs a profile: "
         "`PYTHONPATH=benches python -m sidebyside.profile --only <workload>` (py-spy, Python and native "
         "frames).", ""]
    groups = [("Produce throughput", res.ids("produce"), "mb_per_s", False),
              ("Consume throughput", res.ids("consume"), "mb_per_s", False),
              ("End-to-end p99 latency", res.ids("e2e"), "p99_ms", True),
              ("Produce p99 latency (ProducerPerformance)", res.ids("produce-latency"), "p99_ms", True),
              ("Many connections (requests/s)", res.ids("connections"), "requests_per_s", False)]
    for title, ids, metric, lower_better in groups:
        if not ids:
            continue
        mean, pairs = _group_ratio(res, ids, metric)
        if mean is None:
            L += [f"- **{title}**: not measured on both brokers.", ""]
            continue
        behind = [(r, w) for r, w in pairs if (r > 1.0 if lower_better else r < 1.0)]
        ahead = len(pairs) - len(behind)
        cpu, _ = _group_ratio(res, ids, "cpu_s_per_gb")
        kb = Stat([v for w in ids for v in res.busy("kafka", w).values])
        gb = Stat([v for w in ids for v in res.busy("klog", w).values])
        head = (f"- **{title}**: klog/Kafka {mean:.2f}× (geometric mean over {len(pairs)} workloads; "
                f"{'lower' if lower_better else 'higher'} is better for klog); klog ahead or level in {ahead}, "
                f"behind in {len(behind)}. Broker cores busy: klog {gb.fmt(2)}, Kafka {kb.fmt(2)}"
                + (f"; CPU per GB klog/Kafka {cpu:.2f}×" if cpu is not None else "") + ".")
        L.append(head)
        if metric == "mb_per_s":
            L += _cores_ceiling(res, ids)
        for r, w in sorted(behind, key=lambda x: -x[0] if lower_better else x[0]):
            busy = res.busy("klog", w)
            waited = res.waited_per_cpu_s("klog", w)
            kwait = res.waited_per_cpu_s("kafka", w)
            if busy and busy.median >= BUSY_CORES:
                why = f"CPU-bound: klog's broker kept {busy.median:.2f} cores busy"
            elif waited and waited.median >= WAITED_PER_CPU_S:
                why = (f"short of CPU: klog's threads waited {waited.median:.2f} s for a CPU per CPU second "
                       f"they ran (Kafka's {kwait.fmt(2)}), with {busy.fmt(2)} cores busy")
            else:
                why = (f"not limited by broker CPU: klog's broker {busy.fmt(2)} cores busy, waited "
                       f"{waited.fmt(2)} s per CPU s")
            mark = " † (a pair measured under other load)" if res.loaded_runs(w) else ""
            L.append(f"  - `{_short(w)}` {r:.2f}×{mark}: {why}.")
        L.append("")
    m = res.data["machine"]
    best = {}
    for kind in ("produce", "consume"):
        vals = [res.stat("klog", w, "mb_per_s").median for w in res.ids(kind) if res.stat("klog", w, "mb_per_s")]
        best[kind] = max(vals) if vals else None
    if best["produce"] is not None and m.get("page_cache_write_gbps"):
        L.append(f"- **Against the machine**: klog's best produce is {best['produce'] * 2**20 / 1e9 / m['page_cache_write_gbps']:.0%} "
                 "of this machine's page-cache write bandwidth"
                 + (f", its best consume {best['consume'] * 2**20 / 1e9 / m['sendfile_loopback_gbps']:.0%} of sendfile over "
                    "loopback" if best["consume"] is not None and m.get("sendfile_loopback_gbps") else "")
                 + " (measured in this run; the load generators share the same cores).")
    floors = kernel_floor_ratios(res)
    if floors:
        floor = m["produce_floor_cpu_s_per_gb"]
        multiples = {b: Stat([res.stat(b, w, "cpu_s_per_gb").median / floor for w in res.ids("produce")
                              if res.stat(b, w, "cpu_s_per_gb")]) for b in BROKERS}
        L.append(f"- **Produce CPU per GB against the kernel's floor** (reading a produce's bytes from loopback and "
                 f"writing them into the page cache, nothing else: {floor:.2f} s/GB in this run, 'This machine's "
                 f"limits'): klog spent {multiples['klog'].fmt(2)}× it per workload, Kafka {multiples['kafka'].fmt(2)}× "
                 f"(median, min–max). A broker that spent nothing of its own would stand at "
                 f"{_geomean(list(floors.values())):.2f}× Kafka's CPU per GB over these workloads (geometric mean): "
                 "a target below that is out of reach for any broker on this machine.")
    kernel_share = klog_system_ratios(res)
    if kernel_share:
        shares = {b: Stat([res.stat(b, w, "system_s_per_gb").median / res.stat(b, w, "cpu_s_per_gb").median
                           for w in res.ids("produce")
                           if res.stat(b, w, "system_s_per_gb") and res.stat(b, w, "cpu_s_per_gb")]) for b in BROKERS}
        L.append(f"- **The kernel's share of a produce's CPU** (system time over the broker's CPU, per workload, "
                 f"median, min–max): klog {shares['klog'].fmt(3, 100)}%, Kafka {shares['kafka'].fmt(3, 100)}%. klog's "
                 f"system time alone is {_geomean(list(kernel_share.values())):.2f}× Kafka's whole CPU per GB "
                 "(geometric mean over these workloads): below that, klog's CPU per GB moves only with fewer system "
                 "calls and wake-ups per byte, not with faster code of its own.")
    peak = res.session_ratio({b: res.peak_rss_per_run(b) for b in BROKERS})
    if peak:
        L.append(f"- **Memory**: klog's highest peak RSS is {peak.median:.2f}× Kafka's (per run, median) with "
                 f"Kafka's heap fixed at 1 GiB (`-Xms1G`).")
    return L


def markdown(res: Results, images: dict[str, str]) -> str:
    d = res.data
    m = d["machine"]
    versions = {b: (res.info[b][0].get("version", "?") if res.info[b] else "?") for b in BROKERS}
    L: list[str] = []
    L += ["# Performance: klog vs Apache Kafka", "",
          "<!-- Generated by benches/sidebyside (make sidebyside) from docs/performance.json; edit "
          "benches/sidebyside/report.py, not this file. -->", "",
          *(_paired_intro(res, versions) if res.paired else [
              f"Measured {d['generated']} on one machine, both brokers in the same run, one after the other, "
              f"{d['runs']} run(s) each (their order alternates between runs). "
              f"Versions: {versions['kafka']}, {versions['klog']}. "
              "Every figure is the median over the runs with the min–max spread in parentheses; ratios are "
              "klog/Kafka per run, median over the runs; † marks a ratio with a run measured while the "
              "1-minute load average exceeded the core count. MB = 2^20 bytes (as Kafka's tools print it), "
              "GB = 10^9 bytes."]), ""]
    if d.get("quick"):
        L += ["**Smoke run (`--quick`): tiny volumes, not a measurement.**", ""]
    if d.get("klog_properties"):
        L += ["klog ran with these settings on top of the shared ones: " + ", ".join(
            f"`{k}={v}`" for k, v in d["klog_properties"].items()) + ".", ""]
    failed = [f"{s['broker']} run {s['run']}: {s['info']['error'].splitlines()[0][:200]}"
              for s in d["sessions"] if "error" in s["info"]]
    if failed:
        L += ["**Failed sessions:** " + "; ".join(failed), ""]

    L += ["## Summary against the milestone targets", ""]
    heads = headline_ratios(res)
    rows = []
    for name, (ratio, how) in heads.items():
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            if ratio is None:
                verdict = "not measured"
            else:
                ok = ratio >= target[1] if target[0] == ">=" else ratio <= target[1]
                verdict = ("met" if ok else "**not met**")
        rows.append([name, _ratio_cell(ratio), f"{target[0]} {target[1]}×" if target else "", verdict, how])
    L += _table(["metric", "klog/Kafka", "target", "", "summarised as"], rows) + [""]
    L += _load_summary(res) + [""]
    if "perf-ratios.png" in images:
        L += [f"![klog/Kafka ratios]({images['perf-ratios.png']})", ""]

    L += ["## Produce throughput", "",
          f"Apache Kafka's `ProducerPerformance` (Java client) and confluent-kafka (librdkafka), both with "
          f"`linger.ms={LINGER_MS}`, `batch.size={BATCH_SIZE}`, no compression, unkeyed records; "
          "each workload writes a new topic.", ""]
    L += _throughput_table(res, res.ids("produce")) + [""]
    if "perf-produce.png" in images:
        L += [f"![produce throughput]({images['perf-produce.png']})", ""]

    L += ["## Consume throughput (from page cache)", "",
          "`ConsumerPerformance` (Java, group subscription; the rate excludes the group join) and "
          "confluent-kafka (assigned partitions, no group, `fetch.queue.backoff.ms=10` so that librdkafka's "
          "1 s pause after its local queue fills does not dominate the run, and the local queue's bound "
          "(`queued.max.messages.kbytes`, `queued.min.messages`) raised past the read, so that a Fetch for only "
          "the partitions already read to their end is not held 500 ms by the broker while the others wait) "
          "read a topic filled by the `acks=1` produce "
          "workload, after its files were read once so they sit in page cache.", ""]
    L += _throughput_table(res, res.ids("consume")) + [""]
    if "perf-consume.png" in images:
        L += [f"![consume throughput]({images['perf-consume.png']})", ""]

    L += ["## Latency at a fixed rate", "",
          f"End-to-end (`e2e`): a confluent-kafka producer sends {LATENCY_RATE:,} records/s "
          f"(`linger.ms={LATENCY_LINGER_MS}`), each stamped with the sender's monotonic clock; a consumer in "
          "another process on the same machine subtracts it on arrival (the first 10% of records are "
          "dropped as warm-up). `produce-latency`: `ProducerPerformance --throughput` at the same rate, "
          "the time from send to acknowledgement after a first quarter of warm-up records (whole "
          "milliseconds, as the tool reports).", ""]
    L += _latency_table(res, res.ids("e2e") + res.ids("produce-latency")) + [""]
    if "perf-latency.png" in images:
        L += [f"![latency]({images['perf-latency.png']})", ""]

    conn_ids = res.ids("connections")
    if conn_ids:
        L += ["## Many connections", "",
              f"Concurrent connections, each a closed loop of Produce v9 requests ({CONNECTION_RECORDS_PER_REQUEST} "
              "records per request, one in flight per connection), for a fixed time.", ""]
        rows = []
        for wid in conn_ids:
            for key, name in (("requests_per_s", "requests/s"), ("mb_per_s", "MB/s"), ("p50_ms", "p50 ms"),
                              ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"), ("cpu_s_per_gb", "CPU s/GB"),
                              ("peak_rss", "peak RSS MiB")):
                sc = 1 / 2**20 if key == "peak_rss" else 1.0
                rows.append([_short(wid), name, res.stat("kafka", wid, key).fmt(scale=sc),
                             res.stat("klog", wid, key).fmt(scale=sc), res.pair_cell(wid, key),
                             _err_note(res, wid) if key == "requests_per_s" else ""])
        L += _table(["workload", "metric", "Kafka", "klog", "klog/Kafka", "notes"], rows) + [""]

    many = [w for w in res.ids("produce") + res.ids("consume") if "/1000p" in w or "/100p" in w]
    if many:
        L += ["## Many partitions", "", "Topic creation time: CreateTopics until every partition has a leader and has "
              "acknowledged a first record (Kafka creates partition logs after CreateTopics answers). "
              "Throughput for the many-partition topic is in the tables above.", ""]
        rows = []
        for wid in many:
            if wid.startswith("produce"):
                rows.append([_short(wid), res.stat("kafka", wid, "create_topic_s").fmt(),
                             res.stat("klog", wid, "create_topic_s").fmt(),
                             res.pair_cell(wid, "create_topic_s")])
        L += _table(["topic", "Kafka create s", "klog create s", "klog/Kafka"], rows) + [""]

    L += ["## Memory and CPU", "",
          "RSS of the broker process from `/proc/<pid>/status`: idle after start-up and warm-up, peak "
          "(VmHWM, reset before each workload) and steady (median of the samples over the second half of a "
          "workload). CPU is utime+stime of the broker process over the workload, divided by the payload bytes "
          "moved.", ""]
    rows = [["idle RSS MiB", _mib(res.session_stat("kafka", "idle_rss")), _mib(res.session_stat("klog", "idle_rss"))],
            ["highest peak RSS MiB (per session)", _mib(res.peak_rss("kafka")), _mib(res.peak_rss("klog"))],
            ["RSS at the end MiB", _mib(res.session_stat("kafka", "final_rss")),
             _mib(res.session_stat("klog", "final_rss"))],
            ["start-up s", res.session_stat("kafka", "startup_s").fmt(), res.session_stat("klog", "startup_s").fmt()],
            ["idle CPU, cores (both brokers up, no load)", res.session_stat("kafka", "idle_cpu_cores").fmt(2),
             res.session_stat("klog", "idle_cpu_cores").fmt(2)],
            ["its CPU while the other broker was measured, cores", _peer_busy(res, "kafka").fmt(2),
             _peer_busy(res, "klog").fmt(2)]]
    L += _table(["", "Apache Kafka", "klog"], rows) + [""]
    if res.paired:
        L += ["Both brokers run for the whole comparison; the idle one's CPU during the other's measurement "
              "(last row: median, min–max over every measurement) is load the measured broker competes with, "
              "and is not counted in anyone's figures. Each broker's CPU and RSS are read from its own "
              "process only.", ""]
    rows = []
    for wid in res.ids("produce") + res.ids("consume") + res.ids("e2e"):
        rows.append([_short(wid) if not wid.startswith("consume") else "consume " + _short(wid),
                     _mib(res.stat("kafka", wid, "steady_rss")), _mib(res.stat("klog", wid, "steady_rss")),
                     _mib(res.stat("kafka", wid, "peak_rss")), _mib(res.stat("klog", wid, "peak_rss")),
                     res.pair_cell(wid, "peak_rss")])
    L += _table(["workload", "Kafka steady MiB", "klog steady MiB", "Kafka peak MiB", "klog peak MiB",
                 "peak klog/Kafka"], rows) + [""]
    if "perf-resources.png" in images:
        L += [f"![CPU and memory]({images['perf-resources.png']})", ""]

    L += _load_section(res) + [""]

    L += ["## This machine's limits (same run)", "",
          f"{m['cpu']}, {m['cpus']} vCPUs, {m['memory_gib']} GiB RAM, Linux {m['kernel']}, Python {m['python']}; "
          f"1-minute load average when the run began: {m['loadavg_at_start']:.1f} (the machine may be shared; "
          "the load during every workload is in the section above). \"Cores busy\" in the tables is the "
          "broker's CPU seconds per wall second during the workload.", ""]
    L += _limits(res) + [""]

    L += limits_analysis(res) + [""]

    props = shared_properties()
    L += ["## Settings", "",
          "Both brokers read the same Kafka `server.properties` keys (klog accepts Kafka's names):", "", "```"]
    L += [f"{k}={v}" for k, v in props.items()]
    L += ["```", "",
          f"Neither broker fsyncs per message (`log.flush.interval.messages` at Kafka's default, no "
          f"`log.flush.interval.ms`); segments roll at {SEGMENT_BYTES // 2**20} MiB on both. Apache Kafka runs as "
          "one KRaft combined broker+controller with `-Xmx1G -Xms1G -XX:+UseG1GC` (the heap of "
          "`kafka-server-start.sh`); klog runs as `klog-broker server.properties`. The load generators run on "
          "the same machine and share its cores with the broker under test"
          + ("; the other broker runs idle meanwhile (its CPU is in the memory and CPU section)." if res.paired
             else "; the other broker is stopped.") + "", "",
          "Workloads (record counts, partitions, acks, rates) are listed in `docs/performance.json`; "
          f"the command was `{d['command']}`.", "",
          "## Reproduce", "", "```sh", "make sidebyside            # the full comparison (about 25-35 minutes)",
          "bash tools/bench-sidebyside.sh --quick   # a smoke run of each kind of workload",
          "make sidebyside-cluster    # 3-node klog vs 3-node Kafka, replication factor 3 (section below)", "```", ""]
    return "\n".join(L)


def write(data: dict[str, Any], docs: Path) -> Path:
    res = Results(data)
    docs.mkdir(parents=True, exist_ok=True)
    images = charts(res, docs / "img")
    md = docs / "performance.md"
    from .cluster import saved_section   # the 3-node comparison's section, kept from its own last run
    cluster = saved_section(docs)
    md.write_text(compose(markdown(res, images), md.read_text() if md.exists() else "", cluster))
    return md


#: Markers of docs/performance.md's "Cost per request" section (benches/bench_request_cost.py --docs writes its
#: tables; the rest of it is prose kept by hand). make sidebyside keeps the section when it rewrites the file.
REQUEST_COST_BEGIN = "<!-- cost per request: begin (benches/bench_request_cost.py) -->"
REQUEST_COST_END = "<!-- cost per request: end -->"
#: Markers of docs/performance.md's "Transactions" section (benches/bench_transactions.py; kept by hand).
TRANSACTIONS_BEGIN = "<!-- transactions: begin (benches/bench_transactions.py) -->"
TRANSACTIONS_END = "<!-- transactions: end -->"
#: Markers of docs/performance.md's "Share groups" section (benches/bench_share_groups.py; kept by hand).
SHARE_GROUPS_BEGIN = "<!-- share groups: begin (benches/bench_share_groups.py) -->"
SHARE_GROUPS_END = "<!-- share groups: end -->"
#: Markers of the hand-kept notes at the end of docs/performance.md's "Memory and CPU" section (where the broker's
#: memory goes, measured by hand); make sidebyside puts them back at the end of that section, after its tables.
MEMORY_NOTES_BEGIN = "<!-- memory notes: begin (kept by hand) -->"
MEMORY_NOTES_END = "<!-- memory notes: end -->"
#: The generated section that follows "Memory and CPU" (the memory notes go just before it).
AFTER_MEMORY_HEADING = "## Machine load during each workload"


def compose(generated: str, old: str, cluster_section: str) -> str:
    """docs/performance.md anew: ``generated`` (this run's report), then the sections of ``old`` kept by hand (cost
    per request, transactions, share groups), then ``cluster_section`` (the 3-node comparison's) followed by what
    came after it in ``old`` (notes on earlier cluster runs and the control plane's figures). The memory notes of
    ``old`` go back at the end of the generated "Memory and CPU" section."""
    from .cluster import SECTION_END as CLUSTER_END

    notes = kept_block(old, MEMORY_NOTES_BEGIN, MEMORY_NOTES_END)
    if notes:
        at = generated.find("\n" + AFTER_MEMORY_HEADING)
        generated = generated[:at + 1] + notes + "\n" + generated[at + 1:] if at >= 0 else generated + "\n" + notes

    kept = [kept_block(old, begin, end) for begin, end in ((REQUEST_COST_BEGIN, REQUEST_COST_END),
                                                           (TRANSACTIONS_BEGIN, TRANSACTIONS_END),
                                                           (SHARE_GROUPS_BEGIN, SHARE_GROUPS_END))]
    text = generated + "".join("\n" + block for block in kept if block)
    if cluster_section:
        after = old.split(CLUSTER_END, 1)[1] if CLUSTER_END in old else "\n"
        text += "\n" + cluster_section.rstrip("\n") + after
    return text


def kept_block(text: str, begin: str, end: str) -> str:
    """The lines from ``begin`` to ``end`` (both included, with a final newline) in ``text``; empty without them."""
    start = text.find(begin)
    stop = text.find(end, start)
    return text[start:stop + len(end)] + "\n" if start >= 0 and stop >= 0 else ""

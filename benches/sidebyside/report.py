"""Turn a results JSON into docs/performance.md and PNG charts (matplotlib) in docs/img/.

Every figure is the median over the repeated runs with its min-max spread; ratios are klog/Kafka of the
medians. The "What limits klog" section comes from ``analysis.md`` next to this file (profiles are read by
a person, not generated) and is included verbatim.
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
ANALYSIS = Path(__file__).with_name("analysis.md")

#: The milestone's targets: (metric, comparison, bound).
TARGETS = {
    "produce MB/s": (">=", 1.0),
    "consume MB/s": (">=", 1.0),
    "end-to-end p99": ("<=", 1.0),
    "peak RSS": ("<=", 0.25),
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
        self.errors: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.info: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in data["sessions"]:
            self.info[s["broker"]].append(s["info"])
            for wid, r in s["results"].items():
                if "error" in r:
                    self.errors[(s["broker"], wid)].append(r["error"])
                else:
                    self.by[(s["broker"], wid)].append(r)
        self.workloads = data["workloads"]

    def stat(self, broker: str, wid: str, metric: str) -> Stat:
        return Stat([r.get(metric) for r in self.by[(broker, wid)]])

    def ratio(self, wid: str, metric: str) -> float | None:
        k, g = self.stat("kafka", wid, metric), self.stat("klog", wid, metric)
        if not k or not g or k.median == 0:
            return None
        return g.median / k.median

    def busy(self, broker: str, wid: str) -> Stat:
        """Broker CPU seconds per wall second during the workload: 1.0 = one core fully used."""
        return Stat([r["cpu_s"] / r["wall_s"] for r in self.by[(broker, wid)] if r.get("wall_s")])

    def waited_per_cpu_s(self, broker: str, wid: str) -> Stat:
        """Seconds the broker's threads waited runnable for a CPU per CPU second they used (schedstat)."""
        return Stat([r["runqueue_wait_s"] / r["cpu_s"] for r in self.by[(broker, wid)]
                     if r.get("cpu_s") and r.get("runqueue_wait_s") is not None])

    def loadavg(self, broker: str) -> Stat:
        return Stat([r.get("loadavg_before") for (b, _), rs in self.by.items() if b == broker for r in rs])

    def session_stat(self, broker: str, key: str) -> Stat:
        return Stat([i.get(key) for i in self.info[broker] if "error" not in i])

    def peak_rss(self, broker: str) -> Stat:
        """Per session: the highest peak RSS over all its workloads."""
        per_run: dict[int, float] = {}
        for s in self.data["sessions"]:
            if s["broker"] == broker and s["results"]:
                peaks = [r["peak_rss"] for r in s["results"].values() if "peak_rss" in r]
                if peaks:
                    per_run[s["run"]] = max(peaks)
        return Stat(list(per_run.values()))

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

    def summarise(name: str, ids: list[str], metric: str, worst: bool = False) -> None:
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
        if worst:  # a latency target must hold for every workload, not on average
            hi, hi_w = max(pairs)
            heads[name] = (hi, f"worst of {len(known)} workloads ({_short(hi_w)}){spread}")
            return
        if len(known) < len(ratios) and any(res.errors.get(("klog", w)) for w in ids):
            heads[name] = (_geomean(known), f"geometric mean of {len(known)} of {len(ids)} workloads "
                                            f"(klog failed the others){spread}")
        else:
            heads[name] = (_geomean(known), f"geometric mean over {len(known)} workloads{spread}")

    summarise("produce MB/s", res.ids("produce"), "mb_per_s")
    summarise("consume MB/s", res.ids("consume"), "mb_per_s")
    for pct, key in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
        summarise(f"end-to-end {pct}", res.ids("e2e"), key, worst=True)
    summarise("CPU s/GB", res.ids("produce") + res.ids("consume"), "cpu_s_per_gb")
    k, g = res.peak_rss("kafka"), res.peak_rss("klog")
    if k and g:
        heads["peak RSS"] = (g.median / k.median, "highest peak RSS of a session, median over runs")
    k, g = res.session_stat("kafka", "idle_rss"), res.session_stat("klog", "idle_rss")
    if k and g:
        heads["idle RSS"] = (g.median / k.median, "after startup and warm-up")
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
        rows.append([_short(wid), k.fmt(), g.fmt(), _ratio_cell(res.ratio(wid, "mb_per_s")), kc.fmt(),
                     gc.fmt(), _ratio_cell(res.ratio(wid, "cpu_s_per_gb")), ku.fmt(2), gu.fmt(2),
                     _err_note(res, wid)])
    return _table(["workload", "Kafka MB/s", "klog MB/s", "klog/Kafka", "Kafka CPU s/GB", "klog CPU s/GB",
                   "klog/Kafka", "Kafka cores busy", "klog cores busy", "notes"], rows)


def _latency_table(res: Results, ids: list[str]) -> list[str]:
    rows = []
    for wid in ids:
        for pct, key in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
            rows.append([_short(wid), pct, res.stat("kafka", wid, key).fmt(), res.stat("klog", wid, key).fmt(),
                         _ratio_cell(res.ratio(wid, key)), _err_note(res, wid) if pct == "p50" else ""])
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
    return _table(["limit", "measured", "klog's best as a fraction"], rows)


def markdown(res: Results, images: dict[str, str]) -> str:
    d = res.data
    m = d["machine"]
    versions = {b: (res.info[b][0].get("version", "?") if res.info[b] else "?") for b in BROKERS}
    L: list[str] = []
    L += ["# Performance: klog vs Apache Kafka", "",
          "<!-- Generated by benches/sidebyside (make sidebyside) from docs/performance.json; edit "
          "benches/sidebyside/report.py or analysis.md, not this file. -->", "",
          f"Measured {d['generated']} on one machine, both brokers in the same run, one after the other, "
          f"{d['runs']} run(s) each (their order alternates between runs). "
          f"Versions: {versions['kafka']}, {versions['klog']}. "
          "Every figure is the median over the runs with the min–max spread in parentheses; ratios are "
          "klog/Kafka of the medians. MB = 2^20 bytes (as Kafka's tools print it), GB = 10^9 bytes.", ""]
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
          "confluent-kafka (assigned partitions, no group) read a topic filled by the `acks=1` produce "
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
                             res.stat("klog", wid, key).fmt(scale=sc), _ratio_cell(res.ratio(wid, key)),
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
                             _ratio_cell(res.ratio(wid, "create_topic_s"))])
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
            ["start-up s", res.session_stat("kafka", "startup_s").fmt(), res.session_stat("klog", "startup_s").fmt()]]
    L += _table(["", "Apache Kafka", "klog"], rows) + [""]
    rows = []
    for wid in res.ids("produce") + res.ids("consume") + res.ids("e2e"):
        rows.append([_short(wid) if not wid.startswith("consume") else "consume " + _short(wid),
                     _mib(res.stat("kafka", wid, "steady_rss")), _mib(res.stat("klog", wid, "steady_rss")),
                     _mib(res.stat("kafka", wid, "peak_rss")), _mib(res.stat("klog", wid, "peak_rss")),
                     _ratio_cell(res.ratio(wid, "peak_rss"))])
    L += _table(["workload", "Kafka steady MiB", "klog steady MiB", "Kafka peak MiB", "klog peak MiB",
                 "peak klog/Kafka"], rows) + [""]
    if "perf-resources.png" in images:
        L += [f"![CPU and memory]({images['perf-resources.png']})", ""]

    L += ["## This machine's limits (same run)", "",
          f"{m['cpu']}, {m['cpus']} vCPUs, {m['memory_gib']} GiB RAM, Linux {m['kernel']}, Python {m['python']}; "
          f"1-minute load average when the run began: {m['loadavg_at_start']:.1f} (the machine may be shared; "
          "each workload records the load average before it in performance.json). Median 1-minute load "
          f"average before a workload: Kafka {res.loadavg('kafka').fmt(2)}, klog {res.loadavg('klog').fmt(2)} "
          f"(on {m['cpus']} vCPUs; it counts the benchmark's own broker and load generator threads as well as "
          "any other processes on the machine). \"Cores busy\" in the tables is the broker's CPU seconds per wall second during the "
          "workload.", ""]
    L += _limits(res) + [""]

    if ANALYSIS.exists():
        L += [ANALYSIS.read_text().strip(), ""]

    props = shared_properties()
    L += ["## Settings", "",
          "Both brokers read the same Kafka `server.properties` keys (klog accepts Kafka's names):", "", "```"]
    L += [f"{k}={v}" for k, v in props.items()]
    L += ["```", "",
          f"Neither broker fsyncs per message (`log.flush.interval.messages` at Kafka's default, no "
          f"`log.flush.interval.ms`); segments roll at {SEGMENT_BYTES // 2**20} MiB on both. Apache Kafka runs as "
          "one KRaft combined broker+controller with `-Xmx1G -Xms1G -XX:+UseG1GC` (the heap of "
          "`kafka-server-start.sh`); klog runs as `klog-broker server.properties`. The load generators run on "
          "the same machine and share its cores with the broker under test; the other broker is stopped.", "",
          "Workloads (record counts, partitions, acks, rates) are listed in `docs/performance.json`; "
          f"the command was `{d['command']}`.", "",
          "## Reproduce", "", "```sh", "make sidebyside            # the full comparison (about 30-40 minutes)",
          "bash tools/bench-sidebyside.sh --quick   # a smoke run of each kind of workload", "```", ""]
    return "\n".join(L)


def write(data: dict[str, Any], docs: Path) -> Path:
    res = Results(data)
    docs.mkdir(parents=True, exist_ok=True)
    images = charts(res, docs / "img")
    md = docs / "performance.md"
    md.write_text(markdown(res, images))
    return md

"""Apache Kafka's own load generators, run from the Maven Central jars: ProducerPerformance and
ConsumerPerformance (``kafka-producer-perf-test.sh`` / ``kafka-consumer-perf-test.sh``)."""

from __future__ import annotations

import re
import resource
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .brokers import kafka_libs

#: Heap of the load generator JVMs (the scripts' default is 512 MiB).
TOOL_HEAP = "512m"

# "1000000 records sent, 245098.0 records/sec (23.37 MB/sec), 812.53 ms avg latency, 1187.00 ms max latency,
#  855 ms 50th, 1133 ms 95th, 1173 ms 99th, 1185 ms 99.9th."
# With --warmup-records a second summary follows: "N steady state records sent, ..." (preferred when present).
_FINAL = re.compile(
    r"(\d+) (?:steady state )?records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")
# Interval lines: "123456 records sent, 24691.2 records/sec (2.35 MB/sec), 5.3 ms avg latency, 45.0 ms max latency."
_WINDOW = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                     r"([\d.]+) ms max latency\.$")


class ToolError(RuntimeError):
    """A load generator failed; the message carries its output."""


@dataclass
class ProduceResult:
    records: int
    records_per_s: float
    mb_per_s: float            # MB = 2**20 bytes, as ProducerPerformance prints it
    avg_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    complete: bool             # False: stopped at the time limit; rates are from the reporting windows


@dataclass
class ConsumeResult:
    records: int
    mb: float
    mb_per_s: float            # fetch.MB.sec: excludes the group join (rebalance) time
    records_per_s: float
    rebalance_ms: float
    fetch_s: float             # fetch.time.ms: from the end of the group join to the last record
    jvm_cpu_s: float           # the load generator JVM's CPU over its whole life (start-up and JIT included)


def _java() -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise ToolError("java not found (Kafka's tools need Java 17+)")
    return [java, f"-Xmx{TOOL_HEAP}", "-XX:+UseG1GC", "-Djava.awt.headless=true", "-cp", f"{kafka_libs()}/*"]


def _props(props: dict[str, object]) -> list[str]:
    return ["--command-property", *(f"{k}={v}" for k, v in props.items())] if props else []


def producer_performance(bootstrap: str, topic: str, num_records: int, record_size: int, *,
                         throughput: int = -1, props: dict[str, object], time_limit_s: float,
                         log: Path, warmup_records: int = 0) -> ProduceResult:
    """Run ProducerPerformance; stop it after ``time_limit_s`` (then report the windows it printed).
    With ``warmup_records`` the figures are the tool's steady-state ones (after those records)."""
    cmd = [*_java(), "org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(num_records), "--record-size", str(record_size),
           "--throughput", str(throughput), "--reporting-interval", "1000",
           *(["--warmup-records", str(warmup_records)] if warmup_records else []), *_props(props)]
    out = _run(cmd, time_limit_s, log)
    for line in reversed(out.splitlines()):  # the steady-state summary, if any, is printed last
        m = _FINAL.search(line)
        if m:
            g = m.groups()
            return ProduceResult(int(g[0]), float(g[1]), float(g[2]), float(g[3]), float(g[5]), float(g[6]),
                                 float(g[7]), float(g[8]), float(g[4]), complete=True)
    windows = [m.groups() for m in map(_WINDOW.match, out.splitlines()) if m]
    if len(windows) < 2:
        raise ToolError(f"ProducerPerformance printed no result within {time_limit_s:.0f} s:\n{out[-3000:]}")
    windows = windows[1:]  # the first window holds the connection setup
    sent = sum(int(w[0]) for w in windows)
    secs = sum(int(w[0]) / float(w[1]) for w in windows if float(w[1]) > 0)
    mb = sum(int(w[0]) / float(w[1]) * float(w[2]) for w in windows if float(w[1]) > 0)
    nan = float("nan")
    return ProduceResult(sent, sent / secs, mb / secs, nan, nan, nan, nan, nan,
                         max(float(w[4]) for w in windows), complete=False)


def consumer_performance(bootstrap: str, topic: str, num_records: int, *, props: dict[str, object],
                         time_limit_s: float, log: Path) -> ConsumeResult:
    cmd = [*_java(), "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(num_records), "--timeout", "10000",
           *_props(props)]
    # The JVM is the only child that exits meanwhile (the brokers keep running), so this is its CPU.
    children_cpu0 = children_cpu_s()
    out = _run(cmd, time_limit_s, log)
    jvm_cpu_s = children_cpu_s() - children_cpu0
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    # fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    for line in out.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) == 10 and re.match(r"^\d{4}-\d\d-\d\d", cols[0]):
            records = int(cols[4])
            if records < num_records:
                raise ToolError(f"ConsumerPerformance read {records} of {num_records} records:\n{out[-3000:]}")
            return ConsumeResult(records, float(cols[2]), float(cols[8]), float(cols[9]), float(cols[6]),
                                 float(cols[7]) / 1000, jvm_cpu_s)
    raise ToolError(f"ConsumerPerformance printed no result:\n{out[-3000:]}")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], time_limit_s: float, log: Path) -> str:
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=time_limit_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    text = out.decode(errors="replace")
    with open(log, "ab") as f:
        f.write(out)
    return text

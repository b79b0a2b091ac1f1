"""Who sets single-node consume MB/s on this machine: the clients' CPU beside the brokers', klog vs Kafka (issue 38).

Run: ``PYTHONPATH=.:benches .venv/bin/python benches/bench_consume_clients.py [--rounds 5] [--topics 100-1,1024-16,1024-1000]``
(about 3 minutes for 5 rounds of the 8 workloads on 2 cores; hold ``flock /work/briefs/bench.lock`` or similar on a
shared machine).

Both brokers run at once with ``make sidebyside``'s settings (benches/sidebyside/brokers.py); each topic is filled
as the side-by-side harness fills it (``ProducerPerformance``, acks=1, ``linger.ms=5``, ``batch.size=65536``: 200,000
records of 1 KiB or 1,000,000 of 100 B) and read with its two consumers, in rounds, klog and Kafka back to back in an
order that alternates: the confluent-kafka consumer of the harness (``sidebyside.pyload consume``: its process's CPU
and that of its Python thread, which turns librdkafka's messages into Python objects) and Kafka's
``ConsumerPerformance``, whose threads' CPU (utime + stime from ``/proc/<pid>/task``, sampled every 10 ms) is taken
over its fetch window (``fetch.time.ms`` before its end time): the consumer's own thread, which in the classic Java
consumer also reads the socket and parses the responses, and the JIT compilers that run beside it in these short
reads. The broker's CPU is taken over the same read. Per workload: the medians over the rounds of MB/s and of each
CPU per GB (10^9 payload bytes), the klog/Kafka MB/s of each pair, and the cores the client and the broker kept busy
together. With C the client's CPU per GB and B a broker's, a read that keeps the 2 cores busy can go at most
(C + B_kafka) / (C + B_klog) times Kafka's MB/s however little the broker spends, and a read bound by the client's
busiest thread (T per GB) at most 1 / T GB/s. No target is asserted (timing under load is not a test).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from sidebyside import brokers, javatools, runner  # noqa: E402

TOPICS = "100-1,100-16,1024-1,1024-16"
TOOLS = ("confluent", "java")
#: the side-by-side matrix reads its many-partition topic with the Java consumer only
MAX_CONFLUENT_PARTITIONS = 16
#: how often the Java consumer's threads' CPU is sampled
SAMPLE_S = 0.01
#: a bound on each read (a stuck client must not hang the bench)
READ_LIMIT_S = 120.0
TICK = os.sysconf("SC_CLK_TCK")


def _records(size: int) -> int:
    return 200_000 if size >= 1024 else 1_000_000


def _threads_cpu(pid: int) -> dict[tuple[str, str], float]:
    """Each live thread's (id, name) -> CPU seconds so far."""
    out: dict[tuple[str, str], float] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = text[text.rindex(")") + 2:].split()
                out[(tid, text[text.index("(") + 1:text.rindex(")")])] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def _cpu(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def read_java(bootstrap: str, broker_pid: int, topic: str, records: int) -> dict[str, Any]:
    """ConsumerPerformance (the harness's settings); CPU of its threads and of the broker over its fetch window."""
    cmd = [*javatools._java(), "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
           "--topic", topic, "--num-records", str(records), "--timeout", "10000",
           "--command-property", "fetch.max.bytes=52428800"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, dict[tuple[str, str], float], float]] = []

    def sample() -> None:
        while proc.poll() is None:
            with contextlib.suppress(OSError):
                samples.append((time.time(), _threads_cpu(proc.pid), _cpu(broker_pid)))
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=READ_LIMIT_S)
    finally:
        proc.kill()
        sampler.join()
    rows = [line for line in out.splitlines() if line[:2] == "20" and line.count(",") == 9]
    if not rows or not samples:
        raise RuntimeError(f"ConsumerPerformance printed no result:\n{out[-2000:]}")
    cols = [c.strip() for c in rows[0].split(",")]
    # end.time is the wall clock (local time) of the last record; the fetch window is fetch.time.ms before it
    end = datetime.datetime.strptime(cols[1], "%Y-%m-%d %H:%M:%S:%f").timestamp()
    fetch_s = float(cols[7]) / 1000
    first = min(samples, key=lambda s: abs(s[0] - (end - fetch_s)))
    last = min(samples, key=lambda s: abs(s[0] - end))
    by_name: dict[str, float] = {}
    for (tid, name), cpu in last[1].items():
        by_name[name] = by_name.get(name, 0.0) + cpu - first[1].get((tid, name), 0.0)
    return {"mb": float(cols[2]), "mb_per_s": float(cols[8]), "wall_s": fetch_s,
            "client_cpu_s": sum(by_name.values()), "client_thread_cpu_s": by_name.get("java", math.nan),
            "jit_cpu_s": sum(v for k, v in by_name.items() if "CompilerThre" in k),
            "broker_cpu_s": last[2] - first[2]}


def read_confluent(bootstrap: str, broker_pid: int, topic: str, records: int, size: int, log: Path) -> dict[str, Any]:
    """The harness's confluent-kafka consumer (sidebyside.pyload consume)."""
    args = {"bootstrap": bootstrap, "topic": topic, "records": records, "size": size, "acks": "1",
            "linger_ms": 0, "batch_size": 0, "time_limit_s": READ_LIMIT_S}
    cpu0 = _cpu(broker_pid)
    res = runner._pyload_result(runner._pyload("consume", args, log), READ_LIMIT_S + 30)
    cpu = _cpu(broker_pid) - cpu0
    if not res.pop("ok"):
        raise RuntimeError(res["error"])
    return {"mb": res["mb_per_s"] * res["seconds"], "mb_per_s": res["mb_per_s"], "wall_s": res["seconds"],
            "client_cpu_s": res["consumer_process_cpu_s"], "client_thread_cpu_s": res["consumer_thread_cpu_s"],
            "broker_cpu_s": cpu}


def summarise(recs: list[dict[str, Any]]) -> str:
    lines = ["| workload | pairs | Kafka MB/s | klog MB/s | klog/Kafka | client CPU s/GB (Kafka / klog) | client's "
             "busiest thread s/GB | broker CPU s/GB (Kafka / klog) | cores busy, client + broker (Kafka / klog) | "
             "ceiling on 2 cores (C + B_kafka) / (C + B_klog) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    medians = []
    for w in dict.fromkeys(r["workload"] for r in recs):
        rounds: dict[int, dict[str, dict[str, Any]]] = {}
        for r in recs:
            if r["workload"] == w:
                rounds.setdefault(r["round"], {})[r["broker"]] = r
        pairs = [p for p in rounds.values() if len(p) == 2]
        ratios = [p["klog"]["mb_per_s"] / p["kafka"]["mb_per_s"] for p in pairs]

        def med(broker: str, key: str, per_gb: bool = True) -> float:
            return statistics.median(p[broker][key] / (p[broker]["mb"] * 2**20 / 1e9 if per_gb else 1) for p in pairs)

        busy = {b: statistics.median((p[b]["client_cpu_s"] + p[b]["broker_cpu_s"]) / p[b]["wall_s"] for p in pairs)
                for b in ("kafka", "klog")}
        c, bk, bl = med("klog", "client_cpu_s"), med("kafka", "broker_cpu_s"), med("klog", "broker_cpu_s")
        medians.append(statistics.median(ratios))
        lines.append(
            f"| {w} | {len(pairs)} | {med('kafka', 'mb_per_s', False):.0f} | {med('klog', 'mb_per_s', False):.0f} | "
            f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) | "
            f"{med('kafka', 'client_cpu_s'):.2f} / {c:.2f} | "
            f"{med('kafka', 'client_thread_cpu_s'):.2f} / {med('klog', 'client_thread_cpu_s'):.2f} | "
            f"{bk:.2f} / {bl:.2f} | {busy['kafka']:.2f} / {busy['klog']:.2f} | {(c + bk) / (c + bl):.2f}× |")
    if medians:
        lines.append(f"\ngeometric mean of the pair medians: {math.exp(sum(map(math.log, medians)) / len(medians)):.2f}×")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--topics", default=TOPICS, help="SIZE-PARTITIONS,... (default %(default)s)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--out", type=Path, help="append each read as a JSON line here")
    ap.add_argument("--summarise", type=Path, nargs="*", help="only print the summary of these JSON-lines files")
    args = ap.parse_args()
    if args.summarise:
        print(summarise([json.loads(line) for f in args.summarise for line in f.read_text().splitlines()]))
        return 0
    recs: list[dict[str, Any]] = []
    props = brokers.shared_properties()
    with tempfile.TemporaryDirectory(prefix="bench-consume-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        running = {"kafka": stack.enter_context(brokers.apache_kafka(work / "kafka", props)),
                   "klog": stack.enter_context(brokers.klog_broker(work / "klog", props))}
        topics = []
        for spec in args.topics.split(","):
            size, parts = map(int, spec.split("-"))
            topic = f"pj-{size}-{parts}-1"
            topics.append((topic, size, parts))
            for b in running.values():
                runner.create_topic(b.bootstrap, topic, parts, size)
                javatools.producer_performance(b.bootstrap, topic, _records(size), size, throughput=-1,
                                               props=runner._java_producer_props("1"), time_limit_s=READ_LIMIT_S,
                                               log=work / "produce.log")
        for rnd in range(args.rounds):
            for i, (topic, size, parts) in enumerate(topics):
                for j, tool in enumerate(args.tools.split(",")):
                    if tool == "confluent" and parts > MAX_CONFLUENT_PARTITIONS:
                        continue  # as in the side-by-side matrix: the 1,000-partition topic is read by Java only
                    order = ["kafka", "klog"] if (rnd + i + j) % 2 == 0 else ["klog", "kafka"]
                    for name in order:
                        b = running[name]
                        runner.warm_page_cache(b.data_dir, topic)
                        load = os.getloadavg()[0]
                        if tool == "java":
                            rec = read_java(b.bootstrap, b.pid, topic, _records(size))
                        else:
                            rec = read_confluent(b.bootstrap, b.pid, topic, _records(size), size, work / "consume.log")
                        rec.update(round=rnd, workload=f"consume/{tool}/{size}B/{parts}p", broker=name,
                                   loadavg_1m=load, at=time.strftime("%H:%M:%S"))
                        recs.append(rec)
                        if args.out:
                            with args.out.open("a") as f:
                                f.write(json.dumps(rec) + "\n")
                        print(f"[{rec['at']}] {rec['workload']} {name}: {rec['mb_per_s']:.0f} MB/s, load {load:.1f}",
                              file=sys.stderr, flush=True)
    loads = [r["loadavg_1m"] for r in recs]
    print(summarise(recs))
    print(f"1-minute load average {min(loads):.1f}-{max(loads):.1f} (median {statistics.median(loads):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

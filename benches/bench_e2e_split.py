"""How much of the side-by-side end-to-end latency is the producer client's own queue, klog vs Kafka (issue 38).

Run: ``PYTHONPATH=.:benches .venv/bin/python benches/bench_e2e_split.py [--rounds 3] [--out FILE]`` (about a minute
a round on 2 cores).

The workload is ``make sidebyside``'s ``e2e/confluent/1024B/16p/acks=1``: both brokers up at once with the harness's
settings (benches/sidebyside/brokers.py), a 16-partition topic per round and broker, the harness's end-to-end
consumer process (``sidebyside.pyload e2e-consume``: the latency of each record from the producer's stamp to its
arrival in the consumer's Python loop) and a producer paced as ``sidebyside.pyload e2e_produce`` (10,000 records/s
of 1 KiB, ``linger.ms=1``), here with librdkafka's statistics every 0.5 s. From those, per broker: ``int_latency``,
the time a record spent in the producer's queue, from ``produce()`` to its place in a Produce request (the linger
included), ``outbuf_latency`` and the Produce round trip (``rtt``), p50 and p99 of each 0.5 s window, the median over
the windows after the first tenth. A record cannot arrive before it leaves the producer's queue, so the queue's p99
is a floor under the end-to-end p99 that no broker can move; the broker's share is what lies above it. Rounds
alternate which broker goes first. Nothing is asserted (timing under load is not a test).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sidebyside import pyload
from sidebyside.brokers import LAUNCHERS, shared_properties
from sidebyside.runner import create_topic

RECORDS = 200_000
RATE = 10_000
SIZE = 1024
PARTITIONS = 16
LINGER_MS = 1
STATS_INTERVAL_MS = 500
#: librdkafka's per-broker latency windows kept in the summary
WINDOWS = ("int_latency", "outbuf_latency", "rtt")


def one_read(bootstrap: str, topic: str) -> dict[str, Any]:
    """The e2e workload on one broker: the consumer's percentiles and the producer's latency windows."""
    from confluent_kafka import Producer

    args = {"bootstrap": bootstrap, "topic": topic, "records": RECORDS, "size": SIZE, "acks": 1, "rate": RATE,
            "linger_ms": LINGER_MS, "time_limit_s": 60}
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": f"{here}:{here.parent}"}
    consumer = subprocess.Popen([sys.executable, "-m", "sidebyside.pyload", "e2e-consume", json.dumps(args)],
                                stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the end-to-end consumer did not start")
        stats: list[dict[str, Any]] = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
                             "compression.type": "none", "partitioner": "murmur2_random",
                             "delivery.report.only.error": True, "statistics.interval.ms": STATS_INTERVAL_MS,
                             "stats_cb": lambda raw: stats.append(json.loads(raw))})
        producer.list_topics(topic, timeout=30)
        pyload.send_paced(producer, topic, RECORDS, RATE, SIZE)   # as the side-by-side e2e producer sends
        if producer.flush(30):
            raise RuntimeError("records undelivered after 30 s")
        out, _ = consumer.communicate(timeout=90)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    e2e = json.loads(out.strip().splitlines()[-1])
    if not e2e.pop("ok"):
        raise RuntimeError(e2e["error"])
    windows: dict[str, list[tuple[float, float]]] = {k: [] for k in WINDOWS}
    for s in stats[len(stats) // 10:]:
        for b in s["brokers"].values():
            if b.get("nodeid", -1) < 0 or not b["rtt"]["cnt"]:   # the bootstrap connection, or idle
                continue
            for k in WINDOWS:
                windows[k].append((b[k]["p50"] / 1000, b[k]["p99"] / 1000))
    result: dict[str, Any] = {"e2e_p50_ms": e2e["p50_ms"], "e2e_p99_ms": e2e["p99_ms"], "e2e_p999_ms": e2e["p999_ms"]}
    for k, vals in windows.items():
        if vals:
            result[f"{k}_p50_ms"] = statistics.median(v[0] for v in vals)
            result[f"{k}_p99_ms"] = statistics.median(v[1] for v in vals)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the reads and the summary as JSON here")
    a = ap.parse_args()
    reads: dict[str, list[dict[str, Any]]] = {"kafka": [], "klog": []}
    base = Path(tempfile.mkdtemp(prefix="bench-e2e-split-"))
    try:
        with contextlib.ExitStack() as stack:
            brokers = {name: stack.enter_context(LAUNCHERS[name](base / name, shared_properties(PARTITIONS)))
                       for name in ("kafka", "klog")}
            for r in range(a.rounds):
                for name in (("kafka", "klog") if r % 2 == 0 else ("klog", "kafka")):
                    topic = f"e2e-split-{r}"
                    create_topic(brokers[name].bootstrap, topic, PARTITIONS, SIZE, 1)
                    reads[name].append(one_read(brokers[name].bootstrap, topic))
                    print(f"round {r + 1}/{a.rounds} {name:5} " + " ".join(
                        f"{k}={v:.3f}" for k, v in reads[name][-1].items()), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    keys = list(reads["klog"][0])
    print(f"{'median over the rounds':28} {'Kafka':>8} {'klog':>8}")
    for k in keys:
        print(f"{k:28} {statistics.median(r[k] for r in reads['kafka'] if k in r):8.3f} "
              f"{statistics.median(r[k] for r in reads['klog'] if k in r):8.3f}")
    pairs = [g["e2e_p99_ms"] / k["e2e_p99_ms"] for k, g in zip(reads["kafka"], reads["klog"])]
    print("e2e p99 klog/Kafka per round: " + ", ".join(f"{p:.2f}" for p in pairs))
    if a.out:
        a.out.write_text(json.dumps({"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "loadavg_1m": os.getloadavg()[0], "reads": reads}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

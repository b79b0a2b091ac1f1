"""Run the workload matrix against one broker session and measure it.

A session: start the broker fresh, warm it up (a short unmeasured produce: JIT for Kafka, caches for klog),
record its idle RSS, run every workload under a :class:`UsageMeter`, stop it, delete its data. The harness
alternates the brokers' order across repeated runs so background load falls on both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import javatools
from .brokers import LAUNCHERS, RunningBroker, shared_properties
from .procstat import UsageMeter, rss_bytes
from .workloads import BATCH_SIZE, LATENCY_LINGER_MS, LINGER_MS, Workload

#: Topic creation (1,000 partitions included) must finish within this.
CREATE_TOPIC_TIMEOUT_S = 120.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str, name: str, partitions: int, record_size: int = 100) -> float:
    """Create ``name`` and wait until every partition has a leader and has acknowledged one record (Kafka
    creates partition logs asynchronously after CreateTopics answers); return the seconds it took."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.monotonic()
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=CREATE_TOPIC_TIMEOUT_S, request_timeout=CREATE_TOPIC_TIMEOUT_S)
    futures[name].result(timeout=CREATE_TOPIC_TIMEOUT_S)
    deadline = start + CREATE_TOPIC_TIMEOUT_S
    while True:
        topic = admin.list_topics(name, timeout=30).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())):
            break
        if time.monotonic() > deadline:
            raise KafkaException(f"topic {name}: partitions without a leader after {CREATE_TOPIC_TIMEOUT_S} s")
        time.sleep(0.1)
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": int(CREATE_TOPIC_TIMEOUT_S * 1000)})
    value = b"t" * record_size
    for p in range(partitions):
        producer.produce(name, value, partition=p, on_delivery=on_delivery)
    if producer.flush(CREATE_TOPIC_TIMEOUT_S) or failures:
        raise KafkaException(f"topic {name}: partitions did not accept a first record: {failures[:1]}")
    return time.monotonic() - start


def warm_page_cache(directory: Path) -> None:
    """Read every file under ``directory`` once so consume workloads read from page cache."""
    for root, _, files in os.walk(directory):
        for f in files:
            try:
                with open(os.path.join(root, f), "rb") as fh:
                    while fh.read(1 << 20):
                        pass
            except OSError:
                continue


def _pyload(mode: str, args: dict[str, Any], logfile: Path) -> subprocess.Popen[str]:
    """Start a Python load generator process; its stderr goes to ``logfile``, its result to stdout."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with open(logfile, "a") as err:
        err.write(f"$ pyload {mode} {json.dumps(args)}\n")
        err.flush()
        return subprocess.Popen([sys.executable, "-m", "sidebyside.pyload", mode, json.dumps(args)],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=logfile.parent)


def _pyload_result(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {"ok": False, "error": f"load generator still running after {timeout:.0f} s"}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        return {"ok": False, "error": f"load generator exited {proc.returncode} without a result"}
    return json.loads(lines[-1])


def _java_producer_props(acks: str, linger_ms: int = LINGER_MS) -> dict[str, object]:
    return {"acks": acks, "linger.ms": linger_ms, "batch.size": BATCH_SIZE, "compression.type": "none",
            "max.in.flight.requests.per.connection": 5}


def run_workload(broker: RunningBroker, w: Workload, workdir: Path) -> dict[str, Any]:
    """Run one workload; return its metrics (``error`` set if it failed)."""
    logfile = workdir / "loadgen.log"
    out: dict[str, Any] = {}
    if w.topic:
        out["create_topic_s"] = create_topic(broker.bootstrap, w.topic, w.partitions, w.size)
    if w.kind == "consume":
        warm_page_cache(broker.data_dir)
    payload_bytes = w.records * w.size
    with UsageMeter(broker.pid) as meter:
        if w.kind in ("produce", "produce-latency") and w.tool == "java":
            linger = LATENCY_LINGER_MS if w.rate else LINGER_MS
            r = javatools.producer_performance(
                broker.bootstrap, w.topic, w.records, w.size, throughput=w.rate or -1,
                props=_java_producer_props(w.acks, linger), time_limit_s=w.time_limit_s, log=logfile,
                warmup_records=w.records // 4 if w.rate else 0)
            out.update(mb_per_s=r.mb_per_s, records_per_s=r.records_per_s, complete=r.complete,
                       p50_ms=r.p50_ms, p99_ms=r.p99_ms, p999_ms=r.p999_ms, max_ms=r.max_ms, avg_ms=r.avg_ms)
            payload_bytes = r.records * w.size
        elif w.kind == "consume" and w.tool == "java":
            r2 = javatools.consumer_performance(
                broker.bootstrap, w.source_topic, w.records, props={"fetch.max.bytes": 52428800},
                time_limit_s=w.time_limit_s, log=logfile)
            out.update(mb_per_s=r2.mb_per_s, records_per_s=r2.records_per_s, rebalance_ms=r2.rebalance_ms)
        elif w.kind in ("produce", "consume") and w.tool == "confluent":
            args = {"bootstrap": broker.bootstrap, "topic": w.topic or w.source_topic, "records": w.records,
                    "size": w.size, "acks": w.acks, "linger_ms": LINGER_MS, "batch_size": BATCH_SIZE,
                    "time_limit_s": w.time_limit_s}
            res = _pyload_result(_pyload(w.kind, args, logfile), w.time_limit_s + 30)
            if not res.pop("ok"):
                raise RuntimeError(res["error"])
            out.update(res)
        elif w.kind == "e2e":
            args = {"bootstrap": broker.bootstrap, "topic": w.topic, "records": w.records, "size": w.size,
                    "acks": w.acks, "rate": w.rate, "linger_ms": LATENCY_LINGER_MS,
                    "time_limit_s": w.time_limit_s}
            consumer = _pyload("e2e-consume", args, logfile)
            assert consumer.stdout is not None
            first = consumer.stdout.readline()  # "ready" once it is positioned at the end of the topic
            if first.strip() != "ready":
                res = json.loads(first) if first.startswith("{") else {"error": "consumer did not start"}
                consumer.kill()
                raise RuntimeError(res.get("error"))
            producer = _pyload_result(_pyload("e2e-produce", args, logfile), w.time_limit_s + 30)
            consumed = _pyload_result(consumer, 60)
            for res in (producer, consumed):
                if not res.pop("ok"):
                    raise RuntimeError(res["error"])
            out.update(consumed, achieved_rate=producer["achieved_rate"])
        elif w.kind == "connections":
            args = {"bootstrap": broker.bootstrap, "topic": w.topic, "size": w.size, "acks": int(w.acks),
                    "partitions": w.partitions, "seconds": w.seconds, **w.extra}
            res = _pyload_result(_pyload("connections", args, logfile), w.seconds + 60)
            if not res.pop("ok"):
                raise RuntimeError(res["error"])
            out.update(res)
            payload_bytes = res["records"] * w.size
        else:
            raise ValueError(f"unknown workload {w.id}")
    u = meter.usage
    assert u is not None
    out.update(cpu_s=u.cpu_s, wall_s=u.wall_s, runqueue_wait_s=u.runqueue_wait_s, peak_rss=u.peak_rss,
               steady_rss=u.steady_rss,
               payload_gb=payload_bytes / 1e9,
               cpu_s_per_gb=u.cpu_s / (payload_bytes / 1e9) if payload_bytes else None)
    return out


def session(name: str, workloads: list[Workload], workdir: Path, run: int,
            warmup_records: int, extra_properties: dict[str, str] | None = None) -> dict[str, Any]:
    """One broker, fresh, through the whole matrix (``extra_properties``: settings for this broker only, on
    top of the shared ones)."""
    base = workdir / f"{name}-run{run}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    results: dict[str, Any] = {}
    info: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        with LAUNCHERS[name](base, {**shared_properties(), **(extra_properties or {})}) as broker:
            info = {"version": broker.version, "startup_s": time.monotonic() - t0, "pid": broker.pid}
            log(f"{name} run {run}: serving on {broker.bootstrap} (pid {broker.pid}) in {info['startup_s']:.1f} s")
            create_topic(broker.bootstrap, "warmup", 4)
            javatools.producer_performance(broker.bootstrap, "warmup", warmup_records, 1024,
                                           props=_java_producer_props("1"), time_limit_s=60,
                                           log=base / "loadgen.log")
            info["idle_rss"] = rss_bytes(broker.pid)
            for w in workloads:
                load = os.getloadavg()[0]
                try:
                    r = run_workload(broker, w, base)
                except Exception as exc:  # noqa: BLE001 - one failed workload must not end the comparison
                    r = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
                r["loadavg_before"] = load
                results[w.id] = r
                log(f"{name} run {run}: {w.id}: " + (
                    f"ERROR {r['error'][:300]}" if "error" in r else
                    ", ".join(f"{k}={v:.3g}" for k, v in r.items()
                              if k in ("mb_per_s", "p99_ms", "cpu_s_per_gb") and isinstance(v, float))
                    + f", peak RSS {r['peak_rss'] / 2**20:.0f} MiB"))
            info["final_rss"] = rss_bytes(broker.pid)
    except Exception as exc:  # noqa: BLE001 - the broker itself failed: record it, keep the other broker's run
        info["error"] = f"{type(exc).__name__}: {str(exc)[:3000]}"
        log(f"{name} run {run}: session failed: {info['error'][:500]}")
    finally:
        for d in base.iterdir() if base.exists() else ():
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)  # keep logs, drop the (large) data directories
    return {"broker": name, "run": run, "info": info, "results": results}

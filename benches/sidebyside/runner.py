"""Run the workload matrix against both brokers, paired, and measure it.

A run: start both brokers fresh (each on its own port and data directory, the same settings), warm each up
(a short unmeasured produce: JIT for Kafka, caches for klog), record their idle RSS and idle CPU, then run
every workload back to back on both - the two measurements of a pair seconds apart, so a klog/Kafka ratio
compares the brokers under the same machine load rather than the machine's drift over minutes. Which broker
goes first alternates per workload and per run. While one broker is measured the other sits idle; its CPU
over the measurement is recorded (``peer_cpu_s``), and each broker's CPU and RSS are read from its own
process only. Every measurement records the machine's load (:class:`LoadMeter`). At the end both brokers
stop and their data is deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import javatools
from .brokers import LAUNCHERS, RunningBroker, shared_properties
from .procstat import LoadMeter, UsageMeter, cpu_seconds, rss_bytes
from .workloads import BATCH_SIZE, LATENCY_LINGER_MS, LINGER_MS, Workload

#: Topic creation (1,000 partitions included) must finish within this.
CREATE_TOPIC_TIMEOUT_S = 120.0
#: How long each broker's idle CPU is measured after warm-up (both brokers idle).
IDLE_CPU_WINDOW_S = 5.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str, name: str, partitions: int, record_size: int = 100, replication_factor: int = 1,
                 replica_assignment: list[list[int]] | None = None) -> float:
    """Create ``name`` and wait until every partition has a leader and has acknowledged one record (Kafka
    creates partition logs asynchronously after CreateTopics answers); return the seconds it took.
    ``replica_assignment``: each partition's replicas, the first its preferred leader (instead of a count)."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.monotonic()
    new = NewTopic(name, len(replica_assignment), replica_assignment=replica_assignment) if replica_assignment else \
        NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)
    futures = admin.create_topics([new],
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


def warm_page_cache(directory: Path, topic: str = "") -> None:
    """Read the segment files (``*.log``) of ``topic`` once, so a consume workload reads from page cache.
    Both brokers keep partition ``N`` in ``<topic>-N/`` (without a topic: every partition under
    ``directory``). Index files are left alone: Kafka preallocates them sparse (10 MiB each), so reading them
    would fill the page cache with zeros - 20 GB for 1,000 partitions - and evict the records."""
    pattern = re.compile(re.escape(topic) + r"-\d+") if topic else None
    # rglob: a cluster's directory holds one data directory per node
    for d in directory.rglob("*"):
        if not d.is_dir() or (pattern is not None and not pattern.fullmatch(d.name)):
            continue
        for f in d.glob("*.log"):
            try:
                with open(f, "rb") as fh:
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


def run_workload(broker: RunningBroker, w: Workload, workdir: Path,
                 peer: RunningBroker | None = None) -> dict[str, Any]:
    """Run one workload; return its metrics (``error`` set if it failed). ``peer``: the other broker, idle
    meanwhile; its CPU over the measurement is recorded so its background work is visible."""
    logfile = workdir / "loadgen.log"
    out: dict[str, Any] = {}
    if w.topic:
        out["create_topic_s"] = create_topic(broker.bootstrap, w.topic, w.partitions, w.size, w.replication_factor)
    if w.kind == "consume":
        warm_page_cache(broker.data_dir, w.source_topic)
    payload_bytes = w.records * w.size
    peer_cpu0 = _cpu_or_nan(peer.pid) if peer else float("nan")
    loadgen_cpu0 = javatools.children_cpu_s()
    out["started_unix_s"] = time.time()
    with LoadMeter() as load, UsageMeter(broker.pid) as meter:
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
            out.update(mb_per_s=r2.mb_per_s, records_per_s=r2.records_per_s, rebalance_ms=r2.rebalance_ms,
                       fetch_s=r2.fetch_s, jvm_cpu_s=r2.jvm_cpu_s)
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
    u, m = meter.usage, load.load
    assert u is not None and m is not None
    if peer:
        out["peer_cpu_s"] = _cpu_or_nan(peer.pid) - peer_cpu0
    # the load generators' CPU (every process the workload started, waited for by now: a JVM's start-up and JIT
    # included), so a reader sees who used the cores the broker shared
    out["loadgen_cpu_s"] = javatools.children_cpu_s() - loadgen_cpu0
    out.update(loadavg_1m=m.loadavg_1m, loadavg_1m_after=m.loadavg_1m_after, other_runnable=m.other_runnable,
               kernel_runnable=m.kernel_runnable, own_runnable=m.own_runnable)
    out.update(cpu_s=u.cpu_s, wall_s=u.wall_s, runqueue_wait_s=u.runqueue_wait_s, peak_rss=u.peak_rss,
               steady_rss=u.steady_rss,
               payload_gb=payload_bytes / 1e9,
               cpu_s_per_gb=u.cpu_s / (payload_bytes / 1e9) if payload_bytes else None,
               system_s=u.system_s,
               system_s_per_gb=u.system_s / (payload_bytes / 1e9) if payload_bytes else None)
    return out


def _cpu_or_nan(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:
        return float("nan")


def _describe(name: str, run: int, w: Workload, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{name} run {run}: {w.id}: ERROR {r['error'][:300]}"
    figures = ", ".join(f"{k}={v:.3g}" for k, v in r.items()
                        if k in ("mb_per_s", "p99_ms", "cpu_s_per_gb") and isinstance(v, float))
    return (f"{name} run {run}: {w.id}: {figures}, peak RSS {r['peak_rss'] / 2**20:.0f} MiB, "
            f"load {r['loadavg_1m']:.1f} (others' runnable threads {r['other_runnable']:.1f})")


def pair_order(brokers: list[str], run: int, index: int) -> list[str]:
    """Who goes first in the pair of workload ``index`` of ``run``: alternates per workload and per run, so
    each broker goes first in half the pairs and the same workload swaps order from one run to the next."""
    return list(brokers) if (run + index) % 2 else list(reversed(brokers))


def paired_run(brokers: list[str], workloads: list[Workload], workdir: Path, run: int, warmup_records: int,
               extra_properties: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Both brokers up at once, each workload measured on one then the other, seconds apart; returns one
    session record per broker (``extra_properties``: per broker name, settings on top of the shared ones)."""
    bases = {name: workdir / f"{name}-run{run}" for name in brokers}
    results: dict[str, dict[str, Any]] = {name: {} for name in brokers}
    info: dict[str, dict[str, Any]] = {name: {"paired": True} for name in brokers}
    running: dict[str, RunningBroker] = {}
    try:
        with contextlib.ExitStack() as stack:
            for name in brokers:
                shutil.rmtree(bases[name], ignore_errors=True)
                bases[name].mkdir(parents=True)
                t0 = time.monotonic()
                try:
                    props = {**shared_properties(), **(extra_properties or {}).get(name, {})}
                    broker = stack.enter_context(LAUNCHERS[name](bases[name], props))
                    info[name].update(version=broker.version, startup_s=time.monotonic() - t0, pid=broker.pid)
                    log(f"{name} run {run}: serving on {broker.bootstrap} (pid {broker.pid}) in "
                        f"{info[name]['startup_s']:.1f} s")
                    create_topic(broker.bootstrap, "warmup", 4)
                    javatools.producer_performance(broker.bootstrap, "warmup", warmup_records, 1024,
                                                   props=_java_producer_props("1"), time_limit_s=60,
                                                   log=bases[name] / "loadgen.log")
                    running[name] = broker
                except Exception as exc:  # noqa: BLE001 - one broker failed: the other still runs
                    info[name]["error"] = f"{type(exc).__name__}: {str(exc)[:3000]}"
                    log(f"{name} run {run}: session failed: {info[name]['error'][:500]}")
            # Idle: both brokers up, no load. Their background CPU here is what the idle one of a pair adds.
            cpu0 = {n: _cpu_or_nan(b.pid) for n, b in running.items()}
            time.sleep(IDLE_CPU_WINDOW_S)
            for n, b in running.items():
                info[n]["idle_cpu_cores"] = (_cpu_or_nan(b.pid) - cpu0[n]) / IDLE_CPU_WINDOW_S
                info[n]["idle_rss"] = rss_bytes(b.pid)
            for index, w in enumerate(workloads):
                order = [n for n in pair_order(brokers, run, index) if n in running]
                for position, name in enumerate(order):
                    peer = next((running[n] for n in order if n != name), None)
                    try:
                        r = run_workload(running[name], w, bases[name], peer)
                    except Exception as exc:  # noqa: BLE001 - one failed workload must not end the comparison
                        r = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}",
                             "loadavg_1m": os.getloadavg()[0]}
                    r["pair_position"] = position
                    results[name][w.id] = r
                    log(_describe(name, run, w, r))
            for n, b in running.items():
                info[n]["final_rss"] = rss_bytes(b.pid)
    except Exception as exc:  # noqa: BLE001 - stopping a broker failed: record it, keep the figures
        for n in running:
            info[n].setdefault("error", f"{type(exc).__name__}: {str(exc)[:3000]}")
        log(f"run {run}: failed: {exc!r}"[:500])
    finally:
        for base in bases.values():
            for d in base.iterdir() if base.exists() else ():
                if d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)  # keep logs, drop the (large) data directories
    return [{"broker": n, "run": run, "info": info[n], "results": results[n]} for n in brokers]

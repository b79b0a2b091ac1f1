"""The 3-node mode of the side-by-side comparison (``make sidebyside-cluster``, issue 16 item 8): a 3-node klog
cluster and a 3-node Apache Kafka 4.x cluster (KRaft combined nodes) on this machine, started from the same Kafka
properties (replication factor 3, ``min.insync.replicas=2``). Each run starts one cluster, measures every workload on
it and stops it, then does the same with the other (which goes first alternates from run to run), so neither
cluster's background work shares the cores with the other's measurements; ``--together`` keeps both up at once
and measures each workload on one and then on the other, seconds apart, as the single-broker comparison does.

Measured per pair: produce MB/s with ``acks=1`` and ``acks=all`` (Kafka's ProducerPerformance), consume MB/s
(ConsumerPerformance and confluent-kafka), end-to-end latency at a fixed rate (confluent-kafka producer ->
consumer, ``acks=all``), each node's RSS, the catch-up of a restarted replica (a follower SIGKILLed, records
written while it is down, then the time from the restarted node serving again to its return to the ISR of every
partition), and failover (a partition leader that is not the active controller SIGKILLed under an idempotent
``acks=all`` producer: from the kill to the first acknowledgement of a record sent after it).

The two clusters run the same node timing (Kafka's defaults: broker session and heartbeat, Raft election and
fetch timeouts, no-op records and metadata snapshots); the results go to ``docs/performance-cluster.json`` and a
section of ``docs/performance.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import javatools
from .brokers import RunningBroker, kafka_libs, kafka_version, klog_version, shared_properties
from .procstat import cpu_seconds
from .runner import _java_producer_props, create_topic, log, pair_order, run_workload
from .workloads import LATENCY_PARTITIONS, LATENCY_RATE, LATENCY_SIZE, Workload

NODES = 3
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
PARTITIONS = 16
RECORD_SIZE = 1024
#: Kafka's defaults for the node timing, written out for both clusters: KlogCluster would otherwise add the test
#: clusters' fast timing (klog.testing.cluster.CLUSTER_TIMING: a metadata snapshot every 500 ms, a no-op record
#: every 200 ms) that KafkaCluster does not, and klog would be measured doing work Kafka is not asked to do.
#: The failover figure depends on the broker session.
NODE_TIMING: dict[str, object] = {"broker.heartbeat.interval.ms": 2000, "broker.session.timeout.ms": 9000,
                                  "replica.lag.time.max.ms": 30000,
                                  "controller.quorum.election.timeout.ms": 1000,
                                  "controller.quorum.fetch.timeout.ms": 2000,
                                  "controller.quorum.election.backoff.max.ms": 1000,
                                  "metadata.max.idle.interval.ms": 500,
                                  "metadata.log.max.snapshot.interval.ms": 3_600_000}
#: The failover producer's pace and how long it writes before the kill.
FAILOVER_INTERVAL_S = 0.005
FAILOVER_STEADY_S = 2.0   # of acknowledged writes before the kill
FAILOVER_LIMIT_S = 60.0
#: How often the catch-up measurement asks for the ISR.
ISR_POLL_S = 0.05
#: Before each measurement both clusters settle: every cluster's CPU over a window of SETTLE_WINDOW_S is back
#: within SETTLE_FACTOR of the lowest rate seen from it (its idle rate) or SETTLE_MARGIN cores above it, or
#: SETTLE_LIMIT_S passed. Without it one cluster's tail of work after its own measurement (Kafka's nodes used a
#: third of a core for seconds after a read) is taken from the cores the other is measured on. (The margin: an
#: idle JVM's CPU over half a second swings by more than half its lowest rate, so without it most waits ran to
#: the limit: 30 of 48 in one run.)
SETTLE_WINDOW_S = 0.5
SETTLE_FACTOR = 1.5
SETTLE_MARGIN = 0.1
SETTLE_LIMIT_S = 10.0
JSON_NAME = "performance-cluster.json"
SECTION_BEGIN = "<!-- 3-node cluster: begin (written by make sidebyside-cluster) -->"
SECTION_END = "<!-- 3-node cluster: end -->"
#: klog/Kafka targets of issues 16 and 38 (end-to-end p99 <= 0.5x since issue 38): (direction, bound); "higher":
#: klog/Kafka >= bound, "lower": <= bound.
TARGETS: dict[str, tuple[str, float]] = {
    "produce/java/1024B/16p/rf3/acks=1 MB/s": ("higher", 1.5),
    "produce/java/1024B/16p/rf3/acks=all MB/s": ("higher", 1.5),
    "consume/java/1024B/16p/rf3 MB/s": ("higher", 1.5),
    "consume/confluent/1024B/16p/rf3 MB/s": ("higher", 1.5),
    "e2e/confluent/1024B/16p/rf3/acks=all p99 ms": ("lower", 0.5),
    "failover: leader SIGKILL to first ack s": ("lower", 1.0),
    "node RSS MB (median node)": ("lower", 0.25),
}


def cluster_properties() -> dict[str, object]:
    """Both clusters' settings (Kafka's names): the single-broker comparison's, replicated."""
    return {**shared_properties(), **NODE_TIMING,
            "default.replication.factor": REPLICATION_FACTOR, "min.insync.replicas": MIN_INSYNC_REPLICAS,
            "offsets.topic.replication.factor": REPLICATION_FACTOR,
            "transaction.state.log.replication.factor": REPLICATION_FACTOR,
            "transaction.state.log.min.isr": MIN_INSYNC_REPLICAS}


def matrix(scale: float = 1.0) -> list[Workload]:
    """The throughput and latency workloads (run by :func:`sidebyside.runner.run_workload`), in session order."""
    records = max(1000, int(200_000 * scale))
    limit = 180.0
    w = [Workload(f"produce/java/{RECORD_SIZE}B/{PARTITIONS}p/rf3/acks={a}", "produce", "java", RECORD_SIZE,
                  PARTITIONS, a, records, topic=f"cj-{a}", time_limit_s=limit, replication_factor=REPLICATION_FACTOR)
         for a in ("1", "all")]
    for tool in ("java", "confluent"):
        w.append(Workload(f"consume/{tool}/{RECORD_SIZE}B/{PARTITIONS}p/rf3", "consume", tool, RECORD_SIZE,
                          PARTITIONS, records=records, source_topic="cj-1", time_limit_s=limit,
                          replication_factor=REPLICATION_FACTOR))
    latency_records = max(2000, int(LATENCY_RATE * 20 * scale))
    w.append(Workload(f"e2e/confluent/{LATENCY_SIZE}B/{LATENCY_PARTITIONS}p/rf3/acks=all", "e2e", "confluent",
                      LATENCY_SIZE, LATENCY_PARTITIONS, "all", latency_records, topic="ce2e-all", rate=LATENCY_RATE,
                      time_limit_s=limit, replication_factor=REPLICATION_FACTOR))
    return w


# ---- the clusters ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def start_cluster(name: str, root: Path) -> Iterator[Any]:
    """A running 3-node cluster of ``name`` ("klog" or "kafka") under ``root``, stopped on exit."""
    from klog.testing.cluster import KlogCluster
    from klog.testing.kafka import KafkaCluster

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cluster = KlogCluster(root, NODES, properties=cluster_properties()) if name == "klog" else \
        KafkaCluster(root, NODES, properties=cluster_properties(), libs=kafka_libs(), heap="1G")
    with cluster:
        cluster.wait_for_brokers(timeout=120)
        yield cluster


def as_broker(name: str, cluster: Any, root: Path) -> RunningBroker:
    """The view :func:`run_workload` measures: every node's address; node 1's process for its own usage
    figures (the cluster's CPU is added separately by :func:`cpu_since`)."""
    version = klog_version() if name == "klog" else f"Apache Kafka {kafka_version(kafka_libs())}"
    return RunningBroker(name, cluster.bootstrap_servers, cluster.pid(1), root, version)


def node_cpu_s(cluster: Any) -> dict[int, float]:
    """pid -> CPU seconds so far, of every running node process."""
    seen: dict[int, float] = {}
    for node in cluster.node_ids:
        pid = cluster.pid(node)
        if pid is not None:
            with contextlib.suppress(OSError):
                seen[pid] = cpu_seconds(pid)
    return seen


def cpu_since(cluster: Any, before: dict[int, float]) -> float:
    """CPU seconds the running node processes spent since ``before`` (a restarted node's new process counts from
    its start; a killed one's last seconds are not seen)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in node_cpu_s(cluster).items())


def settle(clusters: dict[str, Any], idle_rate: dict[str, float]) -> float:
    """Wait until every cluster's CPU rate is back near its idle rate (``idle_rate``: name -> lowest cores seen,
    updated here); returns the seconds waited (at most about SETTLE_LIMIT_S)."""
    began = time.monotonic()
    while True:
        before = {name: node_cpu_s(c) for name, c in clusters.items()}
        time.sleep(SETTLE_WINDOW_S)
        rates = {name: cpu_since(c, before[name]) / SETTLE_WINDOW_S for name, c in clusters.items()}
        for name, rate in rates.items():
            idle_rate[name] = min(idle_rate.get(name, rate), rate)
        waited = time.monotonic() - began
        if waited >= SETTLE_LIMIT_S or all(
                rate <= max(idle_rate[name] * SETTLE_FACTOR, idle_rate[name] + SETTLE_MARGIN)
                for name, rate in rates.items()):
            return waited


def rss_figures(cluster: Any) -> dict[str, float]:
    rss = [cluster.rss_bytes(n) / 1e6 for n in cluster.node_ids if cluster.pid(n) is not None]
    return {"node RSS MB (median node)": statistics.median(rss), "cluster RSS MB (all nodes)": sum(rss)}


def _isr(cluster: Any, node: int, topic: str) -> dict[int, set[int]]:
    return {p.partition_index: set(p.isr_nodes) for p in cluster.metadata(node, [topic]).topics[0].partitions}


def _another(cluster: Any, *excluded: int | None) -> int:
    return next(n for n in cluster.node_ids if n not in excluded)


# ---- catch-up and failover ---------------------------------------------------------------------------------


def catch_up(cluster: Any, root: Path, records: int) -> dict[str, float]:
    """Kill a follower (not the active controller), write ``records`` with acks=1 while it is down, restart it;
    the time from its restart and from its serving again until it is back in every partition's ISR."""
    topic = "catchup"
    create_topic(cluster.bootstrap_servers, topic, PARTITIONS, RECORD_SIZE, REPLICATION_FACTOR)
    controller = cluster.wait_for_controller()
    victim = _another(cluster, controller)
    cluster.kill(victim)
    javatools.producer_performance(cluster.bootstrap_servers, topic, records, RECORD_SIZE,
                                   props=_java_producer_props("1"), time_limit_s=180, log=root / "loadgen.log")
    asked = _another(cluster, victim)
    restarted = time.monotonic()
    cluster.restart(victim)
    serving = time.monotonic()
    deadline = serving + 300
    while True:
        with contextlib.suppress(OSError, ConnectionError):
            if all(victim in isr for isr in _isr(cluster, asked, topic).values()):
                break
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {victim} not back in the ISR of {topic} after 300 s")
        time.sleep(ISR_POLL_S)
    rejoined = time.monotonic()
    behind_mb = records * RECORD_SIZE / 2**20
    return {"catch-up: restart to full ISR s": rejoined - restarted,
            "catch-up: serving to full ISR s": rejoined - serving,
            "catch-up MB/s (behind / serving to full ISR)": behind_mb / max(rejoined - serving, 1e-3),
            "catch-up behind MB": behind_mb}


def failover(cluster: Any) -> dict[str, float]:
    """An idempotent acks=all producer writes every FAILOVER_INTERVAL_S to a 1-partition RF=3 topic whose leader
    is not the active controller; that leader is SIGKILLed: the seconds to the first acknowledgement of a record
    sent after the kill."""
    from confluent_kafka import Producer

    controller = cluster.wait_for_controller()
    leader = _another(cluster, controller)
    others = [n for n in cluster.node_ids if n != leader]
    topic = "failover"
    create_topic(cluster.bootstrap_servers, topic, 1, 64, replica_assignment=[[leader, *others]])
    assert cluster.wait_for_leader(topic, 0) == leader, "the preferred replica leads a new partition"
    stamp = struct.Struct(">d")
    acked: list[tuple[float, float]] = []
    failed: list[str] = []
    lock = threading.Lock()

    def on_delivery(err: Any, msg: Any) -> None:
        now = time.monotonic()
        with lock:
            if err is None:
                acked.append((stamp.unpack(msg.value())[0], now))
            else:
                failed.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0,
                         "message.timeout.ms": int(FAILOVER_LIMIT_S * 1000)})
    killed = float("inf")
    started = time.monotonic()
    steady_from: float | None = None   # the first acknowledgement: the producer has its id and the leader
    first_after: float | None = None
    while time.monotonic() - started < 2 * FAILOVER_LIMIT_S:
        with lock:
            if steady_from is None and acked:
                steady_from = acked[0][1]
        if killed == float("inf") and steady_from is not None and time.monotonic() - steady_from >= FAILOVER_STEADY_S:
            cluster.kill(leader)
            killed = time.monotonic()
        producer.produce(topic, stamp.pack(time.monotonic()), on_delivery=on_delivery)
        producer.poll(FAILOVER_INTERVAL_S)
        with lock:
            after = [at for sent, at in acked if sent >= killed]
        if after:
            first_after = min(after)
            break
    producer.flush(FAILOVER_LIMIT_S)
    # the last measurement of a session: the killed node stays down (the cluster is stopped next)
    if first_after is None:
        raise TimeoutError(f"no record sent after the leader's SIGKILL was acknowledged within {FAILOVER_LIMIT_S} s "
                           f"({len(failed)} delivery errors: {failed[:1]})")
    return {"failover: leader SIGKILL to first ack s": first_after - killed,
            "failover: delivery errors": float(len(failed))}


# ---- the paired run ----------------------------------------------------------------------------------------


def paired_cluster_run(systems: list[str], workdir: Path, run: int, scale: float, *,
                       together: bool = False, only: list[str] | None = None) -> list[dict[str, Any]]:
    """One session record per system. By default one cluster is up at a time: the run's first system (it
    alternates from run to run) is started, measured on every workload and stopped, then the other. With
    ``together`` both are up at once and every measurement is taken on one then on the other, seconds apart: the
    idle one's background work then runs on the cores the other is measured on (Kafka's idle JVMs used 0.2-0.36
    CPU-s during each 0.55-0.74 s klog read, klog's idle nodes 0.07-0.1 CPU-s during Kafka's). ``only``: the
    measurements whose name contains one of these texts (e.g. "failover"), the others skipped."""
    results: dict[str, dict[str, Any]] = {n: {} for n in systems}
    info: dict[str, dict[str, Any]] = {n: {"paired": True, "nodes": NODES, "together": together} for n in systems}
    roots = {n: workdir / f"cluster-{n}-run{run}" for n in systems}
    for group in [systems] if together else [[n] for n in pair_order(systems, run, 0)]:
        _measure_clusters(group, roots, results, info, run, scale, only or [])
    for root in roots.values():   # keep the logs, drop the data
        for d in root.rglob("*-data"):
            shutil.rmtree(d, ignore_errors=True)
    return [{"broker": n, "run": run, "info": info[n], "results": results[n]} for n in systems]


def _measure_clusters(systems: list[str], roots: dict[str, Path], results: dict[str, dict[str, Any]],
                      info: dict[str, dict[str, Any]], run: int, scale: float, only: list[str]) -> None:
    """Start the clusters of ``systems`` together, warm each up, take every measurement on each in turn (into
    ``results``), stop them."""
    with contextlib.ExitStack() as stack:
        clusters: dict[str, Any] = {}
        for name in systems:
            began = time.monotonic()
            try:
                clusters[name] = stack.enter_context(start_cluster(name, roots[name]))
            except Exception as exc:  # noqa: BLE001 - one cluster failed: the other is still measured
                info[name]["error"] = f"{type(exc).__name__}: {str(exc)[:3000]}"
                log(f"{name} cluster run {run}: failed to start: {info[name]['error'][:500]}")
                continue
            info[name]["startup_s"] = time.monotonic() - began
            log(f"{name} cluster run {run}: {clusters[name].bootstrap_servers} in {info[name]['startup_s']:.1f} s")
            create_topic(clusters[name].bootstrap_servers, "warmup", 4, RECORD_SIZE, REPLICATION_FACTOR)
            javatools.producer_performance(clusters[name].bootstrap_servers, "warmup", max(2000, int(100_000 * scale)),
                                           RECORD_SIZE, props=_java_producer_props("1"), time_limit_s=120,
                                           log=roots[name] / "loadgen.log")

        idle_rate: dict[str, float] = {}

        def measure(index: int, what: str, step: Callable[[str, Any], dict[str, Any]]) -> None:
            if only and not any(text in what for text in only):
                return
            for name in pair_order([n for n in systems if n in clusters], run, index):
                settled_s = settle(clusters, idle_rate)
                cpu0 = node_cpu_s(clusters[name])
                # with clusters up together, the other idles meanwhile: its background CPU is taken from the same cores
                peers = {n: node_cpu_s(c) for n, c in clusters.items() if n != name}
                began = time.monotonic()
                try:
                    figures = step(name, clusters[name])
                except Exception as exc:  # noqa: BLE001 - one failed measurement must not end the comparison
                    figures = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
                figures.update(settle_s=settled_s, cluster_cpu_s=cpu_since(clusters[name], cpu0),
                               peer_cluster_cpu_s=sum(cpu_since(clusters[n], c) for n, c in peers.items()),
                               wall_s=time.monotonic() - began, loadavg_1m=os.getloadavg()[0])
                results[name][what] = figures
                log(f"{name} cluster run {run}: {what}: " + ", ".join(
                    f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())[:400])

        def workload_step(w: Workload) -> Callable[[str, Any], dict[str, Any]]:
            def step(name: str, cluster: Any) -> dict[str, Any]:
                out = run_workload(as_broker(name, cluster, roots[name]), w, roots[name])
                # node 1's own usage figures say nothing of a cluster: cluster_cpu_s replaces them
                for key in ("cpu_s", "peak_rss", "steady_rss", "runqueue_wait_s", "cpu_s_per_gb"):
                    out.pop(key, None)
                return out
            return step

        index = 0
        for index, w in enumerate(matrix(scale)):
            measure(index, w.id, workload_step(w))
        measure(index + 1, "rss", lambda _name, cluster: rss_figures(cluster))
        measure(index + 2, "catch-up", lambda name, cluster: catch_up(cluster, roots[name],
                                                                         max(2000, int(200_000 * scale))))
        measure(index + 3, "failover", lambda _name, cluster: failover(cluster))


# ---- figures and report ------------------------------------------------------------------------------------


def headline(data: dict[str, Any]) -> dict[str, dict[str, float]]:
    """figure -> {"klog": median over runs, "kafka": ..., "ratio": klog/Kafka of the paired medians}."""
    def field(section: str, key: str) -> Callable[[dict[str, Any]], Any]:
        return lambda results: results.get(section, {}).get(key)

    pick: dict[str, Callable[[dict[str, Any]], Any]] = {}
    for w in matrix():
        if w.kind in ("produce", "consume"):
            pick[f"{w.id} MB/s"] = field(w.id, "mb_per_s")
        if w.kind == "consume" and w.tool == "confluent":
            pick[f"{w.id} consumer thread CPU s"] = field(w.id, "consumer_thread_cpu_s")
            pick[f"{w.id} consumer thread busy %"] = lambda results, wid=w.id: _share_of_read(
                results.get(wid, {}), "consumer_thread_cpu_s")
            pick[f"{w.id} consumer thread waiting for a core %"] = lambda results, wid=w.id: _share_of_read(
                results.get(wid, {}), "consumer_thread_runqueue_s")
        elif w.kind == "consume" and w.tool == "java":
            pick[f"{w.id} load generator JVM CPU s"] = field(w.id, "jvm_cpu_s")
        elif w.kind == "e2e":
            pick[f"{w.id} p99 ms"] = field(w.id, "p99_ms")
            pick[f"{w.id} p50 ms"] = field(w.id, "p50_ms")
    for key in ("node RSS MB (median node)", "cluster RSS MB (all nodes)"):
        pick[key] = field("rss", key)
    for key in ("catch-up MB/s (behind / serving to full ISR)", "catch-up: restart to full ISR s"):
        pick[key] = field("catch-up", key)
    pick["failover: leader SIGKILL to first ack s"] = field("failover", "failover: leader SIGKILL to first ack s")
    rows: dict[str, dict[str, float]] = {}
    for figure, get in pick.items():
        row: dict[str, float] = {}
        for system in ("klog", "kafka"):
            values = [v for s in data["sessions"] if s["broker"] == system
                      for v in [get(s["results"])] if isinstance(v, (int, float))]
            if values:
                row[system] = float(statistics.median(values))
        if row.get("klog") is not None and row.get("kafka"):
            row["ratio"] = row["klog"] / row["kafka"]
        rows[figure] = row
    return rows


def _share_of_read(result: dict[str, Any], key: str) -> float | None:
    value, seconds = result.get(key), result.get("seconds")
    if isinstance(value, (int, float)) and value == value and isinstance(seconds, (int, float)) and seconds > 0:
        return value / seconds * 100
    return None


def consume_ceiling(data: dict[str, Any]) -> float | None:
    """The highest klog/Kafka ratio the confluent-kafka consume figure could show in these runs: Kafka's read
    time over the CPU the consumer's own thread spent on klog's read (the same work whichever broker serves;
    the read cannot take less). Median over the runs."""
    wid = next(w.id for w in matrix() if w.kind == "consume" and w.tool == "confluent")
    ceilings = []
    for run in {s["run"] for s in data["sessions"]}:
        by = {s["broker"]: s["results"].get(wid, {}) for s in data["sessions"] if s["run"] == run}
        kafka_s, klog_cpu = by.get("kafka", {}).get("seconds"), by.get("klog", {}).get("consumer_thread_cpu_s")
        if isinstance(kafka_s, (int, float)) and isinstance(klog_cpu, (int, float)) and klog_cpu > 0:
            ceilings.append(kafka_s / klog_cpu)
    return float(statistics.median(ceilings)) if ceilings else None


def _measurement_values(data: dict[str, Any], key: str) -> list[float]:
    """``key``'s value in every measurement of every session that recorded it."""
    return [r[key] for s in data["sessions"] for r in s["results"].values()
            if isinstance(r, dict) and isinstance(r.get(key), (int, float))]


def markdown(data: dict[str, Any]) -> str:
    rows = headline(data)
    # results from before one-at-a-time runs existed had both clusters up together
    together = data.get("together", True)
    lines = [SECTION_BEGIN, "## 3-node cluster (replication factor 3)", "",
             f"`make sidebyside-cluster` ({data['generated']}, {data['runs']} paired run(s), scale {data['scale']}): "
             f"a 3-node klog cluster and a 3-node Apache Kafka cluster (KRaft combined nodes, "
             f"`min.insync.replicas={MIN_INSYNC_REPLICAS}`) from the same properties, " + (
                 "both up at once, each measurement on one and then on the other." if together else
                 "one up at a time: in each run one cluster is started, measured on every workload and stopped, then "
                 "the other (which goes first alternates from run to run), so neither's background work runs on the "
                 "cores the other is measured on.") + " Medians over the runs; ratios are klog/Kafka.", "",
             "| figure | klog | Kafka | klog/Kafka | target |", "|---|---|---|---|---|"]
    for figure, row in rows.items():
        if not row:   # a figure these results do not have (recorded by a later version of the harness)
            continue
        target = TARGETS.get(figure)
        verdict = ""
        if target and "ratio" in row:
            direction, bound = target
            met = row["ratio"] >= bound if direction == "higher" else row["ratio"] <= bound
            verdict = f"{'>=' if direction == 'higher' else '<='} {bound} {'met' if met else 'missed'}"
        cells = [f"{row[s]:,.2f}" if s in row else "-" for s in ("klog", "kafka", "ratio")]
        lines.append(f"| {figure} | {' | '.join(cells)} | {verdict} |")
    loads = _measurement_values(data, "loadavg_1m")
    if loads:
        cores = os.cpu_count() or 1
        lines += ["", f"Machine load (1-minute load average) during the measurements: median {statistics.median(loads):.1f}, "
                  f"max {max(loads):.1f}, on {cores} cores"
                  + (" - more than the cores: other work shared them, and the figures move with it (both clusters "
                     f"were measured under it, {'seconds' if together else 'minutes'} apart)."
                     if statistics.median(loads) > cores else ".")]
    settles = _measurement_values(data, "settle_s")
    if settles:
        settled = sum(1 for v in settles if v < SETTLE_LIMIT_S)
        lines += ["", f"Before each measurement {'both clusters' if together else 'the cluster'} settled (every "
                  f"cluster's CPU over {SETTLE_WINDOW_S} s back "
                  f"within {SETTLE_FACTOR}x of the lowest rate seen from it or {SETTLE_MARGIN} cores above it, at most "
                  f"{SETTLE_LIMIT_S:.0f} s): median {statistics.median(settles):.1f} s, max {max(settles):.1f} s; "
                  f"{settled} of {len(settles)} waits ended before the limit."
                  + (" The other cluster's CPU during each measurement is `peer_cluster_cpu_s` in the JSON."
                     if together else "")]
    errors = [f"{s['broker']} run {s['run']} {what}: {r['error'][:200]}" for s in data["sessions"]
              for what, r in s["results"].items() if isinstance(r, dict) and "error" in r]
    errors += [f"{s['broker']} run {s['run']}: {s['info']['error'][:200]}" for s in data["sessions"]
               if "error" in s["info"]]
    if errors:
        lines += ["", "Failed measurements:", *[f"- {e}" for e in errors]]
    ceiling = consume_ceiling(data)
    if ceiling is not None:
        lines += ["", "Consume: the consumer thread's CPU (confluent-kafka: turning librdkafka's messages into "
                  "Python objects and reading them) is the same work whichever cluster serves, and a read cannot "
                  "take less time than it; its share of the read (busy %) near 100 says the client, not the "
                  "brokers, set the pace; the time it was ready but waited for a core (the brokers and librdkafka's "
                  "threads had both) is given beside it. The confluent-kafka consumer runs with "
                  "`fetch.queue.backoff.ms=10` and its local queue's bound raised past the read (see "
                  "`benches/sidebyside/pyload.py`). Kafka's read time over that CPU on klog's read caps what "
                  f"the ratio could show in these runs: {ceiling:.2f}x (median over the runs). The Java load generator's CPU is "
                  "its whole JVM's, start-up and JIT included."]
    lines += ["", "Failover: the partition's leader is a node other than the active controller, SIGKILLed while an "
              "idempotent `acks=all` confluent-kafka producer writes every 5 ms; the figure is the time to the first "
              "acknowledgement of a record sent after the kill (both clusters fence the dead broker after "
              "`broker.session.timeout.ms=9000`, Kafka's default). Catch-up: a follower is SIGKILLed, "
              f"{RECORD_SIZE} B records are written with `acks=1`, the node is restarted; the rate is the bytes it missed "
              "over the time from its serving again to its return to every partition's ISR. Raw results: "
              f"`docs/{JSON_NAME}`.", SECTION_END]
    return "\n".join(lines) + "\n"


def write_section(performance_md: Path, section: str) -> None:
    """Put ``section`` into ``performance_md`` in place of an earlier one, or at its end."""
    text = performance_md.read_text() if performance_md.exists() else "# Performance: klog vs Apache Kafka\n"
    if SECTION_BEGIN in text and SECTION_END in text:
        head, rest = text.split(SECTION_BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(SECTION_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    performance_md.write_text(text)


def saved_section(docs: Path) -> str:
    """The 3-node section of the last cluster comparison saved in ``docs`` (empty without one): the single-broker
    report keeps it when it rewrites performance.md."""
    import json

    path = docs / JSON_NAME
    return markdown(json.loads(path.read_text())) if path.exists() else ""

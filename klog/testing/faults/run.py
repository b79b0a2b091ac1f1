"""One fault run end to end: cluster, topic, workload, nemesis (the schedule), healing, final read, checker,
plot. ``python -m klog.testing.faults.run --system kafka --seed 7 --faults 20 --out /tmp/run`` (``make
chaos-cluster``); tests call :func:`run` with a schedule of their own.

Files written to ``out``: ``history.jsonl`` (merged), ``history.png``, ``result.json`` (counts, details,
figures), ``schedule.json``, and each node's directory (``node-N/node.log``, data). A run that found an anomaly
also keeps a copy of each node's data dir as it ended (``node-N/data-at-end``), and each transactional finding
carries what kafka-dump-log reads in every replica's files (:mod:`klog.testing.faults.explain`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klog.testing.faults.checker import CheckResult, check
from klog.testing.faults.cluster import SESSION_TIMEOUT_S, FaultCluster
from klog.testing.faults.explain import explain_transactions
from klog.testing.faults.history import HistoryWriter, merge
from klog.testing.faults.schedule import FAULT_KINDS, NETWORK_KINDS, FaultStep, end_s, random_schedule, timeline
from klog.testing.faults.workload import PRODUCER_CLIENT_ORDER, Workload, create_topic, final_read

__all__ = ["KEPT_DATA_DIR", "RunConfig", "RunResult", "run"]

#: where a run that found an anomaly keeps a copy of each node's data dir (``node-N/<this>``; the data dir itself is
#: a filesystem of the node's own, unmounted at the end)
KEPT_DATA_DIR = "data-at-end"


@dataclass
class RunConfig:
    system: str = "kafka"
    nodes: int = 3
    network: bool = True
    dedicated_controller: bool = False
    partitions: int = 3
    replication_factor: int = 3
    topic_config: dict[str, str] = field(default_factory=dict)
    #: explicit replica assignment (list per partition), else the controller's choice
    replica_assignment: list[list[int]] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    producers: int = 2
    #: the producers' clients, taken in turn (confluent-kafka, klog's own client)
    producer_clients: tuple[str, ...] = PRODUCER_CLIENT_ORDER
    consumers: tuple[str, ...] = ("assign", "subscribe")
    #: transactional producers instead (klog.testing.faults.workload), checked for aborted reads, torn and lost
    #: transactions
    transactional: bool = False
    #: the transactional producers' client: "confluent" (librdkafka, transaction protocol v1) or "java" (Apache
    #: Kafka's Java client: protocol v2 where transaction.version 2 is finalized, a new cluster's default)
    txn_client: str = "confluent"
    rate: int = 50
    #: seconds of traffic after the last step healed, before the final read
    settle_s: float = 5.0
    heap: str = "384m"
    #: no fault starts later than this many seconds into the run (a long run that must end in time); the
    #: faults applied are counted in the result
    fault_budget_s: float | None = None


@dataclass
class RunResult:
    check: CheckResult
    out: Path
    faults_applied: int
    dropped_properties: list[str]


def _nemesis(cluster: FaultCluster, steps: Sequence[FaultStep], history: HistoryWriter, topic: str, t0: float,
             stop: threading.Event, errors: list[BaseException], budget_s: float | None = None) -> None:
    """Start and heal each step at its time; steps may overlap (a hand-written schedule). An action that ran
    late (a restarted JVM took long to answer) shifts every later one by as much, so each fault lasts its
    ``duration_s`` and each quiet gap stays as long as planned."""
    done: dict[int, dict[str, Any]] = {}
    shift = 0.0
    try:
        for at, action, i in timeline(steps):
            delay = t0 + shift + at - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            shift += max(0.0, -delay)
            began = time.monotonic()
            if action == "start" and budget_s is not None and began - t0 > budget_s:
                return  # out of time: what started has been healed (run() heals anything else)
            if action == "start":
                done[i] = cluster.apply(steps[i], history, topic)
            elif i in done:
                cluster.heal(steps[i], done.pop(i), history)
            shift += time.monotonic() - began  # a fault counts from when it took effect
    except BaseException as e:  # noqa: BLE001 - reported by run()
        errors.append(e)


def run(out: str | Path, config: RunConfig, steps: Sequence[FaultStep], topic: str = "faults") -> RunResult:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schedule.json").write_text(json.dumps([s.to_json() for s in steps], indent=1))
    cluster = FaultCluster(out, system=config.system, nodes=config.nodes, network=config.network,
                           dedicated_controller=config.dedicated_controller, properties=config.properties,
                           heap=config.heap)
    nemesis_file = out / "history-nemesis.jsonl"
    with cluster:
        if config.replica_assignment is not None:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            fut = admin.create_topics([NewTopic(topic, num_partitions=len(config.replica_assignment),
                                                replica_assignment=config.replica_assignment,
                                                config=config.topic_config)], operation_timeout=60)
            fut[topic].result(60)
        else:
            create_topic(cluster.bootstrap, topic, config.partitions, config.replication_factor, config.topic_config)
        if not cluster.wait_in_sync(topic, config.partitions, 60):
            raise RuntimeError(f"topic {topic} not in sync 60 s after creation")
        workload = Workload(out / "workload", cluster.bootstrap, topic, partitions=config.partitions,
                            producers=config.producers, consumers=config.consumers, rate=config.rate,
                            max_seconds=min(end_s(steps) + 1800.0, 6 * 3600.0),
                            producer_clients=config.producer_clients, transactional=config.transactional,
                            txn_client=config.txn_client)
        stop, errors = threading.Event(), list[BaseException]()
        with HistoryWriter(nemesis_file, "nemesis") as history, workload:
            t0 = time.monotonic()
            nemesis = threading.Thread(target=_nemesis, args=(cluster, steps, history, topic, t0, stop, errors,
                                                                   config.fault_budget_s),
                                       daemon=True)
            nemesis.start()
            try:
                while nemesis.is_alive():
                    nemesis.join(0.5)
            finally:
                stop.set()
                nemesis.join(300)
            cluster.heal_all()
            time.sleep(config.settle_s)
        if errors:
            raise errors[0]
        if workload.crashed():
            raise RuntimeError(f"workload processes failed: {workload.crashed()}")
        # Everything healed and the traffic stopped: wait for the replicas, then read.
        in_sync = cluster.wait_in_sync(topic, config.partitions, 90)
        reads = final_read(cluster.bootstrap, topic, config.partitions)
        replica_logs: dict[int, dict[int, list[tuple[int, Any]]]] = {}
        hws: dict[int, int] = {}
        if in_sync and config.replication_factor > 1:
            for p, records in reads.items():
                hws[p] = (records[-1][0] + 1) if records else 0
                replica_logs[p] = cluster.replica_logs(topic, p)
        events = merge([nemesis_file, *workload.history_files], out / "history.jsonl")
        result = check(events, reads, replica_logs or None, hws or None)
        if not result.valid:   # while the nodes' filesystems are mounted: what their files say, and the files
            data_dirs = {i: node.data_dir for i, node in cluster.nodes.items() if node.is_broker}
            explain_transactions(data_dirs, topic, events, result.details)
            for data_dir in data_dirs.values():
                try:
                    shutil.copytree(data_dir, data_dir.parent / KEPT_DATA_DIR, dirs_exist_ok=True)
                except (OSError, shutil.Error) as exc:   # a file removed while copied (retention): keep the rest
                    print(f"copying {data_dir}: {exc}", flush=True)
    faults = sum(1 for e in events if e.get("f") == "fault" and e.get("phase") == "start")
    summary = {**result.to_json(), "system": config.system, "faults_applied": faults, "replicas_compared": bool(replica_logs),
               "dropped_properties": cluster.dropped_properties}
    (out / "result.json").write_text(json.dumps(summary, indent=1, default=str))
    try:
        from klog.testing.faults.plot import plot_history

        plot_history(events, out / "history.png", title=f"{config.system}: {result.summary()}",
                     lost_acked_at=[int(d["acked_at"]) for d in result.details["lost"]])
    except ImportError:
        pass  # matplotlib is a test extra
    return RunResult(result, out, faults, cluster.dropped_properties)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A seeded fault run against klog or Apache Kafka.")
    parser.add_argument("--system", choices=["kafka", "klog"], default="kafka")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=20, help="number of fault steps")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--loopback", action="store_true", help="no namespaces (no root): process faults only")
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS))
    parser.add_argument("--rate", type=int, default=100, help="sends per second per producer")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds of recovery between two faults")
    parser.add_argument("--max-duration", type=float, default=8.0, help="longest fault, seconds")
    parser.add_argument("--budget", type=float, default=None,
                        help="start no fault after this many seconds (then heal, read and check)")
    parser.add_argument("--transactional", action="store_true",
                        help="transactional producers, checked for aborted reads, torn and lost transactions")
    parser.add_argument("--txn-client", choices=["confluent", "java"], default="confluent",
                        help="the transactional producers' client (java: transaction protocol v2)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k and not (args.loopback and k in NETWORK_KINDS)]
    steps = random_schedule(args.seed, list(range(1, args.nodes + 1)), args.faults, kinds=kinds,
                            quiet_s=args.quiet, session_timeout_s=SESSION_TIMEOUT_S,
                            max_duration_s=args.max_duration)
    print(f"seed {args.seed}: {len(steps)} faults over {end_s(steps):.0f} s against {args.system}", flush=True)
    result = run(args.out, RunConfig(system=args.system, nodes=args.nodes, network=not args.loopback,
                                     rate=args.rate, fault_budget_s=args.budget,
                                     transactional=args.transactional, txn_client=args.txn_client), steps)
    r = result.check
    print(f"{'anomaly':<20}{'count':>8}")
    for k, v in r.counts.items():
        print(f"{k:<20}{v:>8}")
    print(", ".join(f"{k} {v}" for k, v in r.stats.items()))
    print(f"{r.summary()}\nhistory, plot and result in {result.out}")
    raise SystemExit(0 if r.valid else 1)


if __name__ == "__main__":
    main()

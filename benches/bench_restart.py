"""Restart time of a node with many partitions and data, klog vs Apache Kafka 4.x, paired in one run.

Run: ``.venv/bin/python benches/bench_restart.py [--partitions 1000] [--megabytes 1024] [--rounds 3]``
(Kafka's jars from ``.cache/kafka/libs``, see klog.testing.kafka.find_kafka_libs; ``--json FILE`` saves the figures).

One single-node KRaft cluster of each (combined broker+controller, the same properties, Kafka's defaults otherwise:
``num.recovery.threads.per.data.dir`` etc.) gets one topic of ``--partitions`` partitions and ``--megabytes`` of 1 KiB
records (confluent-kafka, acks=all), spread evenly. Then, for each round, klog and Kafka in turn (only one of the two
runs at a time, their restarts seconds apart):

- clean: SIGTERM (a controlled shutdown, the logs closed, ``.kafka_cleanshutdown`` written), then a start; the time
  from the start to (a) the node answering ApiVersions and (b) ListOffsets answering every partition's log end as it
  was before the stop (the node serves all its data). The stop's time is reported too.
- after SIGKILL (reported for contrast): the same start, which runs log recovery from the recovery points.

``/proc/PID/io`` ``rchar`` (bytes the process read through read(2)-like calls, page cache included) at (b) shows what
a start read: a clean start should read no segment data. The data stays in the page cache between rounds (no cache
drop without root): these are warm-cache times.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster

TOPIC = "restart-bench"
RECORD_BYTES = 1024
POLL_S = 0.05


def _fill(cluster: Cluster, partitions: int, megabytes: int) -> dict[int, int]:
    from confluent_kafka import Producer

    deadline = time.monotonic() + 120
    while (answer := cluster.create_topic(TOPIC, partitions, 1, timeout_ms=60_000))[0] != 0:
        assert time.monotonic() < deadline, answer
        time.sleep(0.5)
    cluster.wait_for_topic(TOPIC, partitions, timeout=180)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none"})
    value = b"r" * RECORD_BYTES
    count = megabytes * (1 << 20) // RECORD_BYTES
    failed: list[str] = []
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % partitions,
                                 on_delivery=lambda err, msg: failed.append(str(err)) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0 and not failed, failed[:3]
    return _log_ends(cluster, partitions)


def _log_ends(cluster: Cluster, partitions: int) -> dict[int, int]:
    with cluster.wire(1, timeout=30) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                           for p in range(partitions)]}]})
    return {p.partition_index: int(p.offset) if p.error_code == 0 else -1 for p in answer.topics[0].partitions}


def _rchar(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return -1


def _restart(cluster: Cluster, expected: dict[int, int], how: str) -> dict[str, float]:
    """Stop node 1 (``how``: clean or kill), start it, time it until it serves every partition's log end."""
    started = time.monotonic()
    if how == "clean":
        cluster.stop_node(1)
    else:
        cluster.kill(1)
    stopped = time.monotonic()
    cluster.restart(1)   # returns once the node answers ApiVersions
    serving = time.monotonic()
    while True:
        try:
            if _log_ends(cluster, len(expected)) == expected:
                break
        except (OSError, ConnectionError):
            pass
        assert time.monotonic() - stopped < 600, "not serving every partition after 600 s"
        time.sleep(POLL_S)
    ready = time.monotonic()
    pid = cluster.pid(1)
    return {"stop_s": stopped - started, "api_versions_s": serving - stopped, "all_partitions_s": ready - stopped,
            "rchar_mb": (_rchar(pid) if pid else -1) / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    properties = {**CLUSTER_TIMING, "num.partitions": 1}
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as root:
        clusters: dict[str, Any] = {
            "klog": KlogCluster(Path(root) / "klog", 1, properties=properties),
            "kafka": KafkaCluster(Path(root) / "kafka", 1, properties=properties, heap="1G", startup_timeout=300)}
        expected: dict[str, dict[int, int]] = {}
        try:
            for kind, cluster in clusters.items():
                cluster.start()
                cluster.wait_for_brokers()
                t = time.monotonic()
                expected[kind] = _fill(cluster, args.partitions, args.megabytes)
                print(f"{kind}: {args.partitions} partitions, {args.megabytes} MB written in "
                      f"{time.monotonic() - t:.1f} s", flush=True)
                cluster.stop_node(1)   # only one system runs at a time
            for rnd in range(args.rounds):
                for how in ("clean", "kill"):
                    for kind, cluster in clusters.items():
                        cluster.restart(1)   # from stopped: the node the other system's turn left down
                        figures = _restart(cluster, expected[kind], how)
                        cluster.stop_node(1)
                        results.setdefault(kind, {}).setdefault(how, []).append(figures)
                        print(f"round {rnd + 1} {kind:5} {how:5}: " + ", ".join(
                            f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
        finally:
            for cluster in clusters.values():
                cluster.close()
    print(f"\nmedians over {args.rounds} rounds ({args.partitions} partitions, {args.megabytes} MB, warm page cache):")
    for how in ("clean", "kill"):
        for kind in clusters:
            runs = results[kind][how]
            print(f"  {how:5} {kind:5}: " + ", ".join(
                f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in runs[0]))
    if args.json:
        args.json.write_text(json.dumps({"partitions": args.partitions, "megabytes": args.megabytes,
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # a stopped run still stops its nodes
    sys.exit(main())

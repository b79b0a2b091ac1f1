"""Broker CPU per one-record acks=all Produce on a 3-node RF=3 cluster, with the native Produce path on and off
(``klog.produce.native.enable``), in the same run.

Run: ``PYTHONPATH=. .venv/bin/python benches/bench_native_acks_all.py``. With ``--fetch`` the setting compared is
``klog.fetch.native.enable`` instead (the native Produce path on in both): the replicas' fetches on the native Fetch
path against the Python path (issue 38). ``--serial``: one connection with one request in flight (3,000 a round), so
that every request waits for its own round of follower fetches (at 4 x 16 in flight one fetch carries many
requests' batches).

Two 3-node klog clusters (combined broker,controller nodes, one per setting) serve the same load in alternating
rounds. Node 1 leads every partition of the topic (replicas [1, 2, 3], min.insync.replicas=2); the load generator
(``bench_native_path.drive``: raw sockets, pre-encoded Produce v9 frames of one 100 B record, acks=-1, one
partition per request round robin, pipelined in bursts) sends to node 1 and only counts the answers. Per round: the
leader's CPU (utime + stime from /proc) per request, the three nodes' together (the followers' fetches the
requests cause), requests/s and the load generator's own CPU per request. Medians over ``ROUNDS`` rounds. No target
is asserted (timing under load is not a test).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from bench_native_path import cpu_seconds, drive  # noqa: E402

ROUNDS = 3
TOPIC = "bench-acks-all"
PARTITIONS = 8
CONNECTIONS = 4
BURST = 16
REQUESTS = 10_000
if "--serial" in sys.argv[1:]:
    CONNECTIONS, BURST, REQUESTS = 1, 1, 3_000


def frames(count: int) -> list[bytes]:
    """``count`` pre-encoded one-record Produce v9 frames (acks=all), round robin over the partitions."""
    from klog.protocol import encode_request
    from klog.records import encode_batch

    out = []
    for i in range(count):
        batch = encode_batch([{"key": b"key-%d" % i, "value": b"v" * 100}])
        out.append(encode_request(0, 9, i, "bench-native-acks-all", {
            "transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": i % PARTITIONS, "records": batch}]}]}))
    return out


#: the setting compared: klog.produce.native.enable, or (``--fetch``) klog.fetch.native.enable
SETTING = "klog.fetch.native.enable" if "--fetch" in sys.argv[1:] else "klog.produce.native.enable"


def start(native: bool, root: str) -> Any:
    from klog.protocol import ApiKey
    from klog.testing.cluster import KlogCluster

    cluster = KlogCluster(root, 3, properties={SETTING: native, "max.connections": 5000})
    cluster.start()
    cluster.wait_for_brokers()
    with cluster.wire(1, timeout=45) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": i, "broker_ids": [1, 2 + i % 2, 3 - i % 2]} for i in range(PARTITIONS)],
             "configs": [{"name": "min.insync.replicas", "value": "2"}]}], "timeout_ms": 30000, "validate_only": False})
        assert response.topics[0].error_code == 0, response
    cluster.wait_for_topic(TOPIC, PARTITIONS)
    for i in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, i, [1, 2, 3])
    return cluster


def measure(cluster: Any, payload: list[bytes], connections: int, burst: int, total: int) -> dict[str, float]:
    pids = [cluster.pid(n) for n in (1, 2, 3)]
    cpu0, client0 = [cpu_seconds(p) for p in pids], time.process_time()
    host, port = "127.0.0.1", cluster.client_ports[1]
    wall = drive(host, port, payload, connections, burst, total)
    cpu = [cpu_seconds(p) - c for p, c in zip(pids, cpu0)]
    client = time.process_time() - client0
    return {"leader_us_per_request": cpu[0] / total * 1e6, "cluster_us_per_request": sum(cpu) / total * 1e6,
            "client_us_per_request": client / total * 1e6, "requests_per_s": total / wall,
            "leader_cores": cpu[0] / wall}


def run() -> dict[str, dict[str, float]]:
    payload = frames(4096)
    results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="klog-bench-acks-all-") as root:
        clusters: dict[str, Any] = {}
        try:
            for name, native in (("on", True), ("off", False)):
                clusters[name] = start(native, os.path.join(root, name))
            for cluster in clusters.values():   # warm up: routes learned, files and caches hot
                measure(cluster, payload, 1, BURST, 2000)
            for _ in range(ROUNDS):
                for name, cluster in clusters.items():
                    results[name].append(measure(cluster, payload, CONNECTIONS, BURST, REQUESTS))
        finally:
            for cluster in clusters.values():
                cluster.close()
    return {name: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]} for name, rounds in results.items()}


def report(summary: dict[str, dict[str, float]]) -> str:
    on, off = summary["on"], summary["off"]
    lines = [f"one-record Produce acks=all, 3 nodes RF=3, {CONNECTIONS} connections x {BURST} in flight, {SETTING} "
             f"(load average {os.getloadavg()[0]:.1f})", "| | native off | native on | on/off |", "|---|---|---|---|"]
    for key, label in (("leader_us_per_request", "leader µs CPU/request"),
                       ("cluster_us_per_request", "3 nodes' µs CPU/request"),
                       ("requests_per_s", "requests/s"), ("leader_cores", "leader cores busy"),
                       ("client_us_per_request", "load generator µs CPU/request")):
        lines.append(f"| {label} | {off[key]:.1f} | {on[key]:.1f} | {on[key] / off[key]:.2f}× |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))

"""This build of klog against another build (a refactoring's "behaviour and speed unchanged"), same run, rounds
alternating, each system as real broker processes on 127.0.0.1 driven by the same confluent-kafka code.

Run (the baseline is a source tree with its native extension built or copied in, e.g. a ``git worktree`` of the
commit before the change with ``klog/_native/_core*.so`` copied from a build of that commit)::

    KLOG_BASELINE_TREE=/path/to/old/tree .venv/bin/pytest benches/bench_builds.py -p benchmark -o addopts="" -s

Workloads (ratios this build / baseline, medians of ROUNDS alternating rounds; higher is better for throughput,
lower for latency):
- single-node produce: PRODUCE_RECORDS records of VALUE_SIZE bytes, acks=1, linger 5 ms;
- single-node consume: a consumer reading them back from offset 0;
- 3-node acks=all produce: CLUSTER_RECORDS records to a topic with replication factor 3;
- end-to-end latency: E2E_RATE records/s for E2E_SECONDS on one node, producer to consumer, p50 and p99.

Figures are printed and written to ``.benchmarks/builds.json``. No assertion on times: the machine is shared;
the figures go into the closing note and docs/performance.md.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from klog.testing.cluster import CLUSTER_TIMING, KlogCluster  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402

ROUNDS = int(os.environ.get("KLOG_BENCH_ROUNDS", "3"))
PRODUCE_RECORDS = 200_000
CLUSTER_RECORDS = 50_000
VALUE_SIZE = 100
E2E_RATE = 2_000
E2E_SECONDS = 5.0
THIS_TREE = str(Path(__file__).resolve().parent.parent)
RESULTS = Path(THIS_TREE) / ".benchmarks" / "builds.json"


@contextmanager
def importing_from(tree: str) -> Iterator[None]:
    """Broker processes spawned inside import klog from ``tree`` (PYTHONPATH comes before site-packages)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tree
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def produce(bootstrap: str, topic: str, count: int, acks: str) -> float:
    """Records per second, from the first send to the last delivery report."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                                         "batch.size": 1 << 20, "enable.idempotence": False})
    value = b"v" * VALUE_SIZE
    failed: list[Any] = []

    def delivered(err: Any, _message: Any) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0, "records left unsent"
    elapsed = time.perf_counter() - start
    assert not failed, failed[:3]
    return count / elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    start = None
    deadline = time.monotonic() + 120
    try:
        while seen < count and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    start = start or time.perf_counter()
                    seen += 1
    finally:
        consumer.close()
    assert seen >= count and start is not None, f"read {seen} of {count}"
    return count / (time.perf_counter() - start)


def end_to_end(bootstrap: str, topic: str) -> tuple[float, float]:
    """p50 and p99 milliseconds from produce() to the consumer's poll, at E2E_RATE records/s.

    The producer is warmed up before the timed loop: it creates the topic with a first record and waits for its
    delivery. A fresh librdkafka producer that has learned the brokers from its bootstrap connection before it
    learned about the topic closes that connection and opens one to the partition leader only after its
    sparse-connection throttle (``reconnect.backoff.ms`` / 2, 50 ms) has passed: the first 50 ms of records
    (about 1% of a round at 2,000 records/s) then wait up to 50 ms, and p99 landed at either about 2 ms or about
    50 ms depending on which way that race went (the bimodal p99 seen on every build)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    # the broker creates the topic (a subscription to a missing one waits); the value parses as a send time
    producer.produce(topic, str(time.perf_counter()).encode())
    assert producer.flush(30) == 0, "the warm-up record was not delivered"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"e-{uuid.uuid4().hex[:8]}",
                                         "auto.offset.reset": "latest", "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer got no assignment"
        consumer.poll(0.1)
    consumer.poll(0.5)
    latencies: list[float] = []
    total = int(E2E_RATE * E2E_SECONDS)
    start = time.perf_counter()
    sent = 0
    try:
        while len(latencies) < total and time.perf_counter() - start < E2E_SECONDS + 30:
            due = min(total, int((time.perf_counter() - start) * E2E_RATE))
            while sent < due:
                producer.produce(topic, str(time.perf_counter()).encode())
                sent += 1
            producer.poll(0)
            for message in consumer.consume(1000, 0.001):
                if message.error() is None:
                    latencies.append((time.perf_counter() - float(message.value())) * 1000)
        producer.flush(30)
    finally:
        consumer.close()
    assert len(latencies) >= total * 0.99, f"{len(latencies)} of {total} records arrived"
    quantiles = statistics.quantiles(latencies, n=100)
    return quantiles[49], quantiles[98]


def native_tree_of(pid: int) -> str:
    """The source tree whose native extension the process runs (it proves which build is being measured)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    paths = {line.split()[-1] for line in maps.splitlines() if "/klog/_native/_core" in line}
    assert len(paths) == 1, paths
    return str(Path(paths.pop()).parents[2])


def single_node_round(root: Path) -> dict[str, float]:
    with BrokerProcess(root, {"num.partitions": 1, "auto.create.topics.enable": "true",
                              "offsets.topic.num.partitions": 1}) as broker:
        assert native_tree_of(broker.pid) == os.environ["PYTHONPATH"], "the broker runs another build"
        bootstrap = broker.bootstrap_servers
        topic = f"t-{uuid.uuid4().hex[:8]}"
        produced = produce(bootstrap, topic, PRODUCE_RECORDS, "1")
        consumed = consume(bootstrap, topic, PRODUCE_RECORDS)
        p50, p99 = end_to_end(bootstrap, f"e2e-{uuid.uuid4().hex[:8]}")
    return {"produce_rps": produced, "consume_rps": consumed, "e2e_p50_ms": p50, "e2e_p99_ms": p99}


def cluster_round(root: Path) -> dict[str, float]:
    with KlogCluster(root, 3, properties=CLUSTER_TIMING) as cluster:
        cluster.wait_for_brokers()
        topic = f"r-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, 1, 3)
        cluster.wait_for_isr(topic, 0, cluster.node_ids)
        return {"cluster_acks_all_rps": produce(cluster.bootstrap_servers, topic, CLUSTER_RECORDS, "all")}


def alternate(tmp_path: Path, baseline: str, run: Callable[[Path], dict[str, float]]) -> dict[str, dict[str, float]]:
    rounds: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    for n in range(ROUNDS):
        for name, tree in (("baseline", baseline), ("this", THIS_TREE)) if n % 2 else (("this", THIS_TREE),
                                                                                    ("baseline", baseline)):
            with importing_from(tree):
                rounds[name].append(run(tmp_path / f"{name}-{n}"))
    for name, runs in rounds.items():
        for key in runs[0]:
            print(f"{name:>8} {key:>22}: " + "  ".join(f"{r[key]:.1f}" for r in runs))
    return {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in rounds.items()}


@pytest.mark.timeout(3600)
def test_this_build_against_the_baseline(tmp_path: Path) -> None:
    baseline = os.environ.get("KLOG_BASELINE_TREE")
    if not baseline:
        pytest.skip("set KLOG_BASELINE_TREE to the source tree of the build to compare against")
    assert list(Path(baseline, "klog", "_native").glob("_core*.so")), f"{baseline} has no native extension"
    figures: dict[str, dict[str, float]] = {"this": {}, "baseline": {}}
    for run in (single_node_round, cluster_round):
        for name, values in alternate(tmp_path, baseline, run).items():
            figures[name].update(values)
    ratios = {key: figures["this"][key] / figures["baseline"][key] for key in figures["this"]}
    for key in figures["this"]:
        print(f"{key:>22}: this {figures['this'][key]:12.1f}  baseline {figures['baseline'][key]:12.1f}  "
              f"ratio {ratios[key]:.3f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rounds": ROUNDS, "figures": figures, "ratios": ratios}, indent=2))

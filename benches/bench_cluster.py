"""Control-plane figures of a 3-node cluster in KRaft combined mode (issue 15 item 10), klog and Apache Kafka 4.x
on the same machine in the same run, each as real processes on 127.0.0.1:

- startup: from spawning the three processes to the first acknowledged record (topic created, acks=all);
- topic propagation: from a CreateTopics answer to every node's Metadata listing the topic (median of rounds);
- 1,000 topics: creating them (100 per CreateTopics request, one partition each) until every node lists them;
- controller failover: from SIGKILL of the active controller to a survivor's DescribeQuorum naming a new leader
  (the election), to the next topic creation answered without error (raw CreateTopics retried through the
  survivors), and to a topic created by a confluent-kafka AdminClient started right after the kill (the
  controller it is sent to is Metadata's controller_id: issue 36 item 1);
- broker RSS: each node's resident memory after the 1,000 topics (median node).

Run: ``.venv/bin/pytest benches/bench_cluster.py -p benchmark -o addopts="" -s`` (about 5 minutes). Figures are
printed and written to ``.benchmarks/cluster.json``; ratios are klog / Kafka (time: lower is better). No
absolute-time assertion: the machine is shared.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs
from klog.testing.wire import WireClient

PROPAGATION_ROUNDS = 10
MANY_TOPICS = 1000
TOPICS_PER_REQUEST = 100
DEADLINE_S = 120.0
ZERO_UUID = uuid.UUID(int=0)
RESULTS = Path(__file__).resolve().parent.parent / ".benchmarks" / "cluster.json"
FAILOVER_RESULTS = RESULTS.with_name("cluster-failover.json")
FAILOVER_ROUNDS = 3


#: The same properties for both systems (Kafka's names): the test clusters' fast timing with Kafka-like
#: election and session timeouts.
BENCH_PROPERTIES: dict[str, Any] = {**CLUSTER_TIMING, "controller.quorum.election.timeout.ms": 1000,
                                    "controller.quorum.fetch.timeout.ms": 2000, "broker.session.timeout.ms": 9000}


def klog_cluster(root: Path) -> Cluster:
    return KlogCluster(root, 3, properties=BENCH_PROPERTIES)


def kafka_cluster(root: Path) -> Cluster:
    return KafkaCluster(root, 3, properties=BENCH_PROPERTIES)


# ---- measurements over the wire (the same requests to either system) ----------------------------------------


def create_topics(port: int, names: list[str]) -> dict[str, int]:
    with WireClient("127.0.0.1", port, timeout=60) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for n in names], "timeout_ms": 60000, "validate_only": False})
    return {t.name: t.error_code for t in response.topics}


def listed(port: int, names: list[str]) -> bool:
    with WireClient("127.0.0.1", port) as wire:
        response = wire.request(ApiKey.METADATA, 12, {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
    return all(t.error_code == 0 and t.partitions and t.partitions[0].leader_id >= 0 for t in response.topics)


def quorum_leaders(cluster: Cluster, skip: int | None = None) -> Iterator[int]:
    """The quorum leader each controller listener that answers names in DescribeQuorum (not ``skip``'s)."""
    for node, port in cluster.controller_ports.items():
        if node == skip:
            continue
        try:
            with WireClient("127.0.0.1", port, timeout=5) as wire:
                r = wire.request(ApiKey.DESCRIBE_QUORUM, 1, {"topics": [
                    {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        except OSError:
            continue
        if r.error_code == 0 and r.topics and r.topics[0].partitions[0].error_code == 0:
            leader = r.topics[0].partitions[0].leader_id
            if leader >= 0:
                yield int(leader)


def active_controller(cluster: Cluster) -> int:
    """The quorum leader, from DescribeQuorum on any controller listener that answers."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for leader in quorum_leaders(cluster):
            return leader
        time.sleep(0.05)
    raise TimeoutError("no active controller")


def wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


def create_until_ok(ports: dict[int, int], name: str) -> None:
    """Create ``name`` through any live node until one answers without error (the time a client sees)."""
    def attempt() -> bool:
        for port in ports.values():
            try:
                if create_topics(port, [name])[name] in (0, 36):   # 36: TOPIC_ALREADY_EXISTS (an earlier try)
                    return True
            except OSError:
                pass
        return False
    wait(attempt, f"create {name}")


def first_record(port: int, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "message.timeout.ms": 60000})
    errors: list[Any] = []
    producer.produce(topic, value=b"first", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(60)
    assert errors == [None], errors


def measure(start: Callable[[Path], Cluster], root: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    with start(root) as cluster:
        began = cluster.spawned_at   # Kafka's format step (kafka-storage format) is not counted
        ports = dict(cluster.client_ports)
        topic = f"first-{uuid.uuid4().hex[:6]}"
        create_until_ok(ports, topic)
        wait(lambda: listed(next(iter(ports.values())), [topic]), "first topic listed")
        first_record(next(iter(ports.values())), topic)
        figures["startup to first record s"] = time.monotonic() - began

        controller = active_controller(cluster)
        delays = []
        for r in range(PROPAGATION_ROUNDS):
            name = f"prop-{r}-{uuid.uuid4().hex[:6]}"
            assert create_topics(ports[controller], [name])[name] == 0
            answered = time.monotonic()
            for port in ports.values():
                wait(lambda port=port: listed(port, [name]), f"{name} listed")
            delays.append(time.monotonic() - answered)
        figures["topic propagation to every node ms"] = statistics.median(delays) * 1000

        names = [f"many-{i:04d}-{uuid.uuid4().hex[:4]}" for i in range(MANY_TOPICS)]
        began = time.monotonic()
        for i in range(0, MANY_TOPICS, TOPICS_PER_REQUEST):
            chunk = names[i:i + TOPICS_PER_REQUEST]
            codes = create_topics(ports[controller], chunk)
            assert set(codes.values()) == {0}, codes
        for port in ports.values():
            wait(lambda port=port: all(listed(port, names[i:i + 200]) for i in range(0, MANY_TOPICS, 200)),
                 "1,000 topics listed")
        figures["create 1,000 topics s"] = time.monotonic() - began
        figures["broker RSS MB (median node)"] = statistics.median(
            cluster.rss_bytes(i) for i in ports) / 1e6

        figures.update(controller_failover(cluster, controller))
    return figures


def new_leader_elected(cluster: Cluster, killed: int) -> bool:
    """A survivor's controller listener names a quorum leader other than ``killed`` (DescribeQuorum)."""
    return any(leader != killed for leader in quorum_leaders(cluster, skip=killed))


def admin_client_create(bootstrap: str, name: str) -> None:
    """confluent-kafka's AdminClient, started now, creates ``name`` (one request, its own timeout and retries)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], request_timeout=60)[name].result(70)


def controller_failover(cluster: Cluster, controller: int) -> dict[str, float]:
    """SIGKILL of the active controller, then, at once and side by side: a survivor's DescribeQuorum polled until
    it names a new leader (the election), a raw CreateTopics retried through the survivors, and a fresh
    confluent-kafka AdminClient bootstrapping from every node (the dead one too) creating a topic. Seconds from
    the kill to each."""
    from concurrent.futures import ThreadPoolExecutor

    live = {i: p for i, p in cluster.client_ports.items() if i != controller}
    killed = time.monotonic()   # at the signal: kill() returns once the process is reaped, which for a JVM
    cluster.kill(controller)    # (its heap unmapped) takes longer than for klog and would favour it

    def since_kill(run: Callable[[], None]) -> float:
        run()
        return time.monotonic() - killed

    with ThreadPoolExecutor(3) as pool:
        elected = pool.submit(since_kill, lambda: wait(lambda: new_leader_elected(cluster, controller), "election"))
        created = pool.submit(since_kill, lambda: create_until_ok(live, f"after-failover-{uuid.uuid4().hex[:6]}"))
        admin = pool.submit(since_kill, lambda: admin_client_create(cluster.bootstrap_servers,
                                                                    f"admin-after-failover-{uuid.uuid4().hex[:6]}"))
        return {"controller election (DescribeQuorum names a new leader) s": elected.result(),
                "controller failover to next topic create s": created.result(),
                "controller failover to AdminClient create s": admin.result()}


def failover_round(start: Callable[[Path], Cluster], root: Path) -> dict[str, float]:
    """A fresh cluster: once it creates topics, the controller failover figures."""
    with start(root) as cluster:
        create_until_ok(dict(cluster.client_ports), f"first-{uuid.uuid4().hex[:6]}")
        cluster.wait_for_brokers()
        return controller_failover(cluster, active_controller(cluster))


def report(rows: dict[str, dict[str, float]], results: Path = RESULTS) -> None:
    names = list(rows)
    keys = list(rows[names[0]])
    print()
    width = max(45, *(len(k) + 1 for k in keys))
    print(f"{'figure':{width}s}" + "".join(f"{n:>14s}" for n in names) + ("   klog/Kafka" if len(names) == 2 else ""))
    for k in keys:
        line = f"{k:{width}s}" + "".join(f"{rows[n][k]:14.2f}" for n in names)
        if len(names) == 2 and rows[names[1]][k]:
            line += f"{rows[names[0]][k] / rows[names[1]][k]:13.2f}"
        print(line)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(rows, indent=2) + "\n")


def test_cluster_control_plane_figures(tmp_path: Path) -> None:
    rows = {"klog": measure(klog_cluster, tmp_path / "klog")}
    try:
        find_kafka_libs()
    except KafkaStartError as exc:   # the klog figures alone, said so
        print(f"Apache Kafka side skipped: {exc}")
    else:
        rows["kafka"] = measure(kafka_cluster, tmp_path / "kafka")
    report(rows)


@pytest.mark.timeout(1800)
def test_controller_failover_figures(tmp_path: Path) -> None:
    """Only the controller failover, FAILOVER_ROUNDS times on each system, alternating which goes first; the
    medians (and every round's figures in the JSON). Run: ``... benches/bench_cluster.py -k failover``."""
    try:
        find_kafka_libs()
    except KafkaStartError as exc:
        print(f"Apache Kafka side skipped: {exc}")
        starts: dict[str, Callable[[Path], Cluster]] = {"klog": klog_cluster}
    else:
        starts = {"klog": klog_cluster, "kafka": kafka_cluster}
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in starts}
    for r in range(FAILOVER_ROUNDS):
        for kind in (list(starts) if r % 2 == 0 else list(reversed(starts))):
            rounds[kind].append(failover_round(starts[kind], tmp_path / f"{kind}-{r}"))
            print(kind, r, rounds[kind][-1])
    rows = {kind: {k: statistics.median(f[k] for f in found) for k in found[0]} for kind, found in rounds.items()}
    report(rows, FAILOVER_RESULTS)
    FAILOVER_RESULTS.write_text(json.dumps({"median": rows, "rounds": rounds}, indent=2) + "\n")

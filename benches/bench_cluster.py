"""Control-plane figures of a 3-node cluster in KRaft combined mode (issue 15 item 10), klog and Apache Kafka 4.x
on the same machine in the same run, each as real processes on 127.0.0.1:

- startup: from spawning the three processes to the first acknowledged record (topic created, acks=all);
- topic propagation: from a CreateTopics answer to every node's Metadata listing the topic (median of rounds);
- 1,000 topics: creating them (100 per CreateTopics request, one partition each) until every node lists them;
- controller failover: from SIGKILL of the active controller to the next topic creation answered without error;
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from klog.protocol import ApiKey
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient

PROPAGATION_ROUNDS = 10
MANY_TOPICS = 1000
TOPICS_PER_REQUEST = 100
DEADLINE_S = 120.0
ZERO_UUID = uuid.UUID(int=0)
RESULTS = Path(__file__).resolve().parent.parent / ".benchmarks" / "cluster.json"


class Cluster(Protocol):
    """What the bench needs of a running 3-node cluster, klog's or Kafka's."""

    def client_ports(self) -> dict[int, int]: ...

    def controller_ports(self) -> dict[int, int]: ...

    def kill(self, node: int) -> None: ...

    def rss_bytes(self, node: int) -> int: ...


class KlogCluster:
    def __init__(self, quorum: ControllerQuorum) -> None:
        self.quorum = quorum

    def client_ports(self) -> dict[int, int]:
        return {i: n.port for i, n in self.quorum.nodes.items() if n.proc is not None and n.proc.poll() is None}

    def controller_ports(self) -> dict[int, int]:
        return dict(self.quorum.controller_ports)

    def kill(self, node: int) -> None:
        self.quorum.kill(node)

    def rss_bytes(self, node: int) -> int:
        return self.quorum.nodes[node].rss_bytes()


@contextmanager
def klog_cluster(root: Path) -> Iterator[KlogCluster]:
    with ControllerQuorum(root, 3, roles="broker,controller",
                          properties={"controller.quorum.election.timeout.ms": 1000,
                                      "controller.quorum.fetch.timeout.ms": 2000,
                                      "broker.session.timeout.ms": 9000}) as q:
        yield KlogCluster(q)


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


def active_controller(cluster: Cluster) -> int:
    """The quorum leader, from DescribeQuorum on any controller listener that answers."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for port in cluster.controller_ports().values():
            try:
                with WireClient("127.0.0.1", port, timeout=5) as wire:
                    r = wire.request(ApiKey.DESCRIBE_QUORUM, 1, {"topics": [
                        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
            except OSError:
                continue
            if r.error_code == 0 and r.topics[0].partitions[0].error_code == 0:
                leader = r.topics[0].partitions[0].leader_id
                if leader >= 0:
                    return int(leader)
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


def measure(start: Callable[[Path], Any], root: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    began = time.monotonic()
    with start(root) as cluster:
        ports = cluster.client_ports()
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

        cluster.kill(controller)
        killed = time.monotonic()
        live = {i: p for i, p in ports.items() if i != controller}
        create_until_ok(live, f"after-failover-{uuid.uuid4().hex[:6]}")
        figures["controller failover to next topic create s"] = time.monotonic() - killed
    return figures


def report(rows: dict[str, dict[str, float]]) -> None:
    names = list(rows)
    keys = list(rows[names[0]])
    print()
    print(f"{'figure':45s}" + "".join(f"{n:>14s}" for n in names) + ("   klog/Kafka" if len(names) == 2 else ""))
    for k in keys:
        line = f"{k:45s}" + "".join(f"{rows[n][k]:14.2f}" for n in names)
        if len(names) == 2 and rows[names[1]][k]:
            line += f"{rows[names[0]][k] / rows[names[1]][k]:13.2f}"
        print(line)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2) + "\n")


def test_cluster_control_plane_figures(tmp_path: Path) -> None:
    rows = {"klog": measure(klog_cluster, tmp_path / "klog")}
    report(rows)

"""Consumer groups with real clients against the real ``klog-broker`` process.

confluent-kafka (librdkafka), kafka-python and aiokafka consumers run as separate processes
(tests/groups_worker.py) sharing topics; they are stopped, SIGKILLed and restarted while the tests watch
partitions move. Bounded: short session timeouts (6 s), small record counts, every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from klog.testing.process import BrokerProcess

HERE = Path(__file__).resolve().parent
SESSION_MS = 6000
#: How long after a member dies its partitions may take to reach survivors: the session timeout plus a
#: rebalance round (JoinGroup/SyncGroup) and client poll slack.
MOVE_BOUND_S = SESSION_MS / 1000 + 6
#: One condition for every worker's events, so a wait on several workers wakes on any of them.
EVENTS = threading.Condition()


class Worker:
    """One consumer process; collects its JSON events."""

    def __init__(self, lib: str, bootstrap: str, topic: str, group: str, *, instance: str | None = None,
                 assignor: str | None = None) -> None:
        if lib.startswith("java-"):
            from groups_support import kafka_classpath

            cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", kafka_classpath(),
                   str(HERE / "java" / "GroupConsumer.java"), bootstrap, topic, group, lib[len("java-"):], "150"]
            if instance:
                cmd.append(instance)
        else:
            cmd = [sys.executable, str(HERE / "groups_worker.py"), lib, bootstrap, topic, group,
                   "--session-ms", str(SESSION_MS), "--max-seconds", "150"]
            if instance:
                cmd += ["--instance", instance]
            if assignor:
                cmd += ["--assignor", assignor]
        self.name = instance or f"{lib}-{id(self) % 10000}"
        # The KIP-848 Java consumer calls its rebalance listener with increments, as cooperative clients do.
        self._incremental = lib == "java-consumer" or assignor == "cooperative-sticky"
        import tempfile

        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.events: list[dict] = []
        self.cond = EVENTS
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["t"] = time.monotonic()
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()
        with self.cond:
            self.events.append({"ev": "exit", "t": time.monotonic()})
            self.cond.notify_all()

    def wait(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                result = predicate(self)
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: timed out waiting for {what}; last events "
                                         f"{[e for e in self.events if e['ev'] != 'rec'][-6:]}; "
                                         f"stderr: {self.stderr_tail()}")
                self.cond.wait(left)

    def stderr_tail(self, n: int = 2000) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-n:]

    def assignment(self) -> set[int] | None:
        """Current partitions per the rebalance callbacks (None before the first assignment)."""
        current: set[int] | None = None
        for e in list(self.events):
            if e["ev"] == "assigned":
                current = (current or set()) | set(e["partitions"]) if self._incremental else set(e["partitions"])
            elif e["ev"] == "revoked" and current is not None:
                current -= set(e["partitions"])
        return current

    _incremental = False

    def records(self) -> list[dict]:
        return [e for e in list(self.events) if e["ev"] == "rec"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups-clients"), {"num.partitions": 6}) as b:
        yield b


@pytest.fixture
def workers():
    started: list[Worker] = []
    yield started
    for w in started:
        w.terminate()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0, keys: int = 12) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for i in range(start, start + count):
        key = f"k{i % keys}"
        p.produce(topic, key=key.encode(), value=f"{key}:{i}".encode())
    assert p.flush(30) == 0


def covers(ws: list[Worker], partitions: int):
    """Predicate: the live workers' assignments are disjoint and cover every partition."""
    def check(_w):
        seen: list[int] = []
        for w in ws:
            a = w.assignment()
            if a is None:
                return False
            seen.extend(a)
        return sorted(seen) == list(range(partitions))
    return check


def wait_covered(ws: list[Worker], partitions: int, timeout: float) -> float:
    start = time.monotonic()
    ws[0].wait(covers(ws, partitions), timeout, f"assignments of {[w.name for w in ws]} to cover {partitions}")
    # Then every member stays stable for a moment (the group is not mid-rebalance).
    time.sleep(1.0)
    ws[0].wait(covers(ws, partitions), timeout, "stable assignment")
    return time.monotonic() - start


def start_group(workers: list[Worker], bootstrap: str, topic: str, partitions: int, group: str, kinds: list[str],
                timeout: float) -> list[Worker]:
    """Creates ``topic``, starts a consumer process of each kind in ``group`` (added to the ``workers`` fixture,
    which stops them) and waits until they split every partition between them."""
    create_topic(bootstrap, topic, partitions)
    ws = [Worker(kind, bootstrap, topic, group) for kind in kinds]
    workers.extend(ws)
    wait_covered(ws, partitions, timeout)
    return ws


def produce_and_consume(ws: list[Worker], bootstrap: str, topic: str, count: int, timeout: float,
                        start: int = 0) -> None:
    """Produces ``count`` keyed records (numbered from ``start``) and waits until the workers consumed each."""
    produce(bootstrap, topic, count, start=start)
    wait_consumed(ws, {f"k{i % 12}:{i}" for i in range(start, start + count)}, timeout)


def consumed(ws: list[Worker]) -> list[dict]:
    return [r for w in ws for r in w.records()]


def wait_consumed(ws: list[Worker], values: set[str], timeout: float) -> None:
    def done(_w):
        return values <= {r["v"] for r in consumed(ws)}
    ws[0].wait(done, timeout, f"{len(values)} records consumed")


def assert_per_partition_order(ws: list[Worker]) -> None:
    """Within each consumer, offsets of a partition only grow, and each key's values arrive in order."""
    for w in ws:
        last_offset: dict[int, int] = {}
        last_seq: dict[str, int] = {}
        for r in w.records():
            assert r["o"] > last_offset.get(r["p"], -1), f"{w.name}: partition {r['p']} went backwards"
            last_offset[r["p"]] = r["o"]
            key, seq = r["v"].split(":")
            assert int(seq) > last_seq.get(key, -1), f"{w.name}: key {key} out of order"
            last_seq[key] = int(seq)


def test_three_consumer_processes_share_a_topic_each_record_once_in_order_and_survive_sigkill(broker, workers):
    bs = broker.bootstrap_servers
    ws = start_group(workers, bs, "shared", 6, "g-shared", ["confluent"] * 3, 40)
    produce_and_consume(ws, bs, "shared", 600, 30)
    recs = consumed(ws)
    assert len(recs) == 600, "steady state: every record exactly once"
    assert len({(r["p"], r["o"]) for r in recs}) == 600
    assert_per_partition_order(ws)
    assert all(w.records() for w in ws), "every member got a share"

    # SIGKILL one member: its partitions reach the survivors within the session timeout (+ a rebalance).
    victim, survivors = ws[2], ws[:2]
    orphaned = victim.assignment()
    killed_at = time.monotonic()
    victim.kill()
    moved = wait_covered(survivors, 6, MOVE_BOUND_S + 10)
    elapsed = time.monotonic() - killed_at - 1.0  # minus wait_covered's stability pause
    assert elapsed < MOVE_BOUND_S, f"partitions {orphaned} took {elapsed:.1f}s to move"
    produce_and_consume(survivors, bs, "shared", 300, 30, start=600)
    assert_per_partition_order(survivors)
    after = [r for r in consumed(survivors) if int(r["v"].split(":")[1]) >= 600]
    assert len(after) == 300

    # A clean leave (LeaveGroup) moves partitions without waiting for a session timeout.
    left_at = time.monotonic()
    survivors[1].terminate()
    wait_covered(survivors[:1], 6, 15)
    assert time.monotonic() - left_at - 1.0 < SESSION_MS / 1000, "a LeaveGroup must not wait for the session"
    del moved


def test_confluent_kafka_python_and_aiokafka_members_share_one_group(broker, workers):
    bs = broker.bootstrap_servers
    ws = start_group(workers, bs, "mixed", 6, "g-mixed", ["confluent", "kafka-python", "aiokafka"], 60)
    produce_and_consume(ws, bs, "mixed", 300, 40)
    recs = consumed(ws)
    assert len(recs) == 300 and len({(r["p"], r["o"]) for r in recs}) == 300
    assert_per_partition_order(ws)


def test_cooperative_sticky_rebalance_only_revokes_partitions_that_move(broker, workers):
    bs = broker.bootstrap_servers
    create_topic(bs, "coop", 6)
    a = Worker("confluent", bs, "coop", "g-coop", assignor="cooperative-sticky")
    b = Worker("confluent", bs, "coop", "g-coop", assignor="cooperative-sticky")
    for w in (a, b):
        w._incremental = True
    workers.extend([a, b])
    wait_covered([a, b], 6, 40)
    before = {w.name: set(w.assignment() or ()) for w in (a, b)}
    c = Worker("confluent", bs, "coop", "g-coop", assignor="cooperative-sticky")
    c._incremental = True
    workers.append(c)
    wait_covered([a, b, c], 6, 40)
    for w in (a, b):
        kept = before[w.name] & (w.assignment() or set())
        revoked = {p for e in w.events if e["ev"] == "revoked" for p in e["partitions"]}
        assert revoked.isdisjoint(kept), f"{w.name} revoked partitions it kept: incremental rebalancing broke"
        assert kept, f"{w.name} kept nothing: not sticky"
    assert len(c.assignment() or ()) == 2


def test_a_static_member_restarts_without_a_rebalance_and_is_dropped_after_its_session(broker, workers):
    bs = broker.bootstrap_servers
    create_topic(bs, "static", 4)
    s1 = Worker("confluent", bs, "static", "g-static", instance="static-1")
    s2 = Worker("confluent", bs, "static", "g-static", instance="static-2")
    workers.extend([s1, s2])
    wait_covered([s1, s2], 4, 40)
    s2_parts = s2.assignment()
    s1_events = len(s1.events)
    s2.kill()  # no LeaveGroup: a static member just goes away
    time.sleep(1)
    s2b = Worker("confluent", bs, "static", "g-static", instance="static-2")
    workers.append(s2b)
    s2b.wait(lambda w: w.assignment() is not None, 30, "restarted static member assignment")
    assert s2b.assignment() == s2_parts, "a restarted static member gets its partitions back"
    time.sleep(SESSION_MS / 1000 + 2)  # long enough for a session timeout or a rebalance to show
    changes = [e for e in s1.events[s1_events:] if e["ev"] in ("assigned", "revoked")]
    assert changes == [], f"the other member saw a rebalance: {changes}"
    # Gone for longer than its session: the group rebalances and s1 takes everything.
    s2b.kill()
    wait_covered([s1], 4, MOVE_BOUND_S + 10)


def test_committed_offsets_and_metadata_survive_a_broker_restart(tmp_path):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    with BrokerProcess(tmp_path / "data", {"num.partitions": 3}) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "durable", 3)
        produce(bs, "durable", 30)
        c = KafkaConsumer(bootstrap_servers=bs, group_id="g-durable", enable_auto_commit=False)
        offsets = {TopicPartition("durable", p): OffsetAndMetadata(5 + p, f"meta-{p} ✓", -1) for p in range(3)}
        c.commit(offsets)
        c.close()
        b.restart()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        got = admin.list_group_offsets("g-durable")["g-durable"]
        admin.close()
        assert {tp.partition: (om.offset, om.metadata) for tp, om in got.items()} == {
            p: (5 + p, f"meta-{p} ✓") for p in range(3)}
        # A consumer of the group resumes from them.
        c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="g-durable", enable_auto_commit=False)
        assert c.committed(TopicPartition("durable", 2)) == 7
        c.close()

"""Kafka Streams with ``processing.guarantee=exactly_once_v2``, unchanged (tests/java/WordCountEos.java, the
kafka-streams jar from Maven Central), on a 3-node cluster while the transaction coordinator of one of its stream
threads' producers is SIGKILLed mid-run: the word counts a read_committed consumer reads are exact, each word's
counts only ever go up, and the last one is the number of times the word was written. The same script runs on klog
and on Apache Kafka 4.3."""

from __future__ import annotations

import random
import signal
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster
from klog.testing.cluster_api import Cluster
from klog.testing.kafka import KafkaCluster, find_kafka_libs

pytestmark = [pytest.mark.java, pytest.mark.timeout(420)]

HERE = Path(__file__).resolve().parent
#: the internal topics replicated on every node (Kafka's test nodes default them to one replica): a killed coordinator's
#: partitions move to a survivor
PROPERTIES = {**CLUSTER_TIMING, "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
              "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
              "offsets.topic.replication.factor": 3, "default.replication.factor": 3,
              "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}
PARTITIONS = 3
WORDS = [f"w{i:02d}" for i in range(40)]
WORDS_PER_LINE = 8
#: lines written before the application starts and after the kill: the kill lands while it works through the first
LINES_BEFORE, LINES_AFTER = 3000, 1500
#: how long the counts may take to reach their totals after the last line is written (coordinator failover, the
#: transaction timeout of a producer that lost its coordinator, a Streams thread's retries)
SETTLE_S = 150.0


def java_app(tmp: Path, *args: str) -> tuple[subprocess.Popen[str], list[dict], threading.Thread]:
    """tests/java/WordCountEos.java compiled with javac (once per ``tmp``) and started: the process, its JSON events
    and their reader."""
    import json

    libs = find_kafka_libs()
    classes = tmp / "classes"
    if not (classes / "WordCountEos.class").exists():
        classes.mkdir(exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{libs}/*",
                        str(HERE / "java" / "WordCountEos.java")], check=True, capture_output=True, timeout=180)
    stderr = tempfile.NamedTemporaryFile(mode="w+", dir=tmp, prefix="streams-", suffix=".log", delete=False)
    proc = subprocess.Popen(["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                             "-cp", f"{classes}:{libs}/*", "WordCountEos", *args],
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    events: list[dict] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return proc, events, reader


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    """Idempotent, acks=all: each line lands exactly once (a delivery error fails the test)."""
    failed: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120000})
    for n, line in enumerate(lines):
        producer.produce(topic, key=str(n).encode(), value=line.encode(),
                         on_delivery=lambda err, _msg: failed.append(err) if err is not None else None)
        producer.poll(0)
    assert producer.flush(150) == 0, "input lines were not delivered"
    assert not failed, failed[:3]


class CommittedCounts:
    """A read_committed consumer of the output topic, running in the background: every (word, count) in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "enable.partition.eof": True})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.seen: list[tuple[str, int]] = []
        self.latest: dict[str, int] = {}
        self.at_end: set[int] = set()
        self.cond = threading.Condition()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                message = self.consumer.poll(0.2)
                if message is None:
                    continue
                with self.cond:
                    if message.error():
                        if message.error().code() == KafkaError._PARTITION_EOF:
                            self.at_end.add(message.partition())
                            self.cond.notify_all()
                        continue
                    self.at_end.discard(message.partition())
                    word, count = message.key().decode(), struct.unpack(">q", message.value())[0]
                    self.seen.append((word, count))
                    self.latest[word] = count
                    self.cond.notify_all()
        finally:
            self.consumer.close()

    def wait(self, done, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: done(self), timeout)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def streams_coordinators(cluster: Cluster, application_id: str) -> Counter[int]:
    """Node -> how many of the application's transactional ids it coordinates (ListTransactions goes to every
    broker and each lists the transactions it coordinates, as ``kafka-transactions list`` asks)."""
    found: Counter[int] = Counter()
    for node in cluster.live_nodes():
        try:
            with cluster.wire(node) as wire:
                listed = wire.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        except OSError:
            continue
        found[node] += sum(1 for t in listed.transaction_states if t.transactional_id.startswith(application_id))
    return +found


def check_counts(seen: list[tuple[str, int]], expected: Counter[str]) -> None:
    by_word: dict[str, list[int]] = {}
    for word, count in seen:
        by_word.setdefault(word, []).append(count)
    for word, counts in by_word.items():
        # one word's counts are in one partition, in order: an aborted or duplicated update would show as a step back
        assert all(a < b for a, b in zip(counts, counts[1:])), f"{word}'s counts go back: {counts}"
    assert {w: c[-1] for w, c in by_word.items()} == dict(expected)


def make_cluster(kind: str, root: Path) -> Cluster:
    if kind == "klog":
        return KlogCluster(root, 3, properties=PROPERTIES)
    try:
        find_kafka_libs()
    except Exception as exc:  # noqa: BLE001 - any reason the jars cannot be found
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    return KafkaCluster(root, 3, properties=PROPERTIES, heap="384m")


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_streams_exactly_once_v2_word_counts_are_exact_across_a_coordinator_sigkill(tmp_path, kind):
    rng = random.Random(34)
    lines = [" ".join(rng.choice(WORDS) for _ in range(WORDS_PER_LINE)) for _ in range(LINES_BEFORE + LINES_AFTER)]
    expected = Counter(word for line in lines for word in line.split())
    app_id = f"wc-eos-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-lines", f"{app_id}-counts"
    started = time.monotonic()
    with make_cluster(kind, tmp_path / "cluster") as cluster:
        cluster.wait_for_brokers()
        for topic in (source, sink):
            assert cluster.create_topic(topic, PARTITIONS, 3)[0] == 0
            cluster.wait_for_topic(topic, PARTITIONS)
        produce_lines(cluster.bootstrap_servers, source, lines[:LINES_BEFORE])
        counts = CommittedCounts(cluster.bootstrap_servers, sink)
        proc, events, reader = java_app(tmp_path, cluster.bootstrap_servers, source, sink, app_id,
                                        str(tmp_path / "state"), "3", str(int(SETTLE_S + 120)))
        try:
            # mid-run: the first counts are committed, the first lines far from all counted
            assert counts.wait(lambda c: len(c.seen) > 0, 120), f"no counts committed; app events: {events}"
            coordinators = streams_coordinators(cluster, app_id)
            assert coordinators, "ListTransactions shows no transactional id of the application"
            victim = coordinators.most_common(1)[0][0]
            progress = sum(counts.latest.values())
            cluster.kill(victim)
            assert progress < sum(expected.values()) * LINES_BEFORE // len(lines), "the kill came after the work"
            survivors = ",".join(cluster.node_bootstrap(n) for n in cluster.node_ids if n != victim)
            produce_lines(survivors, source, lines[LINES_BEFORE:])
            settled = counts.wait(lambda c: c.latest == dict(expected) or any(
                c.latest.get(w, 0) > n for w, n in expected.items()), SETTLE_S)
            seen = list(counts.seen)
            assert proc.poll() is None, f"the Streams application exited: {events}"
        finally:
            counts.stop()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            reader.join(10)
        errors = [e for e in events if e.get("ev") == "error"]
        print(f"{kind}: killed node {victim} (coordinator of {coordinators[victim]} of {sum(coordinators.values())}"
              f" transactional ids) at {progress} of {sum(expected.values())} words counted; {len(seen)} committed"
              f" updates; stream thread errors: {errors}; {time.monotonic() - started:.0f} s")
        assert settled, f"counts did not reach the totals in {SETTLE_S} s: {len(seen)} updates, events {events}"
        check_counts(seen, expected)
        # everything committed, read again from the start by a new read_committed consumer once the app is stopped
        again = CommittedCounts(survivors, sink)
        try:
            assert again.wait(lambda c: c.at_end == set(range(PARTITIONS)), 60), "the output was not read to its end"
            check_counts(list(again.seen), expected)
        finally:
            again.stop()


def stop_app(proc: subprocess.Popen[str], reader: threading.Thread) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    reader.join(10)


@pytest.mark.long   # over a minute on klog too: the coordinator-kill test above is the CI proof
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_streams_exactly_once_v2_word_counts_are_exact_when_the_application_is_sigkilled_and_replaced(tmp_path, kind):
    """The application itself SIGKILLed mid-transaction and a new instance (a new state dir: its counts restored
    from the changelog, read_committed) started: the open transaction is aborted (by its timeout: the new instance
    has new transactional ids), its updates never read, and every line counted once."""
    rng = random.Random(35)
    lines = [" ".join(rng.choice(WORDS) for _ in range(WORDS_PER_LINE)) for _ in range(LINES_BEFORE + LINES_AFTER)]
    expected = Counter(word for line in lines for word in line.split())
    app_id = f"wc-eos-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-lines", f"{app_id}-counts"
    # the dead instance leaves the group within seconds (Kafka Streams' default session is 45 s)
    fast = ["session.timeout.ms=6000", "heartbeat.interval.ms=500"]
    started = time.monotonic()
    with make_cluster(kind, tmp_path / "cluster") as cluster:
        cluster.wait_for_brokers()
        for topic in (source, sink):
            assert cluster.create_topic(topic, PARTITIONS, 3)[0] == 0
            cluster.wait_for_topic(topic, PARTITIONS)
        produce_lines(cluster.bootstrap_servers, source, lines[:LINES_BEFORE])
        counts = CommittedCounts(cluster.bootstrap_servers, sink)
        first, events, reader = java_app(tmp_path, cluster.bootstrap_servers, source, sink, app_id,
                                         str(tmp_path / "state-1"), "3", str(int(SETTLE_S + 120)), *fast)
        try:
            # mid-run: a few commits in (a tenth of the first lines' words), far from all
            assert counts.wait(lambda c: sum(c.latest.values()) >= LINES_BEFORE * WORDS_PER_LINE // 10, 120), \
                f"no counts committed; app events: {events}"
            progress = sum(counts.latest.values())
            first.kill()
            first.wait(10)
            assert progress < sum(expected.values()) * LINES_BEFORE // len(lines), "the kill came after the work"
        finally:
            stop_app(first, reader)
        produce_lines(cluster.bootstrap_servers, source, lines[LINES_BEFORE:])
        second, events, reader = java_app(tmp_path, cluster.bootstrap_servers, source, sink, app_id,
                                          str(tmp_path / "state-2"), "3", str(int(SETTLE_S + 120)), *fast)
        try:
            settled = counts.wait(lambda c: c.latest == dict(expected) or any(
                c.latest.get(w, 0) > n for w, n in expected.items()), SETTLE_S)
            seen = list(counts.seen)
            assert second.poll() is None, f"the Streams application exited: {events}"
        finally:
            counts.stop()
            stop_app(second, reader)
        print(f"{kind}: application killed at {progress} of {sum(expected.values())} words counted; {len(seen)}"
              f" committed updates; errors: {[e for e in events if e.get('ev') == 'error']};"
              f" {time.monotonic() - started:.0f} s")
        assert settled, f"counts did not reach the totals in {SETTLE_S} s: {len(seen)} updates, events {events}"
        check_counts(seen, expected)
        again = CommittedCounts(cluster.bootstrap_servers, sink)
        try:
            assert again.wait(lambda c: c.at_end == set(range(PARTITIONS)), 60), "the output was not read to its end"
            check_counts(list(again.seen), expected)
        finally:
            again.stop()

"""klog's client and confluent-kafka (librdkafka) side by side: what one writes the other reads, keyed records
land on the same partitions, offsets committed by one are resumed by the other, and both share a consumer group.
Runs against Apache Kafka 4.x and against klog's broker; transactions (read_committed) only against Apache
Kafka, the broker that implements them.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import klog
from klog.client import TopicPartition
from klog.partitioner import partition_for_key

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE_S = 30.0


def make_topic(bootstrap: str, partitions: int) -> str:
    name = f"x-{uuid.uuid4().hex[:12]}"
    with klog.AdminClient(bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions, replication_factor=1)
    return name


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int, **extra: Any) -> list[Any]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"cg-{uuid.uuid4().hex[:6]}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append(m)
        return out
    finally:
        c.close()


def klog_consume(bootstrap: str, topic: str, partitions: int, count: int, **config: Any) -> list[Any]:
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config) as c:
        c.assign([(topic, p) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            out += c.poll(timeout=0.5)
        return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_klog_reads_what_confluent_writes_on_the_same_partitions(bootstrap: str, codec: str) -> None:
    topic = make_topic(bootstrap, 6)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                                  "compression.type": codec, "linger.ms": 5})
    sent = [(b"key-%d" % i, b"value-%d" % i) for i in range(600)]
    for k, v in sent:
        p.produce(topic, v, k, headers=[("n", k)])
    assert p.flush(DEADLINE_S) == 0
    got = klog_consume(bootstrap, topic, 6, len(sent))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)
    assert all(r.partition == partition_for_key(r.key, 6) for r in got)
    assert all(r.headers == [("n", r.key)] for r in got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_what_klog_writes_on_the_same_partitions(bootstrap: str, codec: str) -> None:
    topic = make_topic(bootstrap, 6)
    sent = [(b"key-%d" % i, b"value-%d" % i) for i in range(600)]
    with klog.Producer(bootstrap, compression_type=codec) as p:
        metas = [p.send(topic, v, key=k, headers={"n": k}) for k, v in sent]
        p.flush()
    got = confluent_consume(bootstrap, topic, 6, len(sent))
    assert sorted((m.key(), m.value()) for m in got) == sorted(sent)
    # confluent-kafka's own murmur2 partitioner agrees with where klog put each key
    chooser = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    by_key = {m.key(): m.partition() for m in got}
    assert all(by_key[k] == f.result().partition for (k, _), f in zip(sent, metas))
    assert all(m.headers() == [("n", m.key())] for m in got)
    del chooser


def test_send_batch_output_is_readable_by_confluent(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 1)
    values = [b"%05d" % i * (1 + i % 5) for i in range(5000)]
    with klog.Producer(bootstrap) as p:
        p.send_batch(topic, values).result(DEADLINE_S)
    got = confluent_consume(bootstrap, topic, 1, len(values))
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(len(values)))


def test_offsets_committed_by_klog_are_resumed_by_confluent(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with klog.Producer(bootstrap) as p:
        for i in range(50):
            p.send(topic, b"%d" % i)
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False) as c:
        got: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 30 and time.monotonic() < deadline:
            got += c.poll(timeout=0.5, max_records=30 - len(got))
        c.commit()
    cc = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        cc.subscribe([topic])
        msgs: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(msgs) < 20 and time.monotonic() < deadline:
            msgs += [m for m in cc.consume(100, 0.5) if m.error() is None]
        assert [m.offset() for m in msgs] == list(range(30, 50))
    finally:
        cc.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_klog_and_confluent_members_share_one_group(bootstrap: str, strategy: str) -> None:
    topic = make_topic(bootstrap, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    assigned: list[Any] = []
    cc = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                   "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                                   "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    try:
        cc.subscribe([topic], on_assign=lambda c, parts: assigned.append(("confluent", parts)))
        deadline = time.monotonic() + DEADLINE_S
        while not cc.assignment() and time.monotonic() < deadline:
            cc.poll(0.2)
        assert len(cc.assignment()) == 4
        with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group,
                           partition_assignment_strategy=strategy) as kc:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                kc.poll(timeout=0.1)
                cc.poll(0.1)
                mine = kc.assignment()
                theirs = {TopicPartition(tp.topic, tp.partition) for tp in cc.assignment()}
                if len(mine) == 2 and len(theirs) == 2:
                    break
            assert len(mine) == 2 and len(theirs) == 2 and not (mine & theirs)
            assert mine | theirs == {TopicPartition(topic, i) for i in range(4)}
    finally:
        cc.close()


def test_read_committed_skips_aborted_transactions(apache_kafka_bootstrap: str) -> None:
    # Apache Kafka only: klog's broker does not implement transactions (no EndTxn API).
    bootstrap = str(apache_kafka_bootstrap)
    topic = make_topic(bootstrap, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(DEADLINE_S)
    for label, commit in (("a", True), ("b", False), ("c", True), ("d", False), ("e", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"{label}{i}".encode())
        p.flush(DEADLINE_S)  # written to the log before the abort (else librdkafka just drops them)
        if commit:
            p.commit_transaction(DEADLINE_S)
        else:
            p.abort_transaction(DEADLINE_S)
    p.close()
    committed = [f"{x}{i}".encode() for x in "ace" for i in range(5)]
    everything = [f"{x}{i}".encode() for x in "abcde" for i in range(5)]
    got = klog_consume(bootstrap, topic, 1, 15, isolation_level="read_committed")
    assert [r.value for r in got] == committed
    got = klog_consume(bootstrap, topic, 1, 25, isolation_level="read_uncommitted")
    assert [r.value for r in got] == everything  # control records are never returned
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                       isolation_level="read_committed") as c:
        c.assign([(topic, 0)])
        rows: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(rows) < 15 and time.monotonic() < deadline:
            rows += c.poll_batch(timeout=0.5).column("value").to_pylist()
        assert rows == committed

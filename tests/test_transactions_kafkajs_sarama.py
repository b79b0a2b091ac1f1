"""kafkajs's and Sarama's transactional producers (tests/js/txn_producer.js, tests/go/saramatxn) on klog and on Apache
Kafka 4.3, from the same properties: committed transactions are read by a read_committed consumer and aborted ones
are not (a read_uncommitted one reads both), the offsets each transaction sends for a group count only when it
commits, and a second producer with the same transactional id fences the first, whose open transaction is aborted.
tools/install-peers.sh installs kafkajs (npm, tests/js/package.json) and Sarama's module (tests/go/go.mod)."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.kafka import one_broker

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).resolve().parent
CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
          "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}
TRANSACTIONS, PER_TXN = 9, 4
#: a client run's bound (its transactions take well under a second each)
CLIENT_S = 120


@pytest.fixture(scope="module", params=["klog", "kafka"])
def bootstrap(request, tmp_path_factory) -> Iterator[str]:
    with one_broker(request.param, tmp_path_factory.mktemp(f"txn-peers-{request.param}"), CONFIG) as servers:
        yield servers


@pytest.fixture(scope="module")
def sarama_binary(tmp_path_factory) -> Path:
    if shutil.which("go") is None:
        pytest.fail("go not found: Sarama's test program needs the Go toolchain")
    out = tmp_path_factory.mktemp("sarama") / "saramatxn"
    subprocess.run(["go", "build", "-o", str(out), "./saramatxn"], cwd=HERE / "go", check=True, timeout=600)
    return out


def client_command(client: str, request: pytest.FixtureRequest) -> list[str]:
    if client == "kafkajs":
        if not (HERE / "js" / "node_modules" / "kafkajs").is_dir():
            pytest.fail("kafkajs is not installed in tests/js: run `bash tools/install-peers.sh`")
        return ["node", str(HERE / "js" / "txn_producer.js")]
    return [str(request.getfixturevalue("sarama_binary"))]


def group_offsets(admin: AdminClient, group: str) -> list[TopicPartition]:
    """The group's committed offsets, asked again while its coordinator is being created or loaded (Kafka creates
    __consumer_offsets on the first FindCoordinator; on a loaded machine an answer may not come in one call's time)."""
    deadline = time.monotonic() + 90
    while True:
        try:
            return admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                     request_timeout=15)[group].result(20).topic_partitions
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            retriable = isinstance(exc, concurrent.futures.TimeoutError) or exc.args[0].code() in (
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_values(bootstrap: str, topic: str, isolation: str) -> dict[int, list[str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    values: dict[int, list[str]] = {0: [], 1: []}
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            values[message.partition()].append(message.value().decode())
    finally:
        consumer.close()
    assert len(at_end) == 2, f"{topic} was not read to its end ({isolation})"
    return values


@pytest.mark.parametrize("client", ["kafkajs", "sarama"])
def test_transactional_producer_commits_aborts_and_is_fenced_as_on_kafka(bootstrap, client, request):
    name = uuid.uuid4().hex[:8]
    topic, tid, group = f"{client}-txn-{name}", f"{client}-{name}", f"{client}-group-{name}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    # the group's coordinator loaded first: kafkajs does not retry a TxnOffsetCommit answered NOT_COORDINATOR (as
    # Kafka answers while it creates and loads __consumer_offsets), it fails the transaction
    group_offsets(admin, group)
    run = subprocess.run([*client_command(client, request), bootstrap, topic, tid, group, str(TRANSACTIONS),
                          str(PER_TXN)], capture_output=True, text=True, timeout=CLIENT_S)
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert run.returncode == 0, f"{client} failed: {events[-3:]}\n{run.stderr[-3000:]}"
    outcomes = {e["txn"]: e["outcome"] for e in events if "txn" in e}
    assert outcomes == {n: "aborted" if n % 3 == 2 else "committed" for n in range(TRANSACTIONS)}
    zombie = next(e for e in events if "zombie" in e)
    assert zombie["zombie"] == "fenced", zombie
    assert {"successor": "committed"} in events

    def written(n: int, p: int) -> list[str]:
        return [f"{n}-{i}" for i in range(PER_TXN) if i % 2 == p]

    committed = [n for n in range(TRANSACTIONS) if outcomes[n] == "committed"]
    read = read_values(bootstrap, topic, "read_committed")
    assert read == {0: [v for n in committed for v in written(n, 0)],
                    1: [v for n in committed for v in written(n, 1)] + ["b-0"]}
    everything = read_values(bootstrap, topic, "read_uncommitted")
    assert everything == {0: [v for n in range(TRANSACTIONS) for v in written(n, 0)] + ["zombie-0"],
                          1: [v for n in range(TRANSACTIONS) for v in written(n, 1)] + ["b-0"]}
    # the last transaction that sent offsets and committed was number 7 (8 was aborted)
    assert [(tp.topic, tp.partition, tp.offset) for tp in group_offsets(admin, group)] == [(topic, 0, max(committed))]

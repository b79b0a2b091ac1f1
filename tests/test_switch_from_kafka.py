"""A Kafka team switches to klog and back without losing anything: an Apache Kafka 4.3.1 combined node's
server.properties and data dir (its metadata log and snapshot, its partitions, ``__consumer_offsets``,
``__transaction_state``, its checkpoints and clean-shutdown file) are started as they are by ``klog-broker``, which
serves every topic, config, record, committed group offset and transactional id Kafka left; and Kafka, started
again on the same files after klog wrote to them, serves klog's writes as its own.

Kafka's controlled shutdown leaves its partitions without a leader (its only broker fenced, kept in their ELR);
klog's single node, its own controller, registers unfenced and makes the elections Kafka's controller makes when a
broker is unfenced."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from klog.testing.kafka import apache_kafka, apache_kafka_again, find_kafka_libs, free_port, read_properties  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.java

TOPIC = "orders"
PARTITIONS = 3
GROUP = "billing"
TXN_ID = "orders-writer"


def _read_committed(bootstrap: str) -> list[tuple[int, bytes | None, bytes | None, list[Any]]]:
    """Every record a read_committed consumer reads from the start (partition, key, value, headers), once no new
    record came for 4 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    records: list[tuple[int, bytes | None, bytes | None, list[Any]]] = []
    deadline, last = time.monotonic() + 60, time.monotonic()
    try:
        while time.monotonic() < deadline and (not records or time.monotonic() - last < 4):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records.append((message.partition(), message.key(), message.value(), message.headers() or []))
            last = time.monotonic()
    finally:
        consumer.close()
    return records


def _group_offsets(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 30)]
    finally:
        consumer.close()


def _retention_ms(bootstrap: str) -> str:
    resource = ConfigResource("TOPIC", TOPIC)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_configs([resource])[resource].result(30)["retention.ms"].value


def _transaction(bootstrap: str, values: list[bytes], *, commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value, partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def _kafka_writes(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"retention.ms": "86400000"})])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(300):
        producer.produce(TOPIC, f"order-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS,
                         headers=[("source", b"kafka")])
    producer.flush(30)
    _transaction(bootstrap, [b"kafka-committed"], commit=True)
    _transaction(bootstrap, [b"kafka-aborted"], commit=False)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 40), TopicPartition(TOPIC, 1, 70)], asynchronous=False)
    finally:
        consumer.close()


def test_klog_serves_a_kafka_nodes_data_dir_and_kafka_serves_it_back(tmp_path: Path) -> None:
    find_kafka_libs()
    with apache_kafka(tmp_path, free_port()) as bootstrap:
        _kafka_writes(bootstrap)
        on_kafka = _read_committed(bootstrap)
        assert _group_offsets(bootstrap) == [40, 70, -1001]
    values = [value for _, _, value, _ in on_kafka]
    assert len(on_kafka) == 301 and b"kafka-committed" in values and b"kafka-aborted" not in values

    properties = read_properties(tmp_path / "server.properties")
    overrides = {"listeners": properties["listeners"], "log.dirs": properties["log.dirs"]}
    with BrokerProcess(properties["log.dirs"], overrides, properties_file=tmp_path / "server.properties") as klog:
        assert not [line for line in klog.lines if "WARNING" in line or "ERROR" in line], klog.lines
        served = f"127.0.0.1:{klog.port}"
        assert sorted(_read_committed(served), key=repr) == sorted(on_kafka, key=repr)
        assert _group_offsets(served) == [40, 70, -1001]
        assert _retention_ms(served) == "86400000"
        # the transactional id Kafka left: initialized again (its epoch bumped), then used
        _transaction(served, [b"klog-committed"], commit=True)
        _transaction(served, [b"klog-aborted"], commit=False)
        producer = Producer({"bootstrap.servers": served})
        for i in range(30):
            producer.produce(TOPIC, f"klog-{i}".encode(), partition=1)
        producer.flush(30)
        on_klog = _read_committed(served)
    klog_values = [value for _, _, value, _ in on_klog]
    assert len(on_klog) == 301 + 1 + 30 and b"klog-committed" in klog_values and b"klog-aborted" not in klog_values

    with apache_kafka_again(tmp_path) as bootstrap:
        assert sorted(_read_committed(bootstrap), key=repr) == sorted(on_klog, key=repr)
        assert _group_offsets(bootstrap) == [40, 70, -1001]
        assert _retention_ms(bootstrap) == "86400000"
        _transaction(bootstrap, [b"kafka-again"], commit=True)   # the id's state klog wrote, read by Kafka
        assert b"kafka-again" in [value for _, _, value, _ in _read_committed(bootstrap)]


@pytest.mark.long
def test_klog_nodes_serve_a_kafka_clusters_data_dirs(tmp_path: Path) -> None:
    """Three combined Kafka nodes (a static quorum, replication factor 3) stopped together and started as klog
    nodes on their own server.properties and data dirs: one klog quorum serving Kafka's records and offsets. (The
    brokers register once the sessions the new active controller gives the registrations it found have expired,
    as on Kafka after a whole-cluster restart: DUPLICATE_BROKER_REGISTRATION meanwhile.)"""
    from klog.testing.kafka import KafkaCluster
    from klog.testing.process import start_together

    with KafkaCluster(tmp_path, 3) as kafka:
        bootstrap = kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(300):
            producer.produce(TOPIC, f"order-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS)
        producer.flush(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 40), TopicPartition(TOPIC, 1, 70)], asynchronous=False)
        finally:
            consumer.close()
        on_kafka = _read_committed(bootstrap)
    assert len(on_kafka) == 300

    nodes = []
    for node in (1, 2, 3):
        path = tmp_path / f"kafka-{node}" / "server.properties"
        properties = read_properties(path)
        nodes.append(BrokerProcess(properties["log.dirs"], {"listeners": properties["listeners"],
                                                             "log.dirs": properties["log.dirs"]}, properties_file=path))
    try:
        start_together(nodes)
        served = ",".join(f"127.0.0.1:{node.port}" for node in nodes)
        assert sorted(_read_committed(served), key=repr) == sorted(on_kafka, key=repr)
        assert _group_offsets(served) == [40, 70, -1001]
    finally:
        for node in nodes:
            node.terminate()
        for node in nodes:
            node.stop()


def test_kafka_serves_a_data_dir_a_klog_node_made(tmp_path: Path) -> None:
    """The other way: a combined node's server.properties formatted and run by klog (``klog-broker format
    --standalone``), then Apache Kafka started on the same files. Kafka keeps a partition's log only if its
    directory's ``partition.metadata`` names the topic's id (else it renames the log away as a stray replica):
    every record, committed offset and transaction klog wrote is Kafka's to serve."""
    import subprocess

    from klog.controller.applier import new_cluster_id
    from klog.testing.kafka import kafka_server_properties
    from klog.testing.process import broker_command

    port, controller_port = free_port(), free_port()
    properties = tmp_path / "server.properties"
    data = tmp_path / "kafka-data"
    properties.write_text(kafka_server_properties(data, port, controller_port))
    formatted = subprocess.run([*broker_command(), "format", "-t", new_cluster_id(), "-c", str(properties),
                                "--standalone"], capture_output=True, text=True, timeout=120)
    assert formatted.returncode == 0, formatted.stderr
    listeners = read_properties(properties)["listeners"]
    with BrokerProcess(data, {"listeners": listeners, "log.dirs": str(data)}, properties_file=properties) as klog:
        served = f"127.0.0.1:{klog.port}"
        _kafka_writes(served)
        on_klog = _read_committed(served)
    values = [value for _, _, value, _ in on_klog]
    assert len(on_klog) == 301 and b"kafka-committed" in values and b"kafka-aborted" not in values
    assert (data / f"{TOPIC}-0" / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")

    with apache_kafka_again(tmp_path) as bootstrap:
        assert sorted(_read_committed(bootstrap), key=repr) == sorted(on_klog, key=repr)
        assert _group_offsets(bootstrap) == [40, 70, -1001]
        assert _retention_ms(bootstrap) == "86400000"
        _transaction(bootstrap, [b"kafka-again"], commit=True)
    assert not list(data.glob("*-stray"))

"""``klog-broker migrate`` moves a single-node klog data directory into a new 3-node quorum (real processes): a single
node with two topics (one with a config override), their records and a consumer group's committed offsets is
stopped; ``migrate`` exports its metadata and sets its metadata log aside; every controller is formatted with
``--add-records``; on the quorum the group resumes from its committed offsets, every record is there, the topic
config and ids are kept, and the topics take new records; raised to replication factor 3 by a reassignment, the
migrated records survive the loss of the node that brought them."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from klog.controller.applier import new_cluster_id
from klog.protocol import ApiKey
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.process import BrokerProcess, broker_command
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

ORDERS, EVENTS, GROUP = "orders", "events", "resume"
CONSUMED_BEFORE = 120


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for v in values:
        producer.produce(topic, key=v.encode(), value=v.encode())
    assert producer.flush(30) == 0


def _consume(bootstrap: str, group: str, topics: list[str], expected: int, timeout: float = 60.0,
             commit: bool = False) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    got: list[str] = []
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value().decode())
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _topic_ids(admin: AdminClient) -> dict[str, str]:
    return {t: str(admin.describe_topics(TopicCollection([t]))[t].result(30).topic_id) for t in (ORDERS, EVENTS)}


@pytest.mark.long
def test_a_single_node_moves_into_a_three_node_quorum_with_its_topics_data_and_offsets(tmp_path: Path) -> None:
    q = ControllerQuorum(tmp_path / "q", 3, roles="broker,controller", bootstrap_servers=True)
    orders = [f"order-{i}" for i in range(300)]
    events = [f"event-{i}" for i in range(100)]
    single = BrokerProcess(q.log_dir(1), {"node.id": 1})   # node 1 of the quorum keeps the data directory
    single.start()
    try:
        admin = AdminClient({"bootstrap.servers": single.bootstrap_servers})
        futures = admin.create_topics([NewTopic(ORDERS, 3, 1),
                                       NewTopic(EVENTS, 2, 1, config={"retention.ms": "123456789"})])
        for f in futures.values():
            f.result(30)
        ids_before = _topic_ids(admin)
        _produce(single.bootstrap_servers, ORDERS, orders)
        _produce(single.bootstrap_servers, EVENTS, events)
        # the group consumes at most CONSUMED_BEFORE records and commits where it stopped
        first = _consume(single.bootstrap_servers, GROUP, [ORDERS], CONSUMED_BEFORE, commit=True)
        assert len(first) == CONSUMED_BEFORE
        del admin   # its connections to the single node end here
    finally:
        single.stop()

    records = tmp_path / "migration.records"
    out = subprocess.run([*broker_command(), "migrate", "-c", str(q.properties_files[1]), "-o", str(records)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3 topics" in out.stdout, out.stdout   # orders, events and __consumer_offsets
    print(out.stdout)
    again = subprocess.run([*broker_command(), "migrate", "-c", str(q.properties_files[1]), "-o", str(records)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "migrated before" in again.stderr, "a second migrate is refused"
    q.format(new_cluster_id(), ("--add-records", str(records)))
    with q:
        bootstrap = ",".join(n.bootstrap_servers for n in q.nodes.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while True:
            listed = admin.list_topics(timeout=10).topics
            if all(t in listed and not listed[t].error and all(p.leader == 1 for p in listed[t].partitions.values())
                   for t in (ORDERS, EVENTS)):
                break
            assert time.monotonic() < deadline, {t: listed.get(t) for t in (ORDERS, EVENTS)}
            time.sleep(0.5)
        assert len(listed[ORDERS].partitions) == 3 and len(listed[EVENTS].partitions) == 2
        assert _topic_ids(admin) == ids_before   # the topic ids stay (their partition.metadata files match)
        (config,) = admin.describe_configs([ConfigResource("TOPIC", EVENTS)]).values()
        assert config.result(30)["retention.ms"].value == "123456789"

        # the group resumes from its committed offsets: exactly the records it had not consumed
        committed = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP}).committed(
            [TopicPartition(ORDERS, p) for p in range(3)], timeout=30)
        assert sum(tp.offset for tp in committed if tp.offset >= 0) == CONSUMED_BEFORE
        rest = _consume(bootstrap, GROUP, [ORDERS], len(orders) - CONSUMED_BEFORE, commit=True)
        assert len(rest) == len(set(rest)) == len(orders) - CONSUMED_BEFORE
        assert set(first) | set(rest) == set(orders) and not set(first) & set(rest)
        # every record is there, for a new group too
        everything = _consume(bootstrap, "fresh", [ORDERS, EVENTS], len(orders) + len(events))
        assert sorted(everything) == sorted(orders + events)
        # and the topics take new records on the quorum
        _produce(bootstrap, ORDERS, ["after-migration"])
        assert _consume(bootstrap, GROUP, [ORDERS], 1) == ["after-migration"]

        # the documented next step: replication factor 3 (AlterPartitionReassignments, as kafka-reassign-partitions
        # sends it); once the new replicas are in the ISR, node 1 can die and nodes 2 and 3 serve every record
        node1 = q.nodes[1]
        with WireClient(node1.host, node1.port) as wire:
            answer = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": [
                {"name": ORDERS, "partitions": [{"partition_index": p, "replicas": [1, 2, 3]} for p in range(3)]}]})
        assert answer.error_code == 0 and all(p.error_code == 0 for t in answer.responses for p in t.partitions)
        deadline = time.monotonic() + 60
        while True:
            parts = admin.list_topics(ORDERS, timeout=10).topics[ORDERS].partitions.values()
            if all(sorted(p.isrs) == [1, 2, 3] for p in parts):
                break
            assert time.monotonic() < deadline, [(p.id, p.replicas, p.isrs) for p in parts]
            time.sleep(0.5)
        q.kill(1)
        survivors = ",".join(q.nodes[i].bootstrap_servers for i in (2, 3))
        reader = Consumer({"bootstrap.servers": survivors, "group.id": "unused", "enable.auto.commit": False})
        try:
            reader.assign([TopicPartition(ORDERS, p, OFFSET_BEGINNING) for p in range(3)])
            got: list[str] = []
            deadline = time.monotonic() + 60
            while len(got) < len(orders) + 1 and time.monotonic() < deadline:
                msg = reader.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg.value().decode())
        finally:
            reader.close()
        assert sorted(got) == sorted([*orders, "after-migration"])


def test_migration_records_place_every_partition_on_the_node_that_keeps_the_data() -> None:
    import uuid

    from klog.metadata import MetadataLoader
    from klog.metadata.migration import quorum_migration_records
    from klog.metadata.records import MetadataBatch, record

    tid = uuid.uuid4()
    loader = MetadataLoader()
    loader.apply([MetadataBatch(0, 1, 0, False, (
        record("FeatureLevelRecord", name="metadata.version", feature_level=25),
        record("RegisterBrokerRecord", broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=7, end_points=[],
               features=[], fenced=False, log_dirs=[]),
        record("TopicRecord", name="t", topic_id=tid),
        record("PartitionRecord", partition_id=0, topic_id=tid, replicas=[1], isr=[1], leader=1, leader_epoch=3,
               partition_epoch=5, directories=[]),
        record("ConfigRecord", resource_type=2, resource_name="t", name="retention.ms", value="1000"),
        record("ConfigRecord", resource_type=4, resource_name="1", name="log.cleaner.threads", value="2"),
        record("ConfigRecord", resource_type=4, resource_name="", name="message.max.bytes", value="2000"),
        record("ProducerIdsRecord", broker_id=1, broker_epoch=7, next_producer_id=5000),
    ), 0)])
    out = quorum_migration_records(loader.image, old_node_id=1, node_id=4)
    names = [r.name for r in out]
    assert "FeatureLevelRecord" not in names and "RegisterBrokerRecord" not in names   # the new quorum's own
    (part,) = [r.data for r in out if r.name == "PartitionRecord"]
    assert (part.replicas, part.isr, part.leader, part.leader_epoch, part.partition_epoch) == ([4], [4], 4, 3, 5)
    configs = {(r.data.resource_type, r.data.resource_name, r.data.name): r.data.value for r in out
               if r.name == "ConfigRecord"}
    assert configs == {(2, "t", "retention.ms"): "1000", (4, "4", "log.cleaner.threads"): "2",
                       (4, "", "message.max.bytes"): "2000"}
    assert [r.data.next_producer_id for r in out if r.name == "ProducerIdsRecord"] == [5000]
    # replayed on a new quorum's image, the topic is whole and led by node 4
    replayed = MetadataLoader()
    replayed.apply([MetadataBatch(0, 1, 0, False, tuple(out), 0)])
    assert replayed.image.topic("t").id == tid and replayed.image.partition("t", 0).leader == 4


def test_migrate_refuses_a_configuration_that_is_not_a_quorum(tmp_path: Path) -> None:
    props = tmp_path / "single.properties"
    props.write_text(f"log.dirs={tmp_path / 'data'}\n")
    out = subprocess.run([*broker_command(), "migrate", "-c", str(props), "-o", str(tmp_path / "m.records")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "not a multi-node quorum" in out.stderr

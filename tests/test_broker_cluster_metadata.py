"""A single-node broker keeps its topics in the KRaft metadata log, not a JSON file.

Real broker processes: topic and config changes made with a Kafka client are committed as records to
``__cluster_metadata-0`` (which Kafka's ``kafka-dump-log --cluster-metadata-decoder`` reads), a restart serves
the same topics and configs from that log, and a data directory written by a single-node klog before this
change (``klog-topics.json`` beside the partition logs) is migrated once and keeps its topics, ids and data.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic)

from klog import _native
from klog.metadata.records import decode_batches
from klog.records import encode_batch
from klog.testing.process import BrokerProcess

METADATA_SEGMENT = Path("__cluster_metadata-0") / ("0" * 20 + ".log")


def metadata_records(data_dir: Path) -> list[tuple[str, object]]:
    """(record name, data) of every metadata record the broker committed, in log order."""
    batches = decode_batches((data_dir / METADATA_SEGMENT).read_bytes())
    return [(r.name, r.data) for b in batches if not b.is_control for r in b.records]


def admin_for(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def wait_all(futures: dict) -> None:
    for future in futures.values():
        future.result(30)


def topic_configs(admin: AdminClient, name: str) -> dict[str, str]:
    resource = ConfigResource("TOPIC", name)
    entries = admin.describe_configs([resource])[resource].result(30)
    # the topic's own: a new cluster's min.insync.replicas is a dynamic cluster default (KIP-966), not default
    return {k: e.value for k, e in entries.items() if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def test_topic_changes_are_committed_records_that_a_restart_serves_again(tmp_path):
    with BrokerProcess(tmp_path) as broker:
        admin = admin_for(broker)
        wait_all(admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "86400000"}),
                                      NewTopic("gone", 1, 1)]))
        wait_all(admin.create_partitions([NewPartitions("orders", 4)]))
        wait_all(admin.incremental_alter_configs([ConfigResource("TOPIC", "orders", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])]))
        wait_all(admin.delete_topics(["gone"]))
        orders_id = admin.describe_topics(TopicCollection(["orders"]))["orders"].result(30).topic_id
        records = metadata_records(tmp_path)
        names = [n for n, _ in records]
        assert names[0] == "FeatureLevelRecord" and "RegisterBrokerRecord" in names
        topics = {d.name: d.topic_id for n, d in records if n == "TopicRecord"}
        assert set(topics) == {"orders", "gone"}
        assert sum(1 for n, d in records if n == "PartitionRecord" and d.topic_id == topics["orders"]) == 4
        assert ("RemoveTopicRecord", topics["gone"]) in [(n, getattr(d, "topic_id", None)) for n, d in records]
        assert not (tmp_path / "klog-topics.json").exists()
        assert not (tmp_path / "gone-0").exists()

        broker.restart()
        admin = admin_for(broker)
        listed = admin.list_topics(timeout=30).topics
        assert "gone" not in listed and len(listed["orders"].partitions) == 4
        assert topic_configs(admin, "orders") == {"retention.ms": "86400000", "cleanup.policy": "compact"}
        assert str(admin.describe_topics(TopicCollection(["orders"]))["orders"].result(30).topic_id) == str(orders_id)
        registrations = [d for n, d in metadata_records(tmp_path) if n == "RegisterBrokerRecord"]
        assert len(registrations) == 2 and registrations[0].incarnation_id != registrations[1].incarnation_id
        assert registrations[1].broker_epoch > registrations[0].broker_epoch


def test_kafka_dump_log_decodes_the_metadata_log_a_broker_wrote(tmp_path):
    from test_metadata_storage import dump, dumped_records

    with BrokerProcess(tmp_path) as broker:
        admin = admin_for(broker)
        wait_all(admin.create_topics([NewTopic("dumped", 3, 1, config={"segment.ms": "60000"})]))
    text = dump([str(tmp_path / METADATA_SEGMENT)])
    payloads = [json.dumps(body) for _, kind, body in dumped_records(text) if kind == "payload:"]
    assert any('"type":"FEATURE_LEVEL_RECORD"' in p.replace(" ", "") for p in payloads), text[-2000:]
    assert any('"name":"dumped"' in p.replace(" ", "") for p in payloads)
    assert sum('"type":"PARTITION_RECORD"' in p.replace(" ", "") for p in payloads) == 3
    assert any('"type":"REGISTER_BROKER_RECORD"' in p.replace(" ", "") for p in payloads)


def write_single_node_data_dir(data_dir: Path, topics: dict[str, tuple[int, dict[str, str]]], per_partition: int
                               ) -> dict[str, str]:
    """A data directory as single-node klog wrote it before the metadata log: partition logs in Kafka's format
    (leader epoch 0), ``klog-topics.json`` (id, partition count, overrides per topic) and ``meta.properties``.
    Returns topic name -> id."""
    manager = _native.LogManager([str(data_dir)], _native.LogConfig())
    ids = {}
    stored = {}
    for name, (partitions, configs) in topics.items():
        topic_id = str(uuid.uuid4())
        ids[name] = topic_id
        stored[name] = {"id": topic_id, "partitions": partitions, "configs": configs, "internal": False}
        for p in range(partitions):
            log = manager.create(name, p)
            log.assign_epoch_start(0)
            for i in range(per_partition):
                log.append(encode_batch([{"key": f"k{i}".encode(), "value": f"{name}-{p}-{i}".encode()}]),
                           leader_epoch=0)
    manager.close()
    (data_dir / "klog-topics.json").write_text(json.dumps({"version": 1, "topics": stored}, indent=1))
    (data_dir / "meta.properties").write_text("node.id=1\nversion=1\ncluster.id=UpgradedClusterId0000A\n"
                                              f"directory.id={uuid.uuid4()}\n")
    return ids


def consume_all(broker: BrokerProcess, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        idle = 0
        while idle < 3:
            batch = consumer.consume(1000, 2.0)
            idle = 0 if batch else idle + 1
            for m in batch:
                assert m.error() is None, m.error()
                values.append(m.value())
        return values
    finally:
        consumer.close()


@pytest.mark.long
def test_a_single_node_data_dir_from_before_is_migrated_once_and_keeps_topics_and_data(tmp_path):
    ids = write_single_node_data_dir(tmp_path, {"orders": (3, {"retention.ms": "604800000"}), "events": (1, {})},
                                     per_partition=20)
    (tmp_path / "lost-0").mkdir()   # a partition directory without an entry: adopted, as the old broker did
    with BrokerProcess(tmp_path) as broker:
        assert not (tmp_path / "klog-topics.json").exists() and (tmp_path / "klog-topics.json.migrated").exists()
        admin = admin_for(broker)
        described = admin.describe_topics(TopicCollection(["orders", "events", "lost"]))
        assert str(described["orders"].result(30).topic_id) and len(described["lost"].result(30).partitions) == 1
        assert topic_configs(admin, "orders") == {"retention.ms": "604800000"}
        expected = sorted(f"orders-{p}-{i}".encode() for p in range(3) for i in range(20))
        assert sorted(consume_all(broker, "orders", 3)) == expected
        assert consume_all(broker, "events", 1) == [f"events-0-{i}".encode() for i in range(20)]
        # the migrated topics keep taking writes at the same offsets
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("events", b"after", partition=0)
        assert producer.flush(30) == 0
        records = metadata_records(tmp_path)
        stored_ids = {d.name: str(d.topic_id) for n, d in records if n == "TopicRecord"}
        assert stored_ids["orders"] == ids["orders"] and stored_ids["events"] == ids["events"]

        broker.restart()   # the migration is not done again: the metadata log has the topics
        assert [d.name for n, d in metadata_records(tmp_path) if n == "TopicRecord"].count("orders") == 1
        values = consume_all(broker, "events", 1)
        assert len(values) == 21 and values[-1] == b"after"


def test_a_metadata_log_is_kept_with_its_node_and_cluster_id(tmp_path):
    with BrokerProcess(tmp_path):
        pass
    properties = (tmp_path / "meta.properties").read_text()
    (tmp_path / "meta.properties").unlink()   # a cluster id is never invented for an existing metadata log
    with pytest.raises(RuntimeError, match="holds cluster metadata but meta.properties is missing"):
        with BrokerProcess(tmp_path):
            pass
    # meta.properties rewritten for another node: the metadata log's quorum-state still names node 1
    (tmp_path / "meta.properties").write_text(properties.replace("node.id=1", "node.id=2"))
    with pytest.raises(RuntimeError, match="quorum-state.*led by node 1"):
        with BrokerProcess(tmp_path, {"node.id": 2}):
            pass
    (tmp_path / "meta.properties").write_text(properties)
    with BrokerProcess(tmp_path) as broker:
        cluster_id = re.search(r"cluster.id=(\S+)", properties).group(1)
        assert admin_for(broker).describe_cluster().result(30).cluster_id == cluster_id


def test_a_snapshot_is_written_after_the_configured_bytes_and_a_restart_loads_it(tmp_path):
    from test_metadata_storage import dump

    config = {"metadata.log.max.record.bytes.between.snapshots": 2000}
    with BrokerProcess(tmp_path, config) as broker:
        admin = admin_for(broker)
        wait_all(admin.create_topics([NewTopic(f"s{i}", 4, 1, config={"retention.ms": str(1000 + i)})
                                      for i in range(20)]))
        wait_all(admin.delete_topics(["s0"]))
    snapshots = sorted((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))
    assert 1 <= len(snapshots) <= 2
    dump([str(snapshots[-1])])   # Kafka's tool reads it without errors
    with BrokerProcess(tmp_path, config) as broker:
        assert any(f"from snapshot {snapshots[-1].name}" in line for line in broker.lines), broker.lines
        admin = admin_for(broker)
        listed = admin.list_topics(timeout=30).topics
        assert sorted(t for t in listed if t.startswith("s")) == sorted(f"s{i}" for i in range(1, 20))
        assert topic_configs(admin, "s7") == {"retention.ms": "1007"}


def test_a_snapshot_is_written_after_the_configured_interval_when_records_were_committed(tmp_path):
    """metadata.log.max.snapshot.interval.ms, as on a Raft member: a single change well below the byte threshold is
    snapshotted once the interval has passed (the broker's maintenance pass looks every second)."""
    import time

    config = {"metadata.log.max.snapshot.interval.ms": 1500}
    with BrokerProcess(tmp_path, config) as broker:
        admin = admin_for(broker)
        wait_all(admin.create_topics([NewTopic("timed", 2, 1)]))
        deadline = time.monotonic() + 20
        while not list((tmp_path / "__cluster_metadata-0").glob("*.checkpoint")):
            assert time.monotonic() < deadline, broker.lines[-5:]
            time.sleep(0.2)
        snapshot = sorted((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
        time.sleep(3)   # nothing committed since: no further snapshot
        assert sorted((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))[-1] == snapshot
    with BrokerProcess(tmp_path, config) as broker:
        assert any(f"from snapshot {snapshot.name}" in line for line in broker.lines), broker.lines
        assert "timed" in admin_for(broker).list_topics(timeout=30).topics


def init_producer_id(broker: BrokerProcess) -> int:
    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                             "producer_id": -1, "producer_epoch": -1})
        assert response.error_code == 0
        return response.producer_id


def test_producer_ids_come_from_committed_blocks_and_an_old_block_file_is_respected(tmp_path):
    (tmp_path / "klog-producer-id-block").write_text("5000\n")   # single-node klog had handed out ids < 5000
    with BrokerProcess(tmp_path) as broker:
        first = init_producer_id(broker)
        assert first == 5000 and init_producer_id(broker) == 5001
        assert (tmp_path / "klog-producer-id-block.migrated").exists()
        broker.restart()   # the rest of the block is abandoned, as Kafka does: the next one is new
        assert init_producer_id(broker) == 6000
    blocks = [d.next_producer_id for n, d in metadata_records(tmp_path) if n == "ProducerIdsRecord"]
    assert blocks == [5000, 6000, 7000]


def test_records_that_do_not_replay_are_refused_before_they_reach_the_log(tmp_path):
    import asyncio

    from klog.broker.config import BrokerConfig
    from klog.broker.context import BrokerState
    from klog.metadata.delta import MetadataReplayError
    from klog.metadata.records import record

    async def run() -> None:
        state = BrokerState(BrokerConfig({"log.dirs": str(tmp_path)}), asyncio.get_running_loop())
        try:
            end = state.metadata.log.log_end_offset
            bad = record("PartitionRecord", partition_id=0, topic_id=uuid.uuid4(), replicas=[1], isr=[1], leader=1,
                         leader_epoch=0, partition_epoch=0, directories=[])
            with pytest.raises(MetadataReplayError, match="PartitionRecord"):
                await state.metadata.commit([bad])
            assert state.metadata.log.log_end_offset == end
        finally:
            state.close()

    asyncio.run(run())

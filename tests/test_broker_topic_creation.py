"""Creating topics makes their files in a worker thread (once the topic is committed, as the broker applies it):
other connections keep being served meanwhile, a name is created once, and the topic metadata on disk ends up
with every topic."""

from __future__ import annotations

import select
import uuid

import pytest

from klog.metadata.records import decode_batches
from klog.protocol import ApiKey
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.timeout(120)

NONE, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS = 0, 3, 36
WIDE_PARTITIONS = 5000


def create_topics_body(names: list[str], partitions: int) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []} for name in names], "timeout_ms": 60000, "validate_only": False}


METADATA_NO_TOPICS = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@pytest.fixture()
def broker(tmp_path):
    with BrokerProcess(tmp_path, {"num.partitions": 1, "auto.create.topics.enable": True}) as proc:
        yield proc


def test_other_connections_are_answered_while_a_wide_topic_is_created(broker):
    # making thousands of partitions' files takes tens of seconds on a loaded machine: the creator waits that long
    with WireClient(broker.host, broker.port, timeout=120) as creator, WireClient(broker.host, broker.port) as other:
        creator.send(ApiKey.CREATE_TOPICS, 7, create_topics_body(["wide"], WIDE_PARTITIONS))
        # Metadata on another connection while thousands of partition directories are being made: answered
        # before the CreateTopics response (with the file work on the event loop it waited for all of it).
        other.request(ApiKey.METADATA, 12, METADATA_NO_TOPICS)
        readable, _, _ = select.select([creator.sock], [], [], 0)
        assert not readable, "CreateTopics finished before a Metadata request sent after it was answered"
        _, created = creator.receive(ApiKey.CREATE_TOPICS, 7)
        assert created.topics[0].error_code == NONE
        assert created.topics[0].num_partitions == WIDE_PARTITIONS
        metadata = other.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": "wide"}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        assert len(metadata.topics[0].partitions) == WIDE_PARTITIONS


def test_the_same_name_created_on_two_connections_at_once_succeeds_once(broker):
    with WireClient(broker.host, broker.port, timeout=120) as first, \
            WireClient(broker.host, broker.port, timeout=120) as second:
        first.send(ApiKey.CREATE_TOPICS, 7, create_topics_body(["twice"], 2000))
        second.send(ApiKey.CREATE_TOPICS, 7, create_topics_body(["twice"], 3))
        codes = sorted([first.receive(ApiKey.CREATE_TOPICS, 7)[1].topics[0].error_code,
                        second.receive(ApiKey.CREATE_TOPICS, 7)[1].topics[0].error_code])
        assert codes == [NONE, TOPIC_ALREADY_EXISTS]


def test_topics_created_concurrently_are_all_in_the_metadata_log_and_survive_a_restart(broker, tmp_path):
    names = [f"c{i}" for i in range(12)]
    clients = [WireClient(broker.host, broker.port) for _ in range(4)]
    try:
        for i, name in enumerate(names):
            clients[i % 4].send(ApiKey.CREATE_TOPICS, 7, create_topics_body([name], 50))
        for client in clients:
            for _ in range(len(names) // len(clients)):
                assert client.receive(ApiKey.CREATE_TOPICS, 7)[1].topics[0].error_code == NONE
    finally:
        for client in clients:
            client.close()
    # each create committed a TopicRecord to __cluster_metadata-0 before it was answered
    segment = tmp_path / "__cluster_metadata-0" / ("0" * 20 + ".log")
    stored = [r.data.name for b in decode_batches(segment.read_bytes()) if not b.is_control for r in b.records
              if r.name == "TopicRecord"]
    assert sorted(n for n in stored if n in names) == sorted(names)
    broker.restart()
    with WireClient(broker.host, broker.port) as wire:
        metadata = wire.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        found = {t.name: len(t.partitions) for t in metadata.topics}
        assert all(found.get(name) == 50 for name in names)


def test_metadata_auto_creates_topics_after_answering_them_unknown(broker):
    """As Kafka's broker: the answer does not wait for the creation it starts (UNKNOWN_TOPIC_OR_PARTITION), the
    topics are there for a later request (tests/test_metadata_auto_create_vs_kafka.py compares with Kafka)."""
    body = {"topics": [{"topic_id": uuid.UUID(int=0), "name": "auto-a"}, {"topic_id": uuid.UUID(int=0), "name": "auto-b"}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    with WireClient(broker.host, broker.port) as wire:
        metadata = wire.request(ApiKey.METADATA, 12, body)
        assert [(t.name, t.error_code, len(t.partitions)) for t in metadata.topics] == [
            ("auto-a", UNKNOWN_TOPIC_OR_PARTITION, 0), ("auto-b", UNKNOWN_TOPIC_OR_PARTITION, 0)]

        def created_both():
            answer = wire.request(ApiKey.METADATA, 12, body)
            return answer if all(t.error_code == NONE for t in answer.topics) else None

        created = until(created_both, "auto-a and auto-b created")
        assert [(t.name, t.error_code, len(t.partitions)) for t in created.topics] == [
            ("auto-a", NONE, 1), ("auto-b", NONE, 1)]


def test_epoch_0_is_checkpointed_at_creation_so_the_first_append_rewrites_no_checkpoint(broker, tmp_path):
    from klog.records import encode_batch

    with WireClient(broker.host, broker.port) as wire:
        assert wire.request(ApiKey.CREATE_TOPICS, 7, create_topics_body(["epochs"], 3)).topics[0].error_code == NONE
        checkpoints = [tmp_path / f"epochs-{p}" / "leader-epoch-checkpoint" for p in range(3)]
        # Kafka's format: version, entry count, then "epoch start-offset" lines
        assert [c.read_text().split("\n")[:3] for c in checkpoints] == [["0", "1", "0 0"]] * 3
        inodes = [c.stat().st_ino for c in checkpoints]
        for partition in range(3):
            response = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "epochs", "partition_data": [
                    {"index": partition, "records": encode_batch([{"key": None, "value": b"v"}])}]}]})
            assert response.responses[0].partition_responses[0].error_code == NONE
        # replaced atomically (rename) whenever rewritten: the same inodes mean the appends did not rewrite them
        assert [c.stat().st_ino for c in checkpoints] == inodes

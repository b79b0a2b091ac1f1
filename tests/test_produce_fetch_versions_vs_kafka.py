"""Produce v13 (topics named by id, KIP-516) and Fetch v17/v18 (a partition's replica directory id, KIP-853, and high
watermark, KIP-1166: tagged fields) answered by klog as Apache Kafka 4.3 answers them (one broker of each kind for
the module, started from the same properties; klog twice: with its native Produce/Fetch paths and native front on,
their defaults, and with all three off, so both of klog's paths answer each case).

Kafka orders a Produce answer's topics and partitions as its hash map of them iterates; klog answers in request
order. The answers are compared as sets of (topic, partition) answers."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.wire import WireClient
from test_produce_fetch_edges_vs_kafka import bootstrap

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

ZERO = uuid.UUID(int=0)

__all__ = ["bootstrap"]   # the fixture: klog (native paths on), klog with the Python paths only, Kafka


def batch(**options: Any) -> bytes:
    return encode_batch([{"key": b"k", "value": b"v"}], **options)


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="versions-test")

    def create_topic(self, partitions: int = 2) -> tuple[str, uuid.UUID]:
        name = f"v13-{uuid.uuid4().hex[:8]}"
        answer = self.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        topic_id = answer.topics[0].topic_id
        for index in range(partitions):   # until the new topic's leader is ready; routes klog's native paths
            for _ in range(200):
                [(_, _, code, _)] = self.produce([(topic_id, [(index, batch())])])
                if code == ErrorCode.NONE:
                    break
                assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID), code
                time.sleep(0.05)
            else:
                raise AssertionError(f"{name} has no leader")
        return name, topic_id

    def produce(self, topics: list[tuple[uuid.UUID, list[tuple[int, bytes]]]], *, acks: int = 1,
                transactional_id: str | None = None) -> list[tuple[uuid.UUID, int, int, int]]:
        """One Produce v13 naming each topic by its id: its partitions' (topic id, index, error code, base offset),
        sorted (see the module's docstring)."""
        answer = self.request(ApiKey.PRODUCE, 13, self.body(topics, acks, transactional_id))
        assert all(t.name == "" for t in answer.responses)   # not on the wire from v13
        return sorted((t.topic_id, p.index, p.error_code, p.base_offset)
                      for t in answer.responses for p in t.partition_responses)

    @staticmethod
    def body(topics: list[tuple[uuid.UUID, list[tuple[int, bytes]]]], acks: int,
             transactional_id: str | None = None) -> dict[str, Any]:
        return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 10000, "topic_data": [
            {"name": "", "topic_id": topic_id, "partition_data": [{"index": i, "records": r} for i, r in parts]}
            for topic_id, parts in topics]}

    def init_producer(self, transactional_id: str | None) -> dict[str, int]:
        """A producer id and epoch, once the coordinator has loaded (asks are refused while it loads)."""
        for _ in range(200):
            if transactional_id is not None:   # Kafka creates its transaction state topic when first asked this
                self.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
            init = self.request(ApiKey.INIT_PRODUCER_ID, 5, {
                "transactional_id": transactional_id, "transaction_timeout_ms": 60000, "producer_id": -1,
                "producer_epoch": -1})
            if init.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                       ErrorCode.NOT_COORDINATOR):
                break
            time.sleep(0.1)
        assert init.error_code == ErrorCode.NONE, init
        return {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}

    def end_offset(self, name: str, index: int = 0) -> int:
        answer = self.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}]}]})
        return int(answer.topics[0].partitions[0].offset)

    def fetch(self, version: int, topic_id: uuid.UUID, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 0,
              **partition: Any) -> tuple[float, list[tuple[uuid.UUID, int, int, int, int]]]:
        """One sessionless Fetch of partition 0 (``partition``: the partition's extra fields): the seconds it took
        and each partition's (topic id, index, error code, high watermark, record bytes)."""
        body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic": "", "topic_id": topic_id, "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": 1 << 20, **partition}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        started = time.monotonic()
        answer = self.request(ApiKey.FETCH, version, body)
        took = time.monotonic() - started
        assert answer.error_code == ErrorCode.NONE, answer
        return took, [(t.topic_id, p.partition_index, p.error_code, p.high_watermark, len(p.records or b""))
                      for t in answer.responses for p in t.partitions]


def test_produce_13_and_fetch_18_are_advertised(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        answer = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert (ranges[ApiKey.PRODUCE][1], ranges[ApiKey.FETCH][1]) == (13, 18)


def test_produce_13_appends_to_the_topic_its_id_names_and_answers_with_the_id(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        other, other_id = wire.create_topic()
        ends = [wire.end_offset(name, 0), wire.end_offset(name, 1), wire.end_offset(other, 0)]
        answer = wire.produce([(topic_id, [(0, batch()), (1, batch())]), (other_id, [(0, batch())])])
        assert answer == sorted([(topic_id, 0, ErrorCode.NONE, ends[0]), (topic_id, 1, ErrorCode.NONE, ends[1]),
                                 (other_id, 0, ErrorCode.NONE, ends[2])])
        assert wire.end_offset(name, 0) == ends[0] + 1
        # and again: the second one is what klog's native path serves once the first routed the partitions
        assert wire.produce([(topic_id, [(0, batch())])]) == [(topic_id, 0, ErrorCode.NONE, ends[0] + 1)]


def test_an_unknown_zero_or_deleted_topic_id_is_answered_unknown_topic_id_on_each_partition(bootstrap: str) -> None:
    """Kafka's handleProduceRequest: a v13 topic id the metadata cache has no name for is UNKNOWN_TOPIC_ID on each of
    its partitions, the id echoed, before any other check (acks included); the request's other topics are
    appended."""
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        deleted_name, deleted = wire.create_topic(1)
        answer = wire.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": deleted_name, "topic_id": ZERO}],
                                                        "topic_names": [], "timeout_ms": 30000})
        assert answer.responses[0].error_code == ErrorCode.NONE
        unknown = uuid.uuid4()
        end = wire.end_offset(name)
        for _ in range(100):   # until the deletion reached the broker's metadata
            answer = wire.produce([(deleted, [(0, batch())])])
            if answer[0][2] == ErrorCode.UNKNOWN_TOPIC_ID:
                break
            time.sleep(0.1)
        answer = wire.produce([(unknown, [(0, batch()), (1, batch())]), (ZERO, [(0, batch())]),
                               (deleted, [(0, batch())]), (topic_id, [(0, batch())])])
        assert answer == sorted([(unknown, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1),
                                 (unknown, 1, ErrorCode.UNKNOWN_TOPIC_ID, -1),
                                 (ZERO, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1),
                                 (deleted, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1),
                                 (topic_id, 0, ErrorCode.NONE, end)])
        assert wire.produce([(unknown, [(0, batch())])], acks=2) == [(unknown, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1)]
        assert wire.produce([(topic_id, [(5, batch())])]) == [
            (topic_id, 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_a_topic_id_named_twice_is_answered_once_per_partition(bootstrap: str) -> None:
    """Kafka keys a Produce's partitions by topic id and partition: a partition named in two entries of its topic is
    appended once (the last entry's records) and answered once."""
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        ends = [wire.end_offset(name, 0), wire.end_offset(name, 1)]
        assert wire.produce([(topic_id, [(0, batch())]), (topic_id, [(1, batch())])]) == [
            (topic_id, 0, ErrorCode.NONE, ends[0]), (topic_id, 1, ErrorCode.NONE, ends[1])]
        assert wire.produce([(topic_id, [(0, batch())]), (topic_id, [(0, batch())])]) == [
            (topic_id, 0, ErrorCode.NONE, ends[0] + 1)]
        assert wire.end_offset(name, 0) == ends[0] + 2
        unknown = uuid.uuid4()
        assert wire.produce([(unknown, [(0, batch())]), (unknown, [(0, batch()), (1, batch())])]) == [
            (unknown, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1), (unknown, 1, ErrorCode.UNKNOWN_TOPIC_ID, -1)]


def test_acks_0_appends_silently_and_an_unknown_topic_id_closes_the_connection(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        end = wire.end_offset(name)
        wire.send(ApiKey.PRODUCE, 13, wire.body([(topic_id, [(0, batch())])], acks=0))
        assert wire.end_offset(name) == end + 1   # no answer to the produce: the next one is ListOffsets'
        wire.send(ApiKey.PRODUCE, 13, wire.body([(uuid.uuid4(), [(0, batch())])], acks=0))
        wire.sock.settimeout(10)
        with pytest.raises((ConnectionError, socket.timeout)) as closed:
            wire.read_frame()
        assert closed.type is not socket.timeout


def test_idempotent_batches_are_sequenced_by_the_partition_the_id_names(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        producer = wire.init_producer(None)
        end = wire.end_offset(name)
        first = batch(base_sequence=0, **producer)
        assert wire.produce([(topic_id, [(0, first)])]) == [(topic_id, 0, ErrorCode.NONE, end)]
        assert wire.produce([(topic_id, [(0, first)])]) == [(topic_id, 0, ErrorCode.NONE, end)]   # a retry
        assert wire.produce([(topic_id, [(0, batch(base_sequence=5, **producer))])]) == [
            (topic_id, 0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]
        assert wire.produce([(topic_id, [(0, batch(base_sequence=1, **producer))])]) == [
            (topic_id, 0, ErrorCode.NONE, end + 1)]


def test_transactional_batches_without_a_transactional_id_refuse_every_partition_unknown_ids_too(
        bootstrap: str) -> None:
    """Kafka refuses the whole request TRANSACTIONAL_ID_AUTHORIZATION_FAILED before it looks the ids up."""
    with Wire(bootstrap) as wire:
        _, topic_id = wire.create_topic()
        unknown = uuid.uuid4()
        records = batch(producer_id=1000, producer_epoch=0, base_sequence=0, is_transactional=True)
        assert wire.produce([(topic_id, [(0, records)]), (unknown, [(0, batch())])]) == sorted([
            (topic_id, 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1),
            (unknown, 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)])


def test_a_transaction_writes_through_produce_13(bootstrap: str) -> None:
    """Transaction protocol v2 (Produce v12+): the leader adds the partition to the producer's transaction; the
    committed records are read back."""
    with Wire(bootstrap) as wire:
        name, topic_id = wire.create_topic()
        tid = f"txn-{uuid.uuid4().hex[:8]}"
        producer = wire.init_producer(tid)
        end = wire.end_offset(name)
        records = batch(base_sequence=0, is_transactional=True, **producer)
        assert wire.produce([(topic_id, [(0, records)])], transactional_id=tid) == [
            (topic_id, 0, ErrorCode.NONE, end)]
        ended = wire.request(ApiKey.END_TXN, 5, {"transactional_id": tid, "committed": True, **producer})
        assert ended.error_code == ErrorCode.NONE
        for _ in range(100):   # the commit marker lands after the answer
            _, [(_, _, code, high_watermark, size)] = wire.fetch(18, topic_id, end)
            if high_watermark == end + 2:
                break
            time.sleep(0.1)
        assert (code, high_watermark) == (ErrorCode.NONE, end + 2)
        assert size > 0


@pytest.mark.parametrize("version", [16, 17, 18])
def test_fetch_17_and_18_read_as_16_whatever_the_replica_directory_id_and_high_watermark(
        bootstrap: str, version: int) -> None:
    """Kafka's broker reads neither tagged field of a fetch (its FetchRequest.PartitionData has neither; KafkaRaftClient
    reads them): a consumer's fetch answers as v16 does."""
    fields = {"replica_directory_id": uuid.uuid4()} if version >= 17 else {}
    if version >= 18:
        fields["high_watermark"] = 0
    with Wire(bootstrap) as wire:
        _, topic_id = wire.create_topic(1)
        _, answer = wire.fetch(version, topic_id, 0, **fields)
        [(answered_id, index, code, high_watermark, size)] = answer
        assert (answered_id, index, code, high_watermark) == (topic_id, 0, ErrorCode.NONE, 1)
        assert size > 0
        _, unknown = wire.fetch(version, ZERO, 0, **fields)
        assert unknown == [(ZERO, 0, ErrorCode.UNKNOWN_TOPIC_ID, -1, 0)]


def test_a_fetch_18_high_watermark_below_the_leaders_does_not_end_a_long_poll(bootstrap: str) -> None:
    """KIP-1166's early answer (the fetcher's high watermark is behind the leader's) is KRaft's; a broker's consumer
    fetch at the log end waits its max_wait_ms as any other."""
    with Wire(bootstrap) as wire:
        _, topic_id = wire.create_topic(1)
        took, answer = wire.fetch(18, topic_id, 1, max_wait_ms=1000, min_bytes=1, high_watermark=0)
        assert answer == [(topic_id, 0, ErrorCode.NONE, 1, 0)]
        assert took >= 0.9


@pytest.fixture(scope="module", params=["klog", "kafka"])
def two_nodes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two combined nodes of one kind (a partition's leader and a broker that does not hold it)."""
    from klog.testing.cluster import KlogCluster
    from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs

    root = tmp_path_factory.mktemp(f"two-{request.param}")
    if request.param == "klog":
        cluster: Any = KlogCluster(root, 2)
    else:
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        cluster = KafkaCluster(root, 2)
    with cluster:
        cluster.wait_for_brokers()
        yield cluster


def test_a_broker_not_leading_the_partition_names_its_leader_in_produce_13_and_fetch_18_answers(two_nodes: Any) -> None:
    """NOT_LEADER_OR_FOLLOWER with the leader and its epoch (``current_leader``) and its endpoint (``node_endpoints``,
    KIP-951), the topic named by its id."""
    name = f"v13-{uuid.uuid4().hex[:8]}"
    assert two_nodes.create_topic(name) == (ErrorCode.NONE, None)
    leader = two_nodes.wait_for_topic(name, 1)[0]
    other = next(node for node in two_nodes.node_ids if node != leader)
    with two_nodes.wire(leader) as wire:
        topic_id = next(t.topic_id for t in wire.request(ApiKey.METADATA, 12, {
            "topics": [{"name": name, "topic_id": ZERO}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics)
    endpoint = [(leader, "127.0.0.1", two_nodes.client_ports[leader], None)]
    with two_nodes.wire(other) as wire:
        for _ in range(100):   # until the other node's metadata has the topic
            answer = wire.request(ApiKey.PRODUCE, 13, Wire.body([(topic_id, [(0, batch())])], acks=-1))
            [partition] = answer.responses[0].partition_responses
            if partition.error_code != ErrorCode.UNKNOWN_TOPIC_ID:
                break
            time.sleep(0.1)
        assert answer.responses[0].topic_id == topic_id
        assert (partition.error_code, partition.base_offset, partition.current_leader.leader_id,
                partition.current_leader.leader_epoch) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, leader, 0)
        assert [(n.node_id, n.host, n.port, n.rack) for n in answer.node_endpoints] == endpoint
        fetched = wire.request(ApiKey.FETCH, 18, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "", "topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20, "high_watermark": 0}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        [fetch_partition] = fetched.responses[0].partitions
        assert (fetched.responses[0].topic_id, fetch_partition.error_code, fetch_partition.current_leader.leader_id,
                fetch_partition.current_leader.leader_epoch) == (
                    topic_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, 0)
        assert [(n.node_id, n.host, n.port, n.rack) for n in fetched.node_endpoints] == endpoint

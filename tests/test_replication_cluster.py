"""Partition replication on real 3-node clusters, one script for klog and for Apache Kafka 4.x (Kafka's semantics are
the reference): combined ``broker,controller`` nodes started from the same properties, RF=3, min.insync.replicas=2,
nodes in racks a, b, c with ``replica.selector.class`` set, Kafka clients (confluent-kafka) and wire requests.

Followers hold the leader's batches byte for byte, consumers read only below the high watermark (on the leader and,
from Fetch v11, on a follower up to the HW its leader sent it), acks=all answers once the ISR has the batch, a
SIGKILLed or SIGTERMed leader is replaced from the ISR while an idempotent producer writes (no duplicate, no
sequence error, order kept), produce requests pipelined on one connection are appended and answered in request
order (klog appends several while acks=all answers wait, Kafka one), a lagging follower leaves the ISR and min.insync.replicas refuses acks=all until it is
back, and a consumer with ``client.rack`` reads from the in-sync follower of its rack (KIP-392).

One cluster of each kind per module (a Kafka cluster takes about a minute to start here): every test makes its own
topics and leaves every node running and resumed.
"""

from __future__ import annotations

import json
import select
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from klog.broker.config import BrokerConfig
from klog.broker.groups.storage import partition_for
from klog.broker.replication.selector import RACK_AWARE_REPLICA_SELECTOR
from klog.protocol import ApiKey
from klog.records import decode_batches, encode_batch
from klog.testing.cluster import KlogCluster
from klog.testing.cluster_api import Cluster
from replication_support import (REPLICATION_PROPERTIES, create_rf3_topic, heal, list_latest, produce_until_accepted,
                                 produce_until_refused, segment_bytes, three_node_cluster, wait, wait_same_logs)

pytestmark = pytest.mark.timeout(400)

PROPERTIES: dict[str, Any] = {**REPLICATION_PROPERTIES, "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                              # replicated as in production (klog.testing.kafka's single-node default is 1)
                              "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 4}
RACKS = {1: "a", 2: "b", 3: "c"}
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_NOT_AVAILABLE = 15
OFFSET_OUT_OF_RANGE = 1
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from three_node_cluster(request, tmp_path_factory, PROPERTIES,
                                  {i: {"broker.rack": rack} for i, rack in RACKS.items()})


@pytest.fixture(autouse=True)
def healed(cluster: Cluster) -> Iterator[None]:
    """Every node running and resumed after each test (a failing test included), every broker registered again."""
    yield
    heal(cluster)


# ---- helpers ----------------------------------------------------------------------------------------------------

def _leader(cluster: Cluster, topic: str, partition: int = 0) -> int:
    return cluster.wait_for_leader(topic, partition)


def _partition_meta(cluster: Cluster, node: int, topic: str, partition: int = 0) -> Any:
    answer = cluster.metadata(node, [topic]).topics[0]
    return next(p for p in answer.partitions if p.partition_index == partition), answer.topic_id


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int, **config: Any) -> dict[bytes, int]:
    """acks=all; returns value -> offset of every acknowledged one (asserting none failed)."""
    acked: dict[bytes, int] = {}
    failed: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.value()] = msg.offset()
        else:
            failed.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
                         **config})
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % partitions, on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, failed[:5]
    return acked


def _consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30.0
             ) -> dict[int, list[bytes]]:
    """partition -> the values read from offset 0, in offset order (until ``expected`` in all, or ``timeout``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return got


def _fetch(cluster: Cluster, node: int, topic: str, topic_id: Any, offset: int, *, version: int = 11,
           leader_epoch: int = -1, replica: int = -1, last_fetched_epoch: int = -1, rack: str = "") -> Any:
    """One partition-0 Fetch answer from ``node``: a consumer's (``replica`` -1) or a replica's (v15)."""
    body: dict[str, Any] = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": rack,
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
             "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1 if replica < 0 else 0,
             "partition_max_bytes": 1 << 20}]}]}
    if replica >= 0:
        body["replica_state"] = {"replica_id": replica, "replica_epoch": -1}
    with cluster.wire(node) as wire:
        return wire.request(ApiKey.FETCH, version, body).responses[0].partitions[0]


def _record_count(records: Any) -> int:
    return sum(b.last_offset_delta + 1 for b in decode_batches(bytes(records or b""), allow_partial_trailing=True))


def _produce_one(cluster: Cluster, node: int, topic: str, value: bytes, acks: int, timeout_ms: int = 10000) -> int:
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                                                  "topic_data": [{"name": topic, "partition_data": [
                                                      {"index": 0, "records": encode_batch([{"value": value}])}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def _follower_hw(cluster: Cluster, node: int, topic: str, topic_id: Any) -> int:
    return int(_fetch(cluster, node, topic, topic_id, 0).high_watermark)


# ---- tests --------------------------------------------------------------------------------------------------------

def test_acks_all_writes_reach_every_replica_byte_for_byte_and_are_read_once(cluster: Cluster) -> None:
    topic = create_rf3_topic(cluster, 2)
    values = [b"value-%05d" % i for i in range(2000)]
    acked = _produce(cluster.bootstrap_servers, topic, values, 2)
    assert set(acked) == set(values)
    # followers hold the leader's batches unchanged: the segment files are identical on every node
    wait_same_logs(cluster, topic, 2, cluster.node_ids)
    got = _consume(cluster.bootstrap_servers, topic, 2, len(values))
    assert sorted(got[0] + got[1]) == sorted(values)   # every value, exactly once
    _replica_fetch_and_follower_answers(cluster, topic)


def test_batches_the_leader_recompressed_reach_every_replica_byte_for_byte(cluster: Cluster) -> None:
    topic = create_rf3_topic(cluster, 1, configs={"compression.type": "zstd"})
    values = [b"value-%05d " % i * 10 for i in range(500)]
    acked = _produce(cluster.bootstrap_servers, topic, values, 1, **{"compression.type": "lz4"})
    assert set(acked) == set(values)
    # the followers copy the leader's zstd batches: the same segment file on every node
    wait_same_logs(cluster, topic, 1, cluster.node_ids)
    stored = decode_batches(segment_bytes(cluster, cluster.node_ids[0], topic, 0))
    assert stored and {batch.compression for batch in stored} == {"zstd"}
    assert sorted(_consume(cluster.bootstrap_servers, topic, 1, len(values))[0]) == sorted(values)


def _replica_fetch_and_follower_answers(cluster: Cluster, topic: str) -> None:
    """Wire answers of partition 0's leader to a replica's Fetch v15, and of a follower to clients."""
    leader = _leader(cluster, topic)
    meta, topic_id = _partition_meta(cluster, leader, topic)
    follower = next(i for i in meta.replica_nodes if i != leader)
    end = list_latest(cluster, leader, topic).offset

    caught_up = _fetch(cluster, leader, topic, topic_id, end, version=15, leader_epoch=0, replica=follower,
                       last_fetched_epoch=0)
    assert (caught_up.error_code, caught_up.high_watermark, bytes(caught_up.records or b"")) == (0, end, b"")
    # a replica claiming epoch-0 batches past the leader's end learns where epoch 0 ends there, and no records
    diverged = _fetch(cluster, leader, topic, topic_id, end + 5, version=15, leader_epoch=0, replica=follower,
                      last_fetched_epoch=0)
    assert diverged.error_code == 0 and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, end)
    with cluster.wire(leader) as wire:
        epoch_end = wire.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
    p = epoch_end.topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, end)

    # a follower refuses writes, and reads from consumers before Fetch v11 (KIP-392): they must go to the leader
    assert _produce_one(cluster, follower, topic, b"x", acks=1) == NOT_LEADER_OR_FOLLOWER
    assert _fetch(cluster, follower, topic, topic_id, 0, version=10).error_code == NOT_LEADER_OR_FOLLOWER
    # from v11 it serves them up to the high watermark its leader sent it, checking offsets and leader epochs
    wait(lambda: _follower_hw(cluster, follower, topic, topic_id) == end, "the follower's HW at the leader's")
    served = _fetch(cluster, follower, topic, topic_id, 0)
    assert served.error_code == 0 and served.high_watermark == end and _record_count(served.records) > 0
    assert _fetch(cluster, follower, topic, topic_id, end + 1).error_code == OFFSET_OUT_OF_RANGE
    assert _fetch(cluster, follower, topic, topic_id, 0, leader_epoch=1).error_code == UNKNOWN_LEADER_EPOCH
    assert _fetch(cluster, follower, topic, topic_id, 0, leader_epoch=0).error_code == 0


def test_consumers_never_read_past_the_high_watermark_on_the_leader_or_a_follower(cluster: Cluster) -> None:
    topic = create_rf3_topic(cluster, 1)
    leader = _leader(cluster, topic)
    meta, topic_id = _partition_meta(cluster, leader, topic)
    paused, follower = [i for i in meta.replica_nodes if i != leader]
    first = [b"first-%d" % i for i in range(50)]
    _produce(cluster.node_bootstrap(leader), topic, first, 1)
    wait_same_logs(cluster, topic, 1, cluster.node_ids)
    wait(lambda: _follower_hw(cluster, follower, topic, topic_id) == len(first), "the follower's HW at 50")
    cluster.pause(paused)
    try:
        # acks=1: in the leader's log at once and fetched by the live follower, but the paused ISR member has not
        # got it: the HW stays where it was (within replica.lag.time.max.ms, before the ISR shrinks)
        for i in range(20):
            assert _produce_one(cluster, leader, topic, b"second-%d" % i, acks=1) == 0
        latest = list_latest(cluster, leader, topic)
        assert latest.error_code == 0 and latest.offset == len(first), latest
        wait(lambda: len(segment_bytes(cluster, follower, topic, 0)) == len(segment_bytes(cluster, leader, topic, 0)),
              "the live follower holding the 20 records", timeout=4)
        for node in (leader, follower):
            answer = _fetch(cluster, node, topic, topic_id, 0)
            assert answer.error_code == 0 and answer.high_watermark == len(first), (node, answer)
            assert _record_count(answer.records) == len(first), node   # nothing past the HW, though the log has 20 more
            beyond = _fetch(cluster, node, topic, topic_id, len(first))
            assert beyond.error_code == 0 and _record_count(beyond.records) == 0, (node, beyond)
            # past the HW, before the log end: no records and no error (as Kafka answers, not OFFSET_NOT_AVAILABLE)
            inside = _fetch(cluster, node, topic, topic_id, len(first) + 10)
            assert inside.error_code == 0 and _record_count(inside.records) == 0, (node, inside)
    finally:
        cluster.resume(paused)
    # the paused follower fetches again: the HW reaches the log end and the rest becomes visible
    got = _consume(cluster.node_bootstrap(leader), topic, 1, len(first) + 20)
    assert got[0] == first + [b"second-%d" % i for i in range(20)]
    wait_same_logs(cluster, topic, 1, cluster.node_ids)


def _batches_in_log(cluster: Cluster, node: int, topic: str) -> int:
    """The record batches in the node's first segment file of partition 0 (walked by their length fields)."""
    data = segment_bytes(cluster, node, topic, 0)
    count = position = 0
    while position + 12 <= len(data):
        position += 12 + int.from_bytes(data[position + 8:position + 12], "big")
        count += 1
    return count


def _produce_body(topic: str, value: bytes, acks: int) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 20000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([{"value": value}])}]}]}


def test_produce_requests_pipelined_on_one_connection_are_appended_and_answered_in_request_order(
        cluster: Cluster) -> None:
    """While a paused ISR member holds acks=all answers back, one connection's produce requests are appended in
    request order, as many at once as the broker takes (Kafka reads a connection's next request only once it
    answered the last; klog appends up to klog.produce.pipeline.depth while their answers wait), and every
    answer (acks=all, then acks=1, then a Metadata request behind them) comes in request order once it fetches."""
    topic = create_rf3_topic(cluster, 1)
    leader = _leader(cluster, topic)
    meta, _ = _partition_meta(cluster, leader, topic)
    paused = next(i for i in meta.replica_nodes if i != leader)
    depth = BrokerConfig({})["klog.produce.pipeline.depth"]
    appended_at_once = depth if isinstance(cluster, KlogCluster) else 1
    acks_all = depth + 2
    with cluster.wire(leader) as wire:
        cluster.pause(paused)   # it stays in the ISR for replica.lag.time.max.ms (5 s): acks=all answers wait
        try:
            sent = [wire.send(ApiKey.PRODUCE, 9, _produce_body(topic, b"v%d" % i, -1)) for i in range(acks_all)]
            sent.append(wire.send(ApiKey.PRODUCE, 9, _produce_body(topic, b"v%d" % acks_all, 1)))
            sent.append(wire.send(ApiKey.METADATA, 12, {"topics": [{"name": topic}],
                                                        "allow_auto_topic_creation": False,
                                                        "include_topic_authorized_operations": False}))
            wait(lambda: _batches_in_log(cluster, leader, topic) >= appended_at_once,
                 f"{appended_at_once} batches in the leader's log", timeout=3)
            time.sleep(0.3)
            assert _batches_in_log(cluster, leader, topic) == appended_at_once   # the rest wait for an answer
            readable, _, _ = select.select([wire.sock], [], [], 0.3)
            assert not readable, "an acks=all answer came before the whole ISR had the batch"
        finally:
            cluster.resume(paused)
        got = [wire.receive(ApiKey.PRODUCE, 9) for _ in range(acks_all + 1)]
        assert [cid for cid, _ in got] == sent[:-1]
        answers = [answer.responses[0].partition_responses[0] for _, answer in got]
        assert [(a.error_code, a.base_offset) for a in answers] == [(0, i) for i in range(acks_all + 1)]
        cid, metadata = wire.receive(ApiKey.METADATA, 12)
        assert cid == sent[-1] and metadata.topics[0].error_code == 0
    assert _consume(cluster.node_bootstrap(leader), topic, 1, acks_all + 1)[0] == [
        b"v%d" % i for i in range(acks_all + 1)]
    wait_same_logs(cluster, topic, 1, cluster.node_ids)


def test_a_failed_acks_0_produce_behind_waiting_acks_all_answers_closes_the_connection_after_they_are_sent(
        cluster: Cluster) -> None:
    """Kafka closes an acks=0 producer's connection when its write fails; requests before it on the connection
    are answered first, also when those answers wait for the ISR."""
    topic = create_rf3_topic(cluster, 1)
    leader = _leader(cluster, topic)
    meta, _ = _partition_meta(cluster, leader, topic)
    paused = next(i for i in meta.replica_nodes if i != leader)
    with cluster.wire(leader) as wire:
        cluster.pause(paused)
        try:
            sent = [wire.send(ApiKey.PRODUCE, 9, _produce_body(topic, b"w%d" % i, -1)) for i in range(2)]
            wire.send(ApiKey.PRODUCE, 9, _produce_body(f"missing-{uuid.uuid4().hex[:8]}", b"lost", 0))
            readable, _, _ = select.select([wire.sock], [], [], 1.0)
            assert not readable, "answered (or closed) before the whole ISR had the batches"
        finally:
            cluster.resume(paused)
        got = [wire.receive(ApiKey.PRODUCE, 9) for _ in sent]
        assert [cid for cid, _ in got] == sent
        assert [(a.responses[0].partition_responses[0].error_code, a.responses[0].partition_responses[0].base_offset)
                for _, a in got] == [(0, 0), (0, 1)]
        assert wire.is_closed_by_peer(10)


@pytest.mark.parametrize("stop", ["sigkill", "sigstop", pytest.param("sigterm", marks=pytest.mark.long)])
def test_an_idempotent_producer_writes_through_a_leader_failover_without_duplicates_or_sequence_errors(
        cluster: Cluster, stop: str) -> None:
    """The leader is SIGKILLed (or SIGSTOPped until the controller fenced it and elected another, or shut down
    cleanly) while an idempotent acks=all producer has batches in flight
    that the next leader already holds but nobody acknowledged: the second follower is paused meanwhile, so the high
    watermark stays below them. The new leader knows the producer's sequences from the batches it replicated, so
    the retries are answered with the original offsets (no duplicate) and new batches follow in order (no
    OUT_OF_ORDER_SEQUENCE, no fatal error)."""
    topic = create_rf3_topic(cluster, 1)
    old_leader = _leader(cluster, topic)
    meta, _ = _partition_meta(cluster, old_leader, topic)
    # the next leader is the first other assigned replica in the ISR (Kafka's election order); the other one pauses
    successor, paused = [i for i in meta.replica_nodes if i != old_leader]
    acked: dict[bytes, int] = {}
    failed: list[Any] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[msg.value()] = msg.offset()

    # a request to a stopped leader times out after 5 s (not librdkafka's 30), then the batches go to the new one
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 120000, "request.timeout.ms": 5000,
                         "error_cb": errors.append})
    sent: list[bytes] = []

    def produce(count: int) -> None:
        for _ in range(count):
            value = b"v-%06d" % len(sent)
            sent.append(value)
            producer.produce(topic, value=value, on_delivery=report)
            producer.poll(0)

    produce(1000)
    assert producer.flush(60) == 0 and len(acked) == 1000
    # the leader's log holding just the acknowledged records: measured before the next ones are sent, since they
    # can all be appended before the test looks again (then the log never grows past a later measure)
    before = len(segment_bytes(cluster, old_leader, topic, 0))
    cluster.pause(paused)
    try:
        produce(1000)   # appended by the leader and fetched by the successor, not acknowledged (the HW waits)
        wait(lambda: len(segment_bytes(cluster, old_leader, topic, 0)) > before
              and segment_bytes(cluster, successor, topic, 0) == segment_bytes(cluster, old_leader, topic, 0),
              "the successor holding the unacknowledged batches", timeout=3)
        producer.poll(0)
        unacknowledged = len(sent) - len(acked)
        assert unacknowledged > 0, "every batch was acknowledged before the leader went"
        if stop == "sigkill":
            cluster.kill(old_leader)
        elif stop == "sigstop":
            cluster.pause(old_leader)
        else:
            # a controlled shutdown: klog exits 0, the JVM 143 (128 + SIGTERM) after its shutdown hooks
            assert cluster.stop_node(old_leader) in ((0,) if cluster.kind == "klog" else (0, 143))
    finally:
        cluster.resume(paused)
    if stop == "sigstop":
        # the stopped leader still holds the producer's requests; it answers them when it runs again, after the
        # controller fenced it and the successor took over (it then learns it lost the leadership)
        cluster.wait_for_leader(topic, 0, exclude=old_leader)
        cluster.resume(old_leader)
    produce(1000)
    assert producer.flush(150) == 0
    assert not failed, failed[:5]
    assert not [e for e in errors if e.fatal()], errors
    assert len(acked) == len(sent)
    live = [i for i in cluster.node_ids if i != old_leader]
    new_leader = _leader(cluster, topic)
    assert new_leader in live, new_leader
    got = _consume(",".join(cluster.node_bootstrap(i) for i in live), topic, 1, len(sent))
    assert got[0] == sent   # every value once, in the order produced
    assert sorted(acked.values()) == list(range(len(sent)))   # each at its own offset, no gap
    wait_same_logs(cluster, topic, 1, live)

    # the old leader comes back: it truncates what it had beyond the new leader's history, catches up and is taken
    # back into the ISR
    if stop != "sigstop":
        cluster.restart(old_leader)
    cluster.wait_for_isr(topic, 0, cluster.node_ids, timeout=90)
    wait_same_logs(cluster, topic, 1, cluster.node_ids)
    # a consumer of the old leader epoch is fenced, on the leader and on a follower alike
    meta, topic_id = _partition_meta(cluster, new_leader, topic)
    assert meta.leader_epoch > 0
    follower = next(i for i in meta.replica_nodes if i != new_leader)
    wait(lambda: _fetch(cluster, follower, topic, topic_id, 0, leader_epoch=meta.leader_epoch).error_code == 0,
          "the follower in the new leader epoch")
    for node in (new_leader, follower):
        assert _fetch(cluster, node, topic, topic_id, 0, leader_epoch=meta.leader_epoch - 1).error_code \
            == FENCED_LEADER_EPOCH, node


def _list_offsets_code(cluster: Cluster, node: int, topic: str, leader_epoch: int, version: int = 7) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "current_leader_epoch": leader_epoch, "timestamp": -1}]}]}
    with cluster.wire(node) as wire:
        return int(wire.request(ApiKey.LIST_OFFSETS, version, body).topics[0].partitions[0].error_code)


def _offset_for_leader_epoch_code(cluster: Cluster, node: int, topic: str, leader_epoch: int, version: int = 4
                                  ) -> int:
    body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": leader_epoch, "leader_epoch": 0}]}]}
    with cluster.wire(node) as wire:
        return int(wire.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body).topics[0].partitions[0].error_code)


def test_requests_naming_an_older_leader_epoch_are_fenced_and_a_newer_one_unknown_on_the_leader_and_a_follower(
        cluster: Cluster) -> None:
    """KIP-320 (Kafka's Partition.getLocalLog / checkCurrentLeaderEpoch): after a leader change (the leader shut
    down), Fetch v9+ (a consumer's, v9 and v12), ListOffsets v4+ and OffsetForLeaderEpoch v2+ naming the epoch
    before the partition's current one are answered FENCED_LEADER_EPOCH, naming the one after UNKNOWN_LEADER_EPOCH,
    by the leader and by a follower alike: the epoch is checked before whether this broker leads the partition
    (a follower answers NOT_LEADER_OR_FOLLOWER to a ListOffsets or an OffsetForLeaderEpoch only in the current
    epoch)."""
    topic = create_rf3_topic(cluster, 1)
    cluster.produce(topic, [0], 10)
    old_leader = _leader(cluster, topic)
    assert cluster.stop_node(old_leader) in ((0,) if cluster.kind == "klog" else (0, 143))
    leader = cluster.wait_for_leader(topic, 0, exclude=old_leader)
    follower = next(i for i in cluster.node_ids if i not in (old_leader, leader))
    meta, topic_id = _partition_meta(cluster, leader, topic)
    epoch = meta.leader_epoch
    assert epoch > 0
    for node in (leader, follower):   # each broker in the new epoch
        wait(lambda node=node: _fetch(cluster, node, topic, topic_id, 0, leader_epoch=epoch,
                                      version=12).error_code == 0, f"node {node} in leader epoch {epoch}")
    answers = {}
    for role, node in (("leader", leader), ("follower", follower)):
        for name, delta in (("older", -1), ("newer", 1)):
            answers[role, name] = (
                int(_fetch(cluster, node, topic, topic_id, 0, leader_epoch=epoch + delta, version=9).error_code),
                int(_fetch(cluster, node, topic, topic_id, 0, leader_epoch=epoch + delta, version=12).error_code),
                _list_offsets_code(cluster, node, topic, epoch + delta),
                _offset_for_leader_epoch_code(cluster, node, topic, epoch + delta))
        answers[role, "current"] = (_list_offsets_code(cluster, node, topic, epoch),
                                    _offset_for_leader_epoch_code(cluster, node, topic, epoch))
    assert answers == {
        ("leader", "older"): (FENCED_LEADER_EPOCH,) * 4, ("leader", "newer"): (UNKNOWN_LEADER_EPOCH,) * 4,
        ("follower", "older"): (FENCED_LEADER_EPOCH,) * 4, ("follower", "newer"): (UNKNOWN_LEADER_EPOCH,) * 4,
        ("leader", "current"): (0, 0), ("follower", "current"): (NOT_LEADER_OR_FOLLOWER,) * 2}


def test_a_lagging_follower_leaves_the_isr_min_insync_refuses_acks_all_until_it_caught_up_again(
        cluster: Cluster) -> None:
    topic = create_rf3_topic(cluster, 1, {"min.insync.replicas": "3"})
    leader = _leader(cluster, topic)
    assert _produce_one(cluster, leader, topic, b"acked-by-all-three", acks=-1) == 0
    paused = next(i for i in cluster.node_ids if i != leader)
    cluster.pause(paused)
    try:
        assert _produce_one(cluster, leader, topic, b"acks-1", acks=1) == 0   # the paused follower lags now
        cluster.wait_for_isr(topic, 0, [i for i in cluster.node_ids if i != paused], timeout=60)
        # writes that timed out while Kafka's leader had yet to enforce the shrink may be in the log, the refused
        # one never
        refused, timed_out = produce_until_refused(
            lambda value: _produce_one(cluster, leader, topic, value, acks=-1, timeout_ms=2000))
        assert _produce_one(cluster, leader, topic, b"acks-1-again", acks=1) == 0
    finally:
        cluster.resume(paused)
    cluster.wait_for_isr(topic, 0, cluster.node_ids, timeout=60)
    produce_until_accepted(lambda: _produce_one(cluster, leader, topic, b"acked-again", acks=-1))
    got = _consume(cluster.node_bootstrap(leader), topic, 1, 4 + len(timed_out))
    assert refused not in got[0], got[0]
    assert [v for v in got[0] if v not in timed_out] == [b"acked-by-all-three", b"acks-1", b"acks-1-again",
                                                         b"acked-again"]
    wait_same_logs(cluster, topic, 1, cluster.node_ids)


def _coordinator(cluster: Cluster, group: str, *, exclude: int | None = None) -> int:
    """The node FindCoordinator names for ``group`` (asked at every live node in turn until one answers)."""
    deadline = time.monotonic() + 60
    while True:
        for via in cluster.live_nodes():
            if via == exclude:
                continue
            with cluster.wire(via) as wire:
                found = wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
            answer = found.coordinators[0]
            if answer.error_code == 0 and answer.node_id != exclude:
                return int(answer.node_id)
        assert time.monotonic() < deadline, answer
        time.sleep(0.3)


def _commit_offset(cluster: Cluster, node: int, group: str, topic: str, offset: int) -> int:
    """A simple group's OffsetCommit (v8) of partition 0 at ``node``: its error code."""
    with cluster.wire(node, timeout=30) as wire:
        answer = wire.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return int(answer.topics[0].partitions[0].error_code)


def _committed_offset(cluster: Cluster, node: int, group: str, topic: str) -> tuple[int, int]:
    """(error code, committed offset of partition 0) as ``node`` answers OffsetFetch (v7)."""
    with cluster.wire(node) as wire:
        answer = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": False,
                                                       "topics": [{"name": topic, "partition_indexes": [0]}]})
    if answer.error_code:
        return int(answer.error_code), -1
    return int(answer.topics[0].partitions[0].error_code), int(answer.topics[0].partitions[0].committed_offset)


@pytest.mark.long
def test_an_offset_commit_is_answered_only_once_the_isr_has_it_and_survives_the_coordinators_kill(
        cluster: Cluster) -> None:
    """The coordinator writes a commit to __consumer_offsets as an acks=all write: while both followers of the
    group's offsets partition are paused no commit is acknowledged (COORDINATOR_NOT_AVAILABLE once
    offsets.commit.timeout.ms passes); an acknowledged one is on the followers, so the next coordinator has it
    right after a SIGKILL of the first."""
    topic = create_rf3_topic(cluster, 1)
    group = f"durable-{uuid.uuid4().hex[:8]}"
    coordinator = _coordinator(cluster, group)
    offsets_partition = partition_for(group, len(cluster.metadata(coordinator, ["__consumer_offsets"]).topics[0]
                                                 .partitions))
    assert cluster.wait_for_leader("__consumer_offsets", offsets_partition) == coordinator
    cluster.wait_for_isr("__consumer_offsets", offsets_partition, cluster.node_ids, timeout=60)
    # (a coordinator answers NOT_COORDINATOR until it has loaded the partition's groups)
    wait(lambda: _commit_offset(cluster, coordinator, group, topic, 3) == 0, "a first commit")
    followers = [i for i in cluster.node_ids if i != coordinator]
    for node in followers:
        cluster.pause(node)
    try:
        assert _commit_offset(cluster, coordinator, group, topic, 5) == COORDINATOR_NOT_AVAILABLE
    finally:
        for node in followers:
            cluster.resume(node)
    cluster.wait_for_isr("__consumer_offsets", offsets_partition, cluster.node_ids, timeout=60)
    wait(lambda: _commit_offset(cluster, coordinator, group, topic, 7) == 0, "a commit with the ISR back")
    cluster.kill(coordinator)
    successor = _coordinator(cluster, group, exclude=coordinator)
    wait(lambda: _committed_offset(cluster, successor, group, topic) == (0, 7),
         f"the commit on the new coordinator {successor}")


def test_a_consumer_with_client_rack_reads_from_the_in_sync_follower_of_its_rack(cluster: Cluster) -> None:
    """KIP-392: the leader answers the consumer's first Fetch with the follower of its rack as preferred read
    replica; the consumer reads every record there: librdkafka's statistics name the broker it fetches from, and it
    keeps reading with the leader paused."""
    topic = create_rf3_topic(cluster, 1)
    leader = _leader(cluster, topic)
    meta, topic_id = _partition_meta(cluster, leader, topic)
    follower = next(i for i in meta.replica_nodes if i != leader)
    values = [b"rack-%04d" % i for i in range(300)]
    # one record per batch, so the consumer needs many fetches (a small max.partition.fetch.bytes below)
    _produce(cluster.node_bootstrap(leader), topic, values, 1, **{"linger.ms": 0, "batch.num.messages": 1})
    wait(lambda: _follower_hw(cluster, follower, topic, topic_id) == len(values), "the follower's HW at the end")

    stats: list[dict[str, Any]] = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "client.rack": RACKS[follower],
                         "max.partition.fetch.bytes": 200, "fetch.max.bytes": 1000, "message.max.bytes": 1000,
                         "queued.min.messages": 5,
                         # not librdkafka's 1 s pause each time 5 are queued (8 records a second: 300 took over 30 s in CI)
                         "fetch.queue.backoff.ms": 10,
                         "statistics.interval.ms": 200, "stats_cb": lambda raw: stats.append(json.loads(raw))})
    got: list[bytes] = []

    def fetching_from() -> int | None:
        if not stats:
            return None
        partition = stats[-1]["topics"].get(topic, {}).get("partitions", {}).get("0", {})
        return partition.get("broker")

    def poll_until(done: Any, timeout: float, pace_s: float = 0.0) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append(msg.value())
                time.sleep(pace_s)

    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        # slowly (the statistics come every 200 ms): most records are still to be read when the switch is seen
        poll_until(lambda: got and fetching_from() == follower, 30, pace_s=0.02)
        assert got, "nothing consumed"
        assert fetching_from() == follower, (fetching_from(), leader, follower)
        assert len(got) < len(values) // 2, len(got)
        # the rest comes from the follower alone
        cluster.pause(leader)
        try:
            poll_until(lambda: len(got) >= len(values), 30)
        finally:
            cluster.resume(leader)
        seen = len(stats)
        poll_until(lambda: len(stats) >= seen + 2, 10)   # statistics taken after the last record
        assert fetching_from() == follower, (fetching_from(), leader, follower)
    finally:
        consumer.close()
    assert got == values
    brokers = {b["nodeid"]: b for b in stats[-1]["brokers"].values() if b["nodeid"] >= 0}
    assert brokers[follower]["rxbytes"] > sum(map(len, values)), brokers[follower]["rxbytes"]

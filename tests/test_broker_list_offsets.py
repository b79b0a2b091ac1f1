"""ListOffsets answers at every version the broker advertises: latest, earliest, max timestamp, timestamp
lookups through the time index, and per-partition errors, all in one multi-topic request as clients send it."""

from __future__ import annotations

import time
import uuid

import pytest

from klog.broker.errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
)
from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(60)

BASE = int(time.time() * 1000) - 100_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A broker with topic ``full`` (partition 0: 4 records at BASE, +10, +50, +20; partition 1: empty)."""
    with BrokerProcess(tmp_path_factory.mktemp("list-offsets")) as proc, \
            WireClient(proc.host, proc.port) as wire:
        topic = f"full-{uuid.uuid4().hex[:8]}"
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False})
        assert created.topics[0].error_code == NONE
        for records in ([{"value": b"a", "timestamp": BASE}, {"value": b"b", "timestamp": BASE + 10}],
                        [{"value": b"c", "timestamp": BASE + 50}], [{"value": b"d", "timestamp": BASE + 20}]):
            produced = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": encode_batch(records)}]}]})
            assert produced.responses[0].partition_responses[0].error_code == NONE
        yield proc, wire, topic


def _ask(wire, version, topics, isolation_level=0):
    body = {"replica_id": -1, "isolation_level": isolation_level, "timeout_ms": 5000,
            "topics": [{"name": name, "partitions": [
                {"partition_index": p, "current_leader_epoch": epoch, "timestamp": ts, "max_num_offsets": 1}
                for p, ts, epoch in parts]} for name, parts in topics]}
    response = wire.request(ApiKey.LIST_OFFSETS, version, body)
    return [(t.name, [(p.partition_index, p.error_code, p.offset, p.timestamp, p.leader_epoch)
                      for p in t.partitions]) for t in response.topics]


@pytest.mark.parametrize("version", range(1, 9))
def test_every_version_answers_each_lookup_and_each_partition_in_request_order(served, version):
    _proc, wire, topic = served
    asked = [
        (0, -1, -1), (0, -2, -1), (0, -3, -1), (0, -4, -1), (0, BASE + 5, -1), (0, BASE + 50, -1),
        (0, BASE + 51, -1), (0, 0, -1), (0, -5, -1), (0, -7, -1),
        (1, -1, -1), (1, -2, -1), (1, -3, -1), (1, BASE, -1),
        (7, -1, -1),
    ]
    # max timestamp (-3) is v7+, earliest-local (-4) v8+, latest-tiered (-5) v9+ (above klog's v8); before that,
    # and for any other negative timestamp, Kafka answers UNSUPPORTED_VERSION
    unsupported = (UNSUPPORTED_VERSION, -1, -1)
    expected = [
        (NONE, 4, -1), (NONE, 0, -1),
        (NONE, 2, BASE + 50) if version >= 7 else unsupported,
        (NONE, 0, -1) if version >= 8 else unsupported,
        (NONE, 1, BASE + 10), (NONE, 2, BASE + 50), (NONE, -1, -1), (NONE, 0, BASE), unsupported, unsupported,
        (NONE, 0, -1), (NONE, 0, -1), (NONE, -1, -1) if version >= 7 else unsupported, (NONE, -1, -1),
        (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]
    # one request each: a partition named twice in one request is refused (INVALID_REQUEST)
    got = [_ask(wire, version, [(topic, [lookup])])[0][1][0] for lookup in asked]
    assert [p for p, *_ in got] == [p for p, _, _ in asked]
    assert [tuple(rest[:3]) for _, *rest in got] == expected
    # v4+: each answered offset carries its leader epoch (0: this broker's partitions were never led by another)
    epochs = [0 if version >= 4 and code == NONE and offset >= 0 else -1 for code, offset, _ts in expected]
    assert [epoch for *_, epoch in got] == epochs
    answer = _ask(wire, version, [(topic, [(0, -1, -1)]), ("no-such-topic", [(0, -1, -1)]), (topic, [(1, -1, -1)])])
    assert [name for name, _ in answer] == [topic, "no-such-topic"]   # a topic named twice answered once
    epoch = 0 if version >= 4 else -1
    assert answer[0][1] == [(0, NONE, 4, -1, epoch), (1, NONE, 0, -1, epoch)]
    assert answer[1][1] == [(0, UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)]


@pytest.mark.parametrize("version", range(4, 9))
def test_a_client_leader_epoch_other_than_the_brokers_is_refused(served, version):
    _proc, wire, topic = served
    answers = [_ask(wire, version, [(topic, [lookup])])[0][1][0] for lookup in [(0, -1, 0), (0, -1, 5), (0, -2, -1)]]
    # klog's single broker leads every partition in epoch 0: older epochs are fenced, newer ones unknown
    fenced = [(p, code, off) for p, code, off, _ts, _epoch in answers]
    assert fenced == [(0, NONE, 4), (0, UNKNOWN_LEADER_EPOCH, -1), (0, NONE, 0)]


def test_an_older_leader_epoch_is_fenced(served):
    # LEADER_EPOCH is 0, so a fenced epoch cannot be sent as a valid int >= 0 below it; -2 is below it too
    _proc, wire, topic = served
    answer = _ask(wire, 8, [(topic, [(0, -1, -2)])])
    assert answer[0][1][0][1] == FENCED_LEADER_EPOCH


# ---- the same script on Apache Kafka 4.x and klog (the `bootstrap` fixture) ----------------------------------------

@pytest.fixture(scope="module")
def kafka_or_klog(bootstrap):
    """A wire client to one broker (Kafka's, then klog's) and a new topic ``t`` (2 partitions; partition 0: records
    at BASE, +10 (one batch) and +50, acks=all)."""
    host, port = bootstrap.rsplit(":", 1)
    with WireClient(host, int(port), timeout=30) as wire:
        topic = f"lo-{uuid.uuid4().hex[:8]}"
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 30000, "validate_only": False})
        assert created.topics[0].error_code == NONE
        for records in ([{"value": b"a", "timestamp": BASE}, {"value": b"b", "timestamp": BASE + 10}],
                        [{"value": b"c", "timestamp": BASE + 50}]):
            _produce_until_led(wire, topic, records)
        yield bootstrap, wire, topic


def _produce_until_led(wire, topic, records):
    """acks=all to partition 0, retried while the new topic's leader is not known yet (Kafka, just after creation)."""
    deadline = time.monotonic() + 30
    while True:
        produced = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": encode_batch(records)}]}]})
        code = produced.responses[0].partition_responses[0].error_code
        if code == NONE:
            return
        assert time.monotonic() < deadline, code
        time.sleep(0.2)


def test_a_partition_named_twice_is_answered_once_with_invalid_request_and_the_rest_normally(kafka_or_klog):
    _bootstrap, wire, topic = kafka_or_klog
    answer = _ask(wire, 8, [(topic, [(0, -1, -1), (1, -1, -1), (0, -2, -1)]), (topic, [(1, -2, -1)])])
    by_partition = sorted(p for _name, partitions in answer for p in partitions)
    # Kafka answers each duplicated partition once (its answers are keyed by partition)
    assert by_partition == [(0, INVALID_REQUEST, -1, -1, -1), (1, INVALID_REQUEST, -1, -1, -1)]
    answer = _ask(wire, 8, [(topic, [(0, -1, -1), (1, -1, -1), (0, -2, -1)])])
    assert sorted(p[:2] for _name, partitions in answer for p in partitions) == [(0, INVALID_REQUEST), (1, NONE)]


@pytest.mark.parametrize("version", [1, 4, 8])
def test_a_topic_named_in_two_entries_is_answered_in_one_entry(kafka_or_klog, version):
    _bootstrap, wire, topic = kafka_or_klog
    answer = _ask(wire, version, [(topic, [(1, -1, -1)]), ("no-such-topic", [(0, -1, -1)]), (topic, [(0, -1, -1)])])
    # Kafka groups its answers by topic, topics and partitions in no order the request sets (klog: its first place)
    assert sorted((name, sorted(p[:3] for p in partitions)) for name, partitions in answer) == sorted([
        ("no-such-topic", [(0, UNKNOWN_TOPIC_OR_PARTITION, -1)]), (topic, [(0, NONE, 3), (1, NONE, 0)])])
    # the same partition in two entries: one entry, the partition answered once (INVALID_REQUEST)
    answer = _ask(wire, version, [(topic, [(0, -1, -1)]), (topic, [(0, -2, -1)])])
    assert [(name, [p[:2] for p in partitions]) for name, partitions in answer] == [(topic, [(0, INVALID_REQUEST)])]


@pytest.mark.parametrize("version", [1, 4, 6, 7, 8])
def test_a_negative_timestamp_the_version_does_not_carry_is_unsupported_version(kafka_or_klog, version):
    _bootstrap, wire, topic = kafka_or_klog
    for timestamp, first_version in [(-3, 7), (-4, 8), (-5, 9), (-6, 11), (-7, None), (-1000, None)]:
        answer = _ask(wire, version, [(topic, [(0, timestamp, -1)])])[0][1][0]
        if first_version is not None and version >= first_version:
            assert answer[1] == NONE, (timestamp, answer)
        else:
            assert answer == (0, UNSUPPORTED_VERSION, -1, -1, -1), timestamp


@pytest.mark.parametrize("version", [1, 4, 8])
def test_answered_offsets_carry_the_leader_epoch_of_their_batch_from_v4(kafka_or_klog, version):
    """KIP-320: Java clients validate a reset position with the leader epoch ListOffsets answers with it."""
    _bootstrap, wire, topic = kafka_or_klog
    with_epoch = 0 if version >= 4 else -1   # a new topic's only leader leads in epoch 0
    lookups = [(0, -1, -1), (0, -2, -1), (0, BASE + 5, -1), (0, BASE + 60, -1)] + (
        [(0, -3, -1), (0, -4, -1)] if version >= 8 else [])
    answers = [_ask(wire, version, [(topic, [lookup])])[0][1][0] for lookup in lookups]
    expected = [(0, NONE, 3, -1, with_epoch), (0, NONE, 0, -1, with_epoch), (0, NONE, 1, BASE + 10, with_epoch),
                (0, NONE, -1, -1, -1)] + (
        [(0, NONE, 2, BASE + 50, with_epoch), (0, NONE, 0, -1, with_epoch)] if version >= 8 else [])
    assert answers == expected


def test_a_read_committed_timestamp_lookup_inside_an_open_transaction_answers_nothing(kafka_or_klog):
    """read_committed reads stop at the last stable offset: a lookup by timestamp or max timestamp finding a record
    of an open transaction answers -1, as one past the high watermark, until the transaction commits."""
    from confluent_kafka import Producer

    bootstrap, wire, topic = kafka_or_klog
    # after every other timestamp of the partition, the commit marker's included (max timestamp finds the record)
    stamp = int(time.time() * 1000) + 600_000
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lo-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1, timestamp=stamp)
    assert producer.flush(30) == 0

    def lookups(isolation_level):
        return [_ask(wire, 8, [(topic, [(1, ts, -1)])], isolation_level)[0][1][0][1:4] for ts in (stamp - 1, -3)]

    try:
        assert lookups(0) == [(NONE, 0, stamp)] * 2
        assert lookups(1) == [(NONE, -1, -1)] * 2
    finally:
        producer.commit_transaction(30)
    deadline = time.monotonic() + 30   # Kafka writes the commit marker after EndTxn answers
    while lookups(1) != [(NONE, 0, stamp)] * 2:
        assert time.monotonic() < deadline, lookups(1)
        time.sleep(0.2)

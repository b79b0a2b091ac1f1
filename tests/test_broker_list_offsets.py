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


def _ask(wire, version, topics):
    body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000,
            "topics": [{"name": name, "partitions": [
                {"partition_index": p, "current_leader_epoch": epoch, "timestamp": ts, "max_num_offsets": 1}
                for p, ts, epoch in parts]} for name, parts in topics]}
    response = wire.request(ApiKey.LIST_OFFSETS, version, body)
    return [(t.name, [(p.partition_index, p.error_code, p.offset, p.timestamp, p.leader_epoch)
                      for p in t.partitions]) for t in response.topics]


@pytest.mark.parametrize("version", range(1, 9))
def test_every_version_answers_each_partition_in_request_order(served, version):
    _proc, wire, topic = served
    asked = [
        (0, -1, -1), (0, -2, -1), (0, -3, -1), (0, -4, -1), (0, BASE + 5, -1), (0, BASE + 50, -1),
        (0, BASE + 51, -1), (0, 0, -1), (0, -5, -1),
        (1, -1, -1), (1, -2, -1), (1, -3, -1), (1, BASE, -1),
        (7, -1, -1),
    ]
    # max timestamp (-3) is v7+, earliest-local (-4) v8+; before that they are invalid negative timestamps
    invalid = (INVALID_REQUEST, -1, -1)
    expected = [
        (NONE, 4, -1), (NONE, 0, -1),
        (NONE, 2, BASE + 50) if version >= 7 else invalid,
        (NONE, 0, -1) if version >= 8 else invalid,
        (NONE, 1, BASE + 10), (NONE, 2, BASE + 50), (NONE, -1, -1), (NONE, 0, BASE), invalid,
        (NONE, 0, -1), (NONE, 0, -1), (NONE, -1, -1) if version >= 7 else invalid, (NONE, -1, -1),
        (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]
    answer = _ask(wire, version, [(topic, asked), ("no-such-topic", [(0, -1, -1)]), (topic, [(1, -1, -1)])])
    assert [name for name, _ in answer] == [topic, "no-such-topic", topic]
    got = answer[0][1]
    assert [p for p, *_ in got] == [p for p, _, _ in asked]
    assert [tuple(rest[:3]) for _, *rest in got] == expected
    assert all(epoch == -1 for *_, epoch in got)
    assert answer[1][1] == [(0, UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)]
    assert answer[2][1] == [(1, NONE, 0, -1, -1)]


@pytest.mark.parametrize("version", range(4, 9))
def test_a_client_leader_epoch_other_than_the_brokers_is_refused(served, version):
    _proc, wire, topic = served
    answer = _ask(wire, version, [(topic, [(0, -1, 0), (0, -1, 5), (0, -2, -1)])])
    # klog's single broker leads every partition in epoch 0: older epochs are fenced, newer ones unknown
    fenced = [(p, code, off) for p, code, off, _ts, _epoch in answer[0][1]]
    assert fenced == [(0, NONE, 4), (0, UNKNOWN_LEADER_EPOCH, -1), (0, NONE, 0)]


def test_an_older_leader_epoch_is_fenced(served):
    # LEADER_EPOCH is 0, so a fenced epoch cannot be sent as a valid int >= 0 below it; -2 is below it too
    _proc, wire, topic = served
    answer = _ask(wire, 8, [(topic, [(0, -1, -2)])])
    assert answer[0][1][0][1] == FENCED_LEADER_EPOCH

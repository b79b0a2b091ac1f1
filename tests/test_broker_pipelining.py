"""Requests pipelined on one connection are answered in order, whether their handler answers at once (answered
in the read callback) or waits (a long-polling Fetch, answered by the connection's task), and a request that
arrives while an earlier one waits is not answered before it."""

from __future__ import annotations

import time
import uuid

import pytest

from klog.protocol import ApiKey, encode_request
from klog.records import decode_batches, encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(60)

LONG_POLL_MS = 400


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("pipelining")) as proc:
        yield proc


def _make_topic(wire):
    name = f"pl-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0
    return name


def _produce(topic, value, acks=1):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([{"value": value}])}]}]}


def _fetch(topic, offset, max_wait_ms, min_bytes):
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}


def test_answers_keep_request_order_across_immediate_and_waiting_handlers(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire)
        # one write: produce, a fetch that long-polls (min_bytes never reached), produce, acks=0 produce,
        # metadata, api versions
        frames = [
            encode_request(ApiKey.PRODUCE, 9, 1, "pl", _produce(topic, b"a")),
            encode_request(ApiKey.FETCH, 12, 2, "pl", _fetch(topic, 0, LONG_POLL_MS, 1 << 20)),
            encode_request(ApiKey.PRODUCE, 9, 3, "pl", _produce(topic, b"b")),
            encode_request(ApiKey.PRODUCE, 9, 4, "pl", _produce(topic, b"c", acks=0)),
            encode_request(ApiKey.METADATA, 12, 5, "pl", {"topics": [{"name": topic}],
                                                         "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False}),
            encode_request(ApiKey.API_VERSIONS, 3, 6, "pl", {"client_software_name": "pl",
                                                            "client_software_version": "1"}),
        ]
        started = time.monotonic()
        wire.send_raw(b"".join(frames))
        cid, produced = wire.receive(ApiKey.PRODUCE, 9)
        assert cid == 1 and produced.responses[0].partition_responses[0].base_offset == 0
        cid, fetched = wire.receive(ApiKey.FETCH, 12)
        waited = time.monotonic() - started
        assert cid == 2
        # the fetch waited its max_wait_ms: the produce behind it was not appended before it was answered
        assert waited >= LONG_POLL_MS / 1000 * 0.9
        records = [r.value for b in decode_batches(bytes(fetched.responses[0].partitions[0].records))
                   for r in b.records]
        assert records == [b"a"]
        cid, produced = wire.receive(ApiKey.PRODUCE, 9)
        assert cid == 3 and produced.responses[0].partition_responses[0].base_offset == 1
        # acks=0: no answer; the next answers are metadata and api versions, in order
        cid, metadata = wire.receive(ApiKey.METADATA, 12)
        assert cid == 5 and metadata.topics[0].error_code == 0
        cid, versions = wire.receive(ApiKey.API_VERSIONS, 3)
        assert cid == 6 and versions.error_code == 0
        # the acks=0 record was appended after "b"
        cid = wire.send(ApiKey.FETCH, 12, _fetch(topic, 0, 0, 0))
        got, fetched = wire.receive(ApiKey.FETCH, 12)
        assert got == cid
        records = [r.value for b in decode_batches(bytes(fetched.responses[0].partitions[0].records))
                   for r in b.records]
        assert records == [b"a", b"b", b"c"]


def test_requests_split_across_many_small_writes_are_all_answered_in_order(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire)
        stream = b"".join(encode_request(ApiKey.PRODUCE, 9, i, "pl", _produce(topic, b"%d" % i))
                          for i in range(1, 41))
        for start in range(0, len(stream), 7):  # frames cut at arbitrary points, several per read or none
            wire.send_raw(stream[start:start + 7])
        for i in range(1, 41):
            cid, produced = wire.receive(ApiKey.PRODUCE, 9)
            assert cid == i and produced.responses[0].partition_responses[0].base_offset == i - 1

"""Which path a Fetch response takes out of the broker: small ones are copied and written with their header in
one system call, large ones go out with sendfile (zero copy). Observed through the broker's counters
(``klog.Broker.stats()``), never through timing; the records must be the same bytes on either path."""

from __future__ import annotations

import os

import pytest

import klog
from klog.protocol import ApiKey
from klog.records import decode_batches, encode_batch
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

THRESHOLD = 64 * 1024


def create_topic(wire: WireClient, name: str) -> None:
    response = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0, response


def produce(wire: WireClient, topic: str, values: list[bytes]) -> None:
    batch = encode_batch([{"key": None, "value": v} for v in values])
    response = wire.request(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert response.responses[0].partition_responses[0].error_code == 0


def fetch_values(wire: WireClient, topic: str, *, max_bytes: int = 8 << 20) -> list[bytes]:
    response = wire.request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                    "last_fetched_epoch": -1, "log_start_offset": -1,
                                                    "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0
    return [r.value for batch in decode_batches(bytes(partition.records)) for r in batch.records]


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in before}


def test_small_fetches_are_copied_in_one_write_and_large_ones_use_sendfile():
    small = [os.urandom(100) for _ in range(10)]                        # ~1.3 KiB of batch
    large = [os.urandom(10_000) for _ in range(20)]                     # ~200 KiB of batch
    with klog.Broker() as broker, WireClient(broker.host, broker.port) as wire:
        create_topic(wire, "small")
        create_topic(wire, "large")
        produce(wire, "small", small)
        produce(wire, "large", large)

        before = broker.stats()
        assert fetch_values(wire, "small") == small
        small_fetch = delta(before, broker.stats())
        assert small_fetch["fetch_copied_responses"] == 1
        assert 0 < small_fetch["fetch_copied_bytes"] < THRESHOLD
        assert small_fetch["sendfile_responses"] == 0 and small_fetch["sendfile_bytes"] == 0

        before = broker.stats()
        assert fetch_values(wire, "large") == large
        large_fetch = delta(before, broker.stats())
        assert large_fetch["sendfile_responses"] == 1
        assert large_fetch["sendfile_bytes"] >= sum(len(v) for v in large)
        assert large_fetch["fetch_copied_responses"] == 0 and large_fetch["fetch_copied_bytes"] == 0


def test_threshold_zero_sends_every_fetch_with_sendfile():
    values = [b"x" * 50, b"y" * 50]
    with klog.Broker(config={"klog.fetch.sendfile.min.bytes": 0}) as broker, \
            WireClient(broker.host, broker.port) as wire:
        create_topic(wire, "t")
        produce(wire, "t", values)
        before = broker.stats()
        assert fetch_values(wire, "t") == values
        fetched = delta(before, broker.stats())
        assert fetched["sendfile_responses"] == 1 and fetched["sendfile_bytes"] > 0
        assert fetched["fetch_copied_responses"] == 0


def test_sendfile_disabled_never_uses_sendfile_even_for_large_fetches():
    large = [os.urandom(10_000) for _ in range(20)]
    with klog.Broker(config={"klog.fetch.sendfile.enable": False}) as broker, \
            WireClient(broker.host, broker.port) as wire:
        create_topic(wire, "t")
        produce(wire, "t", large)
        before = broker.stats()
        assert fetch_values(wire, "t") == large
        fetched = delta(before, broker.stats())
        assert fetched["sendfile_bytes"] == 0 and fetched["sendfile_responses"] == 0


def test_many_pipelined_small_fetches_are_answered_in_order():
    values = [b"v%d" % i for i in range(5)]
    # the event loop's writer is under test: the native front would answer these Fetches itself
    with klog.Broker(config={"klog.network.native.front.fetch.enable": False}) as broker, \
            WireClient(broker.host, broker.port) as wire:
        create_topic(wire, "t")
        produce(wire, "t", values)
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                          "fetch_offset": 0, "last_fetched_epoch": -1,
                                                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        ids = []
        for offset in range(len(values)):
            body["topics"][0]["partitions"][0]["fetch_offset"] = offset
            ids.append(wire.send(ApiKey.FETCH, 12, body))
        for expected_id in ids:
            correlation_id, response = wire.receive(ApiKey.FETCH, 12)
            assert correlation_id == expected_id
            records = response.responses[0].partitions[0].records
            assert [r.value for b in decode_batches(bytes(records)) for r in b.records] == values
        assert broker.stats()["fetch_copied_responses"] == len(values)

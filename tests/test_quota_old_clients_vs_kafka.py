"""KIP-219 and old clients, on klog and on Apache Kafka 4.x from the same properties: a client over its quota is
told its throttle time and its connection is muted, and the throttled answer is sent at once whatever the request's
version: Apache Kafka 4.3.1 does not hold the answer of a version older than KIP-219 (Produce v5, whose client does
not throttle itself: ``AbstractResponse.shouldClientThrottle``) either; it answered one throttled 17,965 ms in
35 ms. klog does the same: holding it would differ from Kafka."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey, decode_response, encode_request
from klog.records import encode_batch
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient, read_frame

pytestmark = pytest.mark.timeout(180)

#: two windows of 2 s: a client far over its quota is throttled for about one window (Kafka's bound)
PROPS = {"quota.window.num": 2, "quota.window.size.seconds": 2, "num.partitions": 1}
CLIENT = "old-producer"
TOPIC = "held"
RATE = 10240   # producer_byte_rate of CLIENT, bytes/s; each produce below is 10x that


@pytest.fixture(params=["klog", "kafka"])
def broker(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[str, int]]:
    with one_broker(request.param, tmp_path, PROPS) as bootstrap:
        host, port = bootstrap.rsplit(":", 1)
        with WireClient(host, int(port)) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
                {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout_ms": 10000, "validate_only": False})
            assert created.topics[0].error_code == 0, created
            quota = wire.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": CLIENT}],
                 "ops": [{"key": "producer_byte_rate", "value": float(RATE), "remove": False}]}],
                "validate_only": False})
            assert quota.entries[0].error_code == 0, quota
        yield host, int(port)


def produce(server: tuple[str, int], version: int) -> tuple[float, int]:
    """(ms until the answer arrived, its throttle_time_ms) of one 100 KB Produce at ``version``, on a new
    connection (no earlier throttle mutes it)."""
    batch = encode_batch([{"key": None, "value": bytes(RATE * 10)}])
    frame = encode_request(ApiKey.PRODUCE, version, 3, CLIENT, {
        "transactional_id": None, "acks": 1, "timeout_ms": 10000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    with socket.create_connection(server, timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(frame)
        answer = read_frame(sock)
        elapsed_ms = (time.monotonic() - started) * 1000
    _, response = decode_response(ApiKey.PRODUCE, version, answer)
    assert response.responses[0].partition_responses[0].error_code == 0, response
    return elapsed_ms, int(response.throttle_time_ms)


def test_a_throttled_answer_is_sent_at_once_to_old_and_new_clients(broker: tuple[str, int]) -> None:
    # once the quota reached the broker (a metadata record), a produce 10x over it is throttled for seconds
    deadline = time.monotonic() + 30
    elapsed_ms, throttle_ms = produce(broker, 9)
    while throttle_ms < 1000 and time.monotonic() < deadline:
        time.sleep(0.2)
        elapsed_ms, throttle_ms = produce(broker, 9)
    assert throttle_ms >= 1000, "the quota never throttled the client"
    assert elapsed_ms < throttle_ms   # Produce v9's client waits by itself
    # Produce v5 predates KIP-219: its answer is not held for the throttle time either
    elapsed_ms, throttle_ms = produce(broker, 5)
    assert throttle_ms >= 1000
    assert elapsed_ms < throttle_ms, (elapsed_ms, throttle_ms)

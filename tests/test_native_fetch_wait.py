"""The native Fetch path's long-poll wait (klog/broker/native_fetch.py, rust/klog-py/src/fetch_wait.rs): a consumer's
long poll with nothing to answer yet is parked in the native wait table and answered from there, without the event
loop, when a record is produced or at its max_wait_ms; min_bytes holds it until enough is there; the table is
bounded (``klog.fetch.native.wait.max.parked``: beyond it the wait is the Python path's); a client that disconnects
while parked frees its slot. A real broker, raw Fetch frames over sockets (klog.testing.wire), its counters from
``klog.Broker.stats()``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import klog
from klog.protocol import ApiKey, decode_response, encode_request
from klog.records import encode_batch
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

TOPIC = "waits"
PARTITIONS = 4
#: the wait table's size in the bounded broker
MAX_PARKED = 3


def batch(count: int, size: int = 20) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([{"key": b"k%d" % i, "value": b"v" * size, "timestamp": now + i} for i in range(count)])


def produce(wire: WireClient, partition: int, records: bytes) -> None:
    response = wire.request(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}]})
    assert response.responses[0].partition_responses[0].error_code == 0


def fetch_frame(cid: int, partition: int, offset: int, *, max_wait_ms: int, min_bytes: int = 1) -> bytes:
    return encode_request(ApiKey.FETCH, 12, cid, "wait-test", {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def answer_of(frame: bytes) -> Any:
    _, response = decode_response(ApiKey.FETCH, 12, frame)
    [topic] = response.responses
    [p] = topic.partitions
    assert (response.error_code, p.error_code) == (0, 0)
    return p


def end_of(wire: WireClient, partition: int) -> int:
    """The partition's log end, by a Fetch that does not wait (and routes the partition to the native path)."""
    wire.send_raw(fetch_frame(wire.next_correlation_id(), partition, 0, max_wait_ms=0))
    return int(answer_of(wire.read_frame()).high_watermark)


def wait_for(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def make_broker(max_parked: int) -> klog.Broker:
    return klog.Broker(config={"klog.fetch.native.enable": True, "klog.fetch.native.wait.max.parked": max_parked})


@pytest.fixture(scope="module")
def broker() -> Iterator[klog.Broker]:
    with make_broker(MAX_PARKED) as b:
        with WireClient(b.host, b.port) as wire:
            response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                 "configs": []}], "timeout_ms": 5000, "validate_only": False})
            assert [t.error_code for t in response.topics] == [0]
            for partition in range(PARTITIONS):
                produce(wire, partition, batch(2))
                end_of(wire, partition)   # the Python path's first fetch routes the partition
        yield b


def test_a_parked_long_poll_is_answered_when_a_record_is_produced(broker):
    with WireClient(broker.host, broker.port) as consumer, WireClient(broker.host, broker.port) as producer:
        end = end_of(consumer, 0)
        before = broker.stats()
        started = time.monotonic()
        consumer.send_raw(fetch_frame(consumer.next_correlation_id(), 0, end, max_wait_ms=500))
        wait_for(lambda: broker.stats()["native_fetch_parked"] == 1)
        produce(producer, 0, batch(3))
        p = answer_of(consumer.read_frame())
        waited = time.monotonic() - started
        assert p.high_watermark == end + 3 and len(p.records) > 0
        assert waited < 0.5, f"answered after {waited:.3f}s: at the deadline, not at the append"
        after = broker.stats()
        assert after["native_fetch_wait_woken"] == before["native_fetch_wait_woken"] + 1
        assert after["native_fetch_parked"] == 0


def test_a_parked_long_poll_answers_empty_at_its_deadline(broker):
    with WireClient(broker.host, broker.port) as consumer:
        end = end_of(consumer, 1)
        before = broker.stats()
        started = time.monotonic()
        cid = consumer.next_correlation_id()
        consumer.send_raw(fetch_frame(cid, 1, end, max_wait_ms=500))
        wait_for(lambda: broker.stats()["native_fetch_parked"] == 1)
        frame = consumer.read_frame()
        waited = time.monotonic() - started
        assert int.from_bytes(frame[:4], "big") == cid
        p = answer_of(frame)
        assert (p.high_watermark, len(p.records or b"")) == (end, 0)
        assert waited >= 0.5
        after = broker.stats()
        # answered by the wait table at its deadline (or, had the broker forgotten its routes meanwhile, sent back
        # to the Python path, which answers it then)
        ended = [after[k] - before[k] for k in ("native_fetch_wait_expired", "native_fetch_wait_returned")]
        assert sum(ended) == 1 and after["native_fetch_wait_woken"] == before["native_fetch_wait_woken"], ended
        assert after["native_fetch_parked"] == 0
        # the next request of the connection is served after it, in order
        assert end_of(consumer, 1) == end


def test_min_bytes_holds_a_parked_long_poll_until_enough_is_there(broker):
    with WireClient(broker.host, broker.port) as consumer, WireClient(broker.host, broker.port) as producer:
        end = end_of(consumer, 2)
        small = len(batch(1))
        started = time.monotonic()
        consumer.send_raw(fetch_frame(consumer.next_correlation_id(), 2, end, max_wait_ms=5000,
                                      min_bytes=3 * small))
        wait_for(lambda: broker.stats()["native_fetch_parked"] == 1)
        produce(producer, 2, batch(1))   # one batch: below min_bytes, the poll stays parked
        time.sleep(0.3)
        assert broker.stats()["native_fetch_parked"] == 1
        produce(producer, 2, batch(1, size=200))   # now above it
        p = answer_of(consumer.read_frame())
        assert time.monotonic() - started < 5
        assert p.high_watermark == end + 2 and len(p.records) >= 2 * small


def test_the_wait_table_is_bounded_and_a_disconnected_client_frees_its_slot(broker):
    clients = [WireClient(broker.host, broker.port) for _ in range(MAX_PARKED + 2)]
    try:
        end = end_of(clients[0], 3)
        before = broker.stats()
        for client in clients:
            client.send_raw(fetch_frame(client.next_correlation_id(), 3, end, max_wait_ms=60_000))
        wait_for(lambda: broker.stats()["native_fetch_wait_refused"] == before["native_fetch_wait_refused"] + 2)
        assert broker.stats()["native_fetch_parked"] == MAX_PARKED   # the other two wait in Python
        clients[0].close()
        wait_for(lambda: broker.stats()["native_fetch_parked"] == MAX_PARKED - 1)
        # a new long poll takes the freed slot
        with WireClient(broker.host, broker.port) as late:
            late.send_raw(fetch_frame(late.next_correlation_id(), 3, end, max_wait_ms=60_000))
            wait_for(lambda: broker.stats()["native_fetch_parked"] == MAX_PARKED)
            # one record answers every waiter, parked natively or in Python
            with WireClient(broker.host, broker.port) as producer:
                produce(producer, 3, batch(1))
            for client in [*clients[1:], late]:
                assert answer_of(client.read_frame()).high_watermark == end + 1
        assert broker.stats()["native_fetch_parked"] == 0
    finally:
        for client in clients:
            client.close()


def test_a_request_behind_a_parked_long_poll_takes_it_back_and_is_answered_after_it(broker):
    """A client pipelining another request behind its long poll (librdkafka does): the poll is taken back from the
    wait table and answered first, at its deadline, as Kafka answers a connection's requests in order."""
    with WireClient(broker.host, broker.port) as consumer:
        end = end_of(consumer, 1)
        started = time.monotonic()
        first = consumer.next_correlation_id()
        consumer.send_raw(fetch_frame(first, 1, end, max_wait_ms=400))
        wait_for(lambda: broker.stats()["native_fetch_parked"] == 1)
        second = consumer.next_correlation_id()
        consumer.send_raw(fetch_frame(second, 1, 0, max_wait_ms=0))
        frames = [consumer.read_frame(), consumer.read_frame()]
        assert [int.from_bytes(f[:4], "big") for f in frames] == [first, second]
        assert time.monotonic() - started >= 0.4
        assert len(answer_of(frames[0]).records or b"") == 0
        assert len(answer_of(frames[1]).records) > 0
        assert broker.stats()["native_fetch_parked"] == 0

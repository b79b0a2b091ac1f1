"""Large requests are read straight into buffers of their own (no join copy of the pieces the socket delivers):
they must arrive whole whatever way they are cut on the wire, the frame size limit and back-pressure keep
working, and a request held by the broker (pipelined behind a waiting one) is not overwritten by later ones."""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid

import pytest
from test_broker_robustness import assert_serving, fetch_all, log_lines_since, make_topic, produce_body

import klog
from klog.protocol import ApiKey, encode_request
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

MAX_FRAME = 2 << 20
MAX_BUFFERED = 4 << 20
MAX_INFLIGHT = 8


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # A fixed, small receive buffer: reads return at most ~64 KiB, so every large request spans many reads,
    # and the kernel cannot hide the broker's back-pressure behind megabytes of socket buffer.
    config = {"socket.request.max.bytes": MAX_FRAME, "klog.connection.max.buffered.bytes": MAX_BUFFERED,
              "klog.connection.max.inflight.requests": MAX_INFLIGHT, "socket.receive.buffer.bytes": 65536,
              "message.max.bytes": 2 * MAX_FRAME}
    with BrokerProcess(tmp_path_factory.mktemp("large-frames"), config) as proc:
        yield proc


def _values(n: int, size: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [b"%08d" % i + rng.randbytes(size - 8) for i in range(n)]


def _stored_values(broker, topic) -> list[bytes]:
    with WireClient(broker.host, broker.port) as wire:
        batches = fetch_all(wire, topic)  # decodes with CRC verification
    return [r.value for b in batches for r in b.records]


def _produce_frame(topic: str, values: list[bytes], correlation_id: int) -> bytes:
    return encode_request(ApiKey.PRODUCE, 9, correlation_id, "large",
                          produce_body(topic, encode_batch([{"value": v} for v in values])))


def test_klog_send_batch_requests_spanning_many_reads_arrive_intact(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
    values = _values(6000, 1024, seed=1)
    with klog.Producer(f"{broker.host}:{broker.port}", acks=1, enable_idempotence=False, linger_ms=5,
                       batch_size=1_000_000) as producer:
        producer.send_batch(topic, values)
        producer.flush()
    assert _stored_values(broker, topic) == values


def test_confluent_kafka_large_batches_arrive_intact(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
    values = _values(5000, 1000, seed=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": f"{broker.host}:{broker.port}", "linger.ms": 50,
                                         "batch.size": 1_000_000, "compression.type": "none", "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert _stored_values(broker, topic) == values


def _frame_of_size(topic: str, size: int) -> bytes:
    """A Produce request frame whose size prefix says exactly ``size``."""
    value_len = size - 200
    for _ in range(10):
        frame = _produce_frame(topic, [b"z" * value_len], 1)
        got = len(frame) - 4
        if got == size:
            return frame
        value_len += size - got
    raise AssertionError("could not hit the frame size")


def test_a_frame_exactly_at_the_size_limit_is_served(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        frame = _frame_of_size(topic, MAX_FRAME)
        wire.send_raw(frame)
        _, response = wire.receive(ApiKey.PRODUCE, 9)
        assert response.responses[0].partition_responses[0].error_code == 0
    (value,) = _stored_values(broker, topic)
    assert value == b"z" * len(value) and len(value) > MAX_FRAME - 200


def test_a_frame_one_byte_over_the_size_limit_closes_the_connection_before_it_is_buffered(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
    mark = len(broker.lines)
    with WireClient(broker.host, broker.port) as bad:
        bad.send_raw(_frame_of_size(topic, MAX_FRAME + 1)[:4])  # only the size prefix
        assert bad.is_closed_by_peer()
    assert len(log_lines_since(broker, mark, "bad frame")) == 1
    assert _stored_values(broker, topic) == []
    assert_serving(broker)


def test_large_frames_trickled_a_few_bytes_at_a_time_arrive_intact(broker):
    rng = random.Random(5)
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        batches = [_values(1, 150_000, seed=3), _values(3, 10, seed=4), _values(1, 90_000, seed=6)]
        stream = b"".join(_produce_frame(topic, values, i) for i, values in enumerate(batches, 1))
        wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 7) if rng.random() < 0.5 else rng.randint(1, 4000)
            wire.send_raw(stream[pos:pos + step])
            pos += step
        for i in range(1, len(batches) + 1):
            cid, response = wire.receive(ApiKey.PRODUCE, 9)
            assert cid == i and response.responses[0].partition_responses[0].error_code == 0
    assert _stored_values(broker, topic) == [v for values in batches for v in values]


def test_many_pipelined_large_requests_on_one_connection_are_answered_in_order_and_stored_intact(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
        batches = [_values(700, 1000, seed=100 + i) for i in range(30)]  # ~700 KB requests
        wire.send_raw(b"".join(_produce_frame(topic, values, i) for i, values in enumerate(batches, 1)))
        for i in range(1, len(batches) + 1):
            cid, response = wire.receive(ApiKey.PRODUCE, 9)
            assert cid == i
            assert response.responses[0].partition_responses[0].base_offset == (i - 1) * 700
    assert _stored_values(broker, topic) == [v for values in batches for v in values]


def test_reading_pauses_while_large_requests_wait_behind_a_long_poll(broker):
    """Requests pipelined behind a long-polling Fetch are held (not answered, not overwritten by the ones
    read after them); the broker stops reading the socket at max.buffered.bytes, and answers all in order once
    the Fetch returns."""
    with WireClient(broker.host, broker.port) as wire:
        topic = make_topic(wire)
    long_poll = {"replica_id": -1, "max_wait_ms": 2500, "min_bytes": 1 << 30, "max_bytes": 1 << 20,
                 "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic,
                 "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                 "forgotten_topics_data": [], "rack_id": ""}
    batches = [_values(500, 1000, seed=200 + i) for i in range(24)]  # 24 x ~500 KB = 12 MB
    frames = [_produce_frame(topic, values, i) for i, values in enumerate(batches, 2)]
    total = sum(len(f) for f in frames)
    with WireClient(broker.host, broker.port) as wire:
        wire.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        wire.send_raw(encode_request(ApiKey.FETCH, 11, 1, "large", long_poll))
        stream = memoryview(b"".join(frames))
        sent = 0
        wire.sock.setblocking(False)
        deadline = time.monotonic() + 1.0  # well inside the long poll
        while sent < total and time.monotonic() < deadline:
            try:
                sent += wire.sock.send(stream[sent:])
            except BlockingIOError:
                time.sleep(0.01)
        # Taken in: the frames the broker holds (up to max.buffered.bytes, plus the one that crossed it) and
        # what the two socket buffers hold; not the 12 MB sent.
        assert sent < MAX_BUFFERED + 2 * len(frames[0]) + (2 << 20) < total, sent
        wire.sock.setblocking(True)
        wire.send_raw(bytes(stream[sent:]))
        cid, _ = wire.receive(ApiKey.FETCH, 11)
        assert cid == 1
        for i in range(2, len(batches) + 2):
            cid, response = wire.receive(ApiKey.PRODUCE, 9)
            assert cid == i and response.responses[0].partition_responses[0].error_code == 0
    assert _stored_values(broker, topic) == [v for values in batches for v in values]

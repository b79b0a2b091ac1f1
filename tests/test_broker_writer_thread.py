"""Responses sent from the native writer thread (klog.network.writer.thread.enable): order, completeness,
the answers before a protocol error still arriving, and real clients, with the thread on and off."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import uuid
from pathlib import Path

import pytest

from klog.protocol import ApiKey, decode_response, encode_request
from klog.records import decode_batches, encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, read_frame

pytestmark = pytest.mark.timeout(120)

WRITER_THREAD_NAME = "klog-socket-wri"  # "klog-socket-writer", cut to Linux's 15-character thread names
#: 1 KiB values: consumer fetches exceed klog.fetch.sendfile.min.bytes, so segment data goes out with sendfile
PAD = b"p" * 1024
CONNECTIONS = 40
REQUESTS_PER_CONNECTION = 25


@pytest.fixture(scope="module", params=[True, False], ids=["writer-thread", "event-loop-writes"])
def broker(request, tmp_path_factory):
    config = {"klog.network.writer.thread.enable": request.param}
    with BrokerProcess(tmp_path_factory.mktemp("writer"), config) as proc:
        proc.writer_thread = request.param
        yield proc


def _thread_names(pid: int) -> list[str]:
    return [Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() for tid in os.listdir(f"/proc/{pid}/task")]


def _make_topic(wire, partitions=1):
    name = f"w-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    assert response.topics[0].error_code == 0
    return name


def _produce_frame(topic, partition, value, correlation_id):
    return encode_request(ApiKey.PRODUCE, 9, correlation_id, "w", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": encode_batch([{"value": value}])}]}]})


def test_the_writer_thread_runs_only_when_enabled(broker):
    # A new thread takes its name once it is first scheduled: on a loaded machine that can be after the broker
    # says it is listening, so wait a little for it (and, when disabled, for it not to appear).
    deadline = time.monotonic() + 5
    while WRITER_THREAD_NAME not in _thread_names(broker.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (WRITER_THREAD_NAME in _thread_names(broker.pid)) == broker.writer_thread


def test_many_connections_pipelining_get_every_answer_in_order(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire, partitions=CONNECTIONS)
    failures: list[str] = []

    def one_connection(partition: int) -> None:
        try:
            with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
                sock.sendall(b"".join(_produce_frame(topic, partition, b"%d-%d" % (partition, i), i)
                                      for i in range(REQUESTS_PER_CONNECTION)))
                for i in range(REQUESTS_PER_CONNECTION):
                    cid, response = decode_response(ApiKey.PRODUCE, 9, read_frame(sock))
                    part = response.responses[0].partition_responses[0]
                    if (cid, part.error_code, part.base_offset) != (i, 0, i):
                        failures.append(f"partition {partition}: request {i} got {cid}, {part}")
                        return
        except Exception as exc:  # reported below
            failures.append(f"partition {partition}: {exc!r}")

    threads = [threading.Thread(target=one_connection, args=(p,)) for p in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    with WireClient(broker.host, broker.port) as wire:
        for partition in (0, CONNECTIONS - 1):
            response = wire.request(ApiKey.FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            records = [r.value for b in decode_batches(bytes(response.responses[0].partitions[0].records))
                       for r in b.records]
            assert records == [b"%d-%d" % (partition, i) for i in range(REQUESTS_PER_CONNECTION)]


def test_answers_before_a_protocol_error_arrive_before_the_connection_closes(broker):
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire)
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        unknown_api = struct.pack(">ihhi", 8, 9999, 0, 99) + b"\x00\x00"
        sock.sendall(b"".join(_produce_frame(topic, 0, b"x", i) for i in range(5)) + unknown_api)
        for i in range(5):
            cid, response = decode_response(ApiKey.PRODUCE, 9, read_frame(sock))
            assert cid == i and response.responses[0].partition_responses[0].error_code == 0
        assert sock.recv(1) == b""  # then the broker closes


def test_confluent_kafka_round_trip(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire, partitions=4)
    bootstrap = f"{broker.host}:{broker.port}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(3000):
        producer.produce(topic, value=b"v%d-" % i + PAD)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = set()
    try:
        for _ in range(200):
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None
                seen.add(message.value())
            if len(seen) == 3000:
                break
    finally:
        consumer.close()
    assert seen == {b"v%d-" % i + PAD for i in range(3000)}


def test_a_large_fetch_to_a_slow_reader_arrives_whole_and_in_order(broker):
    """Header bytes and segment file regions (sendfile) of one response, then the next response, to a client
    with a tiny receive buffer that reads slowly: every byte arrives, in order."""
    with WireClient(broker.host, broker.port) as wire:
        topic = _make_topic(wire)
        values = [bytes([i % 251]) * 50_000 for i in range(40)]  # 2 MB: far above the sendfile threshold
        for start in range(0, len(values), 10):
            produced = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(
                        [{"value": v} for v in values[start:start + 10]])}]}]})
            assert produced.responses[0].partition_responses[0].error_code == 0
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                  "partition_max_bytes": 50 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect((broker.host, broker.port))
    try:
        sock.sendall(encode_request(ApiKey.FETCH, 11, 1, "slow", fetch)
                     + encode_request(ApiKey.API_VERSIONS, 0, 2, "slow", {}))
        time.sleep(0.3)  # let the broker fill the small buffer and wait for writability
        cid, response = decode_response(ApiKey.FETCH, 11, read_frame(sock))
        assert cid == 1
        got = [r.value for b in decode_batches(bytes(response.responses[0].partitions[0].records))
               for r in b.records]
        assert got == values
        cid, versions = decode_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
        assert cid == 2 and versions.error_code == 0
    finally:
        sock.close()

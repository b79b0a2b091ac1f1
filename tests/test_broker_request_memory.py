"""queued.max.request.bytes and the per-connection bound: bytes held by partly received and queued requests are
bounded before their buffers are allocated; at the bound the broker stops reading the sockets of large requests
(back-pressure) instead of growing, resumes as bytes are released, and small clients keep being served."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from test_broker_robustness import assert_serving, make_topic, produce_body

from klog.broker.network.request_memory import RequestMemory
from klog.protocol import ApiKey, BufferedFrameReader, encode_request
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

MiB = 1 << 20
CLIENTS = 20
REQUEST_BYTES = 40 * MiB
BOUND = 100 * MiB
#: what the broker may use beyond the bound while it is at the bound: read buffers (128 KiB x 21 connections),
#: decoding and answering one 40 MiB request (views, not copies), allocator slack
OVERHEAD = 48 * MiB


# ---- sans-IO -------------------------------------------------------------------------------------------

def test_a_large_request_is_admitted_only_while_it_fits():
    memory = RequestMemory(100)
    assert memory.try_admit_large(60)
    assert not memory.try_admit_large(60)
    assert memory.try_admit_large(40)
    memory.release(60, 60)
    assert memory.has_room() and memory.try_admit_large(60)
    assert memory.held == 100 and memory.peak == 100


def test_a_request_larger_than_the_bound_is_admitted_when_no_large_request_is_held():
    memory = RequestMemory(10)
    memory.add_small(8)
    assert memory.try_admit_large(50)  # progress: nothing large held
    assert not memory.try_admit_large(1)
    memory.release(50, 50)
    assert memory.try_admit_large(1)


def test_small_requests_are_counted_but_never_refused():
    memory = RequestMemory(10)
    assert memory.try_admit_large(10)
    memory.add_small(5)
    assert memory.held == 15 and not memory.has_room()
    memory.release(5)
    memory.release(10, 10)
    assert memory.held == 0 and memory.large_held == 0


def test_unbounded_admits_everything():
    memory = RequestMemory(None)
    assert all(memory.try_admit_large(1 << 30) for _ in range(4))


def test_the_reader_asks_before_it_allocates_a_large_frame_and_keeps_it_until_admitted():
    answers = [False, True]
    asked = []

    def admit(size):
        asked.append(size)
        return answers.pop(0)

    reader = BufferedFrameReader(1 << 20, admit=admit)
    frame = (100_000).to_bytes(4, "big") + bytes(range(256)) * 391
    frame = frame[:4 + 100_000]
    buf = reader.get_buffer()
    buf[:4000] = frame[:4000]
    reader.buffer_updated(4000)
    assert reader.next_frame() is None and asked == [100_000]
    assert reader.pool.pooled_bytes == 0  # nothing allocated for the refused frame
    assert reader.next_frame() is None and asked == [100_000, 100_000]  # admitted now, rest to come
    pos = 4000
    while pos < len(frame):
        buf = reader.get_buffer()
        n = min(len(buf), len(frame) - pos)
        buf[:n] = frame[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
    assert bytes(reader.next_frame()) == frame[4:]


# ---- a real broker -------------------------------------------------------------------------------------

def _slow_large_producer(host, port, frame, results, index, stop):
    """Send one large Produce request 1 MiB at a time with pauses, then read its answer."""
    try:
        with socket.create_connection((host, port), timeout=120) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
            view = memoryview(frame)
            for pos in range(0, len(frame), MiB):
                if stop.is_set():
                    return
                sock.sendall(view[pos:pos + MiB])
                time.sleep(0.005)
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            results[index] = len(sock.recv(size, socket.MSG_WAITALL)) == size
    except OSError as exc:
        results[index] = exc


def _run_slow_large_producers(broker, frame):
    """20 connections each trickle a 40 MiB request; meanwhile a small client keeps asking ApiVersions.
    Returns (peak RSS during the run, small-client answers, their worst latency, per-producer results)."""
    results: list = [None] * CLIENTS
    stop = threading.Event()
    threads = [threading.Thread(target=_slow_large_producer, args=(broker.host, broker.port, frame, results, i, stop))
               for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    answered, worst = 0, 0.0
    try:
        with WireClient(broker.host, broker.port, timeout=10) as small:
            while any(t.is_alive() for t in threads):
                started = time.monotonic()
                assert small.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "small",
                                                              "client_software_version": "1"}).error_code == 0
                worst = max(worst, time.monotonic() - started)
                answered += 1
                time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(150)
    return broker.peak_rss_bytes(), answered, worst, results


@pytest.fixture(scope="module")
def frame():
    body = produce_body("memory-topic", encode_batch([{"value": b"m" * REQUEST_BYTES}]))
    return encode_request(ApiKey.PRODUCE, 9, 1, "large", body)


def test_twenty_slow_40_mib_requests_stay_within_queued_max_request_bytes(tmp_path, frame):
    config = {"queued.max.request.bytes": BOUND, "socket.request.max.bytes": 64 * MiB}
    with BrokerProcess(tmp_path, config) as broker:
        with WireClient(broker.host, broker.port) as wire:
            make_topic(wire)  # warm: the handlers a produce request uses are loaded
        baseline = broker.rss_bytes()
        peak, answered, worst, results = _run_slow_large_producers(broker, frame)
        assert results == [True] * CLIENTS  # every large request was answered (with an error code: too large)
        assert answered >= 5
        print(f"baseline RSS {baseline / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB with {CLIENTS} x "
              f"{REQUEST_BYTES // MiB} MiB requests (bound {BOUND // MiB} MiB); small client: {answered} answers, "
              f"worst {worst * 1000:.0f} ms")
        assert peak - baseline <= BOUND + OVERHEAD, (peak / MiB, baseline / MiB)
        assert_serving(broker)


def test_the_per_connection_bound_holds_back_pipelined_large_requests(tmp_path):
    """A connection holding requests does not start receiving another that would exceed
    klog.connection.max.buffered.bytes: the broker stops reading it, and answers everything in order."""
    config = {"klog.connection.max.buffered.bytes": 4 * MiB, "message.max.bytes": 4 * MiB,
              "socket.receive.buffer.bytes": 65536}
    with BrokerProcess(tmp_path, config) as broker:
        with WireClient(broker.host, broker.port) as wire:
            topic = make_topic(wire)
        # a long poll first: the large requests behind it are held, not processed
        long_poll = {"replica_id": -1, "max_wait_ms": 2000, "min_bytes": 1 << 30, "max_bytes": 1 << 20,
                     "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic,
                     "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                     "forgotten_topics_data": [], "rack_id": ""}
        frames = [encode_request(ApiKey.PRODUCE, 9, i, "pipe", produce_body(
            topic, encode_batch([{"value": bytes([i]) * (3 * MiB)}]))) for i in range(2, 8)]
        with WireClient(broker.host, broker.port) as wire:
            wire.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            wire.send_raw(encode_request(ApiKey.FETCH, 11, 1, "pipe", long_poll))
            stream = memoryview(b"".join(frames))
            wire.sock.setblocking(False)
            sent, deadline = 0, time.monotonic() + 1.0
            while sent < len(stream) and time.monotonic() < deadline:
                try:
                    sent += wire.sock.send(stream[sent:])
                except BlockingIOError:
                    time.sleep(0.01)
            # one 3 MiB request admitted (4 MiB bound), the next waits at its size prefix: about 3 MiB plus what
            # the socket buffers hold is taken in, not 18 MiB
            assert sent < 3 * MiB + (3 << 20) < len(stream), sent
            wire.sock.setblocking(True)
            wire.send_raw(bytes(stream[sent:]))
            assert wire.receive(ApiKey.FETCH, 11)[0] == 1
            for i in range(2, 8):
                cid, response = wire.receive(ApiKey.PRODUCE, 9)
                assert cid == i and response.responses[0].partition_responses[0].error_code == 0

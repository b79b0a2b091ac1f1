"""The native front (``klog.network.native.front.enable``, klog/broker/network/front.py) answers exactly as the
Python path does, in request order, and a Produce it answered is visible at once.

Two real brokers, one with the native front on and one with every native path off, get the same request frames
byte for byte; their answers must be the same bytes. The front's counter (``native_front_requests`` in
``klog.Broker.stats()``) shows which requests it served without the event loop. The tests of the native Produce
path (tests/test_native_produce_path.py: every version, every error case, malformed frames, config changes,
deleted topics, the metrics) run here again with the front on, then tests of the front's own concerns: pipelined
requests mixing frames it serves and frames it hands back, visibility, a connection closed mid-frame, the idle
timeout, a client quota appearing at run time, and real clients.
"""

from __future__ import annotations

import contextlib
import select
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import klog
from klog.protocol import ApiKey, decode_response, encode_request
from klog.protocol.error_codes import ErrorCode
from klog.testing.ports import free_port
from klog.testing.wire import WireClient, fetch_raw
import test_native_produce_path as produce_path
from native_path_support import produce_with_two_clients, read_with_two_clients
from test_native_produce_path import NATIVE_VERSIONS, TOPICS, Pair, batch, error_codes, produce_frame

pytestmark = pytest.mark.timeout(180)

# the native Produce path's tests, run with the front on, in their module's order (later ones change routes)
test_every_served_version_answers_a_one_record_produce_with_the_python_paths_bytes = \
    produce_path.test_every_served_version_answers_a_one_record_produce_with_the_python_paths_bytes
test_produce_v0_to_v2_are_refused_by_the_python_path_on_both = \
    produce_path.test_produce_v0_to_v2_are_refused_by_the_python_path_on_both
test_many_topics_and_partitions_and_a_recompressed_topic_in_one_request = \
    produce_path.test_many_topics_and_partitions_and_a_recompressed_topic_in_one_request
test_acks_0_is_appended_without_an_answer_and_the_next_answer_follows_it = \
    produce_path.test_acks_0_is_appended_without_an_answer_and_the_next_answer_follows_it
test_an_idempotent_producers_batches_in_sequence_are_served_natively_and_the_rest_by_python = \
    produce_path.test_an_idempotent_producers_batches_in_sequence_are_served_natively_and_the_rest_by_python
test_while_the_python_path_holds_a_producer_table_the_partitions_producers_are_its_to_serve = \
    produce_path.test_while_the_python_path_holds_a_producer_table_the_partitions_producers_are_its_to_serve
test_each_error_case_gets_the_python_paths_bytes_on_every_version = \
    produce_path.test_each_error_case_gets_the_python_paths_bytes_on_every_version
test_a_malformed_produce_frame_gets_the_python_paths_treatment = \
    produce_path.test_a_malformed_produce_frame_gets_the_python_paths_treatment
test_the_native_path_counts_bytes_and_records_in_as_the_python_path_does = \
    produce_path.test_the_native_path_counts_bytes_and_records_in_as_the_python_path_does

FRONT = {"klog.network.native.front.enable": True}
METRICS = {"klog.metrics.listener": "127.0.0.1:0"}


def create_topics(broker: klog.Broker, topics: dict[str, dict[str, str]], partitions: int = 3) -> None:
    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in configs.items()]}
            for name, configs in topics.items()], "timeout_ms": 5000, "validate_only": False})
        assert [t.error_code for t in response.topics] == [0] * len(topics)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with klog.Broker(config={**FRONT, **METRICS}) as front, \
            klog.Broker(config={"klog.produce.native.enable": False, "klog.fetch.native.enable": False,
                                **METRICS}) as python:
        for broker in (front, python):
            create_topics(broker, TOPICS)
        both = Pair(front, python)
        # the Python path's first append to a partition routes it: warm every partition up on both brokers
        for name in TOPICS:
            for index in range(3):
                both.same(lambda cid, n=name, i=index: produce_frame(9, cid, [(n, [(i, batch())])]))
        yield both
        both.close()


def front_served(broker: klog.Broker) -> int:
    return broker.stats()["native_front_requests"]


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_every_version_and_acks_is_served_by_the_front_with_the_python_paths_bytes(pair, acks):
    front = pair.brokers[0]
    for version in NATIVE_VERSIONS:
        before = front_served(front)
        frame_of = lambda cid: produce_frame(version, cid, [("plain", [(1, batch(2))])], acks=acks)  # noqa: E731
        if acks == 0:
            pair.answers(frame_of, expect_answer=False)
            # an acks=0 produce has no answer: the next answer shows it was appended first
            answer = pair.same(lambda cid: produce_frame(version, cid, [("plain", [(1, batch())])]))
            assert front_served(front) == before + 2
        else:
            answer = pair.same(frame_of)
            assert front_served(front) == before + 1, version
        assert error_codes(answer, version) == [0]
    assert pair.brokers[1].stats()["native_produce_requests"] == 0


def _frames(wire: WireClient, count: int) -> list[bytes]:
    return [wire.read_frame() for _ in range(count)]


def test_pipelined_requests_mixing_front_and_python_served_frames_keep_their_order(pair):
    """One write carrying Produce requests the front serves (an idempotent producer's batch among them), requests it
    hands back (ApiVersions, a bad CRC, Metadata) and an acks=0 produce: every answer in request order, the same bytes
    as the Python path's (Metadata's names each broker's own address: its correlation id only)."""
    front = pair.brokers[0]
    idempotent = batch(producer_id=9100, producer_epoch=0, base_sequence=0)
    bad = bytearray(batch())
    bad[-1] ^= 0xFF
    requests: list[tuple[str, Any]] = [
        ("produce", lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])])),
        ("produce", lambda cid: produce_frame(3, cid, [("plain", [(1, batch(3))])])),
        ("apiversions", lambda cid: encode_request(ApiKey.API_VERSIONS, 3, cid, "native-test",
                                                   {"client_software_name": "t", "client_software_version": "1"})),
        ("produce", lambda cid: produce_frame(11, cid, [("plain", [(2, batch())])])),
        ("produce", lambda cid: produce_frame(9, cid, [("plain", [(0, idempotent)])])),
        ("produce", lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])])),
        ("acks0", lambda cid: produce_frame(9, cid, [("plain", [(1, batch())])], acks=0)),
        ("produce", lambda cid: produce_frame(9, cid, [("plain", [(0, bytes(bad))])])),
        ("metadata", lambda cid: encode_request(ApiKey.METADATA, 12, cid, "native-test",
                                                {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})),
        ("produce", lambda cid: produce_frame(12, cid, [("plain", [(1, batch())]), ("gzipped", [(0, batch())])])),
        ("produce", lambda cid: produce_frame(9, cid, [("plain", [(2, batch())])], acks=-1)),
    ]
    for round_ in range(3):
        before = front_served(front)
        streams = []
        cids = [50_000 + 100 * round_ + i for i in range(len(requests))]
        for wire in pair.wires:
            wire.send_raw(b"".join(make(cid) for (_, make), cid in zip(requests, cids)))
        for wire in pair.wires:
            streams.append(_frames(wire, sum(kind != "acks0" for kind, _ in requests)))
        answered = [cid for (kind, _), cid in zip(requests, cids) if kind != "acks0"]
        for stream in streams:
            assert [struct.unpack(">i", f[:4])[0] for f in stream] == answered
        kinds = [kind for kind, _ in requests if kind != "acks0"]
        for kind, native, python in zip(kinds, *streams):
            if kind != "metadata":
                assert native == python, kind
        # the front served some of them (the first produce at least, the connection being idle before it)
        assert front_served(front) > before


def test_a_frame_over_the_fronts_frame_bound_is_given_back_whole_and_the_next_small_one_is_the_fronts_again(pair):
    """A Produce of 2.25 MiB (over klog.network.native.front.frame.max.bytes, 2 MiB) sent in one write with small
    ones after it: the event loop serves it from the bytes the front held and the rest of the socket, the same bytes
    as the Python path, in order; the connection then goes back to the front."""
    front = pair.brokers[0]
    big = [(i, batch(size=750 * 1024)) for i in range(3)]
    for round_ in range(2):
        handoffs, large = front.stats()["native_front_handoffs"], front.stats()["native_front_large_frames"]
        cids = [60_000 + 10 * round_ + i for i in range(3)]
        frames = [produce_frame(9, cids[0], [("plain", big)]),
                  produce_frame(9, cids[1], [("plain", [(1, batch())])]),
                  produce_frame(9, cids[2], [("plain", [(2, batch())])])]
        for wire in pair.wires:
            wire.send_raw(b"".join(frames))
        streams = [_frames(wire, 3) for wire in pair.wires]
        for stream in streams:
            assert [struct.unpack(">i", f[:4])[0] for f in stream] == cids
        assert streams[0] == streams[1]
        assert error_codes(streams[0][0], 9) == [0, 0, 0]
        assert all(error_codes(f, 9) == [0] for f in streams[0][1:])
        assert front.stats()["native_front_handoffs"] > handoffs
        assert front.stats()["native_front_large_frames"] == large
    # the pair's connection is the front's again once idle
    assert _until(lambda: front.stats()["native_front_connections"] == 1)
    before = front_served(front)
    assert error_codes(pair.same(lambda cid: produce_frame(9, cid, [("plain", [(1, batch())])])), 9) == [0]
    assert front_served(front) == before + 1


def _held_by_front(broker: klog.Broker) -> bool:
    return _until(lambda: broker.stats()["native_front_connections"] >= 1)


def test_a_large_multi_partition_produce_is_served_by_the_front_with_the_python_paths_bytes(pair):
    """A throughput producer's request (several partitions of two topics, one recompressed, 450 KiB to 1 MiB: over
    the front's 64 KiB read buffer) on every version and acks: the front reads it whole and serves it (its
    counters move, nothing is handed back), with the Python path's bytes; the buffer it grew is freed after."""
    front = pair.brokers[0]
    # the pair's connection: idle, so the front's
    pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])]))
    assert _held_by_front(front)
    for version in NATIVE_VERSIONS:
        for acks in (1, -1, 0):
            stats = front.stats()
            served, large, handoffs = (stats["native_front_requests"], stats["native_front_large_frames"],
                                       stats["native_front_handoffs"])
            parts = [(i, batch(40, size=4000 + 1000 * (version - 3))) for i in range(3)]   # under the 2 MiB bound
            frame_of = lambda cid, p=parts, v=version, a=acks: produce_frame(  # noqa: E731
                v, cid, [("plain", p), ("gzipped", [(1, batch(30, size=3000))])], acks=a)
            assert len(frame_of(1)) > 400 * 1024
            if acks == 0:
                pair.answers(frame_of, expect_answer=False)
                answer = pair.same(lambda cid, v=version: produce_frame(v, cid, [("plain", [(1, batch())])]))
                assert error_codes(answer, version) == [0]
                assert front_served(front) == served + 2, version
            else:
                answer = pair.same(frame_of)
                assert error_codes(answer, version) == [0, 0, 0, 0]
                assert front_served(front) == served + 1, (version, acks)
            stats = front.stats()
            assert stats["native_front_large_frames"] == large + 1, (version, acks)
            assert stats["native_front_handoffs"] == handoffs, (version, acks)
            assert stats["native_front_held_bytes"] == 0
    assert front.stats()["native_front_held_bytes_peak"] >= 400 * 1024
    assert pair.brokers[1].stats()["native_produce_requests"] == 0


def test_an_idempotent_producers_large_frame_is_read_whole_and_served_by_the_front_and_its_retry_by_python(pair):
    """The front checks an idempotent producer's sequence in the partition's producer table: a large frame of one is
    read whole and served by the front (no hand-back); its retry, a duplicate, is handed back and the event loop
    answers it as the Python path does, with the first answer's offset."""
    front = pair.brokers[0]
    pair.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])]))
    assert _held_by_front(front)
    stats, served = front.stats(), front_served(front)
    idempotent = batch(100, size=2000, producer_id=9200, producer_epoch=0, base_sequence=0)
    answer = pair.same(lambda cid: produce_frame(9, cid, [("plain", [(2, idempotent)])]))
    assert error_codes(answer, 9) == [0]
    after = front.stats()
    assert after["native_front_handoffs"] == stats["native_front_handoffs"]
    assert after["native_front_large_frames"] == stats["native_front_large_frames"] + 1
    assert front_served(front) == served + 1
    retry = pair.same(lambda cid: produce_frame(9, cid, [("plain", [(2, idempotent)])]))
    assert error_codes(retry, 9) == [0]
    assert base_offsets(retry) == base_offsets(answer)
    assert front.stats()["native_front_handoffs"] == after["native_front_handoffs"] + 1
    assert front_served(front) == served + 1


def base_offsets(answer: bytes, version: int = 9) -> list[int]:
    _, response = decode_response(ApiKey.PRODUCE, version, answer)
    return [p.base_offset for t in response.responses for p in t.partition_responses]


def test_an_idempotent_producers_batches_in_sequence_are_all_served_by_the_front(pair):
    """A hundred batches of one idempotent producer in sequence, one Produce each: the front serves every one (none
    handed back), with the Python path's bytes."""
    front = pair.brokers[0]
    own = Pair(*pair.brokers)
    try:
        own.same(lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])]))
        assert _held_by_front(front)
        handoffs, served = front.stats()["native_front_handoffs"], front_served(front)
        for seq in range(0, 200, 2):
            records = batch(2, producer_id=9250, producer_epoch=0, base_sequence=seq)
            answer = own.same(lambda cid, r=records: produce_frame(9, cid, [("plain", [(1, r)])]))
            assert error_codes(answer, 9) == [0]
        assert front.stats()["native_front_handoffs"] == handoffs
        assert front_served(front) == served + 100
    finally:
        own.close()


def test_a_connection_given_back_at_each_produce_stays_on_the_event_loop_instead_of_going_back_and_forth(pair):
    """A Produce the front never serves (a transactional batch's: here without a transactional id, which the Python
    path refuses) gives its connection back. At such a Produce the connection stays on the event loop for 2 ms,
    twice as long at each one in a row (up to about 1 s), instead of being handed to the front again after every
    answer; the answers are the Python path's bytes, and a plain Produce once that time is over is the front's
    again."""
    front = pair.brokers[0]
    own = Pair(*pair.brokers)
    plain = lambda cid: produce_frame(9, cid, [("plain", [(0, batch())])])  # noqa: E731

    def front_serves_within(tries: int) -> bool:
        """A plain Produce is the front's within ``tries`` of them (the connection is handed to it when idle)."""
        for _ in range(tries):
            served = front_served(front)
            own.same(plain)
            if front_served(front) == served + 1:
                return True
            time.sleep(0.05)
        return False

    try:
        assert front_serves_within(20)
        before = front.stats()["native_front_handoffs"]
        for seq in range(0, 200, 2):
            records = batch(2, producer_id=9300, producer_epoch=0, base_sequence=seq, is_transactional=True)
            answer = own.same(lambda cid, r=records: produce_frame(9, cid, [("plain", [(1, r)])]))
            assert error_codes(answer, 9) == [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        handoffs = front.stats()["native_front_handoffs"] - before
        assert 1 <= handoffs <= 15, handoffs   # 100 without the pause
        time.sleep(1.2)
        assert front_serves_within(3)
    finally:
        own.close()


def _frame_of_size(size: int, topic: str, cid: int, partition: int = 0) -> bytes:
    """A Produce frame whose size prefix says ``size`` (the bytes after the prefix)."""
    value = size - 200
    for _ in range(5):
        frame = produce_frame(9, cid, [(topic, [(partition, batch(size=value))])])
        if len(frame) - 4 == size:
            return frame
        value += size - (len(frame) - 4)
    raise AssertionError(f"no frame of {size} bytes")


BOUND = 200_000


class BoundedPair(Pair):
    #: a topic of three partitions on both brokers
    topic = ""


@pytest.fixture(scope="module")
def bounded(pair: Pair) -> Iterator[BoundedPair]:
    """A broker whose front reads frames of at most 200,000 bytes whole and holds at most 300,000 bytes of them,
    paired with the pair's Python-only broker."""
    config = {**FRONT, "klog.network.native.front.frame.max.bytes": BOUND,
              "klog.network.native.front.buffer.max.bytes": 300_000}
    with klog.Broker(config=config) as broker:
        topic = f"bounded-{uuid.uuid4().hex[:6]}"
        create_topics(broker, {topic: {}})
        create_topics(pair.brokers[1], {topic: {}})
        both = BoundedPair(broker, pair.brokers[1])
        both.topic = topic
        for index in range(3):   # route every partition (the Python path's first append does)
            both.same(lambda cid, i=index: produce_frame(9, cid, [(topic, [(i, batch())])]))
        yield both
        both.close()


def test_a_frame_at_the_fronts_frame_bound_is_served_by_it_and_one_byte_over_is_handed_back(bounded):
    broker = bounded.brokers[0]
    topic = bounded.topic
    for size, served_by_front in ((BOUND, True), (BOUND + 1, False), (BOUND - 1, True)):
        bounded.same(lambda cid: produce_frame(9, cid, [(topic, [(0, batch())])]))
        assert _held_by_front(broker)
        stats = broker.stats()
        answer = bounded.same(lambda cid, n=size: _frame_of_size(n, topic, cid))
        assert error_codes(answer, 9) == [0]
        after = broker.stats()
        assert after["native_front_large_frames"] - stats["native_front_large_frames"] == int(served_by_front), size
        assert after["native_front_handoffs"] - stats["native_front_handoffs"] == int(not served_by_front), size
        assert after["native_front_held_bytes"] == 0


def test_with_the_front_wide_bound_reached_large_frames_are_handed_back_and_nothing_is_lost_or_reordered(bounded):
    """One connection holds half of a 190 KB frame in the front (190 KB of the 300 KB bound held); another sends
    large and small frames pipelined: its large frames do not fit, the front gives the connection back and the event
    loop answers everything in order with the Python path's bytes; then the first frame completes and is the front's.
    Every record is in the log, in the order answered."""
    broker, python = bounded.brokers
    topic = bounded.topic
    with WireClient(broker.host, broker.port) as holder, WireClient(python.host, python.port) as holder_py, \
            WireClient(broker.host, broker.port) as sender, WireClient(python.host, python.port) as sender_py:
        for wire in (holder, holder_py, sender, sender_py):
            for cid in (1, 2):   # the first routes nothing new: the second is read by the front
                wire.send_raw(produce_frame(9, cid, [(topic, [(1, batch())])]))
                assert error_codes(wire.read_frame(), 9) == [0]
        assert _until(lambda: broker.stats()["native_front_connections"] >= 3)   # with the pair's own
        held = _frame_of_size(190_000, topic, 10, partition=1)
        holder.send_raw(held[:95_000])
        assert _until(lambda: broker.stats()["native_front_held_bytes"] == 190_004), broker.stats()
        stats = broker.stats()
        frames = [_frame_of_size(150_000, topic, 20, partition=1), produce_frame(9, 21, [(topic, [(1, batch())])]),
                  _frame_of_size(190_000, topic, 22, partition=1), produce_frame(9, 23, [(topic, [(2, batch())])])]
        sender.send_raw(b"".join(frames))
        sender_py.send_raw(b"".join(frames))
        answers = [sender.read_frame() for _ in frames]
        assert answers == [sender_py.read_frame() for _ in frames]
        assert [struct.unpack(">i", a[:4])[0] for a in answers] == [20, 21, 22, 23]
        assert all(error_codes(a, 9) == [0] for a in answers)
        assert broker.stats()["native_front_handoffs"] > stats["native_front_handoffs"]
        assert broker.stats()["native_front_held_bytes"] == 190_004
        holder.send_raw(held[95_000:])
        holder_py.send_raw(held)
        assert holder.read_frame() == holder_py.read_frame()
        after = broker.stats()
        assert after["native_front_large_frames"] == stats["native_front_large_frames"] + 1
        assert after["native_front_held_bytes"] == 0 and after["native_front_held_bytes_peak"] <= 300_000
    for index in range(3):   # the same records, in the same order, in both logs
        logs = [[(b.base_offset, [r.value for r in b.records]) for b in fetch_raw(x.host, x.port, topic, index)]
                for x in (broker, python)]
        assert logs[0] == logs[1]
    assert sum(len(records) for _, records in logs[0]) > 0


def test_a_connection_closed_mid_large_frame_is_closed_and_its_buffer_freed(bounded):
    broker = bounded.brokers[0]
    topic = bounded.topic
    before = broker.stats()["connections"]
    for cut in (300, 150_000):   # just past the first batch's header (the front judges it then), and half
        wire = WireClient(broker.host, broker.port)
        for cid in (1, 2):
            wire.send_raw(produce_frame(9, cid, [(topic, [(0, batch())])]))
            assert error_codes(wire.read_frame(), 9) == [0]
        assert _until(lambda: broker.stats()["native_front_connections"] >= 2)
        wire.send_raw(_frame_of_size(180_000, topic, 3)[:cut])
        assert _until(lambda: broker.stats()["native_front_held_bytes"] == 180_004)
        wire.close()
        assert _until(lambda: broker.stats()["connections"] == before), broker.stats()
        # the front frees a closed connection's buffer on its thread, just after the connection count drops
        assert _until(lambda: broker.stats()["native_front_held_bytes"] == 0), broker.stats()
    with WireClient(broker.host, broker.port) as wire:   # the broker still serves, large frames on the front too
        wire.send_raw(produce_frame(9, 1, [(topic, [(0, batch())])]))
        assert error_codes(wire.read_frame(), 9) == [0]
        assert _until(lambda: broker.stats()["native_front_connections"] >= 2)
        large = broker.stats()["native_front_large_frames"]
        wire.send_raw(_frame_of_size(180_000, topic, 2))
        assert error_codes(wire.read_frame(), 9) == [0]
        assert broker.stats()["native_front_large_frames"] == large + 1


def test_a_produce_answered_by_the_front_is_visible_to_list_offsets_and_fetch_at_once(pair):
    front = pair.brokers[0]
    before = front_served(front)
    with WireClient(front.host, front.port) as producer, WireClient(front.host, front.port) as reader:
        for i in range(200):
            producer.send_raw(produce_frame(9, 70_000 + i, [("plain", [(2, batch())])]))
            _, response = decode_response(ApiKey.PRODUCE, 9, producer.read_frame())
            base = response.responses[0].partition_responses[0].base_offset
            latest = reader.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "plain", "partitions": [{"partition_index": 2, "current_leader_epoch": -1,
                                                  "timestamp": -1}]}]}).topics[0].partitions[0]
            assert latest.offset == base + 1, (i, latest.offset, base)
            if i % 20 == 0:
                fetched = reader.request(ApiKey.FETCH, 12, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "topics": [{"topic": "plain", "partitions": [
                        {"partition": 2, "current_leader_epoch": -1, "fetch_offset": base, "last_fetched_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                    "forgotten_topics_data": [], "rack_id": ""})
                part = fetched.responses[0].partitions[0]
                assert part.error_code == 0 and part.high_watermark == base + 1
                assert part.records, "the answered record is not fetchable"
    # all but the first (a new connection's first request is read before the connection is idle)
    assert front_served(front) >= before + 199


def test_a_long_poll_waiting_in_python_is_woken_by_a_produce_the_front_answered(pair):
    """The front moves a one-replica partition's high watermark itself and answers at once; a long poll waiting in
    Python for that partition (a fetch that opens a session is the Python path's) is woken by it, not at its
    max_wait_ms, for every such produce in a row."""
    front = pair.brokers[0]
    fetch_version = 12
    with WireClient(front.host, front.port) as producer, WireClient(front.host, front.port) as reader:
        producer.send_raw(produce_frame(9, 80_000, [("plain", [(0, batch())])]))   # the producer's connection idle
        producer.read_frame()
        for i in range(5):
            end = reader.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "plain", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                  "timestamp": -1}]}]}).topics[0].partitions[0].offset
            reader.send_raw(encode_request(ApiKey.FETCH, fetch_version, 81_000 + i, "native-test", {
                "replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": 0, "topics": [{"topic": "plain", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": end, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}))
            # the long poll waits (in Python: a fetch opening a session is the Python path's) before the produce
            readable, _, _ = select.select([reader.sock], [], [], 0.3)
            assert not readable, "the long poll was answered before anything was produced"
            before = front_served(front)
            started = time.monotonic()
            producer.send_raw(produce_frame(9, 80_001 + i, [("plain", [(0, batch())])]))
            _, produced = decode_response(ApiKey.PRODUCE, 9, producer.read_frame())
            assert produced.responses[0].partition_responses[0].base_offset == end
            assert front_served(front) == before + 1   # the front answered it (and it is counted at once)
            _, fetched = decode_response(ApiKey.FETCH, fetch_version, reader.read_frame())
            waited = time.monotonic() - started
            part = fetched.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == end + 1 and part.records, i
            assert waited < 15, f"the long poll was answered at its max_wait_ms ({waited:.1f} s), not woken"


def _until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_a_large_frame_the_front_gives_back_while_request_memory_is_full_waits_for_room_and_is_answered_in_order():
    """Bytes the front gives back (Connection.from_front) holding a large request that must wait for request memory.
    One connection's 300 KB Produce of a transactional batch, half sent, holds 300,000 of the broker's 400,000
    request bytes (the front gives such a frame back from its first bytes: the event loop admits it, and refuses the
    batch, which has no transactional id). Another connection, the front's,
    sends a 200 KB Produce to a partition not routed yet and a small one after it: the front reads the large one
    whole (into a buffer it grows), gives it back, and the event loop cannot admit it. It waits (it was closed over an
    internal error: the reader's buffer full of a frame waiting for admission); once the first request completes, both
    are answered, in order, and their records are in the log."""
    with klog.Broker(config={**FRONT, "queued.max.request.bytes": 400_000}) as broker:
        routed, fresh = f"routed-{uuid.uuid4().hex[:6]}", f"fresh-{uuid.uuid4().hex[:6]}"
        create_topics(broker, {routed: {}, fresh: {}})
        with WireClient(broker.host, broker.port) as sender, WireClient(broker.host, broker.port) as holder:
            for cid in (1, 2):   # the first routes the partition; after the second the connection is the front's
                sender.send_raw(produce_frame(9, cid, [(routed, [(0, batch())])]))
                assert error_codes(sender.read_frame(), 9) == [0]
            assert _until(lambda: broker.stats()["native_front_connections"] >= 1)
            held = produce_frame(9, 10, [(routed, [(1, batch(size=300_000, producer_id=9300, producer_epoch=0,
                                                            base_sequence=0, is_transactional=True))])])
            holder.send_raw(held[:150_000])
            assert _until(lambda: broker.stats()["request_bytes_held"] >= 300_000), broker.stats()
            handoffs = broker.stats()["native_front_handoffs"]
            large = _frame_of_size(200_000, fresh, 11)
            sender.send_raw(large + produce_frame(9, 12, [(fresh, [(0, batch())])]))
            # read whole by the front (its buffer grown for it), then given back: the partition is not routed
            assert _until(lambda: broker.stats()["native_front_held_bytes_peak"] >= 200_004
                          and broker.stats()["native_front_handoffs"] > handoffs), broker.stats()
            holder.send_raw(held[150_000:])
            assert error_codes(holder.read_frame(), 9) == [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
            answers = [sender.read_frame(), sender.read_frame()]
            assert [struct.unpack(">i", a[:4])[0] for a in answers] == [11, 12]
            assert [error_codes(a, 9) for a in answers] == [[0], [0]]
        batches = fetch_raw(broker.host, broker.port, fresh, 0)
        assert [len(b.records) for b in batches] == [1, 1]
        assert len(batches[0].records[0].value) > 190_000


def test_a_connection_closed_mid_frame_is_closed_and_the_front_lets_it_go(pair):
    front = pair.brokers[0]
    server = front._require()
    before = front_served(front)
    # the pair's own connection only (the earlier tests' connections may still be closing)
    assert _until(lambda: front.stats()["connections"] == 1), front.stats()
    baseline = 1
    for cut in (2, 7, 40):
        wire = WireClient(front.host, front.port)
        for cid in (1, 2):   # a new connection's first request is read by the event loop, the next by the front
            wire.send_raw(produce_frame(9, cid, [("plain", [(0, batch())])]))
            assert error_codes(wire.read_frame(), 9) == [0]
        assert _until(lambda: front.stats()["native_front_connections"] >= 1)
        wire.send_raw(produce_frame(9, 3, [("plain", [(0, batch())])])[:cut])
        wire.close()
        assert _until(lambda: front.stats()["connections"] == baseline), front.stats()
    assert front_served(front) >= before + 3
    assert server.front is not None and all(not c.closed for c in server.front.connections.values())
    # nothing goes back and forth between the front and the event loop over the closed connections: the broker
    # (in this process, the test thread asleep) is idle
    cpu = time.process_time()
    time.sleep(1.0)
    assert time.process_time() - cpu < 0.3
    with WireClient(front.host, front.port) as wire:   # the broker still serves
        wire.send_raw(produce_frame(9, 3, [("plain", [(0, batch())])]))
        assert error_codes(wire.read_frame(), 9) == [0]


def test_an_idle_connection_held_by_the_front_is_closed_after_connections_max_idle_ms_and_a_busy_one_is_not():
    with klog.Broker(config={**FRONT, "connections.max.idle.ms": 2500}) as broker:
        create_topics(broker, {"t": {}}, partitions=1)
        with WireClient(broker.host, broker.port) as busy, WireClient(broker.host, broker.port) as idle:
            for wire in (busy, idle):
                for cid in (1, 2):   # the first routes the partition, the second is the front's
                    wire.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                    assert error_codes(wire.read_frame(), 9) == [0]
            assert front_served(broker) >= 2
            started = time.monotonic()
            cid = 10
            while time.monotonic() - started < 6:   # the busy one produces every 0.25 s, on the front
                cid += 1
                busy.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                assert error_codes(busy.read_frame(), 9) == [0]
                time.sleep(0.25)
            assert idle.is_closed_by_peer(timeout=5.0)
            busy.send_raw(produce_frame(9, cid + 1, [("t", [(0, batch())])]))
            assert error_codes(busy.read_frame(), 9) == [0]
            assert front_served(broker) > 20


def test_a_client_quota_set_at_run_time_stops_the_front_and_throttles_as_the_python_path():
    with klog.Broker(config=FRONT) as broker:
        create_topics(broker, {"t": {}}, partitions=1)
        with WireClient(broker.host, broker.port) as wire:
            for cid in (1, 2):
                wire.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                assert error_codes(wire.read_frame(), 9) == [0]
            served = front_served(broker)
            assert served >= 1
            with WireClient(broker.host, broker.port) as admin:
                response = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
                    {"entity": [{"entity_type": "client-id", "entity_name": "native-test"}],
                     "ops": [{"key": "producer_byte_rate", "value": 100.0, "remove": False}]}],
                    "validate_only": False})
                assert response.entries[0].error_code == 0
            throttled = 0
            for cid in range(3, 13):
                wire.send_raw(produce_frame(9, cid, [("t", [(0, batch(size=200))])]))
                _, answer = decode_response(ApiKey.PRODUCE, 9, wire.read_frame())
                assert answer.responses[0].partition_responses[0].error_code == 0
                throttled += answer.throttle_time_ms > 0
            assert throttled > 0   # the Python path measured them
            # at most the request already read when the quota arrived went through the front
            assert front_served(broker) <= served + 1


def test_a_client_quota_set_through_another_listener_throttles_a_consumer_whose_fetches_the_front_serves():
    # The quota arrives through a SASL listener, whose connections the front never holds, so no connection goes
    # to the front after it: only the published image can tell the front. Before, the held consumer's fetches
    # stayed on the front, unthrottled, until a Produce was accounted there.
    sasl_port = free_port()
    config = {**FRONT, "klog.network.native.front.fetch.enable": True, "klog.fetch.native.enable": True,
              "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                  'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="pw";'}
    with klog.Broker(config=config) as broker:
        create_topics(broker, {"t": {}}, partitions=1)
        with WireClient(broker.host, broker.port) as producer:
            for cid in range(20):
                producer.send_raw(produce_frame(9, cid, [("t", [(0, batch(size=10_000))])]))
                assert error_codes(producer.read_frame(), 9) == [0]

        with WireClient(broker.host, broker.port) as consumer:
            def fetch() -> int:
                answer = consumer.request(ApiKey.FETCH, 12, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50_000, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                         "partition_max_bytes": 50_000}]}], "forgotten_topics_data": [], "rack_id": ""})
                # a throttled fetch is answered with no partition, as Kafka's
                assert [p.error_code for r in answer.responses for p in r.partitions] == (
                    [] if answer.throttle_time_ms else [0])
                return int(answer.throttle_time_ms)

            fetched_by_front = broker.stats()["native_front_fetches"]
            for _ in range(20):   # the front takes the connection once it is idle
                assert fetch() == 0
                time.sleep(0.01)
            assert broker.stats()["native_front_fetches"] > fetched_by_front

            with WireClient("127.0.0.1", sasl_port) as admin:
                assert admin.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
                assert admin.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0admin\0pw"}).error_code == 0
                response = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
                    {"entity": [{"entity_type": "user", "entity_name": None}],
                     "ops": [{"key": "consumer_byte_rate", "value": 1000.0, "remove": False}]}],
                    "validate_only": False})
                assert response.entries[0].error_code == 0
                # the quota is in this broker's image once DescribeClientQuotas answers it
                assert _until(lambda: admin.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
                    "components": [{"entity_type": "user", "match_type": 1, "match": None}],
                    "strict": False}).entries)
            # a 50 KB answer at 1,000 B/s: the first fetch after the quota is throttled (and its connection muted
            # for that long, so it is the last one here)
            assert fetch() > 0


def test_real_clients_produce_and_consume_with_the_front_on():
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    with klog.Broker(config={**FRONT, **METRICS}) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic, expected = produce_with_two_clients(bootstrap, "front", 300, {"acks": 1, "enable.idempotence": False})
        stats = broker.stats()
        assert stats["native_front_requests"] > 0, stats
        seen, got = read_with_two_clients(bootstrap, topic, 600)
        assert seen == expected
        assert got == expected
        server = broker._require()
        assert server.metrics is not None and server.metrics.topics[topic].messages_in == 600
        produce_time = server.metrics.request_time_ms[0]
        # every Produce answered counts in the request-time histogram, the front's included
        assert sum(produce_time.counts) >= broker.stats()["native_front_requests"]


def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """A new topic of ``partitions`` one-replica partitions, made with confluent-kafka's admin client."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def test_an_idempotent_confluent_kafka_producer_is_served_by_the_front_and_read_back_once_in_order():
    """librdkafka with enable.idempotence (acks=all, up to 5 requests in flight) on a one-replica topic: once the
    partitions are routed the front serves its Produce requests, checking each batch's sequence in the partition's
    producer table, with few hand-backs; every record is read back once, in order, and each partition's table holds
    the producer at the sequence of its last record."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from klog.client.loop_thread import call_in_loop
    with klog.Broker(config=FRONT) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic = new_topic(bootstrap, "idempotent", 2)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                             "linger.ms": 0})

        def produce(values: range) -> None:
            for i in values:
                producer.produce(topic, value=b"%06d" % i, partition=i % 2)
                producer.poll(0)
            assert producer.flush(30) == 0

        produce(range(20))   # the Python path's first append to each partition routes it
        time.sleep(0.2)      # the producer's connection idle: the front's
        before = broker.stats()
        produce(range(20, 1020))
        after = broker.stats()
        served = after["native_front_requests"] - before["native_front_requests"]
        handoffs = after["native_front_handoffs"] - before["native_front_handoffs"]
        assert served > 0 and handoffs < served, (served, handoffs)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        got: dict[int, list[int]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 1020 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got[msg.partition()].append(int(msg.value()))
        consumer.close()
        assert got == {p: list(range(p, 1020, 2)) for p in (0, 1)}
        server = broker._require()
        tables = call_in_loop(server.loop, lambda: [server.state.producers.table(topic, p).producers()
                                                     for p in (0, 1)], timeout=30)
        assert [[entry[2] for entry in table] for table in tables] == [[509], [509]]


def test_a_confluent_kafka_throughput_producers_large_requests_are_served_by_the_front_and_read_back():
    """librdkafka with batch.size=262144 and linger.ms=5 on 16 partitions sends Produce requests of up to 256 KiB
    (one partition's batch each; at batch.size=65536 they stay under the front's 64 KiB read buffer): once every
    partition is routed the front reads them whole and serves them, the connection is not handed back per request,
    and every record is read back, in each partition's order."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with klog.Broker(config=FRONT) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic = new_topic(bootstrap, "throughput", 16)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                             "batch.size": 262144, "compression.type": "none",
                                             "enable.idempotence": False})

        def produce(values: range) -> None:
            for i in values:
                while True:
                    try:
                        producer.produce(topic, value=b"%08d" % i * 128, partition=i % 16)
                        break
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
            assert producer.flush(60) == 0

        produce(range(160))   # the Python path's first append to each partition routes it
        before = broker.stats()
        count = 24_000
        produce(range(160, count))
        stats = broker.stats()
        large = stats["native_front_large_frames"] - before["native_front_large_frames"]
        assert large >= 20, stats
        assert stats["native_front_handoffs"] - before["native_front_handoffs"] <= 3, (before, stats)
        assert stats["native_front_held_bytes"] == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "throughput",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        seen: dict[int, list[int]] = {p: [] for p in range(16)}
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    value = msg.value()
                    assert value == value[:8] * 128
                    seen[msg.partition()].append(int(value[:8]))
        consumer.close()
        for partition, values in seen.items():
            assert values == list(range(partition, count, 16)), partition


# last: these change the routes the tests above rely on
test_a_config_change_is_applied_to_the_next_native_produce = \
    produce_path.test_a_config_change_is_applied_to_the_next_native_produce
test_a_deleted_and_recreated_topic_is_not_written_through_an_old_route = \
    produce_path.test_a_deleted_and_recreated_topic_is_not_written_through_an_old_route


@contextlib.contextmanager
def transactional_topic(name: str, linger_ms: int) -> Iterator[tuple[klog.Broker, str, Any]]:
    """A broker with the front on (its transaction state on one replica), a one-partition topic and an initialised
    confluent-kafka transactional producer: (broker, topic, producer)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with klog.Broker(config={**FRONT, "transaction.state.log.replication.factor": 1,
                             "transaction.state.log.min.isr": 1}) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic = new_topic(bootstrap, name, 1)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms,
                                             "transactional.id": f"{name}-{uuid.uuid4().hex[:6]}"})
        producer.init_transactions(30)
        yield broker, topic, producer


def read_committed(broker: klog.Broker, topic: str, count: int) -> list[bytes]:
    """The values a read_committed confluent-kafka consumer reads from ``topic`` (until ``count`` or 60 s)."""
    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": f"{broker.host}:{broker.port}",
                                         "group.id": f"committed-{uuid.uuid4().hex[:6]}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        seen += [m.value() for m in consumer.consume(1000, 1.0) if m.error() is None]
    consumer.close()
    return seen


def test_a_transactional_producers_coordinator_connection_stays_on_the_event_loop_instead_of_going_back_and_forth():
    """The front serves none of the transaction coordinator's requests, and librdkafka sends AddPartitionsToTxn and
    EndTxn every transaction on its own connection to the coordinator. Given back at such a request, that connection
    stays on the event loop as a transactional producer's does at its Produce (2 ms, twice as long at each one in a
    row, up to about 1 s) instead of being handed to the front after every answer and given back at the next
    request: a few hand-backs for a hundred transactions, not two a transaction. Every transaction commits and
    a read_committed consumer reads all of their records."""
    transactions = 100
    with transactional_topic("txn-front", 5) as (broker, topic, producer):

        def commit(values: range) -> None:
            for i in values:
                producer.begin_transaction()
                producer.produce(topic, value=b"%08d" % i, partition=0)
                producer.commit_transaction(30)

        commit(range(10))   # the coordinator's state topic created, the partition routed
        before = broker.stats()["native_front_handoffs"]
        commit(range(10, 10 + transactions))
        handoffs = broker.stats()["native_front_handoffs"] - before
        # about 2 * transactions without the stay (every AddPartitionsToTxn and EndTxn read by the front first)
        assert handoffs <= transactions // 4, handoffs
        seen = read_committed(broker, topic, 10 + transactions)
        assert [int(v) for v in seen] == list(range(10 + transactions))


def test_a_partition_whose_transactions_all_ended_no_longer_bounds_the_fronts_high_watermark():
    """A one-replica partition's log keeps Kafka's first unstable offset as the bound of the front's own high
    watermark: a transaction open (or its marker not yet in the ISR) holds it at the transaction's first offset, and
    once every transaction has ended there is none, even with an aborted one still in the log, so the front answers
    that partition's plain produces itself again. read_committed still skips the aborted records."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from klog.broker.producer_state import NO_UNSTABLE_OFFSET
    from klog.client.loop_thread import call_in_loop
    with transactional_topic("txn-ended", 0) as (broker, topic, producer):
        producer.begin_transaction()
        producer.produce(topic, value=b"committed", partition=0)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"aborted", partition=0)
        producer.flush(30)
        server = broker._require()
        log_ = call_in_loop(server.loop, lambda: server.state.partitions.get(topic, 0), timeout=30)
        assert log_.first_unstable_offset == 2   # committed (0), its marker (1), then the open one's first offset
        producer.abort_transaction(30)
        plain = confluent_kafka.Producer({"bootstrap.servers": f"{broker.host}:{broker.port}", "linger.ms": 0,
                                          "acks": 1})
        for i in range(20):
            plain.produce(topic, value=b"plain-%d" % i, partition=0)
            plain.flush(30)
        assert _until(lambda: log_.first_unstable_offset == NO_UNSTABLE_OFFSET), log_.first_unstable_offset
        assert log_.high_watermark == log_.log_end_offset
        assert read_committed(broker, topic, 21) == [b"committed"] + [b"plain-%d" % i for i in range(20)]


def test_the_high_watermark_never_passes_an_open_transactions_first_offset_without_the_bound_that_stops_reads():
    """The native paths read a read_committed consumer's records up to the first unstable offset the broker sets on
    the log with each high watermark. The producer state that offset comes from must know a transaction before the
    high watermark passes its first batch: it was told only after the append had moved the high watermark, so for
    a moment the log had no bound and a high watermark past an open transaction, and a read_committed Fetch the
    front served then read records of a transaction that later aborted (franz-go's TestTxnEtl, "consumed too much",
    under its whole suite's load). Every high watermark the broker sets while transactions start, commit and abort
    has the bound at or below the open transaction's first offset."""
    from klog.client.loop_thread import call_in_loop
    with transactional_topic("txn-bound", 0) as (broker, topic, producer):
        server = broker._require()
        replicas = server.state.replicas
        seen: list[tuple[int, int]] = []   # (high watermark, first unstable offset) after each move of the topic's
        mirror = replicas._mirror_high_watermark

        def observed(key: Any, native: Any, high_watermark: int, *, raise_only: bool = False) -> None:
            mirror(key, native, high_watermark, raise_only=raise_only)
            if key == (topic, 0):
                seen.append((native.high_watermark, native.first_unstable_offset))

        call_in_loop(server.loop, lambda: setattr(replicas, "_mirror_high_watermark", observed), timeout=30)
        try:
            opened = []   # the first offset of each transaction while it was open
            for i, commit in enumerate([True, False, True, False]):
                producer.begin_transaction()
                producer.produce(topic, value=b"txn-%d" % i, partition=0)
                producer.flush(30)
                log_ = call_in_loop(server.loop, lambda: server.state.partitions.get(topic, 0), timeout=30)
                first = log_.log_end_offset - 1
                opened.append(first)
                moves = len(seen)
                assert [s for s in seen if s[0] > first and s[1] > first] == [], (first, seen)
                if commit:
                    producer.commit_transaction(30)
                else:
                    producer.abort_transaction(30)
                # the marker's high watermark moves the bound past the ended transaction
                assert _until(lambda: len(seen) > moves and seen[-1][0] == log_.log_end_offset), seen
        finally:
            call_in_loop(server.loop, lambda: replicas.__dict__.pop("_mirror_high_watermark", None), timeout=30)
        assert read_committed(broker, topic, 2) == [b"txn-0", b"txn-2"]


def _front_connection_id(server: Any, wire: WireClient) -> int:
    """The id of the front-held connection whose client end is ``wire``."""
    from klog.client.loop_thread import call_in_loop
    port = wire.sock.getsockname()[1]

    def find() -> int | None:
        front = server.front
        assert front is not None
        return next((cid for cid, conn in front.connections.items() if conn.client_port == port), None)

    found: list[int | None] = [None]

    def held() -> bool:
        found[0] = call_in_loop(server.loop, find, timeout=30)
        return found[0] is not None

    assert _until(held)
    assert found[0] is not None
    return found[0]


def test_a_panic_serving_one_connection_closes_that_connection_and_the_front_goes_on_serving_the_others():
    """The front's one thread reads every connection handed to it: a panic there (here injected into the next serve
    of one connection) must not end it, which would leave every connection it holds unread without a word. The
    connection being served is closed (its client reads the end of the stream), the broker counts the fault, and
    the front serves the other connection and new ones."""
    with klog.Broker(config=FRONT) as broker:
        create_topics(broker, {"t": {}}, partitions=1)
        server = broker._require()
        with WireClient(broker.host, broker.port) as failing, WireClient(broker.host, broker.port) as other:
            for wire in (failing, other):
                for cid in (1, 2):   # the first routes the partition, after the second the connection is the front's
                    wire.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                    assert error_codes(wire.read_frame(), 9) == [0]
            failing_id = _front_connection_id(server, failing)
            _front_connection_id(server, other)
            assert broker.stats()["native_front_faults"] == 0
            server.front.native.fail_next_serve(failing_id)
            failing.send_raw(produce_frame(9, 3, [("t", [(0, batch())])]))
            with pytest.raises(ConnectionError):   # closed by the broker (not a read timing out)
                failing.read_frame()
            assert _until(lambda: broker.stats()["native_front_faults"] == 1), broker.stats()
            for cid in (3, 4):
                served = front_served(broker)
                other.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                assert error_codes(other.read_frame(), 9) == [0]
                assert front_served(broker) == served + 1
        with WireClient(broker.host, broker.port) as fresh:
            for cid in (1, 2, 3):
                fresh.send_raw(produce_frame(9, cid, [("t", [(0, batch())])]))
                assert error_codes(fresh.read_frame(), 9) == [0]
            assert _until(lambda: broker.stats()["native_front_connections"] >= 1)
            served = front_served(broker)
            fresh.send_raw(produce_frame(9, 4, [("t", [(0, batch())])]))
            assert error_codes(fresh.read_frame(), 9) == [0]
            assert front_served(broker) == served + 1


def test_an_error_accounting_the_fronts_appends_still_sends_its_held_answers_and_serves_the_connections_it_gave_back():
    """The event loop accounts the front's appends, sends the answers it held, then reads the connections it gave
    back. An error while accounting (here raised once by the replica manager) must not leave those answers unsent or
    those connections paused, never read again: a Produce to a compacted topic (its answer held for the accounting)
    pipelined with a Metadata request (which gives the connection back) are both answered, in order."""
    from klog.client.loop_thread import call_in_loop
    with klog.Broker(config=FRONT) as broker:
        create_topics(broker, {"kept": {"cleanup.policy": "compact"}}, partitions=1)
        server = broker._require()
        replicas = server.state.replicas
        raised: list[tuple[str, int]] = []
        appended = replicas.front_appended

        def fails_once(topic: str, partition: int) -> None:
            if not raised:
                raised.append((topic, partition))
                raise RuntimeError("an accounting error (injected)")
            appended(topic, partition)

        with WireClient(broker.host, broker.port) as wire:
            for cid in (1, 2):
                wire.send_raw(produce_frame(9, cid, [("kept", [(0, batch())])]))
                assert error_codes(wire.read_frame(), 9) == [0]
            _front_connection_id(server, wire)
            call_in_loop(server.loop, lambda: setattr(replicas, "front_appended", fails_once), timeout=30)
            try:
                served = front_served(broker)
                metadata = encode_request(ApiKey.METADATA, 12, 4, "native-test", {
                    "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
                wire.send_raw(produce_frame(9, 3, [("kept", [(0, batch())])]) + metadata)
                answers = [wire.read_frame(), wire.read_frame()]
                assert [struct.unpack(">i", a[:4])[0] for a in answers] == [3, 4]
                assert error_codes(answers[0], 9) == [0]
                assert raised == [("kept", 0)]
                assert front_served(broker) == served + 1
                # the connection goes on: the next Produce is answered (and accounted) as usual
                wire.send_raw(produce_frame(9, 5, [("kept", [(0, batch())])]))
                assert error_codes(wire.read_frame(), 9) == [0]
            finally:
                call_in_loop(server.loop, lambda: replicas.__dict__.pop("front_appended", None), timeout=30)
        assert [len(b.records) for b in fetch_raw(broker.host, broker.port, "kept", 0)] == [1, 1, 1, 1]

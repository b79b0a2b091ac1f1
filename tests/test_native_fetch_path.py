"""The native Fetch path (klog/broker/native_fetch.py) answers exactly as the Python path does.

Two real brokers, one with ``klog.fetch.native.enable`` on and one with it off, hold the same records (the same
Produce frames) and get the same Fetch frames (every version the broker advertises; from v13 each names the topic
by the id its broker gave it); their answers must be the same bytes once each broker's topic id is replaced by the
same placeholder (and, for fetch sessions, each broker's random session id). The broker's counters
(``klog.Broker.stats()``) show which requests the native path served: the common ones on the first broker, never
the uncommon ones, never anything on the second. Real clients then consume through the native path.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import klog
from klog.broker import errors
from klog.protocol import ApiKey, decode_response, encode_request
from klog.records import encode_batch
from klog.testing.wire import WireClient
from native_path_support import BrokerPair

pytestmark = pytest.mark.timeout(240)

#: Fetch versions klog advertises (Kafka 4 refuses v0-3), all read by the native path
FETCH_VERSIONS = range(4, 19)
TOPICS = ("plain", "other")
PARTITIONS = 3
NOW = int(time.time() * 1000)
#: records per batch and batches written to each partition of TOPICS before the tests
RECORDS, BATCHES = 5, 4


def batch(count: int, seed: int) -> bytes:
    return encode_batch([{"key": b"k%d" % i, "value": b"v%d-" % seed * 20, "timestamp": NOW + i}
                         for i in range(count)])


def produce_frame(cid: int, topic: str, partition: int, records: bytes) -> bytes:
    return encode_request(ApiKey.PRODUCE, 9, cid, "native-test", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})


#: (topic, [(partition, fetch offset, partition max bytes, current leader epoch)])
Wanted = list[tuple[str, list[tuple[int, int, int, int]]]]


def fetch_frame(version: int, cid: int, ids: dict[str, uuid.UUID], wanted: Wanted, *, max_wait_ms: int = 0,
                min_bytes: int = 1, max_bytes: int = 1 << 20, isolation_level: int = 0, session_id: int = 0,
                session_epoch: int = -1, rack_id: str = "", replica_id: int = -1,
                forgotten: list[tuple[str, list[int]]] | None = None, tagged: dict[str, Any] | None = None) -> bytes:
    """``tagged``: each partition's tagged fields (v17's replica_directory_id, v18's high_watermark)."""
    by_id = version >= 13
    body: dict[str, Any] = {
        "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": isolation_level, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": name, "topic_id": ids.get(name, uuid.UUID(int=7)) if by_id else None,
                    "partitions": [{"partition": p, "current_leader_epoch": epoch, "fetch_offset": offset,
                                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": pmax,
                                    **(tagged or {})}
                                   for p, offset, pmax, epoch in parts]} for name, parts in wanted],
        "forgotten_topics_data": [{"topic": name, "topic_id": ids.get(name) if by_id else None, "partitions": parts}
                                  for name, parts in forgotten or []],
        "rack_id": rack_id}
    if version >= 15 and replica_id >= 0:
        body["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
    return encode_request(ApiKey.FETCH, version, cid, "native-test", body)


class Pair(BrokerPair):
    """The same Fetch frames (each with the topic ids its broker gave them) to a broker with the native Fetch path
    and one without."""

    stat = "native_fetch_requests"

    def __init__(self, native: klog.Broker, python: klog.Broker) -> None:
        super().__init__(native, python)
        self.ids: list[dict[str, uuid.UUID]] = [{}, {}]
        self.learn_ids()

    def learn_ids(self) -> None:
        for wire, ids in zip(self.wires, self.ids):
            response = wire.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                          "include_topic_authorized_operations": False})
            ids.update({t.name: t.topic_id for t in response.topics})

    def frames(self, frame_of: Callable[[int, dict[str, uuid.UUID]], bytes], cid: int) -> list[bytes]:
        return [frame_of(cid, ids) for ids in self.ids]

    def normalized(self, answer: bytes, which: int, *, session: int | None = None) -> bytes:
        """``session``: the Fetch version of an answer whose session id (random on each broker) is masked."""
        for name, topic_id in self.ids[which].items():
            answer = answer.replace(topic_id.bytes, name.encode().ljust(16, b"#")[:16])
        if session is not None:   # correlation id (4), header tags (v12+), throttle (4), error (2), session id
            at = 4 + (session >= 12) + 4 + 2
            answer = answer[:at] + b"SSSS" + answer[at + 4:]
        return answer

    def produce(self, topic: str, partition: int, records: bytes) -> None:
        self.cid += 1
        for wire in self.wires:
            wire.send_raw(produce_frame(self.cid, topic, partition, records))
        for wire in self.wires:
            wire.read_frame()


def partitions_of(answer: bytes, version: int) -> list[Any]:
    _, response = decode_response(ApiKey.FETCH, version, answer)
    return [p for t in response.responses for p in t.partitions]


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    metrics = {"klog.metrics.listener": "127.0.0.1:0"}
    with klog.Broker(config={"klog.fetch.native.enable": True, **metrics}) as native, \
            klog.Broker(config={"klog.fetch.native.enable": False, **metrics}) as python:
        for broker in (native, python):
            with WireClient(broker.host, broker.port) as wire:
                response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                    {"name": name, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                     "configs": []} for name in TOPICS], "timeout_ms": 5000, "validate_only": False})
                assert [t.error_code for t in response.topics] == [0] * len(TOPICS)
        both = Pair(native, python)
        fill_and_route(both)
        yield both
        both.close()


def fill_and_route(both: Pair) -> None:
    """BATCHES batches of RECORDS records in every partition of both brokers, then every partition fetched once:
    the Python path's first fetch of a partition routes it to the native path."""
    for name in TOPICS:
        for index in range(PARTITIONS):
            for b in range(BATCHES):
                both.produce(name, index, batch(RECORDS, b))
    for name in TOPICS:
        for index in range(PARTITIONS):
            both.same(lambda cid, ids, n=name, i=index: fetch_frame(12, cid, ids, [(n, [(i, 0, 100, -1)])]))


LOG_END = RECORDS * BATCHES


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_every_version_answers_a_fetch_behind_with_the_python_paths_bytes(pair, version, isolation_level):
    before = pair.native_served()
    answer = pair.same(lambda cid, ids: fetch_frame(version, cid, ids, [("plain", [(0, 0, 1 << 20, -1)])],
                                                    isolation_level=isolation_level))
    [p] = partitions_of(answer, version)
    assert (p.error_code, p.high_watermark, len(p.records)) == (0, LOG_END, len(p.records))
    assert len(p.records) > 0
    assert pair.native_served() == before + 1


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_every_version_answers_several_topics_and_byte_limits_with_the_python_paths_bytes(pair, version):
    """Several topics and partitions, a topic named twice in a row (one response entry), partition and request
    byte limits (whole batches, at least one), an offset inside a batch, an empty topic list."""
    before = pair.native_served()
    wanted: Wanted = [("plain", [(1, 3, 200, -1), (2, 0, 1, -1)]), ("plain", [(0, LOG_END, 100, 0)]),
                      ("other", [(0, 7, 1 << 20, -1), (2, 0, 1 << 20, -1)])]
    for max_bytes in (1, 300, 1 << 20):
        answer = pair.same(lambda cid, ids, mb=max_bytes: fetch_frame(version, cid, ids, wanted, max_bytes=mb))
        assert all(p.error_code == 0 for p in partitions_of(answer, version))
    pair.same(lambda cid, ids: fetch_frame(version, cid, ids, []))
    assert pair.native_served() == before + 4


@pytest.mark.parametrize("version", [17, 18])
def test_the_replica_directory_id_and_high_watermark_are_read_past_natively_with_the_python_paths_bytes(pair, version):
    """Fetch v17/v18's tagged partition fields (KIP-853, KIP-1166) change nothing a broker answers (Kafka's broker
    reads neither): served natively, a stale high watermark not ending a long poll early."""
    tagged: dict[str, Any] = {"replica_directory_id": uuid.UUID(int=3)}
    if version >= 18:
        tagged["high_watermark"] = 0
    before = pair.native_served()
    answer = pair.same(lambda cid, ids: fetch_frame(version, cid, ids, [("plain", [(0, 0, 1 << 20, -1)])],
                                                    tagged=tagged))
    [p] = partitions_of(answer, version)
    assert (p.error_code, p.high_watermark) == (0, LOG_END) and len(p.records) > 0
    started = time.monotonic()
    answer = pair.same(lambda cid, ids: fetch_frame(version, cid, ids, [("other", [(1, LOG_END, 1 << 20, -1)])],
                                                    max_wait_ms=200, tagged=tagged))
    assert time.monotonic() - started >= 0.2
    [p] = partitions_of(answer, version)
    assert (p.error_code, p.high_watermark, len(p.records or b"")) == (0, LOG_END, 0)
    assert pair.native_served() == before + 2


@pytest.mark.parametrize("version", [4, 11, 12, 16, 18])
def test_an_empty_long_poll_waits_natively_and_answers_the_python_paths_bytes_at_its_deadline(pair, version):
    before = pair.native_served()
    started = time.monotonic()
    answer = pair.same(lambda cid, ids: fetch_frame(version, cid, ids, [("other", [(1, LOG_END, 1 << 20, -1)])],
                                                    max_wait_ms=200))
    assert time.monotonic() - started >= 0.2
    [p] = partitions_of(answer, version)
    assert (p.error_code, p.high_watermark, len(p.records or b"")) == (0, LOG_END, 0)
    assert pair.native_served() == before + 1


def test_a_native_long_poll_is_woken_by_an_append_and_answers_the_python_paths_bytes(pair):
    topic, index = "other", 2
    before = pair.native_served()
    [first] = partitions_of(pair.same(lambda cid, ids: fetch_frame(12, cid, ids, [(topic, [(index, 0, 1, -1)])])), 12)
    end = first.high_watermark
    pair.cid += 1
    for wire, ids in zip(pair.wires, pair.ids):
        wire.send_raw(fetch_frame(12, pair.cid, ids, [(topic, [(index, end, 1 << 20, -1)])], max_wait_ms=10_000))
    time.sleep(0.3)
    started = time.monotonic()
    with WireClient(pair.brokers[0].host, pair.brokers[0].port) as a, \
            WireClient(pair.brokers[1].host, pair.brokers[1].port) as b:
        for wire in (a, b):
            wire.send_raw(produce_frame(1, topic, index, batch(2, 99)))
            wire.read_frame()
    native, python = (pair.normalized(w.read_frame(), i) for i, w in enumerate(pair.wires))
    assert time.monotonic() - started < 5
    assert native == python
    [p] = partitions_of(native, 12)
    assert p.high_watermark == end + 2 and len(p.records) > 0
    assert pair.native_served() == before + 2


def fetch_errors(pair: Pair, frame_of: Callable[[int, dict[str, uuid.UUID]], bytes], version: int, *,
                 session: int | None = None) -> list[int]:
    before = pair.native_served()
    answer = pair.same(frame_of, session=session)
    assert pair.native_served() == before, "the native path served a request the Python path must answer"
    _, response = decode_response(ApiKey.FETCH, version, answer)
    return [response.error_code] + [p.error_code for t in response.responses for p in t.partitions]


@pytest.mark.parametrize("version", [4, 9, 12, 13, 16])
def test_every_uncommon_fetch_takes_the_python_path_with_its_answer(pair, version):
    ok = ("plain", [(0, 0, 1 << 20, -1)])
    cases: dict[str, tuple[dict[str, Any], list[int]]] = {
        "unknown topic": ({"wanted": [ok, ("nope", [(0, 0, 100, -1)])]},
                          [0, 0, errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION]),
        "unknown partition": ({"wanted": [("plain", [(0, 0, 100, -1), (9, 0, 100, -1)])]},
                              [0, 0, errors.UNKNOWN_TOPIC_OR_PARTITION]),
        "offset out of range": ({"wanted": [("plain", [(0, LOG_END + 5, 100, -1)])]}, [0, errors.OFFSET_OUT_OF_RANGE]),
        "a replica's fetch": ({"wanted": [ok], "replica_id": 5}, [0, errors.NOT_LEADER_OR_FOLLOWER]),
    }
    if version >= 9:
        cases["fenced leader epoch"] = ({"wanted": [("plain", [(0, 0, 100, 7)])]}, [0, errors.UNKNOWN_LEADER_EPOCH])
    if version >= 7:
        cases["unknown session"] = ({"wanted": [ok], "session_id": 1234, "session_epoch": 3},
                                    [errors.FETCH_SESSION_ID_NOT_FOUND])
    for name, (options, expected) in cases.items():
        wanted = options.pop("wanted")
        got = fetch_errors(pair, lambda cid, ids, w=wanted, o=options: fetch_frame(version, cid, ids, w, **o), version)
        assert any(got), name
        if name != "a replica's fetch":
            assert got == expected, name


class Sessions:
    """One fetch session on each broker of ``pair`` (their ids differ: random), fetched in step."""

    def __init__(self, pair: Pair, version: int, wanted: Wanted) -> None:
        self.pair, self.version = pair, version
        answers = self.send(lambda cid, ids, sid: fetch_frame(version, cid, ids, wanted, session_epoch=0),
                            [0, 0])
        self.ids = [decode_response(ApiKey.FETCH, version, a)[1].session_id for a in answers]
        assert all(self.ids), "no session opened"
        assert self.pair.normalized(answers[0], 0, session=version) == \
            self.pair.normalized(answers[1], 1, session=version)

    def send(self, frame_of: Callable[[int, dict[str, uuid.UUID], int], bytes], ids: list[int]) -> list[bytes]:
        self.pair.cid += 1
        for wire, topic_ids, sid in zip(self.pair.wires, self.pair.ids, ids):
            wire.send_raw(frame_of(self.pair.cid, topic_ids, sid))
        return [wire.read_frame() for wire in self.pair.wires]

    def fetch(self, epoch: int, wanted: Wanted, **options: Any) -> bytes:
        """The session's fetch at ``epoch`` on both brokers: the answers must be the same bytes (session id masked);
        the native broker's answer."""
        answers = self.send(lambda cid, ids, sid: fetch_frame(self.version, cid, ids, wanted, session_id=sid,
                                                              session_epoch=epoch, **options), self.ids)
        native, python = (self.pair.normalized(a, i, session=self.version) for i, a in enumerate(answers))
        assert native == python
        return answers[0]

    def native_sessions(self) -> int:
        served = [b.stats()["native_fetch_session_requests"] for b in self.pair.brokers]
        assert served[1] == 0, "the broker without the native path served a session natively"
        return served[0]


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_a_sessions_incremental_fetches_are_served_natively_with_the_python_paths_bytes(pair, version):
    """A session opened by the Python path (epoch 0) is handed to the native path: its incremental fetches (no
    change, new offsets, a new partition max) are served natively, each answer holding only the partitions with news,
    the same bytes as the Python path's session cache gives. A fetch the native path leaves alone (a wrong epoch, a
    forgotten partition, the closing fetch) gets the Python path's answer from the state the native path left."""
    session = Sessions(pair, version, [("plain", [(0, 0, 100, -1), (1, 0, 100, -1)]), ("other", [(0, 0, 100, -1)])])
    before, sessions_before = pair.native_served(), session.native_sessions()
    # no change: the same offsets read again; only the first partition's batch fits (news: records)
    assert [p.partition_index for p in partitions_of(session.fetch(1, []), version)] == [0]
    # all three caught up: only news (the high watermark answered already): none
    caught_up = [("plain", [(0, LOG_END, 100, -1), (1, LOG_END, 100, -1)]), ("other", [(0, LOG_END, 100, -1)])]
    assert partitions_of(session.fetch(2, caught_up), version) == []
    # one partition moved back, with a larger partition max: it alone answers
    [p] = partitions_of(session.fetch(3, [("plain", [(1, 0, 1 << 20, -1)])]), version)
    assert (p.partition_index, p.high_watermark) == (1, LOG_END) and p.records
    assert pair.native_served() == before + 3
    assert session.native_sessions() == sessions_before + 3
    # the Python path's answers from the state the native path left: a wrong epoch, then a forgotten partition
    _, wrong = decode_response(ApiKey.FETCH, version, session.fetch(9, []))
    assert wrong.error_code == errors.INVALID_FETCH_SESSION_EPOCH
    answered = partitions_of(session.fetch(4, [], forgotten=[("other", [0])]), version)
    assert [p.partition_index for p in answered] == [1]   # plain-1 went back to 0 and returned records last time
    assert pair.native_served() == before + 3
    # handed back to the native path: the next incremental fetch is native again
    session.fetch(5, [("plain", [(1, LOG_END, 100, -1)])])
    assert pair.native_served() == before + 4 and session.native_sessions() == sessions_before + 4
    # the closing fetch (epoch -1 naming the session) is the Python path's; the session is gone on both
    session.fetch(-1, [("plain", [(0, LOG_END, 100, -1)])])
    _, gone = decode_response(ApiKey.FETCH, version, session.fetch(6, []))
    assert gone.error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    assert pair.native_served() == before + 4


@pytest.mark.parametrize("version", [7, 16])
def test_a_caught_up_sessions_long_poll_waits_natively_and_answers_the_python_paths_bytes(pair, version):
    """An incremental fetch with nothing new parks on the native path until max_wait_ms, answers with no partitions,
    and moves the session's epoch on once (the next epoch is served natively too)."""
    session = Sessions(pair, version, [("plain", [(2, LOG_END, 100, -1)])])
    before = pair.native_served()
    started = time.monotonic()
    assert partitions_of(session.fetch(1, [], max_wait_ms=200), version) == []
    assert time.monotonic() - started >= 0.2
    assert partitions_of(session.fetch(2, []), version) == []
    assert pair.native_served() == before + 2


def test_damaged_frames_get_the_python_paths_treatment(pair):
    """A truncated Fetch closes the connection on both brokers; one with trailing bytes is answered by the Python
    path on both (its decoder reads the body and ignores the rest; the native decoder declines such frames)."""
    frame = fetch_frame(12, 1, pair.ids[0], [("plain", [(0, 0, 100, -1)])])[4:]
    before = pair.native_served()
    damaged = frame[:-3]
    for broker in pair.brokers:
        with WireClient(broker.host, broker.port) as wire:
            wire.send_raw(struct.pack(">i", len(damaged)) + damaged)
            assert wire.is_closed_by_peer()
    trailing = lambda cid, ids: (lambda f: struct.pack(">i", len(f) - 4) + f[4:])(  # noqa: E731
        fetch_frame(12, cid, ids, [("plain", [(0, 0, 100, -1)])]) + b"\x00\x01")
    pair.same(trailing)
    assert pair.native_served() == before


@contextlib.contextmanager
def routed_partition(tmp_path: Any) -> Iterator[tuple[Any, uuid.UUID]]:
    """A native FetchRoutes with one routed partition, plain-0 (3 records, all below the high watermark), and its
    topic id; no broker."""
    from klog import _native

    manager = _native.LogManager([str(tmp_path)], _native.LogConfig())
    try:
        log = manager.create("plain", 0)
        log.append(batch(3, 1), leader_epoch=0)
        log.high_watermark = log.log_end_offset
        routes = _native.FetchRoutes(rack_aware=False, error_none=errors.NONE)
        topic_id = uuid.uuid4()
        routes.learn("plain", 0, log, topic_id=topic_id.bytes, leader_epoch=0)
        yield routes, topic_id
    finally:
        manager.close()


def test_the_native_fetch_call_never_raises_on_damaged_frames(tmp_path):
    """Random damage to valid frames of every version: the native call answers or declines (None), never raises."""
    import random

    from klog import _native

    with routed_partition(tmp_path) as (routes, topic_id):
        rng = random.Random(38)
        served = 0
        for round_ in range(3000):
            version = rng.choice(list(FETCH_VERSIONS))
            frame = bytearray(fetch_frame(version, round_, {"plain": topic_id}, [("plain", [(0, 0, 1000, -1)])])[4:])
            if round_ % 3:
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            if round_ % 5 == 0:
                del frame[rng.randrange(len(frame)):]
            outcome = _native.native_fetch(bytes(frame), routes, max_version=16, fetch_max_bytes=1 << 20,
                                           zero_copy=False, may_wait=False)
            if outcome is not None:
                served += 1
                assert outcome.chunks is not None
                assert struct.unpack(">i", outcome.chunks[0][:4])[0] == sum(len(c) for c in outcome.chunks) - 4
        assert served > 0


def test_the_session_cache_owns_sessions_it_hands_to_the_native_table(tmp_path):
    """FetchSessionCache.hand_over gives a consumer's session to the native table only when every partition is
    routed; the native call then moves its epoch on; the cache takes the state back before the Python path reads it,
    and closing or evicting the session drops it from the table."""
    from klog import _native
    from klog.broker.fetch_sessions import FetchPartition, FetchSessionCache

    with routed_partition(tmp_path) as (routes, _):
        cache = FetchSessionCache(1)
        cache.native = routes
        unrouted = cache.create(0, False, False, {("plain", 0): FetchPartition(0, 0, 100),
                                                  ("plain", 1): FetchPartition(1, 0, 100)})
        assert unrouted is not None and not cache.hand_over(unrouted) and routes.session_count() == 0
        cache.remove(unrouted.id)
        session = cache.create(0, False, False, {("plain", 0): FetchPartition(0, 3, 100)})
        assert session is not None and cache.hand_over(session) and routes.session_count() == 1

        def incremental(epoch: int) -> Any:
            frame = fetch_frame(12, epoch, {}, [], session_id=session.id, session_epoch=epoch)[4:]
            return _native.native_fetch(frame, routes, max_version=16, fetch_max_bytes=1 << 20, zero_copy=False,
                                        may_wait=False)

        assert incremental(2) is None   # the wrong epoch: the Python path's to refuse
        for epoch in (1, 2):
            outcome = incremental(epoch)
            assert outcome is not None and outcome.session_id == session.id
        taken = cache.get(session.id)
        assert taken is session and routes.session_count() == 0 and not session.native
        assert session.epoch == 3 and session.partitions[("plain", 0)].answered_high_watermark == 3
        assert incremental(3) is None   # no longer held natively
        assert cache.hand_over(session) and routes.session_count() == 1
        # a replica's session takes the slot (it may evict a consumer's): the table forgets the evicted one
        assert cache.create(1, True, False, {("plain", 0): FetchPartition(0, 0, 100)}) is not None
        assert routes.session_count() == 0 and incremental(3) is None


def transactional_partition(broker: klog.Broker) -> Any:
    """Topic ``txr``, one partition: plain (offset 0), an aborted transaction (1, its marker 2), a transaction left
    open (3), plain (4). Returns the open transaction's producer (the caller ends it)."""
    kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    bootstrap = f"{broker.host}:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("txr", 1, 1)])["txr"].result(30)
    plain = kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    plain.produce("txr", b"plain", partition=0)
    assert plain.flush(30) == 0
    producer = kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "txr-1", "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txr", b"aborted", partition=0)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txr", b"open", partition=0)
    assert producer.flush(30) == 0
    plain.produce("txr", b"after", partition=0)
    assert plain.flush(30) == 0
    return producer


def topic_ids(wire: WireClient) -> dict[str, uuid.UUID]:
    return {t.name: t.topic_id for t in wire.request(ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).topics}


TRANSACTIONS = {"klog.fetch.native.enable": True, "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1}


def test_fetches_of_a_partition_with_transactions_are_served_natively_with_the_python_paths_bytes():
    """A partition with an aborted and an open transaction: read_uncommitted and read_committed fetches are served
    natively (v4, v12, v16, sessionless and in a fetch session) with the Python path's bytes: the last stable offset
    at the open transaction's first offset (the log's first unstable offset below the high watermark), and for
    read_committed the records below it and the aborted transaction it overlaps (the log's list, as the broker's
    transaction state sets it); a fetch from past the aborted transaction's marker is told none."""
    from klog.client.loop_thread import call_in_loop
    with klog.Broker(config=TRANSACTIONS) as broker:
        producer = transactional_partition(broker)
        server = broker._require()
        with WireClient(broker.host, broker.port) as wire:
            ids = topic_ids(wire)

            def fetch(version: int, cid: int, isolation: int, offset: int = 0, **session: int) -> bytes:
                wire.send_raw(fetch_frame(version, cid, ids, [("txr", [(0, offset, 1 << 20, -1)])],
                                          isolation_level=isolation, **session))
                return wire.read_frame()

            def native_served(answer: Callable[[], bytes]) -> tuple[bytes, int]:
                before = broker.stats()["native_fetch_requests"]
                got = answer()
                return got, broker.stats()["native_fetch_requests"] - before

            for version in (4, 12, 16):
                for isolation, offset, aborted in ((0, 0, None), (1, 0, [1]), (1, 3, [])):
                    case = (version, isolation, offset)
                    fetch(version, 1, isolation, offset)   # the Python path's answer routes the partition
                    native, served = native_served(lambda: fetch(version, 2, isolation, offset))
                    assert served == 1, case
                    call_in_loop(server.loop, server.state.partitions.forget_native_routes, timeout=30)
                    python, served = native_served(lambda: fetch(version, 2, isolation, offset))
                    assert served == 0 and native == python, case
                    [p] = partitions_of(native, version)
                    # plain (0), aborted (1), its marker (2), open (3), after (4): stable below the open one
                    assert (p.high_watermark, p.last_stable_offset) == (5, 3), case
                    assert (None if p.aborted_transactions is None
                            else [a.first_offset for a in p.aborted_transactions]) == aborted, case
                    assert bool(p.records) == (offset < 3), case
            # a consumer's fetch session, read_uncommitted or read_committed: handed over, its incremental fetches
            # served natively
            for isolation in (0, 1):
                _, response = decode_response(ApiKey.FETCH, 12, fetch(12, 10, isolation, session_epoch=0))
                assert response.session_id != 0
                before = broker.stats()["native_fetch_requests"]
                for epoch in (1, 2):
                    wire.send_raw(fetch_frame(12, 10 + epoch, ids, [], session_id=response.session_id,
                                              session_epoch=epoch, isolation_level=isolation))
                    assert decode_response(ApiKey.FETCH, 12, wire.read_frame())[1].error_code == 0
                assert broker.stats()["native_fetch_requests"] - before == 2, isolation
        producer.abort_transaction(30)


def test_a_read_committed_long_poll_waiting_natively_is_answered_when_the_transaction_commits():
    """A read_committed consumer caught up with the last stable offset, below an open transaction, waits natively;
    the commit moves the high watermark and the last stable offset past the transaction's records, and the poll is
    answered with them, not at its max_wait_ms."""
    with klog.Broker(config=TRANSACTIONS) as broker:
        producer = transactional_partition(broker)
        with WireClient(broker.host, broker.port) as wire:
            ids = topic_ids(wire)

            def poll(cid: int, wait_ms: int) -> bytes:
                return fetch_frame(12, cid, ids, [("txr", [(0, 3, 1 << 20, -1)])], isolation_level=1,
                                   max_wait_ms=wait_ms)

            wire.send_raw(poll(1, 0))   # the Python path's answer routes the partition
            [p] = partitions_of(wire.read_frame(), 12)
            assert (p.last_stable_offset, len(p.records or b"")) == (3, 0)
            before = broker.stats()["native_fetch_requests"]
            wire.send_raw(poll(2, 30_000))
            time.sleep(0.3)
            started = time.monotonic()
            producer.commit_transaction(30)
            [p] = partitions_of(wire.read_frame(), 12)
            assert time.monotonic() - started < 15, "answered at max_wait_ms, not woken by the commit"
            assert p.last_stable_offset == 6 and p.records   # the open one (3) committed at 5: all stable
            assert broker.stats()["native_fetch_requests"] - before == 1


def test_every_change_that_could_alter_a_route_forgets_the_native_routes():
    """The invariant the native paths rest on (PartitionManager.forget_native_routes): a config change, a new
    partition, a deleted topic and a leadership change (a new image) each leave no Produce or Fetch route."""
    with klog.Broker(config={"klog.fetch.native.enable": True, "klog.produce.native.enable": True}) as broker:
        state = broker._require().state
        manager = state.partitions
        cid = [0]

        def routed(wire: WireClient) -> None:
            for _ in range(2):
                cid[0] += 1
                wire.send_raw(produce_frame(cid[0], "r", 0, batch(1, cid[0])))
                wire.read_frame()
                cid[0] += 1
                wire.send_raw(fetch_frame(12, cid[0], {}, [("r", [(0, 0, 100, -1)])]))
                wire.read_frame()
            assert manager.native_routes.knows("r", 0) and manager.fetch_routes.knows("r", 0)

        def forgotten() -> bool:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if len(manager.native_routes) == 0 and len(manager.fetch_routes) == 0:
                    return True
                time.sleep(0.02)
            return False

        with WireClient(broker.host, broker.port) as wire:
            assert wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                for n in ("r", "gone")], "timeout_ms": 5000, "validate_only": False}).topics[0].error_code == 0
            routed(wire)
            wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": 2, "resource_name": "r", "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}], "validate_only": False})
            assert forgotten(), "a config change left routes"
            routed(wire)
            wire.request(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "r", "count": 2, "assignments": None}],
                                                        "timeout_ms": 5000, "validate_only": False})
            assert forgotten(), "new partitions left routes"
            routed(wire)
            wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["gone"], "timeout_ms": 5000})
            assert forgotten(), "a deleted topic left routes"


def test_real_clients_consume_through_the_native_fetch_path():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    with klog.Broker(config={"klog.fetch.native.enable": True, "klog.metrics.listener": "127.0.0.1:0"}) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        topic = f"clients-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(300):
            producer.produce(topic, value=b"m-%d" % i, partition=i % 2)
            producer.poll(0)
        assert producer.flush(30) == 0
        expected = sorted(b"m-%d" % i for i in range(300))
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        # a caught-up consumer keeps long-polling: those fetches are native too
        late: list[bytes] = []

        def produce_later() -> None:
            time.sleep(0.5)
            producer.produce(topic, value=b"late", partition=0)
            producer.flush(10)

        thread = threading.Thread(target=produce_later)
        thread.start()
        deadline = time.monotonic() + 15
        while not late and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                late.append(msg.value())
        thread.join()
        c.close()
        assert sorted(got) == expected and late == [b"late"]
        served = broker.stats()["native_fetch_requests"]
        assert served > 0
        consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                       consumer_timeout_ms=5_000, enable_auto_commit=False)
        seen = sorted(m.value for m in consumer)
        consumer.close()
        assert seen == sorted(expected + [b"late"])
        listener = broker._require().metrics_listener
        assert listener is not None
        host, port = listener.address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
            scraped = {line.split(" ")[0]: float(line.split(" ")[1]) for line in response.read().decode().splitlines()
                       if line and not line.startswith("#")}
        assert scraped["klog_fetch_native_requests_total"] == broker.stats()["native_fetch_requests"] >= served
        assert broker._require().metrics.topics[topic].bytes_out > 0


def test_with_an_authorizer_the_native_path_asks_the_hook_and_a_denied_topic_gets_the_python_paths_answer():
    """The native call asks AccessControl (Read on each topic, for the connection's principal and host) before
    reading: allowed topics are served natively, a request naming a denied one by the Python path
    (TOPIC_AUTHORIZATION_FAILED, the same bytes, the denial counted once). The denial is for one client host
    (127.0.0.2), so the partitions stay routed by the other host's fetches."""
    from klog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

    props = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "allow.everyone.if.no.acl.found": "true"}
    with klog.Broker(config={"klog.fetch.native.enable": True, **props}) as native, \
            klog.Broker(config={"klog.fetch.native.enable": False, **props}) as python:
        for broker in (native, python):
            with WireClient(broker.host, broker.port) as wire:
                response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                    {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                    for name in ("open", "closed")], "timeout_ms": 5000, "validate_only": False})
                assert [t.error_code for t in response.topics] == [errors.NONE] * 2
                for name in ("open", "closed"):
                    wire.send_raw(produce_frame(1, name, 0, batch(2, 1)))
                    wire.read_frame()
                answer = wire.request(ApiKey.CREATE_ACLS, 2, {"creations": [{
                    "resource_type": ResourceType.TOPIC, "resource_name": "closed",
                    "resource_pattern_type": PatternType.LITERAL, "principal": "User:ANONYMOUS", "host": host,
                    "operation": AclOperation.READ, "permission_type": permission}
                    for host, permission in (("*", AclPermissionType.ALLOW), ("127.0.0.2", AclPermissionType.DENY))]})
                assert [r.error_code for r in answer.results] == [errors.NONE] * 2
        both = Pair(native, python)
        other_host = Pair(native, python)
        for wire in other_host.wires:
            wire.close()
        other_host.wires = [WireClient(b.host, b.port, source_host="127.0.0.2") for b in both.brokers]
        try:
            frame = lambda topics: lambda cid, ids: fetch_frame(  # noqa: E731
                12, cid, ids, [(t, [(0, 0, 1 << 20, -1)]) for t in topics])
            deadline = time.monotonic() + 10
            while both.native_served() < 2 and time.monotonic() < deadline:   # routed (once the ACL is applied)
                both.same(frame(["open", "closed"]))
            before = both.native_served()
            assert before >= 2
            assert [p.error_code for p in partitions_of(other_host.same(frame(["open"])), 12)] == [errors.NONE]
            assert both.native_served() == before + 1
            answer = other_host.same(frame(["open", "closed"]))
            assert [p.error_code for p in partitions_of(answer, 12)] == [errors.NONE, errors.TOPIC_AUTHORIZATION_FAILED]
            assert both.native_served() == before + 1
            denied = [b._require().state.access.denied for b in both.brokers]
            assert denied[0] == denied[1] and sum(denied[0].values()) == 1
        finally:
            both.close()
            other_host.close()


@pytest.mark.java
def test_the_java_consumers_fetch_sessions_are_served_natively_and_it_reads_every_record_in_order():
    """Kafka's Java consumer (the console consumer) opens a fetch session and sends incremental fetches: they are
    served natively (the broker's counter of native session fetches) and the consumer reads every record, each
    partition in order (the answers' bytes against the Python path's: the session tests above)."""
    from klog.testing.kafka_tools import CONSOLE_CONSUMER, run_kafka_tool

    from groups_support import KAFKA_LIBS, kafka_classpath
    kafka_classpath()   # fail early and clearly without the jars
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    count = 80
    with klog.Broker(config={"klog.fetch.native.enable": True}) as broker:
        bootstrap = f"{broker.host}:{broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("java", 2, 1)])["java"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(count):   # a batch each: the small fetches below take many rounds
            producer.produce("java", value=b"j-%d" % i, partition=i % 2)
            producer.flush(10)
        del producer, admin   # no reconnection noise once the broker stops
        r = run_kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", "java",
                           "--from-beginning", "--max-messages", str(count), "--timeout-ms", "30000",
                           "--property", "print.partition=true",
                           "--consumer-property", "max.partition.fetch.bytes=64", libs=KAFKA_LIBS)
        assert r.returncode == 0, r.stderr[-3000:]
        stats = broker.stats()
    read = [line for line in r.stdout.splitlines() if line.startswith("Partition:")]
    for partition in (0, 1):
        assert [line for line in read if line.startswith(f"Partition:{partition}\t")] == \
            [f"Partition:{partition}\tj-{i}" for i in range(partition, count, 2)]
    assert stats["native_fetch_session_requests"] >= 10, stats


def test_a_consumers_last_fetched_epoch_of_the_leader_is_served_natively_and_another_left_to_python():
    """The Java consumer names the epoch of the records it read last (KIP-320): the leader's own epoch ends at the log
    end (nothing diverges: served natively); an epoch the log cannot end is the Python path's OFFSET_OUT_OF_RANGE
    (Kafka's Partition.readRecords; tests/test_produce_fetch_edges_vs_kafka.py runs the same on Kafka)."""
    with klog.Broker(config={"klog.fetch.native.enable": True}) as broker, \
            WireClient(broker.host, broker.port) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": "lfe", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 5000, "validate_only": False})
        assert created.topics[0].error_code == 0

        def fetch(last_fetched_epoch: int) -> tuple[int, int, int]:
            """(error, record bytes, requests the native path served)."""
            before = broker.stats()["native_fetch_requests"]
            answer = wire.request(ApiKey.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": "lfe", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
            [p] = answer.responses[0].partitions
            return p.error_code, len(p.records or b""), broker.stats()["native_fetch_requests"] - before

        for _ in range(100):   # the new partition's leader, then a Python-path fetch routes it
            produced = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                        "topic_data": [{"name": "lfe", "partition_data": [
                                                            {"index": 0, "records": batch(2, 0)}]}]})
            if produced.responses[0].partition_responses[0].error_code == 0:
                break
            time.sleep(0.05)
        fetch(-1)
        error, size, served = fetch(0)
        assert (error, served) == (errors.NONE, 1) and size > 0
        assert fetch(3) == (errors.OFFSET_OUT_OF_RANGE, 0, 0)

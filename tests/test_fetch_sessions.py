"""KIP-227 fetch sessions: the session cache's rules (pure), then the same wire-level exchanges against Apache Kafka
and klog: a full fetch opens a session, incremental fetches name only what changed and are answered only with the
partitions that have news, forgotten partitions leave the session, and stale epochs, unknown ids and a change of
topic naming are refused with Kafka's error codes."""

from __future__ import annotations

import random
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from replication_support import wait_same_logs

from klog.broker import errors
from klog.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchContext,
    FetchPartition,
    FetchSessionCache,
    next_epoch,
)
from klog.client.fetch_session import FetchSessionHandler
from klog.protocol import ApiKey
from klog.records import encode_batch
from klog.testing.cluster import KlogCluster
from klog.testing.kafka import free_port
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

ZERO_UUID = uuid.UUID(int=0)


# ---- the session cache, pure -------------------------------------------------------------------------------------

def _partitions(*indexes: int, offset: int = 0) -> list[tuple[tuple[str, int], FetchPartition]]:
    return [(("t", i), FetchPartition(i, offset, 1 << 20)) for i in indexes]


def _answer(hw: int, records: bytes = b"", error: int = 0) -> dict[str, Any]:
    return {"error_code": error, "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": 0,
            "preferred_read_replica": -1, "records": records}


def _open(cache: FetchSessionCache, parts: list[Any], now: int = 0, privileged: bool = False) -> int:
    context = FetchContext.new(cache, session_id=0, session_epoch=INITIAL_EPOCH, uses_topic_ids=False,
                               requested=parts, forgotten=[], now_ms=now)
    session_id, _ = context.answer(cache, [(k, _answer(0)) for k, _ in context.partitions], privileged=privileged,
                                   uses_topic_ids=False, now_ms=now)
    return session_id


def test_the_next_epoch_wraps_to_1_and_a_final_epoch_stays_final():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_an_incremental_answer_keeps_only_partitions_with_news_and_moves_those_with_records_last():
    cache = FetchSessionCache(10, rng=random.Random(1))
    sid = _open(cache, _partitions(0, 1, 2))
    context = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=False, requested=[],
                               forgotten=[], now_ms=1)
    assert [k for k, _ in context.partitions] == [("t", 0), ("t", 1), ("t", 2)]
    answers = [(("t", 0), _answer(5, b"x")), (("t", 1), _answer(0)), (("t", 2), _answer(0, error=6))]
    got_id, kept = context.answer(cache, answers, privileged=False, uses_topic_ids=False, now_ms=1)
    assert got_id == sid
    assert [k for k, _ in kept] == [("t", 0), ("t", 2)]
    # partition 0 answered records: read last next time; the error is answered again while it lasts
    context = FetchContext.new(cache, session_id=sid, session_epoch=2, uses_topic_ids=False,
                               requested=_partitions(0, offset=5), forgotten=[], now_ms=2)
    assert [k for k, _ in context.partitions] == [("t", 1), ("t", 2), ("t", 0)]
    assert context.partitions[2][1].fetch_offset == 5
    answers = [(("t", 1), _answer(0)), (("t", 2), _answer(0, error=6)), (("t", 0), _answer(5))]
    assert [k for k, _ in context.answer(cache, answers, privileged=False, uses_topic_ids=False, now_ms=2)[1]] \
        == [("t", 2)]
    # the error went away: answered once more, with its high watermark
    context = FetchContext.new(cache, session_id=sid, session_epoch=3, uses_topic_ids=False, requested=[],
                               forgotten=[], now_ms=3)
    answers = [(("t", 1), _answer(0)), (("t", 2), _answer(0)), (("t", 0), _answer(5))]
    assert [k for k, _ in context.answer(cache, answers, privileged=False, uses_topic_ids=False, now_ms=3)[1]] \
        == [("t", 2)]


def test_a_partition_named_with_a_new_leader_epoch_is_answered_again():
    cache = FetchSessionCache(10)
    sid = _open(cache, [(("t", 0), FetchPartition(0, 5, 1 << 20, current_leader_epoch=3))])
    same = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=False,
                            requested=[(("t", 0), FetchPartition(0, 5, 1 << 20, current_leader_epoch=3))],
                            forgotten=[], now_ms=1)
    assert same.answer(cache, [(("t", 0), _answer(0))], privileged=True, uses_topic_ids=False, now_ms=1)[1] == []
    newer = FetchContext.new(cache, session_id=sid, session_epoch=2, uses_topic_ids=False,
                             requested=[(("t", 0), FetchPartition(0, 5, 1 << 20, current_leader_epoch=4))],
                             forgotten=[], now_ms=2)
    kept = newer.answer(cache, [(("t", 0), _answer(0))], privileged=True, uses_topic_ids=False, now_ms=2)[1]
    assert [k for k, _ in kept] == [("t", 0)]


def test_session_errors_leave_the_session_as_it_was():
    cache = FetchSessionCache(10)
    sid = _open(cache, _partitions(0))
    stale = FetchContext.new(cache, session_id=sid, session_epoch=2, uses_topic_ids=False, requested=[],
                             forgotten=[], now_ms=1)
    assert stale.error == errors.INVALID_FETCH_SESSION_EPOCH
    unknown = FetchContext.new(cache, session_id=sid + 1, session_epoch=1, uses_topic_ids=False, requested=[],
                               forgotten=[], now_ms=1)
    assert unknown.error == errors.FETCH_SESSION_ID_NOT_FOUND
    by_id = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=True, requested=[],
                             forgotten=[], now_ms=1)
    assert by_id.error == errors.FETCH_SESSION_TOPIC_ID_ERROR
    ok = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=False, requested=[],
                          forgotten=[], now_ms=1)
    assert ok.error == errors.NONE and ok.session is not None


def test_a_session_left_empty_is_closed_and_a_final_epoch_closes_the_session_it_names():
    cache = FetchSessionCache(10)
    sid = _open(cache, _partitions(0, 1))
    emptied = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=False, requested=[],
                               forgotten=[("t", 0), ("t", 1)], now_ms=1)
    assert emptied.session is None and len(cache) == 0
    assert emptied.answer(cache, [], privileged=False, uses_topic_ids=False, now_ms=1) == (0, [])
    sid = _open(cache, _partitions(0))
    final = FetchContext.new(cache, session_id=sid, session_epoch=FINAL_EPOCH, uses_topic_ids=False,
                             requested=_partitions(0), forgotten=[], now_ms=1)
    assert len(cache) == 0
    assert final.answer(cache, [(("t", 0), _answer(0))], privileged=False, uses_topic_ids=False, now_ms=1)[0] == 0


def test_a_full_cache_evicts_only_as_kafka_does():
    cache = FetchSessionCache(2, eviction_ms=1000)
    client = _open(cache, _partitions(0, 1, 2), now=0)
    replica = _open(cache, _partitions(0), now=0, privileged=True)
    assert client and replica and len(cache) == 2
    # a newcomer client cannot take a young session's slot: it is answered without a session
    assert _open(cache, _partitions(0), now=10) == 0
    # a replica takes a client's slot at once
    replica2 = _open(cache, _partitions(0), now=20, privileged=True)
    assert replica2 and cache.get(client) is None and cache.get(replica) is not None
    # a replica does not evict a young replica session
    assert _open(cache, _partitions(0, 1), now=30, privileged=True) == 0
    # a session unused for longer than the eviction time gives its slot to anyone
    FetchContext.new(cache, session_id=replica2, session_epoch=1, uses_topic_ids=False, requested=[],
                     forgotten=[], now_ms=1500)
    newcomer = _open(cache, _partitions(0), now=1600)
    assert newcomer and cache.get(replica) is None and cache.get(replica2) is not None
    assert len(cache) == 2 and cache.evictions == 2


def test_a_session_never_holds_more_partitions_than_its_bound():
    cache = FetchSessionCache(10, max_partitions=2)
    assert _open(cache, _partitions(0, 1, 2)) == 0 and len(cache) == 0
    sid = _open(cache, _partitions(0, 1))
    grown = FetchContext.new(cache, session_id=sid, session_epoch=1, uses_topic_ids=False,
                             requested=_partitions(2), forgotten=[], now_ms=1)
    assert grown.session is None and cache.get(sid) is None
    assert grown.answer(cache, [(("t", 2), _answer(0))], privileged=False, uses_topic_ids=False, now_ms=1)[0] == 0


def test_all_sessions_together_never_hold_more_partitions_than_the_cache_bound():
    cache = FetchSessionCache(10, max_cached_partitions=5, eviction_ms=1000)
    first = _open(cache, _partitions(0, 1, 2), now=0)
    assert first and cache.partitions_cached() == 3
    # a client's newcomer that does not fit evicts nothing young: it is answered without a session
    assert _open(cache, _partitions(0, 1, 2), now=10) == 0
    assert cache.get(first) is not None and cache.partitions_cached() == 3 and cache.evictions == 0
    second = _open(cache, _partitions(0, 1), now=10)
    assert second and cache.partitions_cached() == 5
    # an incremental fetch growing a session past the cache's bound ends it; the count follows
    grown = FetchContext.new(cache, session_id=second, session_epoch=1, uses_topic_ids=False,
                             requested=_partitions(7), forgotten=[], now_ms=20)
    assert grown.session is None and cache.get(second) is None and cache.partitions_cached() == 3
    # forgetting partitions makes room
    FetchContext.new(cache, session_id=first, session_epoch=1, uses_topic_ids=False, requested=[],
                     forgotten=[("t", 2)], now_ms=30)
    assert cache.partitions_cached() == 2
    third = _open(cache, _partitions(0, 1, 2), now=30)
    assert third and cache.partitions_cached() == 5
    # a replica's newcomer evicts clients' sessions until it fits, cheapest first, and only as many as it needs
    replica = _open(cache, _partitions(0, 1, 2), now=40, privileged=True)
    assert replica and cache.get(first) is None and cache.get(third) is None and cache.evictions == 2
    assert cache.partitions_cached() == 3
    # a session larger than the whole bound is never made
    assert _open(cache, _partitions(*range(6)), now=50, privileged=True) == 0
    assert cache.get(replica) is not None and cache.partitions_cached() == 3


def test_a_newcomer_that_cannot_fit_even_after_evicting_all_it_may_evicts_none():
    cache = FetchSessionCache(10, max_cached_partitions=4, eviction_ms=1000)
    client = _open(cache, _partitions(0), now=0)
    replica = _open(cache, _partitions(0, 1, 2), now=0, privileged=True)
    # evicting the client frees 1 partition, not enough for a 2-partition replica newcomer (the young replica's
    # session may not be evicted): nothing is evicted
    assert _open(cache, _partitions(0, 1), now=10, privileged=True) == 0
    assert cache.get(client) is not None and cache.get(replica) is not None and cache.evictions == 0


def test_no_slots_means_no_sessions():
    cache = FetchSessionCache(0)
    assert _open(cache, _partitions(0)) == 0 and len(cache) == 0


# ---- the fetcher's side, pure ----------------------------------------------------------------------------------

def test_the_fetcher_names_only_partitions_whose_parameters_changed_and_forgets_those_it_no_longer_wants():
    handler = FetchSessionHandler()
    first = handler.build({"a": 0, "b": 0, "c": 0})
    assert (first.session_id, first.session_epoch, first.to_send, first.to_forget) == (0, 0, ["a", "b", "c"], [])
    assert handler.on_response(first, 0, 77)
    second = handler.build({"a": 5, "b": 0})
    assert (second.session_id, second.session_epoch, second.to_send, second.to_forget) == (77, 1, ["a"], ["c"])
    assert handler.on_response(second, 0, 77)
    third = handler.build({"a": 5, "b": 0, "c": 3})
    assert (third.session_epoch, third.to_send, third.to_forget) == (2, ["c"], [])


def test_the_fetcher_falls_back_to_a_full_fetch_after_any_failure():
    handler = FetchSessionHandler()
    assert handler.on_response(handler.build({"a": 0}), 0, 77)
    # a stale epoch: the next request is full and names the old session (epoch 0 closes it)
    assert not handler.on_response(handler.build({"a": 1}), errors.INVALID_FETCH_SESSION_EPOCH, 0)
    full = handler.build({"a": 1})
    assert (full.session_id, full.session_epoch, full.to_send) == (77, 0, ["a"])
    assert handler.on_response(full, 0, 78)
    # an unknown session: the next full request names none
    assert not handler.on_response(handler.build({"a": 2}), errors.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert handler.build({"a": 2}).session_id == 0
    # no answer at all
    handler.on_failure()
    assert handler.build({"a": 2}).session_epoch == 0
    # a broker that keeps no session: full fetches go on
    keeps_none = FetchSessionHandler()
    assert keeps_none.on_response(keeps_none.build({"a": 0}), 0, 0)
    assert keeps_none.build({"a": 1}).session_epoch == 0
    # an incremental fetch answered without the session (it ended): start again in full
    ended = FetchSessionHandler()
    assert ended.on_response(ended.build({"a": 0}), 0, 5)
    assert ended.on_response(ended.build({"a": 1}), 0, 0)
    assert (ended.build({"a": 1}).session_id, ended.build({"a": 1}).session_epoch) == (0, 0)


# ---- on the wire, against Apache Kafka and klog -------------------------------------------------------------------

def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _create_topic(wire: WireClient, partitions: int) -> tuple[str, str]:
    """(name, topic id) of a new topic whose partitions all have a leader."""
    topic = f"sessions-{uuid.uuid4().hex[:8]}"
    created = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert created.topics[0].error_code == errors.NONE
    deadline = time.monotonic() + 30
    while True:
        meta = wire.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": ZERO_UUID, "name": topic}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        t = meta.topics[0]
        if t.error_code == errors.NONE and len(t.partitions) == partitions and \
                all(p.leader_id >= 0 for p in t.partitions):
            break
        assert time.monotonic() < deadline, f"topic {topic} has no leaders: {t}"
        time.sleep(0.1)
    # Apache Kafka's broker publishes a new leader to its metadata cache before its replica manager takes the
    # leadership: fetches answer NOT_LEADER_OR_FOLLOWER for a moment after Metadata names a leader (CI saw it)
    everyone = [(p, 0) for p in range(partitions)]
    while True:
        probe = _fetch(wire, 12, session_id=0, epoch=FINAL_EPOCH, topic=topic, topic_id=t.topic_id,
                       partitions=everyone)
        not_ready = {p: code for p, (code, _, _) in _answered(probe).items() if code != errors.NONE}
        if probe.error_code == errors.NONE and not not_ready:
            return topic, t.topic_id
        assert time.monotonic() < deadline and set(not_ready.values()) <= {
            errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_TOPIC_OR_PARTITION}, (probe.error_code, not_ready)
        time.sleep(0.1)


def _produce(wire: WireClient, topic: str, partition: int, values: list[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        answer = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": encode_batch([{"value": v} for v in values])}]}]})
        code = answer.responses[0].partition_responses[0].error_code
        if code == errors.NONE:
            return
        assert code in (errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_TOPIC_OR_PARTITION) \
            and time.monotonic() < deadline, code
        time.sleep(0.1)


def _fetch(wire: WireClient, version: int, *, session_id: int, epoch: int, topic: str, topic_id: str,
           partitions: list[tuple[int, int]] = (), forgotten: list[int] = (), max_wait_ms: int = 0) -> Any:
    """A consumer's Fetch naming ``partitions`` as (partition, fetch offset) and ``forgotten``."""
    topics = [{"topic": topic, "topic_id": topic_id, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, offset in partitions]}] if partitions else []
    forgotten_topics = [{"topic": topic, "topic_id": topic_id, "partitions": list(forgotten)}] if forgotten else []
    return wire.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "topics": topics,
        "forgotten_topics_data": forgotten_topics, "rack_id": ""})


def _answered(response: Any) -> dict[int, tuple[int, int, bool]]:
    """partition -> (error, high watermark, has records)."""
    return {p.partition_index: (p.error_code, p.high_watermark, bool(p.records))
            for t in response.responses for p in t.partitions}


@pytest.fixture
def wire(bootstrap: str) -> Any:
    with WireClient(*_host_port(bootstrap)) as client:
        yield client


@pytest.mark.parametrize("version", [12, 16])
def test_incremental_fetches_answer_only_the_partitions_that_changed(wire, version):
    topic, topic_id = _create_topic(wire, 2)
    _produce(wire, topic, 0, [b"a", b"b"])
    opened = _fetch(wire, version, session_id=0, epoch=INITIAL_EPOCH, topic=topic, topic_id=topic_id,
                    partitions=[(0, 0), (1, 0)])
    assert opened.error_code == errors.NONE
    sid = opened.session_id
    assert sid > 0
    assert _answered(opened) == {0: (0, 2, True), 1: (0, 0, False)}
    # partition 0 read up to 2: it is named with its new offset, and neither partition has news
    quiet = _fetch(wire, version, session_id=sid, epoch=1, topic=topic, topic_id=topic_id, partitions=[(0, 2)])
    assert (quiet.error_code, quiet.session_id, _answered(quiet)) == (errors.NONE, sid, {})
    # a record in partition 1, which the fetch does not name: the session remembers it from offset 0
    _produce(wire, topic, 1, [b"c"])
    news = _fetch(wire, version, session_id=sid, epoch=2, topic=topic, topic_id=topic_id)
    assert (news.error_code, news.session_id) == (errors.NONE, sid)
    assert _answered(news) == {1: (0, 1, True)}
    # a fetch waiting for data is woken by a record in a partition the session holds and the fetch does not name
    later = threading.Timer(0.5, _produce_on_new_connection, (wire, topic, 0, [b"d"]))
    later.start()
    try:
        woken = _fetch(wire, version, session_id=sid, epoch=3, topic=topic, topic_id=topic_id,
                       partitions=[(1, 1)], max_wait_ms=10000)
    finally:
        later.join()
    assert (woken.error_code, woken.session_id) == (errors.NONE, sid)
    assert _answered(woken) == {0: (0, 3, True)}
    # a forgotten partition leaves the session: its new record is not answered
    _produce(wire, topic, 1, [b"e"])
    forgot = _fetch(wire, version, session_id=sid, epoch=4, topic=topic, topic_id=topic_id, partitions=[(0, 3)],
                    forgotten=[1])
    assert (forgot.error_code, forgot.session_id, _answered(forgot)) == (errors.NONE, sid, {})


def _produce_on_new_connection(wire: WireClient, topic: str, partition: int, values: list[bytes]) -> None:
    with WireClient(*wire.sock.getpeername()[:2]) as other:
        _produce(other, topic, partition, values)


def test_session_errors_are_kafkas(wire):
    topic, topic_id = _create_topic(wire, 1)
    sid = _fetch(wire, 12, session_id=0, epoch=INITIAL_EPOCH, topic=topic, topic_id=topic_id,
                 partitions=[(0, 0)]).session_id
    assert sid > 0
    stale = _fetch(wire, 12, session_id=sid, epoch=2, topic=topic, topic_id=topic_id)
    assert (stale.error_code, stale.session_id, stale.responses) == (errors.INVALID_FETCH_SESSION_EPOCH, 0, [])
    other = sid % (2**31 - 2) + 1
    unknown = _fetch(wire, 12, session_id=other, epoch=1, topic=topic, topic_id=topic_id)
    assert (unknown.error_code, unknown.session_id) == (errors.FETCH_SESSION_ID_NOT_FOUND, 0)
    # a v13+ fetch names topics by id: it cannot continue a session opened by name
    by_id = _fetch(wire, 13, session_id=sid, epoch=1, topic=topic, topic_id=topic_id)
    assert (by_id.error_code, by_id.session_id) == (errors.FETCH_SESSION_TOPIC_ID_ERROR, 0)
    # the errors left the session as it was: epoch 1 continues it
    ok = _fetch(wire, 12, session_id=sid, epoch=1, topic=topic, topic_id=topic_id)
    assert (ok.error_code, ok.session_id) == (errors.NONE, sid)
    # a sessionless full fetch naming the session closes it
    closed = _fetch(wire, 12, session_id=sid, epoch=FINAL_EPOCH, topic=topic, topic_id=topic_id,
                    partitions=[(0, 0)])
    assert (closed.error_code, closed.session_id, _answered(closed)) == (errors.NONE, 0, {0: (0, 0, False)})
    gone = _fetch(wire, 12, session_id=sid, epoch=2, topic=topic, topic_id=topic_id)
    assert gone.error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_whose_partitions_are_all_forgotten_is_closed(wire):
    topic, topic_id = _create_topic(wire, 1)
    sid = _fetch(wire, 12, session_id=0, epoch=INITIAL_EPOCH, topic=topic, topic_id=topic_id,
                 partitions=[(0, 0)]).session_id
    emptied = _fetch(wire, 12, session_id=sid, epoch=1, topic=topic, topic_id=topic_id, forgotten=[0])
    assert (emptied.error_code, emptied.session_id, emptied.responses) == (errors.NONE, 0, [])
    gone = _fetch(wire, 12, session_id=sid, epoch=2, topic=topic, topic_id=topic_id)
    assert gone.error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_the_klog_consumer_reads_through_one_fetch_session(tmp_path: Path):
    """klog's consumer keeps a session with the broker: one, holding the partitions it reads, while it consumes
    every record once and in order."""
    import klog

    port = free_port()
    with BrokerProcess(tmp_path / "data", {"klog.metrics.listener": f"127.0.0.1:{port}"}) as proc, \
            WireClient(proc.host, proc.port) as wire:
        topic, _ = _create_topic(wire, 3)
        sent = {p: [f"{p}-{i}".encode() for i in range(50)] for p in range(3)}
        for p, values in sent.items():
            for start in range(0, 50, 10):
                _produce(wire, topic, p, values[start:start + 10])
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        with klog.Consumer(bootstrap_servers=proc.bootstrap_servers, auto_offset_reset="earliest",
                           fetch_max_bytes=2000) as consumer:
            consumer.assign([(topic, p) for p in range(3)])
            deadline = time.monotonic() + 60
            while sum(len(v) for v in got.values()) < 150:
                assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
                for record in consumer.poll(timeout=1.0):
                    got[record.partition].append(record.value)
            assert _session_metrics(port)["numincrementalfetchsessions"] == 1
        assert got == sent


# ---- replicas on a 3-node klog cluster ---------------------------------------------------------------------------

def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def _session_metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = "kafka_server_fetchsessioncache_"
    return {line.split()[0][len(prefix):]: float(line.split()[1]) for line in text.splitlines()
            if line.startswith(prefix)}


@pytest.mark.long
def test_replicas_follow_their_leaders_through_incremental_fetch_sessions(tmp_path: Path):
    """Each follower's fetcher keeps one session on each leader it follows, holding exactly the partitions it
    follows there; records produced with acks=all then reach every replica through incremental fetches."""
    nodes = (1, 2, 3)
    metrics_ports = {n: free_port() for n in nodes}
    with KlogCluster(tmp_path, 3, node_properties={
            n: {"klog.metrics.listener": f"127.0.0.1:{port}"} for n, port in metrics_ports.items()}) as cluster:
        cluster.wait_for_brokers()
        assert tuple(cluster.node_ids) == nodes
        # the same scrape says which node is the active controller (ActiveControllerCount): exactly one, the leader
        active = cluster.wait_for_controller()
        reported = {n: _metric(metrics_ports[n], "kafka_controller_kafkacontroller_activecontrollercount")
                    for n in nodes}
        assert reported == {n: 1.0 if n == active else 0.0 for n in nodes}
        topic = f"sessions-{uuid.uuid4().hex[:8]}"
        code, message = cluster.create_topic(topic, 6, 3)
        assert code == 0, message
        leaders = cluster.wait_for_topic(topic, 6)
        for p in range(6):
            cluster.wait_for_isr(topic, p, nodes)
        led = {n: sum(1 for leader in leaders.values() if leader == n) for n in nodes}
        # the only replicated topic: a leader of k partitions holds a session from each of its 2 followers, with
        # k partitions each
        wanted = {n: {"numincrementalfetchsessions": 2.0 if led[n] else 0.0,
                      "numincrementalfetchpartitionscached": 2.0 * led[n]} for n in nodes}
        deadline = time.monotonic() + 60
        while True:
            seen = {n: _session_metrics(metrics_ports[n]) for n in nodes}
            if all({k: seen[n][k] for k in wanted[n]} == wanted[n] for n in nodes):
                break
            assert time.monotonic() < deadline, (seen, wanted)
            time.sleep(0.5)
        acked = cluster.produce(topic, range(6), 20)
        assert len(acked) == 120
        for p in range(6):
            cluster.wait_for_isr(topic, p, nodes)
        wait_same_logs(cluster, topic, 6, list(nodes))
        assert all(_session_metrics(metrics_ports[n])["incrementalfetchsessionevictions_total"] == 0 for n in nodes)

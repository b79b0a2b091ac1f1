"""Replicas' fetches on the native Fetch path (klog/broker/native_fetch.py, issue 38) answer exactly as the Python
path does.

One 3-node cluster: node 1 has the native Fetch path on, node 2 has it off (``klog.fetch.native.enable``). Node 1
leads the "a" topics, node 2 the "b" ones, each with node 3 as its follower; both leaders hold the same records
(the same Produce frames). Node 3 is then stopped and the tests fetch as replica 3 with forged Fetch frames, the
same frame (each with its leader's topic and topic id) to both leaders: the answers must be the same bytes once
the topic names and ids are replaced by one placeholder (and a fetch session's random id masked). The leaders'
metrics show what the native path served: the common case on node 1, never the uncommon ones, nothing on node 2.
The "strict" topics have ``min.insync.replicas`` 2: with node 3 gone their high watermark stays (KIP-966), so a
replica's fetch reads past it, to the log end. The last test starts node 3 again: its fetches park natively on
node 1 and an acks=all produce there is answered as soon as the append wakes them.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.broker import errors
from klog.protocol import ApiKey, decode_response, encode_request
from klog.records import encode_batch

pytestmark = pytest.mark.timeout(240)

FETCH_VERSIONS = range(4, 19)
#: leader node -> its topics (the same names' length, so the placeholder fits both)
LEADS = {1: ("ta", "sa"), 2: ("tb", "sb")}
PARTITIONS = 2
FOLLOWER = 3
NOW = int(time.time() * 1000)
RECORDS, BATCHES = 5, 4
LOG_END = RECORDS * BATCHES
#: records appended to the strict topics after node 3 stopped: above their high watermark
ABOVE_HW = 2 * RECORDS
#: a follower's wait for data (replica.fetch.wait.max.ms): long, so only a wake-up answers it soon
FOLLOWER_WAIT_MS = 20_000


def batch(count: int, seed: int) -> bytes:
    return encode_batch([{"key": b"k%d" % i, "value": b"v%d-" % seed * 20, "timestamp": NOW + i}
                         for i in range(count)])


def produce_frame(cid: int, topic: str, partition: int, records: bytes, acks: int) -> bytes:
    return encode_request(ApiKey.PRODUCE, 9, cid, "replica-test", {
        "transactional_id": None, "acks": acks, "timeout_ms": 15000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})


#: (topic kind "t" or "s", [(partition, fetch offset, partition max bytes, current leader epoch, last fetched
#: epoch)])
Wanted = list[tuple[str, list[tuple[int, int, int, int, int]]]]


def replica_fetch(version: int, cid: int, topics: dict[str, tuple[str, uuid.UUID]], wanted: Wanted, *,
                  replica_id: int = FOLLOWER, max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
                  session_id: int = 0, session_epoch: int = -1) -> bytes:
    """A replica's Fetch of ``wanted`` (topics by kind: ``topics`` maps a kind to its leader's (name, id))."""
    by_id = version >= 13
    body: dict[str, Any] = {
        "replica_id": replica_id if version < 15 else -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": topics[kind][0], "topic_id": topics[kind][1] if by_id else None,
                    "partitions": [{"partition": p, "current_leader_epoch": epoch, "fetch_offset": offset,
                                    "last_fetched_epoch": last, "log_start_offset": 0, "partition_max_bytes": pmax}
                                   for p, offset, pmax, epoch, last in parts]} for kind, parts in wanted],
        "forgotten_topics_data": [], "rack_id": ""}
    if version >= 15:
        body["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
    return encode_request(ApiKey.FETCH, version, cid, "replica-test", body)


class Leaders:
    """The two leaders (node 1 native, node 2 Python), fetched from in step."""

    def __init__(self, cluster: Any, metrics_ports: dict[int, int]) -> None:
        self.cluster = cluster
        self.metrics_ports = metrics_ports
        self.wires = {node: cluster.wire(node, timeout=60) for node in LEADS}
        self.cid = 0
        self.topics: dict[int, dict[str, tuple[str, uuid.UUID]]] = {}
        for node, names in LEADS.items():
            ids = {t.name: t.topic_id for t in cluster.metadata(node, names).topics}
            self.topics[node] = {name[0]: (name, ids[name]) for name in names}

    def normalized(self, answer: bytes, node: int, session: int | None) -> bytes:
        for name, topic_id in self.topics[node].values():
            answer = answer.replace(topic_id.bytes, b"#" * 16).replace(name.encode(), b"t?")
        if session is not None:   # correlation id (4), header tags (v12+), throttle (4), error (2), session id
            at = 4 + (session >= 12) + 4 + 2
            answer = answer[:at] + b"SSSS" + answer[at + 4:]
        return answer

    def send(self, frame_of: Any, sessions: dict[int, int] | None = None) -> dict[int, bytes]:
        self.cid += 1
        for node, wire in self.wires.items():
            wire.send_raw(frame_of(self.cid, self.topics[node], (sessions or {}).get(node, 0)))
        return {node: wire.read_frame() for node, wire in self.wires.items()}

    def same(self, version: int, wanted: Wanted, *, session: bool = False, sessions: dict[int, int] | None = None,
             **options: Any) -> bytes:
        """The forged fetch on both leaders: the same bytes (placeholders in); node 1's answer."""
        answers = self.send(lambda cid, topics, sid: replica_fetch(
            version, cid, topics, wanted, **({"session_id": sid} if sessions else {}), **options), sessions)
        native, python = (self.normalized(answers[n], n, version if session or sessions else None) for n in LEADS)
        assert native == python
        return answers[1]

    def produce(self, kind: str, partition: int, records: bytes, acks: int) -> None:
        self.cid += 1
        for node, wire in self.wires.items():
            wire.send_raw(produce_frame(self.cid, self.topics[node][kind][0], partition, records, acks))
        for wire in self.wires.values():
            _, answer = decode_response(ApiKey.PRODUCE, 9, wire.read_frame())
            assert [p.error_code for t in answer.responses for p in t.partition_responses] == [errors.NONE]

    def metric(self, node: int, name: str) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[node]}/metrics", timeout=10) as response:
            lines = response.read().decode().splitlines()
        return next((int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(name + " ")), 0)

    def native_served(self) -> int:
        assert self.metric(2, "klog_fetch_native_requests_total") == 0, "node 2 served a fetch natively"
        return self.metric(1, "klog_fetch_native_requests_total")

    def close(self) -> None:
        for wire in self.wires.values():
            wire.close()


@pytest.fixture(scope="module")
def leaders(tmp_path_factory) -> Iterator[Leaders]:
    from klog.testing.cluster import KlogCluster
    from klog.testing.kafka import free_port

    ports = {node: free_port() for node in (1, 2, 3)}
    node_properties: dict[int, dict[str, Any]] = {
        n: {"klog.metrics.listener": f"127.0.0.1:{p}"} for n, p in ports.items()}
    node_properties[2]["klog.fetch.native.enable"] = False
    cluster = KlogCluster(tmp_path_factory.mktemp("native-replicas"), 3,
                          properties={"replica.fetch.wait.max.ms": FOLLOWER_WAIT_MS},
                          node_properties=node_properties)
    cluster.start()
    try:
        cluster.wait_for_brokers()
        with cluster.wire(1, timeout=45) as wire:
            response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": name, "num_partitions": -1, "replication_factor": -1,
                 "assignments": [{"partition_index": i, "broker_ids": [node, FOLLOWER]} for i in range(PARTITIONS)],
                 "configs": [{"name": "min.insync.replicas", "value": "2" if name[0] == "s" else "1"}]}
                for node, names in LEADS.items() for name in names], "timeout_ms": 30000, "validate_only": False})
            assert [t.error_code for t in response.topics] == [0] * 4
        for node, names in LEADS.items():
            for name in names:
                assert cluster.wait_for_topic(name, PARTITIONS) == {i: node for i in range(PARTITIONS)}
                for i in range(PARTITIONS):
                    cluster.wait_for_isr(name, i, [node, FOLLOWER])
        both = Leaders(cluster, ports)
        for kind in "ts":
            for i in range(PARTITIONS):
                for b in range(BATCHES):
                    both.produce(kind, i, batch(RECORDS, b), acks=-1)
        cluster.stop_node(FOLLOWER)
        for node, names in LEADS.items():
            for i in range(PARTITIONS):
                cluster.wait_for_isr(names[0], i, [node], timeout=30)
        for i in range(PARTITIONS):   # above the strict topics' high watermark (under min.insync.replicas)
            for b in range(ABOVE_HW // RECORDS):
                both.produce("s", i, batch(RECORDS, BATCHES + b), acks=1)
        # the Python path's first replica fetch of a partition routes it
        for kind in "ts":
            for i in range(PARTITIONS):
                both.same(12, [(kind, [(i, LOG_END, 100, 0, 0)])])
        yield both
        both.close()
    finally:
        cluster.close()


def partitions_of(answer: bytes, version: int) -> list[Any]:
    _, response = decode_response(ApiKey.FETCH, version, answer)
    return [p for t in response.responses for p in t.partitions]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_every_version_answers_a_replicas_fetch_with_the_python_paths_bytes(leaders, version):
    """From the log start, past the byte limits, and (the strict topic) past the high watermark to the log end."""
    last = 0 if version >= 12 else -1
    before = leaders.native_served()
    answer = leaders.same(version, [("t", [(0, 0, 1 << 20, 0, last), (1, RECORDS, 100, 0, last)]),
                                    ("s", [(0, LOG_END, 1 << 20, 0, last), (1, 0, 1 << 20, 0, last)])],
                          max_bytes=3000)
    ta0, ta1, sa0, sa1 = partitions_of(answer, version)
    assert [p.error_code for p in (ta0, ta1, sa0, sa1)] == [0] * 4
    assert (ta0.high_watermark, ta1.high_watermark) == (LOG_END, LOG_END) and ta0.records
    assert not ta1.records   # no whole batch within its 100 bytes once another partition returned records
    assert sa0.high_watermark == LOG_END and sa0.records   # records above the high watermark: a replica reads them
    assert leaders.native_served() == before + 1


def errors_of(leaders: Leaders, version: int, wanted: Wanted, **options: Any) -> list[int]:
    before = leaders.native_served()
    answer = leaders.same(version, wanted, **options)
    assert leaders.native_served() == before, "the native path served a fetch the Python path must answer"
    _, response = decode_response(ApiKey.FETCH, version, answer)
    return [p.error_code for t in response.responses for p in t.partitions]


@pytest.mark.parametrize("version", [4, 9, 12, 13, 15, 16])
def test_every_uncommon_replica_fetch_takes_the_python_path_with_its_answer(leaders, version):
    """Each is answered by the Python path (the native path judged it and left it, or refused it before judging),
    the same bytes on both leaders. (The leaders are in epoch 0: no older epoch to be fenced by.)"""
    ok = (0, 0, 100, 0, -1)
    cases: dict[str, tuple[Wanted, dict[str, Any], list[int]]] = {
        "a replica the partition does not have": ([("t", [ok])], {"replica_id": 9}, [errors.NOT_LEADER_OR_FOLLOWER]),
        "offset past the log end": ([("t", [ok, (1, LOG_END + 5, 100, 0, -1)])], {},
                                    [0, errors.OFFSET_OUT_OF_RANGE]),
        "unknown partition": ([("t", [ok, (7, 0, 100, 0, -1)])], {}, [0, errors.UNKNOWN_TOPIC_OR_PARTITION]),
    }
    if version >= 9:
        cases["newer leader epoch"] = ([("t", [(0, 0, 100, 3, -1)])], {}, [errors.UNKNOWN_LEADER_EPOCH])
    if version >= 12:   # past the end of the last fetched epoch (0): truncate to it
        cases["diverging epoch"] = ([("t", [(0, LOG_END + 5, 100, 0, 0)])], {}, [errors.NONE])
        cases["last fetched epoch unknown to the leader"] = ([("t", [(0, LOG_END, 100, 0, 2)])], {},
                                                             [errors.OFFSET_OUT_OF_RANGE])
    for name, (wanted, options, expected) in cases.items():
        assert errors_of(leaders, version, wanted, **options) == expected, name
    if version >= 12:
        [p] = partitions_of(leaders.same(version, [("t", [(0, LOG_END + 5, 100, 0, 0)])]), version)
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, LOG_END)


class ReplicaSession:
    """A fetch session replica 3 opens on each leader (their ids differ: random), fetched in step."""

    def __init__(self, leaders: Leaders, version: int, wanted: Wanted) -> None:
        self.leaders, self.version = leaders, version
        answers = leaders.send(lambda cid, topics, sid: replica_fetch(version, cid, topics, wanted, session_epoch=0))
        self.ids = {node: decode_response(ApiKey.FETCH, version, a)[1].session_id for node, a in answers.items()}
        assert all(self.ids.values()), "no session opened"
        assert len({leaders.normalized(a, n, version) for n, a in answers.items()}) == 1

    def fetch(self, epoch: int, wanted: Wanted, **options: Any) -> bytes:
        return self.leaders.same(self.version, wanted, sessions=self.ids, session_epoch=epoch, **options)

    def native_sessions(self) -> int:
        assert self.leaders.metric(2, "klog_fetch_native_session_requests_total") == 0
        return self.leaders.metric(1, "klog_fetch_native_session_requests_total")


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_a_replicas_session_is_served_natively_with_the_python_paths_bytes(leaders, version):
    """The replica's session (opened on the Python path) is handed to the native path: its incremental fetches
    (nothing changed; a new offset) are served there, each answer holding only the partitions with news; a caught-up
    long poll parks natively and answers at its deadline; a fetch that is not the common case (a wrong epoch) gets
    the Python path's answer from the state the native path left."""
    session = ReplicaSession(leaders, version, [("t", [(0, 0, 100, 0, -1), (1, LOG_END, 100, 0, -1)])])
    before, sessions_before = leaders.native_served(), session.native_sessions()
    assert [p.partition_index for p in partitions_of(session.fetch(1, []), version)] == [0]   # records again
    assert partitions_of(session.fetch(2, [("t", [(0, LOG_END, 100, 0, -1)])]), version) == []
    started = time.monotonic()
    assert partitions_of(session.fetch(3, [], max_wait_ms=300), version) == []
    assert time.monotonic() - started >= 0.3
    assert leaders.native_served() == before + 3
    _, wrong = decode_response(ApiKey.FETCH, version, session.fetch(9, []))
    assert wrong.error_code == errors.INVALID_FETCH_SESSION_EPOCH
    # (the wait table's answers are counted when the connection serves its next request)
    assert leaders.native_served() == before + 3 and session.native_sessions() == sessions_before + 3
    session.fetch(-1, [])   # closed (the Python path's)


def test_a_replicas_long_poll_parks_natively_and_an_append_wakes_it_with_the_python_paths_bytes(leaders):
    """A caught-up replica's fetch waits for an append (not the high watermark): a produce to both leaders answers
    it at once with the new records (on the strict topic, whose high watermark stays: the answers are the same
    bytes whenever the wake-up reads)."""
    woken = leaders.metric(1, 'klog_fetch_native_waits_total{outcome="woken"}')
    before = leaders.native_served()
    end = LOG_END + ABOVE_HW
    leaders.cid += 1
    cid = leaders.cid
    for node, wire in leaders.wires.items():
        wire.send_raw(replica_fetch(12, cid, leaders.topics[node], [("s", [(1, end, 1 << 20, 0, 0)])],
                                    max_wait_ms=20_000))
    time.sleep(0.3)
    assert leaders.metric(1, "klog_fetch_native_parked") == 1
    started = time.monotonic()
    produce_wires = {node: leaders.cluster.wire(node) for node in LEADS}
    try:
        for node, wire in produce_wires.items():
            wire.send_raw(produce_frame(1, leaders.topics[node]["s"][0], 1, batch(3, 5), acks=1))
            wire.read_frame()
        answers = {node: wire.read_frame() for node, wire in leaders.wires.items()}
    finally:
        for wire in produce_wires.values():
            wire.close()
    assert time.monotonic() - started < 5
    native, python = (leaders.normalized(answers[n], n, None) for n in LEADS)
    assert native == python
    [p] = partitions_of(answers[1], 12)
    assert p.records and p.high_watermark == LOG_END
    assert leaders.native_served() == before + 1
    assert leaders.metric(1, 'klog_fetch_native_waits_total{outcome="woken"}') == woken + 1


def test_a_followers_parked_fetch_is_woken_by_a_produce_and_acks_all_completes_at_once(leaders):
    """Node 3 back: its fetches of node 1's partitions are served and parked natively there (its fetch wait, 20 s,
    would otherwise hold every acks=all produce that long); an acks=all produce is answered as soon as the append
    wakes the parked fetch, the follower appends and fetches again, which moves the high watermark."""
    cluster = leaders.cluster
    cluster.restart(FOLLOWER)
    for node, names in LEADS.items():
        for name in names:
            for i in range(PARTITIONS):
                cluster.wait_for_isr(name, i, [node, FOLLOWER], timeout=60)

    def produce(wire: Any, n: int) -> float:
        started = time.monotonic()
        answer = wire.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 15000,
            "topic_data": [{"name": "ta", "partition_data": [{"index": 0, "records": batch(2, n)}]}]})
        assert [p.error_code for t in answer.responses for p in t.partition_responses] == [errors.NONE]
        return time.monotonic() - started

    with cluster.wire(1, timeout=30) as wire:
        produce(wire, 0)   # the follower's session and routes, as the ISR change reset them, are native again
        time.sleep(0.5)    # its fetch parks
        before = leaders.native_served()
        woken = leaders.metric(1, 'klog_fetch_native_waits_total{outcome="woken"}')
        took = [produce(wire, n) for n in range(1, 4)]
    assert max(took) < 5, f"the follower's fetch was not woken by the append: {took}"
    assert leaders.native_served() >= before + 3
    # each append woke a parked fetch; one may have been waiting in Python instead (a metadata change publishing the
    # follower's return sends the native table's waits back to the Python path, which an append wakes as well)
    assert leaders.metric(1, 'klog_fetch_native_waits_total{outcome="woken"}') >= woken + 2

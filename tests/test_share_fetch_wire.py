"""ShareFetch on the wire against a real klog broker: the records a ShareFetch answers are the log's record batches
byte for byte (sent as file regions of the segment files, as Fetch's records, with sendfile or copied), cut after
the batch holding the last record MaxRecords allows; and a waiting ShareFetch (nothing acquirable) is answered
as soon as records become acquirable (an append, another member's RELEASE, a lock expiry, acknowledgements moving
the in-flight window), as Kafka's DelayedShareFetch, else at MaxWaitMs with no records; one carrying
acknowledgements waits the same way (it used to answer at once)."""

from __future__ import annotations

import struct
import time
import uuid

import pytest

import klog
from klog.client.admin import ConfigResource
from klog.protocol import ApiKey
from klog.records import decode_batches
from klog.testing.wire import WireClient

#: the records' lock duration (the broker's default, 30 s): far past every wait these tests expect, so that a
#: lock expiry never answers a waiting ShareFetch but in the lock expiry test, whose group has SHORT_LOCK_MS
LOCK_MS = 30_000
SHORT_LOCK_MS = 1000
#: a window of in-flight records (the smallest limit Kafka accepts) for the window test
LOCK_LIMIT = 100
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "group.share.record.lock.duration.ms": LOCK_MS, "group.share.min.record.lock.duration.ms": 1000,
              "group.share.max.record.lock.duration.ms": 60_000,
              "group.share.delivery.count.limit": 5, "offsets.topic.replication.factor": 1,
              "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1}
#: far above every wait these tests expect: a ShareFetch answered at its MaxWaitMs fails them
LONG_WAIT_MS = 10_000


@pytest.fixture(scope="module", params=[True, False], ids=["sendfile", "copy"])
def broker(request, tmp_path_factory):
    config = dict(PROPERTIES, **{"klog.fetch.sendfile.enable": request.param})
    with klog.Broker(str(tmp_path_factory.mktemp("share-wire")), config=config) as b:
        yield b


def _topic(broker, limit=None, lock_ms=None):
    """A new one-partition topic and a share group reading it from the earliest offset."""
    name = f"sw-{uuid.uuid4().hex[:8]}"
    group = f"g-{name}"
    settings = {"share.auto.offset.reset": "earliest"}
    if limit is not None:
        settings["share.partition.max.record.locks"] = str(limit)
    if lock_ms is not None:
        settings["share.record.lock.duration.ms"] = str(lock_ms)
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([klog.client.NewTopic(name, 1, 1)])
        admin.alter_configs({ConfigResource("group", group): settings})
    with WireClient(broker.host, broker.port) as wire:
        meta = wire.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
    return name, group, meta.topics[0].topic_id


def _produce_batches(broker, topic, batches):
    """Each list of values as one record batch."""
    with klog.Producer(bootstrap_servers=broker.bootstrap_servers, batch_size=4 << 20, linger_ms=60_000,
                       acks=1) as p:
        for values in batches:
            for v in values:
                p.send(topic, value=v, partition=0)
            p.flush()


def _fetch_bytes(broker, topic):
    """The partition's record batches as a Fetch answers them (bytes of every batch, in order)."""
    out = b""
    offset = 0
    with WireClient(broker.host, broker.port) as wire:
        while True:
            r = wire.request(ApiKey.FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                     "partition_max_bytes": 64 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
            part = r.responses[0].partitions[0]
            data = bytes(part.records or b"")
            if not data:
                return out
            out += data
            last = decode_batches(data)[-1]
            offset = last.base_offset + last.last_offset_delta + 1


def _share_fetch_send(wire, group, member, epoch, topic_id, *, max_records=500, max_wait_ms=0, acks=()):
    return wire.send(ApiKey.SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
        "min_bytes": 1, "max_bytes": 64 << 20, "max_records": max_records, "batch_size": max_records,
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": la, "acknowledge_types": [t]} for f, la, t in acks]}]}],
        "forgotten_topics_data": []})


def _share_fetch_receive(wire):
    _, r = wire.receive(ApiKey.SHARE_FETCH, 1)
    assert r.error_code == 0, r
    part = r.responses[0].partitions[0]
    assert part.error_code == 0, part
    return part


def _share_fetch(wire, group, member, epoch, topic_id, **kw):
    _share_fetch_send(wire, group, member, epoch, topic_id, **kw)
    return _share_fetch_receive(wire)


def _runs(part):
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]


def test_share_fetch_records_are_the_logs_batches_byte_for_byte(broker):
    topic, group, topic_id = _topic(broker)
    # a small batch (copied with its header), a large one (past klog.fetch.sendfile.min.bytes: a file region),
    # then small ones again: a cut after the large batch ends inside the read's region of the segment file
    sizes = [3, 400, 5, 7, 2]
    _produce_batches(broker, topic, [[b"%d-%d-" % (i, j) + b"x" * 1000 for j in range(n)]
                                     for i, n in enumerate(sizes)])
    log_bytes = _fetch_bytes(broker, topic)
    batches = decode_batches(log_bytes)
    assert [b.last_offset_delta + 1 for b in batches] == sizes
    # byte offset after each batch in the log's bytes
    ends, pos = [], 0
    for b in batches:
        (length,) = struct.unpack_from(">i", log_bytes, pos + 8)
        pos += 12 + length
        ends.append(pos)
    with WireClient(broker.host, broker.port) as wire:
        # MaxRecords 300 ends in the large batch (batch_optimized: the whole batch): the first two batches
        part = _share_fetch(wire, group, "m1", 0, topic_id, max_records=300)
        assert _runs(part) == [(0, 402, 1)]
        assert bytes(part.records) == log_bytes[:ends[1]]
        # the rest: the three small batches, to the log's end
        part = _share_fetch(wire, group, "m1", 1, topic_id, max_records=500)
        assert _runs(part) == [(403, sum(sizes) - 1, 1)]
        assert bytes(part.records) == log_bytes[ends[1]:]
        # released, the first two batches come again, the same bytes with delivery count 2
        part = _share_fetch(wire, group, "m1", 2, topic_id, max_records=300, acks=[(0, 402, 2)])
        assert _runs(part) == [(0, 402, 2)]
        assert bytes(part.records) == log_bytes[:ends[1]]


def _waiting_answered(wire, start, expect_runs, within_s):
    part = _share_fetch_receive(wire)
    elapsed = time.monotonic() - start
    assert _runs(part) == expect_runs
    assert elapsed < within_s, f"answered after {elapsed:.2f} s"
    return part, elapsed


def test_waiting_share_fetch_is_answered_by_another_members_release(broker):
    topic, group, topic_id = _topic(broker)
    _produce_batches(broker, topic, [[b"one"]])
    with WireClient(broker.host, broker.port) as a, WireClient(broker.host, broker.port) as b:
        assert _runs(_share_fetch(a, group, "a", 0, topic_id)) == [(0, 0, 1)]
        _share_fetch_send(b, group, "b", 0, topic_id, max_wait_ms=LONG_WAIT_MS)
        time.sleep(0.3)   # b's ShareFetch waits: a holds the only record
        start = time.monotonic()
        ack = a.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": "a", "share_session_epoch": 1, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 0, "acknowledge_types": [2]}]}]}]})   # RELEASE
        assert ack.responses[0].partitions[0].error_code == 0
        _waiting_answered(b, start, [(0, 0, 2)], within_s=2.0)


def test_waiting_share_fetch_is_answered_by_an_append(broker):
    topic, group, topic_id = _topic(broker)
    with WireClient(broker.host, broker.port) as b:
        _share_fetch_send(b, group, "b", 0, topic_id, max_wait_ms=LONG_WAIT_MS)
        time.sleep(0.3)
        start = time.monotonic()
        _produce_batches(broker, topic, [[b"new"]])
        _waiting_answered(b, start, [(0, 0, 1)], within_s=3.0)


def test_waiting_share_fetch_is_answered_when_another_members_lock_expires(broker):
    topic, group, topic_id = _topic(broker, lock_ms=SHORT_LOCK_MS)
    _produce_batches(broker, topic, [[b"held"]])
    with WireClient(broker.host, broker.port) as a, WireClient(broker.host, broker.port) as b:
        acquired = time.monotonic()
        assert _runs(_share_fetch(a, group, "a", 0, topic_id)) == [(0, 0, 1)]
        _share_fetch_send(b, group, "b", 0, topic_id, max_wait_ms=LONG_WAIT_MS)
        _waiting_answered(b, acquired, [(0, 0, 2)], within_s=SHORT_LOCK_MS / 1000 + 2.0)
        assert time.monotonic() - acquired >= SHORT_LOCK_MS / 1000 - 0.05   # not before the lock ran out


def test_waiting_share_fetch_is_answered_when_acknowledgements_move_the_in_flight_window(broker):
    topic, group, topic_id = _topic(broker, limit=LOCK_LIMIT)
    _produce_batches(broker, topic, [[b"r"] * LOCK_LIMIT, [b"s"] * 10])
    with WireClient(broker.host, broker.port) as a, WireClient(broker.host, broker.port) as b:
        assert _runs(_share_fetch(a, group, "a", 0, topic_id)) == [(0, LOCK_LIMIT - 1, 1)]
        _share_fetch_send(b, group, "b", 0, topic_id, max_wait_ms=LONG_WAIT_MS)
        time.sleep(0.3)   # the window is full: b waits
        start = time.monotonic()
        a.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": "a", "share_session_epoch": 1, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": LOCK_LIMIT - 1, "acknowledge_types": [1]}]}]}]})   # ACCEPT
        _waiting_answered(b, start, [(LOCK_LIMIT, LOCK_LIMIT + 9, 1)], within_s=2.0)


def test_share_fetch_with_nothing_to_acquire_answers_at_max_wait_with_no_records(broker):
    topic, group, topic_id = _topic(broker)
    with WireClient(broker.host, broker.port) as b:
        start = time.monotonic()
        part = _share_fetch(b, group, "b", 0, topic_id, max_wait_ms=500)
        elapsed = time.monotonic() - start
        assert _runs(part) == [] and not part.records
        assert 0.45 <= elapsed < 3.0, elapsed


def test_share_fetch_carrying_acknowledgements_waits_when_it_acquires_nothing(broker):
    # as Kafka 4.3's (KafkaApis.handleFetchFromShareFetchRequest hands the request's MaxWaitMs to
    # SharePartitionManager.fetchMessages whether or not it carried acknowledgements): the ACCEPT is applied at
    # once, then the fetch waits for acquirable records; answered at once it would miss the record appended later
    topic, group, topic_id = _topic(broker)
    _produce_batches(broker, topic, [[b"first"]])
    with WireClient(broker.host, broker.port) as a, WireClient(broker.host, broker.port) as b:
        assert _runs(_share_fetch(a, group, "a", 0, topic_id)) == [(0, 0, 1)]
        _share_fetch_send(a, group, "a", 1, topic_id, max_wait_ms=LONG_WAIT_MS, acks=[(0, 0, 1)])   # ACCEPT
        time.sleep(0.3)   # a's fetch has applied the ACCEPT and waits: nothing is left to acquire
        # the ACCEPT is in force while a's fetch waits: another member finds nothing to acquire (not record 0)
        part = _share_fetch(b, group, "b", 0, topic_id, max_wait_ms=200)
        assert _runs(part) == [] and not part.records
        _produce_batches(broker, topic, [[b"second"]])
        part = _share_fetch_receive(a)
        assert part.acknowledge_error_code == 0
        assert _runs(part) == [(1, 1, 1)]

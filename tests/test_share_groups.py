"""Share groups (KIP-932) on a real klog broker and on Apache Kafka 4.x (same properties) with klog's ShareConsumer: N consumers on one partition see every
record exactly once when all ACCEPT; RELEASE and lock expiry redeliver with the delivery count incremented;
REJECT and the delivery limit archive; ShareGroupDescribe/ListGroups show the group. The share-partition state
machine is also tested without sockets."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid

import pytest

import klog
import klog.records
from klog.broker.share_partitions import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, RELEASE, REJECT, RENEW, SharePartition, ShareStateError,
)
from klog.protocol.error_codes import ErrorCode

LOCK_MS = 1500


#: the same broker properties on klog and Kafka (Kafka 4.3 has share groups on: share.version=1 by default)
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "group.share.record.lock.duration.ms": LOCK_MS, "group.share.min.record.lock.duration.ms": 1000,
              "group.share.delivery.count.limit": 3, "group.share.heartbeat.interval.ms": 500,
              "group.share.min.heartbeat.interval.ms": 500, "offsets.topic.replication.factor": 1,
              # lower floors for the group configs tests/test_group_configs.py sets (Kafka's: 5 s and 45 s)
              **{f"group.{kind}.{key}": value for kind in ("consumer", "share") for key, value in (
                  ("min.heartbeat.interval.ms", 500), ("min.session.timeout.ms", 1000))},
              "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
              # KIP-1263's assignment-interval configs (Kafka 4.3.1), at Kafka's defaults: both brokers start with them
              **{f"group.{kind}.{key}": value for kind in ("consumer", "share") for key, value in (
                  ("assignment.interval.ms", 1000), ("min.assignment.interval.ms", 0),
                  ("max.assignment.interval.ms", 15000), ("assignor.offload.enable", "true"))}}


class _Server:
    def __init__(self, kind, bootstrap_servers):
        self.kind = kind
        self.bootstrap_servers = bootstrap_servers


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"share-{request.param}")
    if request.param == "klog":
        with klog.Broker(str(base), config=dict(PROPERTIES)) as b:
            yield _Server("klog", b.bootstrap_servers)
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka

    try:
        cm = apache_kafka(base, config=dict(PROPERTIES))
        bootstrap = cm.__enter__()
    except (KafkaStartError, FileNotFoundError) as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield _Server("kafka", str(bootstrap))
    finally:
        cm.__exit__(None, None, None)


@contextlib.asynccontextmanager
async def one_connection(broker):
    """One klog client connection to ``broker`` (ApiVersions exchanged), closed on the way out: for the tests that
    send raw requests and compare the answers of klog and Kafka."""
    from klog.client.cluster import ClusterClient
    from klog.client.config import CONSUMER_CONFIG, resolve_config

    cl = ClusterClient(resolve_config(CONSUMER_CONFIG, {"bootstrap.servers": broker.bootstrap_servers},
                                      kind="consumer"))
    try:
        await cl.start()
        yield await cl.any_connection()
    finally:
        await cl.close()


def _topic(broker, partitions=1):
    name = f"share-{uuid.uuid4().hex[:8]}"
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([klog.client.NewTopic(name, partitions, 1)])
    return name


def _produce(broker, topic, values):
    with klog.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        for v in values:
            p.send(topic, value=v)
        p.flush()


READY = b"__ready__"


def _join(broker, topic, consumers, timeout=20.0):
    """Poll until every consumer is assigned and the share-partitions read new records (share.auto.offset.reset
    is latest, and Kafka initializes a share-partition asynchronously): markers are produced until one is
    consumed; the tests skip (and accept) markers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            _accept_markers(c, c.poll(timeout=0.1))
        if all(c._aio.assignment for c in consumers):
            break
    while time.monotonic() < deadline:
        _produce(broker, topic, [READY])
        for c in consumers:
            if _accept_markers(c, c.poll(timeout=0.3)):
                return
    raise AssertionError("share consumers not assigned")


def _accept_markers(c, records):
    markers = [r for r in records if r.value == READY]
    assert len(markers) == len(records), records
    if markers and c._aio.explicit:
        for r in markers:
            c.acknowledge(r, "accept")
    if markers:
        c.commit_sync()
    return bool(markers)


def _drain(consumers, want, timeout=15.0, ack=None):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for c in consumers:
            for r in c.poll(timeout=0.2):
                if r.value == READY:
                    c.acknowledge(r, "accept") if c._aio.explicit else None
                    continue
                got.append((c, r))
                if ack is not None:
                    c.acknowledge(r, ack(r))
    return got


def test_consumers_share_one_partition_exactly_once(broker):
    topic = _topic(broker)
    consumers = [klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}")
                 for _ in range(3)]
    try:
        _join(broker, topic, consumers)
        values = [f"v{i}".encode() for i in range(300)]
        _produce(broker, topic, values)
        got = _drain(consumers, len(values))
        for c in consumers:   # implicit mode: accept the last poll's records
            c.commit_sync()
        seen = [r.value for _, r in got]
        assert sorted(seen) == sorted(values)
        assert len(seen) == len(set(seen))
        assert all(r.delivery_count == 1 for _, r in got)
        assert _drain(consumers, 1, timeout=1.0) == []
    finally:
        for c in consumers:
            c.close()


def test_batch_optimized_share_fetch_acquires_the_whole_batch_past_max_records(broker):
    """ShareAcquireMode batch_optimized (what klog's ShareConsumer sends, and a v1 request's mode): MaxRecords is a
    soft limit, the member acquires every record of the batch holding the last one it allows (KIP-1206, as
    Kafka's SharePartition does), so no batch is sent to two members in pieces; the rest of the group then finds
    nothing left of it."""
    topic = _topic(broker)
    group = f"g-{topic}"
    a, b = (klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                               acknowledgement_mode="explicit", max_poll_records=10) for _ in range(2))
    try:
        _join(broker, topic, [a, b])
        _produce(broker, topic, [b"job-%d" % i for i in range(50)])   # one flush: one batch of 50
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got = [r for r in a.poll(timeout=0.3) if r.value != READY]
        assert [r.value for r in got] == [b"job-%d" % i for i in range(50)]   # all 50, not max_poll_records
        assert {r.delivery_count for r in got} == {1}
        assert [r for r in b.poll(timeout=0.5) if r.value != READY] == []
        for r in got:
            a.acknowledge(r, "accept")
        a.commit_sync()
    finally:
        a.close()
        b.close()


def test_release_redelivers_with_incremented_count_and_reject_archives(broker):
    topic = _topic(broker)
    group = f"g-{topic}"
    a = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                           acknowledgement_mode="explicit")
    b = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                           acknowledgement_mode="explicit")
    try:
        _join(broker, topic, [a, b])
        _produce(broker, topic, [b"release-me", b"reject-me", b"accept-me"])
        first = _drain([a], 3, ack=lambda r: {b"release-me": "release", b"reject-me": "reject"}.get(r.value,
                                                                                                     "accept"))
        assert sorted(r.value for _, r in first) == [b"accept-me", b"reject-me", b"release-me"]
        with pytest.raises(klog.client.errors.IllegalStateError):   # acknowledged already
            a.acknowledge(first[0][1], "accept")
        assert a.commit_sync() != {}
        again = _drain([b], 1, ack=lambda r: "accept")
        assert [(r.value, r.delivery_count) for _, r in again] == [(b"release-me", 2)]
        b.commit_sync()
        assert _drain([a, b], 1, timeout=1.0, ack=lambda r: "accept") == []
    finally:
        a.close()
        b.close()


def test_lock_expiry_redelivers_and_delivery_limit_archives(broker):
    topic = _topic(broker)
    group = f"g-{topic}"
    c = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                           acknowledgement_mode="explicit")
    try:
        _join(broker, topic, [c])
        _produce(broker, topic, [b"slow"])
        counts = []
        for _ in range(3):   # group.share.delivery.count.limit=3: never acknowledged, the lock runs out
            got = _drain([c], 1, timeout=LOCK_MS / 1000 + 5)
            assert [r.value for _, r in got] == [b"slow"]
            counts.append(got[0][1].delivery_count)
            c._aio._delivered.clear()   # the application forgets it (crashed worker): no acknowledgement
        assert counts == [1, 2, 3]
        time.sleep(LOCK_MS / 1000 + 0.3)
        assert _drain([c], 1, timeout=1.0) == []   # archived after the third delivery
    finally:
        c.close()


def test_share_group_describe_and_list(broker):
    topic = _topic(broker, partitions=2)
    group = f"g-{topic}"
    c = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        _join(broker, topic, [c])
        assert sorted(p for (_, p) in c._aio.assignment) == [0, 1]
        from klog.protocol import ApiKey, Struct

        async def describe():
            cl = c._aio.cluster
            r = await cl.request(c._aio._coordinator, ApiKey.SHARE_GROUP_DESCRIBE,
                                 Struct(group_ids=[group, "nope"], include_authorized_operations=False))
            lg = await cl.request(c._aio._coordinator, ApiKey.LIST_GROUPS,
                                  Struct(states_filter=[], types_filter=["share"]), version=5)
            dg = await cl.request(c._aio._coordinator, ApiKey.DESCRIBE_GROUPS,
                                  Struct(groups=[group], include_authorized_operations=False), version=6)
            return r, lg, dg

        r, lg, dg = c._run(describe())
        # DescribeGroups (classic groups only) v6: GROUP_ID_NOT_FOUND for a share group, as Kafka 4.x answers
        assert [(d.group_id, d.error_code) for d in dg.groups] == [(group, ErrorCode.GROUP_ID_NOT_FOUND)]
        g, missing = r.groups
        assert g.error_code == 0 and g.group_state == "Stable" and g.assignor_name == "simple"
        assert [m.member_id for m in g.members] == [c.member_id]
        assert g.members[0].client_host == "/127.0.0.1"   # Kafka's InetAddress.toString(), leading "/"
        assert sorted(g.members[0].assignment.topic_partitions[0].partitions) == [0, 1]
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = {x.group_id: (x.group_type, x.group_state) for x in lg.groups}
        assert listed[group] == ("share", "Stable")
        assert all(t == "share" for t, _ in listed.values())
    finally:
        c.close()


def test_two_share_consumers_split_four_partitions_two_each(broker):
    """Kafka's simple assignor: with fewer members than partitions each partition goes to one member, balanced
    (klog used to assign every member every partition); a member leaving hands its partitions to the other."""
    topic = _topic(broker, partitions=4)
    group = f"g-{topic}"
    consumers = [klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
                 for _ in range(2)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for c in consumers:
                _accept_markers(c, c.poll(timeout=0.1))
            got = [sorted(p for (_, p) in c._aio.assignment) for c in consumers]
            # both assigned: the second member's share waits for share.assignment.interval.ms (KIP-1263)
            if sorted(p for ps in got for p in ps) == [0, 1, 2, 3] and all(got):
                break
        assert sorted(p for ps in got for p in ps) == [0, 1, 2, 3], got
        assert [len(ps) for ps in got] == [2, 2]
        consumers.pop().close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            _accept_markers(consumers[0], consumers[0].poll(timeout=0.2))
            if sorted(p for (_, p) in consumers[0]._aio.assignment) == [0, 1, 2, 3]:
                break
        assert sorted(p for (_, p) in consumers[0]._aio.assignment) == [0, 1, 2, 3]
    finally:
        for c in consumers:
            c.close()


# -- the share-partition state machine, without sockets -----------------------------------------------------------

def _sp(limit=3, locks=100):
    return SharePartition("g", "t", 0, start_offset=10, lock_duration_ms=1000, delivery_count_limit=limit,
                          max_record_locks=locks)


def test_share_partition_states():
    sp = _sp()
    assert sp.acquire("m1", 10, 14, 100, now_ms=0) == [(10, 14, 1)]
    assert sp.acquire("m2", 10, 14, 100, now_ms=0) == []          # all held by m1
    with pytest.raises(ShareStateError) as e:
        sp.acknowledge("m2", 10, 10, [ACCEPT], now_ms=1)           # not m2's
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    sp.acknowledge("m1", 10, 14, [ACCEPT, RELEASE, REJECT, RENEW, ACCEPT], now_ms=500)
    assert sp.start_offset == 11                                   # 10 accepted; 11 available again
    assert sp.records[11].state == AVAILABLE and sp.records[12].state == ARCHIVED
    assert sp.records[14].state == ACKNOWLEDGED
    assert sp.expire_locks(now_ms=1000) == 0                       # 13 renewed at 500: lock until 1500
    assert sp.expire_locks(now_ms=1500) == 1
    assert sp.acquire("m2", 10, 20, 2, now_ms=2000) == [(11, 11, 2), (13, 13, 2)]


def test_share_partition_delivery_limit_and_lock_limit():
    sp = _sp(limit=2, locks=3)
    assert sp.acquire("m", 10, 20, 100, now_ms=0) == [(10, 12, 1)]  # max.record.locks=3 in flight
    sp.release_member("m")
    assert sp.acquire("m", 10, 20, 100, now_ms=0) == [(10, 12, 2)]
    sp.acknowledge("m", 10, 12, [RELEASE], now_ms=1)                 # second delivery: archived, not available
    assert sp.start_offset == 13 and sp.records == {}
    with pytest.raises(ShareStateError):
        sp.acknowledge("m", 13, 12, [ACCEPT], now_ms=1)


def test_share_partition_batch_optimized_acquisition_completes_the_batch_past_the_lock_limit():
    sp = _sp(locks=3)
    assert sp.lock_room() == 3
    # batch_optimized: the caller read through the end of the record batch holding the limit's last record
    assert sp.acquire("m", 10, 16, 7, now_ms=0, past_lock_limit=True) == [(10, 16, 1)]
    assert sp.in_flight() == 7 and sp.lock_room() == -4
    assert sp.next_fetch_offset(visible_end=100) is None      # no room: no new records
    sp.acknowledge("m", 10, 11, [RELEASE], now_ms=1)
    assert sp.next_fetch_offset(visible_end=100) == 10        # in-flight records are acquired again
    assert sp.acquire("n", 10, 11, 2, now_ms=1, past_lock_limit=True) == [(10, 11, 2)]


def test_share_partition_lock_expiry_follows_the_earliest_lock_across_acquisitions_renewals_and_restores():
    """expire_locks skips its scan until the earliest lock may have expired: every acquisition, renewal and
    restored state must still expire exactly the records whose lock ran out, when it ran out."""
    sp = _sp(locks=1000)
    assert sp.acquire("m1", 10, 14, 100, now_ms=0) == [(10, 14, 1)]           # locks until 1000
    assert sp.expire_locks(now_ms=500) == 0
    assert sp.acquire("m2", 15, 19, 100, now_ms=600) == [(15, 19, 1)]         # locks until 1600
    sp.acknowledge("m1", 10, 10, [RENEW], now_ms=900)                          # 10: until 1900
    assert sp.expire_locks(now_ms=999) == 0
    assert sp.expire_locks(now_ms=1000) == 4                                   # 11-14
    assert sp.expire_locks(now_ms=1599) == 0
    assert sp.expire_locks(now_ms=1600) == 5                                   # 15-19
    assert sp.expire_locks(now_ms=1899) == 0
    assert sp.expire_locks(now_ms=1900) == 1                                   # 10
    assert sp.acquire("m3", 10, 12, 100, now_ms=5000) == [(10, 12, 2)]        # an acquisition after an idle scan
    assert sp.expire_locks(now_ms=5999) == 0 and sp.expire_locks(now_ms=6000) == 3
    # a state loaded from outside (share_state.restore) while a bound is cached: the next call looks again
    sp.acquire("m3", 10, 10, 1, now_ms=7000)
    sp.load(10, [(10, 10, ACQUIRED, 1), (11, 11, AVAILABLE, 2)])
    sp.batches[0].member_id, sp.batches[0].deadline_ms = "m4", 100
    assert sp.expire_locks(now_ms=200) == 1 and sp.records[10].state == AVAILABLE


def test_share_partition_next_fetch_offset_finds_a_record_released_below_the_last_scan():
    """next_fetch_offset resumes its scan where it last found nothing available; a record released, or its lock
    expired, below that point must still be the next one fetched."""
    sp = _sp(locks=1000)
    assert sp.acquire("m1", 10, 29, 100, now_ms=0) == [(10, 29, 1)]
    assert sp.next_fetch_offset(visible_end=30) is None                        # all 20 held
    assert sp.next_fetch_offset(visible_end=40) == 30                          # new records past the end
    sp.acknowledge("m1", 25, 25, [RELEASE], now_ms=1)
    assert sp.next_fetch_offset(visible_end=30) == 25
    assert sp.acquire("m2", 25, 29, 100, now_ms=2) == [(25, 25, 2)]
    assert sp.next_fetch_offset(visible_end=30) is None
    sp.release_member("m1")
    assert sp.next_fetch_offset(visible_end=30) == 10                          # m1's records, from the start
    assert sp.acquire("m2", 10, 29, 100, now_ms=3) == [(10, 24, 2), (26, 29, 2)]
    assert sp.next_fetch_offset(visible_end=30) is None
    assert sp.expire_locks(now_ms=1002) == 1                                   # 25's lock (from 2)
    assert sp.next_fetch_offset(visible_end=30) == 25
    assert sp.expire_locks(now_ms=1003) == 19
    assert sp.next_fetch_offset(visible_end=30) == 10


def test_share_partition_works_per_in_flight_batch_splitting_and_merging_ranges():
    """The in-flight records are batches (Kafka's InFlightBatch): a whole acquisition is one batch, an
    acknowledgement of part of it splits it, neighbours in the same state merge again, and the durable snapshot
    has one state batch per range, so the work per ShareFetch does not grow with the records it carries."""
    from klog.broker.share_state import state_batches

    sp = _sp(locks=2000)
    sp.start_offset = sp.end_offset = 0
    assert sp.acquire("m1", 0, 1999, 2000, now_ms=0) == [(0, 1999, 1)]
    assert [(b.first, b.last, b.state) for b in sp.batches] == [(0, 1999, ACQUIRED)]
    sp.acknowledge("m1", 500, 999, [ACCEPT], now_ms=1)                    # the middle: three batches
    sp.acknowledge("m1", 1000, 1002, [RELEASE, REJECT, RELEASE], now_ms=1)
    assert [(b.first, b.last, b.state, b.delivery_count) for b in sp.batches] == [
        (0, 499, ACQUIRED, 1), (500, 999, ACKNOWLEDGED, 1), (1000, 1000, AVAILABLE, 1),
        (1001, 1001, ARCHIVED, 1), (1002, 1002, AVAILABLE, 1), (1003, 1999, ACQUIRED, 1)]
    assert [(b["first_offset"], b["last_offset"], b["delivery_state"]) for b in state_batches(sp)] == [
        (0, 499, AVAILABLE), (500, 999, ACKNOWLEDGED), (1000, 1000, AVAILABLE), (1001, 1001, ARCHIVED),
        (1002, 1999, AVAILABLE)]                                            # acquired is written as available
    assert sp.acquire("m2", 1000, 1002, 10, now_ms=2) == [(1000, 1000, 2), (1002, 1002, 2)]
    sp.acknowledge("m2", 1000, 1000, [ACCEPT], now_ms=3)
    sp.acknowledge("m2", 1002, 1002, [REJECT], now_ms=3)
    sp.acknowledge("m1", 0, 499, [ACCEPT], now_ms=4)                       # the start moves past 0-1002
    assert sp.start_offset == 1003 and [(b.first, b.last) for b in sp.batches] == [(1003, 1999)]
    assert sp.count(ACKNOWLEDGED) == 0 and sp.in_flight() == 997
    sp.acknowledge("m1", 1003, 1999, [ACCEPT], now_ms=5)
    assert sp.start_offset == sp.end_offset == 2000 and sp.batches == []


def test_read_committed_archives_unreadable_ranges_instead_of_acquiring_them():
    sp = _sp()
    # 10-12 an aborted transaction, 13 its marker, 14 a committed record
    assert sp.acquire("m", 10, 14, 100, now_ms=0, unreadable=[(10, 12), (13, 13)]) == [(14, 14, 1)]
    assert sp.start_offset == 14 and sp.count(ARCHIVED) == 0 and sp.dirty   # archived, then passed
    sp.release_member("m")
    assert sp.acquire("m", 14, 16, 100, now_ms=0, unreadable=[(15, 15)]) == [(14, 14, 2), (16, 16, 1)]
    assert sp.records[15].state == ARCHIVED


class _HeldStore:
    """A share-state store whose writes wait until the test answers them (``writes``: (partition, future))."""

    def __init__(self):
        self.writes = []

    async def persist(self, sp, topic_id, *, leader_epoch, now_ms):
        import asyncio

        future = asyncio.get_running_loop().create_future()
        self.writes.append((sp.partition, future))
        return await future


def _held_share_broker(partitions=(0,)):
    from types import SimpleNamespace

    from klog.broker.share_partitions import SharePartitionManager

    store = _HeldStore()
    manager = SharePartitionManager({"group.share.record.lock.duration.ms": 30000,
                                     "group.share.delivery.count.limit": 5,
                                     "group.share.partition.max.record.locks": 200}, store)
    broker = SimpleNamespace(share_partitions=manager, partitions=SimpleNamespace(leader_epoch=lambda n, i: 0))
    topic_id = uuid.uuid4()
    for p in partitions:
        sp = manager.get_or_init("g", "t", p, 0)
        sp.topic_id = topic_id
        sp.acquire("c1", 0, 9, 10, now_ms=0)
        sp.acquire("c2", 10, 19, 10, now_ms=0)
    return broker, store, manager


def test_share_acknowledgement_answers_with_the_write_another_request_started_for_it():
    """C1's acknowledgement is carried by the write C2's ShareFetch started (C2 persisting its session's
    partitions): C1 answers only when that write ends, with its result (the old _persist cleared the dirty flag
    before its write, so C1 found nothing to write and answered NONE while the write was pending, and NONE when it
    failed); the failed write leaves the partition dirty and the next call writes it again."""
    import asyncio

    from klog.broker.handlers.share import _persist

    async def run():
        broker, store, manager = _held_share_broker()
        sp = manager.get("g", "t", 0)
        sp.acknowledge("c1", 0, 9, [ACCEPT], now_ms=1)                  # C1's ShareAcknowledge applies 0-9
        c2 = asyncio.ensure_future(_persist(broker, "g", [("t", 0)]))   # C2's ShareFetch ends first
        for _ in range(3):
            await asyncio.sleep(0)
        c1 = asyncio.ensure_future(_persist(broker, "g", [("t", 0)]))
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(store.writes) == 1 and not c1.done()   # waits for the write carrying its acknowledgement
        store.writes[0][1].set_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        assert await c1 == await c2 == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert sp.dirty
        again = asyncio.ensure_future(_persist(broker, "g", [("t", 0)]))
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(store.writes) == 2
        store.writes[1][1].set_result(ErrorCode.NONE)
        assert await again == {("t", 0): ErrorCode.NONE} and not sp.dirty

    asyncio.run(run())


def test_share_acknowledgement_after_a_write_started_waits_for_the_next_write_one_at_a_time():
    """A change made while a write of the share-partition is in flight is not carried by it: its caller waits for
    that write to end, then for the next one (never two writes of one share-partition at a time, which could land
    out of order), and answers that write's result; the first write's caller answers the first write's."""
    import asyncio

    from klog.broker.handlers.share import _persist

    async def run():
        broker, store, manager = _held_share_broker()
        sp = manager.get("g", "t", 0)
        sp.acknowledge("c1", 0, 9, [ACCEPT], now_ms=1)
        c1 = asyncio.ensure_future(_persist(broker, "g", [("t", 0)]))
        for _ in range(3):
            await asyncio.sleep(0)
        sp.acknowledge("c2", 10, 19, [ACCEPT], now_ms=2)                # after the first write read the state
        c2 = asyncio.ensure_future(_persist(broker, "g", [("t", 0)]))
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(store.writes) == 1                                   # one write at a time
        store.writes[0][1].set_result(ErrorCode.NONE)
        assert await c1 == {("t", 0): ErrorCode.NONE}
        for _ in range(3):
            await asyncio.sleep(0)
        assert not c2.done() and len(store.writes) == 2 and sp.dirty
        store.writes[1][1].set_result(ErrorCode.REQUEST_TIMED_OUT)
        assert await c2 == {("t", 0): ErrorCode.REQUEST_TIMED_OUT} and sp.dirty

    asyncio.run(run())


def test_share_apis_advertised_as_kafka_4_3(broker):
    """ApiVersions: ShareGroupHeartbeat v1, ShareGroupDescribe v1, ShareFetch and ShareAcknowledge v1-2, the
    share-group state RPCs (Initialize v0, Read v0, Write v0-1, Delete v0, ReadSummary v0-1) and the share offset
    admin APIs (DescribeShareGroupOffsets v0-1, AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0), as Kafka
    4.3 advertises them."""
    import asyncio

    from klog.protocol import ApiKey, Struct

    async def versions():
        async with one_connection(broker) as conn:
            r = await conn.request(ApiKey.API_VERSIONS, Struct(client_software_name="klog-test",
                                                               client_software_version="1"), version=3)
            return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys if 76 <= k.api_key <= 79
                    or 83 <= k.api_key <= 87 or 90 <= k.api_key <= 92}

    assert asyncio.run(versions()) == {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 83: (0, 0), 84: (0, 0),
                                       85: (0, 1), 86: (0, 0), 87: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0)}


def test_share_group_epochs_start_as_kafkas(broker):
    """A new share group starts at epoch 1 (Kafka 4.3.1's ModernGroup): its first member joins at group epoch 2;
    a second one joining within share.assignment.interval.ms bumps the group epoch to 3 and stays at the
    assignment epoch 2 (ShareGroupHeartbeat and ShareGroupDescribe, as Kafka answers)."""
    import asyncio

    from klog.protocol import Struct

    topic = _topic(broker, partitions=2)
    group = f"epochs-{topic}"

    async def run():
        async with one_connection(broker) as conn:
            async def join():
                return await conn.request(76, Struct(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                                     rack_id=None, subscribed_topic_names=[topic]), version=1)

            async def describe():
                d = await conn.request(77, Struct(group_ids=[group], include_authorized_operations=False),
                                       version=1)
                return [(g.error_code, g.group_epoch, g.assignment_epoch) for g in d.groups]

            deadline = time.monotonic() + 30
            while True:   # a new broker creates __consumer_offsets on FindCoordinator, then loads it
                await conn.request(10, Struct(key="", key_type=0, coordinator_keys=[group]), version=4)
                first = await join()
                if first.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                            ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR) \
                        or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            after_first = await describe()
            second = await join()
            return (first.error_code, first.member_epoch), after_first, \
                (second.error_code, second.member_epoch), await describe()

    assert asyncio.run(run()) == ((0, 2), [(0, 2, 2)], (0, 2), [(0, 3, 2)])


def test_confluent_kafka_share_consumer(broker):
    """librdkafka's ShareConsumer (confluent-kafka 2.16+): two members share a partition, every record seen
    once when accepted; a RELEASE comes back with delivery count 2."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    topic = _topic(broker)
    group = f"g-{topic}"
    conf = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
            "share.acknowledgement.mode": "explicit"}
    members = [confluent_kafka.ShareConsumer(dict(conf)) for _ in range(2)]
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.monotonic() + 30
        ready = False
        got: list = []
        while not ready and time.monotonic() < deadline:   # latest: markers until one arrives
            _produce(broker, topic, [READY])
            for m in members:
                for msg in m.poll(0.5):
                    assert msg.error() is None, msg.error()
                    m.acknowledge(msg, confluent_kafka.AcknowledgeType.ACCEPT)
                    ready = ready or msg.value() == READY
                m.commit_sync()
        assert ready
        values = [f"c{i}".encode() for i in range(100)] + [b"release-me"]
        _produce(broker, topic, values)
        released = False
        redelivered = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for m in members:
                for msg in m.poll(0.3):
                    assert msg.error() is None, msg.error()
                    if msg.value() == READY:
                        m.acknowledge(msg, confluent_kafka.AcknowledgeType.ACCEPT)
                        continue
                    if msg.value() == b"release-me" and not released:
                        released = True
                        m.acknowledge(msg, confluent_kafka.AcknowledgeType.RELEASE)
                        continue
                    if msg.value() == b"release-me":
                        redelivered.append(msg.delivery_count())
                    got.append(msg.value())
                    m.acknowledge(msg, confluent_kafka.AcknowledgeType.ACCEPT)
                m.commit_sync()
        assert sorted(got) == sorted(values)
        assert redelivered == [2]
    finally:
        for m in members:
            m.close()


def test_share_state_survives_a_broker_restart(tmp_path):
    """The share-partition state is in __share_group_state (ShareSnapshot and ShareUpdate records): after a restart
    accepted and rejected records are not delivered again; released and still-held ones are, with their delivery
    counts."""
    from klog.broker.share_state import TOPIC, decode_state_record, replay_state

    config = dict(PROPERTIES)
    data = str(tmp_path / "data")
    with klog.Broker(data, config=config) as b:
        topic, group, c, got = ten_records_delivered(b.bootstrap_servers)
        try:
            for i, r in got.items():
                if i < 5:
                    c.acknowledge(r, "accept")
                elif i == 5:
                    c.acknowledge(r, "release")
                elif i == 6:
                    c.acknowledge(r, "reject")
            c.commit_sync()
        finally:
            abandon(c)   # 7-9 stay acquired: the broker stops while they are held
        with klog.AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            assert TOPIC in admin.list_topics(internal=True)
    with klog.Broker(data, config=config) as b:
        assert redelivered_after_restart(b.bootstrap_servers, topic, group, 4) == [
            (b"r5", 2), (b"r7", 2), (b"r8", 2), (b"r9", 2)]
        records = []
        for name, plog in _state_logs(b):
            for batch in klog.records.decode_batches(plog.read(0, 1 << 20).to_bytes(), allow_partial_trailing=True):
                records.extend((rec.key, rec.value) for rec in batch.records)
        idents = {d[0] for d in (decode_state_record(k, v) for k, v in records if k is not None)
                  if d is not None and d[0][0] == group}
        assert len(idents) == 1
        state = replay_state(records, idents.pop())   # the snapshot with the updates after it
        assert state.start_offset >= 11 and state.state_batches == []


def ten_records_delivered(bootstrap):
    """A new topic with records r0..r9, all delivered to one explicit-mode member of a new group: (topic, group,
    member, index -> record)."""
    server = _Server("klog", bootstrap)
    topic = _topic(server)
    group = f"g-{topic}"
    c = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, acknowledgement_mode="explicit")
    try:
        _join(server, topic, [c])
        _produce(server, topic, [f"r{i}".encode() for i in range(10)])
        got = {int(r.value[1:]): r for _, r in _drain([c], 10)}
        assert sorted(got) == list(range(10))
    except BaseException:
        abandon(c)
        raise
    return topic, group, c, got


def abandon(c):
    """The member stops holding what it holds: no acknowledgement, no leave, no share session close (the broker
    goes away under it)."""
    c._aio._delivered.clear()
    c._aio._closed = True
    c._thread.stop()
    c._closed = True


def redelivered_after_restart(bootstrap, topic, group, want):
    """(value, delivery count) of the ``want`` records a new member of ``group`` is delivered (implicitly
    accepted), checking that nothing more comes."""
    c = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
    try:
        got = _drain([c], want, timeout=20)
        c.commit_sync()
        assert _drain([c], 1, timeout=1.0) == []
    finally:
        c.close()
    return sorted((r.value, r.delivery_count) for _, r in got)


def _state_logs(broker):
    from klog.broker.share_state import TOPIC

    manager = broker._server.state.partitions   # the embedded broker's partition logs
    for p in range(int(PROPERTIES.get("share.coordinator.state.topic.num.partitions", 50))):
        plog = manager.get(TOPIC, p)
        if plog is not None:
            yield TOPIC, plog


def test_asyncio_share_consumer(broker):
    """klog.aio.ShareConsumer: the same consumer on the caller's event loop."""
    import asyncio

    import klog.aio

    topic = _topic(broker)

    async def run():
        async with klog.aio.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                          group_id=f"g-{topic}", acknowledgement_mode="explicit") as c:
            deadline = time.monotonic() + 20
            seen: list[bytes] = []
            produced = False
            while time.monotonic() < deadline and b"job" not in seen:
                if not produced or not seen:
                    await asyncio.to_thread(_produce, broker, topic, [READY, b"job"])
                    produced = True
                for r in await c.poll(timeout=0.5):
                    seen.append(r.value)
                    c.acknowledge(r, "accept")
                await c.commit_sync()
            return seen

    assert b"job" in asyncio.run(run())


SHARE_BATCH_COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers", "delivery_count"]


def _poll_batches(consumer, want, ack, timeout=20.0):
    """poll_batch until ``want`` non-marker rows arrived, each batch acknowledged by ``ack(batch)`` before the
    next poll (explicit mode); markers are accepted at once. The batches, as they were before acknowledgement."""
    import pyarrow as pa

    rows, deadline = [], time.monotonic() + timeout
    while sum(b.num_rows for b in rows) < want and time.monotonic() < deadline:
        batch = consumer.poll_batch(timeout=0.3)
        assert batch.schema.names == SHARE_BATCH_COLUMNS and batch.schema.field("delivery_count").type == pa.int16()
        if not batch.num_rows:
            continue
        markers = [v == READY for v in batch.column("value").to_pylist()]
        if any(markers):
            consumer.acknowledge_batch(batch.filter(pa.array(markers)), "accept")
            batch = batch.filter(pa.array([not m for m in markers]))
        if batch.num_rows:
            ack(batch)
            rows.append(batch)
    return rows


def test_poll_batch_is_arrow_with_delivery_counts_and_acknowledge_batch_acks_by_mask(broker):
    """poll_batch: the records as one pyarrow.RecordBatch in klog.Consumer.poll_batch's columns plus
    delivery_count; acknowledge_batch: ACCEPT where the mask is true, RELEASE elsewhere (delivered again with
    count 2), then one type per row (ACCEPT, REJECT): nothing comes back after that."""
    topic = _topic(broker)
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                  acknowledgement_mode="explicit")
    checked = []

    def evens_accepted(batch):
        if not checked:   # misuse is refused before anything is acknowledged
            with pytest.raises(ValueError):   # one mask entry per row
                consumer.acknowledge_batch(batch, [True] * (batch.num_rows + 1))
            with pytest.raises(klog.client.errors.IllegalStateError):   # unacknowledged rows: no new poll
                consumer.poll_batch(timeout=0.1)
        consumer.acknowledge_batch(batch, [int(v[1:]) % 2 == 0 for v in batch.column("value").to_pylist()])
        if not checked:
            with pytest.raises(klog.client.errors.IllegalStateError):   # acknowledged already
                consumer.acknowledge_batch(batch, "accept")
            checked.append(True)

    try:
        _join(broker, topic, [consumer])
        values = [f"b{i}".encode() for i in range(6)]
        with klog.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
            for i, v in enumerate(values):
                p.send(topic, value=v, key=b"k%d" % i, headers=[("h", b"%d" % i)])
            p.flush()
        first = _poll_batches(consumer, len(values), evens_accepted)
        rows = [row for b in first for row in b.to_pylist()]
        assert sorted(r["value"] for r in rows) == values
        assert {(r["topic"], r["partition"], r["delivery_count"]) for r in rows} == {(topic, 0, 1)}
        assert all(r["key"] == b"k" + r["value"][1:] and r["headers"] == [{"key": "h", "value": r["value"][1:]}]
                   for r in rows)
        assert set(consumer.commit_sync().values()) <= {None}
        again = _poll_batches(consumer, 3, lambda batch: consumer.acknowledge_batch(
            batch, ["reject" if v == b"b3" else "accept" for v in batch.column("value").to_pylist()]))
        rows = [row for b in again for row in b.to_pylist()]
        assert sorted((r["value"], r["delivery_count"]) for r in rows) == [(b"b1", 2), (b"b3", 2), (b"b5", 2)]
        assert set(consumer.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(consumer)
    finally:
        consumer.close()


def _assert_nothing_comes_back(consumer) -> None:
    """No record is delivered again within twice the acquisition lock's duration."""
    late = _poll_batches(consumer, 1, lambda batch: consumer.acknowledge_batch(batch, "accept"),
                         timeout=2.0 * LOCK_MS / 1000)
    assert late == []


def _send_alternating(broker, topic: str, prefix: str, count: int) -> list[bytes]:
    """``count`` values ``<prefix><i>`` sent to partitions 0 and 1 in turn (value i to partition i % 2)."""
    values = [f"{prefix}{i}".encode() for i in range(count)]
    with klog.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        for i, v in enumerate(values):
            p.send(topic, value=v, partition=i % 2)
        p.flush()
    return values


def test_acknowledge_batch_takes_rows_of_several_partitions_in_any_order_by_numpy_or_arrow_mask(broker):
    """acknowledge_batch on rows of two partitions in reverse order: a numpy mask accepts the even values and
    releases the odd ones (back with delivery count 2), a row given twice is refused before anything is
    acknowledged; a pyarrow mask of nulls with otherwise="reject" rejects the redelivered rows: nothing comes
    back after that."""
    import numpy as np
    import pyarrow as pa

    topic = _topic(broker, partitions=2)
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                  acknowledgement_mode="explicit")
    partitions = set()

    def evens_accepted(batch):
        batch = batch.take(pa.array(np.arange(batch.num_rows)[::-1]))
        partitions.update(batch.column("partition").to_pylist())
        with pytest.raises(klog.client.errors.IllegalStateError):   # a row twice: nothing acknowledged
            consumer.acknowledge_batch(batch.take(pa.array([0, 0])), "accept")
        consumer.acknowledge_batch(batch, np.array([int(v[1:]) % 2 == 0 for v in batch.column("value").to_pylist()]))

    try:
        _join(broker, topic, [consumer])
        values = _send_alternating(broker, topic, "v", 12)
        first = _poll_batches(consumer, len(values), evens_accepted)
        assert sorted(v for b in first for v in b.column("value").to_pylist()) == sorted(values)
        assert partitions == {0, 1}
        assert set(consumer.commit_sync().values()) <= {None}
        again = _poll_batches(consumer, 6, lambda batch: consumer.acknowledge_batch(
            batch, pa.array([None] * batch.num_rows, pa.bool_()), otherwise="reject"))
        rows = [row for b in again for row in b.to_pylist()]
        assert sorted((r["value"], r["partition"], r["delivery_count"]) for r in rows) == sorted(
            (v, i % 2, 2) for i, v in enumerate(values) if i % 2)
        assert set(consumer.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(consumer)
    finally:
        consumer.close()


def test_acknowledge_batch_of_the_batch_poll_batch_returned_acks_each_partitions_rows_by_mask(broker):
    """acknowledge_batch given the very batch poll_batch returned (rows of two partitions in one batch: the
    consumer reuses the rows it knows by partition instead of reading the batch's columns again): a per-row mask
    that cuts across both partitions accepts its rows and releases the others, which alone come back (delivery
    count 2) with the schema of an empty batch; the same batch acknowledged again is refused."""
    import numpy as np
    import pyarrow as pa

    from klog.client.share_consumer import _empty_share_batch

    topic = _topic(broker, partitions=2)
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                  acknowledgement_mode="explicit")
    try:
        _join(broker, topic, [consumer])
        values = _send_alternating(broker, topic, "w", 12)
        seen: list[bytes] = []
        whole_two_partition_batches = 0
        deadline = time.monotonic() + 20.0
        while len(seen) < len(values) and time.monotonic() < deadline:
            batch = consumer.poll_batch(timeout=0.3)
            assert batch.schema == _empty_share_batch().schema
            got = batch.column("value").to_pylist()
            if batch.num_rows:   # (a late marker of _join is accepted)
                whole_two_partition_batches += len(set(batch.column("partition").to_pylist())) == 2
                consumer.acknowledge_batch(batch, np.array([v == READY or int(v[1:]) % 3 != 0 for v in got]))
                with pytest.raises(klog.client.errors.IllegalStateError):   # acknowledged already
                    consumer.acknowledge_batch(batch, "accept")
            seen += [v for v in got if v != READY]
        assert sorted(seen) == sorted(values)
        assert whole_two_partition_batches
        assert set(consumer.commit_sync().values()) <= {None}
        again = _poll_batches(consumer, 4, lambda batch: consumer.acknowledge_batch(batch, pa.array([True] *
                                                                                               batch.num_rows)))
        rows = [row for b in again for row in b.to_pylist()]
        assert sorted((r["value"], r["partition"], r["delivery_count"]) for r in rows) == sorted(
            (v, i % 2, 2) for i, v in enumerate(values) if i % 3 == 0)
        assert set(consumer.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(consumer)
    finally:
        consumer.close()


def test_acknowledge_batch_right_before_close_is_sent_with_the_close(broker):
    """The blocking consumer's acknowledge_batch is checked in the caller's thread and handed to the event loop
    with the next call: acknowledged and then closed at once (no poll, no commit in between), its ACCEPTs and
    RELEASEs still reach the broker with the close, so a second member of the group gets exactly the released
    rows again (delivery count 2) and nothing else."""
    import numpy as np

    topic = _topic(broker)
    first = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                               acknowledgement_mode="explicit")
    try:
        _join(broker, topic, [first])
        values = [f"c{i}".encode() for i in range(8)]
        _produce(broker, topic, values)
        got: list[bytes] = []
        released: set[bytes] = set()
        deadline = time.monotonic() + 20.0
        while len(got) < len(values) and time.monotonic() < deadline:
            batch = first.poll_batch(timeout=0.3)
            vals = batch.column("value").to_pylist()
            got += [v for v in vals if v != READY]
            if len(got) < len(values):
                first.acknowledge_batch(batch, "accept")
            else:   # the last batch: odd values released, then closed at once
                released = {v for v in vals if v != READY and int(v[1:]) % 2}
                first.acknowledge_batch(batch, np.array([v == READY or int(v[1:]) % 2 == 0 for v in vals]))
    finally:
        first.close()
    assert sorted(got) == sorted(values) and released
    second = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                acknowledgement_mode="explicit")
    try:
        again = _poll_batches(second, len(released), lambda batch: second.acknowledge_batch(batch, "accept"))
        rows = [row for b in again for row in b.to_pylist()]
        assert sorted((r["value"], r["delivery_count"]) for r in rows) == sorted((v, 2) for v in released)
        assert set(second.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(second)
    finally:
        second.close()


@contextlib.contextmanager
def _threads_switching_every_microsecond():
    """The GIL handed between threads every microsecond: a caller's thread and the consumer's event-loop thread
    interleave mid-step wherever they can."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _rows_without_markers(consumer, batch):
    """``batch`` less the READY markers of _join, which are accepted at once."""
    import pyarrow as pa

    markers = [v == READY for v in batch.column("value").to_pylist()]
    if any(markers):
        consumer.acknowledge_batch(batch.filter(pa.array(markers)), "accept")
        batch = batch.filter(pa.array([not m for m in markers]))
    return batch


def _as_record(row):
    """A row of poll_batch() as the ShareRecord acknowledge() takes (it reads the topic, partition and offset)."""
    return klog.client.share_consumer.ShareRecord(row["topic"], row["partition"], row["offset"], 0, row["key"],
                                                  row["value"], [], row["delivery_count"])


def test_rows_acknowledged_by_racing_threads_and_renewals_are_each_acknowledged_once(broker):
    """Three worker threads race to acknowledge every row of a poll_batch() batch one row at a time
    (acknowledge_batch, checked and taken in the caller's thread) while the main thread renews the odd rows
    (acknowledge(row, "renew"), run on the event loop), threads switching every microsecond: each row is
    acknowledged exactly once (the others get IllegalStateError), so the next poll does not raise and returns
    exactly the rows the renewals won (same delivery count); accepted, nothing comes back."""
    topic = _topic(broker)
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                  acknowledgement_mode="explicit")
    illegal = klog.client.errors.IllegalStateError
    try:
        _join(broker, topic, [consumer])
        values = [b"w%d" % i for i in range(400)]
        _produce(broker, topic, values)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            batch = _rows_without_markers(consumer, consumer.poll_batch(timeout=0.3))
            rows = batch.to_pylist()
            if not rows:
                continue
            won: list[tuple[str, int]] = []   # (who, row index) of each acknowledgement that was taken
            failures: list[BaseException] = []

            def acknowledge_every_row(name):
                for i in range(len(rows)):
                    try:
                        consumer.acknowledge_batch(batch.slice(i, 1), "accept")
                        won.append((name, i))
                    except illegal:
                        pass
                    except BaseException as exc:  # noqa: BLE001 - reported below
                        failures.append(exc)

            with _threads_switching_every_microsecond():
                workers = [threading.Thread(target=acknowledge_every_row, args=(name,)) for name in ("a", "b", "c")]
                for w in workers:
                    w.start()
                for i in range(1, len(rows), 2):
                    try:
                        consumer.acknowledge(_as_record(rows[i]), "renew")
                        won.append(("renew", i))
                    except illegal:
                        pass
                for w in workers:
                    w.join()
            assert failures == []
            assert sorted(i for _, i in won) == list(range(len(rows)))   # each row exactly once
            renewed = sorted((rows[i]["value"], rows[i]["delivery_count"]) for who, i in won if who == "renew")
            again = consumer.poll_batch(timeout=5.0) if renewed else None   # raises if a row is still counted held
            if again is not None:
                assert sorted(zip(again.column("value").to_pylist(),
                                  again.column("delivery_count").to_pylist())) == renewed
                consumer.acknowledge_batch(again, "accept")
            got += [row["value"] for row in rows]
        assert sorted(got) == sorted(values)
        assert set(consumer.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(consumer)
    finally:
        consumer.close()


def test_acknowledge_batch_racing_close_is_sent_with_the_close_or_refused_and_released(broker):
    """A worker thread rejects the rows of a poll_batch() batch one at a time while the main thread closes the
    consumer, threads switching every microsecond: each acknowledge_batch either returns, and its REJECT reaches
    the broker with the close (that row never comes back), or raises ClientClosedError, and the row is released by
    the close (explicit mode: unacknowledged records are released, as Kafka's KafkaShareConsumer does), so a
    second member gets exactly those rows again, with delivery count 2."""
    topic = _topic(broker)
    first = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                               acknowledgement_mode="explicit")
    rejected: list[bytes] = []
    refused: list[bytes] = []
    failures: list[BaseException] = []
    try:
        _join(broker, topic, [first])
        values = [b"x%d" % i for i in range(300)]
        _produce(broker, topic, values)
        batch = None
        deadline = time.monotonic() + 20
        while batch is None and time.monotonic() < deadline:
            polled = _rows_without_markers(first, first.poll_batch(timeout=0.3))
            batch = polled if polled.num_rows else None
        assert batch is not None
        started = threading.Event()

        def reject_one_by_one():
            for i, value in enumerate(batch.column("value").to_pylist()):
                try:
                    first.acknowledge_batch(batch.slice(i, 1), "reject")
                    rejected.append(value)
                except klog.client.errors.ClientClosedError:
                    refused.append(value)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)
                if i == 20:
                    started.set()
                time.sleep(0.001)   # the close lands among the acknowledgements

        with _threads_switching_every_microsecond():
            worker = threading.Thread(target=reject_one_by_one)
            worker.start()
            started.wait(10)
            first.close()
            worker.join()
    finally:
        first.close()
    assert failures == [] and rejected and refused
    second = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                acknowledgement_mode="explicit")
    try:
        again = _poll_batches(second, len(values) - len(rejected),
                              lambda b: second.acknowledge_batch(b, "accept"))
        rows = [row for b in again for row in b.to_pylist()]
        expected = [(v, 2) for v in refused] + [(v, 1) for v in values if v not in set(rejected) | set(refused)]
        assert sorted((r["value"], r["delivery_count"]) for r in rows) == sorted(expected)
        assert set(second.commit_sync().values()) <= {None}
        _assert_nothing_comes_back(second)
    finally:
        second.close()


def test_asyncio_poll_batch_accepts_implicitly(broker):
    """klog.aio.ShareConsumer.poll_batch in implicit mode: the next poll accepts the batch's rows."""
    import asyncio

    import klog.aio

    topic = _topic(broker)

    async def run():
        async with klog.aio.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                          group_id=f"g-{topic}") as c:
            deadline = time.monotonic() + 20
            seen: list[tuple[bytes, int]] = []
            while time.monotonic() < deadline and not any(v == b"job" for v, _ in seen):
                if not seen:
                    await asyncio.to_thread(_produce, broker, topic, [READY, b"job"])
                batch = await c.poll_batch(timeout=0.5)
                seen.extend(zip(batch.column("value").to_pylist(), batch.column("delivery_count").to_pylist()))
            later = await c.poll_batch(timeout=2.0 * LOCK_MS / 1000)   # accepts the job; nothing comes back
            return seen, later.num_rows

    seen, later = asyncio.run(run())
    assert (b"job", 1) in seen and later == 0


def _acquired_runs(wire):
    """The next ShareFetch v1 answer on ``wire`` (no error anywhere): its acquired runs, (first, last, delivery
    count) each."""
    from klog.protocol import ApiKey
    _, r = wire.receive(ApiKey.SHARE_FETCH, 1)
    assert r.error_code == 0, r
    parts = [p for t in r.responses for p in t.partitions]   # Kafka leaves out a partition with nothing
    assert all(p.error_code == 0 and p.acknowledge_error_code == 0 for p in parts), parts
    return [(a.first_offset, a.last_offset, a.delivery_count) for p in parts for a in p.acquired_records]

def test_share_fetch_carrying_acknowledgements_waits_for_records_when_it_acquires_nothing(broker):
    """A ShareFetch whose piggybacked ACCEPT leaves nothing to acquire waits (its MaxWaitMs) for acquirable
    records as any other, on klog as on Kafka 4.3 (KafkaApis.handleFetchFromShareFetchRequest hands the request's
    MaxWaitMs to SharePartitionManager.fetchMessages whether or not it carried acknowledgements): a record
    appended while it waits is in its answer. (klog used to answer such a fetch at once, empty.)"""
    from klog.client.admin import ConfigResource
    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    topic = _topic(broker)
    group = f"g-{topic}"
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.alter_configs({ConfigResource("group", group): {"share.auto.offset.reset": "earliest"}})
    _produce(broker, topic, [b"first"])
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    # a member of the group (its heartbeats keep it there); its ShareFetches go on a wire connection of their own
    member = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                acknowledgement_mode="explicit")
    try:
        with WireClient(host, int(port)) as wire:
            meta = wire.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
            topic_id = meta.topics[0].topic_id
            epoch = 0

            def send(max_wait_ms, acks=()):
                return wire.send(ApiKey.SHARE_FETCH, 1, {
                    "group_id": group, "member_id": member.member_id, "share_session_epoch": epoch,
                    "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500,
                    "batch_size": 500, "topics": [{"topic_id": topic_id, "partitions": [
                        {"partition_index": 0, "acknowledgement_batches": [
                            {"first_offset": f, "last_offset": la, "acknowledge_types": [t]}
                            for f, la, t in acks]}]}], "forgotten_topics_data": []})

            def receive():
                return _acquired_runs(wire)

            runs: list = []
            deadline = time.monotonic() + 30
            while not runs:   # until the share-partition is initialized and its record acquired (a fresh group)
                assert time.monotonic() < deadline, "the first record was not acquired"
                send(1000)
                runs = receive()
                epoch += 1
            assert runs == [(0, 0, 1)]
            send(15_000, acks=[(0, 0, 1)])   # ACCEPT: nothing is left to acquire, so the fetch waits
            time.sleep(1.0)
            _produce(broker, topic, [b"second"])
            assert receive() == [(1, 1, 1)]
            epoch += 1
            send(0)
            epoch += 1
            assert receive() == []   # record 0 accepted: not delivered again
    finally:
        member.close()


def test_share_fetch_waiting_for_the_lock_window_gets_the_records_anothers_piggybacked_accept_frees(broker):
    """Member A holds the whole record-lock window (``share.partition.max.record.locks``); member B's ShareFetch
    waits (MaxWaitMs 5 s); A's next ShareFetch carries the ACCEPT of everything it holds and asks for more. B,
    which waited first, gets the freed window's records well before its MaxWaitMs, and A's fetch waits, as Kafka's
    purgatory completes the older waiting fetch first. (klog used to let A's own fetch take them back, so B
    answered empty at its MaxWaitMs and the same members kept every batch.)"""
    from klog.client.admin import ConfigResource
    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    limit, b_wait_ms = 100, 5000   # Kafka's smallest share.partition.max.record.locks
    topic = _topic(broker)
    group = f"g-{topic}"
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.alter_configs({ConfigResource("group", group): {
            "share.auto.offset.reset": "earliest", "share.partition.max.record.locks": str(limit),
            "share.record.lock.duration.ms": "30000"}})   # only acknowledgements free records here
    for k in range(2):   # two record batches of `limit` records (one flush each)
        _produce(broker, topic, [b"%d" % (k * limit + i) for i in range(limit)])
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    # two members of the group (their heartbeats keep them there); their ShareFetches go on wire connections
    members = [klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                  acknowledgement_mode="explicit") for _ in range(2)]
    try:
        with WireClient(host, int(port)) as a, WireClient(host, int(port)) as b:
            meta = a.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
            topic_id = meta.topics[0].topic_id
            epochs = {a: 0, b: 0}
            ids = {a: members[0].member_id, b: members[1].member_id}

            def send(wire, max_wait_ms, acks=()):
                wire.send(ApiKey.SHARE_FETCH, 1, {
                    "group_id": group, "member_id": ids[wire], "share_session_epoch": epochs[wire],
                    "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": limit,
                    "batch_size": limit, "topics": [{"topic_id": topic_id, "partitions": [
                        {"partition_index": 0, "acknowledgement_batches": [
                            {"first_offset": f, "last_offset": la, "acknowledge_types": [t]}
                            for f, la, t in acks]}]}], "forgotten_topics_data": []})
                epochs[wire] += 1

            receive = _acquired_runs

            runs: list = []
            deadline = time.monotonic() + 30
            while not runs:   # until the share-partition is initialized and A holds the first batch
                assert time.monotonic() < deadline, "the first batch was not acquired"
                send(a, 1000)
                runs = receive(a)
            assert runs == [(0, limit - 1, 1)]
            send(b, 0)   # B's session opens; the window is full: nothing for B
            assert receive(b) == []
            send(b, b_wait_ms)
            time.sleep(0.5)   # B's fetch waits
            start = time.monotonic()
            send(a, 1000, acks=[(0, limit - 1, 1)])   # ACCEPT the window, and fetch again
            assert receive(b) == [(limit, 2 * limit - 1, 1)]
            waited = time.monotonic() - start
            assert waited < b_wait_ms / 1000 / 2, f"B answered after {waited:.2f} s"
            assert receive(a) == []   # B holds the window now: A's fetch waited for its MaxWaitMs, empty
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_acknowledgements_a_poll_sends_are_reported_to_the_commit_callback_also_when_its_share_fetch_fails(
        tmp_path, kind):
    """Acknowledgements ride on the next poll's ShareFetch. The acknowledgement commit callback (Kafka's
    AcknowledgementCommitCallback) is told their outcome: made, when the ShareFetch is answered; the exception, when
    it fails (here: the broker stopped); before, a failed ShareFetch dropped them and nothing told the caller."""
    told = []
    with contextlib.ExitStack() as running:
        if kind == "klog":
            bootstrap = running.enter_context(klog.Broker(str(tmp_path / "b"), config=dict(PROPERTIES))).bootstrap_servers
        else:
            from klog.testing.kafka import KafkaStartError, apache_kafka

            try:
                bootstrap = str(running.enter_context(apache_kafka(tmp_path / "b", config=dict(PROPERTIES))))
            except (KafkaStartError, FileNotFoundError) as exc:
                pytest.skip(f"Apache Kafka unavailable: {exc}")
        broker = _Server(kind, bootstrap)
        topic = _topic(broker)
        c = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                               acknowledgement_mode="explicit",
                               acknowledgement_commit_callback=lambda offsets, exc: told.append((offsets, exc)))
        try:
            _join(broker, topic, [c])
            _produce(broker, topic, [b"accept-me"])
            [(_, accepted)] = _drain([c], 1)
            c.acknowledge(accepted, "accept")
            deadline = time.monotonic() + 15
            while not any(accepted.offset in offsets.get((topic, 0), ()) for offsets, _ in told):
                assert time.monotonic() < deadline, told
                assert c.poll(timeout=0.2) == []   # sends the acceptance on its ShareFetch
            assert [exc for offsets, exc in told if accepted.offset in offsets.get((topic, 0), ())] == [None]
            _produce(broker, topic, [b"reject-me"])
            [(_, rejected)] = _drain([c], 1)
            c.acknowledge(rejected, "reject")
            running.close()   # the broker stops: the next ShareFetch, carrying the rejection, fails
            deadline = time.monotonic() + 30
            while not any(rejected.offset in offsets.get((topic, 0), ()) for offsets, _ in told):
                assert time.monotonic() < deadline, told
                c.poll(timeout=0.2)
            [failed] = [exc for offsets, exc in told if rejected.offset in offsets.get((topic, 0), ())]
            assert isinstance(failed, Exception)
        finally:
            c.close()


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_share_consumer_close_with_the_cluster_down_is_bounded_by_its_timeout(tmp_path, kind):
    """close(timeout) gives up what it cannot do by then, as Java's ``KafkaShareConsumer.close(Duration)``: with
    the broker gone and the coordinator forgotten (a heartbeat failed), the leaving heartbeat looked the
    coordinator up for a fixed 30 s whatever the timeout (``_heartbeat``'s ``find_coordinator(timeout=30.0)``)."""
    from klog.testing.kafka import one_broker

    topic, group = f"close-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with one_broker(kind, tmp_path, PROPERTIES) as bootstrap:
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
        consumer = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
        deadline = time.monotonic() + 60
        while not consumer._aio.assignment:
            assert time.monotonic() < deadline, "the share consumer was never assigned the partition"
            consumer.poll(timeout=0.2)
    # the broker is stopped: a heartbeat (every 500 ms) fails and forgets the coordinator
    deadline = time.monotonic() + 30
    while consumer._aio._coordinator is not None:
        assert time.monotonic() < deadline, "no heartbeat failed with the broker stopped"
        time.sleep(0.1)
    raised: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close(timeout=1.0)
        except BaseException as exc:  # noqa: BLE001 - told to the test
            raised.append(exc)

    closing = threading.Thread(target=close)
    closing.start()
    closing.join(15)   # a bound well above the 1 s asked, well below the 30 s of the fixed lookup
    finished = not closing.is_alive()
    closing.join()
    assert finished, "close(timeout=1.0) still running after 15 s with the cluster down"
    assert not raised, raised


def test_acknowledgements_on_a_cancelled_poll_are_reported_to_the_commit_callback(tmp_path):
    """A poll cancelled while its ShareFetch waits (``asyncio.wait_for`` around the asyncio consumer's poll) took
    the pending acknowledgements with it: the callback is told they may not have been made. (Before, only an
    Exception was reported: a cancellation dropped them and the callback was never told.)"""
    import asyncio

    import klog.aio

    told = []

    async def scenario(broker, topic):
        async with klog.aio.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                                          acknowledgement_mode="explicit",
                                          acknowledgement_commit_callback=lambda o, e: told.append((o, e))) as c:
            deadline = time.monotonic() + 20
            job = None
            while job is None:   # markers until the share-partition reads new records, then the job
                assert time.monotonic() < deadline, "the job was never delivered"
                await asyncio.to_thread(_produce, broker, topic, [READY, b"job"])
                for r in await c.poll(timeout=0.5):
                    if r.value == b"job" and job is None:
                        job = r
                    else:
                        c.acknowledge(r, "accept")
                await c.commit_sync()
            told.clear()
            c.acknowledge(job, "reject")
            with pytest.raises(asyncio.TimeoutError):   # the rejection's ShareFetch waits, then the poll is cut
                await asyncio.wait_for(c.poll(timeout=10), 0.5)
            await c.commit_sync()   # the callback is told what was kept for it
            return job

    with klog.Broker(str(tmp_path / "b"), config=dict(PROPERTIES)) as running:
        broker = _Server("klog", running.bootstrap_servers)
        topic = _topic(broker)
        job = asyncio.run(scenario(broker, topic))
    reported = [exc for offsets, exc in told if job.offset in offsets.get((topic, 0), ())]
    assert len(reported) == 1 and isinstance(reported[0], klog.client.KafkaError), told

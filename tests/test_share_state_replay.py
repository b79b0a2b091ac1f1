"""A share-partition's durable state is replayed as Kafka's share coordinator replays ``__share_group_state``: the
latest ShareSnapshot, then the ShareUpdate records written after it (a start offset and the changed state batches)
applied in order; a snapshot tombstone deletes the state. Checked on records klog encodes, and (Kafka side, long)
on the ShareSnapshot and ShareUpdate records Apache Kafka 4.3 itself wrote, read from its log files: klog's replay
gives the state the consumer's acknowledgements left (start offset, released record with its delivery count,
accepted records). klog's own writes (ShareUpdates, each carrying only its write's changes, between ShareSnapshots)
replay to the whole state, also from what pruning keeps, and survive a restart."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import klog
from klog.broker.coordinator.runtime import partition_for
from klog.broker.share_partitions import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from klog.broker.share_state import (
    UPDATE_RECORD_TYPE, coordinator_key, decode_state_record, last_redundant_offset, replay_state, snapshot_key,
    snapshot_record, update_record,
)
from klog.client.admin import ConfigResource
from klog.records import decode_batches
from klog.testing.kafka import one_broker
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

GROUP, TOPIC_ID, PARTITION = "workers", uuid.uuid4(), 0
#: Kafka's share.coordinator.state.topic.num.partitions default
STATE_PARTITIONS = 50
IDENT = (GROUP, TOPIC_ID, PARTITION)


def _batch(first, last, state, count):
    return {"first_offset": first, "last_offset": last, "delivery_state": state, "delivery_count": count}


def _view(state):
    return state.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                for b in state.state_batches]


def test_updates_apply_over_the_latest_snapshot_in_order():
    snap = snapshot_record(GROUP, TOPIC_ID, PARTITION, snapshot_epoch=1, leader_epoch=0, start_offset=10,
                           batches=[_batch(10, 19, AVAILABLE, 1)], create_ms=1, now_ms=1, state_epoch=3)
    other = snapshot_record("other", TOPIC_ID, PARTITION, snapshot_epoch=1, leader_epoch=0, start_offset=0,
                            batches=[], create_ms=1, now_ms=1)
    accept_first = update_record(GROUP, TOPIC_ID, PARTITION, snapshot_epoch=1, leader_epoch=0, start_offset=13,
                                 batches=[_batch(10, 12, ACKNOWLEDGED, 1), _batch(15, 15, ARCHIVED, 1)])
    redeliver = update_record(GROUP, TOPIC_ID, PARTITION, snapshot_epoch=1, leader_epoch=1, start_offset=-1,
                              batches=[_batch(14, 14, AVAILABLE, 2), _batch(20, 21, ACKNOWLEDGED, 1)])
    state = replay_state([snap, other, accept_first, redeliver], IDENT)
    assert _view(state) == (13, [(13, 13, AVAILABLE, 1), (14, 14, AVAILABLE, 2), (15, 15, ARCHIVED, 1),
                                 (16, 19, AVAILABLE, 1), (20, 21, ACKNOWLEDGED, 1)])
    assert (state.state_epoch, state.leader_epoch, state.delivery_complete_count) == (3, 1, 3)
    # a later snapshot replaces everything before it; updates before it no longer count
    snap2 = snapshot_record(GROUP, TOPIC_ID, PARTITION, snapshot_epoch=2, leader_epoch=1, start_offset=22,
                            batches=[], create_ms=1, now_ms=2, state_epoch=3)
    assert _view(replay_state([snap, accept_first, snap2], IDENT)) == (22, [])
    # the snapshot's tombstone deletes the state
    assert replay_state([snap, accept_first, (snapshot_key(GROUP, TOPIC_ID, PARTITION), None)], IDENT) is None


def _log_records(partition_dir: Path, *, offsets: bool = False):
    for segment in sorted(partition_dir.glob("*.log")):
        for batch in decode_batches(segment.read_bytes(), allow_partial_trailing=True, allow_compacted=True):
            if batch.is_control:
                continue
            for r in batch.records:
                yield (r.offset, r.key, r.value) if offsets else (r.key, r.value)


PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share", "num.partitions": 1,
              "offsets.topic.num.partitions": 3, "group.share.heartbeat.interval.ms": 500,
              "group.share.min.heartbeat.interval.ms": 500, "group.share.record.lock.duration.ms": 60000}


@pytest.mark.long
def test_kafka_written_share_updates_replay_to_the_state_kafka_left(tmp_path):
    with one_broker("kafka", tmp_path, PROPERTIES) as bootstrap:
        topic, group = f"replay-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
            admin.alter_configs({ConfigResource("group", group): {"share.auto.offset.reset": "earliest"}})
        with klog.Producer(bootstrap_servers=bootstrap) as p:
            for i in range(10):
                p.send(topic, value=b"r%d" % i, partition=0)
            p.flush()
        # offsets 0-3 accepted, 4 rejected, 5 released, 6-9 accepted: Kafka writes the changes as ShareUpdates
        kinds = ["accept"] * 4 + ["reject", "release"] + ["accept"] * 4
        with klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                acknowledgement_mode="explicit") as c:
            got = []
            deadline = time.monotonic() + 60
            while not got and time.monotonic() < deadline:
                got = c.poll(timeout=1.0)
            assert [r.offset for r in got] == list(range(10))
            for r in got:
                c.acknowledge(r, kinds[r.offset])
            assert all(err is None for err in c.commit_sync().values())
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                topic_id = admin.describe_topics([topic])[topic].topic_id
            # redelivered once more (count 2) and released again
            again = []
            while not again and time.monotonic() < deadline:
                again = c.poll(timeout=1.0)
            assert [(r.offset, r.delivery_count) for r in again] == [(5, 2)]
            c.acknowledge(again[0], "release")
            assert all(err is None for err in c.commit_sync().values())
            c._aio._delivered.clear()
        state_partition = partition_for(coordinator_key(group, topic_id, 0), STATE_PARTITIONS)
        state_dir = tmp_path / "kafka-data" / f"__share_group_state-{state_partition}"
        records = list(_log_records(state_dir))
        kinds_written = [decode_state_record(k, v)[1] for k, v in records if k is not None
                         and decode_state_record(k, v) is not None]
        assert UPDATE_RECORD_TYPE in kinds_written, kinds_written
        state = replay_state(records, (group, topic_id, 0))
        assert _view(state) == (5, [(5, 5, AVAILABLE, 2), (6, 9, ACKNOWLEDGED, 1)])


UPDATES_PER_SNAPSHOT = 2


def _group_records(data_dir: Path, group: str):
    """(key, value, record type, decoded value) of ``group``'s share-state records in a broker's data directory, in
    log order, and every record (offset, key, value) of the state partition holding them."""
    out, partition = [], []
    for partition_dir in sorted(data_dir.glob("**/__share_group_state-*")):
        records = list(_log_records(partition_dir, offsets=True))
        for _, key, value in records:
            decoded = decode_state_record(key, value) if key is not None else None
            if decoded is not None and decoded[0][0] == group:
                out.append((key, value, decoded[1], decoded[2]))
                partition = records
    return out, partition


def _per_offset(state):
    return {} if state is None else {o: (b.delivery_state, b.delivery_count) for b in state.state_batches
                                     for o in range(b.first_offset, b.last_offset + 1)}


def test_klog_writes_updates_between_snapshots_and_replays_them_after_a_restart(tmp_path):
    """klog's share coordinator writes a ShareSnapshot, then ShareUpdates each carrying only the batches its write
    changed, a new snapshot every share.coordinator.snapshot.update.records.per.snapshot updates; every record
    replayed in order is the whole state, as are the records from the state partition's last redundant offset on
    (what pruning keeps); after a restart accepted and rejected records are done, released and held ones come
    back; Kafka's kafka-dump-log decodes the records."""
    from test_share_groups import PROPERTIES as SHARE_PROPERTIES
    from test_share_groups import abandon, redelivered_after_restart, ten_records_delivered

    config = _long_locks_and_short_snapshots(SHARE_PROPERTIES)
    data = tmp_path / "data"
    with klog.Broker(str(data), config=config) as b:
        topic, group, c, got = ten_records_delivered(b.bootstrap_servers)
        base = got[0].offset
        try:
            # one commit (one state write) per step; the first four change records past the start offset, so
            # whatever the snapshot cadence's phase, two of them are consecutive updates after one snapshot (an
            # update carrying every change since its snapshot would show)
            for step in ([(1, "reject")], [(3, "accept")], [(5, "accept")], [(7, "reject")],
                         [(0, "accept"), (2, "release")], [(4, "accept")]):
                for i, kind in step:
                    c.acknowledge(got[i], kind)
                assert all(err is None for err in c.commit_sync().values())
        finally:
            abandon(c)   # 6, 8 and 9 stay acquired: the broker stops while they are held
        with klog.AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
            topic_id = admin.describe_topics([topic])[topic].topic_id
    records, partition_records = _group_records(data, group)
    kinds = [kind for _, _, kind, _ in records]
    assert UPDATE_RECORD_TYPE in kinds, kinds
    run = 0
    for kind in kinds:   # never more updates in a row than the setting allows
        run = run + 1 if kind == UPDATE_RECORD_TYPE else 0
        assert run <= UPDATES_PER_SNAPSHOT, kinds
    ident = (group, topic_id, 0)
    o = base   # r0's offset (the join's marker records come first)
    expected = (o + 2, [(o + 2, o + 2, AVAILABLE, 1), (o + 3, o + 5, ACKNOWLEDGED, 1), (o + 6, o + 6, AVAILABLE, 1),
                        (o + 7, o + 7, ARCHIVED, 1), (o + 8, o + 9, AVAILABLE, 1)])
    assert _view(replay_state([(k, v) for k, v, _, _ in records], ident)) == expected
    # what pruning keeps: the records from the state partition's last redundant offset on
    end = partition_records[-1][0] + 1
    cut = last_redundant_offset(partition_records, end)
    assert 0 < cut < end
    assert _view(replay_state([(k, v) for o, k, v in partition_records if o >= cut], ident)) == expected
    # an update carries exactly the changes of its write (the state it leads to against the state before it)
    for i, (_, _, kind, v) in enumerate(records):
        if kind == UPDATE_RECORD_TYPE:
            before = _per_offset(replay_state([(k, val) for k, val, _, _ in records[:i]], ident))
            after = _per_offset(replay_state([(k, val) for k, val, _, _ in records[:i + 1]], ident))
            carried = {o: (b.delivery_state, b.delivery_count) for b in v.state_batches
                       for o in range(b.first_offset, b.last_offset + 1)}
            assert carried == {o: s for o, s in after.items() if before.get(o) != s}, (i, v)

    with klog.Broker(str(data), config=config) as b:
        assert redelivered_after_restart(b.bootstrap_servers, topic, group, 4) == [
            (b"r2", 2), (b"r6", 2), (b"r8", 2), (b"r9", 2)]

    if not java_available() or kafka_libs_dir() is None:
        return
    segments = sorted(str(s) for s in data.glob("**/__share_group_state-*/*.log") if s.stat().st_size > 0)
    dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--share-group-state-decoder", "--files",
                            ",".join(segments))
    assert dumped.returncode == 0, dumped.stderr
    lines = [line for line in dumped.stdout.splitlines() if f'"groupId":"{group}"' in line]
    assert any('"type":"1"' in line or '"type":1' in line for line in lines), dumped.stdout[-3000:]


def _long_locks_and_short_snapshots(share_properties: dict) -> dict:
    """The share tests' broker settings with locks that outlast the test and a snapshot every few updates."""
    return {**share_properties, "group.share.record.lock.duration.ms": 60000,
            "group.share.max.record.lock.duration.ms": 60000,
            "share.coordinator.snapshot.update.records.per.snapshot": UPDATES_PER_SNAPSHOT}


def test_a_compacted_state_topic_of_an_earlier_klog_keeps_working(tmp_path):
    """An earlier klog created ``__share_group_state`` compacted: as long as it is, each ShareUpdate carries every
    change since its snapshot (compaction keeps only a key's latest record), so what compaction keeps replays to the
    whole state, as every record does; after a restart accepted and rejected records stay done."""
    from test_share_groups import PROPERTIES as SHARE_PROPERTIES
    from test_share_groups import abandon, redelivered_after_restart, ten_records_delivered

    config = _long_locks_and_short_snapshots(SHARE_PROPERTIES)
    data = tmp_path / "data"
    with klog.Broker(str(data), config=config) as b:
        topic, group, c, got = ten_records_delivered(b.bootstrap_servers)
        base = got[0].offset
        try:
            with klog.AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
                admin.alter_configs({ConfigResource("topic", "__share_group_state"): {"cleanup.policy": "compact"}})
                topic_id = admin.describe_topics([topic])[topic].topic_id
            for step in ([(0, "accept")], [(1, "release")], [(2, "reject")], [(3, "accept"), (4, "accept")]):
                for i, kind in step:
                    c.acknowledge(got[i], kind)
                assert all(err is None for err in c.commit_sync().values())
        finally:
            abandon(c)
    records, _ = _group_records(data, group)
    assert UPDATE_RECORD_TYPE in [kind for _, _, kind, _ in records]
    ident, o = (group, topic_id, 0), base
    expected = (o + 1, [(o + 1, o + 1, AVAILABLE, 1), (o + 2, o + 2, ARCHIVED, 1), (o + 3, o + 4, ACKNOWLEDGED, 1),
                        (o + 5, o + 9, AVAILABLE, 1)])
    assert _view(replay_state([(k, v) for k, v, _, _ in records], ident)) == expected
    latest = {k: (k, v) for k, v, _, _ in records}
    kept = [(k, v) for k, v, _, _ in records if latest[k] == (k, v)]
    assert _view(replay_state(kept, ident)) == expected
    with klog.Broker(str(data), config=config) as b:
        assert redelivered_after_restart(b.bootstrap_servers, topic, group, 6) == [
            (b"r1", 2), (b"r5", 2), (b"r6", 2), (b"r7", 2), (b"r8", 2), (b"r9", 2)]

"""A share-partition's durable state is replayed as Kafka's share coordinator replays ``__share_group_state``: the
latest ShareSnapshot, then the ShareUpdate records written after it (a start offset and the changed state batches)
applied in order; a snapshot tombstone deletes the state. Checked on records klog encodes, and (Kafka side, long)
on the ShareSnapshot and ShareUpdate records Apache Kafka 4.3 itself wrote, read from its log files: klog's replay
gives the state the consumer's acknowledgements left (start offset, released record with its delivery count,
accepted records)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import klog
from klog.broker.coordinator.runtime import partition_for
from klog.broker.share_partitions import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from klog.broker.share_state import (
    UPDATE_RECORD_TYPE, coordinator_key, decode_state_record, replay_state, snapshot_key, snapshot_record,
    update_record,
)
from klog.client.admin import ConfigResource
from klog.records import decode_batches
from klog.testing.kafka import one_broker

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


def _log_records(partition_dir: Path):
    for segment in sorted(partition_dir.glob("*.log")):
        for batch in decode_batches(segment.read_bytes(), allow_partial_trailing=True, allow_compacted=True):
            if batch.is_control:
                continue
            for r in batch.records:
                yield r.key, r.value


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

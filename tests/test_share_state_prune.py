"""``__share_group_state`` kept as Apache Kafka 4.3 keeps it: created with Kafka's topic configs
(``cleanup.policy=delete``, ``retention.ms=-1``), ShareUpdates carrying only their write's changes, and pruned by
the share coordinator every ``share.coordinator.state.topic.prune.interval.ms``: the records below the state
partition's last redundant offset (the earliest of its share-partitions' latest ShareSnapshots) are deleted, so
its log start offset moves while share consumers acknowledge, and the state still replays whole (after a restart:
no accepted record delivered again); an idle share-partition is snapshotted again after
``share.coordinator.cold.partition.snapshot.interval.ms`` so that pruning goes on. The offset computation is checked
without sockets; the broker side on klog and on Apache Kafka 4.3 (one node each, restarted)."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from types import SimpleNamespace

import pytest

import klog
from klog.broker.config import ConfigError
from klog.broker.coordinator.runtime import partition_for
from klog.broker.share_partitions import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from klog.broker.share_state import (
    SNAPSHOT_RECORD_TYPE, TOPIC, coordinator_key, decode_state_record, last_redundant_offset, replay_state,
    snapshot_key, snapshot_record, update_record,
)
from klog.client.admin import ConfigResource
from klog.protocol.errors import KafkaError
from klog.testing.cluster import cluster_of
from klog.testing.ports import free_port

TOPIC_ID = uuid.uuid4()
A, B, C = ("a", TOPIC_ID, 0), ("b", TOPIC_ID, 0), ("a", TOPIC_ID, 1)


def _batch(first, last, state, count):
    return {"first_offset": first, "last_offset": last, "delivery_state": state, "delivery_count": count}


def _snap(ident, start, batches, epoch=1):
    return snapshot_record(*ident, snapshot_epoch=epoch, leader_epoch=0, start_offset=start, batches=batches,
                           create_ms=1, now_ms=1)


def _update(ident, start, batches, epoch=1):
    return update_record(*ident, snapshot_epoch=epoch, leader_epoch=0, start_offset=start, batches=batches)


def _view(state):
    return None if state is None else (state.start_offset, [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches])


def test_last_redundant_offset_is_the_earliest_latest_snapshot_of_the_partition():
    records = [_snap(A, 0, []), _snap(B, 0, []), _update(A, 0, [_batch(0, 0, ACKNOWLEDGED, 1)]),
               _snap(A, 1, [], 2), _update(B, 0, [_batch(0, 1, ARCHIVED, 1)]), _update(A, 2, [])]
    logged = [(offset, k, v) for offset, (k, v) in enumerate(records)]
    # B's latest snapshot is its first record: nothing before it may go
    assert last_redundant_offset(logged, 6) == 1
    # B snapshots again: A's latest snapshot (3) is now the earliest one needed
    logged.append((6, *_snap(B, 2, [], 2)))
    assert last_redundant_offset(logged, 7) == 3
    # a share-partition with updates but no snapshot yet needs them from its first one
    logged.append((7, *_update(C, 5, [_batch(5, 5, AVAILABLE, 1)])))
    logged.append((8, *_update(C, 5, [_batch(6, 6, AVAILABLE, 1)])))
    assert last_redundant_offset(logged, 9) == 3
    logged.append((9, *_snap(C, 6, [], 1)))
    assert last_redundant_offset(logged, 10) == 3
    # a deleted share-partition (snapshot tombstone) needs nothing; none left: everything up to the end goes
    logged += [(10, snapshot_key(*A), None), (11, snapshot_key(*B), None)]
    assert last_redundant_offset(logged, 12) == 9
    logged.append((12, snapshot_key(*C), None))
    assert last_redundant_offset(logged, 13) == 13
    # records at or past the end given (not replicated yet) do not count
    assert last_redundant_offset(logged, 6) == 1


def test_what_pruning_keeps_replays_every_share_partition_the_same():
    """A random history of three share-partitions in one state partition (snapshots, updates carrying only their
    write's changes, deletions): each one's state replayed from the last redundant offset on is its state replayed
    from the beginning."""
    rng = random.Random(35)
    idents = [A, B, C]
    for _ in range(50):
        records = []
        for _ in range(rng.randrange(1, 40)):
            ident = rng.choice(idents)
            roll = rng.random()
            start = rng.randrange(0, 20)
            batches = [_batch(o, o, rng.choice((AVAILABLE, ACKNOWLEDGED, ARCHIVED)), rng.randrange(1, 4))
                       for o in sorted(rng.sample(range(start, start + 30), rng.randrange(0, 5)))]
            if roll < 0.3:
                records.append(_snap(ident, start, batches))
            elif roll < 0.9:
                records.append(_update(ident, rng.choice((-1, start)), batches))
            else:
                records.append((snapshot_key(*ident), None))
        logged = [(offset, k, v) for offset, (k, v) in enumerate(records)]
        cut = last_redundant_offset(logged, len(logged))
        kept = [(k, v) for offset, k, v in logged if offset >= cut]
        for ident in idents:
            assert _view(replay_state(kept, ident)) == _view(replay_state(records, ident)), (ident, cut, records)


def test_updates_replay_in_order_with_kafkas_overlap_rule():
    """Each ShareUpdate carries only its write's changes and is merged onto the snapshot and the updates before it
    in log order as Kafka's PersisterStateBatchCombiner merges them: where they overlap the higher delivery count
    wins, then the higher state (a stale write cannot take a record back)."""
    records = [_snap(A, 10, [_batch(10, 19, AVAILABLE, 1)]),
               _update(A, 10, [_batch(12, 13, AVAILABLE, 2)]),      # 12-13 released after a second delivery
               _update(A, 10, [_batch(10, 11, ACKNOWLEDGED, 1)]),   # 10-11 accepted: the start moves next
               _update(A, 12, [_batch(12, 12, AVAILABLE, 1)]),      # a stale view of 12: count 2 stays
               _update(A, -1, [_batch(15, 15, ARCHIVED, 1), _batch(20, 20, AVAILABLE, 1)])]
    assert _view(replay_state(records, A)) == (12, [(12, 13, AVAILABLE, 2), (14, 14, AVAILABLE, 1),
                                                    (15, 15, ARCHIVED, 1), (16, 20, AVAILABLE, 1)])


def test_prune_interval_is_validated_as_kafkas():
    from klog.broker.config import BrokerConfig

    assert BrokerConfig({"share.coordinator.state.topic.prune.interval.ms": "1"})[
        "share.coordinator.state.topic.prune.interval.ms"] == 1
    for bad in ("0", "-5", "soon"):
        with pytest.raises(ConfigError, match="share.coordinator.state.topic.prune.interval.ms"):
            BrokerConfig({"share.coordinator.state.topic.prune.interval.ms": bad})
    with pytest.raises(ConfigError, match="share.coordinator.snapshot.update.records.per.snapshot"):
        BrokerConfig({"share.coordinator.snapshot.update.records.per.snapshot": "501"})


# --- on a broker: klog and Apache Kafka 4.3 from the same properties --------------------------------------------

PRUNE_INTERVAL_MS = 1000
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
              "group.share.record.lock.duration.ms": 60000, "group.share.max.record.lock.duration.ms": 60000,
              "offsets.topic.replication.factor": 1, "share.coordinator.state.topic.replication.factor": 1,
              "share.coordinator.state.topic.min.isr": 1,
              "share.coordinator.state.topic.prune.interval.ms": PRUNE_INTERVAL_MS,
              "share.coordinator.snapshot.update.records.per.snapshot": 2}
#: Kafka 4.3's ShareCoordinatorService.shareGroupStateTopicConfigs with the settings above
STATE_TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
                       "segment.bytes": "104857600", "min.insync.replicas": "1"}
STATE_PARTITIONS = 50


@contextlib.contextmanager
def _one_node(kind, root, properties):
    """One broker (``bootstrap_servers``) and its ``restart()``: klog in this process on a fixed port (the bootstrap
    stays across the restart), Apache Kafka 4.3 as a one-node cluster; the same properties."""
    if kind == "kafka":
        with cluster_of("kafka", root, 1, properties=properties, heap="512m") as cluster:
            yield SimpleNamespace(bootstrap_servers=cluster.bootstrap_servers, restart=lambda: cluster.restart(1))
        return
    port = free_port()
    node = SimpleNamespace(bootstrap_servers=f"127.0.0.1:{port}",
                           broker=klog.Broker(str(root / "data"), port=port, config=dict(properties)).start())

    def restart():
        node.broker.stop()
        node.broker = klog.Broker(str(root / "data"), port=port, config=dict(properties)).start()

    node.restart = restart
    try:
        yield node
    finally:
        node.broker.stop()


def _log_start(bootstrap, partition, timeout=30.0):
    """The state partition's log start offset (ListOffsets earliest), asked until the broker answers (it may be
    restarting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                found = admin.list_offsets({(TOPIC, partition): "earliest"})
            return next(iter(found.values())).offset
        except (KafkaError, OSError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_state_topic_is_pruned_while_acknowledging_and_survives_a_restart(tmp_path, kind):
    from test_share_groups import abandon, redelivered_after_restart, ten_records_delivered

    with _one_node(kind, tmp_path / "node", PROPERTIES) as node:
        bootstrap = node.bootstrap_servers
        topic, group, c, got = ten_records_delivered(bootstrap)
        try:
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                topic_id = admin.describe_topics([topic])[topic].topic_id
                configs = admin.describe_configs([ConfigResource("topic", TOPIC)])[ConfigResource("topic", TOPIC)]
            assert {k: configs[k].value for k in STATE_TOPIC_CONFIGS} == STATE_TOPIC_CONFIGS
            state_partition = partition_for(coordinator_key(group, topic_id, 0), STATE_PARTITIONS)
            # one commit (one state write) per step: with a snapshot every 2 updates the share-partition's latest
            # snapshot moves on, and the records before it are pruned
            for step in ([(0, "accept"), (1, "accept")], [(2, "release")], [(3, "reject")],
                         [(4, "accept"), (5, "accept")], [(6, "accept")], [(7, "accept")]):
                for i, kind_ in step:
                    c.acknowledge(got[i], kind_)
                assert all(err is None for err in c.commit_sync().values())
            deadline = time.monotonic() + 10 * PRUNE_INTERVAL_MS / 1000 + 20
            while _log_start(bootstrap, state_partition) == 0:
                assert time.monotonic() < deadline, "the state partition's log start never moved"
                time.sleep(0.2)
        finally:
            abandon(c)   # 8-9 stay acquired: the broker stops while they are held
        node.restart()
        assert _log_start(bootstrap, state_partition) > 0
        # released and held records come back (the released one with its count), accepted and rejected ones never
        # again (the held ones' counts differ: klog writes acquired records as available with their counts, Kafka
        # writes only the acknowledged batches)
        again = redelivered_after_restart(bootstrap, topic, group, 3)
        assert [value for value, _ in again] == [b"r2", b"r8", b"r9"]
        assert dict(again)[b"r2"] == 2


def _first_state_record(bootstrap, partition):
    """(offset, decoded ShareSnapshot/ShareUpdate record) at a state partition's log start: a plain consumer reads
    the internal topic."""
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(TOPIC, partition)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            records = c.poll(timeout=0.5)
            if records:
                return records[0].offset, decode_state_record(records[0].key, records[0].value)
    return None, None


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_an_idle_share_partition_is_snapshotted_again_so_pruning_goes_on(tmp_path, kind):
    """With a snapshot only every 500 updates, the records of a share-partition that stops being written are all
    needed (its snapshot and every update since); share.coordinator.cold.partition.snapshot.interval.ms after its
    last snapshot the coordinator writes it again as a snapshot (its creation time kept, so its write time
    differs), and the pruning deletes everything before that: the state partition then starts at that snapshot.
    Once every share-partition's latest snapshot is such a one, no further one is written (the log end stays)."""
    from test_share_groups import abandon, ten_records_delivered

    properties = {**PROPERTIES, "share.coordinator.snapshot.update.records.per.snapshot": 500,
                  "share.coordinator.cold.partition.snapshot.interval.ms": 1000}
    with _one_node(kind, tmp_path / "node", properties) as node:
        bootstrap = node.bootstrap_servers
        topic, group, c, got = ten_records_delivered(bootstrap)
        try:
            for i in range(6):   # one state write (an update) each
                c.acknowledge(got[i], "accept")
                assert all(err is None for err in c.commit_sync().values())
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                topic_id = admin.describe_topics([topic])[topic].topic_id
            state_partition = partition_for(coordinator_key(group, topic_id, 0), STATE_PARTITIONS)
            deadline = time.monotonic() + 60
            while True:
                offset, first = _first_state_record(bootstrap, state_partition)
                if first is not None and first[1] == SNAPSHOT_RECORD_TYPE and first[2] is not None \
                        and first[2].create_timestamp != first[2].write_timestamp:
                    break
                assert time.monotonic() < deadline, ("no cold snapshot at the log start", offset, first)
                time.sleep(0.3)
            # (when the cold snapshot came depends on how long the acknowledgements took: after them, or between)
            assert offset > 0 and first[0] == (group, topic_id, 0)
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                end = next(iter(admin.list_offsets({(TOPIC, state_partition): "latest"}).values())).offset
            time.sleep(2.0)   # two more cold-snapshot intervals (1 s): nothing new to snapshot
            with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
                assert next(iter(admin.list_offsets({(TOPIC, state_partition): "latest"}).values())).offset == end
        finally:
            abandon(c)

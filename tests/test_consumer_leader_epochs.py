"""The klog consumer's positions and their leader epochs (KIP-320), on real klog clusters.

A position is (offset, leader epoch of the record before it): the consumer commits both, and a consumer that resumes
from a committed offset (Kafka's Java client, librdkafka) validates the pair with OffsetsForLeaderEpoch: an epoch
older than the records before the offset reads as a truncation of the log (a rewind, or an error with
auto.offset.reset=none). So the epoch must be the last delivered record's, by ``poll`` and by ``poll_batch`` alike,
and a seek to a bare offset drops the old one.

The klog consumer validates its own positions the same way: Fetch names the leader epoch it knows (a stale leader
answers FENCED_LEADER_EPOCH), and after a leader change, or from a committed offset, a position with an epoch waits
for OffsetForLeaderEpoch: after an unclean election cut the log below it, it resumes at the first offset known to
diverge (or fails with LogTruncationError under auto.offset.reset=none) instead of resetting to the log's start or
end, which re-reads or skips records.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import klog
from klog.client import ConsumerRecord, OffsetAndMetadata, TopicPartition
from klog.client.errors import LogTruncationError
from klog.testing.cluster import cluster_of
from klog.testing.cluster_api import Cluster

pytestmark = pytest.mark.timeout(180)


def _records(consumer: klog.Consumer, count: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    end = time.monotonic() + 60
    while len(got) < count and time.monotonic() < end:
        got += consumer.poll(timeout=0.5, max_records=count - len(got))
    assert len(got) == count, got
    return got


def _rows(consumer: klog.Consumer, count: int) -> int:
    rows = 0
    end = time.monotonic() + 60
    while rows < count and time.monotonic() < end:
        batch = consumer.poll_batch(timeout=0.5)
        rows += batch.num_rows if batch is not None else 0
    return rows


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_committed_leader_epoch_is_the_last_delivered_records_by_poll_and_poll_batch_across_a_leader_change(
        kind: str, tmp_path: Path) -> None:
    # the group's offsets on every broker: the one stopped may be the group coordinator
    with cluster_of(kind, tmp_path / kind, 3, properties={"offsets.topic.replication.factor": 3}) as cluster:
        cluster.wait_for_brokers()
        _across_a_leader_change(cluster)


def _across_a_leader_change(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    assert cluster.create_topic(topic, 1, 3)[0] == 0
    old_leader = cluster.wait_for_topic(topic, 1)[0]
    cluster.produce(topic, [0], 10, tag="a")
    bootstrap = cluster.bootstrap_servers
    groups = [f"g-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"]

    def consumers() -> tuple[klog.Consumer, klog.Consumer]:
        pair = tuple(klog.Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False) for group in groups)
        for consumer in pair:
            consumer.assign([tp])   # a poll's own lookup of the commit may time out while the coordinator
            consumer.committed([tp], timeout=60)   # loads: wait for it here
        return pair   # type: ignore[return-value]

    batches, records = consumers()
    with batches, records:
        assert _rows(batches, 10) == 10
        first = _records(records, 10)
        batches.commit()
        records.commit()
        assert batches.committed([tp])[tp].leader_epoch == first[-1].leader_epoch
        assert records.committed([tp])[tp].leader_epoch == first[-1].leader_epoch

    cluster.stop_node(old_leader)
    cluster.wait_for_leader(topic, 0, exclude=old_leader)
    cluster.produce(topic, [0], 10, tag="b")
    # (new consumers resume from the commits: one living through the leader change can stall, a fault of its own)
    batches, records = consumers()
    with batches, records:
        assert _rows(batches, 10) == 10
        second = _records(records, 10)
        assert second[0].offset == 10
        assert second[-1].leader_epoch > first[-1].leader_epoch   # written after the leader change
        batches.commit()
        records.commit()
        assert batches.committed([tp])[tp] == OffsetAndMetadata(20, "", second[-1].leader_epoch)
        assert records.committed([tp])[tp] == OffsetAndMetadata(20, "", second[-1].leader_epoch)

        # a seek to a bare offset keeps no epoch (the old one names no record before the new offset)
        batches.seek(tp, 3)
        batches.commit()
        assert batches.committed([tp])[tp] == OffsetAndMetadata(3, "", -1)
        # poll_batch limited to fewer rows than a fetch holds: the epoch of the last row handed out
        assert batches.poll_batch(timeout=30, max_records=2).num_rows == 2
        batches.commit()
        assert batches.committed([tp])[tp] == OffsetAndMetadata(5, "", first[4].leader_epoch)


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_a_position_truncated_away_by_an_unclean_election_resumes_at_the_diverging_offset_and_skips_nothing(
        kind: str, tmp_path: Path) -> None:
    # 2 brokers and a controller of their own: the brokers can both be down without losing the quorum
    # (on both brokers, the group's offsets too: they take the unclean election the topic takes)
    properties = {"unclean.leader.election.enable": "true", "min.insync.replicas": 1,
                  "offsets.topic.replication.factor": 2, "offsets.topic.num.partitions": 1,
                  "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
    with cluster_of(kind, tmp_path / kind, 2, controllers=1, properties=properties) as cluster:
        cluster.wait_for_brokers()
        _truncated_away(cluster)


def _truncated_away(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert cluster.create_topic(topic, 1, 2)[0] == 0
    leader = cluster.wait_for_leader(topic, 0)
    follower = next(n for n in cluster.node_ids if n != leader)
    cluster.wait_for_isr(topic, 0, [leader, follower])
    bootstrap = cluster.bootstrap_servers
    with klog.Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as first:
        assert first.committed([tp], timeout=60) == {tp: None}   # the group's offsets topic made while both brokers run
    cluster.wait_for_isr("__consumer_offsets", 0, [leader, follower])
    cluster.produce(topic, [0], 10, tag="a")
    cluster.stop_node(follower)   # leaves the ISR: offsets 10-19 are on the leader only
    cluster.wait_for_isr(topic, 0, [leader])
    cluster.produce(topic, [0], 10, tag="b")
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                       enable_auto_commit=False) as reading:
        reading.assign([tp])
        read = _records(reading, 20)

        # the leader dies; the follower, whose log ends at 10, is elected uncleanly and takes new records at 10-14
        cluster.kill(leader)
        cluster.restart(follower)
        assert cluster.wait_for_leader(topic, 0) == follower
        written = [value for _, value in cluster.produce(topic, [0], 5, tag="c")]

        # the consumer reading at 20 (and one resuming from the commit) goes on at 10, where the logs diverge:
        # neither the start of the log again (earliest) nor past the new records
        after = _records(reading, 5)
        assert [(r.offset, r.value) for r in after] == [(10 + i, v) for i, v in enumerate(sorted(written))]
        # what the reading consumer would have committed (a commit before the election was on the old leader only)
        with klog.Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False) as committing:
            committing.commit({tp: OffsetAndMetadata(20, "", read[-1].leader_epoch)})
        with klog.Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False) as resuming:
            resuming.assign([tp])
            assert resuming.committed([tp], timeout=60)[tp].offset == 20
            assert [r.offset for r in _records(resuming, 5)] == list(range(10, 15))
        # auto.offset.reset=none: LogTruncationError naming the first offset known to diverge
        with klog.Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="none",
                           enable_auto_commit=False) as strict:
            strict.assign([tp])
            assert strict.committed([tp], timeout=60)[tp].offset == 20
            with pytest.raises(LogTruncationError) as raised:
                end = time.monotonic() + 60
                while time.monotonic() < end:
                    strict.poll(timeout=0.5)
            assert raised.value.divergent_offsets == {tp: OffsetAndMetadata(10, "", read[9].leader_epoch)}
            assert raised.value.fetch_offsets == {tp: 20}

"""The klog consumer's positions and their leader epochs (KIP-320), on real klog clusters.

A position is (offset, leader epoch of the record before it): the consumer commits both, and a consumer that resumes
from a committed offset (Kafka's Java client, librdkafka) validates the pair with OffsetsForLeaderEpoch: an epoch
older than the records before the offset reads as a truncation of the log (a rewind, or an error with
auto.offset.reset=none). So the epoch must be the last delivered record's, by ``poll`` and by ``poll_batch`` alike,
and a seek to a bare offset drops the old one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import klog
from klog.client import ConsumerRecord, OffsetAndMetadata, TopicPartition
from klog.testing.cluster import KlogCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KlogCluster]:
    with KlogCluster(tmp_path, 3) as started:
        started.wait_for_brokers()
        yield started


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


def test_committed_leader_epoch_is_the_last_delivered_records_by_poll_and_poll_batch_across_a_leader_change(
        cluster: KlogCluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    cluster.create_topic(topic, 1, 3)
    old_leader = cluster.wait_for_topic(topic, 1)[0]
    cluster.produce(topic, [0], 10, tag="a")
    bootstrap = cluster.bootstrap_servers
    with klog.Consumer(bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:6]}",
                       auto_offset_reset="earliest", enable_auto_commit=False) as batches, \
            klog.Consumer(bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:6]}",
                          auto_offset_reset="earliest", enable_auto_commit=False) as records:
        batches.assign([tp])
        records.assign([tp])
        assert _rows(batches, 10) == 10
        first = _records(records, 10)
        batches.commit()
        records.commit()
        assert batches.committed([tp])[tp].leader_epoch == first[-1].leader_epoch
        assert records.committed([tp])[tp].leader_epoch == first[-1].leader_epoch

        cluster.stop_node(old_leader)
        cluster.wait_for_leader(topic, 0, exclude=old_leader)
        cluster.produce(topic, [0], 10, tag="b")
        assert _rows(batches, 10) == 10
        second = _records(records, 10)
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

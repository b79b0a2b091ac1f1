"""``share.partition.max.record.locks`` (the group config over ``group.share.partition.max.record.locks``) on klog
and on Apache Kafka 4.3 from the same properties: share consumers of one partition that hold their records (no
acknowledgement) acquire nothing past the in-flight window until acknowledgements move the share-partition start
offset; then the next window is acquired. The consumers ask for batch_optimized acquisition (KIP-1206), where
Kafka 4.3.1's SharePartition takes whole batches, so the window ends with the record batch holding the limit's last
record, on klog as on Kafka."""

from __future__ import annotations

import time
import uuid

import pytest

import klog
from klog.client.admin import ConfigResource
from klog.testing.kafka import one_broker

#: the smallest limit Kafka accepts (group.share.min.partition.max.record.locks)
LIMIT = 100
#: the producer flushes every BATCH records: one record batch each
BATCH = 7
RECORDS = 300
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share", "num.partitions": 1,
              "offsets.topic.num.partitions": 3, "group.share.heartbeat.interval.ms": 500,
              "group.share.min.heartbeat.interval.ms": 500,
              # locks outlast the test: only acknowledgements move the window
              "group.share.record.lock.duration.ms": 60000}


def _window_end(start: int) -> int:
    """The end (exclusive) of the in-flight window acquired from ``start`` with nothing in flight: the batch
    holding the limit's last record is completed."""
    last = start + LIMIT - 1
    return (last // BATCH + 1) * BATCH


def _poll_until_records(consumer, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = consumer.poll(timeout=0.5)
        if records:
            return records
    return []


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_held_records_never_exceed_the_partition_record_lock_window(kind, tmp_path):
    with one_broker(kind, tmp_path, PROPERTIES) as bootstrap:
        topic = f"locks-{uuid.uuid4().hex[:6]}"
        group = f"g-{topic}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
            admin.alter_configs({ConfigResource("group", group): {
                "share.partition.max.record.locks": str(LIMIT), "share.auto.offset.reset": "earliest"}})
        with klog.Producer(bootstrap_servers=bootstrap) as p:
            for i in range(RECORDS):
                p.send(topic, value=b"r%d" % i, partition=0)
                if i % BATCH == BATCH - 1:
                    p.flush()
            p.flush()
        consumers = [klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        acknowledgement_mode="explicit") for _ in range(3)]
        try:
            first = _poll_until_records(consumers[0], 30)
            window = _window_end(0)
            assert [r.offset for r in first] == list(range(window))
            # the window is full: the other members acquire nothing while the records are held
            for c in consumers[1:]:
                assert _poll_until_records(c, 3) == []
            for r in first:
                consumers[0].acknowledge(r, "accept")
            assert all(err is None for err in consumers[0].commit_sync().values())
            # the start offset moved past the accepted records: the next window
            second = _poll_until_records(consumers[1], 30)
            assert [r.offset for r in second] == list(range(window, _window_end(window)))
            assert _poll_until_records(consumers[2], 3) == []
            assert _poll_until_records(consumers[0], 3) == []
        finally:
            for c in consumers:
                c._aio._delivered.clear()   # held records: released when the sessions close
                c.close()

"""Committed offsets on klog and on Apache Kafka 4.x, the same scenarios through confluent-kafka's AdminClient.

Deleting a topic deletes every group's committed offsets of it (Kafka's GroupCoordinator.onPartitionsDeleted writes
their tombstones to __consumer_offsets), so a topic created again under the same name starts with no committed
offsets, while the group's offsets of other topics stay. One broker of each kind for the module.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.kafka import one_broker

pytestmark = pytest.mark.java

PROPS = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
#: confluent-kafka's "no committed offset" (OFFSET_INVALID)
NO_OFFSET = -1001
WAIT_S = 30.0


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    with one_broker(request.param, root, PROPS) as bootstrap:
        yield bootstrap


def _wait_for(what: str, condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S}s: {what}"
        time.sleep(0.2)


def _create(admin: AdminClient, topic: str, partitions: int) -> None:
    def created() -> bool:
        future = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
        try:
            future.result(10)
            return True
        except Exception as exc:  # noqa: BLE001 - the deletion of the same name may still be under way
            if "TOPIC_ALREADY_EXISTS" in str(exc) and topic in admin.list_topics(timeout=10).topics:
                return True
            return False

    _wait_for(f"topic {topic} created", created)
    _wait_for(f"topic {topic} in metadata",
              lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == partitions)


def _committed(admin: AdminClient, group: str, partitions: list[TopicPartition] | None = None) -> dict:
    request = ConsumerGroupTopicPartitions(group, partitions)
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def _commit(admin: AdminClient, group: str, offsets: list[TopicPartition]) -> None:
    def committed() -> bool:
        result = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[group].result(10)
        # a partition the coordinator's metadata does not show yet answers UNKNOWN_TOPIC_OR_PARTITION: again
        return all(tp.error is None for tp in result.topic_partitions)

    _wait_for(f"{group}'s offsets committed", committed)


def test_deleting_a_topic_deletes_its_committed_offsets_from_every_group(server):
    admin = AdminClient({"bootstrap.servers": server})
    gone, kept = f"gone-{uuid.uuid4().hex[:6]}", f"kept-{uuid.uuid4().hex[:6]}"
    groups = [f"g1-{uuid.uuid4().hex[:6]}", f"g2-{uuid.uuid4().hex[:6]}"]
    _create(admin, gone, 2)
    _create(admin, kept, 1)
    for n, group in enumerate(groups):
        offsets = [TopicPartition(gone, 0, 5 + n), TopicPartition(gone, 1, 7 + n), TopicPartition(kept, 0, 3 + n)]
        _commit(admin, group, offsets)
        assert _committed(admin, group) == {(gone, 0): 5 + n, (gone, 1): 7 + n, (kept, 0): 3 + n}

    admin.delete_topics([gone])[gone].result(10)
    _wait_for(f"topic {gone} deleted", lambda: gone not in admin.list_topics(timeout=10).topics)
    _create(admin, gone, 2)   # the same name again: a new topic

    asked = [TopicPartition(gone, 0), TopicPartition(gone, 1)]
    for n, group in enumerate(groups):
        # the deletion reaches the coordinator as the broker applies the metadata (Kafka: asynchronously)
        _wait_for(f"{group}'s offsets of {gone} removed", lambda: (gone, 0) not in _committed(admin, group))
        assert _committed(admin, group) == {(kept, 0): 3 + n}
        assert _committed(admin, group, asked) == {(gone, 0): NO_OFFSET, (gone, 1): NO_OFFSET}

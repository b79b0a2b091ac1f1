"""Upgrade seam: a single-node klog data directory's topics become the first records of a quorum.

A data directory as single-node klog wrote it (partition logs, ``klog-topics.json`` with config overrides; see
tests/test_broker_cluster_metadata.py for the broker migrating one at start); the records built from it
replay into an image with the same topics, topic ids, partition counts and overrides, every partition led by
the node at leader epoch 0, and the same records appended to a metadata log load to the same image.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, MIGRATING_DIRECTORY
from klog.metadata.migration import TOPICS_FILE, single_node_topic_records, topic_store_records
from klog.metadata.storage import MetadataLog


def test_a_single_node_data_dir_keeps_its_topics_ids_partitions_and_configs(tmp_path):
    from test_broker_cluster_metadata import write_single_node_data_dir

    data = str(tmp_path / "data")
    os.makedirs(data)
    write_single_node_data_dir(tmp_path / "data", {"orders": (3, {"retention.ms": "12345"}), "events": (1, {})},
                               per_partition=2)
    stored = json.load(open(os.path.join(data, TOPICS_FILE)))["topics"]
    records = topic_store_records([data], node_id=7)
    image, changes = replay(EMPTY_IMAGE, records, 0)
    for name in ("orders", "events"):
        t = image.topic(name)
        assert t is not None and t.id == uuid.UUID(stored[name]["id"])
        assert sorted(t.partitions) == list(range(stored[name]["partitions"]))
        for p in t.partitions.values():
            assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((7,), (7,), 7, 0, 0)
            assert p.directories == (MIGRATING_DIRECTORY,)
    assert image.topic_config("orders") == {"retention.ms": "12345"}
    assert image.topic_config("events") == stored["events"]["configs"]
    assert set(changes.created_topics.values()) >= {"orders", "events"}
    # the same records written to a metadata log load to the same topics
    with MetadataLog(str(tmp_path / "meta")) as log:
        log.append(records, epoch=1)
        assert log.load().image.same_content(image)


def test_partition_directories_without_metadata_are_adopted(tmp_path):
    (tmp_path / "lost-0").mkdir()
    (tmp_path / "lost-2").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "known-1").mkdir()
    (tmp_path / "known-0.abc-delete").mkdir()
    tid = uuid.uuid4()
    (tmp_path / TOPICS_FILE).write_text(json.dumps(
        {"version": 1, "topics": {"known": {"id": str(tid), "partitions": 1, "configs": {}, "internal": False}}}))
    image, _ = replay(EMPTY_IMAGE, topic_store_records([str(tmp_path)], node_id=1))
    assert sorted(image.topics_by_name) == ["known", "lost"]
    assert image.topic("known").id == tid and sorted(image.topic("known").partitions) == [0, 1]
    assert sorted(image.topic("lost").partitions) == [0, 1, 2]
    # adopted ids are deterministic, so every node of a new quorum proposes the same one
    again, _ = replay(EMPTY_IMAGE, topic_store_records([str(tmp_path)], node_id=1))
    assert again.topic("lost").id == image.topic("lost").id


def test_a_fresh_data_dir_has_no_records_and_a_broken_store_is_named(tmp_path):
    assert topic_store_records([str(tmp_path)], node_id=1) == []
    (tmp_path / TOPICS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=f"{TOPICS_FILE}: unreadable topic metadata"):
        topic_store_records([str(tmp_path)], node_id=1)
    with pytest.raises(ValueError, match="topic 'x': bad entry"):
        single_node_topic_records({"x": {"id": "nope", "partitions": 1}}, node_id=1)

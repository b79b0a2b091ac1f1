"""A node that restarts publishes no metadata image until it has caught up with the quorum's log, as Kafka's
MetadataLoader (it publishes nothing before the loaded offset reaches the high watermark, a snapshot loads as one
image): on 3 combined nodes, node 3 is SIGKILLed while it leads a partition and holds a replica of a topic; while it
is away that topic is deleted, another one created and deleted, and the partition's leadership moves. When node 3
starts again its broker never publishes an image the quorum had moved past: it never creates the deleted topics,
never leads the partition at its old epoch, removes the deleted topic's leftover directories, and is unfenced.

Asserted on node 3's log lines since its restart (``created topic X`` is logged for every topic an image published to
the broker creates, ``partition T-P: leader in epoch E`` when the replica manager makes it a leader). The rule itself,
sans IO, is tests/test_metadata_catch_up.py. Kafka's broker logs none of these lines; its behaviour is the rule quoted
in klog/metadata/loader.py::StartupCatchUp."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import KlogCluster

pytestmark = pytest.mark.timeout(180)

#: no preferred-leader election moves the partition back to node 3 on its own
PROPERTIES = {"auto.leader.rebalance.enable": "false"}


def _delete_topic(cluster: KlogCluster, name: str) -> None:
    with cluster.wire(cluster.live_nodes()[0]) as wire:
        answer = wire.request(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                        "timeout_ms": 30000})
    assert answer.responses[0].error_code == ErrorCode.NONE, answer


def _until_gone(cluster: KlogCluster, name: str) -> None:
    def gone() -> bool:
        return all(cluster.leaders(i, name) is None for i in cluster.live_nodes())

    cluster._wait(gone, 30, lambda: f"topic {name} deleted on every live node")


def _dirs(log_dir: Path, topic: str) -> list[str]:
    """The partition directories of ``topic`` in use (not those renamed for a delayed deletion)."""
    return sorted(p.name for p in log_dir.iterdir() if re.fullmatch(rf"{re.escape(topic)}-\d+", p.name))


def test_a_restarted_node_publishes_no_image_before_it_caught_up_with_the_quorum(tmp_path: Path) -> None:
    with KlogCluster(tmp_path, 3, properties=PROPERTIES) as cluster:
        cluster.wait_for_brokers()
        for name, partitions in (("kept", 3), ("gone", 1)):
            assert cluster.create_topic(name, partitions, 3)[0] == ErrorCode.NONE
        leaders = cluster.wait_for_topic("kept", 3)
        cluster.wait_for_topic("gone", 1)
        led = [p for p, leader in leaders.items() if leader == 3]
        assert led, f"node 3 leads no partition of kept: {leaders}"
        moved = led[0]
        assert _dirs(cluster.log_dir(3), "gone") == ["gone-0"]

        cluster.kill(3)
        _delete_topic(cluster, "gone")
        assert cluster.create_topic("ephemeral", 1, 2)[0] == ErrorCode.NONE
        _delete_topic(cluster, "ephemeral")
        _until_gone(cluster, "gone")
        _until_gone(cluster, "ephemeral")
        # fenced once its session expires: the partition it led moves to a live replica, in a new epoch
        new_leader = cluster.wait_for_leader("kept", moved, exclude=3)

        cluster.restart(3)   # returns once node 3's client listener is open: it was unfenced
        cluster.wait_for_brokers([1, 2, 3])
        lines = cluster.log_lines(3)
        text = "\n".join(lines)
        for deleted in ("gone", "ephemeral"):
            assert not [line for line in lines if f"created topic {deleted} " in line], text
        assert not [line for line in lines if f"partition kept-{moved}: leader in epoch" in line], text
        assert [line for line in lines if f"partition kept-{moved}: follower of broker {new_leader}" in line], text
        assert any("caught up with the quorum's metadata log" in line for line in lines), text
        # the deleted topic's leftover directory went as the first image was published (Kafka's stray logs)
        assert _dirs(cluster.log_dir(3), "gone") == [], text
        assert _dirs(cluster.log_dir(3), "ephemeral") == [], text

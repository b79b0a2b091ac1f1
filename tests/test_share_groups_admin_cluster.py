"""Share-group offset administration on a 3-node klog cluster, where the group's coordinator, the share
coordinators of its share-partitions (the leaders of their ``__share_group_state`` partitions) and the partition
leaders are different brokers: Kafka's ``kafka-share-groups`` resets the offsets (InitializeShareGroupState and
ReadShareGroupStateSummary sent between brokers), the partition leaders load the new state when the group comes
back (ReadShareGroupState), and the offsets are deleted (DeleteShareGroupState)."""

from __future__ import annotations

import time
import uuid

import pytest

import klog
from klog.broker.coordinator.runtime import partition_for
from klog.broker.share_state import TOPIC as STATE_TOPIC
from klog.broker.share_state import coordinator_key
from klog.testing.cluster import KlogCluster
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

from test_share_groups_cluster import PARTITIONS, PROPERTIES, _group_with_remote_state, _produce

pytestmark = pytest.mark.skipif(not java_available() or kafka_libs_dir() is None,
                                reason="needs java and the Kafka 4.3 jars (tools/install-peers.sh)")

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _tool(bootstrap, *args):
    r = run_kafka_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _offsets(bootstrap, group):
    return {int(r[2]): (int(r[3]), int(r[4])) for r in (line.split() for line in _tool(
        bootstrap, "--describe", "--group", group).splitlines()) if r and r[0] == group}


def _drain(consumer, want, timeout=60.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout=0.3))
    consumer.commit_sync()
    return got


@pytest.mark.long
def test_share_group_offsets_reset_and_deleted_across_brokers(tmp_path):
    with KlogCluster(tmp_path, 3, properties=PROPERTIES) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"share-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, PARTITIONS, 3)])
            topic_id = admin.describe_topics([topic])[topic].topic_id
        leaders = cluster.wait_for_topic(topic, PARTITIONS)
        group = _group_with_remote_state(cluster, bootstrap, topic, leaders)
        offsets_leaders = None
        deadline = time.monotonic() + 60
        while offsets_leaders is None:   # the group coordinators exist once a group has been used
            assert time.monotonic() < deadline
            offsets_leaders = cluster.leaders(leaders[0], "__consumer_offsets")
            time.sleep(0.2)
        group_coordinator = offsets_leaders[partition_for(group, len(offsets_leaders))]
        state_leaders = cluster.leaders(leaders[0], STATE_TOPIC)
        share_coordinators = {state_leaders[partition_for(coordinator_key(group, topic_id, p), len(state_leaders))]
                              for p in range(PARTITIONS)}
        assert share_coordinators - {group_coordinator}, "no share state away from the group coordinator"

        consumer = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
        try:
            deadline = time.monotonic() + 60
            while len(consumer._aio.assignment) != PARTITIONS:
                assert time.monotonic() < deadline, "not assigned"
                assert consumer.poll(timeout=0.2) == []
            time.sleep(1.0)   # latest: the share-partitions are initialized by a fetch before the records exist
            assert consumer.poll(timeout=0.5) == []
            values = [f"v{i}".encode() for i in range(10 * PARTITIONS)]
            _produce(bootstrap, topic, values)
            assert sorted(r.value for r in _drain(consumer, len(values))) == sorted(values)
        finally:
            consumer.close()
        assert {p: lag for p, (_, lag) in _offsets(bootstrap, group).items()} == dict.fromkeys(range(PARTITIONS), 0)

        _tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert _offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), (0, 10))
        again = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
        try:
            got = _drain(again, len(values))
            assert sorted(r.value for r in got) == sorted(values)
            assert all(r.delivery_count == 1 for r in got)
        finally:
            again.close()

        out = _tool(bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
        assert [topic, "Successful"] in [line.split() for line in out.splitlines()], out
        assert f"Share group '{group}' has no offset information." in _tool(bootstrap, "--describe", "--group", group)
        assert "was successful" in _tool(bootstrap, "--delete", "--group", group)

"""A share group's membership survives its group coordinator's SIGKILL on a 3-node klog cluster: the group's
epoch, members, member epochs and assignments are written to ``__consumer_offsets`` as Kafka 4.x's records
(ShareGroupMetadata, ShareGroupMemberMetadata, ShareGroupTargetAssignment*, ShareGroupCurrentMemberAssignment,
ShareGroupStatePartitionMetadata) and replayed by the broker that takes the group's partition over, so the members
go on heartbeating with their epochs (no member rejoins: the group epoch stays) and consuming. Kafka's
``kafka-dump-log --offsets-decoder`` decodes the records klog wrote."""

from __future__ import annotations

import glob
import json
import os
import time
import uuid

import pytest

import klog
from klog.broker.coordinator.runtime import partition_for
from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode
from klog.testing.cluster import KlogCluster
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

from test_share_groups_cluster import ready_to_read

PARTITIONS = 3
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
              "group.share.session.timeout.ms": 45000, "group.share.record.lock.duration.ms": 15000}
OFFSETS = "__consumer_offsets"


def _describe(cluster, node, group):
    with cluster.wire(node) as wire:
        r = wire.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                          "include_authorized_operations": False})
    return r.groups[0]


def _view(described):
    """What must survive a failover: the epochs, and each member's epoch and assignment."""
    return (described.group_epoch, described.assignment_epoch, sorted(
        (m.member_id, m.member_epoch,
         sorted((t.topic_name, tuple(t.partitions)) for t in m.assignment.topic_partitions))
        for m in described.members))


def _coordinator(cluster, node, group):
    leaders = cluster.leaders(node, OFFSETS)
    assert leaders is not None
    return leaders[partition_for(group, len(leaders))]


def _consume(consumers, want, seen, timeout=60.0):
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        for c in consumers:
            for r in c.poll(timeout=0.2):
                seen.append(r.value)
                c.acknowledge(r, "accept")
            c.commit_sync()


def test_share_group_membership_survives_the_coordinators_sigkill(tmp_path):
    with KlogCluster(tmp_path, 3, properties=PROPERTIES) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"share-{uuid.uuid4().hex[:6]}"
        group = f"workers-{uuid.uuid4().hex[:6]}"
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([klog.client.NewTopic(topic, PARTITIONS, 3)])
        cluster.wait_for_topic(topic, PARTITIONS)
        consumers = [klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        acknowledgement_mode="explicit") for _ in range(2)]
        try:
            ready_to_read(consumers, PARTITIONS)
            seen: list[bytes] = []
            first = [f"a{i}".encode() for i in range(30)]
            with klog.Producer(bootstrap_servers=bootstrap, acks="all") as p:
                for i, v in enumerate(first):
                    p.send(topic, value=v, partition=i % PARTITIONS)
            _consume(consumers, len(first), seen)
            assert sorted(seen) == sorted(first)

            coordinator = _coordinator(cluster, 1, group)
            before = _describe(cluster, coordinator, group)
            assert before.error_code == ErrorCode.NONE and len(before.members) == 2
            assert {m.member_id for m in before.members} == {c.member_id for c in consumers}
            epochs = {c.member_id: c._aio.member_epoch for c in consumers}

            cluster.kill(coordinator)
            survivor = next(n for n in cluster.node_ids if n != coordinator)
            deadline = time.monotonic() + 60
            while True:   # the group's __consumer_offsets partition gets a new leader, which replays the group
                assert time.monotonic() < deadline, "no new group coordinator"
                try:
                    new = _coordinator(cluster, survivor, group)
                    if new != coordinator and _describe(cluster, new, group).error_code == ErrorCode.NONE:
                        break
                except (OSError, AssertionError):
                    pass
                time.sleep(0.2)
            after = _describe(cluster, new, group)
            assert _view(after) == _view(before)

            # the members heartbeat to the new coordinator with their epochs and go on consuming
            more = [f"b{i}".encode() for i in range(30)]
            survivors = ",".join(cluster.node_bootstrap(n) for n in cluster.node_ids if n != coordinator)
            for p in range(PARTITIONS):
                cluster.wait_for_leader(topic, p, exclude=coordinator)
            with klog.Producer(bootstrap_servers=survivors, acks="all") as p:
                for i, v in enumerate(more):
                    p.send(topic, value=v, partition=i % PARTITIONS)
            seen.clear()
            _consume(consumers, len(more), seen)
            assert sorted(seen) == sorted(more)
            deadline = time.monotonic() + 20
            while any(c._aio._coordinator != new for c in consumers):
                assert time.monotonic() < deadline, "the members never reached the new coordinator"
                for c in consumers:
                    c.poll(timeout=0.2)
            # no member rejoined (a rejoin bumps the group epoch) and none was fenced back to epoch 0
            assert _view(_describe(cluster, new, group)) == _view(before)
            assert {c.member_id: c._aio.member_epoch for c in consumers} == epochs
        finally:
            for c in consumers:
                c.close()
        assert _describe(cluster, new, group).members == []   # they left: tombstones on the new coordinator

        if not java_available() or kafka_libs_dir() is None:
            pytest.skip("kafka-dump-log needs java and the Kafka 4.3 jars")
        part = partition_for(group, len(cluster.leaders(new, OFFSETS) or {}))
        segments = [s for s in glob.glob(os.path.join(cluster.log_dir(new), "**", f"{OFFSETS}-{part}", "*.log"),
                                         recursive=True) if os.path.getsize(s) > 0]
        assert segments
        dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
                                ",".join(segments))
        assert dumped.returncode == 0, dumped.stderr
        decoded = []   # (record type, key, value or None) of the group's records, as Kafka decodes them
        for line in dumped.stdout.splitlines():
            if " key: " not in line or f'"groupId":"{group}"' not in line:
                continue
            key_text, _, payload = line.split(" key: ", 1)[1].partition(" payload: ")
            key = json.loads(key_text)
            value = json.loads(payload) if payload.startswith("{") else None
            decoded.append((int(key["type"]), key["data"], value and value["data"]))
        types = {t for t, _, _ in decoded}
        # ShareGroupMemberMetadata, Metadata, TargetAssignmentMetadata, TargetAssignmentMember,
        # CurrentMemberAssignment, StatePartitionMetadata
        assert {10, 11, 12, 13, 14, 15} <= types, dumped.stdout[-3000:]
        members = {c.member_id for c in consumers}
        assert {k["memberId"] for t, k, _ in decoded if t == 10} == members
        assert max(v["epoch"] for t, _, v in decoded if t == 11 and v) == before.group_epoch + 2   # both left
        current = [v for t, k, v in decoded if t == 14 and v]
        assigned = {p for v in current for tp in v["assignedPartitions"] for p in tp["partitions"]}
        assert assigned == set(range(PARTITIONS))
        assert any(v is None for t, _, v in decoded if t == 10)   # the leaves' tombstones

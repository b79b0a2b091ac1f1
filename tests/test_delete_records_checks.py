"""DeleteRecords makes Kafka 4.x's checks (KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecordsOnLocalLog,
Partition.deleteRecordsOnLeader), in its order, and a refused request changes nothing: Delete on the topic
(TOPIC_AUTHORIZATION_FAILED), the partition in the metadata (UNKNOWN_TOPIC_OR_PARTITION), an internal topic
(INVALID_TOPIC_EXCEPTION, whatever the ACLs), a replica this broker does not lead (NOT_LEADER_OR_FOLLOWER), a
cleanup.policy without ``delete`` (POLICY_VIOLATION), the offset (OFFSET_OUT_OF_RANGE). The one-node cases run on a
klog node and on an Apache Kafka 4.x node started from the same properties; the follower case on a 2-node cluster of
each, reading the follower's log start and its ``log-start-offset-checkpoint``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.records import encode_batch
from klog.testing.cluster import cluster_of
from klog.testing.cluster_api import Cluster
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.timeout(300)

PROPERTIES = {"num.partitions": 1, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
              "auto.create.topics.enable": "false"}
#: what a coordinator answers while it is not ready yet (the offsets topic being created or loaded)
NOT_READY = {E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A one-node cluster (restartable) of klog or of Apache Kafka, from the same properties."""
    with cluster_of(request.param, tmp_path_factory.mktemp(f"delrec-{request.param}"), 1, properties=PROPERTIES,
                    heap="512m") as cluster:
        cluster.wait_for_brokers()
        yield cluster


def _delete_records(wire: WireClient, topic: str, offset: int) -> tuple[int, int]:
    answer = wire.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": offset}]}], "timeout_ms": 10_000})
    partition = answer.topics[0].partitions[0]
    return partition.error_code, partition.low_watermark


def _offset(wire: WireClient, topic: str, timestamp: int, replica_id: int = -1) -> int:
    """ListOffsets of partition 0 (-2: the log start; -1: the high watermark); ``replica_id`` -2 asks a follower."""
    answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": replica_id, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == E.NONE, partition
    return int(partition.offset)


def _produce(wire: WireClient, topic: str, count: int) -> bool:
    """``count`` keyed records (a compacted topic takes no others) with acks=all; whether they were taken."""
    batch = encode_batch([{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(count)])
    answer = wire.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return bool(answer.responses[0].partition_responses[0].error_code == E.NONE)


def _topic_with_records(cluster: Cluster, configs: dict[str, str], count: int) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    assert cluster.create_topic(topic, 1, 1, configs=configs)[0] == E.NONE
    with cluster.wire(1) as wire:
        until(lambda: _produce(wire, topic, count), f"a produce to {topic}")
    return topic


def _commit(wire: WireClient, group: str, topic: str, offset: int) -> bool:
    """A simple OffsetCommit (no member), after FindCoordinator (which makes Kafka create the offsets topic)."""
    if wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code != E.NONE:
        return False
    answer = wire.request(ApiKey.OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                                                    "member_id": "", "topics": [{"name": topic, "partitions": [
                                                        {"partition_index": 0, "committed_offset": offset}]}]})
    code = answer.topics[0].partitions[0].error_code
    assert code in NOT_READY | {E.NONE}, answer
    return bool(code == E.NONE)


def _committed(wire: WireClient, group: str, topic: str) -> list[int] | None:
    """[the group's committed offset of partition 0] once its coordinator answers (None before)."""
    answer = wire.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": False}).groups[0]
    if answer.error_code in NOT_READY:
        return None
    assert answer.error_code == E.NONE, answer
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == E.NONE, partition
    return [partition.committed_offset]


def test_delete_records_on_the_offsets_topic_is_refused_and_a_groups_committed_offset_survives_a_restart(
        node: Cluster) -> None:
    topic = _topic_with_records(node, {}, 5)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with node.wire(1) as wire:
        until(lambda: _commit(wire, group, topic, 4), "the offset commit")
        assert _offset(wire, "__consumer_offsets", -1) > 0   # the commit's record
        # Kafka refuses an internal topic whatever the ACLs (none here): INVALID_TOPIC_EXCEPTION, no low watermark
        assert _delete_records(wire, "__consumer_offsets", -1) == (E.INVALID_TOPIC_EXCEPTION, -1)
        assert _offset(wire, "__consumer_offsets", -2) == 0
    node.restart(1)
    # the coordinator loads the group again from the offsets topic: the commit is still there
    with until(lambda: node.wire(1), "the node back") as wire:
        assert until(lambda: _committed(wire, group, topic), "the group's coordinator") == [4]
        assert _offset(wire, "__consumer_offsets", -2) == 0


def test_delete_records_on_a_compact_only_topic_is_refused_and_its_records_stay(node: Cluster) -> None:
    compacted = _topic_with_records(node, {"cleanup.policy": "compact"}, 5)
    both = _topic_with_records(node, {"cleanup.policy": "compact,delete"}, 5)
    with node.wire(1) as wire:
        assert _delete_records(wire, compacted, 3) == (E.POLICY_VIOLATION, -1)
        assert _offset(wire, compacted, -2) == 0
        assert _offset(wire, compacted, -1) == 5
        # the check is for ``delete`` among the policies: a topic both compacted and deleted takes it
        assert _delete_records(wire, both, 3) == (E.NONE, 3)
        assert _offset(wire, both, -2) == 3


def _checkpointed_log_start(cluster: Cluster, broker: int, topic: str) -> list[str]:
    """The entries of ``topic`` in the broker's log-start-offset-checkpoint (after its version and count lines)."""
    path = cluster.log_dir(broker) / "log-start-offset-checkpoint"
    lines = path.read_text().splitlines()[2:] if path.exists() else []
    return [line for line in lines if line.split(" ")[0] == topic]


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_delete_records_sent_to_a_follower_is_refused_and_changes_no_replicas_log_start(kind: str, tmp_path: Any
                                                                                        ) -> None:
    """A client with stale metadata sends DeleteRecords to a follower: NOT_LEADER_OR_FOLLOWER, as Kafka's
    deleteRecordsOnLeader answers, and neither replica's log start moves (the follower's copy only follows its
    leader's log start, from its fetches)."""
    with cluster_of(kind, tmp_path, 2, properties=PROPERTIES) as cluster:
        cluster.wait_for_brokers()
        topic = f"t-{uuid.uuid4().hex[:8]}"
        with cluster.wire(1) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": topic, "num_partitions": -1, "replication_factor": -1,
                 "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}], "configs": []}],
                "timeout_ms": 30_000, "validate_only": False}).topics[0]
            assert created.error_code == E.NONE, created
        leader = cluster.wait_for_leader(topic, 0)
        follower = 3 - leader
        cluster.wait_for_isr(topic, 0, [1, 2])
        with cluster.wire(leader) as wire:
            until(lambda: _produce(wire, topic, 20), f"a produce to {topic}")
        with cluster.wire(follower) as wire:
            # the follower's high watermark reaches the records (else it would refuse offset 10 as out of range)
            until(lambda: _offset(wire, topic, -1, replica_id=-2) == 20, "the follower's high watermark")
            assert _delete_records(wire, topic, 10) == (E.NOT_LEADER_OR_FOLLOWER, -1)
            assert _offset(wire, topic, -2, replica_id=-2) == 0
        with cluster.wire(leader) as wire:
            assert _offset(wire, topic, -2) == 0
        assert _checkpointed_log_start(cluster, follower, topic) in ([], [f"{topic} 0 0"])

"""Partition reassignment decided on the controller, pure (klog.controller.reassignments and its completion in
klog.controller.partitions_isr): an image built by replaying records in, PartitionChangeRecords and per-partition
answers out; the records are replayed to check the replicas, ISR and leader every broker would then see."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from klog.controller.partitions_isr import alter_partition
from klog.controller.reassignments import (
    alter_partition_reassignments,
    completed_reassignment,
    list_partition_reassignments,
)
from klog.metadata.delta import replay
from klog.metadata.image import NO_LEADER, MetadataImage
from klog.metadata.records import record
from klog.protocol import ApiKey, decode_body, encode_body
from klog.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=0x4545)
EPOCHS = {1: 101, 2: 102, 3: 103, 4: 104}


def cluster(partitions: dict[int, tuple[list[int], list[int], int]] | None = None, *, fenced: tuple[int, ...] = (),
            unclean: bool = False) -> MetadataImage:
    """Brokers 1-4 and topic "t" whose partitions are (replicas, isr, leader); by default 0: [1, 2] led by 1."""
    recs = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    for b, e in EPOCHS.items():
        recs.append(record("RegisterBrokerRecord", broker_id=b, broker_epoch=e, incarnation_id=uuid.UUID(int=b),
                           fenced=b in fenced))
    recs.append(record("TopicRecord", name="t", topic_id=TOPIC))
    if unclean:
        recs.append(record("ConfigRecord", resource_type=2, resource_name="t", name="unclean.leader.election.enable",
                           value="true"))
    for pid, (replicas, isr, leader) in (partitions or {0: ([1, 2], [1, 2], 1)}).items():
        recs.append(record("PartitionRecord", partition_id=pid, topic_id=TOPIC, replicas=replicas, isr=isr,
                           leader=leader, leader_epoch=7, partition_epoch=20))
    return replay(MetadataImage(), recs, 0)[0]


def reassign(image: MetadataImage, targets: list[tuple[int, list[int] | None]], topic: str = "t", **kw: Any):
    result = alter_partition_reassignments([(topic, targets)], image,
                                           unclean_allowed=lambda name: image.topic_config(name).get(
                                               "unclean.leader.election.enable") == "true", **kw)
    after = replay(image, list(result.records), image.highest_offset + 1)[0]
    return {item["partition_index"]: item["error_code"] for _, item in result.response}, after


def isr_change(image: MetadataImage, isr: list[int], *, leader: int, version: int = 3):
    p = image.partition("t", 0)
    body = {"broker_id": leader, "broker_epoch": EPOCHS[leader], "topics": [{
        "topic_id": TOPIC, "topic_name": "t", "partitions": [{
            "partition_index": 0, "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            "new_isr": isr, "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": EPOCHS[b]} for b in isr],
            "leader_recovery_state": 0}]}]}
    raw = encode_body(ApiKey.ALTER_PARTITION, version, body, response=False)
    request = decode_body(ApiKey.ALTER_PARTITION, version, raw, response=False)[0]
    result = alter_partition(request, version, image)
    after = replay(image, list(result.records), image.highest_offset + 1)[0]
    return result.response["topics"][0]["partitions"][0], after


def state(image: MetadataImage, pid: int = 0) -> tuple[Any, ...]:
    p = image.partition("t", pid)
    return list(p.replicas), list(p.isr), list(p.adding_replicas), list(p.removing_replicas), p.leader


def test_a_move_first_adds_the_target_replicas_as_followers_and_keeps_the_isr():
    codes, after = reassign(cluster(), [(0, [2, 3])])
    assert codes == {0: 0}
    assert state(after) == ([2, 3, 1], [1, 2], [3], [1], 1)
    assert list_partition_reassignments(None, after) == [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}]}]


def test_the_isr_change_that_brings_the_last_adding_replica_in_completes_it_and_moves_a_removed_leader():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    answer, after = isr_change(moving, [1, 2, 3], leader=1)
    assert answer["error_code"] == ErrorCode.NEW_LEADER_ELECTED   # the leader (1) was removed
    assert state(after) == ([2, 3], [2, 3], [], [], 2)
    assert after.partition("t", 0).leader_epoch == moving.partition("t", 0).leader_epoch + 1
    assert list_partition_reassignments(None, after) == []


def test_before_v2_a_leader_moved_by_completion_is_answered_fenced_leader_epoch():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    answer, _ = isr_change(moving, [1, 2, 3], leader=1, version=1)
    assert answer["error_code"] == ErrorCode.FENCED_LEADER_EPOCH


def test_completion_keeps_a_leader_that_stays_and_waits_for_every_adding_replica():
    _, moving = reassign(cluster({0: ([1, 2], [1, 2], 1)}), [(0, [1, 3, 4])])
    assert state(moving) == ([1, 3, 4, 2], [1, 2], [3, 4], [2], 1)
    answer, partly = isr_change(moving, [1, 2, 3], leader=1)
    assert answer["error_code"] == 0
    assert state(partly) == ([1, 3, 4, 2], [1, 2, 3], [3, 4], [2], 1)   # 4 still catching up
    answer, done = isr_change(partly, [1, 2, 3, 4], leader=1)
    assert answer["error_code"] == 0 and answer["isr"] == [1, 3, 4]
    assert state(done) == ([1, 3, 4], [1, 3, 4], [], [], 1)


def test_only_removing_or_reordering_replicas_completes_at_once():
    image = cluster({0: ([1, 2, 3], [1, 2, 3], 1), 1: ([1, 2], [1, 2], 1)})
    codes, after = reassign(image, [(0, [3, 2]), (1, [2, 1])])
    assert codes == {0: 0, 1: 0}
    assert state(after, 0) == ([3, 2], [2, 3], [], [], 3)
    assert state(after, 1) == ([2, 1], [1, 2], [], [], 1)   # the leader stays: a preferred election moves it


def test_the_same_assignment_writes_nothing():
    image = cluster()
    result = alter_partition_reassignments([("t", [(0, [1, 2])])], image)
    assert result.records == [] and result.response[0][1]["error_code"] == 0


def test_cancelling_reverts_to_the_original_replicas():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    _, partly = isr_change(reassign(cluster(), [(0, [3, 4])])[1], [1, 2, 3], leader=1)
    codes, after = reassign(moving, [(0, None)])
    assert codes == {0: 0}
    # the replicas keep the reassignment's order (target first), as Kafka's PartitionReassignmentRevert does
    assert state(after) == ([2, 1], [1, 2], [], [], 1)
    codes, after = reassign(partly, [(0, None)])
    assert state(after) == ([1, 2], [1, 2], [], [], 1)   # 3 had joined the ISR: it leaves it again


def test_cancelling_without_a_reassignment_is_no_reassignment_in_progress():
    codes, _ = reassign(cluster(), [(0, None)])
    assert codes == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


def test_a_revert_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it():
    # ISR down to the adding replica only: reverting would leave no in-sync replica
    image = cluster({0: ([3, 1, 2], [3], 3)})
    moving = replay(image, [record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, adding_replicas=[3],
                                   removing_replicas=[1, 2])], image.highest_offset + 1)[0]
    codes, _ = reassign(moving, [(0, None)])
    assert codes == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    unclean = cluster({0: ([3, 1, 2], [3], 3)}, unclean=True)
    unclean = replay(unclean, [record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, adding_replicas=[3],
                                      removing_replicas=[1, 2])], unclean.highest_offset + 1)[0]
    codes, after = reassign(unclean, [(0, None)])
    assert codes == {0: 0}
    assert state(after) == ([1, 2], [1], [], [], 1)


@pytest.mark.parametrize("target, error", [
    ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([2, 2], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([2, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),   # no broker 9
])
def test_invalid_targets_are_refused_and_change_nothing(target, error):
    image = cluster()
    result = alter_partition_reassignments([("t", [(0, target)])], image)
    assert result.records == [] and result.response[0][1]["error_code"] == error
    assert result.response[0][1]["error_message"]


def test_unknown_topics_and_partitions():
    image = cluster()
    assert reassign(image, [(5, [1, 2])])[0] == {5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert reassign(image, [(0, [1, 2])], topic="nope")[0] == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_replication_factor_change_is_refused_when_the_request_disallows_it():
    codes, _ = reassign(cluster(), [(0, [1, 2, 3])], allow_replication_factor_change=False)
    assert codes == {0: ErrorCode.INVALID_REPLICATION_FACTOR}
    codes, after = reassign(cluster(), [(0, [3, 4])], allow_replication_factor_change=False)
    assert codes == {0: 0} and state(after) == ([3, 4, 1, 2], [1, 2], [3, 4], [1, 2], 1)


def test_a_new_target_during_a_reassignment_starts_from_the_current_replicas():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    codes, after = reassign(moving, [(0, [2, 4])])
    assert codes == {0: 0}
    assert state(after) == ([2, 4, 3, 1], [1, 2], [4], [3, 1], 1)


def test_asking_again_for_the_running_target_does_not_complete_it_early():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    codes, again = reassign(moving, [(0, [2, 3])])   # kafka-reassign-partitions --execute --additional
    assert codes == {0: 0}
    assert state(again)[:2] == ([2, 3, 1], [1, 2]) and state(again)[3] == [1]   # 3 is not in sync yet
    _, done = isr_change(again, [1, 2, 3], leader=1)
    assert state(done) == ([2, 3], [2, 3], [], [], 2)


def test_a_target_replica_out_of_the_isr_holds_the_completion_even_when_nothing_is_added():
    codes, after = reassign(cluster({0: ([1, 2, 3], [1, 2], 1)}), [(0, [1, 3])])
    assert codes == {0: 0} and state(after) == ([1, 3, 2], [1, 2], [], [2], 1)
    _, done = isr_change(after, [1, 2, 3], leader=1)
    assert state(done) == ([1, 3], [1, 3], [], [], 1)


def test_completion_with_no_acceptable_target_leader_leaves_the_partition_offline():
    _, moving = reassign(cluster(), [(0, [2, 3])])
    fenced = replay(moving, [record("FenceBrokerRecord", id=2, epoch=EPOCHS[2]),
                             record("FenceBrokerRecord", id=3, epoch=EPOCHS[3])],
                    moving.highest_offset + 1)[0]
    # the ISR still lists them (a fence shrinks it in another step): the completion finds no acceptable leader
    changes = completed_reassignment(fenced, fenced.partition("t", 0), [1, 2, 3])
    assert changes is not None and changes["leader"] == NO_LEADER


def test_listing_names_only_the_partitions_asked_for_and_skips_unknown_ones():
    image = cluster({0: ([1, 2], [1, 2], 1), 1: ([1, 2], [1, 2], 1)})
    _, moving = reassign(image, [(0, [2, 3]), (1, [3, 4])])
    listed = list_partition_reassignments([("t", [1, 7]), ("nope", [0])], moving)
    assert listed == [{"name": "t", "partitions": [
        {"partition_index": 1, "replicas": [3, 4, 1, 2], "adding_replicas": [3, 4], "removing_replicas": [1, 2]}]}]

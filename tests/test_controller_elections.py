"""ElectLeaders decided on the controller, pure (klog.controller.elections): an image built by replaying records
in, PartitionChangeRecords and per-partition answers out; the records are replayed to check the leaders and
epochs every broker would then serve."""

from __future__ import annotations

import uuid

import pytest

from klog.controller.elections import PREFERRED, UNCLEAN, ElectionError, balance_partition_leaders, elect_leaders
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, LeaderRecoveryState, MetadataImage
from klog.metadata.records import record
from klog.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)


def broker(broker_id: int, *, fenced: bool = False, shutting_down: bool = False):
    return record("RegisterBrokerRecord", broker_id=broker_id, incarnation_id=uuid.uuid4(), broker_epoch=broker_id,
                  end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + broker_id,
                               "security_protocol": 0}],
                  features=[], rack=None, fenced=fenced, in_controlled_shutdown=shutting_down)


def image_with(partitions: dict[int, tuple[list[int], list[int], int]], *, fenced: tuple[int, ...] = (),
               shutting_down: tuple[int, ...] = ()) -> MetadataImage:
    """Brokers 1-3 and topic "t" whose partitions are given as (replicas, isr, leader)."""
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    records += [broker(b, fenced=b in fenced, shutting_down=b in shutting_down) for b in (1, 2, 3)]
    records.append(record("TopicRecord", name="t", topic_id=TOPIC_ID))
    for pid, (replicas, isr, leader) in partitions.items():
        records.append(record("PartitionRecord", partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=isr,
                              leader=leader, leader_epoch=4, partition_epoch=9))
    return replay(EMPTY_IMAGE, records, 0)[0]


def committed(image: MetadataImage, result) -> MetadataImage:
    return replay(image, list(result.records), image.highest_offset + 1)[0]


def answers(result) -> dict[int, int]:
    return {item["partition_id"]: item["error_code"] for _, item in result.response}


def test_a_preferred_election_moves_leadership_back_to_the_first_replica_and_bumps_the_epochs():
    image = image_with({0: ([1, 2, 3], [1, 2, 3], 2), 1: ([2, 3, 1], [2, 3, 1], 2)})
    result = elect_leaders(PREFERRED, [("t", [0, 1])], image)
    assert answers(result) == {0: 0, 1: ErrorCode.ELECTION_NOT_NEEDED}
    after = committed(image, result).topic("t").partitions
    assert (after[0].leader, after[0].leader_epoch, after[0].partition_epoch) == (1, 5, 10)
    assert (after[1].leader, after[1].leader_epoch) == (2, 4)   # untouched


@pytest.mark.parametrize("isr, fenced, shutting_down", [
    ([2, 3], (), ()),      # the preferred replica is out of the ISR
    ([1, 2, 3], (1,), ()),  # its broker is fenced
    ([1, 2, 3], (), (1,)),  # its broker is shutting down
])
def test_a_preferred_replica_that_cannot_lead_answers_preferred_leader_not_available(isr, fenced, shutting_down):
    image = image_with({0: ([1, 2, 3], isr, 2)}, fenced=fenced, shutting_down=shutting_down)
    result = elect_leaders(PREFERRED, [("t", [0])], image)
    assert answers(result) == {0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE} and result.records == []


def test_unclean_election_elects_only_partitions_without_a_leader_from_the_isr_first_else_any_live_replica():
    image = image_with({0: ([1, 2, 3], [1], 1), 1: ([1, 2, 3], [1], -1), 2: ([1, 3, 2], [1], -1),
                        3: ([1], [1], -1)}, fenced=(1,))
    result = elect_leaders(UNCLEAN, [("t", [0, 1, 2, 3])], image)
    assert answers(result) == {0: ErrorCode.ELECTION_NOT_NEEDED, 1: 0, 2: 0, 3: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    after = committed(image, result).topic("t").partitions
    # the only ISR member is fenced: the first live assigned replica leads, alone in the ISR, recovering
    assert (after[1].leader, after[1].isr, after[1].leader_recovery_state) == (2, (2,), LeaderRecoveryState.RECOVERING)
    assert (after[2].leader, after[2].isr) == (3, (3,))


def test_all_partitions_skips_those_whose_leader_is_already_elected_and_unknown_ones_are_reported():
    image = image_with({0: ([1, 2], [1, 2], 1), 1: ([2, 1], [2, 1], 1), 2: ([3, 1], [1], 1)})
    every = elect_leaders(PREFERRED, None, image)
    assert [(t, i["partition_id"], i["error_code"]) for t, i in every.response] == [
        ("t", 1, 0), ("t", 2, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]
    named = elect_leaders(PREFERRED, [("t", [7]), ("nope", [0])], image)
    assert [(t, i["error_code"]) for t, i in named.response] == [
        ("t", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert named.records == []


def test_an_unknown_election_type_refuses_the_request():
    with pytest.raises(ElectionError) as refused:
        elect_leaders(2, None, image_with({0: ([1], [1], 1)}))
    assert refused.value.code == ErrorCode.INVALID_REQUEST


def test_auto_rebalance_elects_every_preferred_replica_that_can_lead_in_bounded_passes():
    image = image_with({0: ([1, 2], [1, 2], 2), 1: ([2, 1], [1, 2], 1), 2: ([3, 1], [1], 1), 3: ([1, 2], [1, 2], 1),
                        4: ([2, 3], [2, 3], 3)})
    first = balance_partition_leaders(image, max_elections=2)
    assert first.response is True and len(first.records) == 2   # more remain: the next pass comes at once
    image = committed(image, first)
    second = balance_partition_leaders(image, max_elections=2)
    assert second.response is False and len(second.records) == 1
    image = committed(image, second)
    leaders = {pid: p.leader for pid, p in image.topic("t").partitions.items()}
    assert leaders == {0: 1, 1: 2, 2: 1, 3: 1, 4: 2}   # partition 2's preferred replica is out of the ISR
    assert balance_partition_leaders(image).records == []

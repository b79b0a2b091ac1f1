"""A partition's leader side (klog.broker.replication.leader) without sockets or clocks: follower fetch
validation, the high watermark, acks=all, ISR shrink and expansion through AlterPartition proposals."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from klog.broker.replication.epochs import EpochEndOffset
from klog.broker.replication.leader import LeaderPartition, ProduceCompletion
from klog.protocol.errors import ErrorCode
from replication_support import SimLog

TOPIC = uuid.UUID(int=0x16)
LAG = 30000


def leader(isr=(1, 2, 3), *, epoch=5, min_isr=1, log: SimLog | None = None, now=0, **kw) -> LeaderPartition:
    return LeaderPartition(1, TOPIC, 0, (1, 2, 3), tuple(isr), epoch, 10, log or SimLog(), 0, now,
                           min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG, **kw)


def fetch(lp: LeaderPartition, replica: int, offset: int, now: int, *, epoch: int | None = None,
          last_epoch: int | None = None, broker_epoch: int = 100, log_start: int = 0):
    if last_epoch is None:
        last_epoch = lp.log.epochs.epoch_for_offset(offset - 1) if offset > 0 else -1
        last_epoch = -1 if last_epoch is None else last_epoch
    return lp.follower_fetch(replica, broker_epoch, lp.leader_epoch if epoch is None else epoch, offset,
                             last_epoch, log_start, now)


def committed(lp: LeaderPartition, proposal, now: int):
    """The controller accepts ``proposal``."""
    answer = SimpleNamespace(leader_epoch=proposal.leader_epoch, partition_epoch=proposal.partition_epoch + 1,
                             isr=list(proposal.new_isr))
    return lp.on_alter_partition_response(proposal, 0, answer, now)


def test_high_watermark_is_the_lowest_isr_log_end_and_never_goes_back() -> None:
    lp = leader()
    lp.log.append_as_leader(10, 5)
    fetch(lp, 2, 10, 1)
    assert lp.high_watermark == 0  # follower 3 has not fetched in this epoch
    r = fetch(lp, 3, 4, 2)
    assert r.error == 0 and r.read and r.high_watermark == 4 == lp.high_watermark
    fetch(lp, 3, 7, 3)
    assert lp.high_watermark == 7
    fetch(lp, 2, 10, 4)
    fetch(lp, 3, 10, 4)
    assert lp.high_watermark == 10
    # a follower reporting a lower offset later (it truncated, say) does not move the HW back
    fetch(lp, 3, 8, 5)
    assert lp.high_watermark == 10


def test_acks_all_completes_once_every_isr_member_has_the_batch() -> None:
    lp = leader()
    last = lp.log.append_as_leader(3, 5)
    assert lp.check_append(-1) == 0
    assert lp.produce_appended("p1", last, 1000, 0) == ()
    assert fetch(lp, 2, 3, 1).completions == ()
    r = fetch(lp, 3, 3, 2)
    assert r.completions == (ProduceCompletion("p1", 0),)
    assert lp.pending_produces == 0


def test_acks_all_with_only_the_leader_in_the_isr_completes_at_once() -> None:
    lp = leader(isr=(1,))
    last = lp.log.append_as_leader(2, 5)
    assert lp.produce_appended("p", last, 1000, 0) == (ProduceCompletion("p", 0),)


def test_min_insync_replicas_refuses_acks_all_before_the_append() -> None:
    lp = leader(isr=(1, 2), min_isr=3)
    assert lp.check_append(-1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert lp.check_append(1) == 0


def test_isr_shrinking_under_min_isr_freezes_the_hw_and_a_waiting_batch_times_out_as_in_kafka_4() -> None:
    # strict min ISR (KIP-966): the HW only moves while the committed ISR is at least min.insync.replicas, so a
    # batch whose ISR shrank under it waits to its deadline (Kafka 4.x answers REQUEST_TIMED_OUT, not
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND) and the replicas that left hold every record below the HW
    lp = leader(min_isr=3)
    last = lp.log.append_as_leader(1, 5)
    lp.produce_appended("p", last, LAG + 100, 0)
    fetch(lp, 2, 1, 1)
    done, proposal = lp.tick(LAG + 1)
    assert done == () and proposal is not None and proposal.new_isr == (1, 2) and not proposal.is_expand
    # while the shrink is in flight, the HW still waits for follower 3 (maximal ISR)
    assert lp.high_watermark == 0
    out = committed(lp, proposal, LAG + 2)
    assert out.completions == ()
    assert lp.isr == (1, 2) and lp.partition_epoch == 11 and lp.high_watermark == 0 and lp.under_min_isr
    fetch(lp, 2, 1, LAG + 3)
    assert lp.high_watermark == 0
    done, _ = lp.tick(LAG + 101)
    assert done == (ProduceCompletion("p", ErrorCode.REQUEST_TIMED_OUT),)


def test_min_insync_replicas_above_the_replication_factor_counts_as_the_replication_factor() -> None:
    lp = leader(min_isr=5)   # Kafka's effectiveMinIsr: min(min.insync.replicas, replicas)
    assert lp.effective_min_isr == 3 and lp.check_append(-1) == 0
    last = lp.log.append_as_leader(1, 5)
    lp.produce_appended("p", last, 10 ** 9, 0)
    fetch(lp, 2, 1, 1)
    assert fetch(lp, 3, 1, 1).completions == (ProduceCompletion("p", ErrorCode.NONE),)


def test_follower_is_not_shrunk_before_the_lag_time_or_when_at_the_log_end() -> None:
    lp = leader()
    lp.log.append_as_leader(1, 5)
    fetch(lp, 2, 1, 10)
    fetch(lp, 3, 0, 10)
    assert lp.tick(LAG)[1] is None
    # follower 2 is at the log end: never out of sync however long ago it fetched
    _, proposal = lp.tick(LAG + 1)
    assert proposal is not None and proposal.new_isr == (1, 2)


def test_only_one_isr_change_is_in_flight() -> None:
    lp = leader(isr=(1, 2))
    lp.log.append_as_leader(1, 5)
    r = fetch(lp, 3, 1, 1)
    assert r.proposal is not None and r.proposal.new_isr == (1, 2, 3) and r.proposal.is_expand
    assert r.proposal.broker_epochs == (-1, -1, 100)
    assert fetch(lp, 3, 1, 2).proposal is None
    assert lp.tick(LAG * 10)[1] is None


def test_caught_up_follower_is_added_and_counts_for_the_hw_while_pending() -> None:
    lp = leader(isr=(1, 2))
    lp.log.append_as_leader(4, 5)
    fetch(lp, 2, 4, 1)
    assert lp.high_watermark == 4
    lp.log.append_as_leader(2, 5)
    r = fetch(lp, 3, 4, 2)  # follower 3 reached the HW: proposed
    assert r.proposal is not None and lp.maximal_isr == (1, 2, 3)
    fetch(lp, 2, 6, 3)
    assert lp.high_watermark == 4  # waits for 3 as well
    committed(lp, r.proposal, 4)
    assert lp.isr == (1, 2, 3)


def test_follower_below_the_hw_is_not_added() -> None:
    lp = leader(isr=(1, 2))
    lp.log.append_as_leader(4, 5)
    fetch(lp, 2, 4, 1)
    assert fetch(lp, 3, 3, 2).proposal is None


def test_ineligible_follower_is_not_added() -> None:
    lp = leader(isr=(1,), is_isr_eligible=lambda broker, epoch: broker != 3)
    assert fetch(lp, 3, 0, 1).proposal is None
    assert fetch(lp, 2, 0, 1).proposal is not None


def test_alter_partition_errors_revert_or_keep_the_pending_change_as_kafka_does() -> None:
    lp = leader(isr=(1, 2))
    p = fetch(lp, 3, 0, 1).proposal
    assert lp.on_alter_partition_response(p, ErrorCode.NOT_CONTROLLER, None, 2).retry
    assert lp.pending_isr is p
    assert not lp.on_alter_partition_response(p, ErrorCode.INVALID_UPDATE_VERSION, None, 3).retry
    assert lp.pending_isr is p  # until metadata says what happened
    assert not lp.on_alter_partition_response(p, ErrorCode.FENCED_LEADER_EPOCH, None, 3).retry
    assert lp.pending_isr is p
    assert not lp.on_alter_partition_response(p, ErrorCode.INELIGIBLE_REPLICA, None, 4).retry
    assert lp.pending_isr is None and lp.isr == (1, 2)
    # metadata clears a stuck pending change
    p2 = fetch(lp, 3, 0, 5).proposal
    lp.on_alter_partition_response(p2, ErrorCode.INVALID_UPDATE_VERSION, None, 6)
    assert lp.on_metadata(1, 5, 12, (1, 2, 3), (1, 2, 3), 7)[0]
    assert lp.pending_isr is None and lp.isr == (1, 2, 3) and lp.partition_epoch == 12


def test_a_stale_alter_partition_answer_is_ignored() -> None:
    lp = leader(isr=(1, 2))
    p = fetch(lp, 3, 0, 1).proposal
    answer = SimpleNamespace(leader_epoch=4, partition_epoch=11, isr=[1, 2, 3])
    assert not lp.on_alter_partition_response(p, 0, answer, 2).retry
    assert lp.isr == (1, 2) and lp.pending_isr is p


def test_fetch_with_another_leader_epoch_is_fenced_or_unknown() -> None:
    lp = leader()
    assert fetch(lp, 2, 0, 1, epoch=4).error == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(lp, 2, 0, 1, epoch=6).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(lp, 2, 0, 1, epoch=-1).error == 0


def test_fetch_from_a_broker_that_is_not_a_replica_or_a_stale_incarnation_is_refused() -> None:
    lp = leader()
    assert fetch(lp, 7, 0, 1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(lp, 2, 0, 1, broker_epoch=200).error == 0
    assert fetch(lp, 2, 0, 2, broker_epoch=100).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetch_past_the_log_end_is_out_of_range() -> None:
    lp = leader()
    lp.log.append_as_leader(2, 5)
    assert fetch(lp, 2, 3, 1, last_epoch=-1).error == ErrorCode.OFFSET_OUT_OF_RANGE


def test_follower_with_a_diverging_epoch_gets_where_the_leaders_epoch_ends_and_no_state_change() -> None:
    log = SimLog()
    log.append_as_leader(3, 1)  # offsets 0-2 in epoch 1
    log.append_as_leader(2, 3)  # 3-4 in epoch 3
    lp = leader(log=log, epoch=5)
    # the follower wrote offsets 3..5 in epoch 2, which this leader never had
    r = fetch(lp, 2, 6, 1, last_epoch=2)
    assert r.error == 0 and not r.read and r.diverging_epoch == EpochEndOffset(1, 3)
    assert lp.followers[2].log_end_offset == -1
    # same epoch but the follower has more of it than the leader
    r = fetch(lp, 2, 4, 1, last_epoch=1)
    assert r.diverging_epoch == EpochEndOffset(1, 3)
    r = fetch(lp, 2, 3, 1, last_epoch=1)
    assert r.diverging_epoch is None and r.read
    # an epoch newer than any the leader knows
    assert fetch(lp, 2, 3, 1, last_epoch=9).error == ErrorCode.OFFSET_OUT_OF_RANGE


def test_hw_after_a_leader_change_waits_for_the_followers_in_the_new_epoch() -> None:
    log = SimLog()
    log.append_as_leader(5, 1)
    lp = leader(log=log, epoch=2)
    assert lp.leader_epoch_start_offset == 5 and log.epochs.entries() == [(1, 0), (2, 5)]
    fetch(lp, 2, 3, 1)
    fetch(lp, 3, 4, 1)
    assert lp.high_watermark == 0  # offsets below this epoch's start are not committed by this leader
    fetch(lp, 2, 5, 2)
    fetch(lp, 3, 5, 2)
    assert lp.high_watermark == 5


def test_waiting_produces_time_out_and_are_answered_when_leadership_moves() -> None:
    lp = leader()
    lp.produce_appended("a", lp.log.append_as_leader(1, 5), 100, 0)
    lp.produce_appended("b", lp.log.append_as_leader(1, 5), 500, 0)
    done, _ = lp.tick(100)
    assert done == (ProduceCompletion("a", ErrorCode.REQUEST_TIMED_OUT),)
    still, done = lp.on_metadata(2, 6, 11, (1, 2, 3), (1, 2, 3), 200)
    assert not still and done == (ProduceCompletion("b", ErrorCode.NOT_LEADER_OR_FOLLOWER),)


def test_the_waiting_produce_queue_is_bounded() -> None:
    lp = leader(max_pending_produces=2)
    for i in range(2):
        assert lp.produce_appended(i, lp.log.append_as_leader(1, 5), 100, 0) == ()
    assert lp.produce_appended(9, lp.log.append_as_leader(1, 5), 100, 0) is None


def test_offset_for_leader_epoch_checks_the_current_epoch() -> None:
    log = SimLog()
    log.append_as_leader(3, 1)
    lp = leader(log=log, epoch=5)
    assert lp.offset_for_leader_epoch(5, 1) == (0, EpochEndOffset(1, 3))
    assert lp.offset_for_leader_epoch(-1, 5) == (0, EpochEndOffset(5, 3))
    assert lp.offset_for_leader_epoch(4, 1)[0] == ErrorCode.FENCED_LEADER_EPOCH


def test_metadata_of_an_already_answered_change_keeps_a_newer_pending_addition() -> None:
    lp = leader(isr=(1,))
    lp.log.append_as_leader(2, 5)
    first = fetch(lp, 2, 2, 1).proposal
    committed(lp, first, 2)  # answer first: ISR (1, 2) at partition epoch 11
    second = fetch(lp, 3, 2, 3).proposal
    assert second is not None and lp.maximal_isr == (1, 2, 3)
    # the record of the first change arrives after its answer: nothing newer, the addition of 3 stays counted
    lp.on_metadata(1, 5, 11, (1, 2, 3), (1, 2), 4)
    assert lp.pending_isr is second and lp.maximal_isr == (1, 2, 3)
    lp.log.append_as_leader(1, 5)
    fetch(lp, 2, 3, 5)
    assert lp.high_watermark == 2  # waits for broker 3, which the controller may already count in the ISR


def test_the_low_watermark_is_the_lowest_log_start_over_the_leader_and_followers_on_live_brokers() -> None:
    lp = leader()
    lp.log.append_as_leader(10, 5)
    fetch(lp, 2, 10, 1)
    fetch(lp, 3, 10, 1)
    lp.log.delete_before(6)   # DeleteRecords on the leader
    assert lp.low_watermark(lambda b: True) == 0, "the followers still start at 0"
    fetch(lp, 2, 10, 2, log_start=6)   # followers learn the leader's log start from their fetch answers
    assert lp.low_watermark(lambda b: True) == 0
    assert lp.low_watermark(lambda b: b != 3) == 6, "a fenced broker's replica does not hold it back"
    fetch(lp, 3, 10, 3, log_start=6)
    assert lp.low_watermark(lambda b: True) == 6

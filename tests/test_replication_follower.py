"""A partition's follower side (klog.broker.replication.follower) without sockets or clocks: what it fetches,
how it truncates on a diverging epoch or an OffsetsForLeaderEpoch answer, OFFSET_OUT_OF_RANGE and its HW."""

from __future__ import annotations

from klog.broker.replication.epochs import EpochEndOffset
from klog.broker.replication.follower import ActionKind, FetchPosition, FollowerPartition, FollowerState
from klog.protocol.errors import ErrorCode
from replication_support import SimLog


def local_log(*runs: tuple[int, int]) -> SimLog:
    """``runs``: (count, epoch) appended in order."""
    log = SimLog()
    for count, epoch in runs:
        log.append_as_leader(count, epoch)
    return log


def answer(f: FollowerPartition, log: SimLog, *, error: int = 0, hw: int = 0, start: int = 0,
           diverging: EpochEndOffset | None = None, now: int = 0):
    return f.on_fetch_response(error, high_watermark=hw, log_start_offset=start, diverging_epoch=diverging,
                               log_end_offset=log.log_end_offset, epochs=log.epochs, now_ms=now)


def test_fetch_position_is_the_log_end_with_the_latest_local_epoch() -> None:
    log = local_log((3, 1), (2, 4))
    f = FollowerPartition(2, 6)
    assert f.next_request(0, log.log_end_offset, log.epochs, 0) == FetchPosition(6, 5, 4, 0)
    assert FollowerPartition(2, 6).next_request(0, 0, SimLog().epochs, 0) == FetchPosition(6, 0, -1, 0)


def test_diverging_epoch_truncates_to_the_leaders_end_of_that_epoch() -> None:
    log = local_log((3, 1), (3, 2))  # 0-2 epoch 1, 3-5 epoch 2 (never reached the new leader)
    f = FollowerPartition(3, 4)
    a = answer(f, log, diverging=EpochEndOffset(1, 3))
    assert a.kind is ActionKind.TRUNCATE and a.offset == 3


def test_diverging_epoch_the_follower_does_not_know_cuts_at_its_own_earlier_epoch_end() -> None:
    log = local_log((2, 1), (3, 3))  # 0-1 epoch 1, 2-4 epoch 3
    f = FollowerPartition(3, 5)
    # the leader says its epoch 2 ends at 4: we never had epoch 2, so cut where our epoch 1 ends (2) and ask again
    a = answer(f, log, diverging=EpochEndOffset(2, 4))
    assert a.kind is ActionKind.TRUNCATE and a.offset == 2


def test_diverging_epoch_never_truncates_past_the_local_end() -> None:
    log = local_log((2, 1))
    a = answer(FollowerPartition(3, 5), log, diverging=EpochEndOffset(1, 9))
    assert a.kind is ActionKind.TRUNCATE and a.offset == 2


def test_records_are_appended_and_the_follower_hw_is_the_lower_of_the_leaders_and_its_log_end() -> None:
    log = local_log((2, 1))
    f = FollowerPartition(3, 5)
    assert answer(f, log, hw=9).kind is ActionKind.APPEND
    log.append_as_follower([(2, 1), (3, 1)])
    f.on_appended(9, 0, log.log_end_offset)
    assert f.high_watermark == 4
    f.on_appended(3, 0, log.log_end_offset)
    assert f.high_watermark == 4  # never backwards


def test_offset_out_of_range_after_the_leader_deleted_records_restarts_at_the_leaders_start() -> None:
    log = local_log((2, 1))
    f = FollowerPartition(3, 5)
    assert answer(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE).kind is ActionKind.LIST_LEADER_OFFSETS
    assert f.next_request(0, 2, log.epochs, 0).kind is ActionKind.LIST_LEADER_OFFSETS
    a = f.on_leader_offsets(10, 20, log.log_end_offset)
    assert a.kind is ActionKind.TRUNCATE_FULLY and a.offset == 10 and f.state is FollowerState.FETCHING


def test_offset_out_of_range_with_a_local_epoch_no_leader_had_truncates_to_where_it_starts() -> None:
    # a bit flipped in the last batch's leader epoch (outside its CRC): 1073741829 is above the leader's epoch 7,
    # so every leader answers that last fetched epoch OFFSET_OUT_OF_RANGE; the log's offsets are all in range
    log = local_log((6, 3), (2, 5), (1, (1 << 30) + 5))
    f = FollowerPartition(2, 7, high_watermark=8)
    assert f.next_request(0, 9, log.epochs, 0) == FetchPosition(7, 9, (1 << 30) + 5, 0)
    assert answer(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE).kind is ActionKind.LIST_LEADER_OFFSETS
    a = f.on_leader_offsets(0, 12, log.log_end_offset, log.epochs)
    assert (a.kind, a.offset, f.high_watermark) == (ActionKind.TRUNCATE, 8, 8)
    # with epochs all up to the leader's, the same answer only fetches again from the log end
    sound = local_log((6, 3), (3, 5))
    assert FollowerPartition(2, 7).on_leader_offsets(0, 12, sound.log_end_offset, sound.epochs).kind \
        is ActionKind.NONE


def test_offset_out_of_range_with_a_shorter_leader_truncates_to_its_end() -> None:
    log = local_log((6, 1))
    f = FollowerPartition(3, 5, high_watermark=5)
    answer(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    a = f.on_leader_offsets(0, 4, log.log_end_offset)
    assert a.kind is ActionKind.TRUNCATE and a.offset == 4 and f.high_watermark == 4


def test_fenced_leader_epoch_stops_until_metadata_brings_a_newer_epoch() -> None:
    log = local_log((1, 1))
    f = FollowerPartition(3, 5)
    assert answer(f, log, error=ErrorCode.FENCED_LEADER_EPOCH).kind is ActionKind.STOP
    assert f.next_request(0, 1, log.epochs, 10).kind is ActionKind.STOP
    f.become_follower(2, 6)
    assert f.next_request(0, 1, log.epochs, 10) == FetchPosition(6, 1, 1, 0)


def test_not_leader_or_unknown_epoch_backs_off() -> None:
    log = local_log((1, 1))
    f = FollowerPartition(3, 5, fetch_backoff_ms=1000)
    for code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH):
        a = answer(f, log, error=code, now=100)
        assert a.kind is ActionKind.BACKOFF and a.until_ms == 1100
    assert f.next_request(0, 1, log.epochs, 500).kind is ActionKind.BACKOFF
    assert isinstance(f.next_request(0, 1, log.epochs, 1100), FetchPosition)


def test_without_diverging_epochs_the_follower_truncates_through_offsets_for_leader_epoch() -> None:
    log = local_log((2, 1), (3, 3))
    f = FollowerPartition(3, 5, use_diverging_epoch=False)
    a = f.next_request(0, log.log_end_offset, log.epochs, 0)
    assert a.kind is ActionKind.OFFSETS_FOR_LEADER_EPOCH and a.epoch == 3
    # the leader's largest epoch <= 3 is 1, ending at 2
    t = f.on_epoch_end_offset(0, EpochEndOffset(1, 2), log.log_end_offset, log.epochs, 0)
    assert t.kind is ActionKind.TRUNCATE and t.offset == 2
    log.truncate_to(2)
    p = f.next_request(0, log.log_end_offset, log.epochs, 0)
    assert p == FetchPosition(5, 2, -1, 0)  # old-path fetches carry no last fetched epoch


def test_unknown_epoch_answer_truncates_to_the_high_watermark() -> None:
    log = local_log((5, 1))
    f = FollowerPartition(3, 5, high_watermark=3, use_diverging_epoch=False)
    t = f.on_epoch_end_offset(0, EpochEndOffset(-1, -1), log.log_end_offset, log.epochs, 0)
    assert t.kind is ActionKind.TRUNCATE and t.offset == 3


def test_the_leaders_log_start_from_deleterecords_or_retention_moves_the_followers_never_past_its_hw() -> None:
    log = local_log((10, 1))
    f = FollowerPartition(3, 5)
    assert f.on_appended(6, 4, log.log_end_offset) == 4   # the leader deleted below 4: so does the follower
    assert f.on_appended(8, 9, log.log_end_offset) == 8   # its own HW is 8: Kafka refuses a log start past it
    assert f.high_watermark == 8

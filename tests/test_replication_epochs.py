"""The leader epoch cache (klog.broker.replication.epochs) against Kafka's LeaderEpochFileCache semantics, and
against the native log's own ``leader-epoch-checkpoint`` entries."""

from __future__ import annotations

import pytest

from klog.broker.replication.epochs import UNDEFINED, EpochEndOffset, LeaderEpochCache


def test_assign_same_epoch_at_a_later_offset_keeps_the_first_start() -> None:
    c = LeaderEpochCache()
    assert c.assign(2, 6)
    assert not c.assign(2, 10)
    assert c.entries() == [(2, 6)]


def test_assign_drops_entries_that_are_not_monotonic_with_the_new_one() -> None:
    c = LeaderEpochCache([(1, 0), (3, 5), (5, 9)])
    c.assign(4, 7)  # epoch 5 (higher) goes
    assert c.entries() == [(1, 0), (3, 5), (4, 7)]
    c.assign(6, 5)  # entries starting at >= 5 go
    assert c.entries() == [(1, 0), (6, 5)]


def test_assign_rejects_negative_epoch_or_offset() -> None:
    with pytest.raises(ValueError, match="epoch -1"):
        LeaderEpochCache().assign(-1, 0)


def test_end_offset_for_latest_epoch_is_the_log_end() -> None:
    c = LeaderEpochCache([(0, 0), (2, 6)])
    assert c.end_offset_for(2, 11) == EpochEndOffset(2, 11)


def test_end_offset_for_an_older_epoch_is_the_next_epochs_start() -> None:
    c = LeaderEpochCache([(0, 0), (2, 6), (4, 9)])
    assert c.end_offset_for(2, 11) == EpochEndOffset(2, 9)
    # an epoch between known ones answers with the largest known epoch below it
    assert c.end_offset_for(3, 11) == EpochEndOffset(2, 9)
    assert c.end_offset_for(1, 11) == EpochEndOffset(0, 6)


def test_end_offset_for_an_epoch_below_every_known_one_is_the_first_start() -> None:
    c = LeaderEpochCache([(3, 10), (5, 20)])
    assert c.end_offset_for(1, 30) == EpochEndOffset(1, 10)


def test_end_offset_for_unknown_newer_or_undefined_epoch_is_undefined() -> None:
    c = LeaderEpochCache([(3, 10)])
    assert c.end_offset_for(4, 30) == UNDEFINED
    assert c.end_offset_for(-1, 30) == UNDEFINED
    assert LeaderEpochCache().end_offset_for(0, 0) == UNDEFINED


def test_truncate_from_end_drops_entries_starting_at_or_after_the_offset() -> None:
    c = LeaderEpochCache([(0, 0), (2, 6), (4, 9)])
    c.truncate_from_end(9)
    assert c.entries() == [(0, 0), (2, 6)]
    c.truncate_from_end(7)
    assert c.entries() == [(0, 0), (2, 6)]


def test_truncate_from_start_moves_the_last_covered_entry_to_the_new_start() -> None:
    c = LeaderEpochCache([(0, 0), (2, 6), (4, 9)])
    c.truncate_from_start(7)
    assert c.entries() == [(2, 7), (4, 9)]
    c.truncate_from_start(9)
    assert c.entries() == [(4, 9)]
    c.truncate_from_start(3)
    assert c.entries() == [(4, 9)]


def test_epoch_for_offset() -> None:
    c = LeaderEpochCache([(0, 0), (2, 6)])
    assert [c.epoch_for_offset(o) for o in (0, 5, 6, 100)] == [0, 0, 2, 2]
    assert LeaderEpochCache([(1, 5)]).epoch_for_offset(4) is None


def test_cache_built_from_the_native_logs_checkpoint_entries(tmp_path) -> None:
    from klog._native import LogConfig, LogManager, encode_batch

    log = LogManager([str(tmp_path)], LogConfig()).create("t", 0)
    batch = encode_batch([(None, b"v", 1000)] * 3)
    log.append(batch, leader_epoch=1)
    log.append(batch, leader_epoch=4)
    cache = LeaderEpochCache(log.leader_epoch_entries())
    assert cache.entries() == [(1, 0), (4, 3)]
    assert cache.end_offset_for(1, log.log_end_offset) == EpochEndOffset(1, 3)
    assert cache.end_offset_for(4, log.log_end_offset) == EpochEndOffset(4, 6)
    with open(f"{log.dir}/leader-epoch-checkpoint") as f:
        assert f.read() == "0\n2\n1 0\n4 3\n"
    log.close()


def test_native_truncation_at_the_log_end_drops_an_epoch_that_wrote_nothing(tmp_path) -> None:
    from klog._native import LogConfig, LogManager, encode_batch

    log = LogManager([str(tmp_path)], LogConfig()).create("t", 0)
    log.append(encode_batch([(None, b"v", 1000)] * 2), leader_epoch=1)
    log.assign_epoch_start(3)  # led epoch 3, wrote nothing, then followed a leader without it
    log.truncate_to(log.log_end_offset)
    assert log.leader_epoch_entries() == [(1, 0)]
    cache = LeaderEpochCache([(1, 0), (3, 2)])
    cache.truncate_from_end(2)
    assert cache.entries() == log.leader_epoch_entries()
    log.close()

"""The partition side of transactions, sans IO: ongoing transactions, the last stable offset, the aborted
transactions a read_committed fetch skips, rebuilt the same from the batches (a follower, a restart) and from a
snapshot, and reopened when a follower truncates a marker away."""

from __future__ import annotations

import os

from klog.broker.producer_state import BatchMetadata, ProducerStateManager
from klog.protocol.error_codes import ErrorCode
from klog.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, encode_batch, encode_control_batch

T, P = "t", 0


def data(base: int, pid: int, count: int = 2, *, epoch: int = 0, seq: int = 0, transactional: bool = True) -> bytes:
    return encode_batch([{"value": b"v"} for _ in range(count)], base_offset=base, producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def marker(base: int, pid: int, commit: bool, epoch: int = 0) -> bytes:
    return encode_control_batch(CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT, producer_id=pid,
                                producer_epoch=epoch, base_offset=base)


def log_of_two_transactions() -> bytes:
    # producer 7: offsets 0-1, committed at 4; producer 8: offsets 2-3 and 5-6, aborted at 7; 8-9 producer 7 open
    return (data(0, 7) + data(2, 8) + marker(4, 7, True) + data(5, 8, seq=2) + marker(7, 8, False)
            + data(8, 7, seq=2))


def test_replay_tracks_open_committed_and_aborted_transactions(tmp_path):
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    assert state.replay(T, P, log_of_two_transactions(), 0) == 10
    assert state.ongoing_txns(T, P) == {7: 8}
    assert state.last_stable_offset(T, P, 10) == 8
    assert state.last_stable_offset(T, P, 6) == 2       # the aborted one's marker (7) is above the HW
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in state.aborted_txns(T, P, 0, 8)] == [(8, 2, 7)]
    assert state.aborted_txns(T, P, 8, 10) == []        # wholly before the fetch
    assert state.check_transactional(T, P, 7, False) == ErrorCode.INVALID_TXN_STATE
    assert state.check_transactional(T, P, 8, False) == ErrorCode.NONE


def test_the_first_unstable_offset_bounds_open_and_unreplicated_transactions_and_nothing_once_they_ended(tmp_path):
    # Kafka's firstUnstableOffset: the log's bound for the cleaner and for the native front's own high watermark
    none = 2**63 - 1
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    assert state.first_unstable_offset(T, P, 0) == none                 # no transaction ever
    state.replay(T, P, log_of_two_transactions(), 0)
    assert state.first_unstable_offset(T, P, 10) == 8                   # producer 7's open one
    assert state.first_unstable_offset(T, P, 6) == 2                    # and the aborted one, its marker not in the ISR
    state.replay(T, P, marker(10, 7, True), 0)
    assert state.first_unstable_offset(T, P, 10) == 8                   # committed, the marker not yet in the ISR
    assert state.first_unstable_offset(T, P, 11) == none                # every transaction ended and replicated
    assert state.last_stable_offset(T, P, 11) == 11
    assert [a.first_offset for a in state.aborted_txns(T, P, 0, 11)] == [2]   # still skipped by read_committed


def test_a_marker_older_than_the_producers_epoch_is_fenced(tmp_path):
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    state.replay(T, P, data(0, 7, epoch=3), 0)
    assert state.check_marker(T, P, 7, 2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check_marker(T, P, 7, 3) == ErrorCode.NONE
    # a coordinator's abort with a bumped epoch ends the transaction and fences the old epoch's batches
    state.complete_txn(T, P, 7, 4, 2, False, 0)
    assert state.check(T, P, 7, 3, 2, 3)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.last_stable_offset(T, P, 3) == 3


def test_snapshot_then_restart_keeps_the_same_transactions(tmp_path):
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    state.replay(T, P, log_of_two_transactions(), 0)
    state.save({(T, P): 10})
    restored = ProducerStateManager(str(tmp_path), 86_400_000)
    assert restored.load() == {(T, P): 10}
    assert restored.ongoing_txns(T, P) == {7: 8}
    assert restored.last_stable_offset(T, P, 10) == 8
    assert [(a.producer_id, a.first_offset) for a in restored.aborted_txns(T, P, 0, 10)] == [(8, 2)]


def test_a_truncated_marker_reopens_its_transaction(tmp_path):
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    state.replay(T, P, log_of_two_transactions(), 0)
    state.truncate_check(T, P, 7)          # the abort marker at 7 and producer 7's open batch at 8 are gone
    assert state.ongoing_txns(T, P) == {8: 2}
    assert state.aborted_txns(T, P, 0, 7) == []
    assert state.last_stable_offset(T, P, 7) == 2


def test_an_appended_transactional_batch_opens_a_transaction_at_its_base_offset(tmp_path):
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    state.update(T, P, 9, 0, BatchMetadata(0, 4, 100, 104, -1), 0, transactional=True)
    state.update(T, P, 9, 0, BatchMetadata(5, 9, 105, 109, -1), 0, transactional=True)
    assert state.ongoing_txns(T, P) == {9: 100}
    done = state.complete_txn(T, P, 9, 0, 110, True, 0)
    assert done is not None and (done.first_offset, done.last_offset, done.aborted) == (100, 110, False)
    assert state.last_stable_offset(T, P, 110) == 100   # the marker is not replicated yet
    assert state.last_stable_offset(T, P, 111) == 111


def test_the_txnindex_moves_entries_of_a_replaced_segment_and_drops_those_below_the_log_start(tmp_path):
    from klog.broker import txn_index

    d = str(tmp_path)
    txn_index.append(d, 0, 7, 2, 5, 6)          # segment 0: marker at 5
    txn_index.append(d, 10, 8, 11, 14, 15)      # segment 10: marker at 14
    txn_index.append(d, 20, 9, 21, 25, 26)      # segment 20: marker at 25
    assert txn_index.read(d) == [(7, 2, 5, 6), (8, 11, 14, 15), (9, 21, 25, 26)]
    # retention removed segment 0 (log start 10); the cleaner replaced segment 10 with one based at 12
    assert txn_index.remove_orphans(d, [12, 20], log_start_offset=10) == 2
    assert txn_index.read(d) == [(8, 11, 14, 15), (9, 21, 25, 26)]
    assert sorted(os.listdir(d)) == [txn_index.file_name(12), txn_index.file_name(20)]
    txn_index.truncate(d, 20)                   # a follower cut the log at 20
    assert txn_index.read(d) == [(8, 11, 14, 15)]


def test_describe_producers_state_is_rebuilt_from_the_log_and_kept_by_a_snapshot(tmp_path):
    """What DescribeProducers answers (epoch, last sequence, last timestamp, the coordinator epoch of the last
    marker, the open transaction's first offset) comes back the same from a replay of the batches and from a
    snapshot."""
    log_ = (encode_batch([{"value": b"v", "timestamp": 1_000}] * 2, base_offset=0, producer_id=7, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
            + encode_control_batch(CONTROL_TYPE_ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=5,
                                   base_offset=2, timestamp=2_000)
            + encode_batch([{"value": b"v", "timestamp": 3_000}] * 3, base_offset=3, producer_id=8,
                           producer_epoch=1, base_sequence=0, is_transactional=True))
    expected = [
        {"producer_id": 7, "producer_epoch": 0, "last_sequence": 1, "last_timestamp": 2_000, "coordinator_epoch": 5,
         "current_txn_start_offset": -1},
        {"producer_id": 8, "producer_epoch": 1, "last_sequence": 2, "last_timestamp": 3_000, "coordinator_epoch": -1,
         "current_txn_start_offset": 3}]
    state = ProducerStateManager(str(tmp_path), 86_400_000)
    state.replay(T, P, log_, 9_999)
    assert sorted(state.active_producers(T, P), key=lambda p: p["producer_id"]) == expected
    state.save({(T, P): 6})
    restarted = ProducerStateManager(str(tmp_path), 86_400_000)
    restarted.load()
    assert sorted(restarted.active_producers(T, P), key=lambda p: p["producer_id"]) == expected

"""Retention, delete-records, truncation, segment rolling and the flush policy."""

from __future__ import annotations

import os

import pytest

from klog._native import LogConfig, LogManager, OffsetOutOfRange
from test_storage import decode, make_batch

DAY = 86_400_000


@pytest.fixture
def mgr(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    yield m
    m.close()


def fill(log, n, *, ts0=1_000, step=1_000, size=200):
    for i in range(n):
        log.append(make_batch([b"%05d" % i + b"." * size], base_ts=ts0 + i * step), leader_epoch=0)
    log.high_watermark = log.log_end_offset


def log_files(log):
    return sorted(f for f in os.listdir(log.dir) if f.endswith(".log"))


def test_time_retention_deletes_old_segments_and_advances_log_start(mgr, tmp_path):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000, retention_ms=10_000))
    fill(log, 30)  # timestamps 1s .. 30s, ~4 batches per segment
    bases = log.segment_base_offsets()
    # At now=25s, segments whose newest record is older than 15s go.
    deleted = log.apply_retention(now_ms=25_000)
    assert deleted > 0
    left = log.segment_base_offsets()
    assert left == bases[deleted:]
    assert log.log_start_offset == left[0]
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert decode(log.read(left[0], 100).to_bytes())[0][0] == left[0]
    # The new log start survives a restart, via the checkpoint written at once.
    text = open(tmp_path / "log-start-offset-checkpoint").read()
    assert f"t 0 {left[0]}\n" in text


def test_time_retention_of_everything_rolls_and_keeps_the_log_end(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000, retention_ms=DAY))
    fill(log, 10)
    leo = log.log_end_offset
    segments = len(log.segment_base_offsets())
    assert segments > 1
    assert log.apply_retention(now_ms=10 * DAY) == segments
    assert log.log_start_offset == leo == log.log_end_offset
    assert log.segment_base_offsets() == [leo]
    assert log.append(make_batch([b"x"]), leader_epoch=0).base_offset == leo


def test_size_retention_keeps_the_newest_bytes(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000, retention_bytes=3_000))
    fill(log, 40)
    total = log.size_in_bytes
    deleted = log.apply_retention(now_ms=2_000)
    assert deleted > 0
    assert log.size_in_bytes <= 3_000 + 1_000  # whole segments: at most one over
    assert log.size_in_bytes >= 3_000 - 1_000
    assert total > log.size_in_bytes


def test_retention_never_deletes_past_the_high_watermark(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000, retention_ms=1))
    fill(log, 20)
    log.high_watermark = 0
    assert log.apply_retention(now_ms=DAY) == 0
    assert log.log_start_offset == 0


def test_log_manager_applies_retention_to_every_log(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(segment_bytes=1_000, retention_ms=10_000))
    for p in range(3):
        fill(m.create("t", p), 20)
    assert m.apply_retention(now_ms=100 * DAY) >= 3 * 4
    assert all(m.get("t", p).log_start_offset == 20 for p in range(3))
    m.close()


def test_delete_records_moves_log_start_inside_a_segment_and_persists(tmp_path):
    d = str(tmp_path)
    m = LogManager([d], LogConfig(segment_bytes=1_000))
    log = m.create("t", 0)
    fill(log, 20)
    bases = log.segment_base_offsets()
    target = bases[2] + 1
    assert log.delete_records_before(target) == target
    assert log.segment_base_offsets() == bases[2:]
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRange):
        log.read(target - 1, 100)
    assert decode(log.read(target, 10).to_bytes())[0][0] == target
    assert log.delete_records_before(target - 1) == target  # never moves back
    with pytest.raises(OffsetOutOfRange, match="high watermark"):
        log.delete_records_before(log.high_watermark + 1)
    del m, log  # crash: the checkpoint written by delete_records must carry the start
    m2 = LogManager([d], LogConfig(segment_bytes=1_000))
    assert m2.get("t", 0).log_start_offset == target
    m2.close()


def test_truncate_to_removes_the_tail_and_reassigns_offsets(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000))
    fill(log, 20)
    log.append(make_batch([b"a"] * 3), leader_epoch=5)
    assert log.leader_epoch_entries() == [(0, 0), (5, 20)]
    bases = log.segment_base_offsets()
    cut = bases[1] + 1
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert log.segment_base_offsets() == bases[:2]
    assert log.high_watermark == cut and log.recovery_point <= cut
    assert log.leader_epoch_entries() == [(0, 0)]
    assert log.append(make_batch([b"new"]), leader_epoch=6).base_offset == cut
    recs = decode(log.read(bases[1], 1 << 20).to_bytes())
    assert [o for o, *_ in recs] == list(range(bases[1], cut + 1))
    assert recs[-1][3] == b"new"


def test_truncate_inside_a_batch_removes_the_whole_batch(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"a"] * 5), leader_epoch=0)
    log.append(make_batch([b"b"] * 5), leader_epoch=0)
    log.truncate_to(7)
    assert log.log_end_offset == 5


def test_truncate_below_log_start_empties_the_log(mgr):
    log = mgr.create("t", 0)
    fill(log, 5)
    log.delete_records_before(3)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    assert log.append(make_batch([b"x"]), leader_epoch=0).base_offset == 1


def test_segments_roll_by_time_using_record_timestamps(mgr):
    log = mgr.create("t", 0, LogConfig(segment_ms=60_000))
    log.append(make_batch([b"a"], base_ts=1_000_000), leader_epoch=0)
    log.append(make_batch([b"b"], base_ts=1_030_000), leader_epoch=0)
    assert len(log.segment_base_offsets()) == 1
    log.append(make_batch([b"c"], base_ts=1_061_000), leader_epoch=0)
    assert log.segment_base_offsets() == [0, 2]


def test_segments_roll_when_the_index_is_full(mgr):
    log = mgr.create("t", 0, LogConfig(segment_index_bytes=80, index_interval_bytes=0))
    fill(log, 40, size=10)
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    # 80 bytes hold 6 time-index entries: at most ~7 batches per segment.
    assert all(b - a <= 8 for a, b in zip(bases, bases[1:]))
    for b in bases[:-1]:
        idx = os.path.getsize(os.path.join(log.dir, "%020d.timeindex" % b))
        assert idx <= 80


def test_explicit_roll_starts_an_empty_segment_and_is_idempotent(mgr):
    log = mgr.create("t", 0)
    log.roll()
    assert log.segment_base_offsets() == [0]
    fill(log, 3)
    log.roll()
    log.roll()
    assert log.segment_base_offsets() == [0, 3]


def test_flush_messages_advances_the_recovery_point(mgr):
    log = mgr.create("t", 0, LogConfig(flush_messages=5))
    log.append(make_batch([b"a"] * 3), leader_epoch=0)
    assert log.recovery_point == 0
    log.append(make_batch([b"a"] * 3), leader_epoch=0)
    assert log.recovery_point == 6


def test_flush_ms_is_applied_by_the_manager(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(flush_ms=1_000))
    log = m.create("t", 0)
    log.append(make_batch([b"a"]), leader_epoch=0)
    assert log.recovery_point == 0
    import time
    now = int(time.time() * 1000)
    assert m.flush_due(now_ms=now + 5_000) == 1
    assert log.recovery_point == 1
    assert m.flush_due(now_ms=now + 10_000) == 0  # nothing new to flush
    m.close()


def test_explicit_flush_and_checkpoint(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0)
    fill(log, 3)
    log.flush()
    assert log.recovery_point == 3
    m.checkpoint()
    assert open(tmp_path / "recovery-point-offset-checkpoint").read() == "0\n1\nt 0 3\n"
    m.close()


def test_update_config_takes_effect_on_the_next_append(mgr):
    log = mgr.create("t", 0)
    fill(log, 3)
    log.update_config(LogConfig(message_timestamp_type="LogAppendTime"))
    r = log.append(make_batch([b"a"]), leader_epoch=0, now_ms=42)
    assert r.log_append_time == 42
    assert log.config.message_timestamp_type == "LogAppendTime"
    with pytest.raises(ValueError):
        log.update_config(LogConfig(segment_bytes=1))


def test_follower_append_keeps_offsets_and_rejects_going_back(mgr):
    log = mgr.create("t", 0)
    b = bytearray(make_batch([b"a"] * 3))
    b[0:8] = (10).to_bytes(8, "big")
    b[12:16] = (4).to_bytes(4, "big")
    r = log.append_as_follower(bytes(b))
    assert (r.base_offset, r.last_offset) == (10, 12)
    assert log.log_end_offset == 13 and log.leader_epoch_entries() == [(4, 10)]
    with pytest.raises(ValueError, match="out of order"):
        log.append_as_follower(bytes(b))


def test_startup_removes_directories_of_interrupted_deletes(tmp_path):
    os.makedirs(tmp_path / "t-0.0123abcd-delete")
    open(tmp_path / "t-0.0123abcd-delete" / "00000000000000000000.log", "wb").close()
    m = LogManager([str(tmp_path)], LogConfig())
    assert m.partitions() == []
    assert not os.path.exists(tmp_path / "t-0.0123abcd-delete")
    m.close()


def test_partitions_spread_over_log_dirs(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, LogConfig())
    for p in range(6):
        m.create("t", p)
    counts = [len([n for n in os.listdir(d) if n.startswith("t-")]) for d in dirs]
    assert counts == [3, 3]
    m.close()
    m2 = LogManager(dirs, LogConfig())
    assert len(m2.partitions()) == 6
    m2.close()


def test_deleted_segments_are_renamed_then_removed_after_file_delete_delay(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0, LogConfig(segment_bytes=1_000, file_delete_delay_ms=5_000))
    fill(log, 20)
    bases = log.segment_base_offsets()
    first_slice = log.read(0, 1 << 20).slices[0]  # handed out before the delete (e.g. a sendfile in flight)
    expected = open(os.path.join(log.dir, "%020d.log" % 0), "rb").read()[first_slice.position:][:first_slice.length]
    log.delete_records_before(bases[2])
    names = set(os.listdir(log.dir))
    for base in bases[:2]:
        for suffix in (".log", ".index", ".timeindex"):
            name = "%020d%s" % (base, suffix)
            assert name not in names and name + ".deleted" in names, sorted(names)
    assert len(log.pending_deleted_files()) == 6
    assert first_slice.to_bytes() == expected  # its descriptor still reads the renamed file
    assert log.segment_base_offsets() == bases[2:]
    now = int(__import__("time").time() * 1000)
    assert log.delete_expired_files(now_ms=now) == 0  # the delay has not passed
    assert sum(f.endswith(".deleted") for f in os.listdir(log.dir)) == 6
    assert m.delete_expired_files(now_ms=now + 6_000) == 2
    assert not [f for f in os.listdir(log.dir) if f.endswith(".deleted")]
    assert log.pending_deleted_files() == []
    m.close()


def test_retention_with_zero_file_delete_delay_removes_files_at_once(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1_000, retention_ms=10_000, file_delete_delay_ms=0))
    fill(log, 30)
    assert log.apply_retention(now_ms=25_000) > 0
    assert not [f for f in os.listdir(log.dir) if f.endswith(".deleted")]
    assert log.pending_deleted_files() == []


def test_leftover_deleted_files_are_removed_by_close_and_by_the_next_start(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0, LogConfig(segment_bytes=1_000, retention_ms=10_000, file_delete_delay_ms=60_000))
    fill(log, 30)
    assert log.apply_retention(now_ms=25_000) > 0
    part = log.dir
    assert [f for f in os.listdir(part) if f.endswith(".deleted")]
    m.close()
    assert not [f for f in os.listdir(part) if f.endswith(".deleted")]
    open(os.path.join(part, "%020d.log.deleted" % 0), "wb").close()  # as a crash would leave it
    m2 = LogManager([str(tmp_path)], LogConfig())
    assert not [f for f in os.listdir(part) if f.endswith(".deleted")]
    m2.close()


def test_preallocated_active_segment_is_trimmed_on_roll_and_close(tmp_path):
    cfg = LogConfig(segment_bytes=64 << 10, preallocate=True)
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0, cfg)
    path = lambda base: os.path.join(log.dir, "%020d.log" % base)  # noqa: E731
    assert os.path.getsize(path(0)) == 64 << 10  # allocated up front
    fill(log, 5)
    assert os.path.getsize(path(0)) == 64 << 10
    data_end = sum(len(b) for b in [log.read(0, 1 << 20).to_bytes()])
    log.roll()
    bases = log.segment_base_offsets()
    assert os.path.getsize(path(0)) == data_end  # sealed: cut back to its data
    assert os.path.getsize(path(bases[-1])) == 64 << 10  # the new active segment is preallocated
    fill(log, 3)
    assert [o for o, *_ in decode(log.read(bases[-1], 1 << 20).to_bytes())] == list(range(bases[-1], bases[-1] + 3))
    m.close()
    assert os.path.getsize(path(bases[-1])) < 64 << 10
    m2 = LogManager([str(tmp_path)], LogConfig())
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 8
    assert len(decode(log2.read(0, 1 << 20).to_bytes())) == 5
    m2.close()


def test_recovery_treats_the_zero_tail_of_a_preallocated_segment_as_no_data(tmp_path, caplog):
    import logging
    import subprocess
    import sys
    import textwrap

    writer = textwrap.dedent(f"""
        import os
        from klog._native import LogConfig, LogManager
        from test_storage import make_batch
        m = LogManager([{str(tmp_path)!r}], LogConfig())
        log = m.create("t", 0, LogConfig(segment_bytes=1 << 20, preallocate=True))
        for i in range(10):
            log.append(make_batch([b"v%d" % i] * 2, base_ts=1_000 + i), leader_epoch=0)
        log.flush()
        os._exit(0)  # a crash: no close, the file keeps its preallocated zero tail
    """)
    # No empty PYTHONPATH entry: it would mean the working directory, where the source tree would shadow
    # the installed wheel's native module.
    paths = [os.path.dirname(__file__), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=60, env=env)
    path = os.path.join(str(tmp_path), "t-0", "%020d.log" % 0)
    assert os.path.getsize(path) == 1 << 20
    caplog.set_level(logging.WARNING, "klog.storage")
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.get("t", 0)
    assert log.log_end_offset == 20
    assert os.path.getsize(path) < 1 << 20
    messages = [r.getMessage() for r in caplog.records if r.name == "klog.storage"]
    assert any("preallocated zeros" in w for w in messages), messages
    assert not any("dropping" in w for w in messages), messages
    assert log.append(make_batch([b"after"]), leader_epoch=0).base_offset == 20
    assert [o for o, *_ in decode(log.read(0, 1 << 20).to_bytes())] == list(range(21))
    m.close()


def test_a_log_dir_failing_during_retention_goes_offline_and_the_other_dirs_logs_are_still_retained(tmp_path):
    # Kafka's LogManager: an I/O error while deleting a log's old segments fails that log's dir (KIP-112), not the
    # retention of every other log. The failure: the segment's rename to *.deleted meets a directory of that name.
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager([str(a), str(b)], LogConfig(segment_bytes=1_000, retention_ms=10_000))
    failing, healthy = m.create("t", 0, log_dir=a), m.create("t", 1, log_dir=b)
    fill(failing, 20)
    fill(healthy, 20)
    first = failing.segment_base_offsets()[0]
    blocker = a / "t-0" / f"{first:020d}.log.deleted"
    blocker.mkdir()
    (blocker / "keep").write_bytes(b"x")
    assert m.apply_retention(now_ms=100 * DAY) >= 4
    assert healthy.log_start_offset == 20
    assert [d for d, _ in m.offline_dirs] == [str(a)]
    assert m.apply_retention(now_ms=100 * DAY) == 0   # the offline dir is not touched again
    m.close()

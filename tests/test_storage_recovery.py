"""Crash recovery and damage handling of partition logs, on real files.

Each test damages a log the way a crash or a bad disk would (torn tail, flipped bytes, zeroed or
missing indexes, kill -9 mid-write, a full disk) and checks that the log reopens consistent,
reports what it dropped in one warning naming file, offset and bytes, and accepts appends.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from klog._native import LogConfig, LogManager, StorageError
from test_storage import decode, make_batch

LOGGER = "klog.storage"


def seg(log_dir: str, base: int, suffix: str = ".log") -> str:
    return os.path.join(log_dir, "%020d%s" % (base, suffix))


def fill(d, batches, cfg=None, records_per_batch=3, topic="t"):
    m = LogManager([d], cfg or LogConfig())
    log = m.create(topic, 0)
    for i in range(batches):
        log.append(make_batch([b"value-%d" % i] * records_per_batch, base_ts=1_000 + i * 10), leader_epoch=1)
    return m, log


def assert_consistent(log):
    """Every offset from log start to log end reads back, in order, with valid CRCs."""
    recs, off = [], log.log_start_offset
    while off < log.log_end_offset:  # a read returns batches of one segment
        got = decode(log.read(off, 1 << 30).to_bytes())
        assert got, f"nothing read at offset {off}"
        recs += [r for r in got if r[0] >= off]
        off = got[-1][0] + 1
    offsets = [o for o, *_ in recs]
    assert offsets == list(range(log.log_start_offset, log.log_end_offset))
    return recs


def batch_positions(path):
    """Byte positions and sizes of the batches of a .log file."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        out.append((pos, size))
        pos += size
    return out


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_torn_tail_is_cut_at_the_last_whole_batch(tmp_path, caplog):
    d = str(tmp_path)
    m, log = fill(d, 20)
    part = log.dir
    m.close()
    path = seg(part, 0)
    size = os.path.getsize(path)
    last_pos, last_size = batch_positions(path)[-1]
    os.truncate(path, size - 10)
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], LogConfig())
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 57
    (msg,) = [w for w in warnings_of(caplog) if "truncated" in w]
    assert path in msg and f"at byte {last_pos}" in msg and "offset 57" in msg
    assert f"dropping {last_size - 10} bytes" in msg
    assert os.path.getsize(path) == last_pos
    assert_consistent(log2)
    assert log2.append(make_batch([b"after"]), leader_epoch=1).base_offset == 57
    m2.close()


def test_flipped_byte_in_an_unflushed_batch_truncates_from_that_batch(tmp_path, caplog):
    d = str(tmp_path)
    m, log = fill(d, 20)
    part = log.dir
    del m, log  # no close: an unclean shutdown, nothing was flushed
    path = seg(part, 0)
    pos, _ = batch_positions(path)[10]
    with open(path, "r+b") as f:
        f.seek(pos + 70)
        b = f.read(1)
        f.seek(pos + 70)
        f.write(bytes([b[0] ^ 0x5A]))
    size = os.path.getsize(path)
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], LogConfig())
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 30
    (msg,) = [w for w in warnings_of(caplog) if "truncated" in w]
    assert path in msg and f"at byte {pos}" in msg and "offset 30" in msg
    assert f"dropping {size - pos} bytes" in msg and "CRC" in msg
    assert_consistent(log2)
    assert log2.append(make_batch([b"x"]), leader_epoch=1).base_offset == 30
    m2.close()


def test_recovery_deletes_segments_after_a_damaged_one(tmp_path, caplog):
    d = str(tmp_path)
    m, log = fill(d, 30, LogConfig(segment_bytes=1000))
    part, bases = log.dir, log.segment_base_offsets()
    assert len(bases) >= 4
    del m, log
    # Damage the second segment: recovery starts at the first (nothing was flushed).
    path = seg(part, bases[1])
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], LogConfig(segment_bytes=1000))
    log2 = m2.get("t", 0)
    assert log2.segment_base_offsets() == bases[:2]
    assert log2.log_end_offset == bases[1]
    ws = warnings_of(caplog)
    assert any("truncated" in w and path in w for w in ws)
    assert any("deleted segment" in w and seg(part, bases[2]) in w for w in ws)
    assert not os.path.exists(seg(part, bases[2])) and not os.path.exists(seg(part, bases[2], ".index"))
    assert_consistent(log2)
    m2.close()


@pytest.mark.parametrize("damage", ["zero", "delete", "garbage"])
def test_damaged_indexes_are_rebuilt_and_lookups_stay_correct(tmp_path, caplog, damage):
    d = str(tmp_path)
    cfg = LogConfig(index_interval_bytes=200, segment_bytes=20_000)
    m, log = fill(d, 200, cfg)
    part, bases = log.dir, log.segment_base_offsets()
    m.close()
    originals = {}
    for b in bases:
        for sfx in (".index", ".timeindex"):
            p = seg(part, b, sfx)
            originals[p] = open(p, "rb").read()
            assert len(originals[p]) > 0
            if damage == "zero":
                open(p, "wb").write(b"\0" * len(originals[p]))
            elif damage == "delete":
                os.remove(p)
            else:
                open(p, "wb").write(b"\x7f" * (len(originals[p]) + 3))
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], cfg)
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 600
    for off in range(0, 600, 7):
        recs = decode(log2.read(off, 1).to_bytes())
        assert recs[0][0] <= off <= recs[-1][0]
    assert log2.offset_for_timestamp(1_000 + 150 * 10) == (450, 2_500)
    rebuilt = [w for w in warnings_of(caplog) if "rebuilt indexes" in w]
    assert len(rebuilt) == len(bases)
    m2.close()
    for p, content in originals.items():
        assert open(p, "rb").read() == content, f"{p} differs after rebuild"


def test_garbage_after_the_last_batch_of_a_clean_log_is_cut(tmp_path, caplog):
    d = str(tmp_path)
    m, log = fill(d, 5)
    part = log.dir
    m.close()
    path = seg(part, 0)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(os.urandom(100))
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], LogConfig())
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 15 and os.path.getsize(path) == size
    assert any("dropping 100 bytes" in w for w in warnings_of(caplog))
    m2.close()


def test_corruption_outside_recovery_is_reported_not_served(tmp_path, caplog):
    d = str(tmp_path)
    cfg = LogConfig(segment_bytes=2_000)
    m, log = fill(d, 40, cfg)
    part, bases = log.dir, log.segment_base_offsets()
    m.close()
    path = seg(part, bases[0])
    positions = batch_positions(path)
    pos, _ = positions[3]
    with open(path, "r+b") as f:  # a batch length field of a sealed, flushed segment
        f.seek(pos + 8)
        f.write(b"\x7f\xff\xff\x00")
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], cfg)
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 120  # clean shutdown: no recovery, nothing cut
    ok = decode(log2.read(0, 3 * positions[0][1]).to_bytes())
    assert [o for o, *_ in ok] == list(range(9))
    with pytest.raises(StorageError, match=re.escape(path)):
        log2.read(9, 1 << 20)
    with pytest.raises(StorageError, match="corrupt"):
        log2.read(0, 1 << 20)
    # Later segments are unaffected.
    assert decode(log2.read(bases[1], 100).to_bytes())[0][0] == bases[1]
    m2.close()


KILL_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from klog._native import LogConfig, LogManager
    from test_storage import make_batch
    m = LogManager([sys.argv[1]], LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
    log = m.create("t", 0)
    i = 0
    while True:
        log.append(make_batch([b"v%d" % i] * 4, base_ts=1000 + i), leader_epoch=7)
        i += 1
        if i % 50 == 0:
            log.flush()
            print(log.log_end_offset, flush=True)
    """
)


def test_kill_minus_9_while_writing_never_loses_flushed_batches(tmp_path, caplog):
    d = str(tmp_path / "logs")
    tests_dir = os.path.dirname(__file__)
    caplog.set_level(logging.WARNING, LOGGER)
    flushed = 0
    for round_ in range(12):
        p = subprocess.Popen([sys.executable, "-c", KILL_WRITER, d, tests_dir], stdout=subprocess.PIPE, text=True)
        lines = []
        deadline = time.monotonic() + 20
        while len(lines) < 2 + round_ % 4 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(int(line))
        time.sleep(0.01 * (round_ % 5))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        p.stdout.close()
        assert lines, "writer printed nothing"
        flushed = max(flushed, lines[-1])
        m = LogManager([d], LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
        log = m.get("t", 0)
        assert log.log_end_offset >= flushed, f"round {round_}: lost flushed data"
        assert_consistent(log)
        assert log.leader_epoch_entries() == [(7, 0)]
        r = log.append(make_batch([b"probe"]), leader_epoch=7)
        assert r.base_offset == log.log_end_offset - 1
        m.close()


DISK_FULL_WRITER = textwrap.dedent(
    """
    import errno, resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    from klog._native import LogConfig, LogManager, StorageError
    from test_storage import make_batch, decode
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    m = LogManager([sys.argv[1]], LogConfig())
    log = m.create("t", 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    n = 0
    try:
        while True:
            log.append(make_batch([b"x" * 3000] * 3), leader_epoch=0)
            n += 3
    except StorageError as e:
        assert e.errno == errno.EFBIG, e
        assert log.dir in str(e), e
        print("error:", e)
    assert log.log_end_offset == n, (log.log_end_offset, n)
    assert [r[0] for r in decode(log.read(0, 1 << 30).to_bytes())] == list(range(n))
    assert log.size_in_bytes <= 100_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    r = log.append(make_batch([b"after"]), leader_epoch=0)
    assert r.base_offset == n
    m.close()
    print("ok", n)
    """
)


def test_full_disk_fails_the_append_and_leaves_the_log_consistent(tmp_path):
    d = str(tmp_path / "logs")
    out = subprocess.run(
        [sys.executable, "-c", DISK_FULL_WRITER, d, os.path.dirname(__file__)],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "File too large" in out.stdout and "ok" in out.stdout
    m = LogManager([d], LogConfig())
    log = m.get("t", 0)
    n = int(out.stdout.split("ok")[1])
    assert log.log_end_offset == n + 1
    assert_consistent(log)
    m.close()


def flip_middle_byte_of_batch(path, index):
    """Flip one byte inside the records of batch ``index`` (its CRC no longer matches)."""
    pos, size = batch_positions(path)[index]
    with open(path, "r+b") as f:
        f.seek(pos + size - 5)
        b = f.read(1)
        f.seek(pos + size - 5)
        f.write(bytes([b[0] ^ 0x40]))
    return pos


def test_a_flipped_byte_in_a_cleanly_shut_down_segment_is_reported_on_read_not_served(tmp_path, caplog):
    from klog._native import CorruptLogError

    d = str(tmp_path)
    m, log = fill(d, 30)  # one segment, 3 records per batch
    part = log.dir
    m.close()
    path = seg(part, 0)
    pos = flip_middle_byte_of_batch(path, 15)  # offsets 45..47
    caplog.set_level(logging.WARNING, LOGGER)
    m2 = LogManager([d], LogConfig())
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 90  # clean shutdown: no recovery ran
    before = decode(log2.read(0, 1 << 20).to_bytes())  # the intact batches before the damage are served
    assert [o for o, *_ in before] == list(range(45))
    for offset in (45, 46, 60):
        with pytest.raises(CorruptLogError) as e:
            log2.read(offset, 1 << 20)
        message = str(e.value)
        assert path in message and f"byte {pos}" in message, message
    with pytest.raises(CorruptLogError, match="offset 45"):
        log2.read(45, 1 << 20)
    assert issubclass(CorruptLogError, StorageError)
    corrupt_lines = [w for w in warnings_of(caplog) if "corrupt segment" in w]
    assert len(corrupt_lines) == 1 and path in corrupt_lines[0] and "offset 45" in corrupt_lines[0], corrupt_lines
    m2.close()


def test_a_fetch_of_a_corrupt_segment_gets_corrupt_message_not_the_bytes(tmp_path):
    import klog
    from klog.protocol import ApiKey
    from klog.records import decode_batches, encode_batch
    from klog.testing.wire import WireClient

    d = str(tmp_path / "data")
    with klog.Broker(d) as broker, WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": "c", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False})
        assert response.topics[0].error_code == 0
        for i in range(20):
            batch = encode_batch([{"key": None, "value": b"value-%d" % i * 20} for _ in range(2)])
            response = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "c", "partition_data": [{"index": 0, "records": batch}]}]})
            assert response.responses[0].partition_responses[0].error_code == 0
    path = seg(os.path.join(d, "c-0"), 0)
    flip_middle_byte_of_batch(path, 10)

    def fetch(offset):
        return wire.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "c", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                      "fetch_offset": offset, "last_fetched_epoch": -1,
                                                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}).responses[0].partitions[0]

    with klog.Broker(d) as broker, WireClient(broker.host, broker.port) as wire:
        intact = fetch(0)  # batches 0..9 (offsets 0..19) are served, up to the damage
        assert intact.error_code == 0
        assert [b.base_offset for b in decode_batches(bytes(intact.records))] == list(range(0, 20, 2))
        for offset in (20, 21, 30):
            partition = fetch(offset)
            assert partition.error_code == 2, partition  # CORRUPT_MESSAGE
            assert not partition.records


TRUNCATING_FOLLOWER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from klog._native import LogConfig, LogManager
    from test_storage import make_batch
    m = LogManager([sys.argv[1]], LogConfig(segment_bytes=20000))
    log = m.create("t", 0)
    for i in range(120):
        log.append(make_batch([b"a" * 500]), leader_epoch=0)
    log.flush()
    m.checkpoint()
    log.truncate_to(50)      # as the replica fetcher truncates a follower (across segment boundaries)
    for i in range(80):
        log.append(make_batch([b"b" * 500]), leader_epoch=1)
    print(open(os.path.join(sys.argv[1], "recovery-point-offset-checkpoint")).read().split()[-1])
    os._exit(0)              # a crash: no close, no periodic checkpoint, no clean-shutdown marker
    """
)


def test_a_follower_truncation_checkpoints_the_recovery_point_so_a_crash_recovers_what_it_rewrote(tmp_path, caplog):
    """Before, the truncation lowered the recovery point in memory only: a crash before the next periodic
    checkpoint reopened the log at the old recovery point (120), above the segments rewritten after offset 50,
    which were neither recovered nor later fsynced; a batch torn there was served as data."""
    d = str(tmp_path / "logs")
    out = subprocess.run([sys.executable, "-c", TRUNCATING_FOLLOWER, d, os.path.dirname(__file__)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == 50
    # the crash tore the rewritten batch at offset 60 (below the old recovery point)
    part = os.path.join(d, "t-0")
    base = max(b for b in (int(f[:-4]) for f in os.listdir(part) if f.endswith(".log")) if b <= 60)
    path = seg(part, base)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        pos = 0
        while int.from_bytes(data[pos:pos + 8], "big") != 60:
            pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        data[pos + 100] ^= 0xFF
        f.seek(0)
        f.write(data)
    caplog.set_level(logging.WARNING, LOGGER)
    m = LogManager([d], LogConfig(segment_bytes=20000))
    log = m.get("t", 0)
    assert log.recovery_point <= 50
    assert log.log_end_offset == 60
    assert any("recovery truncated" in r.getMessage() and "(offset 60)" in r.getMessage() for r in caplog.records)
    assert_consistent(log)
    m.close()


EMPTIED_BY_A_FAILED_TRUNCATION = textwrap.dedent(
    """
    import resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    from klog._native import LogConfig, LogManager
    from test_storage import make_batch
    cfg = LogConfig(segment_bytes=8 << 20, preallocate=True, file_delete_delay_ms=60000)
    m = LogManager([sys.argv[1]], cfg)
    log = m.create("t", 0)
    for i in range(20):
        log.append(make_batch([b"a" * 500]), leader_epoch=0)
    # a full disk: the new segment's preallocation fails (RLIMIT_FSIZE gives EFBIG, as ENOSPC would)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    calls = [lambda: log.truncate_to(0)]
    calls += [lambda: log.truncate_to(10), lambda: log.read(5, 1 << 20),
              lambda: log.append(make_batch([b"z"]), leader_epoch=0), lambda: log.truncate_fully_and_start_at(30)]
    for i, call in enumerate(calls):
        try:
            call()
            print(i, "ok")
        except Exception as e:      # a PanicException (a BaseException) escapes this and the test fails
            print(i, type(e).__name__)
        if i == 0:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    """
)


def test_a_full_truncation_that_cannot_make_its_new_segment_fails_with_storage_errors_not_a_panic(tmp_path):
    """Before, the segments were retired before the new one was made: a failed create left the log without
    segments, and the next truncate_to panicked ("log has segments") across the FFI, a PanicException that
    ``except Exception`` does not catch. Now the log is closed: every later call raises StorageError."""
    d = str(tmp_path / "logs")
    out = subprocess.run([sys.executable, "-c", EMPTIED_BY_A_FAILED_TRUNCATION, d, os.path.dirname(__file__)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:5] == ["0 StorageError", "1 StorageError", "2 StorageError", "3 StorageError",
                                          "4 StorageError"], out.stdout + out.stderr
    # the next start finds the retired files and begins the log empty at its start
    m = LogManager([d], LogConfig())
    log = m.get("t", 0)
    assert log.log_end_offset == log.log_start_offset
    log.append(make_batch([b"after"]), leader_epoch=0)
    m.close()

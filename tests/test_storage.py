"""Partition log and log manager: append, read, offsets, reopen (real files in tmp dirs).

Batches are built and decoded with kafka-python's record batch v2 implementation, an
independent codec, so these tests check klog's files against another reader.
"""

from __future__ import annotations

import os
import socket
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from klog._native import (
    CorruptRecordError,
    LogConfig,
    LogManager,
    OffsetOutOfRange,
    RecordTooLargeError,
    StorageError,
    sendfile,
)


def make_batch(values, *, base_ts=1_000, key_prefix=b"k", compression=0, ts_step=1) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=base_ts + i * ts_step, key=key_prefix + str(i).encode(), value=v, headers=[])
    return bytes(b.build())


def decode(buf: bytes):
    """[(offset, timestamp, key, value)] of every record, after checking every batch's CRC."""
    out = []
    mr = MemoryRecords(buf)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc(), "CRC of a served batch does not verify"
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def batch_bases(buf: bytes):
    mr = MemoryRecords(buf)
    bases = []
    while (b := mr.next_batch()) is not None:
        bases.append(b.base_offset)
    return bases


@pytest.fixture
def mgr(tmp_path):
    m = LogManager([str(tmp_path / "logs")], LogConfig())
    yield m
    m.close()


def test_append_assigns_offsets_and_read_returns_the_same_records(mgr):
    log = mgr.create("orders", 0)
    r1 = log.append(make_batch([b"a", b"b", b"c"]), leader_epoch=0)
    r2 = log.append(make_batch([b"d", b"e"], base_ts=2_000), leader_epoch=0)
    assert (r1.base_offset, r1.last_offset, r1.num_batches) == (0, 2, 1)
    assert (r2.base_offset, r2.last_offset) == (3, 4)
    assert r1.log_append_time == -1 and r1.log_start_offset == 0
    assert r2.max_timestamp == 2_001
    assert log.log_end_offset == 5
    res = log.read(0, 1 << 20)
    recs = decode(res.to_bytes())
    assert [(o, v) for o, _, _, v in recs] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert recs[3][1] == 2_000 and recs[0][2] == b"k0"
    assert res.log_end_offset == 5 and res.log_start_offset == 0


def test_read_inside_a_batch_returns_the_whole_batch(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"x"] * 5), leader_epoch=0)
    log.append(make_batch([b"y"] * 5), leader_epoch=0)
    assert batch_bases(log.read(3, 1 << 20).to_bytes()) == [0, 5]
    assert batch_bases(log.read(7, 1 << 20).to_bytes()) == [5]


def test_max_bytes_returns_whole_batches_and_at_least_one(mgr):
    log = mgr.create("t", 0)
    batches = [make_batch([bytes([i]) * 100]) for i in range(10)]
    for b in batches:
        log.append(b, leader_epoch=0)
    size = len(batches[0])
    assert batch_bases(log.read(0, size * 3 + 10).to_bytes()) == [0, 1, 2]
    # KIP-74: the first batch even when it exceeds max_bytes.
    one = log.read(4, 1)
    assert batch_bases(one.to_bytes()) == [4] and one.length == size
    assert log.read(4, 1, min_one_batch=False).length == 0


def test_max_offset_hides_batches_at_or_after_it(mgr):
    log = mgr.create("t", 0)
    for i in range(4):
        log.append(make_batch([b"v"] * 2), leader_epoch=0)
    res = log.read(0, 1 << 20, max_offset=4)
    assert batch_bases(res.to_bytes()) == [0, 2]
    assert log.read(4, 1 << 20, max_offset=4).length == 0


def test_out_of_range_offsets_raise_and_the_end_reads_empty(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"a"]), leader_epoch=0)
    assert log.read(1, 100).length == 0
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    assert issubclass(OffsetOutOfRange, ValueError)


def test_high_watermark_is_separate_from_the_log_end(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"a"] * 3), leader_epoch=0)
    log.high_watermark = 1
    assert log.high_watermark == 1 and log.log_end_offset == 3
    assert log.read(0, 100).high_watermark == 1
    log.high_watermark = 99  # clamped to the log end
    assert log.high_watermark == 3


def test_data_survives_close_and_reopen(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager([d], LogConfig())
    log = m.create("t", 2)
    for i in range(50):
        log.append(make_batch([b"%d" % i] * 3, base_ts=10_000 + i), leader_epoch=3)
    m.close()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    m2 = LogManager([d], LogConfig())
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    log2 = m2.get("t", 2)
    assert log2 is not None and m2.partitions() == [("t", 2)]
    assert log2.log_end_offset == 150
    recs = decode(log2.read(0, 1 << 30).to_bytes())
    assert [o for o, *_ in recs] == list(range(150))
    assert recs[-1][3] == b"49"
    r = log2.append(make_batch([b"new"]), leader_epoch=3)
    assert r.base_offset == 150
    assert log2.leader_epoch_entries() == [(3, 0)]
    m2.close()
    text = open(os.path.join(d, "recovery-point-offset-checkpoint")).read()
    assert text == "0\n1\nt 2 151\n"


def test_a_close_on_several_threads_flushes_every_log_of_every_dir(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, LogConfig())
    for partition in range(9):
        log = m.create("t", partition)
        for i in range(partition + 1):
            log.append(make_batch([b"%d-%d" % (partition, i)] * 2), leader_epoch=1)
    m.close(threads=4)
    m.close(threads=4)  # a second close does nothing
    checkpoints = {}
    for d in dirs:
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
        lines = open(os.path.join(d, "recovery-point-offset-checkpoint")).read().splitlines()[2:]
        checkpoints.update({int(p): int(o) for _, p, o in (line.split() for line in lines)})
    # every log's recovery point is its log end: all of it was flushed
    assert checkpoints == {p: 2 * (p + 1) for p in range(9)}
    m2 = LogManager(dirs, LogConfig())
    for partition in range(9):
        recs = decode(m2.get("t", partition).read(0, 1 << 30).to_bytes())
        assert [r[3] for r in recs][-1] == b"%d-%d" % (partition, partition)
        assert len(recs) == 2 * (partition + 1)
    m2.close()


def test_log_append_time_stamps_the_batch_and_keeps_a_valid_crc(mgr):
    log = mgr.create("lat", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    r = log.append(make_batch([b"a", b"b"], base_ts=5), leader_epoch=0, now_ms=1_700_000_000_000)
    assert r.log_append_time == 1_700_000_000_000 and r.max_timestamp == 1_700_000_000_000
    recs = decode(log.read(0, 1000).to_bytes())
    assert [ts for _, ts, _, _ in recs] == [1_700_000_000_000] * 2


def test_invalid_batches_are_rejected_and_the_log_is_unchanged(mgr):
    log = mgr.create("t", 0)
    good = make_batch([b"a", b"b"])
    log.append(good, leader_epoch=0)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(bytes(bad_crc), leader_epoch=0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        log.append(good[:-3], leader_epoch=0)
    with pytest.raises(CorruptRecordError, match="magic"):
        log.append(good[:16] + b"\x01" + good[17:], leader_epoch=0)
    # A good batch followed by a bad one: nothing of the request is appended.
    with pytest.raises(CorruptRecordError):
        log.append(good + bytes(bad_crc), leader_epoch=0)
    with pytest.raises(ValueError):
        log.append(b"", leader_epoch=0)
    assert log.log_end_offset == 2
    assert batch_bases(log.read(0, 1 << 20).to_bytes()) == [0]


def test_batches_above_max_message_bytes_are_rejected(mgr):
    log = mgr.create("t", 0, LogConfig(max_message_bytes=1000))
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append(make_batch([b"x" * 2000]), leader_epoch=0)


def test_segments_roll_on_size_and_reads_cross_them(mgr):
    log = mgr.create("t", 0, LogConfig(segment_bytes=1024))
    for i in range(40):
        log.append(make_batch([b"%03d" % i + b"." * 200]), leader_epoch=0)
    bases = log.segment_base_offsets()
    assert len(bases) > 5 and bases[0] == 0
    names = sorted(os.listdir(log.dir))
    assert "%020d.log" % bases[1] in names and "%020d.timeindex" % bases[1] in names
    seen = []
    off = 0
    while off < log.log_end_offset:
        recs = decode(log.read(off, 600).to_bytes())
        assert recs, f"empty read at {off}"
        seen += recs
        off = recs[-1][0] + 1
    assert [o for o, *_ in seen] == list(range(40))


def test_offset_for_timestamp_finds_the_first_record_at_or_after(mgr):
    log = mgr.create("t", 0, LogConfig(index_interval_bytes=1))
    for i in range(20):
        log.append(make_batch([b"v"] * 5, base_ts=1_000 + i * 100, ts_step=10), leader_epoch=0)
    # batch i holds timestamps 1000+100i .. +40
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(1_215) == (12, 1_220)
    assert log.offset_for_timestamp(1_241) == (15, 1_300)
    assert log.offset_for_timestamp(10_000) is None
    assert log.max_timestamp_offset() == (99, 2_940)


def test_max_timestamp_offset_of_an_empty_log(mgr):
    assert mgr.create("t", 0).max_timestamp_offset() == (-1, -1)


def test_max_timestamp_offset_follows_appends_delete_records_and_truncation(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"a", b"b", b"c"], base_ts=1_000, ts_step=100), leader_epoch=0)  # 1000, 1100, 1200
    log.high_watermark = log.log_end_offset
    assert log.max_timestamp_offset() == (2, 1_200)
    assert log.max_timestamp_offset() == (2, 1_200)  # asked again (answered from the last lookup)
    log.append(make_batch([b"d"], base_ts=5_000), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert log.max_timestamp_offset() == (3, 5_000)
    # the log end comes back to 4 with other records: the answer is the new batch's, not the old one
    log.truncate_to(3)
    log.append(make_batch([b"x"], base_ts=9_000), leader_epoch=0)
    assert log.log_end_offset == 4
    log.high_watermark = log.log_end_offset
    assert log.max_timestamp_offset() == (3, 9_000)
    # equal maximum timestamps inside one batch: the first record at or after the new log start
    log.append(make_batch([b"p", b"q", b"r"], base_ts=20_000, ts_step=0), leader_epoch=0)  # offsets 4-6
    log.high_watermark = log.log_end_offset
    assert log.max_timestamp_offset() == (4, 20_000)
    log.delete_records_before(5)
    assert log.max_timestamp_offset() == (5, 20_000)


def test_create_is_idempotent_and_delete_topic_removes_files(mgr, tmp_path):
    a = mgr.create("gone", 0)
    mgr.create("gone", 1)
    mgr.create("kept", 0)
    a.append(make_batch([b"x"]), leader_epoch=0)
    assert mgr.create("gone", 0).log_end_offset == 1
    assert mgr.partitions() == [("gone", 0), ("gone", 1), ("kept", 0)]
    assert mgr.delete_topic("gone") == 2
    assert mgr.partitions() == [("kept", 0)]
    assert mgr.get("gone", 0) is None
    # renamed out of the way now (Kafka's <dir>.<id>-delete), removed after file.delete.delay.ms (60 s)
    left = sorted(os.listdir(tmp_path / "logs"))
    assert [n.split(".")[0] for n in left if n.endswith("-delete")] == ["gone-0", "gone-1"]
    assert mgr.delete_expired_files(int(time.time() * 1000) + 30_000) == 0
    assert mgr.delete_expired_files(int(time.time() * 1000) + 61_000) == 2
    assert sorted(os.listdir(tmp_path / "logs")) == sorted(
        ["kept-0", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"])


def test_delete_partition_removes_only_that_partition(mgr, tmp_path):
    for p in range(3):
        mgr.create("moved", p).append(make_batch([b"x"]), leader_epoch=0)
    assert mgr.delete_partition("moved", 1) is True
    assert mgr.delete_partition("moved", 1) is False   # already gone
    assert mgr.partitions() == [("moved", 0), ("moved", 2)]
    assert mgr.get("moved", 1) is None and mgr.get("moved", 2).log_end_offset == 1
    left = os.listdir(tmp_path / "logs")
    assert [n.split(".")[0] for n in left if n.endswith("-delete")] == ["moved-1"]
    assert {"moved-0", "moved-2"} <= set(left)


def test_a_deleted_topics_slices_keep_reading_until_the_delay_and_close_removes_its_directory(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(file_delete_delay_ms=3_600_000))
    log = m.create("gone", 0)
    log.append(make_batch([b"kept-readable"]), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    held = log.read(0, 1 << 20)
    m.delete_topic("gone")
    assert decode(held.to_bytes())[0][3] == b"kept-readable"
    assert [n for n in os.listdir(tmp_path) if n.startswith("gone-0.") and n.endswith("-delete")]
    m.close()  # nothing is served after close: waiting directories go at once
    assert not [n for n in os.listdir(tmp_path) if n.startswith("gone-")]


def test_a_topic_with_zero_file_delete_delay_is_removed_at_once(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(file_delete_delay_ms=0))
    m.create("gone", 0).append(make_batch([b"x"]), leader_epoch=0)
    m.delete_topic("gone")
    assert not [n for n in os.listdir(tmp_path) if n.startswith("gone-")]
    m.close()


def test_truncation_renames_whole_segments_and_removes_them_after_the_delay(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(segment_bytes=300, file_delete_delay_ms=5_000))
    log = m.create("t", 0)
    for i in range(12):
        log.append(make_batch([b"v%d" % i]), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    cut = bases[1]
    held = log.read(bases[-1], 1 << 20)  # a fetch in flight on a segment the truncation removes
    expected = held.to_bytes()
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    names = set(os.listdir(log.dir))
    for base in bases[1:]:  # the segment starting at the cut goes whole too
        assert "%020d.log" % base not in names and "%020d.log.deleted" % base in names
    assert held.to_bytes() == expected
    assert m.delete_expired_files(int(time.time() * 1000)) == 0
    assert m.delete_expired_files(int(time.time() * 1000) + 6_000) == len(bases) - 1
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    # below the log start: every segment is retired, the log restarts there
    log.append(make_batch([b"after"]), leader_epoch=0)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.segment_base_offsets() == [0]
    assert "%020d.log.deleted" % 0 in os.listdir(log.dir)
    m.close()


def test_invalid_topic_names_are_rejected(mgr):
    for bad in ["", "..", "a/b", "x" * 250, "sp ace"]:
        with pytest.raises(ValueError, match="topic"):
            mgr.create(bad, 0)
    with pytest.raises(ValueError, match="partition"):
        mgr.create("ok", -1)


def test_leader_epochs_are_cached_and_checkpointed(mgr):
    log = mgr.create("t", 0)
    log.append(make_batch([b"a"] * 2), leader_epoch=0)
    log.append(make_batch([b"a"] * 2), leader_epoch=0)
    log.append(make_batch([b"a"]), leader_epoch=4)
    assert log.leader_epoch_entries() == [(0, 0), (4, 4)]
    assert open(os.path.join(log.dir, "leader-epoch-checkpoint")).read() == "0\n2\n0 0\n4 4\n"
    with pytest.raises(ValueError, match="epoch"):
        log.append(make_batch([b"a"]), leader_epoch=2)
    # The stored batches carry the epoch.
    buf = log.read(4, 100).to_bytes()
    assert int.from_bytes(buf[12:16], "big") == 4


def test_file_slices_can_be_sent_with_sendfile(mgr):
    log = mgr.create("t", 0)
    for i in range(5):
        log.append(make_batch([b"z" * 1000]), leader_epoch=0)
    res = log.read(0, 1 << 20)
    expect = res.to_bytes()
    (sl,) = res.slices
    assert sl.length == len(expect) == res.length and sl.position == 0
    a, b = socket.socketpair()
    try:
        sent = 0
        while sent < sl.length:
            sent += sendfile(a.fileno(), sl.fd, sl.position + sent, sl.length - sent)
        got = b""
        while len(got) < len(expect):
            got += b.recv(1 << 20)
        assert got == expect
        os_sent = os.sendfile(a.fileno(), sl.fd, sl.position, sl.length)
        assert os_sent == sl.length
    finally:
        a.close()
        b.close()


def test_bytearray_and_memoryview_records_are_accepted(mgr):
    log = mgr.create("t", 0)
    b = make_batch([b"a"])
    log.append(bytearray(b), leader_epoch=0)
    log.append(memoryview(b), leader_epoch=0)
    # A slice of a larger request buffer, as the protocol decoder hands it over.
    request = b"header" + make_batch([b"sliced"]) + b"trailer"
    log.append(memoryview(request)[6:-7], leader_epoch=0)
    assert log.log_end_offset == 3
    assert decode(log.read(2, 1000).to_bytes())[0][3] == b"sliced"
    with pytest.raises(TypeError, match="contiguous bytes-like"):
        log.append(memoryview(b)[::2], leader_epoch=0)
    with pytest.raises(TypeError):
        log.append("not bytes", leader_epoch=0)


@pytest.mark.parametrize("kwargs, key", [
    (dict(segment_bytes=-1), "segment_bytes"),
    (dict(segment_ms=0), "segment_ms"),
    (dict(segment_index_bytes=4), "segment_index_bytes"),
    (dict(index_interval_bytes=-1), "index_interval_bytes"),
    (dict(retention_ms=-2), "retention_ms"),
    # retention_bytes has no lower bound: any negative value is no size bound, as Kafka takes it
    (dict(flush_messages=0), "flush_messages"),
    (dict(flush_ms=-1), "flush_ms"),
    (dict(message_timestamp_type="Wall"), "message_timestamp_type"),
    (dict(file_delete_delay_ms=-1), "file_delete_delay_ms"),
])
def test_invalid_config_values_are_rejected_naming_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        LogConfig(**kwargs)


def test_config_round_trips_through_to_dict():
    c = LogConfig(segment_bytes=2048, flush_messages=10, message_timestamp_type="LogAppendTime")
    assert LogConfig(**c.to_dict()) == c
    assert c.flush_ms is None and c.message_timestamp_type == "LogAppendTime"


def test_closed_log_raises_storage_error(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0)
    m.close()
    with pytest.raises(StorageError, match="closed"):
        log.append(make_batch([b"a"]), leader_epoch=0)
    assert issubclass(StorageError, OSError)


def test_reads_are_consistent_while_appends_continue_in_other_threads(mgr):
    import random
    import threading

    log = mgr.create("t", 0, LogConfig(segment_bytes=20_000, index_interval_bytes=256))
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def writer() -> None:
        try:
            for i in range(1500):
                log.append(make_batch([b"%d" % i] * (1 + i % 3), base_ts=i), leader_epoch=0)
                if i % 100 == 0:
                    log.append(make_batch([b"big" * 5000]), leader_epoch=0)  # GIL released path
                if i % 50 == 0:
                    time.sleep(0.001)  # small appends keep the GIL: let the readers interleave
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            stop.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        done = 0
        try:
            # Keep reading until the writer is done and this reader has checked a few reads itself,
            # however the scheduler ordered the threads.
            while not stop.is_set() or done < 20:
                end = log.log_end_offset
                if end == 0:
                    continue
                off = rng.randrange(end)
                recs = decode(log.read(off, rng.choice([1, 500, 1 << 20])).to_bytes())
                assert recs and recs[0][0] <= off <= recs[-1][0], (off, recs[:1])
                got = [o for o, *_ in recs]
                assert got == list(range(got[0], got[0] + len(got)))
                reads[0] += 1
                done += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[0]
    assert reads[0] > 0
    assert log.log_end_offset == sum(1 + i % 3 for i in range(1500)) + 15


def test_opening_many_partitions_opens_no_descriptor_per_partition(tmp_path):
    d = str(tmp_path)
    m = LogManager([d], LogConfig())
    for p in range(500):
        m.create("many", p).append(make_batch([b"x"]), leader_epoch=0)
    m.close()
    before = len(os.listdir("/proc/self/fd"))
    m2 = LogManager([d], LogConfig())
    assert len(m2.partitions()) == 500
    opened = len(os.listdir("/proc/self/fd")) - before
    assert opened < 20, f"{opened} descriptors held after opening 500 partitions"
    # Using one partition opens only its files.
    assert decode(m2.get("many", 7).read(0, 100).to_bytes())[0][0] == 0
    assert m2.get("many", 7).log_end_offset == 1
    m2.close()


def test_a_large_batch_with_a_bad_crc_is_rejected_after_its_parallel_check(mgr):
    log = mgr.create("t", 0)
    good = make_batch([os.urandom(100_000) for _ in range(4)])  # > 256 KiB: CRC checked while writing
    log.append(good, leader_epoch=0)
    size = log.size_in_bytes
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 4 and log.size_in_bytes == size
    assert os.path.getsize(os.path.join(log.dir, "%020d.log" % 0)) == size
    assert log.append(good, leader_epoch=0).base_offset == 4
    assert [o for o, *_ in decode(log.read(0, 1 << 30).to_bytes())] == list(range(8))


def _open_log_fds(root):
    """Descriptors of this process open on `.log` files under ``root``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and ".log" in target:
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to count descriptors")
def test_sealed_segment_descriptors_stay_under_the_bound_and_reopen_on_demand(tmp_path):
    bound, partitions = 8, 12
    m = LogManager([str(tmp_path)], LogConfig(segment_bytes=300), max_open_segment_files=bound)
    logs = []
    for p in range(partitions):
        log = m.create("many", p)
        for i in range(12):  # ~3 batches per segment: several sealed segments per partition
            log.append(make_batch([b"p%d-%d" % (p, i)]), leader_epoch=0)
        log.high_watermark = log.log_end_offset
        assert len(log.segment_base_offsets()) >= 3
        logs.append(log)
    for _ in range(2):  # every sealed segment of every partition is opened, some twice
        for log in logs:
            for base in log.segment_base_offsets():
                assert decode(log.read(base, 1 << 20).to_bytes())[0][0] == base
        # the active segments (one per partition) stay open besides the bounded sealed ones
        assert len(_open_log_fds(tmp_path)) <= bound + partitions
        assert m.open_segment_files == (bound, bound)
    # A handed-out slice keeps its descriptor (and the bytes) even when its segment is the least
    # recently used: the budget closes others instead.
    held = logs[0].read(0, 1 << 20).slices[0]
    expected = held.to_bytes()
    for log in logs[1:]:
        for base in log.segment_base_offsets():
            log.read(base, 1 << 20).to_bytes()
    assert os.readlink(f"/proc/self/fd/{held.fd}").endswith("%020d.log" % 0)
    assert os.pread(held.fd, held.length, held.position) == expected
    assert len(_open_log_fds(tmp_path)) <= bound + partitions + 1
    del held
    assert logs[0].read(0, 1 << 20).to_bytes() == expected  # reopened on demand, same bytes
    m.close()
    assert _open_log_fds(tmp_path) == []


def test_a_descriptor_bound_below_one_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="max_open_segment_files"):
        LogManager([str(tmp_path)], LogConfig(), max_open_segment_files=0)


def test_append_results_held_by_the_caller_never_change(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    log = m.create("t", 0)
    first = log.append(make_batch([b"a", b"b"]), leader_epoch=0)
    second = log.append(make_batch([b"c"]), leader_epoch=0)  # `first` is still referenced: not reused
    assert (first.base_offset, first.last_offset, first.num_batches) == (0, 1, 1)
    assert (second.base_offset, second.last_offset) == (2, 2)
    seen = []
    for i in range(5):  # results dropped at once may be recycled; their values are always this append's
        r = log.append(make_batch([b"x"] * (i + 1)), leader_epoch=0)
        seen.append((r.base_offset, r.last_offset, r.num_bytes > 0))
        del r
    assert seen == [(3, 3, True), (4, 5, True), (6, 8, True), (9, 12, True), (13, 17, True)]
    assert (first.base_offset, second.base_offset) == (0, 2)
    m.close()


def test_an_offline_log_dir_takes_no_new_partitions_and_no_writes(tmp_path):
    online, offline = str(tmp_path / "a"), str(tmp_path / "b")
    m = LogManager([online, offline], LogConfig())
    kept = m.create("t", 0)
    kept_dir = os.path.dirname(kept.dir)
    lost_dir = offline if kept_dir == online else online
    assert m.mark_dir_offline(lost_dir, "disk full") is True
    assert m.mark_dir_offline(lost_dir, "again") is False  # the first reason is kept
    assert m.offline_dirs == [(lost_dir, "disk full")]
    with pytest.raises(Exception, match="not a log dir"):
        m.mark_dir_offline(str(tmp_path / "elsewhere"), "x")
    def files(directory):  # name -> (inode, mtime): a checkpoint rewritten by a rename changes both
        return {e.name: (e.inode(), e.stat().st_mtime_ns) for e in os.scandir(directory)}

    before = files(lost_dir)
    time.sleep(0.01)
    for partition in range(1, 5):  # new partitions all go to the online dir
        assert os.path.dirname(m.create("t", partition).dir) == kept_dir
    kept.append(make_batch([b"x"]), leader_epoch=0)
    m.flush_all()
    m.checkpoint()
    m.close()
    # nothing written to the offline dir, not even the clean-shutdown marker (its partitions are recovered)
    assert files(lost_dir) == before
    assert ".kafka_cleanshutdown" in os.listdir(kept_dir)


def test_with_every_log_dir_offline_a_partition_cannot_be_created(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    m.mark_dir_offline(str(tmp_path), "I/O error")
    with pytest.raises(OSError, match="every log dir is offline"):
        m.create("t", 0)
    m.close()

"""Path mode (broker bypass) over Kafka-format segment files, without Spark.

The files are written here in Kafka's layout from batches made by klog's encoder: ``.log`` files of
back-to-back v2 batches, ``.index`` files (relative offset, position) padded with zeros the way a
broker preallocates the active segment's index, ``.timeindex`` files and the log directory's
``log-start-offset-checkpoint``. The Spark-level path-mode test reads Apache Kafka's own files.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from klog.records import CorruptRecordError, encode_batch
from klog.spark.errors import DataLossError
from klog.spark.offsets import TopicPartition
from klog.spark.options import parse_source_options
from klog.spark.planning import OffsetRange, split_ranges
from klog.spark.reading import LogDirOffsets, ReadConfig, ReadTask, read_task
from klog.spark.segments import LogDirError, LogDirs, SegmentSizer

TP = TopicPartition("orders", 0)
BASE_TS = 1_700_000_000_000


def _records(first: int, n: int, value_size: int = 20) -> list[dict]:
    return [
        {"key": b"k%d" % i, "value": (b"v%d-" % i).ljust(value_size, b"x"), "timestamp": BASE_TS + i,
         "headers": [("h", b"%d" % i)] if i % 2 else None}
        for i in range(first, first + n)
    ]


class SegmentWriter:
    """Writes one partition's segments like a broker: an index entry every ``index_interval`` bytes."""

    def __init__(self, log_dir: Path, tp: TopicPartition = TP, index_interval: int = 4096) -> None:
        self.dir = log_dir / f"{tp.topic}-{tp.partition}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_interval = index_interval
        self.next_offset = 0

    def segment(self, batch_sizes: list[int], *, base: int | None = None, value_size: int = 20,
                pad_index: int = 0, gap_after: int = 0) -> int:
        """One segment holding batches of the given record counts; returns its base offset."""
        base = self.next_offset if base is None else base
        name = f"{base:020d}"
        log = bytearray()
        index = bytearray()
        timeindex = bytearray()
        since_index = 0
        offset = base
        for n in batch_sizes:
            if since_index >= self.index_interval:
                index += struct.pack(">ii", offset - base, len(log))
                timeindex += struct.pack(">qi", BASE_TS + offset - 1, offset - 1 - base)
                since_index = 0
            data = encode_batch(_records(offset, n, value_size), base_offset=offset)
            log += data
            since_index += len(data)
            offset += n + gap_after
        (self.dir / f"{name}.log").write_bytes(bytes(log))
        (self.dir / f"{name}.index").write_bytes(bytes(index) + b"\0" * pad_index)
        (self.dir / f"{name}.timeindex").write_bytes(bytes(timeindex) + b"\0" * pad_index)
        self.next_offset = offset
        return base


def checkpoint(log_dir: Path, entries: dict[TopicPartition, int]) -> None:
    lines = ["0", str(len(entries))] + [f"{tp.topic} {tp.partition} {o}" for tp, o in entries.items()]
    (log_dir / "log-start-offset-checkpoint").write_text("\n".join(lines) + "\n")


def read_offsets(log_dir: Path, start: int, until: int, *, fail_on_data_loss: bool = True, tp: TopicPartition = TP):
    opts = parse_source_options(
        {"path": str(log_dir), "subscribe": tp.topic, "includeHeaders": "true",
         "failOnDataLoss": str(fail_on_data_loss).lower(), "segmentReadBytes": str(64 * 1024)},
        streaming=False,
    )
    task = ReadTask(OffsetRange(tp.topic, tp.partition, start, until), ReadConfig.of(opts))
    batches = list(read_task(task))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    return offsets, batches


def test_reads_exactly_the_requested_range_across_segments_and_inside_batches(tmp_path):
    w = SegmentWriter(tmp_path)
    w.segment([10] * 50)  # offsets 0..499
    w.segment([7] * 30)  # 500..709
    offsets, batches = read_offsets(tmp_path, 105, 603)
    # 105 sits inside the batch [100, 110): the batch is read and the rows before 105 dropped
    assert offsets == list(range(105, 603))
    rows = [r for b in batches for r in b.to_pylist()]
    assert rows[0]["key"] == b"k105" and rows[0]["topic"] == "orders" and rows[0]["partition"] == 0
    assert rows[0]["headers"] == [{"key": "h", "value": b"105"}] and rows[1]["headers"] is None
    assert rows[0]["timestamp"].timestamp() * 1000 == BASE_TS + 105
    assert {r["timestampType"] for r in rows} == {0}


def test_log_end_offset_ignores_zero_padded_index_tail_and_a_batch_still_being_written(tmp_path):
    w = SegmentWriter(tmp_path, index_interval=256)
    w.segment([5] * 40)  # 0..199, closed
    base = w.segment([5] * 40, pad_index=1 << 20)  # 200..399, active segment with a preallocated index
    log = w.dir / f"{base:020d}.log"
    partial = encode_batch(_records(400, 5), base_offset=400)
    with open(log, "ab") as f:
        f.write(partial[: len(partial) // 2])  # a write in progress
    files = LogDirs(str(tmp_path)).partition(TP)
    assert files.log_end_offset == 400
    seg = files.segments[1]
    index_offsets, positions = seg.index
    assert index_offsets == sorted(index_offsets) and len(index_offsets) > 2
    assert all(p < seg.size for p in positions)
    offsets, _ = read_offsets(tmp_path, 150, 400)
    assert offsets == list(range(150, 400))


def test_log_start_offset_comes_from_the_checkpoint_and_failOnDataLoss_guards_it(tmp_path):
    w = SegmentWriter(tmp_path)
    w.segment([10] * 20)  # 0..199
    checkpoint(tmp_path, {TP: 42})  # DeleteRecords moved the start inside the first segment
    source = LogDirOffsets(parse_source_options({"path": str(tmp_path), "subscribe": "orders"}, streaming=False))
    assert source.earliest([TP]) == {TP: 42}
    assert source.latest([TP]) == {TP: 200}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        read_offsets(tmp_path, 0, 100)
    offsets, _ = read_offsets(tmp_path, 0, 100, fail_on_data_loss=False)
    assert offsets == list(range(42, 100))


def test_segments_deleted_by_retention_move_the_log_start(tmp_path):
    w = SegmentWriter(tmp_path)
    w.segment([10] * 10)
    second = w.segment([10] * 10)
    (w.dir / "00000000000000000000.log").unlink()
    (w.dir / "00000000000000000000.index").unlink()
    (w.dir / "00000000000000000000.timeindex").unlink()
    assert LogDirs(str(tmp_path)).partition(TP).log_start_offset == second == 100
    with pytest.raises(DataLossError):
        read_offsets(tmp_path, 50, 150)


def test_compacted_gaps_are_not_data_loss(tmp_path):
    w = SegmentWriter(tmp_path)
    w.segment([5] * 10, gap_after=3)  # batches at 0, 8, 16, ... each holding 5 offsets
    offsets, _ = read_offsets(tmp_path, 2, 30)
    assert offsets == [o for b in range(0, 80, 8) for o in range(b, b + 5) if 2 <= o < 30]


def test_planning_splits_a_partition_evenly_in_bytes(tmp_path):
    w = SegmentWriter(tmp_path, index_interval=2048)
    w.segment([20] * 50, value_size=10)  # small records: offsets 0..999, few bytes each
    w.segment([20] * 50, value_size=400)  # big records: offsets 1000..1999, many bytes each
    files = LogDirs(str(tmp_path))
    sizer = SegmentSizer(files)
    parts = split_ranges([OffsetRange("orders", 0, 0, 2000)], min_partitions=4, sizer=sizer)
    assert len(parts) == 4 and parts[0].from_offset == 0 and parts[-1].until_offset == 2000
    sizes = [sizer.size(p) for p in parts]
    assert max(sizes) < 1.35 * min(sizes), sizes
    # an even split in offsets would put almost all bytes in the last two parts
    assert parts[0].until_offset > 1000
    # and reading the parts gives every offset exactly once
    got = []
    for p in parts:
        got += read_offsets(tmp_path, p.from_offset, p.until_offset)[0]
    assert got == list(range(2000))


def test_timestamp_lookup_uses_time_index_and_batch_max_timestamps(tmp_path):
    w = SegmentWriter(tmp_path, index_interval=512)
    w.segment([10] * 30)
    w.segment([10] * 30)  # offsets 300..599, timestamps BASE_TS + offset
    source = LogDirOffsets(parse_source_options({"path": str(tmp_path), "subscribe": "orders"}, streaming=False))
    assert source.for_timestamps({TP: BASE_TS + 457}) == {TP: 457}
    assert source.for_timestamps({TP: BASE_TS}) == {TP: 0}
    assert source.for_timestamps({TP: BASE_TS + 10_000}) == {TP: None}


def test_corrupt_segment_files_raise_errors_naming_file_and_byte(tmp_path):
    w = SegmentWriter(tmp_path)
    base = w.segment([10] * 5)
    log = w.dir / f"{base:020d}.log"
    data = bytearray(log.read_bytes())
    first_len = 12 + struct.unpack_from(">i", data, 8)[0]
    data[first_len + 40] ^= 0xFF  # inside the second batch's CRC-covered part
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        read_offsets(tmp_path, 0, 50)
    struct.pack_into(">i", data, 8, -5)  # first batch length
    log.write_bytes(bytes(data))
    with pytest.raises(LogDirError, match=rf"{base:020d}\.log: batch at byte 0 has an invalid length -5"):
        read_offsets(tmp_path, 0, 50)


def test_missing_log_dir_and_partition_are_clear_errors(tmp_path):
    with pytest.raises(LogDirError, match="does not exist"):
        LogDirs(str(tmp_path / "nope"))
    SegmentWriter(tmp_path).segment([1])
    with pytest.raises(DataLossError, match="orders-7"):
        LogDirs(str(tmp_path)).partition(TopicPartition("orders", 7))

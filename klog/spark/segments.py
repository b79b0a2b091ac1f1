"""Broker-bypass reads: Kafka-format log directories read straight from the files.

Layout (Apache Kafka's and klog's): ``<log dir>/<topic>-<partition>/<20-digit base offset>.log`` with
``.index`` (8-byte entries: relative offset int32, byte position int32) and ``.timeindex`` (12-byte
entries: timestamp int64, relative offset int32), plus ``<log dir>/log-start-offset-checkpoint``.

What this module honours:

* the log start offset: ``max(first segment's base offset, log-start-offset-checkpoint)``, since
  DeleteRecords and retention advance it before the segment files go;
* batches that start before the requested offset (a read from offset 105 starts at the batch holding
  it, the rows before 105 are dropped after decoding);
* index files whose tail is zero padding (the active segment's index is preallocated; after an
  unclean shutdown the padding is still there): entries stop at the first one that does not move
  forward;
* a partial batch at the end of the active segment (a write in progress) ends the log there.

Planning uses the offset index to turn offset ranges into byte sizes, so splits are even in bytes.
Only the 12-byte batch prefix is parsed here; whole batches go to the native decoder.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from klog.spark.errors import DataLossError, KlogSparkError
from klog.spark.offsets import TopicPartition
from klog.spark.planning import OffsetRange

__all__ = [
    "LogDirError",
    "Segment",
    "PartitionLogFiles",
    "LogDirs",
    "SegmentSizer",
    "BATCH_OVERHEAD",
]

#: baseOffset int64 + batchLength int32: the prefix that frames every batch in a segment.
LOG_OVERHEAD = 12
#: The v2 batch header up to and including recordsCount.
BATCH_OVERHEAD = 61
#: Byte offsets inside the v2 header.
_MAGIC_AT = 16
_LAST_OFFSET_DELTA_AT = 23
_MAX_TIMESTAMP_AT = 35
#: A single batch larger than this in a segment file is corruption (Kafka's message.max.bytes is
#: 1 MiB by default and can be raised, but never past an int32; we bound by segment size too).
MAX_BATCH_BYTES = 1 << 30

#: Header scans read this much at a time: several small batches per read, one read per large batch.
_SCAN_READ_BYTES = 16 * 1024

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
_PREFIX = struct.Struct(">qi")
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class LogDirError(KlogSparkError):
    """A log directory or segment file is missing or malformed (the message names the file and byte)."""


@dataclass(frozen=True)
class BatchPrefix:
    base_offset: int
    last_offset: int
    position: int  # byte position in the segment file
    size: int  # whole batch, prefix included
    max_timestamp: int


class Segment:
    """One ``.log`` file and its indexes."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        name = f"{base_offset:020d}"
        self.log_path = directory / f"{name}.log"
        self.index_path = directory / f"{name}.index"
        self.timeindex_path = directory / f"{name}.timeindex"

    def __repr__(self) -> str:
        return f"Segment({self.log_path})"

    @cached_property
    def size(self) -> int:
        return self.log_path.stat().st_size

    @cached_property
    def index(self) -> tuple[list[int], list[int]]:
        """``(absolute offsets, byte positions)`` of the offset index, padding excluded."""
        offsets: list[int] = [self.base_offset]
        positions: list[int] = [0]
        try:
            data = self.index_path.read_bytes()
        except FileNotFoundError:
            return offsets, positions
        usable = len(data) - len(data) % _INDEX_ENTRY.size
        for rel, pos in _INDEX_ENTRY.iter_unpack(memoryview(data)[:usable]):
            absolute = self.base_offset + rel
            # Zero padding (rel 0, pos 0) or any entry that does not move forward ends the index;
            # an entry past the end of the log file is stale (the log was truncated after a crash).
            if absolute <= offsets[-1] or pos <= positions[-1] or pos >= self.size:
                break
            offsets.append(absolute)
            positions.append(pos)
        return offsets, positions

    def position_for(self, offset: int) -> int:
        """Byte position of the batch holding ``offset``, or of an earlier batch (never later)."""
        offsets, positions = self.index
        i = bisect.bisect_right(offsets, offset) - 1
        return positions[max(i, 0)]

    @cached_property
    def time_index(self) -> tuple[list[int], list[int]]:
        """``(timestamps, absolute offsets)`` of the time index, padding excluded."""
        stamps: list[int] = []
        offsets: list[int] = []
        try:
            data = self.timeindex_path.read_bytes()
        except FileNotFoundError:
            return stamps, offsets
        usable = len(data) - len(data) % _TIME_ENTRY.size
        for ts, rel in _TIME_ENTRY.iter_unpack(memoryview(data)[:usable]):
            absolute = self.base_offset + rel
            if (stamps and (ts <= stamps[-1] or absolute <= offsets[-1])) or (not stamps and ts == 0 and rel == 0):
                break
            stamps.append(ts)
            offsets.append(absolute)
        return stamps, offsets

    def scan(self, start_position: int = 0, fd: int | None = None) -> Iterator[BatchPrefix]:
        """Batch prefixes from ``start_position`` to the end of the file (or a partial last batch)."""
        own = fd is None
        if fd is None:
            fd = os.open(self.log_path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            pos = start_position
            buf = b""
            buf_at = pos
            while pos + LOG_OVERHEAD <= size:
                if pos < buf_at or pos - buf_at + BATCH_OVERHEAD > len(buf):
                    buf = os.pread(fd, _SCAN_READ_BYTES, pos)
                    buf_at = pos
                rel = pos - buf_at
                if rel + BATCH_OVERHEAD > len(buf):
                    return  # shorter than a batch header: a write in progress
                base, length = _PREFIX.unpack_from(buf, rel)
                total = LOG_OVERHEAD + length
                if length < BATCH_OVERHEAD - LOG_OVERHEAD or total > MAX_BATCH_BYTES:
                    raise LogDirError(
                        f"{self.log_path}: batch at byte {pos} has an invalid length {length}"
                    )
                if pos + total > size:
                    return  # the last batch is still being written
                magic = buf[rel + _MAGIC_AT]
                if magic != 2:
                    raise LogDirError(
                        f"{self.log_path}: batch at byte {pos} has magic {magic}; only v2 batches are supported"
                    )
                (delta,) = _I32.unpack_from(buf, rel + _LAST_OFFSET_DELTA_AT)
                (max_ts,) = _I64.unpack_from(buf, rel + _MAX_TIMESTAMP_AT)
                yield BatchPrefix(base, base + delta, pos, total, max_ts)
                pos += total
        finally:
            if own:
                os.close(fd)


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Kafka's offset checkpoint file: version line ``0``, a count line, then ``topic partition offset``."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    if not lines:
        return {}  # created but not written yet
    if len(lines) < 2 or lines[0].strip() != "0":
        raise LogDirError(f"{path}: unsupported checkpoint file (version line {lines[:1]!r})")
    try:
        count = int(lines[1])
        out: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            out[TopicPartition(topic, int(partition))] = int(offset)
    except ValueError as e:
        raise LogDirError(f"{path}: malformed checkpoint line ({e})") from None
    if len(out) != count:
        raise LogDirError(f"{path}: expected {count} entries, found {len(out)}")
    return out


class PartitionLogFiles:
    """The segment files of one partition and the offsets they hold."""

    def __init__(self, directory: Path, tp: TopicPartition, checkpointed_start: int | None) -> None:
        self.directory = directory
        self.tp = tp
        bases = sorted(int(m.group(1)) for f in os.listdir(directory) if (m := _SEGMENT_RE.match(f)))
        self.segments = [Segment(directory, b) for b in bases]
        self._checkpointed_start = checkpointed_start

    @property
    def log_start_offset(self) -> int:
        first = self.segments[0].base_offset if self.segments else 0
        return max(first, self._checkpointed_start or 0)

    @cached_property
    def log_end_offset(self) -> int:
        """Next offset after the last complete batch of the last non-empty segment."""
        for seg in reversed(self.segments):
            offsets, positions = seg.index
            last = None
            for prefix in seg.scan(positions[-1]):
                last = prefix
            if last is not None:
                return last.last_offset + 1
            if seg.size == 0 or positions[-1] == 0:
                # an empty segment (just rolled): its base offset is the end
                return max(seg.base_offset, self.log_start_offset)
        return self.log_start_offset

    def _segment_index_for(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    def byte_points(self) -> tuple[list[int], list[int]]:
        """Monotonic ``(offsets, cumulative byte positions)`` over all segments, from the indexes."""
        offsets: list[int] = []
        positions: list[int] = []
        total = 0
        for seg in self.segments:
            seg_offsets, seg_positions = seg.index
            for o, p in zip(seg_offsets, seg_positions):
                if not offsets or o > offsets[-1]:
                    offsets.append(o)
                    positions.append(total + p)
            total += seg.size
        end = self.log_end_offset
        if not offsets or end > offsets[-1]:
            offsets.append(end)
            positions.append(total)
        return offsets, positions

    def batch_for_timestamp(self, timestamp_ms: int) -> tuple[bytes, int] | None:
        """The first batch (bytes, and the log start offset to trim below) whose max timestamp is
        >= ``timestamp_ms``, found through the time index like Kafka's offsetsForTimes; the caller
        decodes it and takes the first record whose timestamp is >= ``timestamp_ms``. None if no
        batch qualifies."""
        start = self.log_start_offset
        for seg in self.segments:
            stamps, ts_offsets = seg.time_index
            if stamps and stamps[-1] < timestamp_ms and seg is not self.segments[-1]:
                # every batch of this (closed) segment is older: its largest timestamp is indexed
                continue
            i = bisect.bisect_left(stamps, timestamp_ms) - 1
            position = seg.position_for(ts_offsets[i]) if i >= 0 else 0
            fd = os.open(seg.log_path, os.O_RDONLY)
            try:
                for prefix in seg.scan(position, fd):
                    if prefix.last_offset >= start and prefix.max_timestamp >= timestamp_ms:
                        return _pread_exact(fd, seg, prefix.size, prefix.position), start
            finally:
                os.close(fd)
        return None

    def batches_in(self, from_offset: int, until_offset: int, chunk_bytes: int) -> Iterator[tuple[memoryview, int]]:
        """Chunks of whole batches covering ``[from_offset, until_offset)``, each with the segment
        file byte position it starts at. The first batch may start before ``from_offset`` and the last
        may run past ``until_offset``: the caller trims rows by offset after decoding."""
        if from_offset >= until_offset:
            return
        first = self._segment_index_for(from_offset)
        for seg in self.segments[first:]:
            if seg.base_offset >= until_offset:
                return
            fd = os.open(seg.log_path, os.O_RDONLY)
            try:
                position = seg.position_for(from_offset) if seg.base_offset <= from_offset else 0
                chunk_start: int | None = None
                chunk_end = 0
                done = False
                for prefix in seg.scan(position, fd):
                    if prefix.base_offset >= until_offset:
                        done = True
                        break
                    if prefix.last_offset < from_offset:
                        continue
                    if chunk_start is None:
                        chunk_start, chunk_end = prefix.position, prefix.position + prefix.size
                    elif prefix.position + prefix.size - chunk_start > chunk_bytes:
                        yield memoryview(_pread_exact(fd, seg, chunk_end - chunk_start, chunk_start)), chunk_start
                        chunk_start, chunk_end = prefix.position, prefix.position + prefix.size
                    else:
                        chunk_end = prefix.position + prefix.size
                    if prefix.last_offset >= until_offset - 1:
                        done = True
                        break
                if chunk_start is not None:
                    yield memoryview(_pread_exact(fd, seg, chunk_end - chunk_start, chunk_start)), chunk_start
                if done:
                    return
            finally:
                os.close(fd)


def _pread_exact(fd: int, seg: Segment, length: int, position: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) != length:
        raise LogDirError(f"{seg.log_path}: short read of {length} bytes at byte {position} (file truncated?)")
    return data


class LogDirs:
    """One or more Kafka log directories (a broker's ``log.dirs``), indexed by topic-partition."""

    def __init__(self, paths: str | list[str]) -> None:
        roots = [Path(p.strip()) for p in (paths.split(",") if isinstance(paths, str) else paths) if str(p).strip()]
        if not roots:
            raise LogDirError("option 'path' names no log directory")
        self.roots = roots
        self._dirs: dict[TopicPartition, Path] = {}
        self._starts: dict[TopicPartition, int] = {}
        for root in roots:
            if not root.is_dir():
                raise LogDirError(f"log directory {root} does not exist or is not a directory")
            self._starts.update(_read_checkpoint(root / "log-start-offset-checkpoint"))
            for entry in os.scandir(root):
                m = _PARTITION_DIR_RE.match(entry.name)
                if m and entry.is_dir():
                    self._dirs[TopicPartition(m.group(1), int(m.group(2)))] = Path(entry.path)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in sorted(self._dirs):
            out.setdefault(tp.topic, []).append(tp.partition)
        return out

    def partition(self, tp: TopicPartition) -> PartitionLogFiles:
        directory = self._dirs.get(tp)
        if directory is None:
            raise DataLossError(f"partition {tp} has no directory in {', '.join(map(str, self.roots))}")
        return PartitionLogFiles(directory, tp, self._starts.get(tp))

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._dirs


class SegmentSizer:
    """Sizes offset ranges in bytes from the segment indexes and cuts them at index entries, so the
    parts of a split partition hold about the same number of bytes (see planning.RangeSizer)."""

    def __init__(self, log_dirs: LogDirs) -> None:
        self._log_dirs = log_dirs
        self._points: dict[TopicPartition, tuple[list[int], list[int]]] = {}

    def _pts(self, tp: TopicPartition) -> tuple[list[int], list[int]]:
        if tp not in self._points:
            self._points[tp] = self._log_dirs.partition(tp).byte_points()
        return self._points[tp]

    def _bytes_at(self, tp: TopicPartition, offset: int) -> int:
        offsets, positions = self._pts(tp)
        i = bisect.bisect_right(offsets, offset) - 1
        if i < 0:
            return 0
        if i + 1 < len(offsets):
            # interpolate between index entries: batches between entries are about the same size
            lo_o, hi_o, lo_p, hi_p = offsets[i], offsets[i + 1], positions[i], positions[i + 1]
            return lo_p + (hi_p - lo_p) * (offset - lo_o) // max(hi_o - lo_o, 1)
        return positions[i]

    def size(self, r: OffsetRange) -> int:
        return max(self._bytes_at(r.tp, r.until_offset) - self._bytes_at(r.tp, r.from_offset), 1)

    def _offset_at(self, tp: TopicPartition, target: int) -> int:
        """Inverse of :meth:`_bytes_at`: the offset at about ``target`` cumulative bytes."""
        offsets, positions = self._pts(tp)
        i = bisect.bisect_right(positions, target) - 1
        if i < 0:
            return offsets[0]
        if i + 1 >= len(offsets):
            return offsets[-1]
        lo_o, hi_o, lo_p, hi_p = offsets[i], offsets[i + 1], positions[i], positions[i + 1]
        return lo_o + (hi_o - lo_o) * (target - lo_p) // max(hi_p - lo_p, 1)

    def cut(self, r: OffsetRange, parts: int) -> list[OffsetRange]:
        lo = self._bytes_at(r.tp, r.from_offset)
        hi = self._bytes_at(r.tp, r.until_offset)
        bounds = [r.from_offset]
        for k in range(1, parts):
            cut_at = self._offset_at(r.tp, lo + (hi - lo) * k // parts)
            if bounds[-1] < cut_at < r.until_offset:
                bounds.append(cut_at)
        bounds.append(r.until_offset)
        return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:])]

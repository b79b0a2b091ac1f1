"""Turning offset ranges into Spark tasks, and the stream's per-trigger rate limit.

Both follow Spark's Kafka source (``KafkaOffsetRangeCalculator`` and ``KafkaMicroBatchStream.rateLimit``)
so a job moved from ``format("kafka")`` to ``format("klog")`` plans the same number of tasks over the
same offsets. Pure Python; path mode plugs in byte sizes from the segment index via :class:`RangeSizer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from klog.spark.offsets import TopicPartition

__all__ = ["OffsetRange", "RangeSizer", "OffsetCountSizer", "split_ranges", "rate_limit"]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


class RangeSizer(Protocol):
    """How big a range is and where to cut it into parts of about equal size."""

    def size(self, r: OffsetRange) -> int: ...

    def cut(self, r: OffsetRange, parts: int) -> list[OffsetRange]: ...


class OffsetCountSizer:
    """Size = number of offsets; cuts at equal offset counts (what Spark's Kafka source does)."""

    def size(self, r: OffsetRange) -> int:
        return r.size

    def cut(self, r: OffsetRange, parts: int) -> list[OffsetRange]:
        out: list[OffsetRange] = []
        remaining = r.size
        start = r.from_offset
        for part in range(parts):
            # The last part takes the rounding remainder, as in Spark.
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.until_offset)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
        return out


def split_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    sizer: RangeSizer | None = None,
) -> list[OffsetRange]:
    """Drop empty ranges; cut ranges above ``max_records_per_partition``; then, if there are fewer
    than ``min_partitions``, cut each range into a share of ``min_partitions`` proportional to its
    size (at least one part each), like Spark's ``KafkaOffsetRangeCalculator``."""
    sizer = sizer or OffsetCountSizer()
    nonempty = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        limited: list[OffsetRange] = []
        for r in nonempty:
            parts = math.ceil(r.size / max_records_per_partition)
            limited.extend(sizer.cut(r, parts) if parts > 1 else [r])
        nonempty = limited
    if min_partitions is None or len(nonempty) >= min_partitions:
        return nonempty
    sizes = [sizer.size(r) for r in nonempty]
    total = sum(sizes)
    if total <= 0:
        return nonempty
    out: list[OffsetRange] = []
    for r, size in zip(nonempty, sizes):
        parts = max(round(size / total * min_partitions), 1)
        out.extend(sizer.cut(r, parts) if parts > 1 else [r])
    return out


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """End offsets for one trigger reading at most ``limit`` offsets, shared proportionally to each
    partition's backlog; a partition with any backlog gets at least one offset (Spark's rule)."""
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + int(step))
    return out

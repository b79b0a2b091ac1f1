"""The ``klog`` data source for PySpark 4's Python Data Source API: batch and streaming reads.

Mirrors Spark's built-in Kafka source (schema, options, offsets JSON, planning, data-loss checks);
executors fetch raw record batches from the partition leader, or read segment files in path mode,
and yield Arrow batches built by klog's native decoder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from klog.spark.arrow import spark_schema
from klog.spark.errors import DataLossError, KlogSparkOptionError
from klog.spark.offsets import EARLIEST, LATEST, TopicPartition, offsets_from_json_obj, offsets_to_json_obj
from klog.spark.options import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    parse_source_options,
)
from klog.spark.planning import OffsetRange, rate_limit, split_ranges
from klog.spark.reading import OffsetSource, ReadConfig, ReadTask, data_loss_message, open_offsets, read_task

try:  # Spark >= 4.2: admission control and Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    _HAS_ADMISSION_CONTROL = True
except ImportError:  # Spark 4.0, 4.1: latestOffset() takes no arguments; the source caps itself
    _HAS_ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder base so the class hierarchy is the same on every Spark version."""

    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

__all__ = ["KlogDataSource", "KlogInputPartition", "KlogBatchReader", "KlogStreamReader"]

log = logging.getLogger("klog.spark")


class KlogInputPartition(InputPartition):
    """One Spark task: an offset range of one topic-partition and how to read it."""

    def __init__(self, task: ReadTask) -> None:
        self.task = task

    def __repr__(self) -> str:
        r = self.task.range
        return f"KlogInputPartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def _check_all_specified(what: str, given: Mapping[TopicPartition, int], assigned: Sequence[TopicPartition]) -> None:
    if set(given) != set(assigned):
        raise KlogSparkOptionError(
            f"If {what} contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest. Specified: {sorted(map(str, given))} "
            f"Assigned: {sorted(map(str, assigned))}"
        )


def resolve_offsets(
    spec: OffsetSpec,
    source: OffsetSource,
    tps: Sequence[TopicPartition],
    *,
    what: str,
    is_start: bool,
    by_timestamp_strategy: str = "error",
) -> dict[TopicPartition, int]:
    """Concrete offsets for an offsets option (earliest, latest, JSON with -2/-1, timestamps)."""
    if not tps:
        return {}
    if isinstance(spec, EarliestOffsets):
        return source.earliest(tps)
    if isinstance(spec, LatestOffsets):
        return source.latest(tps)
    if isinstance(spec, SpecificOffsets):
        _check_all_specified(what, spec.offsets, tps)
        out = dict(spec.offsets)
        need_earliest = [tp for tp, o in out.items() if o == EARLIEST]
        need_latest = [tp for tp, o in out.items() if o == LATEST]
        out.update(source.earliest(need_earliest) if need_earliest else {})
        out.update(source.latest(need_latest) if need_latest else {})
        return out
    if isinstance(spec, GlobalTimestamp):
        stamps = {tp: spec.timestamp_ms for tp in tps}
    elif isinstance(spec, SpecificTimestamps):
        _check_all_specified(what, spec.timestamps_ms, tps)
        stamps = dict(spec.timestamps_ms)
    else:  # pragma: no cover - exhaustive
        raise TypeError(spec)
    found = source.for_timestamps(stamps)
    missing = [tp for tp, off in found.items() if off is None]
    latest = source.latest(missing) if missing else {}
    out = {}
    for tp, off in found.items():
        if off is None:
            if is_start and by_timestamp_strategy == "error":
                raise KlogSparkOptionError(
                    f"No offset matched from request of topic-partition {tp} and timestamp {stamps[tp]} "
                    f"in option '{what}'; set 'startingOffsetsByTimestampStrategy' to 'latest' to start "
                    "from the end instead"
                )
            off = latest[tp]
        out[tp] = off
    return out


def _plan(
    ranges: list[OffsetRange], opts: SourceOptions, source: OffsetSource
) -> list[KlogInputPartition]:
    cfg = ReadConfig.of(opts)
    split = split_ranges(
        ranges,
        min_partitions=opts.min_partitions,
        max_records_per_partition=opts.max_records_per_partition,
        sizer=source.sizer(),
    )
    return [KlogInputPartition(ReadTask(r, cfg)) for r in split]


def _check_range(tp: TopicPartition, start: int, end: int, earliest: int | None, opts: SourceOptions) -> int | None:
    """Spark's checks on a planned range; returns the start to use, or None to skip the range."""
    if end < start:
        msg = f"Partition {tp}'s offset was changed from {start} to {end}, some data may have been missed"
        if opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(tp, msg))
        log.warning("%s", msg)
        return None
    if earliest is not None and start < earliest:
        msg = f"Cannot read offsets {start}-{min(earliest, end) - 1}: the log starts at {earliest}"
        if opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(tp, msg))
        log.warning("%s: %s", tp, msg)
        return min(earliest, end)
    return start


def _read_partition(partition: InputPartition) -> Iterator[Any]:
    """One planned range's rows. When planning yields no range (an empty topic, or every range empty),
    PySpark still runs one task, with ``InputPartition(None)``: it reads nothing."""
    if not isinstance(partition, KlogInputPartition):
        if partition.value is not None:
            raise TypeError(f"klog source: not a partition it planned: {partition!r}")
        return iter(())
    return read_task(partition.task)


class KlogBatchReader(DataSourceReader):
    """``spark.read.format("klog")``: offsets resolved and ranges planned once, on the driver."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        source = open_offsets(opts)
        try:
            tps = source.partitions(opts.subscription)
            if not tps:
                return []
            start = resolve_offsets(opts.starting, source, tps, what="startingOffsets", is_start=True,
                                    by_timestamp_strategy=opts.starting_by_timestamp_strategy)
            end = resolve_offsets(opts.ending, source, tps, what="endingOffsets", is_start=False)
            earliest = source.earliest(tps)
            ranges = []
            for tp in tps:
                begin = _check_range(tp, start[tp], end[tp], earliest.get(tp), opts)
                if begin is not None:
                    ranges.append(OffsetRange(tp.topic, tp.partition, begin, end[tp]))
            return _plan(ranges, opts, source)
        finally:
            source.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(partition)


class KlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("klog")``: offsets JSON like Spark's Kafka source.

    ``latestOffset(start, limit)`` is the admission-control signature of Spark >= 4.2 (the source
    obeys ``ReadMaxRows`` and ``ReadAllAvailable``); Spark 4.0/4.1 call ``latestOffset()`` and the
    source caps itself with ``maxOffsetsPerTrigger``, tracking the start from the offsets Spark
    hands to ``partitions``/``commit`` (after a restart Spark reports the checkpointed offset by
    calling ``partitions(latest, latest)``).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._source: OffsetSource | None = None
        self._last_end: dict[TopicPartition, int] | None = None
        self._available_now_end: dict[TopicPartition, int] | None = None
        self._latest_seen: dict[TopicPartition, int] | None = None

    # The planning process keeps this object for the whole query; executors get a pickled copy
    # for read() only, so connections are never pickled.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_source"] = None
        return state

    @property
    def source(self) -> OffsetSource:
        if self._source is None:
            self._source = open_offsets(self.opts)
        return self._source

    def _partitions_now(self) -> list[TopicPartition]:
        return self.source.partitions(self.opts.subscription)

    def initialOffset(self) -> dict:
        tps = self._partitions_now()
        start = resolve_offsets(self.opts.starting, self.source, tps, what="startingOffsets", is_start=True,
                                by_timestamp_strategy=self.opts.starting_by_timestamp_strategy)
        self._last_end = dict(start)
        return offsets_to_json_obj(start)

    def _latest(self, start: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if self._available_now_end is not None:
            latest = dict(self._available_now_end)
        else:
            tps = self._partitions_now()
            latest = self.source.latest(tps)
        # Partitions that disappeared (topic deleted) are left out, as Spark's Kafka source does:
        # partitions() then reports them as lost (failOnDataLoss) and later batches forget them.
        self._latest_seen = latest
        return latest

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is not None:
            begin = offsets_from_json_obj(start, what="start offset")
        elif self._last_end is not None:
            begin = dict(self._last_end)
        else:
            begin = offsets_from_json_obj(self.initialOffset())
        latest = self._latest(begin)
        if limit is None:
            cap = self.opts.max_offsets_per_trigger  # Spark < 4.2: the source caps itself
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        else:
            cap = None  # ReadAllAvailable (Trigger.Once/AvailableNow) or a limit we do not model
        if cap is not None:
            new = [tp for tp in latest if tp not in begin]
            latest = rate_limit(cap, begin, latest, self.source.earliest(new) if new else {})
        return offsets_to_json_obj(latest)

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._partitions_now()
        self._available_now_end = self.source.latest(tps)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest_seen is None else offsets_to_json_obj(self._latest_seen)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = offsets_from_json_obj(start, what="start offset")
        until = offsets_from_json_obj(end, what="end offset")
        self._last_end = dict(until)
        if begin == until:
            return []
        opts = self.opts
        removed = [tp for tp in begin if tp not in until]
        if removed:
            msg = f"Partitions {', '.join(map(str, sorted(removed)))} were removed; some data may have been missed"
            if opts.fail_on_data_loss:
                raise DataLossError(msg + ". Set the source option 'failOnDataLoss' to 'false' to continue.")
            log.warning("%s", msg)
        new = [tp for tp in until if tp not in begin]
        earliest_new = self.source.earliest(new) if new else {}
        ranges = []
        for tp, end_off in sorted(until.items()):
            start_off = begin.get(tp, earliest_new.get(tp))
            if start_off is None:
                continue
            # A new partition must start at 0 (its log start); if it does not, records went away
            # before this query saw them (Spark reports that as data loss too).
            if tp in earliest_new and start_off != 0:
                msg = f"Added partition {tp} starts from {start_off} instead of 0; some data may have been missed"
                if opts.fail_on_data_loss:
                    raise DataLossError(data_loss_message(tp, msg))
                log.warning("%s", msg)
            checked = _check_range(tp, start_off, end_off, None, opts)
            if checked is not None and end_off > checked:
                ranges.append(OffsetRange(tp.topic, tp.partition, checked, end_off))
        return _plan(ranges, opts, self.source)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(partition)

    def commit(self, end: dict) -> None:
        # Like Spark's Kafka source, nothing is committed to the brokers: the checkpoint is the truth.
        self._last_end = offsets_from_json_obj(end, what="committed offset")

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None


class KlogDataSource(DataSource):
    """``format("klog")``: Spark's Kafka source and sink, served by klog (or any Kafka broker)."""

    @classmethod
    def name(cls) -> str:
        return "klog"

    def _include_headers(self) -> bool:
        raw = {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        return str(raw).strip().lower() == "true"

    def schema(self) -> StructType:
        return spark_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        if schema != spark_schema(self._include_headers()):
            raise KlogSparkOptionError(
                "The klog source has a fixed schema (Spark's Kafka schema) and cannot be set with a custom one"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return KlogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return KlogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):  # -> DataSourceArrowWriter
        from klog.spark.sink import KlogWriter

        return KlogWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool):  # -> DataSourceStreamWriter
        from klog.spark.sink import make_stream_writer

        return make_stream_writer(self.options, schema)

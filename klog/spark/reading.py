"""Where offsets come from and how ranges are read: a broker cluster (Kafka protocol) or log
directories (segment files). The driver plans with an :class:`OffsetSource`; executors read one
:class:`ReadTask` each with :func:`read_task`, yielding ``pyarrow.RecordBatch``es in Spark's Kafka
schema, built by the native decoder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from klog.client.errors import ErrorCode, KafkaError
from klog.spark.brokers import back_off, broker_errors, connect
from klog.spark.errors import BrokerError, DataLossError, KlogSparkError
from klog.spark.offsets import EARLIEST, LATEST, TopicPartition
from klog.spark.options import SourceOptions, Subscription, security_settings
from klog.spark.planning import OffsetCountSizer, OffsetRange, RangeSizer

if TYPE_CHECKING:
    from klog.client.direct import DirectClient

__all__ = ["OffsetSource", "BrokerOffsets", "LogDirOffsets", "ReadConfig", "ReadTask", "read_task", "open_offsets"]

log = logging.getLogger("klog.spark")

#: Consecutive fetches that return no data although the range is not done, before giving up:
#: each one waits up to fetch.max.wait.ms on the broker.
MAX_EMPTY_FETCHES = 20
#: Consecutive retriable fetch errors (leader moves, ...) tolerated before the task fails.
MAX_FETCH_RETRIES = 10
#: A fetch's per-partition byte limit is doubled (up to this) when a batch does not fit in it.
MAX_PARTITION_FETCH_BYTES = 1 << 30


def data_loss_message(tp: TopicPartition, detail: str) -> str:
    """Spark's Kafka source wording, so users recognise it and know the switch."""
    return (
        f"{detail} ({tp}). Some data may have been lost because they are not available in klog/Kafka any more; "
        "either the data was aged out by retention or the topic may have been deleted before all the data in "
        "the topic was processed. If you want your query to continue in such cases, set the source option "
        "'failOnDataLoss' to 'false'."
    )


class OffsetSource:
    """Driver-side view of the partitions and their offsets."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        raise NotImplementedError

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        raise NotImplementedError

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        raise NotImplementedError

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """Earliest offset whose timestamp is >= the given one, None when there is none."""
        raise NotImplementedError

    def sizer(self) -> RangeSizer:
        return OffsetCountSizer()

    def close(self) -> None:
        pass


def _select(subscription: Subscription, available: Mapping[str, Iterable[int]], internal: set[str]) -> list[TopicPartition]:
    if subscription.kind == "assign":
        return sorted(subscription.partitions)
    out: list[TopicPartition] = []
    for topic, parts in available.items():
        if topic in internal and subscription.kind == "subscribePattern":
            continue  # like the Java consumer's exclude.internal.topics=true
        if subscription.matches(topic):
            out.extend(TopicPartition(topic, p) for p in parts)
    return sorted(out)


class BrokerOffsets(OffsetSource):
    """Offsets from a Kafka-protocol cluster (klog or Apache Kafka): Metadata + ListOffsets."""

    def __init__(self, opts: SourceOptions) -> None:
        self.client = connect(opts.bootstrap_servers, client_id=opts.client_id,
                              request_timeout_ms=opts.request_timeout_ms, security=security_settings(opts.kafka_params))

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        topics = None if subscription.kind == "subscribePattern" else sorted(
            {tp.topic for tp in subscription.partitions} if subscription.kind == "assign" else subscription.topics
        )
        with broker_errors():
            meta = self.client.metadata(topics)
        available = {name: sorted(t.partitions) for name, t in meta.topics.items()}
        return _select(subscription, available, {name for name, t in meta.topics.items() if t.is_internal})

    def _list(self, queries: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets: ``{tp: offset}``, -1 where no record is at or after a timestamp."""
        try:
            with broker_errors():
                return {tp: found.offset for tp, found in self.client.list_offsets(queries).items()}
        except BrokerError as e:
            if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise DataLossError(str(e)) from e
            raise

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: LATEST for tp in tps})

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return {tp: (off if off >= 0 else None) for tp, off in self._list(stamps).items()}

    def close(self) -> None:
        self.client.close()


class LogDirOffsets(OffsetSource):
    """Offsets straight from Kafka-format log directories (``option("path", ...)``)."""

    def __init__(self, opts: SourceOptions) -> None:
        from klog.spark.segments import LogDirs

        self.log_dirs = LogDirs(opts.path or "")

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        return _select(subscription, self.log_dirs.topics(), set())

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.log_dirs.partition(tp).log_start_offset for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.log_dirs.partition(tp).log_end_offset for tp in tps}

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        from klog.spark.arrow import first_offset_at_or_after

        out: dict[TopicPartition, int | None] = {}
        for tp, ts in stamps.items():
            found = self.log_dirs.partition(tp).batch_for_timestamp(ts)
            out[tp] = None if found is None else first_offset_at_or_after(found[0], ts, found[1])
        return out

    def sizer(self) -> RangeSizer:
        from klog.spark.segments import SegmentSizer

        return SegmentSizer(self.log_dirs)


def open_offsets(opts: SourceOptions) -> OffsetSource:
    return LogDirOffsets(opts) if opts.path is not None else BrokerOffsets(opts)


@dataclass(frozen=True)
class ReadConfig:
    """What an executor needs to read a range (pickled into every task)."""

    bootstrap_servers: tuple[str, ...]
    path: str | None
    include_headers: bool
    fail_on_data_loss: bool
    client_id: str
    request_timeout_ms: int
    fetch_max_bytes: int
    fetch_partition_max_bytes: int
    fetch_max_wait_ms: int
    segment_read_bytes: int
    #: the kafka.security.protocol / kafka.sasl.* / kafka.ssl.* options
    security: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, opts: SourceOptions) -> ReadConfig:
        return cls(
            bootstrap_servers=opts.bootstrap_servers,
            path=opts.path,
            include_headers=opts.include_headers,
            fail_on_data_loss=opts.fail_on_data_loss,
            client_id=opts.client_id,
            request_timeout_ms=opts.request_timeout_ms,
            fetch_max_bytes=opts.fetch_max_bytes,
            fetch_partition_max_bytes=opts.fetch_partition_max_bytes,
            fetch_max_wait_ms=opts.fetch_max_wait_ms,
            segment_read_bytes=opts.segment_read_bytes,
            security=security_settings(opts.kafka_params),
        )


@dataclass(frozen=True)
class ReadTask:
    """One Spark task: an offset range and how to read it."""

    range: OffsetRange
    config: ReadConfig


def read_task(task: ReadTask):  # -> Iterator[pyarrow.RecordBatch]
    """Read ``task.range`` and yield Arrow record batches in Spark's Kafka schema."""
    if task.config.path is not None:
        yield from _read_log_dir(task)
    else:
        yield from _read_broker(task)


def _read_log_dir(task: ReadTask):
    from klog.spark.arrow import SparkBatchBuilder
    from klog.spark.segments import LogDirs

    r, cfg = task.range, task.config
    files = LogDirs(cfg.path or "").partition(r.tp)
    start = r.from_offset
    log_start = files.log_start_offset
    if start < log_start:
        if cfg.fail_on_data_loss:
            raise DataLossError(data_loss_message(r.tp, f"Cannot read offset {start}: the log starts at {log_start}"))
        log.warning("%s: offsets %d-%d are gone (log starts at %d); skipping them", r.tp, start, log_start - 1, log_start)
        start = log_start
    builder = SparkBatchBuilder(r.topic, r.partition, include_headers=cfg.include_headers)
    for chunk, _position in files.batches_in(start, r.until_offset, cfg.segment_read_bytes):
        batch = builder.build(chunk, start, r.until_offset, partial_ok=False)
        if batch is not None and batch.num_rows:
            yield batch


def _read_broker(task: ReadTask):
    from klog.spark.arrow import SparkBatchBuilder

    r, cfg = task.range, task.config
    tp = r.tp
    builder = SparkBatchBuilder(r.topic, r.partition, include_headers=cfg.include_headers)
    partition_max = cfg.fetch_partition_max_bytes
    offset = r.from_offset
    empty = 0
    failures = 0
    stale = False  # the metadata is asked again before the next fetch (after an error)
    pending = None  # the next fetch, sent while the previous answer is decoded
    with broker_errors(), connect(cfg.bootstrap_servers, client_id=cfg.client_id,
                                  request_timeout_ms=cfg.request_timeout_ms, security=cfg.security) as client:

        def start_fetch(at: int) -> Any:
            return client.start_fetch(tp, at, max_wait_ms=cfg.fetch_max_wait_ms, max_bytes=cfg.fetch_max_bytes,
                                      partition_max_bytes=partition_max)

        while offset < r.until_offset:
            try:
                if pending is None:
                    if stale:
                        client.metadata([tp.topic])
                        stale = False
                    pending = start_fetch(offset)
                part = pending.result()
                pending = None
                error = part.error
                if error is not None and error.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise error
            except KafkaError as e:
                pending = None
                failures += 1
                if failures > MAX_FETCH_RETRIES or not e.retriable:
                    raise
                back_off(min(failures, 5))
                stale = True
                continue
            if error is not None:
                offset = _out_of_range(client, tp, offset, r.until_offset, cfg.fail_on_data_loss)
                continue
            failures = 0
            if part.truncated:
                # The first batch is bigger than partition_max_bytes and the broker did not send it whole
                # (brokers before KIP-74 behaviour): ask for more.
                partition_max = min(partition_max * 2, MAX_PARTITION_FETCH_BYTES)
                continue
            if not part.records and part.next_offset <= offset:
                # (read_committed: an answer of only aborted batches has no records left but moves on.)
                if part.high_watermark <= offset:
                    # The range was planned below the high watermark but the data is gone (the log
                    # was truncated, e.g. an unclean leader election).
                    if cfg.fail_on_data_loss:
                        raise DataLossError(
                            data_loss_message(tp, f"Cannot fetch offsets {offset}-{r.until_offset - 1}: the log ends at {part.high_watermark}")
                        )
                    log.warning("%s: offsets %d-%d are gone (log ends at %d)", tp, offset, r.until_offset - 1, part.high_watermark)
                    return
                empty += 1
                if empty > MAX_EMPTY_FETCHES:
                    raise BrokerError(f"Fetch {tp} at offset {offset} returned no data {empty} times (high watermark {part.high_watermark})")
                continue
            empty = 0
            nxt = part.next_offset
            if nxt <= offset:
                raise BrokerError(f"Fetch {tp} at offset {offset} did not advance (next offset {nxt})")
            if nxt < r.until_offset:
                pending = start_fetch(nxt)  # the broker works while this answer is decoded
            batch = builder.build(part.records, offset, r.until_offset, partial_ok=True)
            del part  # its records are views of a receive buffer the client reuses once they are dropped
            if batch is not None and batch.num_rows:
                yield batch
            offset = nxt


def _out_of_range(client: DirectClient, tp: TopicPartition, offset: int, until: int, fail_on_data_loss: bool) -> int:
    """Where to continue after OFFSET_OUT_OF_RANGE: fail (data loss), or skip to the log start."""
    earliest = client.list_offsets({tp: EARLIEST})[tp].offset
    latest = client.list_offsets({tp: LATEST})[tp].offset
    if offset < earliest:
        if fail_on_data_loss:
            raise DataLossError(data_loss_message(tp, f"Cannot fetch offset {offset}: the log starts at {earliest}"))
        log.warning("%s: offsets %d-%d are gone (log starts at %d); skipping them", tp, offset, min(earliest, until) - 1, earliest)
        return max(earliest, offset) if earliest < until else until
    if offset >= latest:
        if fail_on_data_loss:
            raise DataLossError(data_loss_message(tp, f"Cannot fetch offset {offset}: the log ends at {latest}"))
        return until
    raise KlogSparkError(f"{tp}: broker said offset {offset} is out of range [{earliest}, {latest})")

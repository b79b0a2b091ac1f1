"""``df.write.format("klog")`` and ``writeStream.format("klog")``: Spark's Kafka sink, served by klog.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (optional, string or
binary), ``headers`` (optional, ``array<struct<key: string, value: binary>>``), ``topic`` (string;
required unless the ``topic`` option is set, which then wins), ``partition`` (optional int; null
lets the partitioner decide: murmur2 of the key like Java's producer, sticky for null keys).
Delivery is at-least-once by default, like Spark's Kafka sink: a retried produce or batch may duplicate records.

``exactlyOnce=true`` (streaming writes): every task of a micro-batch writes its rows in one Kafka transaction whose
``transactional.id`` is ``<transactionalIdPrefix>-<query id>-<task partition>``, together with the offset
``batch id + 1`` committed for the group named by that id; the task leaves the transaction open (prepared) and the
driver commits all of them in ``commit(messages, batchId)``, when Spark commits the epoch. A re-run of a batch
(task retry, restart after a crash) first aborts what an earlier attempt left open (``init_transactions``), then
skips a task partition whose marker says the batch is committed. Read the output with read_committed. The
guarantee and its limits are in spark/README.md.
A topic that does not exist is created if the broker auto-creates topics (auto.create.topics.enable), as
Spark's Kafka sink does through its producer.

Batch writes need ``df.write.mode("append").format("klog")``: Spark's Python data source API refuses the
default mode (ErrorIfExists) for Python sinks. Streaming writes are append-only.
"""

from __future__ import annotations

import concurrent.futures
import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from klog.client.errors import ErrorCode, error_info
from klog.spark.brokers import back_off, broker_errors, connect
from klog.spark.errors import BrokerError, KlogSparkOptionError
from klog.spark.offsets import TopicPartition
from klog.spark.options import SinkOptions, parse_sink_options, security_settings

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # Spark 4.0: stream writers get Rows
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

__all__ = ["KlogWriter", "KlogStreamWriter", "make_stream_writer", "validate_sink_schema", "SinkCommitMessage"]


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: records per topic-partition; with exactlyOnce, the transaction it left open for the
    driver to commit (transactional id, producer id, epoch), and whether the batch was committed already."""

    records: dict[str, int] = field(default_factory=dict)
    transaction: tuple[str, int, int] | None = None
    skipped: bool = False


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's Kafka sink checks, with its wording."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if opts.topic is None:
        if "topic" not in types:
            raise KlogSparkOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
            )
        if not isinstance(types["topic"], StringType):
            raise KlogSparkOptionError(f"Topic type must be a string, got {types['topic'].simpleString()}")
    if "value" not in types:
        raise KlogSparkOptionError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise KlogSparkOptionError(f"{name} attribute type must be a string or binary, got {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise KlogSparkOptionError(f"partition attribute type must be an int, got {types['partition'].simpleString()}")
    if "headers" in types:
        h = types["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise KlogSparkOptionError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, got {h.simpleString()}"
            )


def _as_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


#: A task's incoming Arrow batches are gathered up to this many bytes, then partitioned and
#: encoded together, so produced batches fill up to ``kafka.batch.size`` even when Spark hands
#: over small Arrow batches (spark.sql.execution.arrow.maxRecordsPerBatch, 10,000 rows).
FLUSH_BYTES = 16 * 1024 * 1024
#: Rows gathered from a row iterator (Spark 4.0 streaming writes) before they are encoded.
FLUSH_ROWS = 10_000


class _Producer:
    """Partitions columns of rows per topic-partition, encodes them natively into record batches
    (klog.records.encode_columns: no per-record Python objects) and produces them to the leaders."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.client = connect(opts.bootstrap_servers, client_id=opts.client_id, request_timeout_ms=opts.request_timeout_ms,
                              security=security_settings(opts.kafka_params))
        self.written: dict[str, int] = {}
        self._partitions: dict[str, int] = {}
        #: The Produce round in flight.
        self._inflight: concurrent.futures.Future[None] | None = None

    def close(self) -> None:
        self.client.close()

    def _num_partitions(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is not None:
            return count
        # Like Spark's Kafka sink (a Kafka producer): a missing topic is created where the broker's
        # auto.create.topics.enable allows it; Kafka's KRaft brokers create it asynchronously and answer
        # UNKNOWN_TOPIC_OR_PARTITION meanwhile, which a producer retries until request.timeout.ms passes.
        deadline = time.monotonic() + self.opts.request_timeout_ms / 1000
        attempt = 0
        while True:
            with broker_errors():
                meta = self.client.metadata([topic], allow_auto_create=True)
            info = meta.topics.get(topic)
            code = meta.topic_errors.get(topic)
            if (info is not None and info.partitions) or code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION \
                    or time.monotonic() >= deadline:
                break
            back_off(attempt)
            attempt += 1
        if info is None or not info.partitions:
            raise BrokerError(f"topic {topic!r} does not exist ({error_info(code).name if code is not None else 'no partitions'})", code)
        count = self._partitions[topic] = len(info.partitions)
        return count

    def send(self, table: Any) -> None:
        """Produce every row of ``table`` (a ``pyarrow.Table`` with Spark's Kafka sink columns)."""
        import numpy as np
        import pyarrow.compute as pc

        from klog.records import partitions_for_keys

        n = table.num_rows
        if n == 0:
            return
        names = {name.lower(): i for i, name in enumerate(table.schema.names)}

        def column(name: str) -> Any:
            i = names.get(name)
            return table.column(i) if i is not None else None

        values, keys, headers = column("value"), column("key"), column("headers")
        # Rows of each topic (None: every row).
        groups: list[tuple[str, Any]]
        if self.opts.topic is not None:
            groups = [(self.opts.topic, None)]
        else:
            topics = column("topic")
            if topics is None or topics.null_count:
                raise KlogSparkOptionError("null topic present in the data. Use the topic option for setting a default topic.")
            encoded = topics.combine_chunks().dictionary_encode()
            names_of = encoded.dictionary.to_pylist()
            if len(names_of) == 1:
                groups = [(names_of[0], None)]
            else:
                indices = encoded.indices.to_numpy()
                groups = [(t, np.flatnonzero(indices == i)) for i, t in enumerate(names_of)]
        # The partition column: explicit partitions, null = the partitioner decides.
        explicit: Any = None
        explicit_set: Any = None
        partition_col = column("partition")
        if partition_col is not None and partition_col.null_count < n:
            explicit = pc.fill_null(partition_col, 0).to_numpy()
            explicit_set = pc.is_valid(partition_col).to_numpy(zero_copy_only=False)
        by_key: dict[int, Any] = {}
        routed: list[tuple[TopicPartition, Any]] = []
        for topic, rows in groups:
            num_partitions = self._num_partitions(topic)
            if keys is None:
                chosen = np.full(n if rows is None else len(rows), -1, np.int32)
            else:
                if num_partitions not in by_key:  # murmur2 of every key, like Java's default partitioner
                    by_key[num_partitions] = partitions_for_keys(keys, num_partitions, null_partition=-1)
                chosen = by_key[num_partitions].copy() if rows is None else by_key[num_partitions][rows]
            if explicit is not None:
                given = explicit_set if rows is None else explicit_set[rows]
                wanted = explicit if rows is None else explicit[rows]
                bad = given & ((wanted < 0) | (wanted >= num_partitions))
                if bad.any():
                    raise KlogSparkOptionError(
                        f"partition {int(wanted[bad][0])} of topic {topic!r} does not exist (it has {num_partitions})")
                chosen[given] = wanted[given]
            unkeyed = chosen < 0
            if unkeyed.any():
                # Null keys: one partition per flush, like the Java producer's sticky partitioner.
                chosen[unkeyed] = random.randrange(num_partitions)
            for partition in np.unique(chosen):
                picked = np.flatnonzero(chosen == partition)
                if rows is not None:
                    picked = rows[picked]
                tp = TopicPartition(topic, int(partition))
                routed.append((tp, picked))
                self.written[str(tp)] = self.written.get(str(tp), 0) + len(picked)
        self.emit(routed, values, keys, headers)

    def emit(self, routed: list[tuple[TopicPartition, Any]], values: Any, keys: Any, headers: Any) -> None:
        """Encode the rows ``routed`` to each topic-partition natively and produce them."""
        from klog.records import encode_columns

        batches: dict[TopicPartition, list[bytes]] = {}
        for tp, picked in routed:
            encoded_batches = encode_columns(
                values, keys, headers=headers, rows=picked,
                compression=self.opts.compression, max_batch_bytes=self.opts.batch_max_bytes,
            )
            batches.setdefault(tp, []).extend(b for b, _ in encoded_batches)
        # A Produce request carries one batch per partition (Kafka's rule): send in rounds.
        rounds = max(len(bs) for bs in batches.values())
        for k in range(rounds):
            self.produce_pipelined({tp: bs[k] for tp, bs in batches.items() if k < len(bs)})

    def produce_pipelined(self, batches: dict[TopicPartition, bytes]) -> None:
        """Send ``batches`` now and wait for the answers before the next round goes out: one round
        in flight (so each partition's batches stay in order) while the task encodes the next."""
        self.finish()
        with broker_errors():
            if self.opts.acks == 0:
                self.client.produce(batches, acks=0, timeout_ms=self.opts.request_timeout_ms)
            else:
                self._inflight = self.client.start_produce(batches, acks=self.opts.acks,
                                                           timeout_ms=self.opts.request_timeout_ms)

    def finish(self) -> None:
        """Wait for the round in flight (the client retries what is refused with a retriable error)."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            with broker_errors():
                inflight.result()


def _feed_arrow(producer: _Producer, batches: Iterator[Any]) -> None:
    import pyarrow as pa

    gathered: list[Any] = []
    size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        gathered.append(batch)
        size += batch.nbytes
        if size >= FLUSH_BYTES:
            producer.send(pa.Table.from_batches(gathered))
            gathered, size = [], 0
    if gathered:
        producer.send(pa.Table.from_batches(gathered))
    producer.finish()


def _rows_to_table(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    from klog.spark.arrow import HEADERS_TYPE

    def binary(name: str) -> Any:
        return pa.array([_as_bytes(r.get(name)) for r in rows], pa.binary())

    def headers_of(r: dict[str, Any]) -> Any:
        hdrs = r.get("headers")
        return None if hdrs is None else [(h[0], _as_bytes(h[1])) for h in hdrs]

    columns = {"value": binary("value"), "key": binary("key")}
    if any("topic" in r for r in rows):
        columns["topic"] = pa.array([r.get("topic") for r in rows], pa.string())
    if any("partition" in r for r in rows):
        columns["partition"] = pa.array([r.get("partition") for r in rows], pa.int32())
    if any("headers" in r for r in rows):
        columns["headers"] = pa.array([headers_of(r) for r in rows], HEADERS_TYPE)
    return pa.table(columns)


def _feed_rows(producer: _Producer, rows: Iterator[Any]) -> None:
    gathered: list[dict[str, Any]] = []
    for row in rows:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        gathered.append({k.lower(): v for k, v in d.items()})
        if len(gathered) >= FLUSH_ROWS:
            producer.send(_rows_to_table(gathered))
            gathered = []
    if gathered:
        producer.send(_rows_to_table(gathered))
    producer.finish()


def _write(opts: SinkOptions, data: Iterator[Any], feed: Any) -> SinkCommitMessage:
    """At-least-once: produce every row; the brokers acknowledged them all when this returns."""
    producer = _Producer(opts)
    try:
        feed(producer, data)
        return SinkCommitMessage(dict(producer.written))
    finally:
        producer.close()


# ---------------------------------------------------------------------------------------------- exactly-once
#: Spark's local properties naming a streaming task's query (stable across restarts: it is kept in the
#: checkpoint) and micro-batch (StreamExecution.QUERY_ID_KEY, MicroBatchExecution.BATCH_ID_KEY).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class _TransactionalProducer(_Producer):
    """Routes rows like :class:`_Producer` (its DirectClient answers partition counts, auto-creating topics), but
    sends them with a transactional ``klog.Producer`` (which stamps producer id, epoch and sequences)."""

    def __init__(self, opts: SinkOptions, transactional_id: str) -> None:
        super().__init__(opts)
        from klog.client import Producer

        settings = {k: v for k, v in security_settings(opts.kafka_params) if k != "isolation.level"}
        try:
            self.txn = Producer(
                bootstrap_servers=list(opts.bootstrap_servers), transactional_id=transactional_id,
                transaction_timeout_ms=opts.transaction_timeout_ms, acks="all", compression_type=opts.compression,
                batch_size=opts.batch_max_bytes, request_timeout_ms=opts.request_timeout_ms,
                client_id=opts.client_id, **settings)
        except BaseException:
            self.client.close()
            raise
        self.partitions: set[TopicPartition] = set()
        self._sent: list[concurrent.futures.Future[Any]] = []

    def emit(self, routed: list[tuple[TopicPartition, Any]], values: Any, keys: Any, headers: Any) -> None:
        import pyarrow as pa

        for tp, picked in routed:
            rows = pa.array(picked)
            self._sent.append(self.txn.send_batch(
                tp.topic, values.take(rows), None if keys is None else keys.take(rows), partition=tp.partition,
                record_headers=None if headers is None else headers.take(rows)))
            self.partitions.add(tp)

    def finish(self) -> None:
        self.txn.flush(self.opts.request_timeout_ms / 1000)
        for fut in self._sent:
            err = fut.exception(0)
            if err is not None:
                raise BrokerError(f"a record of the transaction was not written: {err}",
                                  getattr(err, "code", None)) from err
        self._sent.clear()

    def close(self) -> None:
        try:
            self.txn.close(0)
        finally:
            super().close()


def _task_batch() -> tuple[str, int, int]:
    """(query id, batch id, task partition) of the running streaming task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or query_id is None or batch_id is None:
        raise KlogSparkOptionError("exactlyOnce=true needs a micro-batch streaming query (writeStream): this task "
                                   "has no streaming query or batch id (continuous triggers are not supported)")
    return query_id, int(batch_id), ctx.partitionId()


def last_committed_batch(opts: SinkOptions, transactional_id: str) -> int | None:
    """The last batch id whose transaction of ``transactional_id`` committed: each transaction commits the offset
    ``batch id + 1`` for its group ``transactional_id`` (on a partition it wrote), atomically with its records.
    A group that does not exist yet (GROUP_ID_NOT_FOUND from Kafka 4's coordinator) has none; retriable errors (a
    coordinator still loading or moving) are asked again until ``kafka.request.timeout.ms``."""
    from klog.client import AdminClient
    from klog.client.errors import KafkaError

    settings = {k: v for k, v in security_settings(opts.kafka_params) if k != "isolation.level"}
    deadline = time.monotonic() + opts.request_timeout_ms / 1000
    attempt = 0
    with AdminClient(bootstrap_servers=list(opts.bootstrap_servers), client_id=opts.client_id,
                     request_timeout_ms=opts.request_timeout_ms, **settings) as admin:
        while True:
            try:
                offsets = admin.list_group_offsets(transactional_id, timeout=opts.request_timeout_ms / 1000)
                break
            except KafkaError as e:
                if e.code == ErrorCode.GROUP_ID_NOT_FOUND:
                    return None
                if not e.retriable or time.monotonic() >= deadline:
                    raise BrokerError(f"committed batch markers of {transactional_id!r}: {e} ({e.name})",
                                      e.code) from e
            back_off(attempt)
            attempt += 1
    return max(o.offset for o in offsets.values()) - 1 if offsets else None


def _write_exactly_once(opts: SinkOptions, data: Iterator[Any], feed: Any) -> SinkCommitMessage:
    """One task of a micro-batch, first phase: write the rows in a transaction of this query and task partition,
    with the batch id as a transactional offset, and hand the open transaction to the driver (:meth:`commit`).
    A batch whose transaction for this task partition already committed (a restart re-runs the last batch when the
    driver died between committing and writing Spark's commit log) is not written again."""
    from klog.client.types import OffsetAndMetadata

    query_id, batch_id, task_partition = _task_batch()
    transactional_id = f"{opts.transactional_id_prefix}-{query_id}-{task_partition}"
    producer = _TransactionalProducer(opts, transactional_id)
    timeout = opts.request_timeout_ms / 1000
    try:
        txn = producer.txn
        with broker_errors():
            # Fences an earlier attempt of this task and aborts what it left open (an uncommitted transaction of
            # this batch, from a failed attempt or a driver that died before committing): it is written again.
            txn.init_transactions(timeout)
        last = last_committed_batch(opts, transactional_id)
        if last is not None and last >= batch_id:
            return SinkCommitMessage(records={}, transaction=None, skipped=True)
        txn.begin_transaction()
        try:
            feed(producer, data)
            if not producer.partitions:
                txn.abort_transaction(timeout)  # nothing was sent: ends locally
                return SinkCommitMessage(records={}, transaction=None)
            marker = min(producer.partitions)
            with broker_errors():
                txn.send_offsets_to_transaction(
                    {marker: OffsetAndMetadata(batch_id + 1, f"spark query {query_id} batch {batch_id}")},
                    transactional_id, timeout)
                prepared = txn.prepare_transaction(timeout)
        except BaseException:
            try:  # frees the partitions' last stable offset now rather than after transaction.timeout.ms
                txn.abort_transaction(timeout)
            except Exception:
                pass
            raise
        return SinkCommitMessage(dict(producer.written),
                                 transaction=(prepared.transactional_id, prepared.producer_id, prepared.producer_epoch))
    finally:
        producer.close()


def end_transactions(opts: SinkOptions, messages: list[Any], *, commit: bool) -> int:
    """Second phase, on the driver: commit (or abort) every transaction the tasks prepared, all at once; returns
    how many. A transaction the coordinator aborted meanwhile fails the commit (and the query): a restart writes
    that task partition's rows again, while the others' committed markers keep them from being written twice."""
    import asyncio

    from klog.client import AsyncProducer
    from klog.client.types import PreparedTransaction

    prepared = [PreparedTransaction(*m.transaction) for m in messages
                if isinstance(m, SinkCommitMessage) and m.transaction is not None]
    if not prepared:
        return 0
    settings = {k: v for k, v in security_settings(opts.kafka_params) if k != "isolation.level"}
    timeout = opts.request_timeout_ms / 1000

    async def end_all() -> None:
        async with AsyncProducer(bootstrap_servers=list(opts.bootstrap_servers), client_id=opts.client_id,
                                     request_timeout_ms=opts.request_timeout_ms, **settings) as producer:
            end = producer.commit_prepared_transaction if commit else producer.abort_prepared_transaction
            results = await asyncio.gather(*(end(t, timeout) for t in prepared), return_exceptions=True)
        failed = [(t, r) for t, r in zip(prepared, results) if isinstance(r, BaseException)]
        if failed:
            raise BrokerError(f"{'commit' if commit else 'abort'} of {len(failed)} of {len(prepared)} transactions "
                              f"failed, first {failed[0][0].transactional_id}: {failed[0][1]}",
                              getattr(failed[0][1], "code", None)) from failed[0][1]

    asyncio.run(end_all())
    return len(prepared)


class _StreamCommit:
    """commit/abort of both stream writers."""

    opts: SinkOptions

    def _write_batch(self, data: Iterator[Any], feed: Any) -> SinkCommitMessage:
        if self.opts.exactly_once:
            return _write_exactly_once(self.opts, data, feed)
        return _write(self.opts, data, feed)

    def commit(self, messages: list[Any], batchId: int) -> None:
        # At-least-once: the brokers acknowledged the records when write() returned.
        if self.opts.exactly_once:
            end_transactions(self.opts, messages, commit=True)

    def abort(self, messages: list[Any], batchId: int) -> None:
        # At-least-once: produced records cannot be withdrawn; Spark retries the batch.
        if self.opts.exactly_once:
            try:
                end_transactions(self.opts, messages, commit=False)
            except Exception:  # the coordinator aborts them on transaction.timeout.ms, a rerun on init
                pass


class KlogWriter(DataSourceArrowWriter):
    """Batch writes: each task produces its Arrow batches to the partition leaders."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        if self.opts.exactly_once:
            raise KlogSparkOptionError("exactlyOnce=true applies to streaming writes (writeStream): a batch write "
                                       "has no batch id to make a retried job idempotent")
        validate_sink_schema(schema, self.opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return _write(self.opts, iterator, _feed_arrow)


class KlogStreamWriter(_StreamCommit, DataSourceStreamWriter):
    """Streaming writes on Spark 4.0 (rows); Spark >= 4.1 gets the Arrow variant below."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_sink_schema(schema, self.opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return self._write_batch(iterator, _feed_rows)


if DataSourceStreamArrowWriter is not None:

    class KlogStreamArrowWriter(_StreamCommit, DataSourceStreamArrowWriter):  # type: ignore[misc,valid-type]
        """Streaming writes on Spark >= 4.1: Arrow batches, like the batch writer."""

        def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
            self.opts = parse_sink_options(options)
            validate_sink_schema(schema, self.opts)

        def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
            return self._write_batch(iterator, _feed_arrow)


def make_stream_writer(options: Mapping[str, str], schema: StructType) -> Any:
    if DataSourceStreamArrowWriter is None:
        return KlogStreamWriter(options, schema)
    return KlogStreamArrowWriter(options, schema)

"""``df.write.format("klog")`` and ``writeStream.format("klog")``: Spark's Kafka sink, served by klog.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (optional, string or
binary), ``headers`` (optional, ``array<struct<key: string, value: binary>>``), ``topic`` (string;
required unless the ``topic`` option is set, which then wins), ``partition`` (optional int; null
lets the partitioner decide: murmur2 of the key like Java's producer, sticky for null keys).
Delivery is at-least-once, like Spark's Kafka sink: a retried produce may duplicate records.
A topic that does not exist is created if the broker auto-creates topics (auto.create.topics.enable), as
Spark's Kafka sink does through its producer.

Batch writes need ``df.write.mode("append").format("klog")``: Spark's Python data source API refuses the
default mode (ErrorIfExists) for Python sinks. Streaming writes are append-only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from klog.spark._kafka import NONE, REFRESH_AND_RETRY, UNKNOWN_TOPIC_OR_PARTITION, KafkaCluster, _backoff, error_name
from klog.spark.errors import BrokerError, KlogSparkOptionError
from klog.spark.offsets import TopicPartition
from klog.spark.options import SinkOptions, parse_sink_options

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # Spark 4.0: stream writers get Rows
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

__all__ = ["KlogWriter", "KlogStreamWriter", "make_stream_writer", "validate_sink_schema", "SinkCommitMessage"]

#: Produce attempts per batch on retriable errors (leader moved, ...), with metadata refreshed.
MAX_PRODUCE_ATTEMPTS = 8


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: records per topic-partition."""

    records: dict[str, int] = field(default_factory=dict)


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
        self.cluster = KafkaCluster(opts.bootstrap_servers, client_id=opts.client_id, timeout_s=opts.request_timeout_ms / 1000)
        self.written: dict[str, int] = {}
        #: The Produce request in flight: (batches not yet acknowledged, requests sent).
        self._inflight: tuple[dict[TopicPartition, bytes], list[tuple[Any, int, int]]] | None = None

    def close(self) -> None:
        self.cluster.close()

    def _num_partitions(self, topic: str) -> int:
        parts = self.cluster.meta.topics.get(topic)
        if parts is None:
            # Like Spark's Kafka sink (a Kafka producer): a missing topic is created where the broker's
            # auto.create.topics.enable allows it; Kafka's KRaft brokers create it asynchronously and answer
            # UNKNOWN_TOPIC_OR_PARTITION meanwhile, which a producer retries until request.timeout.ms passes.
            deadline = time.monotonic() + self.opts.request_timeout_ms / 1000
            attempt = 0
            while True:
                self.cluster.refresh([topic], allow_auto_create=True)
                parts = self.cluster.meta.topics.get(topic)
                if parts or self.cluster.meta.topic_errors.get(topic) != UNKNOWN_TOPIC_OR_PARTITION \
                        or time.monotonic() >= deadline:
                    break
                _backoff(attempt)
                attempt += 1
        if not parts:
            code = self.cluster.meta.topic_errors.get(topic)
            raise BrokerError(f"topic {topic!r} does not exist ({error_name(code) if code is not None else 'no partitions'})", code)
        return len(parts)

    def send(self, table: Any) -> None:
        """Produce every row of ``table`` (a ``pyarrow.Table`` with Spark's Kafka sink columns)."""
        import numpy as np
        import pyarrow.compute as pc

        from klog.records import encode_columns, partitions_for_keys

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
        batches: dict[TopicPartition, list[bytes]] = {}
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
                encoded_batches = encode_columns(
                    values, keys, headers=headers, rows=picked,
                    compression=self.opts.compression, max_batch_bytes=self.opts.batch_max_bytes,
                )
                batches.setdefault(tp, []).extend(b for b, _ in encoded_batches)
                self.written[str(tp)] = self.written.get(str(tp), 0) + len(picked)
        # A Produce request carries one batch per partition (Kafka's rule): send in rounds.
        rounds = max(len(bs) for bs in batches.values())
        for k in range(rounds):
            self.produce_pipelined({tp: bs[k] for tp, bs in batches.items() if k < len(bs)})

    def _send_requests(self, pending: dict[TopicPartition, bytes]) -> list[tuple[Any, int, int]]:
        """One Produce request per leader, sent without waiting: ``[(connection, version,
        correlation id)]``. Batches whose request could not be sent stay unanswered (retried)."""
        from klog.protocol import ApiKey

        by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
        for tp in pending:
            conn = self.cluster.leader_connection(tp)
            by_leader.setdefault((conn.host, conn.port), []).append(tp)
        sent = []
        for address, tps in by_leader.items():
            conn = self.cluster.connection(address)
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append({"index": tp.partition, "records": pending[tp]})
            body = {
                "transactional_id": None,
                "acks": self.opts.acks,
                "timeout_ms": self.opts.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
            }
            try:
                version = conn.version(ApiKey.PRODUCE)
                sent.append((conn, version, conn.send(ApiKey.PRODUCE, version, body)))
            except BrokerError:
                self.cluster.drop(conn)
        return sent

    def _collect(self, sent: list[tuple[Any, int, int]], pending: dict[TopicPartition, bytes]) -> str:
        """Read the answers of ``sent``: acknowledged batches leave ``pending``, retriable errors
        keep theirs there (the last one is returned), other errors raise."""
        from klog.protocol import ApiKey

        last = ""
        for conn, version, cid in sent:
            try:
                resp = conn.receive(ApiKey.PRODUCE, version, cid)
            except BrokerError as e:
                self.cluster.drop(conn)
                last = str(e)
                continue
            for t in resp.responses:
                for p in t.partition_responses:
                    tp = TopicPartition(t.name, p.index)
                    if p.error_code == NONE:
                        pending.pop(tp, None)
                    elif p.error_code in REFRESH_AND_RETRY:
                        last = f"{tp}: {error_name(p.error_code)}"
                    else:
                        detail = f" ({p.error_message})" if getattr(p, "error_message", None) else ""
                        raise BrokerError(f"Produce to {tp}: {error_name(p.error_code)}{detail}", p.error_code)
        return last

    def produce_pipelined(self, batches: dict[TopicPartition, bytes]) -> None:
        """Send ``batches`` now and read the answers before the next request goes out: one request
        in flight (so each partition's batches stay in order) while the task encodes the next."""
        self.finish()
        if self.opts.acks == 0:
            self._produce(batches)
            return
        pending = dict(batches)
        self._inflight = (pending, self._send_requests(pending))

    def finish(self) -> None:
        """Wait for the request in flight; retry what it did not get acknowledged."""
        if self._inflight is None:
            return
        pending, sent = self._inflight
        self._inflight = None
        self._collect(sent, pending)
        if pending:
            self._produce(pending)

    def _produce(self, batches: dict[TopicPartition, bytes]) -> None:
        """Produce ``batches`` and wait for them, retrying retriable errors with fresh metadata."""
        from klog.protocol import ApiKey

        self.finish()
        pending = dict(batches)
        last = ""
        for attempt in range(MAX_PRODUCE_ATTEMPTS):
            if not pending:
                return
            if attempt:
                _backoff(attempt)
                self.cluster.refresh({tp.topic for tp in pending})
            if self.opts.acks == 0:
                for tp in list(pending):
                    conn = self.cluster.leader_connection(tp)
                    body = {"transactional_id": None, "acks": 0, "timeout_ms": self.opts.request_timeout_ms,
                            "topic_data": [{"name": tp.topic, "partition_data": [{"index": tp.partition, "records": pending.pop(tp)}]}]}
                    conn.send_only(ApiKey.PRODUCE, body)
                return
            last = self._collect(self._send_requests(pending), pending) or last
        if pending:
            raise BrokerError(f"Produce to {', '.join(map(str, sorted(pending)))} failed after {MAX_PRODUCE_ATTEMPTS} attempts: {last}")


def _write_arrow(opts: SinkOptions, batches: Iterator[Any]) -> SinkCommitMessage:
    import pyarrow as pa

    producer = _Producer(opts)
    try:
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
        return SinkCommitMessage(dict(producer.written))
    finally:
        producer.close()


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


def _write_rows(opts: SinkOptions, rows: Iterator[Any]) -> SinkCommitMessage:
    producer = _Producer(opts)
    try:
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
        return SinkCommitMessage(dict(producer.written))
    finally:
        producer.close()


class KlogWriter(DataSourceArrowWriter):
    """Batch writes: each task produces its Arrow batches to the partition leaders."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_sink_schema(schema, self.opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return _write_arrow(self.opts, iterator)


class KlogStreamWriter(DataSourceStreamWriter):
    """Streaming writes on Spark 4.0 (rows); Spark >= 4.1 gets the Arrow variant below."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_sink_schema(schema, self.opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return _write_rows(self.opts, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass  # records are acknowledged by the brokers when write() returns (at-least-once)

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass  # produced records cannot be withdrawn; Spark retries the batch (at-least-once)


if DataSourceStreamArrowWriter is not None:

    class KlogStreamArrowWriter(DataSourceStreamArrowWriter):  # type: ignore[misc,valid-type]
        """Streaming writes on Spark >= 4.1: Arrow batches, like the batch writer."""

        def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
            self.opts = parse_sink_options(options)
            validate_sink_schema(schema, self.opts)

        def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
            return _write_arrow(self.opts, iterator)

        def commit(self, messages: list[Any], batchId: int) -> None:
            pass

        def abort(self, messages: list[Any], batchId: int) -> None:
            pass


def make_stream_writer(options: Mapping[str, str], schema: StructType) -> Any:
    if DataSourceStreamArrowWriter is None:
        return KlogStreamWriter(options, schema)
    return KlogStreamArrowWriter(options, schema)

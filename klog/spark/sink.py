"""``df.write.format("klog")`` and ``writeStream.format("klog")``: Spark's Kafka sink, served by klog.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (optional, string or
binary), ``headers`` (optional, ``array<struct<key: string, value: binary>>``), ``topic`` (string;
required unless the ``topic`` option is set, which then wins), ``partition`` (optional int; null
lets the partitioner decide: murmur2 of the key like Java's producer, sticky for null keys).
Delivery is at-least-once, like Spark's Kafka sink: a retried produce may duplicate records.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from klog.spark._kafka import NONE, REFRESH_AND_RETRY, KafkaCluster, _backoff, error_name
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


class _Producer:
    """Groups rows per topic-partition, encodes batches natively and produces them to the leaders."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.cluster = KafkaCluster(opts.bootstrap_servers, client_id=opts.client_id, timeout_s=opts.request_timeout_ms / 1000)
        self.written: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self._pending: dict[TopicPartition, list[dict[str, Any]]] = {}
        self._pending_bytes: dict[TopicPartition, int] = {}

    def close(self) -> None:
        self.cluster.close()

    def _num_partitions(self, topic: str) -> int:
        parts = self.cluster.meta.topics.get(topic)
        if parts is None:
            self.cluster.refresh([topic])
            parts = self.cluster.meta.topics.get(topic)
        if not parts:
            code = self.cluster.meta.topic_errors.get(topic)
            raise BrokerError(f"topic {topic!r} does not exist ({error_name(code) if code is not None else 'no partitions'})", code)
        return len(parts)

    def add(self, topic: str | None, partition: int | None, key: bytes | None, value: bytes | None, headers: Any) -> None:
        from klog.partitioner import partition_for_key

        if topic is None:
            raise KlogSparkOptionError("null topic present in the data. Use the topic option for setting a default topic.")
        n = self._num_partitions(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, n)
            else:
                partition = self._sticky.setdefault(topic, random.randrange(n))
        elif not 0 <= partition < n:
            raise KlogSparkOptionError(f"partition {partition} of topic {topic!r} does not exist (it has {n})")
        hdrs = None
        if headers:
            hdrs = [(h["key"] if isinstance(h, Mapping) else h[0], _as_bytes(h["value"] if isinstance(h, Mapping) else h[1])) for h in headers]
        tp = TopicPartition(topic, partition)
        self._pending.setdefault(tp, []).append({"key": key, "value": value, "headers": hdrs})
        size = self._pending_bytes.get(tp, 0) + (len(key) if key else 0) + (len(value) if value else 0) + 16
        self._pending_bytes[tp] = size
        if size >= self.opts.batch_max_bytes:
            self.flush([tp])
            if key is None:
                # uniform sticky partitioning: move on once a batch is full
                self._sticky[topic] = random.randrange(n)

    def flush(self, only: list[TopicPartition] | None = None) -> None:
        from klog.records import encode_batch

        tps = list(self._pending) if only is None else only
        batches: dict[TopicPartition, bytes] = {}
        for tp in tps:
            records = self._pending.pop(tp, None)
            self._pending_bytes.pop(tp, None)
            if records:
                batches[tp] = encode_batch(records, compression=self.opts.compression)
                self.written[str(tp)] = self.written.get(str(tp), 0) + len(records)
        self._produce(batches)

    def _produce(self, batches: dict[TopicPartition, bytes]) -> None:
        from klog.protocol import ApiKey

        pending = dict(batches)
        for attempt in range(MAX_PRODUCE_ATTEMPTS):
            if not pending:
                return
            if attempt:
                _backoff(attempt)
                self.cluster.refresh({tp.topic for tp in pending})
            by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
            for tp in pending:
                conn = self.cluster.leader_connection(tp)
                by_leader.setdefault((conn.host, conn.port), []).append(tp)
            last = ""
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
                if self.opts.acks == 0:
                    conn.send_only(ApiKey.PRODUCE, body)
                    for tp in tps:
                        pending.pop(tp)
                    continue
                try:
                    _, resp = conn.request(ApiKey.PRODUCE, body)
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
        if pending:
            raise BrokerError(f"Produce to {', '.join(map(str, sorted(pending)))} failed after {MAX_PRODUCE_ATTEMPTS} attempts: {last}")


def _write_arrow(opts: SinkOptions, batches: Iterator[Any]) -> SinkCommitMessage:
    producer = _Producer(opts)
    try:
        for batch in batches:
            names = {n.lower(): i for i, n in enumerate(batch.schema.names)}

            def column(name: str) -> list[Any]:
                i = names.get(name)
                return batch.column(i).to_pylist() if i is not None else [None] * batch.num_rows

            values = column("value")
            keys = column("key")
            topics = [opts.topic] * batch.num_rows if opts.topic is not None else column("topic")
            partitions = column("partition")
            headers = column("headers")
            for topic, partition, key, value, hdrs in zip(topics, partitions, keys, values, headers):
                producer.add(topic, partition, _as_bytes(key), _as_bytes(value), hdrs)
        producer.flush()
        return SinkCommitMessage(dict(producer.written))
    finally:
        producer.close()


def _write_rows(opts: SinkOptions, rows: Iterator[Any]) -> SinkCommitMessage:
    producer = _Producer(opts)
    try:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else dict(row)
            d = {k.lower(): v for k, v in d.items()}
            topic = opts.topic if opts.topic is not None else d.get("topic")
            hdrs = d.get("headers")
            if hdrs:
                hdrs = [(h["key"], h["value"]) for h in hdrs]
            producer.add(topic, d.get("partition"), _as_bytes(d.get("key")), _as_bytes(d.get("value")), hdrs)
        producer.flush()
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

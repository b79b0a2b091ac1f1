"""Spark's Kafka schema in Arrow, built from the native decoder's columns without per-record
Python objects.

Spark maps ``binary`` to ``pa.binary()``, ``string`` to ``pa.string()``, ``timestamp`` to
``pa.timestamp("us", tz="UTC")`` and ``array<struct<...>>`` to ``list<element: struct<...>>``; a
Python data source's batches must match that exactly (Spark >= 4.1 checks it, older versions fail
in the JVM). Kafka timestamps are milliseconds: they are multiplied by 1000.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "arrow_schema",
    "HEADERS_TYPE",
    "spark_schema",
    "SparkBatchBuilder",
    "first_offset_at_or_after",
    "TIMESTAMP_TYPE_CREATE",
    "TIMESTAMP_TYPE_LOG_APPEND",
]

#: Values of the ``timestampType`` column (Kafka's TimestampType ids).
TIMESTAMP_TYPE_CREATE = 0
TIMESTAMP_TYPE_LOG_APPEND = 1
#: Attributes bit of a v2 batch that marks LogAppendTime.
_ATTR_LOG_APPEND_TIME = 0x08

_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = _HEADERS_TYPE = pa.list_(pa.field("element", _HEADER_STRUCT))
_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for the klog (= Kafka) source; every column nullable."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADERS_TYPE))
    return pa.schema(fields)


def spark_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (the same for the klog source)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def _constant_string(value: str, n: int) -> pa.Array:
    encoded = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(encoded))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)])


def _decode(data, min_offset: int | None, partial_ok: bool):
    from klog.records import decode_columns

    return decode_columns(
        data,
        min_offset=min_offset,
        skip_control=True,
        allow_partial_trailing=partial_ok,
        allow_compacted=True,
    )


class SparkBatchBuilder:
    """Decodes raw record batches of one partition into Arrow batches in Spark's Kafka schema."""

    def __init__(self, topic: str, partition: int, *, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        # Columns that are the same in every row, built once and sliced (zero copy) per batch.
        self._topic_cache: pa.Array | None = None
        self._partition_cache: pa.Array | None = None
        self._create_time_cache: pa.Array | None = None

    def _topic_column(self, n: int) -> pa.Array:
        if self._topic_cache is None or len(self._topic_cache) < n:
            self._topic_cache = _constant_string(self.topic, max(n, 1024))
        return self._topic_cache.slice(0, n)

    def _partition_column(self, n: int) -> pa.Array:
        if self._partition_cache is None or len(self._partition_cache) < n:
            self._partition_cache = pa.array(np.full(max(n, 1024), self.partition, np.int32))
        return self._partition_cache.slice(0, n)

    def _create_time_column(self, n: int) -> pa.Array:
        if self._create_time_cache is None or len(self._create_time_cache) < n:
            self._create_time_cache = pa.array(np.full(max(n, 1024), TIMESTAMP_TYPE_CREATE, np.int32))
        return self._create_time_cache.slice(0, n)

    def build(self, data, from_offset: int, until_offset: int, *, partial_ok: bool) -> pa.RecordBatch | None:
        """Rows of ``data`` (whole batches; a partial last one only if ``partial_ok``) with
        offsets in ``[from_offset, until_offset)``; control records left out."""
        cols = _decode(data, from_offset, partial_ok)
        offsets = cols.offsets
        n = int(np.searchsorted(offsets, until_offset, side="left")) if len(offsets) else 0
        if n == 0:
            return None
        b = cols.batches
        rows_per_batch = b["num_rows"]
        log_append = (b["attributes"] & _ATTR_LOG_APPEND_TIME) != 0
        if log_append.any():
            ts_type = pa.array(np.repeat(log_append.astype(np.int32), rows_per_batch))
        else:
            ts_type = self._create_time_column(len(offsets))
        timestamps_us = cols.timestamps * 1000
        arrays = [
            cols.keys.to_arrow(),
            cols.values.to_arrow(),
            self._topic_column(len(offsets)),
            self._partition_column(len(offsets)),
            pa.array(offsets),
            pa.array(timestamps_us).view(_TIMESTAMP_TYPE),
            ts_type,
        ]
        if self.include_headers:
            arrays.append(self._headers(cols))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        return batch if n == len(offsets) else batch.slice(0, n)

    @staticmethod
    def _headers(cols) -> pa.Array:
        list_offsets = cols.header_list_offsets
        n = len(list_offsets) - 1
        keys = cols.header_keys.to_arrow(pa.string())
        values = cols.header_values.to_arrow()
        structs = pa.StructArray.from_arrays([keys, values], fields=list(_HEADER_STRUCT))
        has_headers = np.diff(list_offsets) > 0
        null_count = int(n - np.count_nonzero(has_headers))
        validity = pa.py_buffer(np.packbits(has_headers, bitorder="little")) if null_count else None
        return pa.Array.from_buffers(
            _HEADERS_TYPE,
            n,
            [validity, pa.py_buffer(np.ascontiguousarray(list_offsets, dtype=np.int32))],
            null_count=null_count,
            children=[structs],
        )


def first_offset_at_or_after(batch: bytes, timestamp_ms: int, min_offset: int) -> int | None:
    """Offset of the first record (at or above ``min_offset``) of ``batch`` whose timestamp is
    >= ``timestamp_ms``, like Kafka's offsetsForTimes inside the batch it found."""
    cols = _decode(batch, min_offset, False)
    hits = np.flatnonzero(cols.timestamps >= timestamp_ms)
    return int(cols.offsets[hits[0]]) if len(hits) else None

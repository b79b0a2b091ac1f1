"""Kafka record batches (magic v2): encode, decode, validate, CRC-32C.

Everything here runs in klog's native core (Rust); large inputs are processed with the GIL
released. Corrupt input raises :class:`CorruptRecordError` (a ``ValueError``) whose message names
the field and the byte offset where the input went wrong.

Decoding modes
--------------
``decode_batches(data)`` is strict by default: ``data`` must hold whole batches, each
``RecordsCount == LastOffsetDelta + 1`` with offset deltas ``0, 1, 2, ...`` (what producers
write). A consumer reading a fetch response passes ``allow_partial_trailing=True`` (the broker
may cut the last batch at ``max_bytes``; Kafka's clients ignore that partial batch) and
``allow_compacted=True`` (the log cleaner leaves gaps between offsets and may leave batches with
no records).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union

from klog._native import _core
from klog._native._core import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Batch,
    CorruptRecordError,
    NativeBuffer,
    Record,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "ARROW_SCHEMA",
    "Batch",
    "BinaryColumn",
    "CorruptRecordError",
    "RecordColumns",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Record",
    "RecordLike",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "COMPRESSION_TYPES",
    "crc32c",
    "decode_batches",
    "decode_columns",
    "decode_to_arrow",
    "encode_batch",
    "encode_columns",
    "partitions_for_keys",
    "with_producer_fields",
    "set_producer_fields",
    "encode_control_batch",
    "parse_control_record_key",
]

#: Anything with the buffer protocol that is C-contiguous (bytes, bytearray, memoryview, NumPy
#: arrays, mmap, ...): read in place, never copied. While a call reads a bytearray, resizing it
#: raises ``BufferError`` (the buffer export locks it).
BytesLike = Union[bytes, bytearray, memoryview, Any]
Header = tuple[str, Union[bytes, None]]
Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
TimestampType = Literal["create", "log_append"]

#: Codec names accepted by :func:`encode_batch` (Kafka's ``compression.type`` values).
COMPRESSION_TYPES: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
#: Control record types (the type in a control record's key).
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1


class RecordLike(Protocol):
    """Anything with ``key``, ``value``, ``timestamp`` and ``headers`` attributes."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: Sequence[Header] | None


def crc32c(data: BytesLike) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum record batch v2 uses.

    Hardware accelerated (SSE 4.2 / ARMv8 CRC) where available.
    """
    return _core.crc32c(data)


def encode_batch(
    records: Iterable[Mapping[str, Any] | RecordLike],
    *,
    compression: Compression | str = "none",
    compression_level: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: TimestampType | str = "create",
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one Kafka record batch (magic v2) and return its bytes.

    Each record is a mapping or an object with ``key`` and ``value`` (``bytes`` or ``None``;
    ``None`` and ``b""`` are different and both round-trip), ``timestamp`` (milliseconds since the
    epoch; missing or ``None`` means now) and ``headers`` (a list of ``(str, bytes | None)``).
    Missing fields are ``None``.

    ``compression`` is one of ``none``, ``gzip``, ``snappy`` (xerial-framed, as the Java client
    writes it), ``lz4`` (LZ4 frame) or ``zstd``; ``compression_level`` overrides Kafka's default
    level for gzip (1-9) and zstd (1-22). Offset deltas are ``0..n-1``; ``base_timestamp``
    defaults to the first record's timestamp and ``max_timestamp`` to the largest one.
    Non-idempotent batches use producer id/epoch/sequence ``-1``, as Java does.
    ``timestamp_type`` is ``"create"`` (CreateTime) or ``"log_append"`` (LogAppendTime).

    Raises ``ValueError`` for an empty ``records`` or bad options and ``TypeError`` for records
    of the wrong shape.
    """
    return _core.encode_batch(
        records,
        compression=compression,
        compression_level=compression_level,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        timestamp_type=timestamp_type,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
    )


def encode_columns(
    values: Any,
    keys: Any = None,
    *,
    timestamps: Any = None,
    headers: Any = None,
    shared_headers: Sequence[Header] | Mapping[str, bytes | None] | None = None,
    rows: Any = None,
    compression: Compression | str = "none",
    compression_level: int | None = None,
    max_batch_bytes: int | None = None,
    max_batch_records: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    timestamp_type: TimestampType | str = "create",
    mutable: bool = False,
) -> list[tuple[bytes, int]]:
    """Encode columns of records as Kafka record batches (magic v2): ``[(batch bytes, record
    count), ...]`` in row order, no batch for no rows.

    Nothing is built per record in Python: the columns are read in place by the native core
    (with the GIL released for large inputs and for compression), and every batch is
    byte-for-byte what :func:`encode_batch` writes for the same records.

    ``values`` (required) and ``keys`` (optional) are columns of ``bytes | None``, any of:
    ``pyarrow`` ``binary``/``large_binary``/``string``/``large_string``/``fixed_size_binary``
    arrays or chunked arrays (sliced arrays too; read from their buffers through the Arrow C
    data interface, so any library exporting ``__arrow_c_array__``/``__arrow_c_stream__``
    works), NumPy ``S<n>`` arrays (trailing NUL bytes dropped, as NumPy's own ``arr[i]`` does) and
    2-D ``uint8`` ``(rows, width)`` arrays (every row exactly ``width`` bytes), never null, or a list/tuple/NumPy object array of ``bytes | str | None`` (``str`` is UTF-8
    encoded; ``bytearray``/``memoryview`` items are copied).

    ``timestamps``: ``None`` (now, for every record), one ``int`` for every record, or a column
    of milliseconds since the epoch: NumPy ``int64`` or ``datetime64``, Arrow ``int64`` or
    ``timestamp`` (any unit), or a list of ``int | None`` (``None`` = now).

    ``headers``: one header list per row, as an Arrow ``list<struct<key: string, value:
    binary>>`` column (Spark's Kafka sink layout; a null list = no headers) or a sequence of
    ``[(str, bytes | None), ...] | None``. ``shared_headers``: one header list put on every
    record (a list of pairs or a dict). Pass one or the other.

    ``rows``: encode only these row numbers, in this order (an int array or list); for example
    one partition's rows after :func:`partitions_for_keys`.

    ``max_batch_bytes`` starts a new batch before a record would make the uncompressed batch
    larger (a batch always takes at least one record, so a larger record gets a batch of its
    own); ``max_batch_records`` caps records per batch. Without them everything goes into one
    batch.

    ``compression``/``compression_level``/``timestamp_type`` and the header fields are those of
    :func:`encode_batch`. ``base_sequence`` is the first batch's; each following batch continues
    with the sequence after the previous batch's last record (wrapping after 2**31 - 1 as Kafka
    does; ``-1`` stays ``-1``), so an idempotent producer can send them as they come. Each
    batch's base timestamp is its first record's.

    ``mutable=True`` returns ``bytearray``s instead of ``bytes`` (for :func:`set_producer_fields`
    in place). Uncompressed batches are written straight into the returned objects.

    Raises ``TypeError`` for inputs of the wrong type and ``ValueError`` for inconsistent ones
    (lengths that differ, bad offsets, rows out of range), naming the argument and the row;
    :class:`CorruptRecordError` for a record the format cannot hold (naming the record).
    """
    # NumPy is imported only by callers that use it (the broker never does): an ndarray here means it is loaded.
    loaded = sys.modules.get("numpy")
    if loaded is not None and isinstance(timestamps, loaded.ndarray) and timestamps.dtype.kind == "M":
        timestamps = timestamps.astype("datetime64[ms]").view(loaded.int64)
    return _core.encode_columns(  # type: ignore[no-any-return]
        values,
        keys,
        timestamps=timestamps,
        headers=headers,
        shared_headers=shared_headers,
        rows=rows,
        compression=compression,
        compression_level=compression_level,
        max_batch_bytes=max_batch_bytes,
        max_batch_records=max_batch_records,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        timestamp_type=timestamp_type,
        mutable=mutable,
    )


def partitions_for_keys(keys: Any, num_partitions: int, *, null_partition: int = -1) -> npt.NDArray[np.int32]:
    """Partition of every key as Kafka's default partitioner picks it,
    ``(murmur2(key) & 0x7fffffff) % num_partitions``, as an ``int32`` NumPy array;
    ``null_partition`` for null keys (Kafka sends those to a sticky partition of the
    producer's choosing). ``keys`` is a column as :func:`encode_columns` takes it.
    """
    import numpy as np

    return np.asarray(_core.partitions_for_keys(keys, num_partitions, null_partition=null_partition))


def with_producer_fields(batch: BytesLike, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """A copy of the record batch ``batch`` (one whole batch) with the given producer id, epoch
    and base sequence, and its CRC recomputed: what an idempotent producer does when it sends
    a batch encoded earlier."""
    return _core.with_producer_fields(batch, producer_id, producer_epoch, base_sequence)


def set_producer_fields(batch: bytearray | memoryview, producer_id: int, producer_epoch: int,
                        base_sequence: int) -> None:
    """Set the producer id, epoch and base sequence of the record batch in ``batch`` (a
    ``bytearray`` or writable buffer holding one whole batch) in place and recompute its CRC."""
    _core.set_producer_fields(batch, producer_id, producer_epoch, base_sequence)


def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
) -> bytes:
    """Encode an end-transaction marker: a transactional control batch with one control record.

    ``control_type`` is :data:`CONTROL_TYPE_ABORT` or :data:`CONTROL_TYPE_COMMIT`. The record's
    key is version 0 + type and its value version 0 + ``coordinator_epoch``, as Java's
    ``EndTransactionMarker`` writes them.
    """
    key = (0).to_bytes(2, "big") + control_type.to_bytes(2, "big", signed=True)
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big", signed=True)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return _core.encode_batch(
        [{"key": key, "value": value, "timestamp": ts}],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )


def decode_batches(
    data: BytesLike,
    *,
    allow_partial_trailing: bool = False,
    allow_compacted: bool = False,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    include_records: bool = True,
) -> list[Batch]:
    """Decode all record batches in ``data`` into :class:`Batch` objects.

    Each batch has its header fields (``base_offset``, ``last_offset_delta``,
    ``partition_leader_epoch``, ``magic``, ``crc``, ``attributes``, ``compression``,
    ``timestamp_type``, ``is_transactional``, ``is_control``, ``control_type``,
    ``base_timestamp``, ``max_timestamp``, ``producer_id``, ``producer_epoch``,
    ``base_sequence``, ``records_count``, plus ``position``/``size`` in ``data``) and ``records``:
    :class:`Record` objects with ``offset``, ``timestamp``, ``key``, ``value`` and ``headers``.
    For LogAppendTime batches every record's timestamp is the batch's ``max_timestamp``.

    Every batch is fully validated (magic, CRC, lengths, record count, every record's fields)
    before anything is returned. ``allow_partial_trailing``: ignore an incomplete last batch
    (fetch responses) instead of raising. ``allow_compacted``: accept batches rewritten by log
    compaction (offset gaps, fewer records than ``last_offset_delta + 1``).
    ``max_decompressed_size`` bounds one batch's decompressed records (compression bombs).
    ``include_records=False`` validates everything but returns batches with empty ``records``.

    Raises :class:`CorruptRecordError` naming the field and byte offset of the first problem.
    """
    return _core.decode_batches(
        data,
        verify_crc=verify_crc,
        allow_partial_trailing=allow_partial_trailing,
        allow_compacted=allow_compacted,
        max_decompressed_size=max_decompressed_size,
        include_records=include_records,
    )


def parse_control_record_key(key: BytesLike) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key (type 0 abort, 1 commit)."""
    return _core.parse_control_record_key(key)


@dataclass(frozen=True)
class BinaryColumn:
    """A nullable binary column in Apache Arrow's layout (no per-value Python objects).

    Value ``i`` is ``data[offsets[i]:offsets[i + 1]]``, null where bit ``i`` of ``validity``
    (least significant bit first) is 0.
    """

    offsets: npt.NDArray[np.int32]
    data: npt.NDArray[np.uint8]
    validity: npt.NDArray[np.uint8]
    null_count: int
    #: The native buffers behind the arrays (for zero-copy Arrow wrapping).
    _buffers: tuple[NativeBuffer, NativeBuffer, NativeBuffer]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes | None:
        """Value ``i`` as ``bytes`` (copies; for inspection, not bulk use)."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        if self.null_count and not (int(self.validity[i >> 3]) >> (i & 7)) & 1:
            return None
        return self.data[self.offsets[i] : self.offsets[i + 1]].tobytes()

    def to_arrow(self, type: pa.DataType | None = None) -> pa.Array:
        """Wrap the buffers as a ``pyarrow`` binary (or ``type``) array without copying."""
        import pyarrow as pa

        validity, offsets, data = (_arrow_buffer(b) for b in (self._buffers[2], self._buffers[0], self._buffers[1]))
        return pa.Array.from_buffers(
            type or pa.binary(),
            len(self),
            [validity if self.null_count else None, offsets, data],
            null_count=self.null_count,
        )


@dataclass(frozen=True)
class RecordColumns:
    """All records of a buffer of batches, as columns.

    ``offsets`` and ``timestamps`` (ms since the epoch) are ``int64`` NumPy arrays, one entry per
    record; ``keys`` and ``values`` are :class:`BinaryColumn`s; headers are a list array:
    record ``i`` has headers ``header_list_offsets[i]:header_list_offsets[i + 1]`` of
    ``header_keys`` (UTF-8, never null) and ``header_values``. ``batches`` maps per-batch
    fields (``base_offset``, ``last_offset_delta``, ``position``, ``first_row``, ``num_rows``,
    ``partition_leader_epoch``, ``attributes``, ``base_timestamp``, ``max_timestamp``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``records_count``, ``control_type``
    (-1 for data batches)) to NumPy arrays with one entry per batch.
    """

    offsets: npt.NDArray[np.int64]
    timestamps: npt.NDArray[np.int64]
    keys: BinaryColumn
    values: BinaryColumn
    header_list_offsets: npt.NDArray[np.int32]
    header_keys: BinaryColumn
    header_values: BinaryColumn
    batches: dict[str, npt.NDArray[Any]]
    _header_list_buffer: NativeBuffer

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def num_rows(self) -> int:
        return len(self.offsets)


def _np(buf: NativeBuffer) -> npt.NDArray[Any]:
    import numpy as np

    # __array_interface__ makes NumPy keep `buf` alive as the array's base: no copy.
    return np.asarray(buf)


def _arrow_buffer(buf: NativeBuffer) -> pa.Buffer:
    import pyarrow as pa

    return pa.foreign_buffer(buf.address, buf.nbytes, base=buf)


def _binary_column(raw: dict[str, Any], prefix: str) -> BinaryColumn:
    bufs = (raw[f"{prefix}_offsets"], raw[f"{prefix}_data"], raw[f"{prefix}_validity"])
    return BinaryColumn(
        offsets=_np(bufs[0]),
        data=_np(bufs[1]),
        validity=_np(bufs[2]),
        null_count=raw[f"{prefix}_null_count"],
        _buffers=bufs,
    )


_BATCH_FIELDS = (
    "base_offset",
    "last_offset_delta",
    "position",
    "first_row",
    "num_rows",
    "partition_leader_epoch",
    "attributes",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records_count",
    "control_type",
)


def _decode_raw(data: BytesLike, min_offset: int | None, skip_control: bool, allow_partial_trailing: bool,
                allow_compacted: bool, verify_crc: bool, max_decompressed_size: int) -> dict[str, Any]:
    """The native decode behind :func:`decode_columns` and :func:`decode_to_arrow`: its buffers by name."""
    return _core.decode_columns(  # type: ignore[no-any-return]
        data,
        verify_crc=verify_crc,
        allow_partial_trailing=allow_partial_trailing,
        allow_compacted=allow_compacted,
        max_decompressed_size=max_decompressed_size,
        skip_control=skip_control,
        min_offset=min_offset,
    )


def decode_columns(
    data: BytesLike,
    *,
    min_offset: int | None = None,
    skip_control: bool = True,
    allow_partial_trailing: bool = False,
    allow_compacted: bool = False,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> RecordColumns:
    """Decode all batches in ``data`` into :class:`RecordColumns` (NumPy arrays over native
    buffers; no per-record Python objects, no copy after decoding).

    Validation and the ``allow_*``/``verify_crc``/``max_decompressed_size`` options are those of
    :func:`decode_batches`. ``skip_control`` leaves control records (transaction markers) out
    of the rows, as consumers do; ``min_offset`` leaves out records below that offset (a fetch
    returns whole batches, so the first one may start before the fetch position).
    """
    raw = _decode_raw(data, min_offset, skip_control, allow_partial_trailing, allow_compacted, verify_crc,
                      max_decompressed_size)
    return RecordColumns(
        offsets=_np(raw["offsets"]),
        timestamps=_np(raw["timestamps"]),
        keys=_binary_column(raw, "key"),
        values=_binary_column(raw, "value"),
        header_list_offsets=_np(raw["header_list_offsets"]),
        header_keys=_binary_column(raw, "header_key"),
        header_values=_binary_column(raw, "header_value"),
        batches={name: _np(raw[f"batch_{name}"]) for name in _BATCH_FIELDS},
        _header_list_buffer=raw["header_list_offsets"],
    )


@functools.lru_cache(maxsize=None)
def _arrow_types() -> tuple[pa.DataType, pa.DataType, pa.DataType]:
    import pyarrow as pa

    header_struct = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.timestamp("ms", tz="UTC"), header_struct, pa.list_(header_struct)


@functools.lru_cache(maxsize=None)
def _arrow_schema(batch_columns: bool) -> pa.Schema:
    import pyarrow as pa

    ts, _, headers = _arrow_types()
    fields = [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", ts, nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", headers, nullable=False),
    ]
    if batch_columns:
        fields += [
            pa.field("partition_leader_epoch", pa.int32(), nullable=False),
            pa.field("producer_id", pa.int64(), nullable=False),
            pa.field("producer_epoch", pa.int16(), nullable=False),
            pa.field("is_transactional", pa.bool_(), nullable=False),
        ]
    return pa.schema(fields)


def __getattr__(name: str) -> Any:
    # ARROW_SCHEMA needs pyarrow; build it on first use so importing klog.records stays light.
    if name == "ARROW_SCHEMA":
        return _arrow_schema(False)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def columns_to_arrow(columns: RecordColumns, *, batch_columns: bool = False) -> pa.RecordBatch:
    """Wrap :class:`RecordColumns` as a ``pyarrow.RecordBatch`` without copying the data."""
    import pyarrow as pa

    ts_type, header_struct, headers_type = _arrow_types()
    n = columns.num_rows
    offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)])
    timestamps = pa.Array.from_buffers(ts_type, n, [None, pa.py_buffer(columns.timestamps)])
    hk = columns.header_keys.to_arrow(pa.string())
    hv = columns.header_values.to_arrow()
    structs = pa.StructArray.from_arrays([hk, hv], fields=list(header_struct))
    headers = pa.Array.from_buffers(
        headers_type,
        n,
        [None, _arrow_buffer(columns._header_list_buffer)],
        children=[structs],
    )
    arrays = [offsets, timestamps, columns.keys.to_arrow(), columns.values.to_arrow(), headers]
    if batch_columns:
        import numpy as np

        b = columns.batches
        rows = b["num_rows"]
        arrays += [
            pa.array(np.repeat(b["partition_leader_epoch"], rows), pa.int32()),
            pa.array(np.repeat(b["producer_id"], rows), pa.int64()),
            pa.array(np.repeat(b["producer_epoch"], rows), pa.int16()),
            pa.array(np.repeat((b["attributes"] & 0x10) != 0, rows), pa.bool_()),
        ]
    return pa.RecordBatch.from_arrays(arrays, schema=_arrow_schema(batch_columns))


def decode_to_arrow(
    data: BytesLike,
    *,
    batch_columns: bool = False,
    min_offset: int | None = None,
    skip_control: bool = True,
    allow_partial_trailing: bool = False,
    allow_compacted: bool = False,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> pa.RecordBatch:
    """Decode all batches in ``data`` into one ``pyarrow.RecordBatch``, one row per record.

    Columns: ``offset`` (int64), ``timestamp`` (``timestamp[ms, tz=UTC]``; Kafka timestamps are
    milliseconds since the Unix epoch), ``key`` and ``value`` (binary, null for null),
    ``headers`` (``list<struct<key: string, value: binary>>``). With ``batch_columns=True`` each
    row also carries its batch's ``partition_leader_epoch`` (int32), ``producer_id`` (int64),
    ``producer_epoch`` (int16) and ``is_transactional`` (bool). The Arrow arrays wrap the native
    buffers: nothing is copied per record. Options are those of :func:`decode_columns`.
    """
    if not batch_columns:
        # the native buffers straight into Arrow (no NumPy views of them, no per-batch columns)
        return _raw_to_arrow(_decode_raw(data, min_offset, skip_control, allow_partial_trailing, allow_compacted,
                                         verify_crc, max_decompressed_size))
    cols = decode_columns(
        data,
        min_offset=min_offset,
        skip_control=skip_control,
        allow_partial_trailing=allow_partial_trailing,
        allow_compacted=allow_compacted,
        verify_crc=verify_crc,
        max_decompressed_size=max_decompressed_size,
    )
    return columns_to_arrow(cols, batch_columns=batch_columns)


def _raw_binary(raw: dict[str, Any], prefix: str, type: pa.DataType) -> pa.Array:
    import pyarrow as pa

    offsets = raw[f"{prefix}_offsets"]
    null_count = raw[f"{prefix}_null_count"]
    return pa.Array.from_buffers(
        type,
        offsets.nbytes // 4 - 1,
        [_arrow_buffer(raw[f"{prefix}_validity"]) if null_count else None, _arrow_buffer(offsets),
         _arrow_buffer(raw[f"{prefix}_data"])],
        null_count=null_count,
    )


def _raw_to_arrow(raw: dict[str, Any]) -> pa.RecordBatch:
    """:func:`columns_to_arrow` (without batch columns) of what ``_core.decode_columns`` returned."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(_raw_arrays(raw), schema=_arrow_schema(False))


def _raw_arrays(raw: dict[str, Any]) -> list[pa.Array]:
    """The columns of :func:`_raw_to_arrow` (offset, timestamp, key, value, headers) as Arrow arrays."""
    import pyarrow as pa

    ts_type, header_struct, headers_type = _arrow_types()
    offsets = raw["offsets"]
    n = offsets.nbytes // 8
    if raw["header_key_offsets"].nbytes <= 4:   # no record has a header (the usual case): one shared column
        headers = _no_headers(n)
    else:
        structs = pa.StructArray.from_arrays(
            [_raw_binary(raw, "header_key", pa.string()), _raw_binary(raw, "header_value", pa.binary())],
            fields=list(header_struct),
        )
        headers = pa.Array.from_buffers(headers_type, n, [None, _arrow_buffer(raw["header_list_offsets"])],
                                        children=[structs])
    return [
        pa.Array.from_buffers(pa.int64(), n, [None, _arrow_buffer(offsets)]),
        pa.Array.from_buffers(ts_type, n, [None, _arrow_buffer(raw["timestamps"])]),
        _raw_binary(raw, "key", pa.binary()),
        _raw_binary(raw, "value", pa.binary()),
        headers,
    ]


@functools.lru_cache(maxsize=64)
def _no_headers(n: int) -> pa.Array:
    """A headers column of ``n`` empty lists (immutable: kept for reuse, a batch size recurs)."""
    import numpy as np
    import pyarrow as pa

    _, header_struct, headers_type = _arrow_types()
    empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                       fields=list(header_struct))
    return pa.Array.from_buffers(headers_type, n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int32))],
                                 children=[empty])

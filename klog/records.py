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

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, Union

from klog._native import _core
from klog._native._core import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Batch,
    CorruptRecordError,
    Record,
)

__all__ = [
    "Batch",
    "CorruptRecordError",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Record",
    "RecordLike",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "COMPRESSION_TYPES",
    "crc32c",
    "decode_batches",
    "encode_batch",
    "encode_control_batch",
    "parse_control_record_key",
]

BytesLike = Union[bytes, bytearray, memoryview]
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


def _as_bytes(data: BytesLike) -> bytes | bytearray:
    if isinstance(data, (bytes, bytearray)):
        return data
    return bytes(memoryview(data))


def crc32c(data: BytesLike) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum record batch v2 uses.

    Hardware accelerated (SSE 4.2 / ARMv8 CRC) where available.
    """
    return _core.crc32c(_as_bytes(data))


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
        _as_bytes(data),
        verify_crc=verify_crc,
        allow_partial_trailing=allow_partial_trailing,
        allow_compacted=allow_compacted,
        max_decompressed_size=max_decompressed_size,
        include_records=include_records,
    )


def parse_control_record_key(key: BytesLike) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key (type 0 abort, 1 commit)."""
    return _core.parse_control_record_key(_as_bytes(key))

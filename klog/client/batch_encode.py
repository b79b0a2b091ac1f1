"""Encoding ``send_batch`` input (lists, NumPy arrays, Arrow arrays) into record batches.

Everything runs in klog's native columnar encoder (:func:`klog.records.encode_columns`): keyed or
keyless, with headers, compressed or not, the columns are read in place (Arrow buffers, NumPy
``S<n>``/2-D ``uint8`` rows, list items) and split into batches of at most ``batch.size`` bytes, with no
per-record Python object. Keyed records are routed with Kafka's murmur2 partitioner
(:func:`klog.records.partitions_for_keys`), grouped per partition by row numbers that the encoder reads
(the columns themselves are never reordered or copied).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from klog._native import _core

from .batch_buffers import BatchBufferPool, LazyBatch
from .errors import RecordTooLargeError

if TYPE_CHECKING:  # for annotations only: the producer imports nothing from here
    from .producer import ProducerCore

__all__ = ["encode_value_batches", "LazyBatch", "BatchBufferPool"]

#: Rows encoded per native call: bounds the encoded bytes held before the producer takes them (back-pressure
#: from buffer.memory applies between calls) while keeping the per-call overhead negligible.
WINDOW_ROWS = 32768
#: Batches (about) encoded per native call, for columns whose size is known up front (NumPy, Arrow): a call
#: allocates all its batches before buffer.memory is checked, so a call of a few batches, not 32 MB of 1 KiB
#: rows, lets a producer under back-pressure write every batch over the buffer of one already acknowledged.
WINDOW_BATCHES = 4


def _column(values: Any) -> Any:
    """NumPy unicode arrays are re-encoded as UTF-8 bytes (the encoder reads ``S``, object and Arrow columns in
    place); everything else goes to the native encoder as is."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "U":
        return values.astype(object)
    return values


def _is_itemwise(column: Any) -> bool:
    return isinstance(column, (list, tuple)) or (isinstance(column, np.ndarray) and column.dtype.kind == "O")


def _partition_groups(pids: np.ndarray) -> Iterator[tuple[int, np.ndarray | None]]:
    """``(partition, row numbers in input order)`` per partition of ``pids``; None rows = every row."""
    first = int(pids[0])
    if (pids == first).all():
        yield first, None
        return
    order = np.argsort(pids, kind="stable")
    sorted_p = pids[order]
    bounds = np.flatnonzero(sorted_p[1:] != sorted_p[:-1]) + 1
    for idx in np.split(order, bounds):
        yield int(pids[idx[0]]), idx


def encode_value_batches(core: ProducerCore, topic: str, values: Any, keys: Any,
                         headers: list[tuple[str, bytes | None]] | None, partition: int | None,
                         parts: tuple[list[int], list[int]], timestamp: int, record_headers: Any = None
                         ) -> Iterator[tuple[int, LazyBatch, int]]:
    """Yield ``(partition, batch, record count)`` for a ``send_batch`` call. Batches are encoded without
    producer fields (:class:`LazyBatch` adds them when drained). Raises ``TypeError``/``ValueError`` naming the
    argument and row for bad input, and ``RecordTooLargeError`` for a batch above ``max.request.size``.
    ``record_headers``: one header list per record (see :func:`klog.records.encode_columns`' ``headers``)."""
    values = _column(values)
    n = len(values)
    if n == 0:
        return
    if keys is not None:
        keys = _column(keys)
        if len(keys) != n:
            raise ValueError(f"keys has {len(keys)} entries but values has {n}")
    if record_headers is not None:
        if headers:
            raise ValueError("pass headers (one list for every record) or record_headers (one per record), not both")
        if len(record_headers) != n:
            raise ValueError(f"record_headers has {len(record_headers)} entries but values has {n}")
    acc = core.accumulator
    limit = max(1, min(acc.batch_size, acc.max_request_size - 64))
    groups: Iterator[tuple[int, np.ndarray | None]]
    if partition is not None:
        groups = iter([(partition, None)])
    elif keys is not None and not core.ignore_keys and not core.random_partitioner:
        pids = np.asarray(_core.partitions_for_keys(keys, len(parts[0])))
        nulls = pids < 0
        if nulls.any():
            with acc.lock:
                sticky = acc.sticky_partition(topic, parts[0], parts[1])
            pids = np.where(nulls, np.int32(sticky), pids)
        groups = _partition_groups(pids)
    else:
        with acc.lock:
            sticky = acc.sticky_partition(topic, parts[0], parts[1])
        groups = iter([(sticky, None)])
    # Row-selected windows re-read the whole columns: free for Arrow/NumPy buffers, a pass over every item
    # for Python sequences, so those encode each partition's rows in one call.
    itemwise = _is_itemwise(values) or (keys is not None and _is_itemwise(keys))
    for part, rows in groups:
        total = n if rows is None else len(rows)
        window = total if rows is not None and itemwise else _window_rows(values, n, limit)
        for start in range(0, total, window):
            stop = min(start + window, total)
            if rows is None:
                whole = start == 0 and stop == n
                v = values if whole else values[start:stop]
                k = keys if whole or keys is None else keys[start:stop]
                h = record_headers if whole or record_headers is None else record_headers[start:stop]
                sel = None
            else:
                v, k, h, sel = values, keys, record_headers, rows[start:stop]
            yield from _encode_window(core, part, v, k, headers, sel, timestamp, limit, h)


def _window_rows(values: Any, n: int, limit: int) -> int:
    """Rows per native call: WINDOW_ROWS, or fewer when WINDOW_BATCHES batches of ``limit`` bytes hold fewer (by
    the average row size of a NumPy or Arrow column; unknown for Python sequences)."""
    nbytes = getattr(values, "nbytes", None)
    if not isinstance(nbytes, int) or isinstance(values, (list, tuple)) or nbytes <= 0:
        return WINDOW_ROWS
    per_row = max(1, nbytes // n)
    return max(1, min(WINDOW_ROWS, WINDOW_BATCHES * limit // per_row))


def _encode_window(core: ProducerCore, part: int, values: Any, keys: Any,
                   headers: list[tuple[str, bytes | None]] | None, rows: np.ndarray | None, timestamp: int,
                   limit: int, record_headers: Any = None) -> Iterator[tuple[int, LazyBatch, int]]:
    acc = core.accumulator
    # Compressed batches are new buffers anyway (the codec's output).
    with core.batch_buffers.lent() if core.compression == "none" else contextlib.nullcontext(None) as free:
        batches = _core.encode_columns(values, keys, timestamps=timestamp, headers=record_headers,
                                       shared_headers=headers or None, rows=rows,
                                       compression=core.compression, compression_level=core.compression_level,
                                       max_batch_bytes=limit, mutable=True, reuse=free)
    for raw, count in batches:
        if len(raw) > acc.max_request_size:
            raise RecordTooLargeError(f"a record of send_batch encodes to {len(raw)} bytes, above max.request.size")
        yield part, LazyBatch(raw), count

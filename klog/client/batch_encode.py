"""Encoding ``send_batch`` input (lists, numpy arrays, Arrow arrays) into record batches.

FALLBACK, clearly separated: klog's native record codec (``klog.records.encode_batch``) takes per-record
Python objects. Until it grows a columnar entry point, this module encodes uncompressed batches of keyless,
header-less records straight from contiguous buffers with numpy (vectorized varints, one strided copy of the
values), and falls back to ``encode_batch`` with per-record dicts for everything else (keys, headers,
compression). The output is byte-for-byte a Kafka record batch v2 either way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from klog._native import _core

if TYPE_CHECKING:
    from .producer import ProducerCore

__all__ = ["encode_value_batches", "as_binary_column", "BinaryColumn"]

_BATCH_HEADER = 61
_HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. records count (61 bytes)


class BinaryColumn:
    """A column of byte strings as one contiguous ``data`` buffer plus ``offsets`` (n + 1 int64), with an
    optional validity mask (False = null)."""

    __slots__ = ("data", "offsets", "valid", "width")

    def __init__(self, data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None, width: int | None) -> None:
        self.data = data
        self.offsets = offsets
        self.valid = valid
        #: Every row has this length (no nulls): allows the strided fast path.
        self.width = width

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def row(self, i: int) -> bytes | None:
        if self.valid is not None and not self.valid[i]:
            return None
        return self.data[self.offsets[i]:self.offsets[i + 1]].tobytes()  # type: ignore[no-any-return]

    def to_list(self) -> list[bytes | None]:
        buf = self.data.tobytes()
        offs = self.offsets.tolist()
        if self.valid is None:
            return [buf[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
        valid = self.valid.tolist()
        return [buf[offs[i]:offs[i + 1]] if valid[i] else None for i in range(len(offs) - 1)]

    def take(self, idx: np.ndarray) -> BinaryColumn:
        lengths = (self.offsets[1:] - self.offsets[:-1])[idx]
        starts = self.offsets[:-1][idx]
        new_offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=new_offsets[1:])
        total = int(new_offsets[-1])
        if total:
            gather = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
            data = self.data[gather]
        else:
            data = np.zeros(0, dtype=np.uint8)
        valid = self.valid[idx] if self.valid is not None else None
        width = self.width
        return BinaryColumn(data, new_offsets, valid, width)

    def slice(self, start: int, stop: int) -> BinaryColumn:
        offs = self.offsets[start:stop + 1]
        base = int(offs[0])
        data = self.data[base:int(offs[-1])]
        valid = self.valid[start:stop] if self.valid is not None else None
        return BinaryColumn(data, offs - base, valid, self.width)


def as_binary_column(values: Any, what: str) -> BinaryColumn:
    """Lists of bytes/str/None, numpy ``S``/``U``/``object``/2-D ``uint8`` arrays and Arrow binary/string
    (large or not) arrays or chunked arrays, as a :class:`BinaryColumn` (zero-copy where the input allows)."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pa = None
    if pa is not None and isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pa is not None and isinstance(values, pa.Array):
        t = values.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            values = values.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
            t = values.type
        if pa.types.is_fixed_size_binary(t):
            values = values.cast(pa.binary())
            t = values.type
        if not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            raise TypeError(f"{what}: Arrow arrays must be binary or string, not {t}")
        bufs = values.buffers()
        n = len(values)
        off_type = np.int64 if pa.types.is_large_binary(t) else np.int32
        offsets = np.frombuffer(bufs[1], dtype=off_type, count=n + 1 + values.offset)[values.offset:].astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        start = int(offsets[0])
        data = data[start:int(offsets[-1])]
        offsets = offsets - start
        valid = None
        if values.null_count:
            valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return _finish(data, offsets, valid)
    if isinstance(values, np.ndarray):
        if values.ndim == 2 and values.dtype == np.uint8:
            n, w = values.shape
            data = np.ascontiguousarray(values).reshape(-1)
            return BinaryColumn(data, np.arange(n + 1, dtype=np.int64) * w, None, w)
        if values.ndim == 1 and values.dtype.kind == "S":
            w = values.dtype.itemsize
            n = len(values)
            data = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
            return BinaryColumn(data, np.arange(n + 1, dtype=np.int64) * w, None, w)
        if values.ndim == 1 and values.dtype.kind in ("U", "O"):
            values = values.tolist()
        else:
            raise TypeError(f"{what}: numpy arrays must be 1-D bytes ('S'), str or object, or 2-D uint8")
    if not isinstance(values, Sequence) or isinstance(values, (bytes, str)):
        raise TypeError(f"{what} must be a list, numpy array or Arrow array of bytes")
    try:
        # Fast path: a list of bytes only (no None/str): one join, lengths via map(len).
        joined = b"".join(values)
    except TypeError:
        joined = None
    if joined is not None:
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return _finish(np.frombuffer(joined, dtype=np.uint8), offsets, None)
    items = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    valid_list = [v is not None for v in items]
    for i, v in enumerate(items):
        if v is not None and not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError(f"{what}[{i}] must be bytes, str or None, not {type(v).__name__}")
    lengths = np.fromiter((len(v) if v is not None else 0 for v in items), dtype=np.int64, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(v for v in items if v is not None), dtype=np.uint8)
    valid = None if all(valid_list) else np.array(valid_list, dtype=bool)
    return _finish(data, offsets, valid)


def _finish(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None) -> BinaryColumn:
    width = None
    n = len(offsets) - 1
    if valid is None and n:
        lengths = offsets[1:] - offsets[:-1]
        if int(lengths.min()) == int(lengths.max()):
            width = int(lengths[0])
    return BinaryColumn(data, offsets, valid, width)


def _varint_bytes(value: int) -> bytes:
    """Zig-zag varint of one int."""
    u = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


#: Offset deltas whose zig-zag varint has 1, 2, 3 and 4 bytes start at these offsets.
_OD_RUNS = (0, 64, 8192, 1048576, 134217728)


def _encode_fast(values: BinaryColumn, timestamp: int, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1) -> memoryview:
    """One uncompressed, keyless, header-less batch (with the given producer fields, one timestamp) from fixed-width
    ``values``. Records of equal offset-delta varint length have equal size, so each such run is written as
    the columns of a 2-D array: constant prefix, offset-delta bytes, constant value-length, the values."""
    n = len(values)
    w = values.width
    assert w is not None
    src = values.data[:n * w].reshape(n, w)
    vlen = _varint_bytes(w)
    runs = []
    total = 0
    for k in range(4):
        a, b = _OD_RUNS[k], min(_OD_RUNS[k + 1], n)
        if a >= n:
            break
        od_len = k + 1
        # attributes + timestampDelta + offsetDelta + keyLength(-1) + valueLength + value + headerCount
        body = 1 + 1 + od_len + 1 + len(vlen) + w + 1
        blen = _varint_bytes(body)
        rl = len(blen) + body
        runs.append((a, b, od_len, blen, rl))
        total += (b - a) * rl
    out = np.empty(_BATCH_HEADER + total, dtype=np.uint8)
    pos = _BATCH_HEADER
    for a, b, od_len, blen, rl in runs:
        m = b - a
        rows = out[pos:pos + m * rl].reshape(m, rl)
        c = 0
        prefix = np.frombuffer(blen + b"\x00\x00", dtype=np.uint8)  # length, attributes, timestamp delta 0
        rows[:, c:c + len(prefix)] = prefix
        c += len(prefix)
        zz = np.arange(a, b, dtype=np.uint64) << np.uint64(1)
        for j in range(od_len):
            byte = (zz >> np.uint64(7 * j)) & np.uint64(0x7F)
            if j + 1 < od_len:
                byte |= np.uint64(0x80)
            rows[:, c] = byte
            c += 1
        mid = np.frombuffer(b"\x01" + vlen, dtype=np.uint8)  # key length -1, value length
        rows[:, c:c + len(mid)] = mid
        c += len(mid)
        rows[:, c:c + w] = src[a:b]
        c += w
        rows[:, c] = 0  # no headers
        pos += m * rl
    buf: Any = out
    _HEADER.pack_into(buf, 0, 0, _BATCH_HEADER - 12 + total, -1, 2, 0, 0, n - 1, timestamp, timestamp, producer_id,
                      producer_epoch, base_sequence, n)
    struct.pack_into(">I", buf, 17, _core.crc32c(out[21:].tobytes()))
    # A memoryview of the array: the protocol encoder copies it into the request frame once, no extra copy here.
    return memoryview(buf)


class LazyBatch:
    """A fixed-width column chunk encoded only when its batch is sent (so the producer id, epoch and sequence go
    straight into the header instead of being patched in afterwards)."""

    __slots__ = ("values", "timestamp", "size")

    def __init__(self, values: BinaryColumn, timestamp: int) -> None:
        self.values = values
        self.timestamp = timestamp
        n, w = len(values), values.width or 0
        # Exact up to the varints: at most 5 (length) + 1 + 1 + 4 (offset delta) + 1 + 3 (value length) + 1 bytes.
        self.size = _BATCH_HEADER + n * (w + 16)

    def __len__(self) -> int:
        return self.size

    def encode(self, producer_id: int, producer_epoch: int, base_sequence: int) -> memoryview:
        return _encode_fast(self.values, self.timestamp, producer_id, producer_epoch, base_sequence)


def _encode_generic(core: ProducerCore, keys: list[bytes | None] | None, values: list[bytes | None],
                    headers: list[tuple[str, bytes | None]] | None, timestamp: int) -> bytes:
    n = len(values)
    if keys is None:
        recs = [{"value": v, "timestamp": timestamp, "headers": headers} for v in values]
    else:
        recs = [{"key": keys[i], "value": values[i], "timestamp": timestamp, "headers": headers} for i in range(n)]
    return _core.encode_batch(recs, compression=core.compression, compression_level=core.compression_level)  # type: ignore[no-any-return]


def _chunks(lengths: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Split rows into consecutive ranges whose estimated encoded size stays under ``limit``."""
    sizes = lengths + 12
    cum = np.cumsum(sizes)
    out = []
    start = 0
    n = len(lengths)
    base = 0
    while start < n:
        stop = int(np.searchsorted(cum, base + limit, side="right"))
        stop = max(stop, start + 1)
        out.append((start, stop))
        base = int(cum[stop - 1])
        start = stop
    return out


def encode_value_batches(core: ProducerCore, topic: str, values: Any, keys: Any,
                         headers: list[tuple[str, bytes | None]] | None, partition: int | None,
                         parts: tuple[list[int], list[int]], timestamp: int
                         ) -> Iterator[tuple[int, bytes | memoryview | LazyBatch, int]]:
    """Yield ``(partition, encoded batch, record count)`` for a ``send_batch`` call. Fixed-width keyless
    uncompressed chunks come as :class:`LazyBatch`: encoded when drained, with their final producer fields."""
    vcol = as_binary_column(values, "values")
    n = len(vcol)
    if n == 0:
        return
    kcol = as_binary_column(keys, "keys") if keys is not None else None
    if kcol is not None and len(kcol) != n:
        raise ValueError(f"keys has {len(kcol)} entries but values has {n}")
    limit = max(1, min(core.accumulator.batch_size, core.accumulator.max_request_size - _BATCH_HEADER - 64))
    groups: list[tuple[int, Any]] = []
    if partition is not None:
        groups.append((partition, None))
    elif kcol is not None and not core.ignore_keys and not core.random_partitioner:
        nparts = len(parts[0])
        klist = kcol.to_list()
        murmur = _core.murmur2
        pids = np.fromiter(((murmur(k) & 0x7FFFFFFF) % nparts if k is not None else -1 for k in klist),
                           dtype=np.int64, count=n)
        if (pids < 0).any():
            with core.accumulator.lock:
                sticky = core.accumulator.sticky_partition(topic, parts[0], parts[1])
            pids[pids < 0] = sticky
        order = np.argsort(pids, kind="stable")
        sorted_p = pids[order]
        bounds = np.flatnonzero(np.diff(sorted_p)) + 1
        for idx in np.split(order, bounds):
            groups.append((int(pids[idx[0]]), idx))
    else:
        with core.accumulator.lock:
            sticky = core.accumulator.sticky_partition(topic, parts[0], parts[1])
        groups.append((sticky, None))
    fast = kcol is None and headers is None and core.compression == "none" and vcol.width is not None
    for part, idx in groups:
        gv = vcol if idx is None else vcol.take(idx)
        gk = None if kcol is None else (kcol if idx is None else kcol.take(idx))
        lengths = gv.offsets[1:] - gv.offsets[:-1]
        if gk is not None:
            lengths = lengths + (gk.offsets[1:] - gk.offsets[:-1])
        for start, stop in _chunks(lengths, limit):
            cv = gv.slice(start, stop)
            raw: bytes | memoryview | LazyBatch
            if fast:
                raw = LazyBatch(cv, timestamp)
            else:
                ck = gk.slice(start, stop).to_list() if gk is not None else None
                raw = _encode_generic(core, ck, cv.to_list(), headers, timestamp)
            if not isinstance(raw, LazyBatch) and len(raw) > core.accumulator.max_request_size:
                from .errors import RecordTooLargeError

                raise RecordTooLargeError(
                    f"a record of send_batch encodes to {len(raw)} bytes, above max.request.size")
            yield part, raw, stop - start

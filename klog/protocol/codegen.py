"""Compile message schemas into Python decode/encode functions, once per (message, version).

For every message version we generate straight-line Python source (one function per struct, fixed-size runs of
fields packed/unpacked with a single precompiled :class:`struct.Struct`), ``compile`` it under a synthetic file
name and ``exec`` it. The hot path therefore does no per-field dict lookups, version checks or interpretation.

Error reporting costs nothing on the hot path: every generated line is mapped to the field it handles, so when
decoding or encoding fails we walk the traceback of the failure, read the line numbers and the ``pos``/``_i``
locals of the generated frames, and build a :class:`ProtocolError` naming the field path and byte offset.
"""

from __future__ import annotations

import struct as _struct
import uuid as _uuid
from functools import partial as _partial
from typing import Any, Callable

from .exceptions import EncodeError, ProtocolError
from .schema import Field, MessageSchema
from .struct import FileRegion, Struct

# Records values at least this large are emitted as their own chunk instead of being copied into the buffer.
RECORDS_COPY_THRESHOLD = 4096

_FIXED_FORMATS = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}


class _Malformed(Exception):
    """Raised inside generated decoders; converted to ProtocolError with field and offset by the caller."""


class _Unencodable(Exception):
    """Raised inside generated encoders for values the wire format cannot carry."""


# ---------------------------------------------------------------------------------------------------------------
# Runtime helpers shared by the generated code.

_S_h = _struct.Struct(">h")
_S_i = _struct.Struct(">i")
_unpack_h = _S_h.unpack_from
_unpack_i = _S_i.unpack_from
_pack_h = _S_h.pack
_pack_i = _S_i.pack
_SMALL_UVARINTS = [bytes([i]) for i in range(128)]


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint (at most 5 bytes, as Kafka's int32 varints)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise _Malformed("unsigned varint longer than 5 bytes")


def read_unknown_tags(buf: Any, pos: int, end: int) -> tuple[dict[int, bytes] | None, int]:
    """Read a tagged-field section whose tags are all unknown: returns ({tag: bytes} or None, new pos)."""
    count, pos = read_uvarint(buf, pos)
    tags = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > end:
            raise _Malformed(f"tagged field {tag} of {size} bytes exceeds the {end - pos} remaining bytes")
        if tags is None:
            tags = {}
        tags[tag] = bytes(buf[pos:pos + size])
        pos += size
    return tags, pos


def uvarint(n: int) -> bytes:
    if n < 0x80:
        if n < 0:
            raise _Unencodable(f"negative varint {n}")
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _records_length(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, (list, tuple)):
        return sum(_records_length(v) for v in value)
    length = getattr(value, "length", None)
    if length is None or not hasattr(value, "fd") or not hasattr(value, "position"):
        raise _Unencodable(
            f"records must be bytes, memoryview, a FileRegion-like object (fd, position, length) or a list of "
            f"those, not {type(value).__name__}"
        )
    if length < 0:
        raise _Unencodable(f"negative FileRegion length {length}")
    return int(length)


def emit_records(w: bytearray, chunks: list, value: Any, compact: bool, nullable: bool) -> None:
    """Write a records field: length prefix into ``w``, then the data copied (small) or as separate chunks."""
    t = type(value)
    if t is bytes or t is memoryview or t is bytearray:
        n = value.nbytes if t is memoryview else len(value)
        w += uvarint(n + 1) if compact else _pack_i(n)
        if n < RECORDS_COPY_THRESHOLD:
            w += value
        else:
            if w:
                chunks.append(bytes(w))
                del w[:]
            chunks.append(value if t is not memoryview or value.format == "B" else value.cast("B"))
        return
    if value is None:
        if not nullable:
            raise _Unencodable("null records in a version where records are not nullable")
        if compact:
            w.append(0)
        else:
            w += b"\xff\xff\xff\xff"
        return
    if t is FileRegion:
        n = value.length
        w += uvarint(n + 1) if compact else _pack_i(n)
        if n:
            if w:
                chunks.append(bytes(w))
                del w[:]
            chunks.append(value)
        return
    n = _records_length(value)
    w += uvarint(n + 1) if compact else _pack_i(n)
    _append_records(w, chunks, value)


def _append_records(w: bytearray, chunks: list, value: Any) -> None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        n = value.nbytes if isinstance(value, memoryview) else len(value)
        if n < RECORDS_COPY_THRESHOLD:
            w += value
            return
        if isinstance(value, memoryview) and (value.format != "B" or value.ndim != 1):
            value = value.cast("B")
    elif isinstance(value, (list, tuple)):
        for v in value:
            _append_records(w, chunks, v)
        return
    elif value.length == 0:
        return
    if w:
        chunks.append(bytes(w))
        del w[:]
    chunks.append(value)


def write_tags(w: bytearray, tags: list | None, unknown: dict | None) -> None:
    """Write a tagged-field section: count, then (tag, size, bytes) in ascending tag order."""
    items = list(tags) if tags else []
    if unknown:
        known = {t for t, _ in items}
        items.extend((t, bytes(b)) for t, b in unknown.items() if t not in known)
    items.sort(key=lambda item: item[0])
    w += uvarint(len(items))
    for tag, data in items:
        w += uvarint(tag)
        w += uvarint(len(data))
        w += data


def is_default_struct(value: Any, defaults: dict) -> bool:
    if isinstance(value, Struct):
        d = value.__dict__
    elif isinstance(value, dict):
        d = value
    else:
        return all(getattr(value, k, v) == v for k, v in defaults.items())
    for k, v in defaults.items():
        if d.get(k, v) != v:
            return False
    return not d.get("_unknown_tags")


def _getter(o: Any) -> Callable[[str, Any], Any]:
    if o is None:
        raise _Unencodable("null where a struct is required")
    return _partial(getattr, o)


_RUNTIME: dict[str, Any] = {
    "_Malformed": _Malformed,
    "_Unencodable": _Unencodable,
    "_Struct": Struct,
    "_new": object.__new__,
    "_dict": dict,
    "_str": str,
    "_bytes": bytes,
    "_UUID": _uuid.UUID,
    "_uvar": read_uvarint,
    "_uvarint": uvarint,
    "_read_unknown_tags": read_unknown_tags,
    "_unpack_h": _unpack_h,
    "_unpack_i": _unpack_i,
    "_pack_h": _pack_h,
    "_pack_i": _pack_i,
    "_unpack_from": _struct.unpack_from,
    "_pack": _struct.pack,
    "_emit_records": emit_records,
    "_write_tags": write_tags,
    "_is_default_struct": is_default_struct,
    "_getter": _getter,
    "_len": len,
    "_range": range,
    "_enumerate": enumerate,
}

# Synthetic file name -> {line number: metadata} for error diagnosis.
LINE_MAPS: dict[str, dict[int, tuple]] = {}


# ---------------------------------------------------------------------------------------------------------------
# Source generation.


class _Source:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.meta: dict[int, tuple] = {}
        self.consts: dict[str, Any] = {}
        self._const_ids: dict[Any, str] = {}
        self._counter = 0

    def line(self, indent: int, text: str, meta: tuple | None = None) -> None:
        self.lines.append("    " * indent + text)
        if meta is not None:
            self.meta[len(self.lines)] = meta

    def const(self, value: Any) -> str:
        key = (type(value), value) if _hashable(value) else None
        if key is not None and key in self._const_ids:
            return self._const_ids[key]
        name = f"_K{len(self.consts)}"
        self.consts[name] = value
        if key is not None:
            self._const_ids[key] = name
        return name

    def fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _fixed(f: Field) -> tuple[str, int] | None:
    if f.kind in _FIXED_FORMATS:
        return _FIXED_FORMATS[f.kind]
    return None


class _Compiler:
    """Generates decode or encode functions for one message at one version."""

    def __init__(self, schema: MessageSchema, version: int, flexible: bool, label: str) -> None:
        self.schema = schema
        self.version = version
        self.flexible = flexible
        self.label = label
        self.src = _Source()
        self.funcs = 0

    # -- shared -------------------------------------------------------------------------------------------------

    def default_expr(self, f: Field) -> str:
        """An expression evaluating to a fresh default value for ``f`` (shared when immutable)."""
        shareable, value = f.constant_default()
        if shareable:
            if value is None or isinstance(value, (bool, int, float)):
                return repr(value)
            return self.src.const(value)
        if f.kind == "array":
            return "[]"
        return self.src.const(f.default_value) + "()"

    def finish(self) -> dict[str, Any]:
        filename = f"<klog.protocol {self.label}>"
        code = compile("\n".join(self.src.lines) + "\n", filename, "exec")
        ns: dict[str, Any] = dict(_RUNTIME)
        ns.update(self.src.consts)
        exec(code, ns)
        LINE_MAPS[filename] = self.src.meta
        return ns


class DecoderCompiler(_Compiler):
    """Generates one function per message version with every nested struct inlined into its parent's loop.

    Locals of each struct instance get a unique suffix (``f3_records``, ``_i3``...), so nested loops and tag
    sections do not clobber each other. Line metadata is the field path with the names of the index variables,
    which the error diagnosis reads back from the failing frame.
    """

    def build(self) -> Callable:
        s = self.src
        s.line(0, "def _d0(buf, pos, end):")
        self.struct_body(self.schema.fields, 1, (), "_s", "end")
        s.line(1, "return _s, pos")
        return self.finish()["_d0"]

    def struct_function(self, fields: tuple[Field, ...]) -> str:  # used by generated_source()
        self.src.line(0, "def _d0(buf, pos, end):")
        self.struct_body(fields, 1, (), "_s", "end")
        self.src.line(1, "return _s, pos")
        return "_d0"

    def struct_body(self, fields: tuple[Field, ...], ind: int, path: tuple, target: str, endv: str) -> None:
        """Emit code decoding a struct at ``pos`` into the variable ``target``."""
        k = self.funcs
        self.funcs += 1
        v = self.version
        s = self.src
        present = [f for f in fields if f.present(v)]
        regular = [f for f in present if not (self.flexible and f.is_tagged(v))]
        tagged = [f for f in present if self.flexible and f.is_tagged(v)]
        var = {f.name: f"f{k}_{f.name}" for f in fields}
        run: list[Field] = []
        i = 0
        while i < len(regular):
            f = regular[i]
            if _fixed(f) is not None:
                run.append(f)
                i += 1
                continue
            # In classic versions the length prefix of a string/bytes/array is read with the preceding run.
            merge = bool(run) and not self.flexible and f.kind in ("string", "bytes", "records", "array")
            self.flush_run(run, ind, path, var, endv, f if merge else None)
            run = []
            self.field(f, ind, path, var[f.name], endv, k, have_length=merge)
            i += 1
        # A run followed by nothing: flush it.
        self.flush_run(run, ind, path, var, endv, None)
        if self.flexible:
            self.tag_section(tagged, ind, path, var, endv, k)
        parts = []
        for f in fields:
            if f.present(v):
                parts.append(f"{f.name!r}: {var[f.name]}")
            else:
                parts.append(f"{f.name!r}: {self.default_expr(f)}")
        s.line(ind, f"{target} = _new(_Struct)")
        s.line(ind, f"{target}.__dict__ = {{" + ", ".join(parts) + "}")
        if self.flexible:
            s.line(ind, f"if _unk{k} is not None: {target}.__dict__['_unknown_tags'] = _unk{k}")

    def flush_run(self, run: list[Field], ind: int, path: tuple, var: dict, endv: str,
                  length_of: Field | None) -> None:
        """Unpack a run of fixed-size fields at once (plus the length prefix of ``length_of`` into ``n``)."""
        if not run:
            return
        s = self.src
        fmt = ">" + "".join(_FIXED_FORMATS[f.kind][0] for f in run)
        targets = "".join(f"{var[f.name]}, " for f in run)
        sizes = tuple((f.name, _FIXED_FORMATS[f.kind][1]) for f in run)
        if length_of is not None:
            wide = length_of.kind != "string"
            fmt += "i" if wide else "h"
            targets += "n, "
            sizes += ((length_of.name, 4 if wide else 2),)
        size = _struct.calcsize(fmt)
        unpack = s.const(_struct.Struct(fmt).unpack_from)
        meta = ("run", path, sizes, endv)
        s.line(ind, f"{targets}= {unpack}(buf, pos); pos += {size}", meta)
        for f in run:
            if f.kind == "uuid":
                s.line(ind, f"{var[f.name]} = _UUID(bytes={var[f.name]})", ("field", path + ((f.name, None),)))

    def length(self, ind: int, nv: str, wide: bool, meta: tuple) -> None:
        """Read a length/count into ``nv``: int16/int32 classic, or compact (uvarint - 1) when flexible."""
        s = self.src
        if self.flexible:
            # Unsigned varint with inline fast paths for 1 and 2 bytes (lengths below 16 KiB).
            s.line(ind, f"{nv} = buf[pos]", meta)
            s.line(ind, f"if {nv} < 128: pos += 1", meta)
            s.line(ind, "else:", meta)
            s.line(ind + 1, "b2 = buf[pos + 1]", meta)
            s.line(ind + 1, f"if b2 < 128: {nv} = ({nv} & 127) | (b2 << 7); pos += 2", meta)
            s.line(ind + 1, f"else: {nv}, pos = _uvar(buf, pos)", meta)
            s.line(ind, f"{nv} -= 1", meta)
        elif wide:
            s.line(ind, f"{nv}, = _unpack_i(buf, pos); pos += 4", meta)
        else:
            s.line(ind, f"{nv}, = _unpack_h(buf, pos); pos += 2", meta)

    def null_or_fail(self, ind: int, f: Field, t: str, what: str, meta: tuple) -> None:
        if f.is_nullable(self.version):
            self.src.line(ind, f"{t} = None", meta)
        else:
            self.src.line(ind, f"raise _Malformed('null {what} (length %d) where the field is not nullable' % n)",
                          meta)

    def field(self, f: Field, ind: int, path: tuple, t: str, endv: str, k: int, have_length: bool = False) -> None:
        """Emit code decoding one field (not part of a fixed run) into the variable ``t``; with ``have_length``
        its length prefix was already read into ``n``."""
        s = self.src
        here = path + ((f.name, None),)
        meta = ("field", here)
        kind = f.kind
        fx = _fixed(f)
        if fx is not None:
            unpack = s.const(_struct.Struct(">" + fx[0]).unpack_from)
            s.line(ind, f"{t}, = {unpack}(buf, pos); pos += {fx[1]}", ("run", path, ((f.name, fx[1]),), endv))
            if kind == "uuid":
                s.line(ind, f"{t} = _UUID(bytes={t})", meta)
            return
        if kind in ("string", "bytes", "records"):
            if not have_length:
                self.length(ind, "n", kind != "string", meta)
            s.line(ind, "if n < 0:", meta)
            self.null_or_fail(ind + 1, f, t, kind, meta)
            s.line(ind, "else:", meta)
            s.line(ind + 1, "e = pos + n", meta)
            s.line(ind + 1, f"if e > {endv}: raise _Malformed('{kind} length %d exceeds the %d remaining bytes' "
                            f"% (n, {endv} - pos))", meta)
            if kind == "string":
                s.line(ind + 1, f"{t} = _str(buf[pos:e], 'utf-8'); pos = e", meta)
            elif kind == "bytes":
                s.line(ind + 1, f"{t} = _bytes(buf[pos:e]); pos = e", meta)
            else:
                s.line(ind + 1, f"{t} = buf[pos:e]; pos = e", meta)
            return
        if kind == "struct":
            if f.is_nullable(self.version):
                # Kafka marks a null struct with int8 -1 (present: 1), but inside a tag section with an unsigned
                # varint 0 (present: 1).
                null_test = "buf[pos] == 0" if self.flexible and f.is_tagged(self.version) else "buf[pos] > 127"
                s.line(ind, f"if {null_test}: {t} = None; pos += 1", meta)
                s.line(ind, "else:", meta)
                s.line(ind + 1, "pos += 1", meta)
                self.struct_body(f.fields or (), ind + 1, here, t, endv)
            else:
                self.struct_body(f.fields or (), ind, here, t, endv)
            return
        if kind == "array":
            if not have_length:
                self.length(ind, "n", True, meta)
            s.line(ind, "if n < 0:", meta)
            self.null_or_fail(ind + 1, f, t, "array", meta)
            s.line(ind, f"elif n > {endv} - pos:", meta)
            s.line(ind + 1, f"raise _Malformed('array length %d exceeds the %d remaining bytes' % (n, {endv} - pos))",
                   meta)
            s.line(ind, "else:", meta)
            iv = f"_i{self.funcs}"
            av = f"_a{self.funcs}"
            self.funcs += 1
            elem_path = path + ((f.name, iv),)
            loop_meta = ("field", elem_path)
            if f.fields is not None:
                s.line(ind + 1, f"{t} = []; {av} = {t}.append", meta)
                s.line(ind + 1, f"for {iv} in _range(n):", loop_meta)
                xv = f"_x{self.funcs}"
                self.struct_body(f.fields, ind + 2, elem_path, xv, endv)
                s.line(ind + 2, f"{av}({xv})", loop_meta)
                return
            elem = f.elem
            assert elem is not None
            efx = _FIXED_FORMATS.get(elem)
            if efx is not None and elem != "uuid":
                s.line(ind + 1, f"{t} = list(_unpack_from('>%d{efx[0]}' % n, buf, pos)); pos += n * {efx[1]}", meta)
                return
            s.line(ind + 1, f"{t} = []; {av} = {t}.append", meta)
            s.line(ind + 1, f"for {iv} in _range(n):", loop_meta)
            xv = f"_x{self.funcs}"
            start = len(s.lines)
            self.field(Field(f.name, elem, f.versions), ind + 2, path, xv, endv, k)
            # Element lines belong to the element, not the array.
            for ln in range(start + 1, len(s.lines) + 1):
                m = s.meta.get(ln)
                if m is not None and m[0] == "field":
                    s.meta[ln] = loop_meta
                elif m is not None and m[0] == "run":
                    s.meta[ln] = loop_meta
            s.line(ind + 2, f"{av}({xv})", loop_meta)
            return
        raise AssertionError(kind)

    def tag_section(self, tagged: list[Field], ind: int, path: tuple, var: dict, endv: str, k: int) -> None:
        s = self.src
        meta = ("field", path + (("_tagged_fields", None),))
        for f in tagged:
            s.line(ind, f"{var[f.name]} = {self.default_expr(f)}")
        s.line(ind, f"_unk{k} = None")
        s.line(ind, "if buf[pos] == 0: pos += 1", meta)
        if not tagged:
            s.line(ind, f"else: _unk{k}, pos = _read_unknown_tags(buf, pos, {endv})", meta)
            return
        nt, tag, sz, te = f"nt{k}", f"tag{k}", f"sz{k}", f"te{k}"
        s.line(ind, "else:", meta)
        s.line(ind + 1, f"{nt} = buf[pos]", meta)
        s.line(ind + 1, f"if {nt} < 128: pos += 1", meta)
        s.line(ind + 1, f"else: {nt}, pos = _uvar(buf, pos)", meta)
        s.line(ind + 1, f"for _ in _range({nt}):", meta)
        s.line(ind + 2, f"{tag} = buf[pos]", meta)
        s.line(ind + 2, f"if {tag} < 128: pos += 1", meta)
        s.line(ind + 2, f"else: {tag}, pos = _uvar(buf, pos)", meta)
        s.line(ind + 2, f"{sz} = buf[pos]", meta)
        s.line(ind + 2, f"if {sz} < 128: pos += 1", meta)
        s.line(ind + 2, f"else: {sz}, pos = _uvar(buf, pos)", meta)
        s.line(ind + 2, f"{te} = pos + {sz}", meta)
        s.line(ind + 2, f"if {te} > {endv}: raise _Malformed('tagged field %d of %d bytes exceeds the %d remaining "
                        f"bytes' % ({tag}, {sz}, {endv} - pos))", meta)
        kw = "if"
        for f in tagged:
            s.line(ind + 2, f"{kw} {tag} == {f.tag}:", ("field", path + ((f.name, None),)))
            self.field(f, ind + 3, path, var[f.name], te, k)
            kw = "elif"
        s.line(ind + 2, "else:", meta)
        s.line(ind + 3, f"if _unk{k} is None: _unk{k} = {{}}", meta)
        s.line(ind + 3, f"_unk{k}[{tag}] = _bytes(buf[pos:{te}])", meta)
        s.line(ind + 2, f"pos = {te}", meta)


class EncoderCompiler(_Compiler):
    """Generates one ``_e0(o, w, ch)`` per message version writing ``o`` into the bytearray ``w`` (large records
    and file regions are appended to the chunk list ``ch``), with nested structs inlined like the decoder."""

    def build(self) -> Callable:
        self.struct_function(self.schema.fields)
        return self.finish()["_e0"]

    def struct_function(self, fields: tuple[Field, ...]) -> str:
        self.src.line(0, "def _e0(o, w, ch):")
        self.struct_body(fields, 1, "o", (), "w")
        self.src.line(1, "return None")
        return "_e0"

    def struct_body(self, fields: tuple[Field, ...], ind: int, obj: str, path: tuple, wv: str) -> None:
        k = self.funcs
        self.funcs += 1
        v = self.version
        present = [f for f in fields if f.present(v)]
        regular = [f for f in present if not (self.flexible and f.is_tagged(v))]
        tagged = [f for f in present if self.flexible and f.is_tagged(v)]
        s = self.src
        g = f"g{k}"
        meta = ("field", path)
        s.line(ind, f"_t = type({obj})", meta)
        s.line(ind, f"if _t is _dict: {g} = {obj}.get", meta)
        s.line(ind, f"elif _t is _Struct: {g} = {obj}.__dict__.get", meta)
        s.line(ind, f"else: {g} = _getter({obj})", meta)
        run: list[Field] = []
        for f in regular:
            if _fixed(f) is not None:
                run.append(f)
                continue
            self.flush_run(run, ind, g, path, wv, k)
            run = []
            self.field(f, ind, g, path, wv, f"x{k}", None)
        self.flush_run(run, ind, g, path, wv, k)
        if self.flexible:
            self.tag_section(tagged, ind, g, path, wv, k)

    def get(self, f: Field, g: str) -> str:
        if f.kind == "array":
            d = "None" if f.has_default and f.default is None else "()"
        elif f.kind == "struct":
            # A missing struct means its default; None stands for it unless None is a value of its own (a null).
            d = self.default_expr(f) if self.null_differs(f) else "None"
        else:
            d = self.default_expr(f)
        return f"{g}({f.name!r}, {d})"

    def flush_run(self, run: list[Field], ind: int, g: str, path: tuple, wv: str, k: int) -> None:
        if not run:
            return
        s = self.src
        fmt = ">" + "".join(_FIXED_FORMATS[f.kind][0] for f in run)
        pack = s.const(_struct.Struct(fmt).pack)
        names = []
        for f in run:
            var = f"v{k}_{f.name}"
            names.append(var)
            fm = ("field", path + ((f.name, None),))
            s.line(ind, f"{var} = {self.get(f, g)}.bytes" if f.kind == "uuid" else f"{var} = {self.get(f, g)}", fm)
        meta = ("run", path, tuple((f.name, f"v{k}_{f.name}", ">" + _FIXED_FORMATS[f.kind][0]) for f in run))
        s.line(ind, f"{wv} += {pack}({', '.join(names)})", meta)

    def length(self, ind: int, wv: str, expr: str, wide: bool, meta: tuple) -> None:
        s = self.src
        if self.flexible:
            s.line(ind, f"n = {expr} + 1", meta)
            s.line(ind, f"if n < 128: {wv}.append(n)", meta)
            s.line(ind, f"else: {wv} += _uvarint(n)", meta)
        elif wide:
            s.line(ind, f"{wv} += _pack_i({expr})", meta)
        else:
            s.line(ind, f"{wv} += _pack_h({expr})", meta)

    def null(self, ind: int, f: Field, wv: str, wide: bool, meta: tuple, what: str) -> None:
        s = self.src
        if not f.is_nullable(self.version):
            s.line(ind, f"raise _Unencodable('null {what} where version {self.version} does not allow null')", meta)
        elif self.flexible:
            s.line(ind, f"{wv}.append(0)", meta)
        elif wide:
            s.line(ind, f"{wv} += b'\\xff\\xff\\xff\\xff'", meta)
        else:
            s.line(ind, f"{wv} += b'\\xff\\xff'", meta)

    def field(self, f: Field, ind: int, g: str, path: tuple, wv: str, x: str, source: str | None) -> None:
        """Emit code writing field ``f`` to ``wv``; its value is looked up with ``g`` into ``x`` unless ``source``
        already holds it."""
        s = self.src
        here = path + ((f.name, None),)
        meta = ("field", here)
        kind = f.kind
        if source is None:
            s.line(ind, f"{x} = {self.get(f, g)}", meta)
        else:
            x = source
        fx = _fixed(f)
        if fx is not None:
            pack = s.const(_struct.Struct(">" + fx[0]).pack)
            val = f"{x}.bytes" if kind == "uuid" else x
            s.line(ind, f"{wv} += {pack}({val})", ("run", path, ((f.name, x, ">" + fx[0]),)))
            return
        if kind == "string":
            s.line(ind, f"if {x} is None:", meta)
            self.null(ind + 1, f, wv, False, meta, "string")
            s.line(ind, "else:", meta)
            s.line(ind + 1, f"b = {x}.encode('utf-8')", meta)
            if not self.flexible:
                s.line(ind + 1, "if _len(b) > 32767: raise _Unencodable('string of %d UTF-8 bytes is longer "
                                "than 32767' % _len(b))", meta)
            self.length(ind + 1, wv, "_len(b)", False, meta)
            s.line(ind + 1, f"{wv} += b", meta)
            return
        if kind == "bytes":
            s.line(ind, f"if {x} is None:", meta)
            self.null(ind + 1, f, wv, True, meta, "bytes")
            s.line(ind, "else:", meta)
            s.line(ind + 1, f"b = _bytes({x})", meta)
            self.length(ind + 1, wv, "_len(b)", True, meta)
            s.line(ind + 1, f"{wv} += b", meta)
            return
        if kind == "records":
            s.line(ind, f"_emit_records({wv}, ch, {x}, {self.flexible}, {f.is_nullable(self.version)})", meta)
            return
        if kind == "struct":
            if f.is_nullable(self.version):
                null_marker = 0 if self.flexible and f.is_tagged(self.version) else 255  # as the decoder reads it
                s.line(ind, f"if {x} is None: {wv}.append({null_marker})", meta)
                s.line(ind, "else:", meta)
                s.line(ind + 1, f"{wv}.append(1)", meta)
                self.struct_body(f.fields or (), ind + 1, x, here, wv)
            else:
                s.line(ind, f"if {x} is None: {x} = {{}}", meta)
                self.struct_body(f.fields or (), ind, x, here, wv)
            return
        if kind == "array":
            s.line(ind, f"if {x} is None:", meta)
            self.null(ind + 1, f, wv, True, meta, "array")
            s.line(ind, "else:", meta)
            self.length(ind + 1, wv, f"_len({x})", True, meta)
            iv = f"_i{self.funcs}"
            yv = f"_y{self.funcs}"
            self.funcs += 1
            elem_path = path + ((f.name, iv),)
            loop_meta = ("field", elem_path)
            if f.fields is not None:
                s.line(ind + 1, f"for {iv}, {yv} in _enumerate({x}):", loop_meta)
                self.struct_body(f.fields, ind + 2, yv, elem_path, wv)
                return
            elem = f.elem
            assert elem is not None
            efx = _FIXED_FORMATS.get(elem)
            if efx is not None and elem != "uuid":
                s.line(ind + 1, f"{wv} += _pack('>%d{efx[0]}' % _len({x}), *{x})", meta)
                return
            s.line(ind + 1, f"for {iv}, {yv} in _enumerate({x}):", loop_meta)
            start = len(s.lines)
            self.field(Field(f.name, elem, f.versions), ind + 2, g, path, wv, yv, yv)
            for ln in range(start + 1, len(s.lines) + 1):
                if ln in s.meta:
                    s.meta[ln] = loop_meta
            return
        raise AssertionError(kind)

    def tag_section(self, tagged: list[Field], ind: int, g: str, path: tuple, wv: str, k: int) -> None:
        s = self.src
        meta = ("field", path + (("_tagged_fields", None),))
        if not tagged:
            s.line(ind, f"u = {g}('_unknown_tags', None)", meta)
            s.line(ind, f"if u: _write_tags({wv}, None, u)", meta)
            s.line(ind, f"else: {wv}.append(0)", meta)
            return
        tags = f"tags{k}"
        s.line(ind, f"{tags} = None", meta)
        for f in tagged:
            fm = ("field", path + ((f.name, None),))
            x = f"t{k}_{f.name}"
            tw = f"tw{k}"
            s.line(ind, f"{x} = {self.get(f, g)}", fm)
            s.line(ind, f"if {self.nondefault_test(f, x)}:", fm)
            s.line(ind + 1, f"{tw} = bytearray()", fm)
            self.field(f, ind + 1, g, path, tw, x, x)
            s.line(ind + 1, f"if {tags} is None: {tags} = []", fm)
            s.line(ind + 1, f"{tags}.append(({f.tag}, {tw}))", fm)
        s.line(ind, f"u = {g}('_unknown_tags', None)", meta)
        s.line(ind, f"if {tags} or u: _write_tags({wv}, {tags}, u)", meta)
        s.line(ind, f"else: {wv}.append(0)", meta)

    def null_differs(self, f: Field) -> bool:
        """Whether a null ``f`` differs from its default: Kafka writes such a tagged null
        (ConsumerGroupMemberMetadataValue.ClassicMemberMetadata, whose default is a struct of defaults)."""
        return f.is_nullable(self.version) and not (f.has_default and f.default is None)

    def nondefault_test(self, f: Field, x: str) -> str:
        if f.kind == "array":
            if f.has_default and f.default is None:
                return f"{x} is not None"
            return f"({x} is None or {x})" if self.null_differs(f) else f"{x}"
        if f.kind == "struct":
            defaults = {c.name: c.default_value() for c in f.fields or () if c.present(self.version)}
            nondefault = f"not _is_default_struct({x}, {self.src.const(_FrozenDict(defaults))})"
            return f"({x} is None or {nondefault})" if self.null_differs(f) else f"{x} is not None and {nondefault}"
        return f"{x} != {self.default_expr(f)}"


class _FrozenDict(dict):
    """A dict used as a compile-time constant (never hashed by value)."""

    __hash__ = object.__hash__  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------------------------
# Error diagnosis.


def _frames(exc: BaseException) -> list[tuple[tuple | None, dict]]:
    out = []
    tb = exc.__traceback__
    while tb is not None:
        info = LINE_MAPS.get(tb.tb_frame.f_code.co_filename)
        if info is not None:
            out.append((info.get(tb.tb_lineno), tb.tb_frame.f_locals))
        tb = tb.tb_next
    return out


def _decode_path(path: tuple, loc: dict) -> list[str]:
    parts = []
    for name, index_var in path:
        if index_var is not None and index_var in loc:
            parts.append(f"{name}[{loc[index_var]}]")
        else:
            parts.append(name)
    return parts


def decode_error(exc: BaseException, **where: Any) -> ProtocolError:
    """Turn an exception from a generated decoder into a ProtocolError naming the field and byte offset."""
    frames = _frames(exc)
    if not frames:
        return ProtocolError(f"{type(exc).__name__}: {exc}", **where)
    meta, loc = frames[-1]
    offset = loc.get("pos")
    if isinstance(exc, _Malformed):
        reason = str(exc)
    elif isinstance(exc, UnicodeDecodeError):
        reason = f"invalid UTF-8 in string: {exc.reason}"
    elif isinstance(exc, (_struct.error, IndexError)):
        reason = "truncated: the buffer ends inside this field"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    parts: list[str] = []
    if meta is not None and meta[0] == "field":
        parts = _decode_path(meta[1], loc)
    elif meta is not None and meta[0] == "run":
        parts = _decode_path(meta[1], loc)
        # Several fixed-size fields are read at once: find the first that does not fit.
        endv = loc.get(meta[3], loc.get("end"))
        remaining = endv - offset if isinstance(endv, int) and isinstance(offset, int) else 0
        used = 0
        name = meta[2][0][0]
        for fname, size in meta[2]:
            if used + size > remaining:
                name = fname
                break
            used += size
        parts.append(name)
        if isinstance(offset, int):
            offset += used
        reason = "truncated: the buffer ends inside this field"
    return ProtocolError(reason, field=".".join(parts) or None, offset=offset, **where)


def encode_error(exc: BaseException, **where: Any) -> EncodeError:
    """Turn an exception from a generated encoder into an EncodeError naming the field."""
    frames = _frames(exc)
    reason = str(exc) if isinstance(exc, _Unencodable) else f"{type(exc).__name__}: {exc}"
    parts: list[str] = []
    if frames:
        meta, loc = frames[-1]
        if meta is not None:
            parts = _decode_path(meta[1], loc)
        if meta is not None and meta[0] == "run":
            for name, var, fmt in meta[2]:
                value: Any = loc.get(var)
                try:
                    _struct.pack(fmt, value.bytes if fmt == ">16s" and hasattr(value, "bytes") else value)
                except Exception as e:  # noqa: BLE001 - we only look for the offending value
                    parts.append(name)
                    reason = f"cannot encode {value!r} as {_FORMAT_NAMES.get(fmt[1:], fmt)}: {e}"
                    break
        elif isinstance(exc, AttributeError) and "encode" in str(exc):
            reason = f"expected str: {exc}"
        elif isinstance(exc, AttributeError) and "bytes" in str(exc):
            reason = f"expected uuid.UUID: {exc}"
    return EncodeError(reason, field=".".join(parts) or None, **where)


_FORMAT_NAMES = {"b": "int8", "h": "int16", "i": "int32", "q": "int64", "H": "uint16", "d": "float64",
                 "?": "bool", "16s": "uuid"}


def compile_decoder(schema: MessageSchema, version: int, label: str) -> Callable:
    return DecoderCompiler(schema, version, schema.is_flexible(version), label).build()


def compile_encoder(schema: MessageSchema, version: int, label: str) -> Callable:
    return EncoderCompiler(schema, version, schema.is_flexible(version), label).build()


def generated_source(schema: MessageSchema, version: int, direction: str) -> str:
    """The generated Python source for one message version (for debugging and curiosity)."""
    cls = DecoderCompiler if direction == "decode" else EncoderCompiler
    c = cls(schema, version, schema.is_flexible(version), "source")
    c.struct_function(schema.fields)
    return "\n".join(c.src.lines)

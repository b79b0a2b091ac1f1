"""Schema model: APIs, messages and fields with the version ranges they exist in.

The definitions themselves live in :mod:`klog.protocol.schemas` as compact tuples transcribed from Apache
Kafka's message definitions; this module turns them into :class:`Field` trees and registers one
:class:`ApiSchema` per API key.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .struct import Struct

# Upper bound used for open version ranges ("3+"). Kafka versions are int16.
MAX_VERSION = 0x7FFF

ZERO_UUID = uuid.UUID(int=0)

PRIMITIVE_TYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "records", "uuid"}
)

VersionRange = tuple[int, int]


def parse_versions(text: str | None) -> VersionRange | None:
    """Parse Kafka's version range syntax: ``"3+"``, ``"0-12"``, ``"5"`` or ``"none"``."""
    if text is None:
        return None
    text = text.strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


class Field:
    """One field of a message or nested struct.

    ``kind`` is a primitive type name, ``"array"`` or ``"struct"``. Arrays of primitives carry ``elem`` (the
    primitive type); arrays of structs and single structs carry ``fields`` and ``struct_name``.
    """

    __slots__ = (
        "name",
        "kind",
        "elem",
        "struct_name",
        "versions",
        "nullable",
        "has_default",
        "default",
        "tag",
        "tagged_versions",
        "fields",
        "_make_struct",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        versions: VersionRange,
        *,
        elem: str | None = None,
        struct_name: str | None = None,
        nullable: VersionRange | None = None,
        has_default: bool = False,
        default: Any = None,
        tag: int | None = None,
        tagged_versions: VersionRange | None = None,
        fields: tuple[Field, ...] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.elem = elem
        self.struct_name = struct_name
        self.versions = versions
        self.nullable = nullable
        self.has_default = has_default
        self.default = default
        self.tag = tag
        self.tagged_versions = tagged_versions
        self.fields = fields
        self._make_struct: Callable[[], Struct] | None = None

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.kind!r}, {self.versions})"

    def present(self, version: int) -> bool:
        lo, hi = self.versions
        return lo <= version <= hi

    def is_nullable(self, version: int) -> bool:
        r = self.nullable
        return r is not None and r[0] <= version <= r[1]

    def is_tagged(self, version: int) -> bool:
        r = self.tagged_versions
        return self.tag is not None and r is not None and r[0] <= version <= r[1]

    @property
    def is_struct_like(self) -> bool:
        return self.fields is not None

    def default_value(self) -> Any:
        """A fresh default value for this field (new list/Struct objects each call)."""
        if self.kind == "array":
            if self.has_default and self.default is None:
                return None
            return []
        if self.kind == "struct":
            if self.has_default and self.default is None:
                return None
            make = self._make_struct
            if make is None:
                make = self._make_struct = self._struct_factory()
            return make()
        if self.has_default:
            if self.kind == "uuid":
                return uuid.UUID(self.default) if self.default else ZERO_UUID
            return self.default
        return _TYPE_DEFAULTS[self.kind]

    def _struct_factory(self) -> Callable[[], Struct]:
        """A maker of this struct's default: the immutable member defaults are worked out once (decoders ask for
        absent tagged structs, e.g. a Fetch partition's CurrentLeader, on every partition they decode)."""
        shared: dict[str, Any] = {}
        fresh: list[tuple[str, Callable[[], Any]]] = []
        for f in self.fields or ():
            shareable, value = f.constant_default()
            shared[f.name] = value   # keeps the schema's field order; fresh ones are replaced below
            if not shareable:
                fresh.append((f.name, f.default_value))

        def make() -> Struct:
            values = dict(shared)
            for name, new in fresh:
                values[name] = new()
            return Struct(**values)
        return make

    def constant_default(self) -> tuple[bool, Any]:
        """(True, value) when the default is an immutable value that may be shared between objects."""
        if self.kind in ("array", "struct"):
            v = self.default_value()
            return (v is None, v)
        return (True, self.default_value())


_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": ZERO_UUID,
}


class MessageSchema:
    """A request, response or header: a named field tree valid for a range of versions."""

    __slots__ = ("name", "valid", "flexible", "fields")

    def __init__(self, name: str, valid: VersionRange, flexible: VersionRange | None, fields: tuple[Field, ...]):
        self.name = name
        self.valid = valid
        self.flexible = flexible
        self.fields = fields

    def is_flexible(self, version: int) -> bool:
        f = self.flexible
        return f is not None and f[0] <= version <= f[1]

    def __repr__(self) -> str:
        return f"MessageSchema({self.name!r}, {self.valid})"


class ApiSchema:
    """One Kafka API: its key, name, valid and flexible versions, request and response schemas.

    The request and response field trees are built from their definitions (:mod:`klog.protocol.schemas`) when
    first asked for: a process builds those of the APIs it uses (a broker's few hundred KiB of Field objects for
    the ninety-odd APIs otherwise)."""

    __slots__ = ("api_key", "name", "valid", "flexible", "_definitions", "_request", "_response")

    def __init__(self, api_key: int, name: str, valid: VersionRange, flexible: VersionRange | None,
                 request: tuple, response: tuple) -> None:
        self.api_key = api_key
        self.name = name
        self.valid = valid
        self.flexible = flexible
        #: the request's and the response's field definitions
        self._definitions = (request, response)
        self._request: MessageSchema | None = None
        self._response: MessageSchema | None = None

    @property
    def request(self) -> MessageSchema:
        if self._request is None:
            self._request = self._build("Request", 0)
        return self._request

    @property
    def response(self) -> MessageSchema:
        if self._response is None:
            self._response = self._build("Response", 1)
        return self._response

    def _build(self, kind: str, which: int) -> MessageSchema:
        """The request's (0) or the response's (1) schema, built on first use."""
        return MessageSchema(self.name + kind, self.valid, self.flexible, build_fields(self._definitions[which]))

    @property
    def min_version(self) -> int:
        return self.valid[0]

    @property
    def max_version(self) -> int:
        return self.valid[1]

    def supports(self, version: int) -> bool:
        return self.valid[0] <= version <= self.valid[1]

    def is_flexible(self, version: int) -> bool:
        f = self.flexible
        return f is not None and f[0] <= version <= f[1]

    def __repr__(self) -> str:
        return f"ApiSchema({self.api_key}, {self.name!r}, {self.valid[0]}-{self.valid[1]})"


def build_fields(defs: tuple, parent_versions: VersionRange | None = None) -> tuple[Field, ...]:
    """Turn the compact tuples of :mod:`klog.protocol.schemas` into :class:`Field` objects.

    Each definition is ``(name, type, versions[, options][, children])`` where options may hold
    ``nullable``, ``default``, ``tag`` and ``tagged`` (tagged versions, defaulting to ``versions``).
    """
    out = []
    for d in defs:
        name, typ, versions = d[0], d[1], d[2]
        opts: dict[str, Any] = {}
        children = None
        for extra in d[3:]:
            if isinstance(extra, dict):
                opts = extra
            else:
                children = extra
        vr = parse_versions(versions)
        assert vr is not None, (name, versions)
        nullable = parse_versions(opts.get("nullable"))
        has_default = "default" in opts
        default = opts.get("default")
        tag = opts.get("tag")
        tagged = parse_versions(opts.get("tagged", versions)) if tag is not None else None
        is_array = typ.startswith("[]")
        base = typ[2:] if is_array else typ
        if children is not None:
            sub = build_fields(children, vr)
            kind = "array" if is_array else "struct"
            out.append(Field(name, kind, vr, struct_name=base, nullable=nullable, has_default=has_default,
                             default=default, tag=tag, tagged_versions=tagged, fields=sub))
        elif is_array:
            if base not in PRIMITIVE_TYPES:
                raise ValueError(f"array field {name!r} of unknown type {base!r} has no fields")
            out.append(Field(name, "array", vr, elem=base, nullable=nullable, has_default=has_default,
                             default=default, tag=tag, tagged_versions=tagged))
        else:
            if base not in PRIMITIVE_TYPES:
                raise ValueError(f"field {name!r} of unknown type {base!r} has no fields")
            out.append(Field(name, base, vr, nullable=nullable, has_default=has_default, default=default,
                             tag=tag, tagged_versions=tagged))
    return tuple(out)


def walk(fields: tuple[Field, ...], prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Yield (dotted path, field) for every field in a tree."""
    for f in fields:
        path = prefix + f.name
        yield path, f
        if f.fields:
            yield from walk(f.fields, path + ".")

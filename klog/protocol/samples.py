"""Random representative values for protocol schemas (used by tests, fuzzers and benchmarks)."""

from __future__ import annotations

import random
import uuid
from typing import Any

from .struct import Struct
from .schema import Field

_INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 65535),
}
_STRINGS = ["", "topic-a", "ünïcödé-✓", "日本語", "x" * 200, "emoji-\U0001f600"]


def sample_value(f: Field, version: int, flexible: bool, rng: random.Random, depth: int = 0) -> Any:
    """A random valid value for field ``f`` at ``version`` (nulls where allowed, empty and non-empty arrays)."""
    nullable = f.is_nullable(version)
    if nullable and rng.random() < 0.25:
        return None
    kind = f.kind
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])  # uint16 has no -1
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice([0.0, -1.5, 3.25e10, rng.random()])
    if kind == "string":
        return rng.choice(_STRINGS)
    if kind == "bytes":
        return rng.choice([b"", b"\x00\x01\xff", bytes(rng.randrange(256) for _ in range(50))])
    if kind == "records":
        return rng.choice([b"", b"R" * 61, bytes(rng.randrange(256) for _ in range(300))])
    if kind == "uuid":
        return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))])
    if kind == "struct":
        return sample_struct(f.fields or (), version, flexible, rng, depth + 1)
    if kind == "array":
        n = rng.choice([0, 1, 2]) if depth < 3 else rng.choice([0, 1])
        if f.fields is not None:
            return [sample_struct(f.fields, version, flexible, rng, depth + 1) for _ in range(n)]
        elem = Field(f.name, f.elem or "int32", f.versions)
        return [sample_value(elem, version, flexible, rng, depth + 1) for _ in range(n)]
    raise AssertionError(kind)


def sample_struct(fields: tuple[Field, ...], version: int, flexible: bool, rng: random.Random,
                  depth: int = 0) -> Struct:
    """A Struct holding values for the fields present at ``version`` (absent fields are left out)."""
    values = {}
    for f in fields:
        if f.present(version):
            values[f.name] = sample_value(f, version, flexible, rng, depth)
    return Struct(**values)


def expected_decoded(fields: tuple[Field, ...], version: int, value: Any) -> dict:
    """What decoding ``value`` must give: present fields as given, absent fields at their defaults."""
    out = {}
    src = value.__dict__ if isinstance(value, Struct) else value
    for f in fields:
        if not f.present(version):
            out[f.name] = plain(f.default_value())
            continue
        v = src.get(f.name, f.default_value())
        if f.kind == "struct":
            if v is None and not f.is_nullable(version):
                v = f.default_value()
            out[f.name] = None if v is None else expected_decoded(f.fields or (), version, v)
        elif f.kind == "array" and f.fields is not None and v is not None:
            out[f.name] = [expected_decoded(f.fields, version, e) for e in v]
        else:
            out[f.name] = plain(v)
    return out


def plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return {k: plain(x) for k, x in v.__dict__.items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, (memoryview, bytearray)):
        return bytes(v)
    return v

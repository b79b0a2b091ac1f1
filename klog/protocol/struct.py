"""Generic message objects and file regions."""

from __future__ import annotations

from typing import Any


class Struct:
    """A decoded (or to-be-encoded) message or nested struct: plain attributes named after Kafka's fields.

    ``Struct(error_code=0, topics=[...])``; equality compares all attributes. Decoded structs carry every field
    of the schema (fields absent in the decoded version hold their defaults). Unknown tagged fields found while
    decoding are kept in ``_unknown_tags`` (``{tag: bytes}``) and written back when the struct is encoded.
    """

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Struct):
            return self.__dict__ == other.__dict__
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, Struct):
            return self.__dict__ != other.__dict__
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Struct({inner})"

    def __getattr__(self, name: str) -> Any:
        # Only called for missing attributes; gives a message that names what exists.
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"Struct has no field {name!r} (fields: {', '.join(self.__dict__)})")

    def to_dict(self) -> dict[str, Any]:
        """A deep copy as plain dicts and lists (handy for logging and tests)."""
        return {k: _plain(v) for k, v in self.__dict__.items()}


def _plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return v.tobytes()
    return v


class FileRegion:
    """``length`` bytes of the open file ``fd`` starting at ``position``: a records value the broker sends with
    ``sendfile`` instead of copying. Any object with these three attributes works in its place."""

    __slots__ = ("fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        if position < 0 or length < 0:
            raise ValueError(f"FileRegion position and length must be >= 0 (got {position}, {length})")
        self.fd = fd
        self.position = position
        self.length = length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, length={self.length})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileRegion):
            return (self.fd, self.position, self.length) == (other.fd, other.position, other.length)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a decoded message (a Struct) or of the dict a handler, coordinator or controller answered with in
    its place; ``default`` where it has none."""
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)

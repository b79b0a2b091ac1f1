"""Exceptions raised by the codec."""

from __future__ import annotations


class ProtocolError(ValueError):
    """Malformed input (or an object that cannot be encoded), naming the API, version, field and byte offset.

    Attributes: ``api_key``, ``api_version`` (``None`` when unknown, e.g. in a header), ``field`` (dotted path,
    array elements as ``topics[3]``), ``offset`` (byte offset in the decoded buffer, ``None`` for encoding) and
    ``reason``.
    """

    def __init__(self, reason: str, *, api_key: int | None = None, api_version: int | None = None,
                 field: str | None = None, offset: int | None = None, api_name: str | None = None) -> None:
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.field = field
        self.offset = offset
        self.api_name = api_name
        where = []
        if api_key is not None:
            where.append(f"{api_name or 'api'}({api_key}) v{api_version}")
        if field is not None:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)


class UnsupportedVersion(ProtocolError):
    """A known API at a version this codec has no schema for. Brokers answer UNSUPPORTED_VERSION (35)."""


class UnknownApiKey(ProtocolError):
    """An API key this codec does not know. Kafka closes the connection on these."""


class EncodeError(ProtocolError):
    """An object that cannot be encoded at the requested version (wrong type, out of range, null where the
    version does not allow it)."""


class FrameTooLarge(ProtocolError):
    """A frame whose size prefix is above the reader's limit, or negative. ``size`` holds the prefix value."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        if size < 0:
            reason = f"negative frame size {size}"
        else:
            reason = f"frame of {size} bytes exceeds the limit of {limit} bytes"
        super().__init__(reason, field="size", offset=0)

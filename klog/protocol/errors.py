"""Kafka error codes (generated from Apache Kafka's ``Errors`` table, :mod:`.error_codes`) and one exception class
per code.

``ErrorCode`` is an IntEnum (``ErrorCode.NOT_COORDINATOR == 16``); ``error_info(code)`` gives
(name, code, retriable, message). For clients: ``raise for_code(code)`` (or ``exception_class(code)``) gives an
instance of the matching :class:`KafkaError` subclass, e.g. ``NotCoordinatorError``; every class has ``.code``,
``.retriable`` and ``.default_message``.
"""

from __future__ import annotations

from typing import NamedTuple

from .error_codes import ERROR_TABLE
from .error_codes import ErrorCode as ErrorCode  # re-exported: klog.protocol.errors.ErrorCode is public


class ErrorInfo(NamedTuple):
    name: str
    code: int
    retriable: bool
    message: str | None


# (code, name, retriable, default message), from the generated table
_TABLE: tuple[tuple[int, str, bool, str | None], ...] = tuple(
    (int(code), code.name, retriable, message) for code, retriable, message in ERROR_TABLE)

ERRORS: dict[int, ErrorInfo] = {code: ErrorInfo(name, code, retriable, message)
                                for code, name, retriable, message in _TABLE}


def error_info(code: int) -> ErrorInfo:
    """Name, code, retriable flag and default message of an error code (unknown codes are reported as such)."""
    info = ERRORS.get(code)
    if info is None:
        return ErrorInfo(f"UNKNOWN_ERROR_CODE_{code}", code, False, f"Unknown error code {code}.")
    return info


class KafkaError(Exception):
    """Base of all Kafka protocol errors; ``code`` is the wire error code."""

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str | None = None

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message or self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


def _class_name(name: str) -> str:
    base = "".join(part.capitalize() for part in name.lower().split("_"))
    return base if base.endswith(("Error", "Exception")) else base + "Error"


_CLASSES: dict[int, type[KafkaError]] = {}
for _code, _name, _retriable, _message in _TABLE:
    if _code == ErrorCode.NONE:
        continue
    _cls = type(_class_name(_name), (KafkaError,), {
        "code": _code,
        "name": _name,
        "retriable": _retriable,
        "default_message": _message,
        "__doc__": _message,
        "__module__": __name__,
    })
    _CLASSES[_code] = _cls
    globals()[_cls.__name__] = _cls


def exception_class(code: int) -> type[KafkaError]:
    """The KafkaError subclass for an error code (KafkaError itself for unknown codes)."""
    return _CLASSES.get(code, KafkaError)


def for_code(code: int, message: str | None = None) -> KafkaError:
    """An exception instance for a non-zero error code, with the server's message if given."""
    cls = _CLASSES.get(code)
    if cls is None:
        err = KafkaError(message or f"Unknown error code {code}.")
        err.code = code
        return err
    return cls(message)


def is_retriable(code: int) -> bool:
    info = ERRORS.get(code)
    return info.retriable if info is not None else False


"""Client exceptions.

Broker-reported errors are the exception classes of :mod:`klog.protocol.errors` (one class per Kafka error
code, e.g. ``NotLeaderOrFollowerError`` with ``.code == 6``), re-exported here. The few conditions that exist
only on the client side (timeouts waiting for the broker, a closed client, bad configuration) get their own
classes below; they still derive from :class:`KafkaError` so ``except KafkaError`` catches everything.
"""

from __future__ import annotations

from typing import Any

from klog.protocol.errors import (  # noqa: F401  (re-exported)
    ErrorCode,
    KafkaError,
    error_info,
    exception_class,
    for_code,
    is_retriable,
)
from klog.protocol import errors as _protocol_errors

__all__ = [
    "ErrorCode",
    "KafkaError",
    "KafkaTimeoutError",
    "KafkaConnectionError",
    "ClientClosedError",
    "ConfigError",
    "IllegalStateError",
    "NoBrokersAvailable",
    "RecordTooLargeError",
    "UnsupportedFeatureError",
    "CommitFailedError",
    "LogTruncationError",
    "TransactionError",
    "TransactionAbortableError",
    "TransactionFatalError",
    "TransactionStateError",
    "error_info",
    "exception_class",
    "for_code",
    "is_retriable",
    "raise_for_code",
]


class KafkaTimeoutError(KafkaError):
    """The operation did not complete within its timeout (``request.timeout.ms``, ``max.block.ms``,
    ``delivery.timeout.ms`` or an explicit ``timeout`` argument)."""

    code = ErrorCode.REQUEST_TIMED_OUT
    name = "REQUEST_TIMED_OUT"
    retriable = True


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or was closed with requests in flight."""

    code = ErrorCode.NETWORK_EXCEPTION
    name = "NETWORK_EXCEPTION"
    retriable = True


class NoBrokersAvailable(KafkaConnectionError):
    """None of the bootstrap servers (or known brokers) could be reached."""


class ClientClosedError(KafkaError):
    """The producer/consumer/admin client was closed."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR
    name = "CLIENT_CLOSED"


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""

    code = ErrorCode.INVALID_CONFIG
    name = "INVALID_CONFIG"


class IllegalStateError(KafkaError, RuntimeError):
    """The call is not valid in the client's current state (e.g. committing without a group)."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR
    name = "ILLEGAL_STATE"


class RecordTooLargeError(KafkaError, ValueError):
    """A record is larger than ``max.request.size`` or ``buffer.memory`` allows."""

    code = ErrorCode.MESSAGE_TOO_LARGE
    name = "MESSAGE_TOO_LARGE"


class UnsupportedFeatureError(KafkaError):
    """The broker does not support an API (or version) the operation needs."""

    code = ErrorCode.UNSUPPORTED_VERSION
    name = "UNSUPPORTED_VERSION"


class CommitFailedError(KafkaError):
    """An offset commit failed because the group rebalanced (the member's generation is no longer valid)."""

    code = ErrorCode.ILLEGAL_GENERATION
    name = "ILLEGAL_GENERATION"


class LogTruncationError(KafkaError):
    """The consumer's position is past the end of its leader epoch on the partition's leader (the log was truncated
    after an unclean election) and ``auto.offset.reset`` is none (Kafka's ``LogTruncationException``): seek to
    resume. ``divergent_offsets``: partition -> the first offset known to diverge with its epoch (absent when the
    leader knows no epoch at or before the position's); ``fetch_offsets``: partition -> the position."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE
    name = "OFFSET_OUT_OF_RANGE"

    def __init__(self, message: str, fetch_offsets: dict[Any, int], divergent_offsets: dict[Any, Any]) -> None:
        super().__init__(message)
        self.fetch_offsets = fetch_offsets
        self.divergent_offsets = divergent_offsets


class TransactionError(KafkaError):
    """A transactional producer's operation failed. As confluent-kafka's ``KafkaError``: ``txn_requires_abort``
    (the transaction can only be aborted, then the producer is usable again), ``fatal`` (the producer cannot be
    used any more: close it and make a new one) and ``retriable`` (call the same method again). ``code`` and
    ``name`` are those of the broker's error (``cause``) when there is one."""

    txn_requires_abort = False
    fatal = False

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        if isinstance(cause, KafkaError):
            self.code = cause.code
            self.name = cause.name
            self.retriable = cause.retriable and not (self.txn_requires_abort or self.fatal)


class TransactionAbortableError(TransactionError):
    """The current transaction failed (a record was not written, an offset commit was refused, the broker
    answered TRANSACTION_ABORTABLE ...): call ``abort_transaction()``, then begin a new one."""

    txn_requires_abort = True


class TransactionFatalError(TransactionError):
    """The transactional producer cannot continue: fenced by a newer producer with the same ``transactional.id``
    (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH), not authorized, or the coordinator refused the producer's
    state. Close the producer."""

    fatal = True


class TransactionStateError(TransactionError, IllegalStateError):
    """A transactional call in the wrong state (e.g. ``send()`` outside ``begin_transaction()``, ``commit`` without
    a transaction, ``init_transactions()`` twice) or on a producer without ``transactional.id``."""

    code = ErrorCode.INVALID_TXN_STATE
    name = "INVALID_TXN_STATE"


def raise_for_code(code: int, message: str | None = None, context: str | None = None) -> None:
    """Raise the exception for a non-zero Kafka error code (no-op for 0)."""
    if code:
        err = for_code(code, message)
        if context:
            err.args = (f"{context}: {err.args[0] if err.args else err.name}",)
        raise err


def __getattr__(name: str) -> type[KafkaError]:
    # Every protocol error class (``NotLeaderOrFollowerError`` ...) is reachable from this module too.
    cls = getattr(_protocol_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, KafkaError):
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

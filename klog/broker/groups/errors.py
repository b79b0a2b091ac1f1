"""Kafka error codes the coordinator answers with, and an exception carrying one."""

from __future__ import annotations

from enum import IntEnum

from klog.protocol.errors import ERRORS, error_info

from .api import AppendRefused

__all__ = ["ErrorCode", "GroupError", "replication_error_code", "storage_error_code"]

_CODE_BY_NAME: dict[str, int] = {info.name: code for code, info in ERRORS.items()}


def _wire(name: str) -> int:
    """The wire code of a Kafka error name (KeyError at import if klog.protocol's table lacks it)."""
    return _CODE_BY_NAME[name]


class ErrorCode(IntEnum):
    """The error codes the group coordinator answers with, by name, as a class type checkers can read
    (``klog.protocol.errors.ErrorCode`` is built from Kafka's table at run time, so its members are invisible to
    them). Values come from that table, so the two cannot disagree; compares equal to plain ints."""

    UNKNOWN_SERVER_ERROR = _wire("UNKNOWN_SERVER_ERROR")
    NONE = _wire("NONE")
    UNKNOWN_TOPIC_OR_PARTITION = _wire("UNKNOWN_TOPIC_OR_PARTITION")
    OFFSET_METADATA_TOO_LARGE = _wire("OFFSET_METADATA_TOO_LARGE")
    COORDINATOR_NOT_AVAILABLE = _wire("COORDINATOR_NOT_AVAILABLE")
    NOT_COORDINATOR = _wire("NOT_COORDINATOR")
    ILLEGAL_GENERATION = _wire("ILLEGAL_GENERATION")
    INCONSISTENT_GROUP_PROTOCOL = _wire("INCONSISTENT_GROUP_PROTOCOL")
    INVALID_GROUP_ID = _wire("INVALID_GROUP_ID")
    UNKNOWN_MEMBER_ID = _wire("UNKNOWN_MEMBER_ID")
    INVALID_SESSION_TIMEOUT = _wire("INVALID_SESSION_TIMEOUT")
    REBALANCE_IN_PROGRESS = _wire("REBALANCE_IN_PROGRESS")
    UNSUPPORTED_VERSION = _wire("UNSUPPORTED_VERSION")
    INVALID_REQUEST = _wire("INVALID_REQUEST")
    NON_EMPTY_GROUP = _wire("NON_EMPTY_GROUP")
    GROUP_ID_NOT_FOUND = _wire("GROUP_ID_NOT_FOUND")
    MEMBER_ID_REQUIRED = _wire("MEMBER_ID_REQUIRED")
    GROUP_MAX_SIZE_REACHED = _wire("GROUP_MAX_SIZE_REACHED")
    FENCED_INSTANCE_ID = _wire("FENCED_INSTANCE_ID")
    GROUP_SUBSCRIBED_TO_TOPIC = _wire("GROUP_SUBSCRIBED_TO_TOPIC")
    UNRELEASED_INSTANCE_ID = _wire("UNRELEASED_INSTANCE_ID")
    UNSUPPORTED_ASSIGNOR = _wire("UNSUPPORTED_ASSIGNOR")
    FENCED_MEMBER_EPOCH = _wire("FENCED_MEMBER_EPOCH")
    STALE_MEMBER_EPOCH = _wire("STALE_MEMBER_EPOCH")
    INVALID_REGULAR_EXPRESSION = _wire("INVALID_REGULAR_EXPRESSION")


class GroupError(Exception):
    """A request-level failure answered with a Kafka error code (``ApiException`` in Kafka)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or error_info(code).name)
        self.code = int(code)
        self.message = message


def storage_error_code(exc: BaseException) -> int:
    """The error a client sees when appending to ``__consumer_offsets`` failed (Kafka's
    ``appendGroupMetadataErrorToResponseError``: storage failures read as NOT_COORDINATOR, so the client
    looks the coordinator up again; anything else is an unknown server error)."""
    if isinstance(exc, KeyError):  # partition missing: the offsets topic is not available
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, AppendRefused):
        return replication_error_code(exc.code)
    if isinstance(exc, OSError):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def replication_error_code(code: int) -> int:
    """The error a client sees when a coordinator write was refused before its append or did not reach the ISR
    (Kafka's ``GroupCoordinatorService.normalizeException``): the client retries COORDINATOR_NOT_AVAILABLE at
    the same coordinator and looks the coordinator up again after NOT_COORDINATOR."""
    if code in _RETRY_SAME_COORDINATOR:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in _FIND_COORDINATOR_AGAIN:
        return ErrorCode.NOT_COORDINATOR
    return code


_RETRY_SAME_COORDINATOR = frozenset(_wire(n) for n in (
    "UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT"))
_FIND_COORDINATOR_AGAIN = frozenset(_wire(n) for n in ("NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"))

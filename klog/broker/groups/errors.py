"""Kafka error codes the coordinator answers with, and an exception carrying one."""

from __future__ import annotations

from klog.protocol.errors import ErrorCode, error_info

from .api import AppendRefused

__all__ = ["ErrorCode", "GroupError", "replication_error_code", "storage_error_code"]


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


_RETRY_SAME_COORDINATOR = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT})
_FIND_COORDINATOR_AGAIN = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})

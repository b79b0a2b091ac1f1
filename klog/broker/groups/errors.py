"""Kafka error codes the coordinator answers with, and an exception carrying one."""

from __future__ import annotations

from klog.protocol.errors import ErrorCode

__all__ = ["ErrorCode", "GroupError", "storage_error_code"]


class GroupError(Exception):
    """A request-level failure answered with a Kafka error code (``ApiException`` in Kafka)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = int(code)
        self.message = message


def storage_error_code(exc: BaseException) -> int:
    """The error a client sees when appending to ``__consumer_offsets`` failed (Kafka's
    ``appendGroupMetadataErrorToResponseError``: storage failures read as NOT_COORDINATOR, so the client
    looks the coordinator up again; anything else is an unknown server error)."""
    if isinstance(exc, KeyError):  # partition missing: the offsets topic is not available
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, OSError):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR

"""Kafka error codes the coordinator answers with, and an exception carrying one."""

from __future__ import annotations

from klog.protocol.errors import ErrorCode, error_info

from klog.broker.coordinator.runtime import replication_error_code, storage_error_code

__all__ = ["ErrorCode", "GroupError", "replication_error_code", "storage_error_code"]


class GroupError(Exception):
    """A request-level failure answered with a Kafka error code (``ApiException`` in Kafka)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or error_info(code).name)
        self.code = int(code)
        self.message = message

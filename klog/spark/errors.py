"""Errors raised by klog's Spark source and sink (they surface in Spark's exception messages)."""

from __future__ import annotations

__all__ = ["KlogSparkError", "KlogSparkOptionError", "DataLossError", "BrokerError"]


class KlogSparkError(Exception):
    """Base class of klog's Spark integration errors."""


class KlogSparkOptionError(KlogSparkError, ValueError):
    """An option of the klog Spark source or sink is missing, conflicting or malformed."""


class DataLossError(KlogSparkError):
    """Requested offsets are gone (retention, deleted topic or partition) and failOnDataLoss is true."""


class BrokerError(KlogSparkError):
    """A broker answered with a Kafka error code, or could not be reached, after the retries."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

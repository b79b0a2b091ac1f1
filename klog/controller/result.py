"""What a controller operation returns: the records to commit and the response to send once they are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from klog.metadata.records import MetadataRecord

__all__ = ["ControllerResult"]

R = TypeVar("R")


@dataclass(frozen=True)
class ControllerResult(Generic[R]):
    """``records`` are committed atomically (empty: nothing to commit, e.g. validate_only or every item failed);
    ``response`` holds per-item results, valid once the records are committed."""

    records: Sequence[MetadataRecord]
    response: R

    @property
    def has_records(self) -> bool:
        return bool(self.records)


def empty(response: R) -> ControllerResult[R]:
    return ControllerResult((), response)

"""The transaction coordinator (``coordinator.py``) and its ``__transaction_state`` records (``records.py``);
``operations.py``, what a partition leader's paths need of it. The coordinator's modules are imported when first
used (``lazy.py``), not by importing this package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

__all__ = ["TransactionCoordinator"]


def __getattr__(name: str) -> Any:
    if name == "TransactionCoordinator":
        from .coordinator import TransactionCoordinator

        return TransactionCoordinator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The transaction coordinator (``coordinator.py``) and its ``__transaction_state`` records (``records.py``)."""

from .coordinator import TransactionCoordinator

__all__ = ["TransactionCoordinator"]

"""Consumer-group coordinator (issue 5). The broker-facing contract lives in ``api.py``; the broker imports
``GroupCoordinator`` from this package."""

from .coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]

"""The broker's request table: every handler module, imported so that each registers its APIs."""

from __future__ import annotations

from klog.broker.handlers import (  # noqa: F401  (registration happens at import)
    REGISTRY,
    Handler,
    acls,
    admin,
    api_versions,
    cluster,
    configs,
    features,
    fetch,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer_ids,
    reassignments,
    sasl,
    scram,
    share,
    share_state,
    telemetry,
    tokens,
    transactions,
)

__all__ = ["load_all"]


def load_all() -> dict[int, Handler]:
    """Every registered handler by api key."""
    return REGISTRY

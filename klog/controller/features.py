"""UpdateFeatures decided as Kafka 4.3's ``FeatureControlManager.updateFeatures`` (pure: the committed image in, the
FeatureLevelRecords and the answer out).

Each update is checked in Kafka's order (upgrade type, negative level, upgrade vs downgrade, what this controller
and every registered broker support, kraft.version, metadata.version downgrades, dependencies); the first refused
one fails the whole request with INVALID_UPDATE_VERSION and Kafka's message, nothing written. A safe downgrade of
metadata.version is allowed only when no level in between changed the metadata format; unsafe metadata downgrades
are refused, as Kafka 4.3 refuses them. Other features go down with either downgrade type (level 0: not
finalized).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klog.metadata.features import (
    FEATURES,
    KRAFT_VERSION,
    METADATA_VERSION,
    metadata_changed_between,
    supported_features,
)
from klog.metadata.config import BrokerConfig
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .partition_change import ELR_FEATURE, MIN_INSYNC_REPLICAS, elr_safety_records
from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        ApiVersionsResponse,
        ApiVersionsResponseFinalizedFeatureKey,
        ApiVersionsResponseSupportedFeatureKey,
    )

__all__ = ["SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE", "UPGRADE", "FeatureUpdate", "FeatureUpdateError",
           "described_features", "finalized_levels", "kraft_version", "update_features"]

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int


@dataclass(frozen=True)
class FeatureUpdateError:
    """The refusal of a whole UpdateFeatures request (None: every update allowed)."""

    code: int
    message: str


def _invalid(name: str, level: int, why: str) -> FeatureUpdateError:
    return FeatureUpdateError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {name}. "
                                                                f"{why}")


def _range_refusal(who: str, ranges: Mapping[str, tuple[int, int]], name: str, level: int) -> str | None:
    supported = ranges.get(name)
    if supported is None:
        return None if level == 0 else f"{who} does not support this feature."
    lo, hi = supported
    return None if lo <= level <= hi or (level == 0 and name != METADATA_VERSION) else \
        f"{who} only supports versions {lo}-{hi}"


def finalized_levels(image: MetadataImage, kraft_version: int) -> dict[str, int]:
    """The finalized levels (kraft.version from the Raft log, the others from FeatureLevelRecords)."""
    levels = dict(image.features)
    levels[KRAFT_VERSION] = kraft_version
    return levels


def _check(update: FeatureUpdate, current: int, proposed: Mapping[str, int], node_id: int,
           image: MetadataImage) -> FeatureUpdateError | None:
    name, level = update.name, update.level
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    if level > current and update.upgrade_type != UPGRADE:
        return _invalid(name, level, "Can't downgrade to a newer version.")
    if level < current and update.upgrade_type == UPGRADE:
        return _invalid(name, level, "Can't downgrade the version of this feature without setting the upgrade type "
                                     "to either safe or unsafe downgrade.")
    local = {n: (lo, hi) for n, lo, hi in supported_features()}
    why = _range_refusal(f"Local controller {node_id}", local, name, level)
    for broker in sorted(image.brokers.values(), key=lambda b: b.id):
        if why is not None:
            break
        why = _range_refusal(f"Broker {broker.id}", {n: (lo, hi) for n, lo, hi in broker.supported_features},
                             name, level)
    if why is not None:
        return _invalid(name, level, why)
    if name == KRAFT_VERSION and level != current:
        if level < current:
            return _invalid(name, level, "Can't downgrade the version of this feature.")
        # KIP-853's upgrade of a static controller.quorum.voters quorum to a dynamic one is not in klog
        return _invalid(name, level, "klog does not upgrade a static controller quorum to kraft.version 1.")
    if name == METADATA_VERSION and level < current:
        if not metadata_changed_between(level, current):
            return None
        why = "Unsafe metadata downgrade is not supported in this version." \
            if update.upgrade_type == UNSAFE_DOWNGRADE else \
            "Refusing to perform the requested downgrade because it might delete metadata information."
        return FeatureUpdateError(ErrorCode.INVALID_UPDATE_VERSION,
                                  f"Unsupported metadata.version downgrade from {current} to {level}. {why}")
    feature = FEATURES.get(name)
    if feature is None:
        if name != METADATA_VERSION:   # level 0 of a feature no node knows (Kafka's Feature.featureFromName)
            return _invalid(name, level, f"Feature {name} not found.")
        return None
    for dependency, needed in feature.dependencies.get(level, {}).items():
        if proposed.get(dependency, 0) < needed:
            return _invalid(name, level, f"{name} could not be set to {level} because it depends on {dependency} "
                                         f"level {needed}")
    return None


def update_features(updates: Sequence[FeatureUpdate], image: MetadataImage, *, node_id: int, kraft_version: int,
                    validate_only: bool, static_min_insync_replicas: int = MIN_INSYNC_REPLICAS
                    ) -> ControllerResult[FeatureUpdateError | None]:
    """The FeatureLevelRecords of ``updates`` (none when ``validate_only`` or refused) and the refusal, if any.
    An update turning ELR on is preceded by Kafka's ELR safety config records (the cluster-level
    ``min.insync.replicas``, ``static_min_insync_replicas`` when there is none; no broker-level one)."""
    proposed = finalized_levels(image, kraft_version)
    records: list[MetadataRecord] = []
    for update in updates:
        current = proposed.get(update.name, 0)
        refusal = _check(update, current, proposed, node_id, image)
        if refusal is not None:
            return ControllerResult([], FeatureUpdateError(
                refusal.code, "The update failed for all features since the following feature had an error: "
                              f"{refusal.message}"))
        proposed[update.name] = update.level
        if update.name != KRAFT_VERSION and update.level != image.features.get(update.name, 0):
            records.append(record("FeatureLevelRecord", name=update.name, feature_level=update.level))
    if any(update.name == ELR_FEATURE and update.level > 0 for update in updates):
        records = [*elr_safety_records(image, static_min_insync_replicas), *records]
    return ControllerResult([] if validate_only else records, None)


def kraft_version(config: BrokerConfig) -> int:
    """kraft.version of the quorum a node with ``config`` belongs to: 1 for a formatted voter set
    (``controller.quorum.bootstrap.servers``, KIP-853), 0 for static ``controller.quorum.voters`` or a single
    voter."""
    return 1 if config["controller.quorum.bootstrap.servers"] and not config["controller.quorum.voters"] else 0


def described_features(image: MetadataImage, kraft: int, api_version: int) -> ApiVersionsResponse:
    """Kafka's DescribeFeatures answer, ApiVersions v3+'s feature fields: what this node supports (v3 leaves out
    features whose minimum is 0, which its readers cannot take) and the cluster's finalized levels (level 0: not
    finalized) as of the metadata image's offset, the finalized features' epoch."""
    supported: list[ApiVersionsResponseSupportedFeatureKey] = [
        {"name": name, "min_version": lo, "max_version": hi} for name, lo, hi in supported_features()
        if api_version >= 4 or lo >= 1]
    if image.metadata_version is None:   # nothing finalized yet
        return {"supported_features": supported, "finalized_features_epoch": -1, "finalized_features": []}
    finalized: list[ApiVersionsResponseFinalizedFeatureKey] = [
        {"name": name, "min_version_level": level, "max_version_level": level}
        for name, level in sorted(finalized_levels(image, kraft).items()) if level >= 1]
    return {"supported_features": supported, "finalized_features_epoch": image.highest_offset,
            "finalized_features": finalized}

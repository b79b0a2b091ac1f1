"""Kafka's feature versioning (KIP-584, KIP-1022) as Apache Kafka 4.3 defines it, for the levels klog implements
(pure: no IO).

A feature is finalized cluster-wide by a FeatureLevelRecord in the metadata log (level 0: not finalized);
``kraft.version`` lives in the Raft log's own KRaftVersion record instead (0: a static ``controller.quorum.voters``
quorum, 1: a formatted voter set). ApiVersions v3+ advertises what a node supports and what is finalized;
UpdateFeatures (:mod:`klog.controller.features`) changes the finalized levels; ``klog-broker format --feature`` /
``--release-version`` choose a new cluster's first ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .image import METADATA_VERSION_FEATURE

__all__ = [
    "ELR_VERSION",
    "FEATURES",
    "GROUP_VERSION",
    "KRAFT_VERSION",
    "LATEST_METADATA_VERSION",
    "METADATA_VERSION",
    "METADATA_VERSIONS",
    "MINIMUM_METADATA_VERSION",
    "MV_CORDONED_LOG_DIRS",
    "SHARE_VERSION",
    "STREAMS_VERSION",
    "TRANSACTION_VERSION",
    "Feature",
    "metadata_changed_between",
    "metadata_version_level",
    "metadata_version_name",
    "register_broker_record_version",
    "release_features",
    "supported_features",
]

METADATA_VERSION = METADATA_VERSION_FEATURE
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELR_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

#: Kafka's MetadataVersion: level -> (name, whether its metadata format changed: no downgrade across it)
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False), 28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
}
MINIMUM_METADATA_VERSION = 7
#: 4.3-IV0: KIP-1066's cordoned log dirs (heartbeats report them, broker registrations record them, RegisterBrokerRecord
#: v4; Kafka's ``MetadataVersion.isCordonedLogDirsSupported``)
MV_CORDONED_LOG_DIRS = 30
#: the highest metadata.version klog implements, Kafka 4.3's latest production one: 4.3-IV0
LATEST_METADATA_VERSION = 30


@dataclass(frozen=True)
class Feature:
    """A feature besides metadata.version: the levels klog implements (``max_level``; Kafka 4.3 may know more,
    ``kafka_max_level``), the metadata.version from which each level is a new cluster's default (``bootstrap``:
    level -> metadata.version) and the levels it needs of other features (``dependencies``: level -> {name:
    level})."""

    name: str
    max_level: int
    kafka_max_level: int
    bootstrap: Mapping[int, int]
    dependencies: Mapping[int, Mapping[str, int]]

    def default_level(self, metadata_version: int) -> int:
        """Kafka's ``Feature.defaultLevel``: the highest level whose bootstrap metadata.version is reached, within
        what klog implements."""
        levels = [lvl for lvl, mv in self.bootstrap.items() if mv <= metadata_version and lvl <= self.max_level]
        return max(levels, default=0)


#: Kafka 4.3's production features, in its order (Feature.PRODUCTION_FEATURES)
FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature(KRAFT_VERSION, 1, 1, {1: 21}, {}),
    # level 2: transaction protocol v2 (KIP-890 part 2: EndTxn v5, Produce v12+ and TxnOffsetCommit v5 add their
    # partitions to the transaction, the producer epoch bumps at every commit/abort); both levels from 4.0-IV2
    Feature(TRANSACTION_VERSION, 2, 2, {1: 24, 2: 24}, {}),
    Feature(GROUP_VERSION, 1, 1, {1: 22}, {}),
    Feature(ELR_VERSION, 1, 1, {1: 26}, {1: {METADATA_VERSION: 23}}),
    Feature(SHARE_VERSION, 1, 1, {1: 28}, {}),
    # streams groups (KIP-1071): level 1 from 4.2-IV1, so a new cluster finalizes it by default as Kafka 4.3 does
    Feature(STREAMS_VERSION, 1, 1, {1: 29}, {}),
)}


def metadata_version_name(level: int) -> str:
    name = METADATA_VERSIONS.get(level)
    return name[0] if name else str(level)


def metadata_version_level(text: str) -> int | None:
    """``4.2-IV1`` or a release (``4.2``: its last level, ``3.3``: 3.3-IV3) -> the level; None if unknown."""
    for level, (name, _) in sorted(METADATA_VERSIONS.items(), reverse=True):
        if name == text or name.split("-")[0] == text:
            return level
    return None


def metadata_changed_between(low: int, high: int) -> bool:
    """Whether a level in (low, high] changed the metadata format (a downgrade from high to low may lose
    metadata: Kafka's ``MetadataVersion.checkIfMetadataChanged``)."""
    return any(METADATA_VERSIONS.get(level, ("", True))[1] for level in range(low + 1, high + 1))


def register_broker_record_version(metadata_version: int) -> int:
    """The RegisterBrokerRecord version a controller writes at ``metadata_version`` (Kafka's
    ``MetadataVersion.registerBrokerRecordVersion``): 4 with cordoned log dirs (4.3-IV0), 3 with directory
    assignment (3.7-IV2), 2 with ZooKeeper migration (3.4-IV0), else 1."""
    if metadata_version >= MV_CORDONED_LOG_DIRS:
        return 4
    return 3 if metadata_version >= 17 else 2 if metadata_version >= 8 else 1


def supported_features() -> list[tuple[str, int, int]]:
    """(name, min, max) of every feature this node supports, as it registers and advertises them."""
    return [(METADATA_VERSION, MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION),
            *((f.name, 0, f.max_level) for f in FEATURES.values())]


def release_features(metadata_version: int) -> dict[str, int]:
    """A new cluster's feature levels at ``metadata_version`` (``kafka-storage format --release-version``'s
    defaults), kraft.version aside (the quorum's format decides it)."""
    return {METADATA_VERSION: metadata_version,
            **{f.name: f.default_level(metadata_version) for f in FEATURES.values() if f.name != KRAFT_VERSION}}

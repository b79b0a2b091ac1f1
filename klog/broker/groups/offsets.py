"""Committed offsets: the in-memory view of the offset-commit records in ``__consumer_offsets``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


def metadata_too_large(metadata: str, max_size: int) -> bool:
    """Kafka's isMetadataInvalid: a committed offset's metadata longer than ``offset.metadata.max.bytes`` counted as
    Java's ``String.length()`` does, in UTF-16 code units (a character outside the BMP counts two), not bytes."""
    return len(metadata.encode("utf-16-le")) // 2 > max_size


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None  # explicit retention (OffsetCommit v2-v4 retention_time_ms), else None

    def is_expired(self, now_ms: int, base_timestamp: int, retention_ms: int) -> bool:
        """Kafka's OffsetExpirationConditionImpl."""
        if self.expire_timestamp is not None:
            return now_ms >= self.expire_timestamp
        return now_ms - base_timestamp >= retention_ms


class OffsetStore:
    """group id -> (topic, partition) -> OffsetAndMetadata."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        topics = self._by_group.get(group)
        if topics is None:
            return None
        parts = topics.get(topic)
        return None if parts is None else parts.get(partition)

    def put(self, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self._by_group.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def delete(self, group: str, topic: str, partition: int) -> bool:
        topics = self._by_group.get(group)
        if topics is None:
            return False
        parts = topics.get(topic)
        if parts is None or partition not in parts:
            return False
        del parts[partition]
        if not parts:
            del topics[topic]
        if not topics:
            del self._by_group[group]
        return True

    def group_offsets(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self._by_group.get(group, {})

    def has_group(self, group: str) -> bool:
        return group in self._by_group

    def drop_group(self, group: str) -> list[tuple[str, int]]:
        topics = self._by_group.pop(group, {})
        return [(t, p) for t, parts in topics.items() for p in parts]

    def groups(self) -> Iterator[str]:
        return iter(list(self._by_group))

    def drop_topic_partitions(self, topic: str, partitions: set[int] | None = None) -> list[tuple[str, int]]:
        """Removes offsets of a deleted topic (all partitions when ``partitions`` is None); returns the
        (group, partition) pairs removed."""
        removed = []
        for group in list(self._by_group):
            parts = self._by_group[group].get(topic)
            if not parts:
                continue
            for p in list(parts):
                if partitions is None or p in partitions:
                    self.delete(group, topic, p)
                    removed.append((group, p))
        return removed

"""A local replica as replication's IO sees it: its native log (offsets live, epoch cache mirrored) and, when another
broker leads it, the follower state its fetcher drives. Shared by the replica manager and the replica fetchers,
which the replica manager makes (so neither imports the other's module to name these)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from .epochs import LeaderEpochCache
from .follower import FollowerPartition

__all__ = ["FollowedPartition", "Key", "NativeLogView", "monotonic_ms"]

Key = tuple[str, int]


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class NativeLogView:
    """What :class:`LeaderPartition` reads of the native log: offsets live, the epoch cache mirrored (the native
    log writes ``leader-epoch-checkpoint``; this copy answers the epoch questions without crossing the FFI)."""

    __slots__ = ("native", "epochs")

    def __init__(self, native: Any) -> None:
        self.native = native
        self.epochs = LeaderEpochCache(native.leader_epoch_entries())

    @property
    def log_start_offset(self) -> int:
        return int(self.native.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        return int(self.native.log_end_offset)

    def refresh_epochs(self) -> None:
        self.epochs = LeaderEpochCache(self.native.leader_epoch_entries())


@dataclass
class FollowedPartition:
    """A local partition another broker leads: what its fetcher needs."""

    key: Key
    topic_id: uuid.UUID
    log: NativeLogView
    state: FollowerPartition

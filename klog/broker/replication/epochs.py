"""The leader epoch cache: Kafka's ``LeaderEpochFileCache`` semantics over ``(epoch, start offset)`` entries.

The file itself (``leader-epoch-checkpoint``: ``0``, the entry count, then ``<epoch> <start offset>`` lines) is
read and written by the native storage (``rust/klog-core/src/storage/checkpoint.rs``; ``PartitionLog``'s
``leader_epoch_entries()`` / ``assign_epoch_start()``). This class is the pure model: build it with
``LeaderEpochCache(log.leader_epoch_entries())`` to answer OffsetsForLeaderEpoch and diverging-epoch questions,
and the simulation tests use it as the whole cache.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEndOffset", "LeaderEpochCache"]

#: Kafka's ``UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET`` (OffsetsForLeaderEpoch's "no answer").
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """OffsetsForLeaderEpoch's answer: the largest epoch <= the one asked about and where it ends."""

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.epoch == UNDEFINED_EPOCH or self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class LeaderEpochCache:
    """Entries strictly increasing in both epoch and start offset (Kafka's invariant, asserted)."""

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    def __len__(self) -> int:
        return len(self._epochs)

    def _check(self) -> None:
        assert all(a < b for a, b in zip(self._epochs, self._epochs[1:])), self._epochs
        assert all(a < b for a, b in zip(self._starts, self._starts[1:])), self._starts

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the batch at ``offset`` (the entry with the largest start offset <= it)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def first_start_after(self, epoch: int) -> int | None:
        """The start offset of the first entry with an epoch above ``epoch`` (None: there is none)."""
        i = bisect.bisect_right(self._epochs, epoch)
        return self._starts[i] if i < len(self._epochs) else None

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect.bisect_left(self._epochs, epoch)
        return self._starts[i] if i < len(self._epochs) and self._epochs[i] == epoch else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``assign``): a no-op when the latest entry is
        the same epoch at an earlier or equal offset; otherwise every entry with an epoch >= ``epoch`` or a start
        offset >= ``start_offset`` goes first (they are non-monotonic with the new one). True if it changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._check()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: drop entries that start at or after it."""
        if end_offset < 0:
            return
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: entries starting at or before it collapse into the last of
        them, moved to ``start_offset`` (Kafka's ``truncateFromStart``)."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0:
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i], self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._check()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's ``endOffsetFor``: the latest epoch ends at the log end; an older epoch ends where the next
        higher known epoch starts, answered with the largest known epoch <= the requested one (or the requested
        epoch itself when it is below every known one); an unknown newer epoch is UNDEFINED."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED
        if self._epochs[-1] == requested_epoch:
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED
        if higher == 0:
            return EpochEndOffset(requested_epoch, self._starts[0])
        return EpochEndOffset(self._epochs[higher - 1], self._starts[higher])

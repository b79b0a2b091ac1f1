"""A partition's follower side: Kafka's ``AbstractFetcherThread`` decisions for one partition, pure.

The fetcher (IO) asks :meth:`FollowerPartition.next_fetch` what to put in the Fetch request's partition entry,
sends it, and hands the partition's answer to :meth:`FollowerPartition.on_fetch_response` together with what it
knows of the local log (its end offset and epoch cache). The answer is an :class:`Action` for the fetcher to carry
out on the local log (append the records, truncate, truncate fully and restart at an offset, ask the leader for
its offsets, back off, or stop fetching until metadata changes), then it reports the new log end back through
the next call. As Kafka 4.x:

- Fetching sends ``fetch_offset`` = the local log end and ``last_fetched_epoch`` = the latest local epoch; a
  ``diverging_epoch`` answer truncates to min(its end offset, the local end of that epoch, the local log end),
  or, when the local cache does not know that epoch, to the end of the largest local epoch below it (then fetches
  again, which may diverge again). A leader without epoch support (old path): :meth:`on_epoch_end_offset` with
  the OffsetsForLeaderEpoch answer does the same truncation.
- OFFSET_OUT_OF_RANGE: ask the leader for its log start and end (ListOffsets as a replica); a leader end below the
  local end truncates to it (after an unclean election); a leader start past the local end restarts the local log
  empty at the leader's start; otherwise fetch again from the local end.
- OFFSET_OUT_OF_RANGE while the local log holds a leader epoch above the current leader's: no leader had that
  epoch (a follower takes batches of epochs up to its leader's only), so a batch header was damaged (its leader
  epoch is outside the CRC) and every leader would answer the same: truncate to where that epoch starts and fetch
  those batches again (otherwise the follower asks forever and never rejoins the ISR; found by the fault suite).
- FENCED_LEADER_EPOCH: our metadata is behind; stop fetching this partition until a new leader epoch arrives.
  NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION and others: back off
  ``replica.fetch.backoff.ms`` and retry.
- The follower's high watermark is min(leader HW, local log end) and never goes backwards; its log start offset
  follows the leader's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from klog.protocol.errors import ErrorCode

from .epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEndOffset, LeaderEpochCache

__all__ = ["REPLICA_FETCH_BACKOFF_MS", "Action", "ActionKind", "FetchPosition", "FollowerPartition", "FollowerState"]

#: ``replica.fetch.backoff.ms`` default.
REPLICA_FETCH_BACKOFF_MS = 1000


class FollowerState(enum.Enum):
    FETCHING = "fetching"
    TRUNCATING = "truncating"  # waiting for an OffsetsForLeaderEpoch answer (leaders without diverging epochs)
    LEADER_OFFSETS = "leader_offsets"  # waiting for the leader's log start/end after OFFSET_OUT_OF_RANGE
    FENCED = "fenced"  # stopped until metadata brings a newer leader epoch


class ActionKind(enum.Enum):
    APPEND = "append"  # append the response's records (as follower: offsets and epochs kept)
    # truncate the local log and its epoch cache to ``offset``; the cache even when ``offset`` is the log end, as
    # Kafka's truncateTo does (a leader that appended nothing in its epoch left an entry there)
    TRUNCATE = "truncate"
    TRUNCATE_FULLY = "truncate_fully"  # drop the local log, restart it empty at ``offset``
    LIST_LEADER_OFFSETS = "list_leader_offsets"  # ask the leader for its log start and end offsets
    OFFSETS_FOR_LEADER_EPOCH = "offsets_for_leader_epoch"  # ask the leader where ``epoch`` ends
    BACKOFF = "backoff"  # retry after ``until_ms``
    STOP = "stop"  # fenced: wait for metadata
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    offset: int = -1
    epoch: int = -1
    until_ms: int = 0


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """The Fetch request's partition entry."""

    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


class FollowerPartition:
    def __init__(self, leader_id: int, leader_epoch: int, *, high_watermark: int = 0,
                 use_diverging_epoch: bool = True, fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS) -> None:
        assert fetch_backoff_ms >= 0
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.high_watermark = high_watermark
        self.use_diverging_epoch = use_diverging_epoch  # Fetch v12+ at the leader (KIP-595)
        self.fetch_backoff_ms = fetch_backoff_ms
        self.state = FollowerState.FETCHING if use_diverging_epoch else FollowerState.TRUNCATING
        self.delayed_until_ms = 0

    def become_follower(self, leader_id: int, leader_epoch: int) -> None:
        """Metadata: a new leader or leader epoch. Without diverging epochs, truncate first via
        OffsetsForLeaderEpoch (Kafka's old path)."""
        if leader_epoch < self.leader_epoch:
            return
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.state = FollowerState.FETCHING if self.use_diverging_epoch else FollowerState.TRUNCATING
        self.delayed_until_ms = 0

    def next_request(self, log_start_offset: int, log_end_offset: int, epochs: LeaderEpochCache, now_ms: int
                     ) -> Action | FetchPosition:
        """What to send now: a fetch position, or an action (ask for an epoch's end, leader offsets, wait)."""
        if self.state is FollowerState.FENCED:
            return Action(ActionKind.STOP)
        if now_ms < self.delayed_until_ms:
            return Action(ActionKind.BACKOFF, until_ms=self.delayed_until_ms)
        latest = epochs.latest_epoch
        if self.state is FollowerState.TRUNCATING:
            if latest is None:
                self.state = FollowerState.FETCHING  # nothing local to check
            else:
                return Action(ActionKind.OFFSETS_FOR_LEADER_EPOCH, epoch=latest)
        if self.state is FollowerState.LEADER_OFFSETS:
            return Action(ActionKind.LIST_LEADER_OFFSETS)
        last_epoch = latest if (latest is not None and self.use_diverging_epoch) else UNDEFINED_EPOCH
        return FetchPosition(self.leader_epoch, log_end_offset, last_epoch, log_start_offset)

    # ---- answers ----------------------------------------------------------------------------------------------

    def on_fetch_response(self, error: int, *, high_watermark: int, log_start_offset: int,
                          diverging_epoch: EpochEndOffset | None, log_end_offset: int, epochs: LeaderEpochCache,
                          now_ms: int) -> Action:
        """The leader's answer for this partition. ``log_end_offset`` / ``epochs``: the local log as it was when
        the request was sent. For APPEND the caller appends, then calls :meth:`on_appended`."""
        if error == ErrorCode.NONE:
            if diverging_epoch is not None and diverging_epoch.epoch >= 0:
                return self._truncation(diverging_epoch, log_end_offset, epochs)
            return Action(ActionKind.APPEND, offset=log_end_offset)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self.state = FollowerState.LEADER_OFFSETS
            return Action(ActionKind.LIST_LEADER_OFFSETS)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            self.state = FollowerState.FENCED
            return Action(ActionKind.STOP)
        self.delayed_until_ms = now_ms + self.fetch_backoff_ms
        return Action(ActionKind.BACKOFF, until_ms=self.delayed_until_ms)

    def on_appended(self, leader_high_watermark: int, leader_log_start_offset: int, log_end_offset: int) -> int:
        """After appending: the follower HW = min(leader HW, local log end), never backwards. Returns the log
        start offset the local log should move up to (the leader's, DeleteRecords and retention replicated), never
        past the follower HW (Kafka refuses a log start beyond the high watermark)."""
        hw = min(leader_high_watermark, log_end_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw
        return min(leader_log_start_offset, self.high_watermark)

    def on_epoch_end_offset(self, error: int, answer: EpochEndOffset, log_end_offset: int,
                            epochs: LeaderEpochCache, now_ms: int) -> Action:
        """OffsetsForLeaderEpoch's answer for our latest epoch (old path)."""
        if error != ErrorCode.NONE:
            if error == ErrorCode.FENCED_LEADER_EPOCH:
                self.state = FollowerState.FENCED
                return Action(ActionKind.STOP)
            self.delayed_until_ms = now_ms + self.fetch_backoff_ms
            return Action(ActionKind.BACKOFF, until_ms=self.delayed_until_ms)
        if answer.end_offset == UNDEFINED_EPOCH_OFFSET:
            self.state = FollowerState.FETCHING
            return self._truncate(min(self.high_watermark, log_end_offset))
        action = self._truncation(answer, log_end_offset, epochs)
        return action

    def _truncation(self, leader: EpochEndOffset, log_end_offset: int, epochs: LeaderEpochCache) -> Action:
        """Kafka's ``getOffsetTruncationState``."""
        if leader.epoch == UNDEFINED_EPOCH:
            self.state = FollowerState.FETCHING
            return self._truncate(min(leader.end_offset, log_end_offset))
        local = epochs.end_offset_for(leader.epoch, log_end_offset)
        if local.undefined:
            # No local knowledge of that epoch or any earlier one: the leader's end offset is safe.
            self.state = FollowerState.FETCHING
            return self._truncate(min(leader.end_offset, log_end_offset))
        if local.epoch != leader.epoch:
            # We do not have the leader's epoch: cut at the end of our largest epoch below it, and ask again.
            if not self.use_diverging_epoch:
                self.state = FollowerState.TRUNCATING
            return self._truncate(min(local.end_offset, log_end_offset))
        self.state = FollowerState.FETCHING
        return self._truncate(min(local.end_offset, leader.end_offset, log_end_offset))

    def on_leader_offsets(self, leader_log_start_offset: int, leader_log_end_offset: int, log_end_offset: int,
                          epochs: LeaderEpochCache | None = None) -> Action:
        """The leader's log start and end after OFFSET_OUT_OF_RANGE (Kafka's ``fetchOffsetAndTruncate``); with the
        local ``epochs``, an epoch above the leader's is cut off (see the module's notes)."""
        self.state = FollowerState.FETCHING
        if leader_log_end_offset < log_end_offset:
            return self._truncate(leader_log_end_offset)
        if leader_log_start_offset > log_end_offset:
            self.high_watermark = max(self.high_watermark, leader_log_start_offset)
            return Action(ActionKind.TRUNCATE_FULLY, offset=leader_log_start_offset)
        latest = epochs.latest_epoch if epochs is not None else None
        if epochs is not None and latest is not None and latest > self.leader_epoch:
            # the leader answered OFFSET_OUT_OF_RANGE for a last fetched epoch no leader had: it would again
            start = epochs.first_start_after(self.leader_epoch)
            assert start is not None
            return self._truncate(start)
        return Action(ActionKind.NONE)

    def _truncate(self, offset: int) -> Action:
        """A truncation never leaves the HW past the log end (only an unclean election cuts below it)."""
        self.high_watermark = min(self.high_watermark, offset)
        return Action(ActionKind.TRUNCATE, offset=offset)

"""A partition's leader side: Kafka's ``Partition`` (leader paths) and the ``ReplicaManager`` decisions on it.

Pure: the caller passes ``now_ms``, reads and appends records itself, sends the AlterPartition requests this
returns and hands back the responses. What it decides, as Kafka 4.x does:

- **Follower fetch** (:meth:`LeaderPartition.follower_fetch`): the current leader epoch in the request must be
  ours (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH, -1 skips the check); the fetcher must be an
  assigned replica with a broker epoch no older than the one it fetched with before (else NOT_LEADER_OR_FOLLOWER);
  ``last_fetched_epoch`` is checked against the epoch cache (KIP-320/595): a follower whose last epoch ends
  earlier here, or is unknown here, gets ``diverging_epoch`` and no records, and its fetch state is not updated;
  an offset outside [log start, log end] is OFFSET_OUT_OF_RANGE. Otherwise its fetch state (LEO, last caught-up
  time) moves, which may expand the ISR and advance the high watermark.
- **High watermark** (strict min ISR, KIP-966): frozen while the committed ISR is smaller than the effective
  ``min.insync.replicas`` (capped at the replication factor); else the minimum LEO over the *maximal* ISR (the
  committed ISR plus a pending addition, KIP-497) and over caught-up, ISR-eligible followers about to join; it
  never goes backwards, and it only moves to an offset at or past the start of the current leader epoch
  (followers' LEOs are unknown after a leader change until they fetch in the new epoch, as Kafka resets them).
- **acks=all**: NOT_ENOUGH_REPLICAS before the append when the committed ISR is smaller than
  ``min.insync.replicas``; a pending produce completes once the HW reaches its last offset + 1, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR is under ``min.insync.replicas`` then (with the HW frozen
  under min ISR, a batch whose ISR shrank under it waits, as in Kafka 4.x), with REQUEST_TIMED_OUT at its
  deadline, NOT_LEADER_OR_FOLLOWER when leadership moves. DeleteRecords waits for :meth:`LeaderPartition.low_watermark`.
- **ISR**: a follower out of the ISR whose LEO reached the HW and the current epoch's start offset is proposed for
  addition; an ISR follower not at the log end and not caught up within ``replica.lag.time.max.ms`` is proposed for
  removal. One change is in flight at a time (KIP-497's pending state); the controller's answer commits it
  (partition epoch from the response), or: OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA revert to the committed
  ISR; FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, INVALID_REQUEST
  and NEW_LEADER_ELECTED keep the pending state until metadata brings the partition's new state; other errors
  (NOT_CONTROLLER, a lost request) are retried with the same proposal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from klog.protocol.errors import ErrorCode

from .epochs import EpochEndOffset, LeaderEpochCache

__all__ = [
    "MAX_PENDING_PRODUCES",
    "REPLICA_LAG_TIME_MAX_MS",
    "AlterPartitionOutcome",
    "FollowerFetchResult",
    "IsrProposal",
    "LeaderPartition",
    "ProduceCompletion",
    "ReplicaFetchState",
    "ReplicaLog",
    "check_leader_epoch",
]

#: ``replica.lag.time.max.ms`` default.
REPLICA_LAG_TIME_MAX_MS = 30000
#: Produce requests one partition may hold waiting for acks=all (the delayed-produce queue's bound); one more is
#: refused by :meth:`LeaderPartition.produce_appended` (the caller answers it REQUEST_TIMED_OUT-free with an error).
MAX_PENDING_PRODUCES = 10000
#: Kafka's "offset not known yet" for a follower's log end offset.
UNKNOWN_OFFSET = -1
NO_EPOCH = -1
#: "Never caught up" (Kafka's 0 on a wall clock; our clocks may start at 0).
NEVER_MS = -(2**62)


class ReplicaLog(Protocol):
    """What the leader reads of its own log."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def epochs(self) -> LeaderEpochCache: ...


def check_leader_epoch(requested: int, current: int) -> int:
    """Kafka's ``checkCurrentLeaderEpoch``: the error for a request's current leader epoch (NONE for -1)."""
    if requested == NO_EPOCH or requested == current:
        return int(ErrorCode.NONE)
    return int(ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH)


@dataclass(slots=True)
class ReplicaFetchState:
    """A follower as its leader sees it (Kafka's ``ReplicaState``)."""

    broker_id: int
    broker_epoch: int = -1
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = NEVER_MS

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """One AlterPartition partition entry the leader wants committed."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]  # per new_isr member, -1 where unknown (KIP-903)
    is_expand: bool

    def request_partition(self) -> dict[str, Any]:
        """The PartitionData of an AlterPartitionRequest (v3 form; v2 takes ``new_isr``)."""
        return {
            "partition_index": self.partition, "leader_epoch": self.leader_epoch,
            "new_isr": list(self.new_isr),
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e}
                                    for b, e in zip(self.new_isr, self.broker_epochs)],
            "leader_recovery_state": 0, "partition_epoch": self.partition_epoch,
        }


@dataclass(frozen=True, slots=True)
class ProduceCompletion:
    token: Any
    error: int


@dataclass(frozen=True, slots=True)
class FollowerFetchResult:
    error: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: EpochEndOffset | None = None
    #: True when the caller should read records from the fetch offset (no error, no divergence)
    read: bool = False
    completions: tuple[ProduceCompletion, ...] = ()
    proposal: IsrProposal | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    retry: bool  # send the same proposal again (after a backoff)
    completions: tuple[ProduceCompletion, ...] = ()


@dataclass(slots=True)
class _PendingProduce:
    token: Any
    required_offset: int
    deadline_ms: int


@dataclass(slots=True)
class _PendingIsr:
    proposal: IsrProposal
    retries: int = 0


@dataclass
class LeaderPartition:
    """The leader's state of one partition. ``log.epochs`` gets this epoch's start (the log end offset now), as
    Kafka's ``makeLeader`` does; the replica manager mirrors it into the native log (``assign_epoch_start``)."""

    broker_id: int
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    log: ReplicaLog
    high_watermark: int
    now_ms: int
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS
    max_pending_produces: int = MAX_PENDING_PRODUCES
    #: KIP-903 / Kafka's ``isReplicaIsrEligible``: (broker id, broker epoch it fetched with) -> may join the ISR
    #: (registered with that epoch, unfenced, not shutting down). The replica manager answers from the image.
    is_isr_eligible: Callable[[int, int], bool] = lambda broker_id, broker_epoch: True
    followers: dict[int, ReplicaFetchState] = field(init=False)
    leader_epoch_start_offset: int = field(init=False)
    _pending_isr: _PendingIsr | None = field(init=False, default=None)
    _produces: list[_PendingProduce] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        assert self.broker_id in self.replicas and self.broker_id in self.isr, (self.broker_id, self.replicas, self.isr)
        assert self.min_insync_replicas >= 1 and self.replica_lag_time_max_ms > 0
        self.followers = {}
        self._become_leader(self.now_ms)

    def _become_leader(self, now_ms: int) -> None:
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.epochs.assign(self.leader_epoch, self.leader_epoch_start_offset)
        # Kafka resets every follower: LEO unknown; ISR members count as caught up now (no instant shrink).
        old = self.followers
        self.followers = {r: ReplicaFetchState(r, broker_epoch=old[r].broker_epoch if r in old else -1,
                                               last_caught_up_time_ms=now_ms if r in self.isr else NEVER_MS)
                          for r in self.replicas if r != self.broker_id}
        self._pending_isr = None
        self.high_watermark = max(self.high_watermark, self.log.log_start_offset)

    # ---- views ----------------------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the HW and acks=all go by: the committed one plus a pending addition (KIP-497)."""
        if self._pending_isr is None:
            return self.isr
        extra = tuple(r for r in self._pending_isr.proposal.new_isr if r not in self.isr)
        return self.isr + extra

    @property
    def pending_isr(self) -> IsrProposal | None:
        return self._pending_isr.proposal if self._pending_isr is not None else None

    @property
    def pending_produces(self) -> int:
        return len(self._produces)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` has something to do at the latest (a produce deadline or a lag check)."""
        candidates = [p.deadline_ms for p in self._produces]
        for r in self.isr:
            if r != self.broker_id:
                candidates.append(self.followers[r].last_caught_up_time_ms + self.replica_lag_time_max_ms + 1)
        return min(candidates) if candidates else None

    # ---- follower fetch -------------------------------------------------------------------------------------

    def follower_fetch(self, replica_id: int, broker_epoch: int, current_leader_epoch: int, fetch_offset: int,
                       last_fetched_epoch: int, follower_log_start_offset: int, now_ms: int) -> FollowerFetchResult:
        def fail(code: Any) -> FollowerFetchResult:
            return FollowerFetchResult(int(code), self.high_watermark, self.log.log_start_offset)

        err = check_leader_epoch(current_leader_epoch, self.leader_epoch)
        if err:
            return fail(err)
        state = self.followers.get(replica_id)
        if state is None:
            return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if last_fetched_epoch != NO_EPOCH:
            end = self.log.epochs.end_offset_for(last_fetched_epoch, self.log.log_end_offset)
            if end.undefined or fetch_offset < self.log.log_start_offset:
                return fail(ErrorCode.OFFSET_OUT_OF_RANGE)
            if end.epoch < last_fetched_epoch or end.end_offset < fetch_offset:
                return FollowerFetchResult(int(ErrorCode.NONE), self.high_watermark, self.log.log_start_offset,
                                           diverging_epoch=end)
        if not self.log.log_start_offset <= fetch_offset <= self.log.log_end_offset:
            return fail(ErrorCode.OFFSET_OUT_OF_RANGE)
        if broker_epoch != -1 and state.broker_epoch > broker_epoch:
            return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # a stale incarnation of that broker
        self._update_fetch_state(state, broker_epoch, fetch_offset, follower_log_start_offset, now_ms)
        proposal = self._maybe_expand_isr(state)
        completions = self._maybe_advance_hw(now_ms)
        return FollowerFetchResult(int(ErrorCode.NONE), self.high_watermark, self.log.log_start_offset, read=True,
                                   completions=completions, proposal=proposal)

    def _update_fetch_state(self, s: ReplicaFetchState, broker_epoch: int, fetch_offset: int, log_start: int,
                            now_ms: int) -> None:
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            s.last_caught_up_time_ms = max(s.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= s.last_fetch_leader_log_end_offset:
            s.last_caught_up_time_ms = max(s.last_caught_up_time_ms, s.last_fetch_time_ms)
        s.log_end_offset = fetch_offset
        s.log_start_offset = log_start
        s.last_fetch_leader_log_end_offset = leader_end
        s.last_fetch_time_ms = now_ms
        if broker_epoch != -1:
            s.broker_epoch = broker_epoch

    def _in_sync(self, s: ReplicaFetchState) -> bool:
        return s.log_end_offset >= self.high_watermark and s.log_end_offset >= self.leader_epoch_start_offset

    def _maybe_expand_isr(self, s: ReplicaFetchState) -> IsrProposal | None:
        if self._pending_isr is not None or s.broker_id in self.isr:
            return None
        if not (self._in_sync(s) and self.is_isr_eligible(s.broker_id, s.broker_epoch)):
            return None
        return self._propose(self.isr + (s.broker_id,), is_expand=True)

    def _propose(self, new_isr: tuple[int, ...], *, is_expand: bool) -> IsrProposal:
        assert self._pending_isr is None and self.broker_id in new_isr
        epochs = tuple(-1 if r == self.broker_id else self.followers[r].broker_epoch for r in new_isr)
        proposal = IsrProposal(self.topic_id, self.partition, self.leader_epoch, self.partition_epoch, new_isr, epochs,
                               is_expand)
        self._pending_isr = _PendingIsr(proposal)
        return proposal

    # ---- high watermark and acks=all ------------------------------------------------------------------------

    @property
    def effective_min_isr(self) -> int:
        """Kafka's ``effectiveMinIsr``: ``min.insync.replicas`` capped at the replication factor."""
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    def _maybe_advance_hw(self, now_ms: int) -> tuple[ProduceCompletion, ...]:
        if self.under_min_isr:
            # strict min ISR (KIP-966): the HW stays while the committed ISR is under min.insync.replicas, so the
            # replicas that left it (the controller's eligible leader replicas) hold every record below it
            return ()
        leader_end = self.log.log_end_offset
        candidate = leader_end
        maximal = self.maximal_isr
        for r, s in self.followers.items():
            joining = (s.is_caught_up(leader_end, now_ms, self.replica_lag_time_max_ms)
                       and self.is_isr_eligible(r, s.broker_epoch))
            if s.log_end_offset < candidate and (r in maximal or joining):
                candidate = s.log_end_offset
        if candidate > self.high_watermark and candidate >= self.leader_epoch_start_offset:
            assert candidate <= leader_end, (candidate, leader_end)
            self.high_watermark = candidate
        return self._complete_produces()

    def _complete_produces(self) -> tuple[ProduceCompletion, ...]:
        done = [p for p in self._produces if p.required_offset <= self.high_watermark]
        if not done:
            return ()
        self._produces = [p for p in self._produces if p.required_offset > self.high_watermark]
        enough = len(self.maximal_isr) >= self.effective_min_isr
        code = int(ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return tuple(ProduceCompletion(p.token, code) for p in done)

    def low_watermark(self, is_alive: Callable[[int], bool]) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the lowest log start offset over this log and the followers on live
        brokers (as they reported it in their fetches; UNKNOWN_OFFSET until one has fetched). DeleteRecords waits
        for it to reach the offset asked for, so every live replica has moved its log start too."""
        low = self.log.log_start_offset
        for r, s in self.followers.items():
            if is_alive(r) and s.log_start_offset < low:
                low = s.log_start_offset
        return low

    def check_append(self, acks: int) -> int:
        """Before appending a produce: NOT_ENOUGH_REPLICAS for acks=all with the committed ISR under
        ``min.insync.replicas``, else NONE."""
        if acks == -1 and self.under_min_isr:
            return int(ErrorCode.NOT_ENOUGH_REPLICAS)
        return int(ErrorCode.NONE)

    def produce_appended(self, token: Any, last_offset: int, deadline_ms: int, now_ms: int
                         ) -> tuple[ProduceCompletion, ...] | None:
        """An acks=all batch ending at ``last_offset`` is in the leader's log: it waits for the HW. Returns the
        produces that complete now (this one included when the ISR is only the leader), or None when the queue is
        full (``max_pending_produces``; the caller answers that produce itself)."""
        assert last_offset < self.log.log_end_offset, (last_offset, self.log.log_end_offset)
        if len(self._produces) >= self.max_pending_produces:
            return None
        self._produces.append(_PendingProduce(token, last_offset + 1, deadline_ms))
        return self._maybe_advance_hw(now_ms)

    def leader_appended(self, now_ms: int) -> tuple[ProduceCompletion, ...]:
        """The leader's log end moved (acks=0/1 appends): the HW may move when the ISR is only the leader."""
        return self._maybe_advance_hw(now_ms)

    def tick(self, now_ms: int) -> tuple[tuple[ProduceCompletion, ...], IsrProposal | None]:
        """Expire produces past their deadline (REQUEST_TIMED_OUT) and propose an ISR shrink of the followers
        that lagged more than ``replica.lag.time.max.ms`` (Kafka's ``maybeShrinkIsr``)."""
        expired = [p for p in self._produces if p.deadline_ms <= now_ms]
        if expired:
            self._produces = [p for p in self._produces if p.deadline_ms > now_ms]
        out = tuple(ProduceCompletion(p.token, int(ErrorCode.REQUEST_TIMED_OUT)) for p in expired)
        proposal = None
        if self._pending_isr is None:
            leader_end = self.log.log_end_offset
            lagging = {r for r in self.isr if r != self.broker_id
                       and self.followers[r].log_end_offset != leader_end
                       and now_ms - self.followers[r].last_caught_up_time_ms > self.replica_lag_time_max_ms}
            if lagging:
                proposal = self._propose(tuple(r for r in self.isr if r not in lagging), is_expand=False)
        return out, proposal

    # ---- AlterPartition answers and metadata ------------------------------------------------------------------

    def on_alter_partition_response(self, proposal: IsrProposal, error: int, partition: Any | None, now_ms: int
                                    ) -> AlterPartitionOutcome:
        """``partition``: the response's PartitionData (leader_id, leader_epoch, isr, partition_epoch) when
        ``error`` is NONE. A response to a proposal no longer pending is ignored."""
        if self._pending_isr is None or self._pending_isr.proposal is not proposal:
            return AlterPartitionOutcome(retry=False)
        if error == ErrorCode.NONE:
            assert partition is not None
            if partition.leader_epoch != self.leader_epoch or partition.partition_epoch < self.partition_epoch:
                return AlterPartitionOutcome(retry=False)  # metadata will bring the newer state
            self.isr = tuple(partition.isr)
            self.partition_epoch = partition.partition_epoch
            self._pending_isr = None
            assert self.broker_id in self.isr
            return AlterPartitionOutcome(retry=False, completions=self._maybe_advance_hw(now_ms))
        if error in (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA):
            self._pending_isr = None
            return AlterPartitionOutcome(retry=False)
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INVALID_REQUEST,
                     ErrorCode.NEW_LEADER_ELECTED):
            return AlterPartitionOutcome(retry=False)  # stays pending until metadata says what happened
        self._pending_isr.retries += 1
        return AlterPartitionOutcome(retry=True)

    def on_metadata(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: Iterable[int],
                    isr: Iterable[int], now_ms: int) -> tuple[bool, tuple[ProduceCompletion, ...]]:
        """The partition's registration from metadata. Returns (still leader, completions): losing leadership
        answers every waiting produce NOT_LEADER_OR_FOLLOWER; a new leader epoch restarts the leader state."""
        if partition_epoch < self.partition_epoch or leader_epoch < self.leader_epoch:
            return True, ()
        if partition_epoch == self.partition_epoch and leader_epoch == self.leader_epoch:
            # Nothing newer than what this leader holds (e.g. the record of a change whose answer came first):
            # an ISR change proposed since stays pending, so the HW keeps counting a member it may add.
            return True, ()
        if leader != self.broker_id:
            return False, self.resign()
        new_epoch = leader_epoch > self.leader_epoch
        self.replicas, self.isr = tuple(replicas), tuple(isr)
        self.leader_epoch, self.partition_epoch = leader_epoch, partition_epoch
        if new_epoch:
            self._become_leader(now_ms)
        else:
            self._pending_isr = None
            for r in self.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = ReplicaFetchState(r)
            self.followers = {r: s for r, s in self.followers.items() if r in self.replicas}
        return True, self._maybe_advance_hw(now_ms)

    def leave_alone(self) -> tuple[ProduceCompletion, ...]:
        """A reassignment left this broker the partition's only replica, its ISR alone: the high watermark goes to
        the log end, so every produce waiting for the followers is committed. As Kafka, they succeed (answered
        NOT_LEADER_OR_FOLLOWER, a producer would resend batches the log keeps: duplicates)."""
        end = self.log.log_end_offset
        out = tuple(ProduceCompletion(p.token, int(ErrorCode.NONE if p.required_offset <= end
                                                   else ErrorCode.NOT_LEADER_OR_FOLLOWER)) for p in self._produces)
        self._produces = []
        self._pending_isr = None
        return out

    def resign(self) -> tuple[ProduceCompletion, ...]:
        out = tuple(ProduceCompletion(p.token, int(ErrorCode.NOT_LEADER_OR_FOLLOWER)) for p in self._produces)
        self._produces = []
        self._pending_isr = None
        return out

    # ---- OffsetsForLeaderEpoch ------------------------------------------------------------------------------

    def offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, EpochEndOffset]:
        """OffsetsForLeaderEpoch on the leader: (error, (epoch, end offset))."""
        err = check_leader_epoch(current_leader_epoch, self.leader_epoch)
        if err:
            return err, EpochEndOffset(-1, -1)
        return int(ErrorCode.NONE), self.log.epochs.end_offset_for(leader_epoch, self.log.log_end_offset)

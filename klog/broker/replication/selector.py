"""Fetch from the closest replica (KIP-392): which replica a consumer should read a partition from, pure.

The leader decides, for a consumer's Fetch (v11+, which carries the client's ``rack_id``), when the broker sets
``replica.selector.class``; without it every consumer reads from the leader (Kafka's default). Kafka's
``ReplicaManager.findPreferredReadReplica`` and ``RackAwareReplicaSelector``:

- the candidates are the leader and the in-sync followers whose log holds the fetch offset (log start <= offset
  <= log end): a follower out of the ISR may lag for good, so it is never chosen;
- a client without a rack reads from the leader; so does one whose rack holds no candidate, or holds the leader;
- otherwise the most caught-up candidate of its rack: the highest log end offset, then the most recently caught
  up;
- the leader is never named in the answer (``preferred_read_replica`` -1: read here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from klog.metadata.config import RACK_AWARE_REPLICA_SELECTOR, REPLICA_SELECTORS

__all__ = ["NO_PREFERRED_REPLICA", "RACK_AWARE_REPLICA_SELECTOR", "REPLICA_SELECTORS", "ReplicaView",
           "preferred_read_replica", "select_rack_aware"]

#: ``preferred_read_replica`` when the consumer should keep reading from the broker it asked
NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A replica as the selector sees it (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_rack_aware(client_rack: str | None, leader: ReplicaView, candidates: Iterable[ReplicaView]
                      ) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector.select``: the leader unless the client's rack holds other candidates
    and not the leader; then the most caught-up of those."""
    if not client_rack:
        return leader
    same_rack = [r for r in candidates if r.rack == client_rack]
    if not same_rack or any(r.broker_id == leader.broker_id for r in same_rack):
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms, -r.broker_id))


def preferred_read_replica(client_rack: str | None, fetch_offset: int, leader: ReplicaView,
                           followers: Iterable[tuple[ReplicaView, int]], isr: Iterable[int],
                           racks: Mapping[int, str | None]) -> int:
    """The broker a consumer at ``fetch_offset`` should fetch from instead of the leader, or -1 (the leader).

    ``followers``: (view, log start offset) of each follower as the leader tracks it; ``racks``: the rack of each
    live broker (a broker missing there is fenced or unregistered, and has no endpoint to name)."""
    in_sync = set(isr)
    candidates = [leader]
    for view, log_start_offset in followers:
        if view.broker_id in in_sync and view.broker_id in racks \
                and log_start_offset <= fetch_offset <= view.log_end_offset:
            candidates.append(view)
    chosen = select_rack_aware(client_rack, leader, candidates)
    return NO_PREFERRED_REPLICA if chosen.broker_id == leader.broker_id else chosen.broker_id

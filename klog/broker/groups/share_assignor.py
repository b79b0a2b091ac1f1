"""Kafka's share-group ``simple`` assignor (``org.apache.kafka.coordinator.group.assignor.SimpleAssignor``, 4.3).

A pure function of the members' subscriptions, the topics' partition counts and the previous target assignment.
Kafka's rules (its ``SimpleHomogeneousAssignmentBuilder`` and ``SimpleHeterogeneousAssignmentBuilder``):

* balance first: with fewer members than partitions each partition goes to one member and the members' counts
  differ by at most one; with more members than partitions each partition is shared by
  ``ceil(members / partitions)`` members (the *desired sharing*) and a member's desired count is its share of
  ``sharing * partitions`` spread as evenly as the members' order allows;
* stickiness second: a member keeps the partitions it had at the previous epoch unless it no longer subscribes to
  their topic, holds more than its desired count, or a partition is shared by more members than desired; the
  partitions left over go round-robin to the members below their desired count;
* when all members subscribe to the same topics (homogeneous) the balance is over all the topics' partitions
  together; otherwise (heterogeneous) each topic is balanced among its own subscribers, in turn.

Kafka iterates Java hash sets; klog iterates in a fixed order (members as given, topics by id, partitions by
index), so its choice among equally balanced assignments can differ from Kafka's, never its shape. Kafka also
leaves out partitions whose share state is still initializing; klog initializes a share-partition as it assigns it,
so every partition is assignable.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence

#: topic id -> partitions
Assignment = dict[uuid.UUID, list[int]]
_TP = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, set[uuid.UUID]], partition_counts: Mapping[uuid.UUID, int],
           previous: Mapping[str, Mapping[uuid.UUID, Sequence[int]]]) -> dict[str, Assignment]:
    """The target assignment of every member (``subscriptions``: member id -> the ids of the topics it subscribes
    to, in the members' order; ``partition_counts``: topic id -> partitions, topics missing are not assignable;
    ``previous``: member id -> its assignment at the previous epoch)."""
    subs = {m: {t for t in ts if partition_counts.get(t, 0) > 0} for m, ts in subscriptions.items()}
    # a member keeps, to start with, its previous partitions of the topics it still subscribes to
    cur: dict[str, dict[uuid.UUID, set[int]]] = {
        m: {t: {p for p in ps if 0 <= p < partition_counts[t]} for t, ps in previous.get(m, {}).items() if t in ts}
        for m, ts in subs.items()}
    members = list(subs)
    if len({frozenset(ts) for ts in subs.values()}) <= 1:   # homogeneous (or no members)
        topics = sorted(subs[members[0]], key=str) if members else []
        _balance([(t, p) for t in topics for p in range(partition_counts[t])], members, cur)
    else:
        for t in sorted({t for ts in subs.values() for t in ts}, key=str):
            _balance([(t, p) for p in range(partition_counts[t])], [m for m in members if t in subs[m]], cur)
    return {m: {t: sorted(ps) for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps}
            for m, a in cur.items()}


def desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """The desired sharing of each partition and the desired partition count of each member, as Kafka's
    builders compute them (in doubles, as Java does)."""
    if partitions == 0 or members == 0:
        return 0, [0] * members
    sharing = (members + partitions - 1) // partitions
    precise = sharing * partitions / members
    return sharing, [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(members)]


def _balance(targets: list[_TP], members: list[str], cur: dict[str, dict[uuid.UUID, set[int]]]) -> None:
    """One builder pass over ``targets`` (all partitions of the subscribed topics, or of one topic) among its
    ``members``, updating ``cur`` in place."""
    if not targets or not members:
        return
    sharing, wanted = desired_counts(len(members), len(targets))
    desired = dict(zip(members, wanted))
    in_scope = set(targets)
    # 1. the previous assignment, within the subscriptions (revokeUnassignablePartitions)
    by_part: dict[_TP, list[str]] = {tp: [] for tp in targets}
    by_member: dict[str, list[_TP]] = {m: [] for m in members}
    for m in members:
        for t, ps in cur[m].items():
            for p in sorted(ps):
                if (t, p) in in_scope:
                    by_part[(t, p)].append(m)
                    by_member[m].append((t, p))
    # 2. members over their desired count give partitions up (revokeOverfilledMembers)
    for m in members:
        while len(by_member[m]) > desired[m]:
            t, p = by_member[m].pop()
            cur[m][t].discard(p)
            by_part[(t, p)].remove(m)
    # 3. partitions shared by more members than desired lose some (revokeOversharedPartitions)
    for tp, holders in by_part.items():
        while len(holders) > sharing:
            m = holders.pop()
            cur[m][tp[0]].discard(tp[1])
            by_member[m].remove(tp)
    # 4. partitions short of their sharing go round-robin to the members short of their count
    #    (assignRemainingPartitions: one pass over the partitions, cycling over the unfilled members)
    unfilled = [m for m in members if len(by_member[m]) < desired[m]]
    pos, assigned_this_round = 0, False
    for tp, holders in by_part.items():
        need = sharing - len(holders)
        while need > 0 and unfilled:
            if pos >= len(unfilled):
                if not assigned_this_round:
                    break   # no unfilled member can take it (each already has it): a slight imbalance, as Kafka
                pos, assigned_this_round = 0, False
            m = unfilled[pos]
            if m in holders:
                pos += 1
                continue
            cur[m].setdefault(tp[0], set()).add(tp[1])
            by_member[m].append(tp)
            holders.append(m)
            need -= 1
            assigned_this_round = True
            if len(by_member[m]) >= desired[m]:
                unfilled.pop(pos)
            else:
                pos += 1
        if not unfilled:
            break

"""Client-side partition assignors of the classic group protocol (run by the group leader).

Names and behaviour follow Kafka's Java assignors, so klog consumers can share a group with Java, librdkafka
and kafka-python consumers: ``range`` (per topic, contiguous ranges), ``roundrobin`` (all partitions dealt in
turn), ``sticky`` and ``cooperative-sticky`` (balanced, keeping each member's partitions where possible; the
cooperative variant never moves a partition directly from one member to another in one rebalance: the owner
gives it up first and a follow-up rebalance hands it out, KIP-429).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .consumer_protocol import Subscription

__all__ = ["MemberSubscription", "ASSIGNORS", "assign", "EAGER", "COOPERATIVE", "rebalance_protocol"]

EAGER = "eager"
COOPERATIVE = "cooperative"


@dataclass
class MemberSubscription:
    member_id: str
    group_instance_id: str | None
    subscription: Subscription


Assignments = dict[str, dict[str, list[int]]]


def _member_order(members: list[MemberSubscription]) -> list[MemberSubscription]:
    # Java sorts by group.instance.id when present (static members), else by member id.
    return sorted(members, key=lambda m: (m.group_instance_id is None, m.group_instance_id or "", m.member_id))


def assign_range(members: list[MemberSubscription], partitions: dict[str, int]) -> Assignments:
    out: Assignments = {m.member_id: {} for m in members}
    by_topic: dict[str, list[MemberSubscription]] = defaultdict(list)
    for m in _member_order(members):
        for t in m.subscription.topics:
            if t in partitions:
                by_topic[t].append(m)
    for topic, subs in by_topic.items():
        n = partitions[topic]
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            if count:
                out[m.member_id][topic] = list(range(start, start + count))
            start += count
    return out


def assign_roundrobin(members: list[MemberSubscription], partitions: dict[str, int]) -> Assignments:
    out: Assignments = {m.member_id: {} for m in members}
    ordered = _member_order(members)
    all_tps = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    i = 0
    for t, p in all_tps:
        subscribed = [m for m in ordered if t in m.subscription.topics]
        if not subscribed:
            continue
        # Advance the circular iterator to the next member subscribed to this topic.
        for _ in range(len(ordered)):
            m = ordered[i % len(ordered)]
            i += 1
            if t in m.subscription.topics:
                out[m.member_id].setdefault(t, []).append(p)
                break
    return out


def assign_sticky(members: list[MemberSubscription], partitions: dict[str, int], *,
                  cooperative: bool) -> Assignments:
    """Balanced and sticky: members keep what they own (when still valid), surplus moves to members below
    their quota. With ``cooperative``, partitions taken from a previous owner are withheld this round."""
    ordered = _member_order(members)
    subs = {m.member_id: set(m.subscription.topics) for m in ordered}
    valid = {(t, p) for t in partitions for p in range(partitions[t]) if any(t in s for s in subs.values())}
    # Current ownership: the claim with the highest generation wins a conflict.
    owner: dict[tuple[str, int], tuple[int, str]] = {}
    for m in ordered:
        gen = m.subscription.generation_id
        for t, ps in m.subscription.owned_partitions.items():
            if t not in subs[m.member_id]:
                continue
            for p in ps:
                tp = (t, p)
                if tp not in valid:
                    continue
                prev = owner.get(tp)
                if prev is None or gen > prev[0]:
                    owner[tp] = (gen, m.member_id)
    current: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in ordered}
    for tp, (_gen, mid) in sorted(owner.items()):
        current[mid].append(tp)
    # Quotas: the members eligible for the most partitions are balanced by count.
    total = len(valid)
    n = len(ordered)
    base, extra = divmod(total, n) if n else (0, 0)
    # Members that keep more than their quota give up the surplus (highest partitions first).
    unassigned = sorted(valid - set(owner))
    quota_slots = extra
    result: dict[str, list[tuple[str, int]]] = {}
    for m in sorted(ordered, key=lambda m: -len(current[m.member_id])):
        mine = sorted(current[m.member_id])
        limit = base
        if quota_slots > 0 and len(mine) > base:
            limit = base + 1
            quota_slots -= 1
        keep, give = mine[:limit], mine[limit:]
        result[m.member_id] = keep
        unassigned.extend(give)
    unassigned.sort()
    # Hand out the rest to the least loaded members subscribed to the topic.
    for tp in unassigned:
        candidates = [m.member_id for m in ordered if tp[0] in subs[m.member_id]]
        if not candidates:
            continue
        target = min(candidates, key=lambda mid: (len(result[mid]), mid))
        result[target].append(tp)
    if cooperative:
        # A partition moving between members is withheld now; its owner revokes it and rejoins (KIP-429).
        for mid, tps in result.items():
            result[mid] = [tp for tp in tps if tp not in owner or owner[tp][1] == mid]
    out: Assignments = {}
    for mid, tps in result.items():
        d: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            d.setdefault(t, []).append(p)
        out[mid] = d
    for m in ordered:
        out.setdefault(m.member_id, {})
    return out


ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


def rebalance_protocol(name: str) -> str:
    return COOPERATIVE if name == "cooperative-sticky" else EAGER


def assign(name: str, members: list[MemberSubscription], partitions: dict[str, int]) -> Assignments:
    """Run assignor ``name`` over the members' subscriptions; ``partitions`` maps topic -> partition count."""
    if name == "range":
        return assign_range(members, partitions)
    if name == "roundrobin":
        return assign_roundrobin(members, partitions)
    if name == "sticky":
        return assign_sticky(members, partitions, cooperative=False)
    if name == "cooperative-sticky":
        return assign_sticky(members, partitions, cooperative=True)
    raise ValueError(f"unknown partition assignor {name!r}; use one of {', '.join(ASSIGNORS)}")

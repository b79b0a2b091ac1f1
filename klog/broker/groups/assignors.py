"""Server-side assignors of the consumer protocol (KIP-848): ``uniform`` (balanced and sticky) and ``range``.

An assignor maps every member to a target assignment ``{topic_id: {partition, ...}}`` from the members'
subscribed topic ids, their current target assignment (for stickiness) and the partition count of each topic.
Deterministic: the same input gives the same output, so a restarted coordinator computes the same target.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, set[int]]  # the member's current target assignment
    instance_id: str | None = None


class AssignorError(Exception):
    pass


def _order_key(topic_names: Mapping[uuid.UUID, str]):
    return lambda tid: (topic_names.get(tid, ""), str(tid))


class UniformAssignor:
    """Spreads all subscribed partitions evenly over the members, keeping each member's current partitions
    where its share allows (Kafka's ``uniform``)."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int],
               topic_names: Mapping[uuid.UUID, str]) -> dict[str, Assignment]:
        if not members:
            return {}
        subs = {m.subscribed for m in members.values()}
        if len(subs) == 1:
            return self._homogeneous(members, next(iter(subs)), partitions, topic_names)
        return self._heterogeneous(members, partitions, topic_names)

    def _homogeneous(self, members: Mapping[str, MemberSpec], topics: frozenset[uuid.UUID],
                     partitions: Mapping[uuid.UUID, int], topic_names: Mapping[uuid.UUID, str]
                     ) -> dict[str, Assignment]:
        order = sorted(members)
        all_parts = [(t, p) for t in sorted((t for t in topics if t in partitions), key=_order_key(topic_names))
                     for p in range(partitions[t])]
        n, m = len(all_parts), len(order)
        base, extra = divmod(n, m)
        valid: dict[str, list[tuple[uuid.UUID, int]]] = {}
        claimed: set[tuple[uuid.UUID, int]] = set()
        for mid in order:
            keep = []
            for t in sorted(members[mid].current, key=_order_key(topic_names)):
                if t not in topics or t not in partitions:
                    continue
                for p in sorted(members[mid].current[t]):
                    if p < partitions[t] and (t, p) not in claimed:
                        claimed.add((t, p))
                        keep.append((t, p))
            valid[mid] = keep
        # Members holding the most current partitions get the extra slots: fewer partitions move.
        by_holdings = sorted(order, key=lambda mid: (-len(valid[mid]), mid))
        quota = {mid: base + (1 if i < extra else 0) for i, mid in enumerate(by_holdings)}
        result: dict[str, Assignment] = {mid: {} for mid in order}
        assigned: set[tuple[uuid.UUID, int]] = set()
        for mid in order:
            for t, p in valid[mid][:quota[mid]]:
                result[mid].setdefault(t, set()).add(p)
                assigned.add((t, p))
            quota[mid] -= min(quota[mid], len(valid[mid]))
        free = iter(tp for tp in all_parts if tp not in assigned)
        for mid in order:
            for _ in range(quota[mid]):
                t, p = next(free)
                result[mid].setdefault(t, set()).add(p)
        return result

    def _heterogeneous(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int],
                       topic_names: Mapping[uuid.UUID, str]) -> dict[str, Assignment]:
        order = sorted(members)
        owner: dict[tuple[uuid.UUID, int], str] = {}
        count = {mid: 0 for mid in order}
        for mid in order:
            spec = members[mid]
            for t, ps in spec.current.items():
                if t not in spec.subscribed or t not in partitions:
                    continue
                for p in sorted(ps):
                    if p < partitions[t] and (t, p) not in owner:
                        owner[(t, p)] = mid
                        count[mid] += 1
        subscribers = {t: [mid for mid in order if t in members[mid].subscribed] for t in partitions}
        for t in sorted(partitions, key=_order_key(topic_names)):
            if not subscribers[t]:
                continue
            for p in range(partitions[t]):
                if (t, p) not in owner:
                    mid = min(subscribers[t], key=lambda x: (count[x], x))
                    owner[(t, p)] = mid
                    count[mid] += 1
        # Balance: move a partition from a member holding 2+ more than another eligible subscriber.
        moved = True
        rounds = 0
        while moved and rounds < 10_000:
            moved = False
            rounds += 1
            for (t, p), mid in sorted(owner.items(), key=lambda kv: (-count[kv[1]], str(kv[0][0]), kv[0][1])):
                target = min(subscribers[t], key=lambda x: (count[x], x))
                if count[mid] - count[target] >= 2:
                    owner[(t, p)] = target
                    count[mid] -= 1
                    count[target] += 1
                    moved = True
                    break
        result: dict[str, Assignment] = {mid: {} for mid in order}
        for (t, p), mid in owner.items():
            result[mid].setdefault(t, set()).add(p)
        return result


class RangeAssignor:
    """Per topic, contiguous partition ranges over the subscribed members in member order (Kafka's
    ``range``): members subscribed to the same topics get the same partition numbers of each topic."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int],
               topic_names: Mapping[uuid.UUID, str]) -> dict[str, Assignment]:
        result: dict[str, Assignment] = {mid: {} for mid in members}
        # Static members sort by instance id so a restart (new member id) keeps its range.
        def order_key(mid: str) -> tuple[str, str]:
            inst = members[mid].instance_id
            return (inst if inst is not None else "\uffff" + mid, mid)

        for t in sorted(partitions, key=_order_key(topic_names)):
            subs = sorted((mid for mid, spec in members.items() if t in spec.subscribed), key=order_key)
            if not subs:
                continue
            base, extra = divmod(partitions[t], len(subs))
            start = 0
            for i, mid in enumerate(subs):
                size = base + (1 if i < extra else 0)
                if size:
                    result[mid][t] = set(range(start, start + size))
                start += size
        return result


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}

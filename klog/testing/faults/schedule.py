"""Seeded, reproducible fault schedules: a pure function from a seed to a list of timed fault steps.

A step names what to do, to whom, when (seconds from the start of the run) and for how long; the harness
(:mod:`klog.testing.faults.cluster`) applies it and heals it after ``duration_s``. Steps never overlap: each
one is healed, then the cluster gets ``quiet_s`` to recover before the next starts, so every anomaly can be
attributed to the fault before it.

Fault kinds (``FAULT_KINDS``):

- ``kill``: SIGKILL one node, restart it after ``duration_s``
- ``pause``: SIGSTOP one node for ``duration_s`` (chosen longer than the session timeout), then SIGCONT
- ``isolate``: cut one node off from every other node (clients still reach it)
- ``isolate-leader``: the same, aimed at the leader of the first partition when the step starts
- ``split``: a majority/minority partition of the nodes (``groups``)
- ``ring``: a ring of majorities: every node still sees a majority, but not the same one (``groups`` are the
  node pairs whose link is cut: on 3 nodes one link, on 5 the links between nodes two apart on a shuffled ring)
- ``corrupt``: SIGKILL one node, damage the tail of the active segment of one of its partitions while it is down
  (``params``: ``mode`` ``truncate`` (cut ``bytes``) or ``bitflip`` (``bytes`` from the end)), restart it; never
  a partition whose only in-sync replica is that node (that destroys acknowledged writes, which no ISR survives)
- ``netem``: delay, loss or duplication on one node's link (``params``: ``delay_ms``, ``loss_percent`` or
  ``duplicate_percent``)
- ``disk-full``: fill one node's log dir filesystem to the last block; the heal frees it and restarts the node
  (klog keeps a failed log dir offline until a restart; Kafka with its only log dir failed halts)
- ``clock``: restart one node with its wall clock ``offset_s`` seconds off (libfaketime preloaded into that
  process only); the heal restarts it on the true clock

``target`` is a node id, ``"leader"`` (resolved when the step runs) or, for ``split``, unused.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FAULT_KINDS", "NETWORK_KINDS", "FaultStep", "random_schedule", "each_once", "timeline", "end_s"]

FAULT_KINDS = ("kill", "pause", "isolate", "isolate-leader", "split", "ring", "netem", "corrupt", "disk-full",
               "clock")
#: kinds that need the network-namespace mode (root; disk-full needs root to mount each node's filesystem)
NETWORK_KINDS = frozenset({"isolate", "isolate-leader", "split", "ring", "netem", "disk-full"})
#: wall-clock offsets of a clock step: within Kafka 4's message.timestamp.after.max.ms (1 hour), so a node
#: behind the clients does not refuse their CreateTime batches as INVALID_TIMESTAMP, and far below
#: producer.id.expiration.ms (1 day): a node a day ahead expires every idempotent producer's state at its start
#: and stores a retried batch twice (seen in a long run with +86400 s), as Kafka's would
CLOCK_OFFSETS_S = (-1800, -300, -60, -10, 10, 60, 300, 1800)
#: limits that keep a schedule sane
MAX_STEPS = 100_000
MIN_DURATION_S = 0.5


@dataclass(frozen=True)
class FaultStep:
    at_s: float
    kind: str
    duration_s: float
    target: int | str | None = None
    groups: tuple[tuple[int, ...], ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in FAULT_KINDS, self.kind
        assert self.duration_s >= MIN_DURATION_S, self.duration_s

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["groups"] = [list(g) for g in self.groups]
        return d


def _step(rng: random.Random, kind: str, at_s: float, nodes: Sequence[int], session_timeout_s: float,
          max_duration_s: float) -> FaultStep:
    duration = round(rng.uniform(min(2.0, max_duration_s), max_duration_s), 3)
    if kind == "pause":  # longer than the session timeout, so the node is fenced while it sleeps
        duration = round(session_timeout_s * rng.uniform(1.2, 2.0), 3)
    if kind in ("kill", "pause", "isolate", "netem", "corrupt", "disk-full", "clock"):
        target: int | str | None = rng.choice(list(nodes))
    elif kind == "isolate-leader":
        target = "leader"
    else:
        target = None
    groups: tuple[tuple[int, ...], ...] = ()
    params: dict[str, Any] = {}
    if kind == "split":
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        minority = len(nodes) // 2 if len(nodes) > 2 else 1
        groups = (tuple(sorted(shuffled[minority:])), tuple(sorted(shuffled[:minority])))
    if kind == "ring":
        ring = list(nodes)
        rng.shuffle(ring)
        n = len(ring)
        if n <= 3:
            cut = [tuple(sorted(rng.sample(ring, 2)))] if n == 3 else []
        else:
            cut = [tuple(sorted((ring[i], ring[j]))) for i in range(n) for j in range(i + 1, n)
                   if min(j - i, n - (j - i)) >= 2]
        groups = tuple(cut)
    if kind == "corrupt":
        params = {"mode": rng.choice(["truncate", "bitflip"]), "bytes": rng.randint(1, 300),
                  "partition_pick": rng.randrange(1 << 16)}
    if kind == "clock":
        params = {"offset_s": rng.choice(CLOCK_OFFSETS_S)}
    if kind == "netem":
        what = rng.choice(["delay", "loss", "duplicate"])
        if what == "delay":
            params = {"delay_ms": rng.choice([50, 100, 200, 500])}
        elif what == "loss":
            params = {"loss_percent": rng.choice([5, 10, 20, 40])}
        else:
            params = {"duplicate_percent": rng.choice([5, 20, 50])}
    return FaultStep(round(at_s, 3), kind, duration, target, groups, params)


def random_schedule(seed: int, nodes: Sequence[int], count: int, *, kinds: Sequence[str] = FAULT_KINDS,
                    start_s: float = 5.0, quiet_s: float = 5.0, session_timeout_s: float = 6.0,
                    max_duration_s: float = 10.0) -> list[FaultStep]:
    """``count`` steps of kinds drawn from ``kinds`` (uniformly), one after another. Same arguments, same list."""
    assert 0 <= count <= MAX_STEPS and len(nodes) >= 1 and kinds
    assert all(k in FAULT_KINDS for k in kinds), kinds
    rng = random.Random(seed)
    steps, at = [], float(start_s)
    for _ in range(count):
        step = _step(rng, rng.choice(list(kinds)), at, nodes, session_timeout_s, max_duration_s)
        steps.append(step)
        at = step.at_s + step.duration_s + quiet_s
    return steps


def each_once(seed: int, nodes: Sequence[int], kinds: Sequence[str], *, start_s: float = 5.0, quiet_s: float = 5.0,
              session_timeout_s: float = 6.0, max_duration_s: float = 10.0) -> list[FaultStep]:
    """One step of each of ``kinds``, in that order (targets and durations drawn from ``seed``)."""
    assert all(k in FAULT_KINDS for k in kinds), kinds
    rng = random.Random(seed)
    steps, at = [], float(start_s)
    for kind in kinds:
        step = _step(rng, kind, at, nodes, session_timeout_s, max_duration_s)
        steps.append(step)
        at = step.at_s + step.duration_s + quiet_s
    return steps


def timeline(steps: Sequence[FaultStep]) -> list[tuple[float, str, int]]:
    """The nemesis's actions in order: ``(seconds, "start" | "heal", step index)``. At the same moment a heal
    comes before a start, so back-to-back steps never overlap; steps written to overlap (a hand-made schedule)
    interleave by time."""
    actions = [(s.at_s, 1, i) for i, s in enumerate(steps)] + [(s.at_s + s.duration_s, 0, i) for i, s in enumerate(steps)]
    return [(at, "start" if is_start else "heal", i) for at, is_start, i in sorted(actions)]


def end_s(steps: Sequence[FaultStep]) -> float:
    """When the last step has been healed."""
    return max((s.at_s + s.duration_s for s in steps), default=0.0)

"""The workload matrix: what runs against each broker, in which order, with which settings.

Every workload runs identically against both brokers. Produce and consume volumes are fixed record counts
(the same bytes for both brokers); a time limit bounds a slow broker (a stopped ProducerPerformance is then
rated from the per-second windows it printed, and the result is marked incomplete).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SIZES = (100, 1024)
PARTITIONS = (1, 16)
ACKS = ("1", "all")

#: Producer settings shared by every throughput workload (Java and librdkafka alike).
LINGER_MS = 5
BATCH_SIZE = 65536
#: The latency workloads: a fixed rate well below either broker's saturation on a 2-core machine.
LATENCY_RATE = 10_000           # records/s
LATENCY_SIZE = 1024
LATENCY_PARTITIONS = 16
LATENCY_LINGER_MS = 1
MANY_PARTITIONS = 1000
CONNECTIONS = 500
CONNECTION_RECORDS_PER_REQUEST = 10
CONNECTION_RECORD_SIZE = 100


@dataclass(frozen=True)
class Workload:
    id: str                 # stable key across runs and brokers, e.g. "produce/java/100B/16p/acks=all"
    kind: str               # produce | consume | e2e | produce-latency | connections
    tool: str               # java (ProducerPerformance/ConsumerPerformance) | confluent | asyncio
    size: int
    partitions: int
    acks: str = "1"
    records: int = 0
    topic: str = ""
    source_topic: str = ""  # consume: the topic a produce workload filled in this session
    rate: int = 0           # records/s for fixed-rate workloads (0: as fast as possible)
    seconds: float = 0.0    # connections: how long the closed loop runs
    time_limit_s: float = 120.0
    replication_factor: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _records(size: int, scale: float) -> int:
    # About 200 MB of 1 KiB records or 100 MB of 100 B records at scale 1: several seconds per workload on a
    # 2-core machine whose load generators share the cores with the broker.
    base = 200_000 if size >= 1024 else 1_000_000
    return max(1000, int(base * scale))


def matrix(scale: float = 1.0, *, quick: bool = False) -> list[Workload]:
    """All workloads in session order (a consume workload reads a topic an earlier produce filled).

    ``quick`` keeps one of each kind (smoke runs); ``scale`` multiplies record counts and durations.
    """
    limit = 120.0 if not quick else 60.0
    sizes, parts, acks = (SIZES, PARTITIONS, ACKS) if not quick else ((1024,), (16,), ("1",))
    w: list[Workload] = []
    for size in sizes:
        for p in parts:
            for a in acks:
                w.append(Workload(f"produce/java/{size}B/{p}p/acks={a}", "produce", "java", size, p, a,
                                  _records(size, scale), topic=f"pj-{size}-{p}-{a}", time_limit_s=limit))
    for size in sizes:
        for p in parts:
            filled = f"pj-{size}-{p}-1"
            w.append(Workload(f"consume/java/{size}B/{p}p", "consume", "java", size, p,
                              records=_records(size, scale), source_topic=filled, time_limit_s=limit))
            w.append(Workload(f"consume/confluent/{size}B/{p}p", "consume", "confluent", size, p,
                              records=_records(size, scale), source_topic=filled, time_limit_s=limit))
    for size in sizes:
        for p in parts:
            w.append(Workload(f"produce/confluent/{size}B/{p}p/acks=1", "produce", "confluent", size, p, "1",
                              _records(size, scale), topic=f"pc-{size}-{p}", time_limit_s=limit))
    latency_records = max(2000, int(LATENCY_RATE * 20 * scale))
    for a in (ACKS if not quick else ("all",)):
        w.append(Workload(f"e2e/confluent/{LATENCY_SIZE}B/{LATENCY_PARTITIONS}p/acks={a}", "e2e", "confluent",
                          LATENCY_SIZE, LATENCY_PARTITIONS, a, latency_records, topic=f"e2e-{a}",
                          rate=LATENCY_RATE, time_limit_s=limit))
    w.append(Workload(f"produce-latency/java/{LATENCY_SIZE}B/{LATENCY_PARTITIONS}p/acks=all", "produce-latency",
                      "java", LATENCY_SIZE, LATENCY_PARTITIONS, "all", latency_records, topic="pl-all",
                      rate=LATENCY_RATE, time_limit_s=limit))
    many = MANY_PARTITIONS if not quick else 100
    w.append(Workload(f"produce/java/1024B/{many}p/acks=1", "produce", "java", 1024, many, "1",
                      _records(1024, scale), topic=f"pj-1024-{many}-1", time_limit_s=limit))
    w.append(Workload(f"consume/java/1024B/{many}p", "consume", "java", 1024, many,
                      records=_records(1024, scale), source_topic=f"pj-1024-{many}-1", time_limit_s=limit))
    conns = CONNECTIONS if not quick else 50
    w.append(Workload(f"connections/asyncio/{conns}c/{CONNECTION_RECORD_SIZE}B/acks=1", "connections", "asyncio",
                      CONNECTION_RECORD_SIZE, 16, "1", topic="conn", seconds=max(2.0, 15 * scale),
                      time_limit_s=limit, extra={"connections": conns,
                                                 "records_per_request": CONNECTION_RECORDS_PER_REQUEST}))
    return w


def select(workloads: list[Workload], only: list[str]) -> list[Workload]:
    """The workloads whose id contains any of ``only`` (all without it), plus, for every selected consume
    workload, the produce workload that fills its topic - in matrix order, so the produce runs first."""
    if not only:
        return list(workloads)
    chosen = {w.id for w in workloads if any(o in w.id for o in only)}
    fills = {w.topic: w.id for w in workloads if w.topic}
    for w in workloads:
        if w.id in chosen and w.source_topic:
            if w.source_topic not in fills:
                raise ValueError(f"{w.id}: no workload fills its topic {w.source_topic}")
            chosen.add(fills[w.source_topic])
    picked = [w for w in workloads if w.id in chosen]
    for i, w in enumerate(picked):  # the matrix lists producers first; keep that a checked fact
        if w.source_topic and fills[w.source_topic] not in {x.id for x in picked[:i]}:
            raise ValueError(f"{w.id} is listed before the workload that fills {w.source_topic}")
    return picked

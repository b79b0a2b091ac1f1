"""klog's Python client vs confluent-kafka, kafka-python and aiokafka: same broker, same run.

Run: ``.venv/bin/pytest benches/bench_client.py -p benchmark -o addopts="" --benchmark-only -s``
Every client talks to the same broker in the same run: Apache Kafka 4.x by default; ``KLOG_BENCH_BROKER=klog``
uses klog-broker instead and ``KLOG_BENCH_BROKER=kafka,klog`` runs the whole set against each in turn (each
broker's ratios are computed from its own figures only).

For 100 B and 1 KiB values, msgs/s and MB/s (value bytes) of:
- per-record produce: a loop of ``send`` calls plus the final flush (every client: acks=1, no idempotence,
  linger.ms=5, 1 MB batches, no compression);
- per-record produce with Kafka's producer defaults (klog and confluent-kafka: batch.size=16384, linger.ms=5,
  acks=all, idempotence on), where each Produce request carries one 16 KiB batch and per-request costs count;
- ``send_batch`` (klog only): the same records handed over as one numpy array per call;
- client CPU per record (process time of the benchmark process, all threads; the broker excluded) and broker CPU
  per record (the broker process's threads over the same span) for each, to separate the client's own cost from
  the broker's on this shared machine. With both, each target line also says how many of the machine's CPUs the
  target rate would keep busy at those per-record costs: above the CPU count, no client can reach it here;
- consume: reading the records back from offset 0 - klog's ``poll_batch`` (Arrow) and ``poll`` (records) vs a
  confluent-kafka ``consume()`` loop (touching each value), kafka-python ``poll`` and aiokafka ``getmany``.

Targets (``test_client_targets``, same-run ratios): klog per-record produce >= 1x confluent-kafka; ``send_batch``
>= 5x confluent-kafka's per-record produce; ``poll_batch`` >= 5x the confluent-kafka consume loop. Printed, not
asserted yet (``WATCHED``): klog per-record produce with Kafka's defaults vs confluent-kafka with the same.

The machine's own limits are measured in the same run, before any broker starts (``benches/sidebyside/machine.py``:
loopback TCP, sendfile over loopback, page-cache write), and every client's MB/s is printed as a fraction of
them: at 1 KiB a 5x target asks for more than a broker on this machine can write (produce: each record is
sent over loopback and written to the page cache) or send (consume: sendfile over loopback).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import klog

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

SIZES = (100, 1024)
#: Records per round for the fast clients (klog, confluent) and the pure-Python ones (kafka-python, aiokafka).
FAST_RECORDS = {100: 1_000_000, 1024: 200_000}
SLOW_RECORDS = {100: 30_000, 1024: 20_000}
ROUNDS = 3
LINGER_MS = 5
BATCH_BYTES = 1_000_000

#: Bytes each client type pushes through a new broker, per record size, before the timed rounds.
WARM_UP_BYTES = 50_000_000
#: Fraction of sidebyside's full-size limit measurements (2 GiB each) taken here: 1 GiB, so that the fixed costs
#: inside those timings (the loopback reader process's exit) stay small next to the transfer.
MACHINE_SCALE = 0.5
BROKERS = [b.strip() for b in os.environ.get("KLOG_BENCH_BROKER", "kafka").split(",") if b.strip()]
for _b in BROKERS:
    if _b not in ("kafka", "klog"):
        raise ValueError(f"KLOG_BENCH_BROKER: unknown broker {_b!r} (kafka, klog or both comma-separated)")

#: Per broker: figure name -> value.
FIGURES: dict[str, dict[str, float]] = {}
#: The machine's limits measured in this run (benches/sidebyside/machine.py).
LIMITS: dict[str, Any] = {}


@pytest.fixture(scope="module")
def machine_limits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Measured once, before the first broker starts, so that no broker competes with the measurement."""
    from sidebyside import machine

    if not LIMITS:
        load = os.getloadavg()[0]
        LIMITS.update(machine.measure(tmp_path_factory.mktemp("machine"), scale=MACHINE_SCALE))
        LIMITS["loadavg_after"] = os.getloadavg()[0]
        LIMITS["loadavg_before"] = load
    return LIMITS


@pytest.fixture(scope="module", params=BROKERS)
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           machine_limits: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(broker name, bootstrap address): one broker that every client of the run talks to."""
    name = request.param
    FIGURES.setdefault(name, {})
    _FILLED.clear()
    data_dir = tmp_path_factory.mktemp(name)
    try:
        if name == "klog":
            from klog.testing.process import BrokerProcess

            with BrokerProcess(data_dir, {"num.partitions": 1}) as b:
                BROKER_PID[:] = [b.pid]
                warm_up(b.bootstrap_servers)
                yield name, b.bootstrap_servers
        else:
            from klog.testing.kafka import apache_kafka

            with apache_kafka(data_dir, config={"num.partitions": 1}) as k:
                BROKER_PID[:] = [k.pid]
                warm_up(str(k))
                yield name, str(k)
    finally:
        BROKER_PID.clear()
        # A run writes several GB per broker on a disk shared with other work: gone once the broker stopped.
        shutil.rmtree(data_dir, ignore_errors=True)


def warm_up(bootstrap: str) -> None:
    """Produce and fetch WARM_UP_BYTES through the new broker before anything is timed: a JVM broker compiles
    its hot paths during its first hundreds of MB, which would otherwise slow whichever client runs first."""
    for size in SIZES:
        count = WARM_UP_BYTES // size
        confluent_produce(bootstrap, size, count)
        klog_send(bootstrap, size, count)
        topic, _ = filled_topic(bootstrap, size, count)
        confluent_consume(bootstrap, topic, count)
        klog_poll_batch(bootstrap, topic, count)
    _FILLED.clear()


def new_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    with klog.AdminClient(bootstrap) as admin:
        admin.create_topics([name], num_partitions=1, replication_factor=1)
    return name


class Timing(NamedTuple):
    seconds: float
    #: CPU seconds of this Python process (all its threads, librdkafka's included).
    client_cpu: float
    #: CPU seconds of the broker process (all its threads) over the same span.
    broker_cpu: float


class Clock:
    """Wall time, this process's CPU and the broker's CPU (``BROKER_PID``) from creation to :meth:`stop`."""

    __slots__ = ("broker", "cpu", "wall")

    def __init__(self) -> None:
        self.broker = broker_cpu_seconds()  # read outside the timed span: /proc reads are not the client's
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def stop(self) -> Timing:
        wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return Timing(wall, cpu, broker_cpu_seconds() - self.broker)


#: The process of the broker under test (set by the ``broker`` fixture).
BROKER_PID: list[int] = []


def broker_cpu_seconds() -> float:
    """CPU seconds the broker's threads have run so far: nanosecond ``/proc/<pid>/task/*/schedstat`` sums (a
    short run is ~0.1 s, too short for /proc/<pid>/stat's 10 ms ticks), else those ticks."""
    if not BROKER_PID:
        return 0.0
    pid = BROKER_PID[0]
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):  # the thread exited meanwhile
                continue
    except OSError:
        total = 0
    if total:
        return total / 1e9
    from sidebyside.procstat import cpu_seconds

    return cpu_seconds(pid)


def record(figures: dict[str, float], name: str, size: int, count: int, best: Timing) -> None:
    figures[f"{name} {size}B msgs/s"] = count / best.seconds
    figures[f"{name} {size}B MB/s"] = count * size / best.seconds / 1e6
    # CPU of this Python process (all its threads, librdkafka's included), not the broker's.
    figures[f"{name} {size}B client CPU ns/msg"] = best.client_cpu / count * 1e9
    figures[f"{name} {size}B broker CPU ns/msg"] = best.broker_cpu / count * 1e9


def interleaved(benchmark: Any, figures: dict[str, float], group: str, size: int,
                runs: dict[str, tuple[Callable[[], Timing], int]]) -> None:
    """Run every client once per round, interleaved and rotated (A B C, B C A, C A B, ...), ROUNDS rounds; keep
    each client's best round. Interleaving keeps a load spike on this shared machine from landing on one client
    only; rotating keeps any client from always running first (after the broker was idle, or while Kafka's JVM
    is still compiling its hot paths) or always right after the same other client."""
    best: dict[str, Timing] = {}
    order = list(runs)
    rounds_done = [0]

    def one_round() -> None:
        shift = rounds_done[0] % len(order)
        for name in order[shift:] + order[:shift]:
            t = runs[name][0]()
            # Each figure's best round: the least disturbed by other work on the machine.
            b = best.get(name, t)
            best[name] = Timing(min(b.seconds, t.seconds), min(b.client_cpu, t.client_cpu),
                                min(b.broker_cpu, t.broker_cpu))
        rounds_done[0] += 1

    benchmark.group = group
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    for name, (_fn, count) in runs.items():
        record(figures, name, size, count, best[name])
        benchmark.extra_info[f"{name} msgs/s"] = count / best[name].seconds
        benchmark.extra_info[f"{name} MB/s"] = count * size / best[name].seconds / 1e6


# ---------------------------------------------------------------------------------------------------- produce

def klog_send(bootstrap: str, size: int, count: int) -> Timing:
    return _klog_send_loop(bootstrap, size, count, {"acks": 1, "enable.idempotence": False, "linger.ms": LINGER_MS,
                                                    "batch.size": BATCH_BYTES, "buffer.memory": 256 << 20})


def _klog_send_loop(bootstrap: str, size: int, count: int, config: dict[str, Any]) -> Timing:
    """A loop of ``send`` calls plus the final flush, after one acknowledged record (wall and CPU seconds)."""
    topic = new_topic(bootstrap)
    value = b"x" * size
    with klog.Producer(bootstrap, **config) as p:
        p.send(topic, value).result()
        send = p.send
        clock = Clock()
        for _ in range(count):
            send(topic, value)
        p.flush()
        return clock.stop()


def klog_send_batch(bootstrap: str, size: int, count: int) -> Timing:
    topic = new_topic(bootstrap)
    chunk = 50_000
    values = np.frombuffer(b"x" * size * chunk, dtype=f"S{size}")
    with klog.Producer(bootstrap, acks=1, enable_idempotence=False, linger_ms=LINGER_MS,
                       batch_size=BATCH_BYTES, buffer_memory=256 << 20) as p:
        p.send(topic, b"warm").result()
        clock = Clock()
        for i in range(0, count, chunk):
            p.send_batch(topic, values[:min(chunk, count - i)])
        p.flush()
        return clock.stop()


def confluent_produce(bootstrap: str, size: int, count: int) -> Timing:
    topic = new_topic(bootstrap)
    value = b"x" * size
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "enable.idempotence": False,
                                  "linger.ms": LINGER_MS, "batch.size": BATCH_BYTES,
                                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 262144})
    p.produce(topic, value)
    p.flush()
    produce = p.produce
    clock = Clock()
    for _ in range(count):
        try:
            produce(topic, value)
        except BufferError:
            p.poll(0.001)
            produce(topic, value)
    p.flush()
    return clock.stop()


def kafka_python_produce(bootstrap: str, size: int, count: int) -> Timing:
    topic = new_topic(bootstrap)
    value = b"x" * size
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False, linger_ms=LINGER_MS,
                            batch_size=BATCH_BYTES)
    p.send(topic, value).get(30)
    clock = Clock()
    for _ in range(count):
        p.send(topic, value)
    p.flush()
    elapsed = clock.stop()
    p.close()
    return elapsed


def aiokafka_produce(bootstrap: str, size: int, count: int) -> Timing:
    topic = new_topic(bootstrap)
    value = b"x" * size

    async def run() -> Timing:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                                      max_batch_size=BATCH_BYTES, enable_idempotence=False)
        await p.start()
        try:
            await p.send_and_wait(topic, value)
            clock = Clock()
            for _ in range(count):
                await p.send(topic, value)
            await p.flush()
            return clock.stop()
        finally:
            await p.stop()

    return asyncio.run(run())


#: Kafka's producer defaults (batch.size 16384, linger.ms 5, acks=all, idempotence on), which most users keep:
#: a Produce request per 16 KiB batch, so the per-request cost counts, not just the per-record one.
KAFKA_DEFAULTS = {"batch.size": 16384, "linger.ms": 5, "acks": "all", "enable.idempotence": True}
#: Records per round with Kafka's defaults (far more requests per record than with 1 MB batches).
DEFAULTS_RECORDS = {100: 300_000, 1024: 100_000}


def klog_send_kafka_defaults(bootstrap: str, size: int, count: int) -> Timing:
    return _klog_send_loop(bootstrap, size, count, KAFKA_DEFAULTS)


def confluent_produce_kafka_defaults(bootstrap: str, size: int, count: int) -> Timing:
    topic = new_topic(bootstrap)
    value = b"x" * size
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **KAFKA_DEFAULTS})
    p.produce(topic, value)
    p.flush()
    produce = p.produce
    clock = Clock()
    for _ in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # librdkafka's default queue (100,000 messages) is full: back-pressure
                p.poll(0.001)
    p.flush()
    return clock.stop()


PRODUCERS: dict[str, tuple[Callable[[str, int, int], Timing], dict[int, int]]] = {
    "klog send": (klog_send, FAST_RECORDS),
    "klog send (Kafka defaults)": (klog_send_kafka_defaults, DEFAULTS_RECORDS),
    "confluent produce (Kafka defaults)": (confluent_produce_kafka_defaults, DEFAULTS_RECORDS),
    "klog send_batch": (klog_send_batch, FAST_RECORDS),
    "confluent produce": (confluent_produce, FAST_RECORDS),
    "kafka-python send": (kafka_python_produce, SLOW_RECORDS),
    "aiokafka send": (aiokafka_produce, SLOW_RECORDS),
}


@pytest.mark.parametrize("size", SIZES)
def test_produce(benchmark: Any, broker: tuple[str, str], size: int) -> None:
    name, bootstrap = broker
    runs = {client: ((lambda fn=fn, n=counts[size]: fn(bootstrap, size, n)), counts[size])
            for client, (fn, counts) in PRODUCERS.items()}
    interleaved(benchmark, FIGURES[name], f"produce {size}B ({name} broker)", size, runs)


# ---------------------------------------------------------------------------------------------------- consume

_FILLED: dict[int, tuple[str, int]] = {}


def filled_topic(bootstrap: str, size: int, count: int | None = None) -> tuple[str, int]:
    """A topic holding ``count`` (default FAST_RECORDS[size]) records of ``size`` bytes (written once per
    broker, with send_batch)."""
    if size not in _FILLED:
        topic = new_topic(bootstrap)
        count = FAST_RECORDS[size] if count is None else count
        values = np.frombuffer(b"y" * size * count, dtype=f"S{size}")
        with klog.Producer(bootstrap, acks=1, enable_idempotence=False, buffer_memory=1 << 30) as p:
            p.send_batch(topic, values)
            p.flush()
        _FILLED[size] = (topic, count)
    return _FILLED[size]


def klog_poll_batch(bootstrap: str, topic: str, count: int) -> Timing:
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_bytes=64 << 20,
                       max_partition_fetch_bytes=16 << 20) as c:
        rows = 0
        clock = Clock()
        c.assign([(topic, 0)])
        while rows < count:
            rows += c.poll_batch(timeout=10).num_rows
        return clock.stop()


def klog_poll(bootstrap: str, topic: str, count: int) -> Timing:
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_bytes=64 << 20,
                       max_partition_fetch_bytes=16 << 20, max_poll_records=100_000) as c:
        got = 0
        clock = Clock()
        c.assign([(topic, 0)])
        while got < count:
            for r in c.poll(timeout=10):
                r.value
                got += 1
        return clock.stop()


def confluent_consume(bootstrap: str, topic: str, count: int) -> Timing:
    # librdkafka stops fetching once its local queue holds queued.min.messages and then waits
    # fetch.queue.backoff.ms (1 s by default) before it looks again, however soon the queue drained: that
    # pause, not the client's speed, would be much of a run (benches/sidebyside does the same).
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20,
                                  "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
    c.list_topics(topic, 10)  # connected, like the other clients before the clock starts
    got = 0
    clock = Clock()
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    while got < count:
        for m in c.consume(min(10_000, count - got), 10.0):
            m.value()
            got += 1
    elapsed = clock.stop()
    c.close()
    return elapsed


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> Timing:
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                            fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    tp = kafka.TopicPartition(topic, 0)
    c.partitions_for_topic(topic)
    got = 0
    clock = Clock()
    c.assign([tp])
    c.seek(tp, 0)
    while got < count:
        for records in c.poll(timeout_ms=10_000, max_records=100_000).values():
            for r in records:
                r.value
                got += 1
    elapsed = clock.stop()
    c.close()
    return elapsed


def aiokafka_consume(bootstrap: str, topic: str, count: int) -> Timing:
    async def run() -> Timing:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                      enable_auto_commit=False, fetch_max_bytes=64 << 20,
                                      max_partition_fetch_bytes=16 << 20)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            got = 0
            clock = Clock()
            c.assign([tp])
            c.seek(tp, 0)
            while got < count:
                for records in (await c.getmany(timeout_ms=10_000, max_records=100_000)).values():
                    for r in records:
                        r.value
                        got += 1
            return clock.stop()
        finally:
            await c.stop()

    return asyncio.run(run())


CONSUMERS: dict[str, tuple[Callable[[str, str, int], Timing], bool]] = {
    "klog poll_batch": (klog_poll_batch, True),
    "klog poll": (klog_poll, True),
    "confluent consume": (confluent_consume, True),
    "kafka-python poll": (kafka_python_consume, False),
    "aiokafka getmany": (aiokafka_consume, False),
}


@pytest.mark.parametrize("size", SIZES)
def test_consume(benchmark: Any, broker: tuple[str, str], size: int) -> None:
    name, bootstrap = broker
    topic, available = filled_topic(bootstrap, size)
    runs = {}
    for client, (fn, fast) in CONSUMERS.items():
        count = available if fast else SLOW_RECORDS[size]
        runs[client] = ((lambda fn=fn, n=count: fn(bootstrap, topic, n)), count)
    interleaved(benchmark, FIGURES[name], f"consume {size}B ({name} broker)", size, runs)


# ---------------------------------------------------------------------------------------------------- targets

TARGETS = [
    ("klog send", "confluent produce", 1.0),
    ("klog send_batch", "confluent produce", 5.0),
    ("klog poll_batch", "confluent consume", 5.0),
]

#: Same-run ratios printed but not asserted yet: (ours, baseline, goal). With Kafka's default 16 KiB batches
#: klog's per-record send is below confluent-kafka (issue 6): the goal is parity; asserted once it is met.
WATCHED = [
    ("klog send (Kafka defaults)", "confluent produce (Kafka defaults)", 1.0),
]


#: What bounds each direction on this machine, whatever the client: (limit key, what it is).
PRODUCE_LIMITS = (("loopback_tcp_gbps", "loopback TCP"), ("page_cache_write_gbps", "page-cache write"))
CONSUME_LIMITS = (("loopback_tcp_gbps", "loopback TCP"), ("sendfile_loopback_gbps", "sendfile over loopback"))


def print_machine_limits(limits: dict[str, Any]) -> None:
    print(f"  machine ({limits['cpus']} CPUs, {limits['cpu']}; load {limits['loadavg_before']:.1f} before, "
          f"{limits['loadavg_after']:.1f} after measuring): loopback TCP {limits['loopback_tcp_gbps']:.2f} GB/s, "
          f"sendfile over loopback {limits['sendfile_loopback_gbps']:.2f} GB/s, page-cache write "
          f"{limits['page_cache_write_gbps']:.2f} GB/s, CRC-32C {limits['crc32c_gbps']:.1f} GB/s")


def fractions(mbps: float, which: tuple[tuple[str, str], ...], limits: dict[str, Any]) -> str:
    return ", ".join(f"{mbps / (limits[key] * 1000):.2f} of {label}" for key, label in which)


def test_client_targets(benchmark: Any) -> None:
    """Print every figure and check the targets as ratios measured in this run (per broker)."""
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    # The machine is shared: the load average says how much the figures below competed for the CPUs.
    print("\n  load average (1, 5, 15 min): " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if LIMITS:
        print_machine_limits(LIMITS)
    missed = []
    for broker_name, figures in FIGURES.items():
        print(f"  --- {broker_name} broker")
        for key in sorted(figures):
            print(f"  {key:40s} {figures[key]:>14,.0f}")
        if LIMITS:
            print("  MB/s as a fraction of this machine's limits:")
            for key in sorted(k for k in figures if k.endswith(" MB/s")):
                client = key.rsplit(" ", 2)[0]
                print(f"  {key:40s} {figures[key]:>8,.0f} = "
                      + fractions(figures[key], CONSUME_LIMITS if client in CONSUMERS else PRODUCE_LIMITS, LIMITS))
        for size in SIZES:
            for ours, theirs, factor in TARGETS:
                a_cpu = figures.get(f"{ours} {size}B client CPU ns/msg")
                b_cpu = figures.get(f"{theirs} {size}B client CPU ns/msg")
                if a_cpu and b_cpu:
                    print(f"  client CPU per record, {theirs} / {ours} at {size}B: {b_cpu / a_cpu:.2f}x")
                a_broker = figures.get(f"{ours} {size}B broker CPU ns/msg")
                b_broker = figures.get(f"{theirs} {size}B broker CPU ns/msg")
                if a_broker and b_broker:
                    print(f"  broker CPU per record at {size}B: {a_broker:,.0f} ns with {ours}, {b_broker:,.0f} ns "
                          f"with {theirs}")
                a, b = figures.get(f"{ours} {size}B msgs/s"), figures.get(f"{theirs} {size}B msgs/s")
                if a is None or b is None:
                    continue
                ratio = a / b
                benchmark.extra_info[f"{broker_name}: {ours} / {theirs} {size}B"] = ratio
                line = f"  {ours} / {theirs} at {size}B: {ratio:.2f}x (target {factor}x)"
                if LIMITS:
                    need = figures[f"{theirs} {size}B MB/s"] * factor
                    line += (f"; the target needs {need:,.0f} MB/s = "
                             + fractions(need, CONSUME_LIMITS if ours in CONSUMERS else PRODUCE_LIMITS, LIMITS))
                a_broker = figures.get(f"{ours} {size}B broker CPU ns/msg")
                if a_cpu and a_broker is not None:
                    # Client and broker share this machine's CPUs: at the CPU per record they used in this run,
                    # the target rate keeps this many CPUs busy (a lower bound: it assumes perfect overlap).
                    cpus_needed = b * factor * (a_cpu + a_broker) / 1e9
                    line += (f"; at this run's CPU per record ({ours}: client {a_cpu:,.0f} ns + broker "
                             f"{a_broker:,.0f} ns) the target rate needs {cpus_needed:.2f} of the machine's "
                             f"{os.cpu_count()} CPUs")
                print(line)
                if ratio < factor:
                    missed.append(f"{broker_name} broker, {ours} {size}B: {ratio:.2f}x < {factor}x {theirs}")
            for ours, theirs, goal in WATCHED:
                a, b = figures.get(f"{ours} {size}B msgs/s"), figures.get(f"{theirs} {size}B msgs/s")
                a_cpu = figures.get(f"{ours} {size}B client CPU ns/msg")
                b_cpu = figures.get(f"{theirs} {size}B client CPU ns/msg")
                if a is not None and b is not None and a_cpu and b_cpu:
                    print(f"  {ours} / {theirs} at {size}B: {a / b:.2f}x msgs/s, client CPU per record "
                          f"{b_cpu / a_cpu:.2f}x theirs/ours (goal {goal}x, not asserted yet)")
                    benchmark.extra_info[f"{broker_name}: {ours} / {theirs} {size}B"] = a / b
    assert not missed, "; ".join(missed)

"""Share groups (KIP-932): klog vs Apache Kafka 4.x, paired in one run (issue 35, item 7).

Full run (a few minutes; writes ``benches/results/share_groups.json``)::

    PYTHONPATH=$PWD .venv/bin/python benches/bench_share_groups.py [--rounds 3]

(an absolute PYTHONPATH: the klog broker process starts in a temporary directory, where a relative one would
run the installed klog, not this checkout's.)

Short run (one round at a small volume): ``make bench`` collects ``test_share_groups_short`` below, or
``python benches/bench_share_groups.py --short``.

What is measured. Both brokers run at once (sidebyside.brokers: the same Kafka properties, plus the share-group
settings below), each with a 4-partition topic per record size holding RECORDS records of 100 B and of 1 KiB,
written once before the rounds. Rounds alternate which broker goes first; the tables give medians over the rounds.

- Consume: for 1, 4 and 16 share consumers (klog's ``ShareConsumer``, explicit acknowledgement, one thread each)
  a fresh share group (``share.auto.offset.reset=earliest``, a group config) joins; once every member has its
  assignment the clock starts and each member loops ``poll_batch()`` (Arrow) and ``acknowledge_batch(batch,
  "accept")`` (ACCEPT sent with its next ShareFetch) until the group has seen every record, then commits. Records/s
  is RECORDS over that wall time; broker CPU per record is the broker process's user+system CPU over the same
  window (``/proc/<pid>/stat``, JVM threads included) divided by RECORDS. The client's CPU (the driver process:
  every member thread) is measured over the same window, per record and in cores (CPU seconds / wall seconds):
  one Python process holds at most one core's worth of the GIL, so a figure near 1 core says the client, not the
  broker, set the pace.
- Redelivery latency after a RELEASE: one explicit member of a fresh group on a new 1-partition topic receives a
  record, acknowledges it RELEASE and commits (ShareAcknowledge), then polls: the time from the commit's start
  until the record is back (delivery count 2), REDELIVERIES times per round (each on a new record), p50 and p99.
  (A RELEASE piggybacked on the next ShareFetch instead comes back at once from klog but only after the fetch's
  max wait from Kafka 4.3, which answers that fetch before the released record is acquirable again.)

The driver (16 consumer threads in one Python process) shares the machine's 2 cores with both brokers, so the
figures are relative (the ratios), not either broker's ceiling; the load average is recorded. Targets (issue 35:
>= 1.5x Kafka's records/s, <= 0.5x its CPU per record) are reported, not asserted.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parent
if str(BENCHES) not in sys.path:  # run as a script: make the sidebyside package importable
    sys.path.insert(0, str(BENCHES))

from sidebyside.brokers import LAUNCHERS, RunningBroker, shared_properties  # noqa: E402
from sidebyside.paired import paired_main  # noqa: E402
from sidebyside.procstat import cpu_seconds  # noqa: E402

RESULTS = BENCHES / "results" / "share_groups.json"
BROKERS = ("klog", "kafka")
SIZES = (100, 1024)
CONSUMERS = (1, 4, 16)
PARTITIONS = 4
#: records per topic at scale 1 (each consume measurement reads them all)
RECORDS = 30_000
REDELIVERIES = 20
TIMEOUT_S = 90.0
#: the same share-group settings on both brokers (heartbeats every 500 ms: members get their assignment soon)
SHARE_PROPERTIES = {
    "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
    "group.share.record.lock.duration.ms": 30000, "group.share.partition.max.record.locks": 2000,
    "group.share.delivery.count.limit": 5,
}


def _topic(size: int) -> str:
    return f"share-bench-{size}"


def setup_topics(broker: RunningBroker, records: int) -> None:
    import klog

    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(_topic(size), PARTITIONS, 1) for size in SIZES])
    with klog.Producer(bootstrap_servers=broker.bootstrap, linger_ms=5) as producer:
        for size in SIZES:
            payload = os.urandom(size)
            for i in range(records):
                producer.send(_topic(size), value=payload, partition=i % PARTITIONS)
        producer.flush()


def _earliest(broker: RunningBroker, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (a group config), once the broker shows it."""
    import klog
    from klog.client.admin import ConfigResource

    resource = ConfigResource("group", group)
    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_configs({resource: {"share.auto.offset.reset": "earliest"}})
        deadline = time.monotonic() + TIMEOUT_S
        while admin.describe_configs([resource])[resource]["share.auto.offset.reset"].value != "earliest":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{broker.name}: group config of {group} not applied")
            time.sleep(0.1)


def _members(broker: RunningBroker, topic: str, group: str, count: int, **config: Any) -> list[Any]:
    """``count`` explicit share consumers of ``group``, started in parallel, each with its assignment."""
    import klog

    members: list[Any] = [None] * count

    def start(i: int) -> None:
        members[i] = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                        acknowledgement_mode="explicit", **config)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + TIMEOUT_S
    while not all(m is not None and m._aio.assignment for m in members):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker.name}: {group}'s members not assigned")
        time.sleep(0.05)
    return members


def consume_round(broker: RunningBroker, size: int, count: int, records: int, group: str) -> dict[str, float]:
    """Every record of the size's topic through ``count`` members: records/s and broker CPU per record."""
    _earliest(broker, group)
    members = _members(broker, _topic(size), group, count)
    seen = [0]
    lock = threading.Lock()
    failures: list[BaseException] = []
    #: (wall time, broker CPU, client CPU) when the member that counted the last records had them accepted
    done: list[tuple[float, float, float]] = []
    me = os.getpid()

    def work(member: Any) -> None:
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                with lock:
                    if seen[0] >= records:
                        break
                batch = member.poll_batch(timeout=0.1)
                if batch.num_rows:
                    member.acknowledge_batch(batch, "accept")
                    with lock:
                        seen[0] += batch.num_rows
                        last = seen[0] >= records
                    if last:   # the clock stops once the last records' ACCEPT is answered
                        member.commit_sync()
                        done.append((time.perf_counter(), cpu_seconds(broker.pid), cpu_seconds(me, children=False)))
            member.commit_sync()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    try:
        cpu0, client0, t0 = cpu_seconds(broker.pid), cpu_seconds(me, children=False), time.perf_counter()
        threads = [threading.Thread(target=work, args=(m,)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t1, cpu1, client1 = done[0] if done else (time.perf_counter(), cpu_seconds(broker.pid),
                                                  cpu_seconds(me, children=False))
        wall, cpu, client = t1 - t0, cpu1 - cpu0, client1 - client0
    finally:
        for m in members:
            m.close()
    if failures:
        raise RuntimeError(f"{broker.name}: {failures[0]!r}")
    if seen[0] < records:
        raise TimeoutError(f"{broker.name} {size} B x{count}: {seen[0]} of {records} records")
    return {"records": seen[0], "wall_s": wall, "records_per_s": seen[0] / wall,
            "cpu_us_per_record": cpu / seen[0] * 1e6, "broker_cpu_s": cpu,
            "client_cpu_us_per_record": client / seen[0] * 1e6, "client_cores": client / wall}


def redelivery_round(broker: RunningBroker, times: int, group: str) -> dict[str, float]:
    """RELEASE then poll: how long until the record is back (delivery count 2); p50 and p99 over ``times``."""
    import klog

    topic = f"share-bench-{group}"   # a topic of its own: every record it holds is one of this round's
    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
    _earliest(broker, group)
    (member,) = _members(broker, topic, group, 1)
    latencies: list[float] = []
    try:
        with klog.Producer(bootstrap_servers=broker.bootstrap) as producer:
            for i in range(times):
                producer.send(topic, value=b"job-%d" % i)
                producer.flush()
                deadline = time.monotonic() + TIMEOUT_S
                got: list[Any] = []
                while not got:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{broker.name}: record {i} not delivered")
                    got = member.poll(timeout=0.5)
                (record,) = got
                member.acknowledge(record, "release")
                t0 = time.perf_counter()
                member.commit_sync()
                back: list[Any] = []
                while not back:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{broker.name}: record {i} not delivered again")
                    back = member.poll(timeout=0.2)
                latencies.append(time.perf_counter() - t0)
                assert [(r.offset, r.delivery_count) for r in back] == [(record.offset, 2)], back
                member.acknowledge(back[0], "accept")
            member.commit_sync()
    finally:
        member.close()
    latencies.sort()
    return {"redeliveries": len(latencies), "p50_ms": _quantile(latencies, 0.50) * 1e3,
            "p99_ms": _quantile(latencies, 0.99) * 1e3}


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def both_brokers(workdir: Path, records: int) -> Iterator[dict[str, RunningBroker]]:
    props = {**shared_properties(), **SHARE_PROPERTIES, "auto.create.topics.enable": "false"}
    with contextlib.ExitStack() as stack:
        brokers = {name: stack.enter_context(LAUNCHERS[name](workdir / name, props)) for name in BROKERS}
        for broker in brokers.values():
            setup_topics(broker, records)
        yield brokers


def _median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def run(workdir: Path, rounds: int, scale: float, log: Callable[[str], None] = print) -> dict[str, Any]:
    records = max(1000, int(RECORDS * scale))
    times = max(5, int(REDELIVERIES * min(scale, 1.0)))
    consume: dict[str, dict[str, list[dict[str, float]]]] = {
        f"{size}/{n}": {b: [] for b in BROKERS} for size in SIZES for n in CONSUMERS}
    redelivery: dict[str, list[dict[str, float]]] = {b: [] for b in BROKERS}
    started, load_at_start = time.time(), os.getloadavg()
    with both_brokers(workdir, records) as brokers:
        versions = {name: b.version for name, b in brokers.items()}
        for name, broker in brokers.items():   # warm-up, not counted (the JVM compiles the share paths)
            consume_round(broker, SIZES[0], 1, records, f"warm-{name}")
        for r in range(rounds):
            for i, (size, n) in enumerate((size, n) for size in SIZES for n in CONSUMERS):
                for name in (BROKERS if (r + i) % 2 == 0 else BROKERS[::-1]):
                    m = consume_round(brokers[name], size, n, records, f"g-{size}-{n}-{r}")
                    consume[f"{size}/{n}"][name].append(m)
                    log(f"round {r + 1}/{rounds} {size:5} B x{n:2} {name:5} {m['records_per_s']:9.0f} rec/s "
                        f"{m['cpu_us_per_record']:7.1f} us CPU/rec, client {m['client_cpu_us_per_record']:5.1f} us/rec "
                        f"{m['client_cores']:4.2f} cores, load {os.getloadavg()[0]:.1f}")
            for name in (BROKERS if r % 2 == 0 else BROKERS[::-1]):
                m = redelivery_round(brokers[name], times, f"redeliver-{r}")
                redelivery[name].append(m)
                log(f"round {r + 1}/{rounds} redelivery {name:5} p50 {m['p50_ms']:6.2f} ms p99 {m['p99_ms']:6.2f} ms")
    table: dict[str, Any] = {"consume": {}, "redelivery": {}}
    for key, samples in consume.items():
        row: dict[str, Any] = {name: _median_of(samples[name]) for name in BROKERS}
        row["records_per_s_ratio"] = _ratio(row["klog"]["records_per_s"], row["kafka"]["records_per_s"])
        row["cpu_per_record_ratio"] = _ratio(row["klog"]["cpu_us_per_record"], row["kafka"]["cpu_us_per_record"])
        table["consume"][key] = row
    row = {name: _median_of(redelivery[name]) for name in BROKERS}
    row["p50_ratio"] = _ratio(row["klog"]["p50_ms"], row["kafka"]["p50_ms"])
    row["p99_ratio"] = _ratio(row["klog"]["p99_ms"], row["kafka"]["p99_ms"])
    table["redelivery"] = row
    return {"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "rounds": rounds,
            "scale": scale, "records": records, "partitions": PARTITIONS, "redeliveries": times,
            "versions": versions, "cpus": os.cpu_count(), "loadavg": [list(load_at_start), list(os.getloadavg())],
            **table, "samples": {"consume": consume, "redelivery": redelivery}}


def format_table(result: dict[str, Any]) -> str:
    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}×"

    lines = ["| record size | consumers | Kafka records/s | klog records/s | klog/Kafka | Kafka CPU µs/record | "
             "klog CPU µs/record | klog/Kafka CPU | client CPU µs/record (cores) on Kafka / on klog |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, row in result["consume"].items():
        size, n = key.split("/")
        k, o = row["kafka"], row["klog"]
        lines.append(f"| {size} B | {n} | {k['records_per_s']:,.0f} | {o['records_per_s']:,.0f} | "
                     f"{x(row['records_per_s_ratio'])} | {k['cpu_us_per_record']:.1f} | "
                     f"{o['cpu_us_per_record']:.1f} | {x(row['cpu_per_record_ratio'])} | "
                     f"{k['client_cpu_us_per_record']:.1f} ({k['client_cores']:.2f}) / "
                     f"{o['client_cpu_us_per_record']:.1f} ({o['client_cores']:.2f}) |")
    r = result["redelivery"]
    lines += ["", "| redelivery after RELEASE | Kafka p50 / p99 ms | klog p50 / p99 ms | klog/Kafka p50 | "
              "klog/Kafka p99 |", "|---|---|---|---|---|",
              f"| {result['redeliveries']} per round | {r['kafka']['p50_ms']:.2f} / {r['kafka']['p99_ms']:.2f} | "
              f"{r['klog']['p50_ms']:.2f} / {r['klog']['p99_ms']:.2f} | {x(r['p50_ratio'])} | {x(r['p99_ratio'])} |"]
    return "\n".join(lines)


# -- make bench: the short mode ----------------------------------------------------------------------------------

#: Short mode: one round at this share of the full volume (a smoke run; the docs' figures come from the full mode).
SHORT_SCALE = 0.1


def test_share_groups_short(benchmark: Any, tmp_path: Path) -> None:
    result = benchmark.pedantic(run, args=(tmp_path, 1, SHORT_SCALE), rounds=1, iterations=1)
    (tmp_path / "share_groups.json").write_text(json.dumps(result, indent=1))
    print("\n" + format_table(result))
    assert set(result["consume"]) == {f"{size}/{n}" for size in SIZES for n in CONSUMERS}
    for key, row in result["consume"].items():
        benchmark.extra_info[f"consume {key} klog/kafka"] = row["records_per_s_ratio"]
        for broker in BROKERS:
            assert row[broker]["records"] >= result["records"], f"{broker} {key}: records missing"
    for broker in BROKERS:
        assert result["redelivery"][broker]["redeliveries"] == result["redeliveries"]


def main(argv: list[str] | None = None) -> int:
    return paired_main(argv, doc=__doc__, run=run, format_table=format_table, results=RESULTS,
                       short_scale=SHORT_SCALE, rounds=3, prefix="sharebench-",
                       footer=lambda r: f"load average (1, 5, 15 min) at start {r['loadavg'][0]}, "
                                        f"at end {r['loadavg'][1]}")


if __name__ == "__main__":
    sys.exit(main())

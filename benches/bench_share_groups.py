"""Share groups (KIP-932): klog vs Apache Kafka 4.x, paired in one run (issue 35, item 7).

Full run (a few minutes; writes ``benches/results/share_groups.json``)::

    PYTHONPATH=$PWD .venv/bin/python benches/bench_share_groups.py [--rounds 3]

(an absolute PYTHONPATH: the klog broker process starts in a temporary directory, where a relative one would
run the installed klog, not this checkout's.)

Short run (one round at a small volume): ``make bench`` collects ``test_share_groups_short`` below, or
``python benches/bench_share_groups.py --short``.

What is measured. Both brokers run at once (sidebyside.brokers: the same Kafka properties, plus the share-group
settings below), each with a 4-partition topic per record size holding RECORDS (500,000) records of 100 B and of
1 KiB, written once before the rounds as record batches of exactly BATCH_RECORDS (1,000) records, the partitions in
turn, so that both logs hold the same batches (a ShareFetch acquires whole batches: with batches cut by a
producer's linger, the broker that answered the producer faster got smaller batches and so more, smaller
ShareFetches). Rounds alternate which broker goes first; the tables give medians over the rounds. RECORDS is
sized so that the fastest measured window (klog, 100 B) lasts about half a second to a second and Kafka's one to a
few seconds (with 30,000 records a window took 0.1-0.5 s, a CPU figure a few scheduler ticks); a full run takes
2-3 minutes.

- Consume: for 1, 4 and 16 share consumers (klog's ``ShareConsumer``, explicit acknowledgement, one thread each,
  in DRIVER_PROCESSES driver processes at most: 1 member in 1 process, 4 in 4, 16 in 4 of 4, for both brokers)
  a fresh share group (``share.auto.offset.reset=earliest``, a group config) joins; once the coordinator has given
  every member its balanced assignment (ShareGroupDescribe: with 16 members one partition each, four per
  partition; klog hands out assignments among the members joined so far, which then move for up to a heartbeat
  interval) the clock starts and each member loops ``poll_batch()`` (Arrow) and ``acknowledge_batch(batch,
  "accept")`` (ACCEPT sent with its next ShareFetch) until the group has seen every record (a counter the driver
  processes share), then commits. Records/s is RECORDS over that wall time; broker CPU per record is the broker
  process's user+system CPU over the same window (``/proc/<pid>/stat``, JVM threads included) divided by
  RECORDS. The client's CPU (every driver process and this one) is measured over the same window, per record
  and in cores (CPU seconds / wall seconds).
- Redelivery latency after a RELEASE: one explicit member of a fresh group on a new 1-partition topic receives a
  record, acknowledges it RELEASE and commits (ShareAcknowledge), then polls: the time from the commit's start
  until the record is back (delivery count 2), REDELIVERIES times per round (each on a new record), p50 and p99.
  (A RELEASE piggybacked on the next ShareFetch instead comes back at once from klog but only after the fetch's
  max wait from Kafka 4.3, which answers that fetch before the released record is acquirable again.)

The driver processes share the machine's 2 cores with both brokers, so the figures are relative (the ratios), not either broker's ceiling; the load average is recorded. Targets (issue 35:
>= 1.5x Kafka's records/s, <= 0.5x its CPU per record) are reported, not asserted.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
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
#: records per topic at scale 1 (each consume measurement reads them all): enough that the fastest window (klog,
#: 100 B, ~1 M records/s on the 2-core machine) lasts about half a second and Kafka's a second or more, where
#: 30,000 took 0.1-0.5 s and a CPU figure was a few scheduler ticks; the whole run stays at 2-3 minutes
RECORDS = 500_000
#: records per record batch of the topics (written as such on both brokers: with a producer's linger the batches
#: would follow how fast each broker answered, and a ShareFetch acquires whole batches)
BATCH_RECORDS = 1000
REDELIVERIES = 20
TIMEOUT_S = 90.0
#: the members of one consume measurement run in up to this many driver processes (one thread per member,
#: spread evenly: 1 member in 1 process, 4 in 4, 16 in 4 of 4), the same for both brokers: one Python process
#: holds at most one core's worth of the GIL, so a single driver process set the pace with 4 and 16 members
DRIVER_PROCESSES = 4
#: the same share-group settings on both brokers (heartbeats every 500 ms: members get their assignment soon)
SHARE_PROPERTIES = {
    "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
    "group.share.record.lock.duration.ms": 30000, "group.share.partition.max.record.locks": 2000,
    "group.share.delivery.count.limit": 5,
}


def _topic(size: int) -> str:
    return f"share-bench-{size}"


def setup_topics(broker: RunningBroker, records: int) -> None:
    """The topics of both sizes, written as record batches of exactly BATCH_RECORDS records (the partitions in
    turn), so that both brokers' logs hold the same batches."""
    import klog

    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(_topic(size), PARTITIONS, 1) for size in SIZES])
    with klog.Producer(bootstrap_servers=broker.bootstrap, batch_size=1 << 20, linger_ms=5) as producer:
        for size in SIZES:
            payload = os.urandom(size)
            sent = [producer.send_batch(_topic(size), [payload] * min(BATCH_RECORDS, records - first),
                                        partition=(first // BATCH_RECORDS) % PARTITIONS)
                    for first in range(0, records, BATCH_RECORDS)]
            producer.flush()
            counts = {b.record_count for future in sent for b in future.result()}
            if max(counts) > BATCH_RECORDS or len(counts) > 1 + (records % BATCH_RECORDS != 0):
                raise RuntimeError(f"{broker.name}: {_topic(size)} written in batches of {sorted(counts)} records")


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


def _settled(broker: RunningBroker, group: str, count: int) -> None:
    """Waits until the coordinator has given ``group``'s ``count`` members their balanced assignment (each
    member the partition count Kafka's simple assignor wants, every partition shared by at most its desired
    sharing: with 16 members, one partition each and four members per partition), so that a round measures
    consumption, not the group settling: klog answers a member's first heartbeat with an assignment among the
    members joined so far and the 16 members then moved for up to a heartbeat interval into the round (one
    started with all four partitions), where Kafka's had their final ones before the clock started."""
    import klog
    from klog.broker.groups.share_assignor import desired_counts

    sharing, wanted = desired_counts(count, PARTITIONS)
    deadline = time.monotonic() + TIMEOUT_S
    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        while True:
            members = admin.describe_share_groups([group])[group].members
            per_partition: dict[tuple[str, int], int] = {}
            for m in members:
                for tp in m.assignment:
                    per_partition[(tp.topic, tp.partition)] = per_partition.get((tp.topic, tp.partition), 0) + 1
            if len(members) == count and sorted(len(m.assignment) for m in members) == sorted(wanted) \
                    and len(per_partition) == PARTITIONS and max(per_partition.values()) <= sharing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{broker.name}: {group}'s assignment did not settle")
            time.sleep(0.05)


def _members(bootstrap: str, name: str, topic: str, group: str, count: int, **config: Any) -> list[Any]:
    """``count`` explicit share consumers of ``group``, started in parallel, each with its assignment."""
    import klog

    members: list[Any] = [None] * count

    def start(i: int) -> None:
        members[i] = klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        acknowledgement_mode="explicit", **config)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + TIMEOUT_S
    while not all(m is not None and m._aio.assignment for m in members):
        if time.monotonic() > deadline:
            for m in members:
                if m is not None:
                    m.close()
            raise TimeoutError(f"{name}: {group}'s members not assigned")
        time.sleep(0.05)
    return members


def _driver_processes(count: int) -> int:
    """How many driver processes run ``count`` members (spread evenly, one thread each)."""
    return max(1, min(count, DRIVER_PROCESSES))


def _cpu_of(pids: Any) -> float:
    return sum(cpu_seconds(pid, children=False) for pid in pids if pid)


def _driver_loop(commands: Any, events: Any, seen: Any, go: Any, pids: Any) -> None:
    """A driver process: runs the consume rounds ``commands`` brings ((bootstrap, broker name, broker pid, topic,
    group, members, records) tuples; None ends it), so it is warm (imports, first calls) after the warm-up round,
    as one driver process of the whole run would be."""
    while (command := commands.get()) is not None:
        _drive(*command, events=events, seen=seen, go=go, pids=pids)


def _drive(bootstrap: str, name: str, broker_pid: int, topic: str, group: str, count: int, records: int, *,
           events: Any, seen: Any, go: Any, pids: Any) -> None:
    """``count`` members that consume until the members of every driver process together have ``records`` records
    (``seen``, shared). Reports on ``events``: ("ready", pid, None) once its members have their assignment, ("done",
    wall time, broker CPU, driver CPU) from the member that counted the last records once their ACCEPT is answered,
    then ("finished", pid, error or None, polls, empty polls)."""
    try:
        members = _members(bootstrap, name, topic, group, count)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        events.put(("finished", os.getpid(), repr(exc), 0, 0))
        return
    failures: list[BaseException] = []
    polls = [0, 0]   # poll_batch calls, those that returned no record

    def work(member: Any) -> None:
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and seen.value < records:
                batch = member.poll_batch(timeout=0.1)
                polls[0] += 1
                polls[1] += not batch.num_rows
                if batch.num_rows:
                    member.acknowledge_batch(batch, "accept")
                    with seen.get_lock():
                        before = seen.value
                        seen.value = before + batch.num_rows
                    if before < records <= before + batch.num_rows:   # the clock stops once this ACCEPT is answered
                        member.commit_sync()
                        events.put(("done", time.perf_counter(), cpu_seconds(broker_pid), _cpu_of(pids)))
            member.commit_sync()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    try:
        events.put(("ready", os.getpid(), None))
        if go.wait(TIMEOUT_S):
            threads = [threading.Thread(target=work, args=(m,)) for m in members]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            failures.append(TimeoutError("not started"))
    finally:
        for m in members:
            m.close()
        events.put(("finished", os.getpid(), repr(failures[0]) if failures else None, *polls))


class Drivers:
    """DRIVER_PROCESSES driver processes (spawned once, used for every consume round of both brokers)."""

    def __init__(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.seen, self.events, self.go = ctx.Value("q", 0), ctx.Queue(), ctx.Event()
        self.pids = ctx.Array("q", DRIVER_PROCESSES + 1)
        self.commands = [ctx.Queue() for _ in range(DRIVER_PROCESSES)]
        self.procs = [ctx.Process(target=_driver_loop, args=(q, self.events, self.seen, self.go, self.pids),
                                  daemon=True) for q in self.commands]
        for proc in self.procs:
            proc.start()
        self.pids[:] = [os.getpid()] + [proc.pid or 0 for proc in self.procs]

    def close(self) -> None:
        for q in self.commands:
            q.put(None)
        for proc in self.procs:
            proc.join(TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()

    def _next(self) -> tuple[str, list[Any]]:
        """The next event of the driver processes (an error once one of them exited, or after 2 TIMEOUT_S)."""
        deadline = time.monotonic() + TIMEOUT_S * 2
        while True:
            try:
                kind, *rest = self.events.get(timeout=1.0)
                return kind, rest
            except queue.Empty:
                for proc in self.procs:
                    if not proc.is_alive():
                        raise RuntimeError(f"driver process {proc.pid} exited ({proc.exitcode})") from None
                if time.monotonic() > deadline:
                    raise

    def consume_round(self, broker: RunningBroker, size: int, count: int, records: int, group: str
                      ) -> dict[str, float]:
        """Every record of the size's topic through ``count`` members in ``_driver_processes(count)`` driver
        processes: records/s, broker CPU per record and the driver's CPU (every driver process and this one)."""
        _earliest(broker, group)
        nproc = _driver_processes(count)
        self.seen.value = 0
        self.go.clear()
        for k in range(nproc):
            self.commands[k].put((broker.bootstrap, broker.name, broker.pid, _topic(size), group,
                                  count // nproc + (1 if k < count % nproc else 0), records))
        failures: list[str] = []
        done: list[tuple[float, float, float]] = []
        finished = ready = polls = empty_polls = 0
        try:
            while ready + finished < nproc:   # every driver's members assigned (or failed)
                kind, rest = self._next()
                ready += kind == "ready"
                if kind == "finished":
                    finished += 1
                    if rest[1]:
                        failures.append(rest[1])
            if not finished:
                _settled(broker, group, count)
            cpu0, client0, t0 = cpu_seconds(broker.pid), _cpu_of(self.pids), time.perf_counter()
        finally:
            self.go.set()
        while finished < nproc:
            kind, rest = self._next()
            if kind == "done":
                done.append((rest[0], rest[1], rest[2]))
            elif kind == "finished":
                finished += 1
                if rest[1]:
                    failures.append(rest[1])
                polls, empty_polls = polls + rest[2], empty_polls + rest[3]
        if failures:
            raise RuntimeError(f"{broker.name}: {failures[0]}")
        seen = self.seen.value
        if seen < records or not done:
            raise TimeoutError(f"{broker.name} {size} B x{count}: {seen} of {records} records")
        t1, cpu1, client1 = done[0]
        wall, cpu, client = t1 - t0, cpu1 - cpu0, client1 - client0
        return {"records": seen, "wall_s": wall, "records_per_s": seen / wall,
                "cpu_us_per_record": cpu / seen * 1e6, "broker_cpu_s": cpu,
                "client_cpu_us_per_record": client / seen * 1e6, "client_cores": client / wall,
                "driver_processes": nproc, "polls": polls, "empty_polls": empty_polls}


def redelivery_round(broker: RunningBroker, times: int, group: str) -> dict[str, float]:
    """RELEASE then poll: how long until the record is back (delivery count 2); p50 and p99 over ``times``."""
    import klog

    topic = f"share-bench-{group}"   # a topic of its own: every record it holds is one of this round's
    with klog.AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
    _earliest(broker, group)
    (member,) = _members(broker.bootstrap, broker.name, topic, group, 1)
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
    with both_brokers(workdir, records) as brokers, contextlib.closing(Drivers()) as drivers:
        consume_round = drivers.consume_round
        versions = {name: b.version for name, b in brokers.items()}
        # warm-up, not counted: the JVM compiles the share paths, every driver process imports and runs them once
        for name, broker in brokers.items():
            consume_round(broker, SIZES[0], max(CONSUMERS), records, f"warm-{name}")
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

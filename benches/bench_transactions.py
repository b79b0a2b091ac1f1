"""Transactions: klog vs Apache Kafka 4.x, paired in one run (issue 34, item 7).

Full run (a few minutes; writes ``benches/results/transactions.json``)::

    PYTHONPATH=. .venv/bin/python benches/bench_transactions.py [--rounds 5]

Short run (< 60 s, one round at a small volume): ``make bench`` collects ``test_transactions_short`` below, or
``python benches/bench_transactions.py --short``.

What is measured. Both brokers run at once (sidebyside.brokers: the same Kafka properties, including
``transaction.state.log.replication.factor=1`` and ``transaction.state.log.min.isr=1``), each with one
one-partition topic. Rounds alternate which broker goes first; the table gives medians over the rounds.

- Transactional produce, for each of TXN_SIZES records per transaction and each of CLIENTS: confluent-kafka's
  transactional producer (librdkafka, transaction protocol v1; one ``transactional.id`` per broker and size,
  ``init_transactions()`` before the rounds) writes RECORDS_PER_ROUND records of RECORD_SIZE bytes (at least
  MIN_COMMITS_PER_ROUND transactions' worth: 200,000 at 1,000 records per transaction) as records / size
  transactions of ``begin_transaction()``, ``produce()`` x size,
  ``commit_transaction()``; Apache Kafka's Java producer (:class:`JavaProducer`, transaction protocol v2 where the
  broker finalizes ``transaction.version`` 2, as both do) does the same with ``beginTransaction()``, ``send()``
  x size, ``commitTransaction()``. MB/s is the round's payload over its wall time (commits included); commit
  latency is the time of each commit call (it flushes the transaction's last records, then EndTxn and the
  markers), p50 and p99 over the round's commits.
- Consume of that same transactional data (committed transactions and their COMMIT markers): a confluent-kafka
  consumer assigned the partition from offset 0 reads CONSUME_RECORDS records with ``isolation.level``
  ``read_committed`` then ``read_uncommitted`` (order alternating by round); MB/s from assign to the last record.

Each produce round also reads the CPU its broker and its client used (``/proc``: the broker process, the Java
driver's JVM, or for confluent-kafka this process, librdkafka's threads included), per MB written: with the client
and the broker on the same cores and the cores the limit, a broker's MB/s goes as 1 / (client + broker CPU per MB),
so the klog/Kafka ratio the cores allow is Kafka's (client + broker) over klog's (``cores_allow``).

``--clients java --sizes 1000`` measures one client and size alone; ``--no-consume`` leaves out the consume rows.

``--broker-cpu [--checkouts A,B] [--sizes 10,100] [--runs 5]``: no Kafka and no JSON; one klog broker alone per run,
confluent-kafka's loop above against it, and the broker's CPU per transaction (:func:`broker_cpu`), for each klog
source tree given (before/after a change: ``--checkouts /path/to/main,.``, runs alternating their order).

The driver shares the machine's 2 cores with both brokers, so the figures are relative (the ratios), not either
broker's ceiling. Targets (issue 34: >= 1.5x Kafka's transactional throughput, <= 0.5x its commit p99) are
reported, not asserted: the machine is shared and the figures are for docs/performance.md ("Transactions").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
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

RESULTS = BENCHES / "results" / "transactions.json"
TOPIC = "txn-bench"
RECORD_SIZE = 1024
#: MB = 2^20 bytes, as Kafka's tools print it (and docs/performance.md's other figures)
MB = 1 << 20
TXN_SIZES = (10, 100, 1000)
#: Records written per transaction size and round at scale 1 (39 MB of payload), or MIN_COMMITS_PER_ROUND
#: transactions' worth where that is more.
RECORDS_PER_ROUND = 40_000
#: The fewest transactions a round times, per size, at scale 1. 40,000 records make only 40 transactions of 1,000
#: records: a window of 0.2-0.5 s whose MB/s one hiccup of either broker or client moves by tens of percent, and
#: whose commit p99 is its slowest commit (the quiet run of 2026-12-03: klog's rounds at 1,000 records per
#: transaction 109-189 MB/s with confluent-kafka, 127-255 MB/s with the Java client).
MIN_COMMITS_PER_ROUND = 200
#: Records read per consume measurement at scale 1 (no more than the first round writes).
CONSUME_RECORDS = 100_000
BROKERS = ("klog", "kafka")
#: The transactional clients measured, each against both brokers: librdkafka (confluent-kafka, transaction protocol
#: v1) and Apache Kafka's Java producer (protocol v2 where the broker finalizes transaction.version 2).
CLIENTS = ("confluent-kafka", "java")
#: The Java client's driver (run by the JDK's source-file launcher against the Kafka install's jars).
JAVA_DRIVER = BENCHES / "sidebyside" / "TxnProducerDriver.java"
#: How long a broker may take to answer set-up calls (topic creation, init_transactions) and to deliver a record.
TIMEOUT_S = 60.0
#: The producer's settings (both brokers): batches of a transaction's records go out while it is open.
PRODUCER_CONFIG = {"linger.ms": 5, "batch.size": 1 << 20, "acks": "all", "transaction.timeout.ms": 60000}


def _confluent() -> Any:
    import confluent_kafka

    return confluent_kafka


def create_topic(broker: RunningBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)


def transactional_producer(broker: RunningBroker, txn_size: int) -> Any:
    ck = _confluent()
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-bench-{txn_size}",
                            **PRODUCER_CONFIG})
    producer.init_transactions(TIMEOUT_S)
    return producer


def produce_round(producer: Any, txn_size: int, records: int, payload: bytes) -> dict[str, float]:
    """``records`` records in transactions of ``txn_size``; MB/s and the commit_transaction() times."""
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    commits: list[float] = []
    t0 = time.perf_counter()
    for _ in range(max(1, records // txn_size)):
        producer.begin_transaction()
        for _ in range(txn_size):
            while True:
                try:
                    producer.produce(TOPIC, payload, partition=0, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    producer.poll(0.01)
        producer.poll(0)
        c0 = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        commits.append(time.perf_counter() - c0)
    wall = time.perf_counter() - t0
    if failures:
        raise RuntimeError(f"{len(failures)} records not delivered: {failures[:3]}")
    written = len(commits) * txn_size
    commits.sort()
    return {"records": written, "wall_s": wall, "mb_per_s": written * len(payload) / wall / MB,
            "commits": len(commits), "commit_p50_ms": _quantile(commits, 0.50) * 1e3,
            "commit_p99_ms": _quantile(commits, 0.99) * 1e3}


class JavaProducer:
    """Apache Kafka's own transactional producer (the Java client of the Kafka install), driven through
    ``sidebyside/TxnProducerDriver.java`` in one JVM per broker: one producer per transaction size
    (``transactional.id`` ``txn-bench-java-SIZE``), the same settings as confluent-kafka's (PRODUCER_CONFIG).
    The Java client speaks transaction protocol v2 (KIP-890 part 2: the Produce adds the partition, no
    AddPartitionsToTxn; EndTxn v5) when the broker finalizes ``transaction.version`` 2; :attr:`versions` has the
    protocol each producer reported after ``initTransactions()``."""

    def __init__(self, broker: RunningBroker, log_path: Path) -> None:
        import subprocess

        from sidebyside.brokers import kafka_libs

        props = [f"{k}={v}" for k, v in PRODUCER_CONFIG.items()]
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed by close()
        self._proc = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseG1GC", "-cp", f"{kafka_libs()}/*", str(JAVA_DRIVER), broker.bootstrap,
             TOPIC, "txn-bench-java", str(RECORD_SIZE), *props],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)
        self.versions: dict[int, str] = {}

    def _ask(self, command: str) -> list[str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line or line.startswith("error"):
            raise RuntimeError(f"Java producer: {command!r} -> {line.strip() or 'exited'} (log: {self._log.name})")
        return line.split()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def init(self, txn_size: int) -> None:
        self.versions[txn_size] = self._ask(f"init {txn_size}")[1]

    def produce_round(self, txn_size: int, records: int) -> dict[str, float]:
        answer = self._ask(f"round {txn_size} {records}")
        written, wall, aborted = int(answer[1]), int(answer[2]) / 1e9, int(answer[3])
        commits = sorted(int(c) / 1e9 for c in answer[4:])
        return {"records": written, "wall_s": wall, "mb_per_s": written * RECORD_SIZE / wall / MB,
                "commits": len(commits), "commit_p50_ms": _quantile(commits, 0.50) * 1e3,
                "commit_p99_ms": _quantile(commits, 0.99) * 1e3, "aborted": aborted}

    def close(self) -> None:
        import subprocess

        try:
            if self._proc.poll() is None:
                assert self._proc.stdin is not None
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            self._log.close()


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def consume_round(broker: RunningBroker, isolation: str, records: int) -> dict[str, float]:
    """Read ``records`` records of the partition from offset 0 with ``isolation.level=isolation``."""
    ck = _confluent()
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"txn-bench-{isolation}",
                            "enable.auto.commit": False, "isolation.level": isolation,
                            "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    try:
        read, size = 0, 0
        t0 = time.perf_counter()
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while read < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{broker.name} {isolation}: {read} of {records} records read")
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"{broker.name} {isolation}: {msg.error()}")
                read += 1
                size += len(msg.value())
        wall = time.perf_counter() - t0
    finally:
        consumer.close()
    return {"records": read, "wall_s": wall, "mb_per_s": size / wall / MB}


@contextlib.contextmanager
def both_brokers(workdir: Path) -> Iterator[dict[str, RunningBroker]]:
    props = {**shared_properties(), "auto.create.topics.enable": "false"}
    with contextlib.ExitStack() as stack:
        brokers = {name: stack.enter_context(LAUNCHERS[name](workdir / name, props)) for name in BROKERS}
        for broker in brokers.values():
            create_topic(broker)
        yield brokers


def _median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def own_cpu_seconds() -> float:
    """User + system CPU of this process (all its threads: confluent-kafka's librdkafka ones too), not of its
    children (the brokers, the Java drivers)."""
    t = os.times()
    return t.user + t.system


def with_cpu(measure: Callable[[], dict[str, float]], broker_pid: int,
             client_cpu: Callable[[], float]) -> dict[str, float]:
    """``measure()``'s figures with the CPU seconds the broker and the client used meanwhile, and each per MB
    written (ms): what the cores allow (:func:`cores_allow`)."""
    b0, c0 = cpu_seconds(broker_pid), client_cpu()
    m = measure()
    broker_s, client_s = cpu_seconds(broker_pid) - b0, client_cpu() - c0
    mb = m["records"] * RECORD_SIZE / MB
    return {**m, "broker_cpu_s": broker_s, "client_cpu_s": client_s,
            "broker_cpu_ms_per_mb": broker_s / mb * 1e3, "client_cpu_ms_per_mb": client_s / mb * 1e3}


def cores_allow(row: dict[str, Any]) -> float | None:
    """The klog/Kafka MB/s ratio the shared cores allow for a produce row (medians per broker): with the client and
    the broker on the same cores and the cores the limit, MB/s goes as 1 / (client + broker CPU per MB), so the
    ratio is Kafka's client + broker CPU per MB over klog's. None: the row has no CPU figures."""
    try:
        kafka = row["kafka"]["client_cpu_ms_per_mb"] + row["kafka"]["broker_cpu_ms_per_mb"]
        klog = row["klog"]["client_cpu_ms_per_mb"] + row["klog"]["broker_cpu_ms_per_mb"]
    except KeyError:
        return None
    return _ratio(kafka, klog)


def run(workdir: Path, rounds: int, scale: float, log: Callable[[str], None] = print,
        clients: tuple[str, ...] = CLIENTS, sizes: tuple[int, ...] = TXN_SIZES, consume: bool = True
        ) -> dict[str, Any]:
    """The paired rounds of ``clients`` at ``sizes`` records per transaction (a subset of CLIENTS and TXN_SIZES),
    then, with ``consume``, the consume rows."""
    clients = tuple(c for c in CLIENTS if c in clients)
    sizes = tuple(sorted(set(sizes)))
    records = max(max(sizes), int(RECORDS_PER_ROUND * scale))
    #: records per round of each transaction size
    records_of = {n: max(records, max(1, int(MIN_COMMITS_PER_ROUND * scale)) * n) for n in sizes}
    to_consume = max(1, min(int(CONSUME_RECORDS * scale), sum(records_of.values())))
    payload = os.urandom(RECORD_SIZE)
    produce: dict[str, dict[int, dict[str, list[dict[str, float]]]]] = {
        c: {n: {b: [] for b in BROKERS} for n in sizes} for c in clients}
    consumed_samples: dict[str, dict[str, list[dict[str, float]]]] = {
        iso: {b: [] for b in BROKERS} for iso in (("read_committed", "read_uncommitted") if consume else ())}
    started, load_at_start = time.time(), os.getloadavg()[0]
    java_versions: dict[str, dict[int, str]] = {}
    with both_brokers(workdir) as brokers, contextlib.ExitStack() as stack:
        versions = {name: b.version for name, b in brokers.items()}
        #: (client, broker, size) -> a function that writes one round: records -> its measurement
        rounds_of: dict[tuple[str, str, int], Callable[[int], dict[str, float]]] = {}
        for name, broker in brokers.items():
            if "confluent-kafka" in clients:
                for n in sizes:
                    producer = transactional_producer(broker, n)
                    stack.callback(producer.close)  # before the brokers stop: no reconnect attempts at exit
                    rounds_of["confluent-kafka", name, n] = (
                        lambda count, p=producer, n=n, b=broker.pid: with_cpu(
                            lambda: produce_round(p, n, count, payload), b, own_cpu_seconds))
            if "java" in clients:
                java = JavaProducer(broker, workdir / f"java-producer-{name}.log")
                stack.callback(java.close)
                for n in sizes:
                    java.init(n)
                    rounds_of["java", name, n] = lambda count, j=java, n=n, b=broker.pid: with_cpu(
                        lambda: j.produce_round(n, count), b, lambda: cpu_seconds(j.pid))
                java_versions[name] = java.versions
            for client in clients:
                for n in sizes:
                    # Warm-up, not counted: the coordinator's first writes, the JVMs' compilation of the paths.
                    rounds_of[client, name, n](n * max(1, (1000 if client == "java" else 100) // n))
        for r in range(rounds):
            for i, n in enumerate(sizes):
                for client in (clients if r % 2 == 0 else clients[::-1]):
                    for name in (BROKERS if (r + i) % 2 == 0 else BROKERS[::-1]):
                        m = rounds_of[client, name, n](records_of[n])
                        produce[client][n][name].append(m)
                        retried = f", {m['aborted']:.0f} aborted and written again" if m.get("aborted") else ""
                        log(f"round {r + 1}/{rounds} {client:15} produce {n:5}/txn {name:5} {m['mb_per_s']:7.2f} MB/s "
                            f"commit p50 {m['commit_p50_ms']:6.2f} ms p99 {m['commit_p99_ms']:6.2f} ms "
                            f"({m['commits']} txns{retried}); CPU ms/MB client {m['client_cpu_ms_per_mb']:.2f} "
                            f"broker {m['broker_cpu_ms_per_mb']:.2f}; load {os.getloadavg()[0]:.1f}")
            for j, iso in enumerate(consumed_samples if r % 2 == 0 else list(consumed_samples)[::-1]):
                for name in (BROKERS if (r + j) % 2 == 0 else BROKERS[::-1]):
                    m = consume_round(brokers[name], iso, to_consume)
                    consumed_samples[iso][name].append(m)
                    log(f"round {r + 1}/{rounds} consume {iso:16} {name:5} {m['mb_per_s']:7.2f} MB/s")
    tables: dict[str, dict[str, Any]] = {}
    for client in clients:
        table = tables[client] = {}
        for n in sizes:
            row: dict[str, Any] = {name: _median_of(produce[client][n][name]) for name in BROKERS}
            row["mb_per_s_ratio"] = _ratio(row["klog"]["mb_per_s"], row["kafka"]["mb_per_s"])
            row["cores_allow_ratio"] = cores_allow(row)
            row["commit_p50_ratio"] = _ratio(row["klog"]["commit_p50_ms"], row["kafka"]["commit_p50_ms"])
            row["commit_p99_ratio"] = _ratio(row["klog"]["commit_p99_ms"], row["kafka"]["commit_p99_ms"])
            table[str(n)] = row
    consumed: dict[str, Any] = {}
    for iso in consumed_samples:
        row = {name: _median_of(consumed_samples[iso][name]) for name in BROKERS}
        row["mb_per_s_ratio"] = _ratio(row["klog"]["mb_per_s"], row["kafka"]["mb_per_s"])
        consumed[iso] = row
    #: "produce": confluent-kafka's rows (as before the Java client was measured), "produce_java": the Java client's
    result: dict[str, Any] = {
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "rounds": rounds, "scale": scale,
        "records_per_round": records,
        "records_per_round_by_size": {str(n): count for n, count in records_of.items()}, "record_size": RECORD_SIZE,
        "consume_records": to_consume,
        "versions": versions, "cpus": os.cpu_count(), "loadavg_1m": [load_at_start, os.getloadavg()[0]],
        "clients": list(clients), "sizes": list(sizes)}
    if "confluent-kafka" in tables:
        result["produce"] = tables["confluent-kafka"]
    if "java" in tables:
        result["produce_java"] = tables["java"]
        result["java_transaction_version"] = {name: {str(n): v for n, v in vs.items()}
                                              for name, vs in java_versions.items()}
    result["consume"] = consumed
    result["samples"] = {"produce": {c: {str(n): s for n, s in produce[c].items()} for c in clients},
                         "consume": consumed_samples}
    return result


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _table(rows: dict[str, Any], header: str, cells: Callable[[Any, Any, Any], str]) -> list[str]:
    """A markdown table of a produce table's rows (one per size): ``cells(kafka, klog, row)`` after the size."""
    return [header, "|" + "---|" * (header.count("|") - 1),
            *(f"| {n} | {cells(row['kafka'], row['klog'], row)} |" for n, row in rows.items()), ""]


def format_table(result: dict[str, Any]) -> str:
    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}×"

    lines: list[str] = []
    for key, client in (("produce", "confluent-kafka (librdkafka, transaction protocol v1)"),
                        ("produce_java", "Java client (Kafka 4.3.1's KafkaProducer, transaction protocol "
                                         + "/".join(sorted({v for vs in result.get("java_transaction_version", {})
                                                           .values() for v in vs.values()})) + ")")):
        if key not in result:
            continue
        lines += [f"{client}:", ""]
        lines += _table(result[key], "| records/txn | Kafka MB/s | klog MB/s | klog/Kafka | Kafka commit p50 / p99 ms | "
                        "klog commit p50 / p99 ms | klog/Kafka p50 | klog/Kafka p99 |",
                        lambda k, o, row: f"{k['mb_per_s']:.2f} | {o['mb_per_s']:.2f} | {x(row['mb_per_s_ratio'])} | "
                                          f"{k['commit_p50_ms']:.2f} / {k['commit_p99_ms']:.2f} | "
                                          f"{o['commit_p50_ms']:.2f} / {o['commit_p99_ms']:.2f} | "
                                          f"{x(row['commit_p50_ratio'])} | {x(row['commit_p99_ratio'])}")
        if any(row.get("cores_allow_ratio") for row in result[key].values()):
            lines += ["CPU per MB written (ms; the client and the broker share the cores):", ""]
            lines += _table(result[key], "| records/txn | Kafka client / broker | klog client / broker | "
                            "klog/Kafka MB/s | the cores allow |",
                            lambda k, o, row: f"{k['client_cpu_ms_per_mb']:.2f} / {k['broker_cpu_ms_per_mb']:.2f} | "
                                              f"{o['client_cpu_ms_per_mb']:.2f} / {o['broker_cpu_ms_per_mb']:.2f} | "
                                              f"{x(row['mb_per_s_ratio'])} | {x(row.get('cores_allow_ratio'))}")
    if not result["consume"]:
        return "\n".join(lines)
    lines += ["| consume | Kafka MB/s | klog MB/s | klog/Kafka |", "|---|---|---|---|"]
    for iso, row in result["consume"].items():
        lines.append(f"| {iso} | {row['kafka']['mb_per_s']:.2f} | {row['klog']['mb_per_s']:.2f} | "
                     f"{x(row['mb_per_s_ratio'])} |")
    return "\n".join(lines)


# -- make bench: the short mode ----------------------------------------------------------------------------------

#: Short mode: one round at this share of the full volume, so the whole test (Kafka's start-up included) stays under
#: a minute on 2 cores. A smoke run (Kafka's figures are still the JVM's warm-up); the docs' figures come from the
#: full mode.
SHORT_SCALE = 0.2


def test_transactions_short(benchmark: Any, tmp_path: Path) -> None:
    result = benchmark.pedantic(run, args=(tmp_path, 1, SHORT_SCALE), rounds=1, iterations=1)
    (tmp_path / "transactions.json").write_text(json.dumps(result, indent=1))
    print("\n" + format_table(result))
    for key in ("produce", "produce_java"):
        assert set(result[key]) == {str(n) for n in TXN_SIZES}
        for n, row in result[key].items():
            benchmark.extra_info[f"{key} {n}/txn klog/kafka"] = row["mb_per_s_ratio"]
            for broker in BROKERS:
                assert row[broker]["records"] == result["records_per_round_by_size"][n], \
                    f"{broker} {n}/txn: records missing"
                assert row[broker]["mb_per_s"] > 0 and row[broker]["commit_p99_ms"] > 0
    for iso, row in result["consume"].items():
        benchmark.extra_info[f"consume {iso} klog/kafka"] = row["mb_per_s_ratio"]
        for broker in BROKERS:
            assert row[broker]["records"] >= result["consume_records"], f"{broker} {iso}: records missing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This bench's own options (passed to :func:`run`): which clients and sizes to measure, and the consume rows."""
    parser.add_argument("--clients", type=_choices(CLIENTS, str), default=CLIENTS,
                        help=f"comma-separated, of {','.join(CLIENTS)} (default: all)")
    parser.add_argument("--sizes", type=_choices(TXN_SIZES, int), default=TXN_SIZES,
                        help=f"records per transaction, comma-separated, of {','.join(map(str, TXN_SIZES))}")
    parser.add_argument("--no-consume", dest="consume", action="store_false",
                        help="leave out the read_committed and read_uncommitted rows")


def _choices(allowed: tuple[Any, ...], kind: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        chosen = tuple(kind(v) for v in text.split(",") if v)
        unknown = [v for v in chosen if v not in allowed]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(map(str, allowed))}")
        return chosen
    return parse


#: Broker-alone mode (``--broker-cpu``): timed transactions per run and size, after WARMUP_TRANSACTIONS untimed.
BROKER_CPU_TRANSACTIONS = 2000
WARMUP_TRANSACTIONS = 300


def broker_cpu(checkouts: list[Path], sizes: tuple[int, ...], runs: int, transactions: int,
               log: Callable[[str], None] = print) -> dict[str, Any]:
    """One klog broker alone per run and checkout (its ``klog`` package from that source tree, through
    ``PYTHONPATH``), confluent-kafka's transactional loop of :func:`produce_round` against it: the broker's CPU
    (``/proc``, all its threads) per transaction over ``transactions`` timed ones after WARMUP_TRANSACTIONS. Runs
    alternate the checkouts' order, so a before/after comparison (``--checkouts /work/main,.``) shares the machine's
    load. Medians per checkout and size, and every run's figures."""
    payload = os.urandom(RECORD_SIZE)
    samples: dict[str, dict[int, list[dict[str, float]]]] = {str(c): {n: [] for n in sizes} for c in checkouts}
    started, load_at_start = time.time(), os.getloadavg()[0]
    saved = os.environ.get("PYTHONPATH")
    try:
        for r in range(runs):
            for checkout in (checkouts if r % 2 == 0 else checkouts[::-1]):
                os.environ["PYTHONPATH"] = str(checkout)   # the broker process imports klog from there
                for n in sizes:
                    work = Path(tempfile.mkdtemp(prefix="txnbench-cpu-"))
                    try:
                        props = {**shared_properties(), "auto.create.topics.enable": "false"}
                        with LAUNCHERS["klog"](work / "klog", props) as broker:
                            create_topic(broker)
                            producer = transactional_producer(broker, n)
                            try:
                                produce_round(producer, n, WARMUP_TRANSACTIONS * n, payload)
                                m = with_cpu(lambda: produce_round(producer, n, transactions * n, payload),
                                             broker.pid, own_cpu_seconds)
                            finally:
                                producer.close()
                    finally:
                        shutil.rmtree(work, ignore_errors=True)
                    m["broker_cpu_ms_per_txn"] = m["broker_cpu_s"] / m["commits"] * 1e3
                    m["wall_ms_per_txn"] = m["wall_s"] / m["commits"] * 1e3
                    samples[str(checkout)][n].append(m)
                    log(f"run {r + 1}/{runs} {str(checkout):30} {n:5}/txn broker CPU "
                        f"{m['broker_cpu_ms_per_txn']:.3f} ms/txn, {m['wall_ms_per_txn']:.3f} ms/txn wall, "
                        f"{m['mb_per_s']:.2f} MB/s; load {os.getloadavg()[0]:.1f}")
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return {"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "runs": runs,
            "transactions": transactions, "loadavg_1m": [load_at_start, os.getloadavg()[0]],
            "medians": {c: {str(n): _median_of(s) for n, s in by_size.items()} for c, by_size in samples.items()},
            "samples": {c: {str(n): s for n, s in by_size.items()} for c, by_size in samples.items()}}


def broker_cpu_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="klog's broker CPU per transaction, one broker alone "
                                                 "(--broker-cpu; no Kafka, no JSON written)")
    parser.add_argument("--broker-cpu", action="store_true", required=True)
    parser.add_argument("--checkouts", type=lambda t: [Path(p).resolve() for p in t.split(",") if p],
                        default=[BENCHES.parent], help="comma-separated klog source trees (default: this one)")
    parser.add_argument("--sizes", type=_choices(TXN_SIZES, int), default=(10, 100),
                        help="records per transaction, comma-separated (default: 10,100)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--transactions", type=int, default=BROKER_CPU_TRANSACTIONS)
    args = parser.parse_args(argv)
    result = broker_cpu(args.checkouts, args.sizes, args.runs, args.transactions,
                        lambda line: print(line, flush=True))
    for checkout, by_size in result["medians"].items():
        for n, m in by_size.items():
            print(f"{checkout:30} {n:>5}/txn: broker CPU {m['broker_cpu_ms_per_txn']:.3f} ms/txn (median of "
                  f"{result['runs']}), wall {m['wall_ms_per_txn']:.3f} ms/txn")
    print(f"load average {result['loadavg_1m'][0]:.1f} -> {result['loadavg_1m'][1]:.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--broker-cpu" in argv:
        return broker_cpu_main(argv)
    return paired_main(argv, doc=__doc__, run=run, format_table=format_table, results=RESULTS,
                       short_scale=SHORT_SCALE, rounds=5, prefix="txnbench-", add_arguments=add_arguments)


if __name__ == "__main__":
    sys.exit(main())

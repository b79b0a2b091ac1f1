"""Broker CPU per MB of produced records when the leader recompresses batches to the topic's ``compression.type``:
klog (native core) vs Apache Kafka 4.x (LogValidator), both brokers up in one run, rounds alternating them.

Run: ``python benches/bench_recompression.py`` (``--mb 64 --rounds 3``), or
``.venv/bin/pytest benches/bench_recompression.py -p benchmark -o addopts="" -s`` (``KLOG_BENCH_RECOMPRESS_MB``).

Workload: one prebuilt batch of 512 records of ~1 KiB text (words drawn from a small vocabulary, about 4:1 with
lz4), encoded once per producer codec, sent over the wire (Produce v9, acks=1, one request at a time) to a fresh
one-partition topic of each broker until ``--mb`` MiB of uncompressed records were sent. The broker's CPU is its
process's CPU time over the phase (/proc/<pid>/task/*/schedstat, the JVM's every thread included) per MiB of
uncompressed records. A first pass of every scenario warms both brokers up (the JIT) and is not counted. Each
scenario's "extra" subtracts the same producer codec into a ``producer`` topic (no recompression): what the
recompression itself costs. No target is asserted: the figures compare the brokers on one machine in one run.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

RECORDS_PER_BATCH = 512
#: (producer codec, topic compression.type); the "producer" rows are the baselines
SCENARIOS = [("lz4", "producer"), ("lz4", "zstd"), ("none", "producer"), ("none", "gzip"), ("none", "lz4"),
             ("zstd", "producer"), ("zstd", "uncompressed"), ("snappy", "producer"), ("snappy", "gzip")]


def _family(pid: int) -> list[int]:
    """The process and its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    family, todo = [pid], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        family += children
        todo += children
    return family


def _cpu_s(pid: int) -> float:
    """CPU seconds run so far by the live threads of the process and its descendants (schedstat: nanoseconds,
    where /proc/<pid>/stat counts 10 ms ticks, too coarse for a few MiB); both brokers keep their threads."""
    total = 0
    for member in _family(pid):
        for task in Path(f"/proc/{member}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):  # the thread ended meanwhile
                continue
    return total / 1e9


def _batches() -> tuple[dict[str, bytes], int]:
    from klog.records import encode_batch

    rng = random.Random(7)
    words = [("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))))
             for _ in range(400)]
    now = int(time.time() * 1000)
    rows = []
    for i in range(RECORDS_PER_BATCH):
        text = " ".join(rng.choice(words) for _ in range(170))[:1024].encode()
        rows.append({"key": b"key-%d" % i, "value": text, "timestamp": now})
    plain = sum(len(r["value"]) + len(r["key"]) for r in rows)
    return {codec: encode_batch(rows, compression=codec) for codec in ("none", "gzip", "snappy", "lz4", "zstd")}, plain


def _topic(bootstrap: str, codec: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"recompress-{codec}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": codec})])[topic].result(60)
    return topic


def _produce(wire, topic: str, batch: bytes) -> int:
    from klog.protocol import ApiKey

    response = wire.request(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return int(response.responses[0].partition_responses[0].error_code)


def _phase(bootstrap: str, pid: int, producer_codec: str, topic_codec: str, batch: bytes, batch_mb: float,
           mb: float) -> float:
    """Broker CPU seconds per MiB of uncompressed records for one scenario."""
    from klog.testing.wire import WireClient

    topic = _topic(bootstrap, topic_codec)
    host, port = bootstrap.rsplit(":", 1)
    with WireClient(host, int(port), timeout=60) as wire:
        for _ in range(300):  # a new topic gets its leader a moment after CreateTopics answers
            if _produce(wire, topic, batch) == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{bootstrap}: {topic} never accepted a batch")
        count = max(1, round(mb / batch_mb))
        before = _cpu_s(pid)
        for _ in range(count):
            code = _produce(wire, topic, batch)
            assert code == 0, (producer_codec, topic_codec, code)
        return (_cpu_s(pid) - before) / (count * batch_mb)


def run(mb: float = 64, rounds: int = 3) -> tuple[dict[tuple[str, str, str], float], float]:
    from klog.testing.kafka import apache_kafka, free_port
    from klog.testing.process import BrokerProcess

    batches, plain = _batches()
    batch_mb = plain / (1 << 20)
    with tempfile.TemporaryDirectory(prefix="klog-bench-recompress-") as root:
        klog_broker = BrokerProcess(Path(root) / "klog", {"log.flush.interval.messages": 2**62})
        with klog_broker, apache_kafka(Path(root) / "kafka", free_port(), heap="1G") as kafka:
            brokers = {"klog": (klog_broker.bootstrap_servers, klog_broker.pid), "kafka": (str(kafka), kafka.pid)}
            for name, (bootstrap, pid) in brokers.items():  # warm-up, not counted
                for producer_codec, topic_codec in SCENARIOS:
                    _phase(bootstrap, pid, producer_codec, topic_codec, batches[producer_codec], batch_mb,
                           max(mb / 4, batch_mb))
            best: dict[tuple[str, str, str], float] = {}
            for _ in range(rounds):
                for producer_codec, topic_codec in SCENARIOS:
                    for name, (bootstrap, pid) in brokers.items():  # alternate: drift hits both alike
                        cpu = _phase(bootstrap, pid, producer_codec, topic_codec, batches[producer_codec],
                                     batch_mb, mb)
                        key = (name, producer_codec, topic_codec)
                        best[key] = min(best.get(key, cpu), cpu)
    return best, batch_mb


def report(best: dict[tuple[str, str, str], float], mb: float, rounds: int, batch_mb: float) -> str:
    lines = [f"broker CPU ms per MiB of uncompressed records, {mb:g} MiB per phase in {batch_mb:.2f} MiB batches, "
             f"best of {rounds} rounds (extra: minus the same producer codec into a 'producer' topic)",
             f"{'producer -> topic':<24}{'klog ms/MiB':>12}{'kafka ms/MiB':>13}{'klog extra':>12}{'kafka extra':>12}"]
    for producer_codec, topic_codec in SCENARIOS:
        row = f"{producer_codec + ' -> ' + topic_codec:<24}"
        cells, extras = [], []
        for name in ("klog", "kafka"):
            ms = 1000 * best[(name, producer_codec, topic_codec)]
            base = best.get((name, producer_codec, "producer"))
            cells.append(f"{ms:>12.1f}" if name == "klog" else f"{ms:>13.1f}")
            extras.append("" if topic_codec == "producer" or base is None else f"{ms - 1000 * base:>12.1f}")
        lines.append(row + "".join(cells) + "".join(e or f"{'-':>12}" for e in extras))
    return "\n".join(lines)


def test_recompression_cost_against_kafka() -> None:
    pytest = __import__("pytest")
    pytest.importorskip("confluent_kafka")
    mb = float(os.environ.get("KLOG_BENCH_RECOMPRESS_MB", "64"))
    rounds = int(os.environ.get("KLOG_BENCH_RECOMPRESS_ROUNDS", "3"))
    best, batch_mb = run(mb, rounds)
    print("\n" + report(best, mb, rounds, batch_mb))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=64, help="MiB of uncompressed records per phase")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    best, batch_mb = run(args.mb, args.rounds)
    print(report(best, args.mb, args.rounds, batch_mb))
    return 0


if __name__ == "__main__":
    sys.exit(main())

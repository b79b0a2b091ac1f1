"""Log cleaner throughput: klog's native cleaner vs Apache Kafka's on the same data, in the same run.

Run: ``.venv/bin/pytest benches/bench_cleaner.py -p benchmark -o addopts="" -s``
(``BENCH_CLEANER_MB`` sets the size of the dirty log, default 64.)

Both brokers get the same records through the same client (confluent-kafka, idempotent producer, uncompressed
batches): ``BENCH_CLEANER_MB`` MB of updates over 50,000 keys (~8 versions of each), written to a topic with
``cleanup.policy=delete`` and 1 MiB segments (Kafka's smallest), then one segment of filler so the data is out of
the active segment. The clock starts when IncrementalAlterConfigs switches the topic to ``compact``
(``min.cleanable.dirty.ratio=0.01``, ``log.cleaner.backoff.ms=50`` on both) and stops when the broker's
``cleaner-offset-checkpoint`` (the same file in both) passes the data: one cleaning pass over the whole dirty log.
Cleaner MB/s = log bytes before cleaning / that time. Kafka's own figure for the pass (its "MB of log processed in
... seconds" line) is printed too. Then the same volume of updates is produced again to the now compacted topic
while the cleaner cleans each rolled segment: produce MB/s while cleaning, against the first (delete-policy,
no cleaning) produce on the same broker and against Kafka's. Memory: the klog broker's peak RSS growth during the
pass (sampled every 10 ms) against its ``log.cleaner.dedupe.buffer.size``.

Target (asserted last): klog's cleaner >= 2x Kafka's MB/s.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from klog.testing.kafka import apache_kafka  # noqa: E402
from klog.testing.kafka_tools import kafka_libs_dir  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402

MB = int(os.environ.get("BENCH_CLEANER_MB", "64"))
KEYS = 50_000
VALUE_BYTES = 150
SEGMENT = 1_048_576
DEDUPE_BUFFER = 134_217_728
BROKER_CONFIG = {"log.cleaner.backoff.ms": 50, "log.cleaner.dedupe.buffer.size": DEDUPE_BUFFER}
TOPIC = "cleaner-bench"
RESULTS: dict[str, dict[str, float]] = {}


def produce_updates(bootstrap: str, seed: int) -> tuple[int, float, float]:
    """``MB`` MB of updates over ``KEYS`` keys. Returns (offset after the last one, seconds, MB/s)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 20, "batch.size": 262144, "compression.type": "none"})
    rng = random.Random(seed)
    value = bytes(rng.randrange(256) for _ in range(VALUE_BYTES))
    records = MB * 1_000_000 // (VALUE_BYTES + 40)
    last = [-1]

    def sent(err: Any, msg: Any) -> None:
        assert err is None, err
        last[0] = max(last[0], msg.offset())

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, key=b"key-%06d" % rng.randrange(KEYS), value=value, partition=0,
                                 on_delivery=sent)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    seconds = time.perf_counter() - start
    return last[0] + 1, seconds, records * (VALUE_BYTES + 10) / 1e6 / seconds


def produce(bootstrap: str) -> tuple[int, float]:
    """The dirty log: updates, then a segment of filler. Returns (end of the updates, their produce MB/s)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT)})])[TOPIC].result(30)
    end, _, mb_s = produce_updates(bootstrap, 20261124)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(SEGMENT // 1000 + 200):
        producer.produce(TOPIC, key=b"filler-%d" % i, value=b"f" * 1000, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return end, mb_s


def produce_while_cleaning(bootstrap: str, data_dir: Path) -> dict[str, float]:
    """The same volume of updates again, now to the compacted topic: the cleaner cleans each segment that rolls
    (dirty ratio 0.01). Returns the produce MB/s and how many cleaning passes finished meanwhile."""
    passes, seen = 0, checkpoint(data_dir)
    done: list[tuple[int, float, float]] = []
    worker = threading.Thread(target=lambda: done.append(produce_updates(bootstrap, 1124)))
    worker.start()
    while worker.is_alive():
        now = checkpoint(data_dir)
        if now != seen:
            passes, seen = passes + 1, now
        worker.join(0.05)
    assert done, "the producer failed"
    return {"produce_mb_s_cleaning": done[0][2], "passes_while_producing": passes}


def checkpoint(data_dir: Path) -> int:
    try:
        for line in (data_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]:
            t, p, o = line.split()
            if t == TOPIC and p == "0":
                return int(o)
    except FileNotFoundError:
        pass
    return -1


def log_bytes(data_dir: Path) -> int:
    return sum(f.stat().st_size for f in (data_dir / f"{TOPIC}-0").glob("*.log"))


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def clean_and_time(bootstrap: str, data_dir: Path, end: int, pid: int | None) -> dict[str, float]:
    before = log_bytes(data_dir)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    change = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
    rss_before = rss(pid) if pid else 0
    peak = rss_before
    start = time.perf_counter()
    admin.incremental_alter_configs([change])[change].result(30)
    deadline = time.monotonic() + 600
    while checkpoint(data_dir) < end:
        assert time.monotonic() < deadline, "not cleaned in 10 minutes"
        if pid:
            peak = max(peak, rss(pid))
        time.sleep(0.01)
    seconds = time.perf_counter() - start
    after = log_bytes(data_dir)
    return {"bytes_before": before, "bytes_after": after, "seconds": seconds, "mb_s": before / 1e6 / seconds,
            "rss_growth": peak - rss_before}


def test_klog_cleaner(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("klog-cleaner")
    with BrokerProcess(str(data), BROKER_CONFIG) as broker:
        end, produce_mb_s = produce(broker.bootstrap_servers)
        RESULTS["klog"] = clean_and_time(broker.bootstrap_servers, data, end, broker.pid)
        RESULTS["klog"].update(produce_while_cleaning(broker.bootstrap_servers, data), produce_mb_s=produce_mb_s)
    r = RESULTS["klog"]
    print(f"\nklog: {r['bytes_before'] / 1e6:.1f} MB cleaned to {r['bytes_after'] / 1e6:.1f} MB in "
          f"{r['seconds']:.2f} s = {r['mb_s']:.1f} MB/s; broker RSS +{r['rss_growth'] / 1e6:.1f} MB during the pass "
          f"(dedupe buffer {DEDUPE_BUFFER / 1e6:.0f} MB)")
    print_produce("klog", r)


def print_produce(name: str, r: dict[str, float]) -> None:
    print(f"{name}: produce {r['produce_mb_s']:.1f} MB/s to the delete-policy topic, "
          f"{r['produce_mb_s_cleaning']:.1f} MB/s to it compacted while the cleaner ran "
          f"({r['passes_while_producing']:.0f} passes finished meanwhile)")


def test_kafka_cleaner(tmp_path_factory: pytest.TempPathFactory) -> None:
    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Kafka jars missing: run tools/install-peers.sh")
    base = tmp_path_factory.mktemp("kafka-cleaner")
    with apache_kafka(base, config=BROKER_CONFIG, libs=libs) as bootstrap:
        end, produce_mb_s = produce(bootstrap)
        RESULTS["kafka"] = clean_and_time(bootstrap, base / "kafka-data", end, None)
        RESULTS["kafka"].update(produce_while_cleaning(bootstrap, base / "kafka-data"), produce_mb_s=produce_mb_s)
        text = (base / "kafka.log").read_text(errors="replace")
    r = RESULTS["kafka"]
    own = re.findall(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)", text)
    print(f"\nkafka: {r['bytes_before'] / 1e6:.1f} MB cleaned to {r['bytes_after'] / 1e6:.1f} MB in "
          f"{r['seconds']:.2f} s = {r['mb_s']:.1f} MB/s; Kafka's own cleaner log: {own}")
    print_produce("kafka", r)


def test_cleaner_targets() -> None:
    if "klog" not in RESULTS or "kafka" not in RESULTS:
        pytest.skip("needs both runs")
    ratio = RESULTS["klog"]["mb_s"] / RESULTS["kafka"]["mb_s"]
    produce_ratio = RESULTS["klog"]["produce_mb_s_cleaning"] / RESULTS["kafka"]["produce_mb_s_cleaning"]
    print(f"\ncleaner MB/s klog/kafka = {ratio:.2f}x (target >= 2x); produce MB/s to a compacted topic while "
          f"cleaning klog/kafka = {produce_ratio:.2f}x")
    assert abs(RESULTS["klog"]["bytes_after"] - RESULTS["kafka"]["bytes_after"]) < 0.5 * RESULTS["kafka"]["bytes_after"]
    assert ratio >= 2.0

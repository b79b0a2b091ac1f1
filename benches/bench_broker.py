"""klog-broker vs Apache Kafka 4.x on this machine, same client (confluent-kafka), same settings, same run.

Run: ``.venv/bin/pytest benches/bench_broker.py -p benchmark -o addopts="" --benchmark-only -s``

Both brokers run as their own processes on 127.0.0.1 with one partition, no per-message fsync (both defaults)
and the same topic settings; the load generator is the same confluent-kafka code in this process.

Measured (medians of the rounds; figures printed and stored in extra_info by ``test_broker_summary``):
- produce throughput: RECORDS records of VALUE_SIZE bytes, acks=1, linger 5 ms, 1 MB batches;
- produce latency: LATENCY_RECORDS sequential acks=all sends, each awaited (p50/p99 per record);
- fetch throughput: a consumer reading RECORDS records from offset 0;
- klog fetch path: the same fetches with sendfile (zero copy) and with the copy fallback
  (``klog.fetch.sendfile.enable=false``), via raw Fetch requests of FETCH_BYTES each;
- broker RSS idle (after startup) and right after the produce load; startup time to first ApiVersions answer.
- many connections: MANY_CONNECTIONS closed-loop Produce connections, responses sent by the native writer
  thread vs by the event loop (``klog.network.writer.thread.enable``).
- metrics overhead: the same closed-loop Produce load with ``klog.metrics.listener`` set (and scraped every
  second) vs unset, rounds alternating.
- produce validation cost: pipelined raw Produce requests of one prebuilt uncompressed 1 MB batch (100 B and
  10 B values), to klog with record validation (the default), to klog without it
  (``klog.produce.record.validation.enable=false``) and to Kafka, rounds interleaved; also each klog broker's CPU
  time a request (what validation adds, less swayed than wall time by other work on a shared machine).

Targets, checked in ``test_broker_summary`` from the figures above (ratios, never absolute times):
- klog produce throughput >= 1.0x Kafka's, fetch throughput >= 0.8x Kafka's;
- klog produce p50 latency <= 2x Kafka's;
- klog idle RSS <= 0.5x Kafka's; klog startup <= 0.5x Kafka's.
- many connections: writer thread >= 1.0x the event loop's requests/s.
- metrics on >= 0.95x metrics off requests/s (checked in ``test_klog_metrics_overhead``).
- produce validation: klog with validation >= 0.9x klog without it (uncompressed batches).
"""

from __future__ import annotations

import os
import socket
import statistics
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from klog.protocol import encode_request  # noqa: E402
from klog.testing.kafka import apache_kafka, answers_api_versions  # noqa: E402
from klog.testing.kafka_tools import kafka_libs_dir  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402

RECORDS = 300_000
VALUE_SIZE = 100
LATENCY_RECORDS = 300
FETCH_BYTES = 32 << 20
SHARED = {"num.partitions": 1, "log.segment.bytes": 1 << 30, "message.max.bytes": 1048588,
          "auto.create.topics.enable": "true", "offsets.topic.num.partitions": 4,
          "group.initial.rebalance.delay.ms": 0}
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "acks": "1", "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000, "compression.type": "none"}
CONSUMER = {"group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760, "queued.min.messages": 1_000_000}

FIGURES: dict[str, float] = {}
LIBS = kafka_libs_dir(Path(__file__).resolve().parent)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Target:
    def __init__(self, name: str, bootstrap: str, pid: int) -> None:
        self.name, self.bootstrap, self.pid = name, bootstrap, pid
        self.topic = f"bench-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def klog_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    base = tmp_path_factory.mktemp("klog")
    started = time.monotonic()
    with BrokerProcess(base, SHARED) as broker:
        FIGURES["klog startup s"] = time.monotonic() - started
        time.sleep(1)
        FIGURES["klog idle RSS MB"] = rss_bytes(broker.pid) / 1e6
        yield Target("klog", broker.bootstrap_servers, broker.pid)


@pytest.fixture(scope="module")
def kafka_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if LIBS is None:
        pytest.skip("Kafka jars missing: run tools/install-peers.sh")
    base = tmp_path_factory.mktemp("kafka")
    started = time.monotonic()
    with apache_kafka(base, config=SHARED, libs=LIBS) as bootstrap:
        FIGURES["kafka startup s"] = time.monotonic() - started
        time.sleep(1)
        FIGURES["kafka idle RSS MB"] = rss_bytes(bootstrap.pid) / 1e6
        yield Target("kafka", bootstrap, bootstrap.pid)


@pytest.fixture(params=["klog", "kafka"])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


def produce_records(target: Target, n: int) -> float:
    producer = confluent_kafka.Producer({"bootstrap.servers": target.bootstrap, **PRODUCER})
    value = os.urandom(VALUE_SIZE)
    started = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(target.topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def consume_records(target: Target, n: int) -> float:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": target.bootstrap, **CONSUMER})
    consumer.assign([confluent_kafka.TopicPartition(target.topic, 0, 0)])
    started = time.perf_counter()
    got = 0
    try:
        while got < n:
            messages = consumer.consume(10_000, 5.0)
            assert messages, f"{target.name}: no records after {got}"
            got += len(messages)
        return time.perf_counter() - started
    finally:
        consumer.close()


def test_produce_throughput(benchmark: Any, target: Target) -> None:
    benchmark.group = "produce-throughput"
    seconds = benchmark.pedantic(produce_records, args=(target, RECORDS), rounds=3, iterations=1)
    median = benchmark.stats.stats.median
    FIGURES[f"{target.name} produce rec/s"] = RECORDS / median
    FIGURES[f"{target.name} RSS after produce MB"] = rss_bytes(target.pid) / 1e6
    assert seconds > 0


def test_fetch_throughput(benchmark: Any, target: Target) -> None:
    benchmark.group = "fetch-throughput"
    benchmark.pedantic(consume_records, args=(target, RECORDS), rounds=5, iterations=1)
    FIGURES[f"{target.name} fetch rec/s"] = RECORDS / benchmark.stats.stats.median


def test_produce_latency(benchmark: Any, target: Target) -> None:
    benchmark.group = "produce-latency"
    producer = confluent_kafka.Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0, "acks": "all"})
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    producer.produce(topic, value=b"warm")
    producer.flush(30)
    samples: list[float] = []

    def one_round() -> None:
        for _ in range(LATENCY_RECORDS):
            started = time.perf_counter()
            producer.produce(topic, value=b"x" * VALUE_SIZE)
            producer.flush(10)
            samples.append(time.perf_counter() - started)

    benchmark.pedantic(one_round, rounds=2, iterations=1)
    samples.sort()
    FIGURES[f"{target.name} produce p50 ms"] = statistics.median(samples) * 1000
    FIGURES[f"{target.name} produce p99 ms"] = samples[int(len(samples) * 0.99)] * 1000


def _raw_fetch_bytes(host: str, port: int, topic: str, rounds: int) -> int:
    """Fetch the partition from offset 0 ``rounds`` times with raw Fetch v11 requests; returns bytes read."""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": FETCH_BYTES, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": FETCH_BYTES}]}], "forgotten_topics_data": [], "rack_id": ""}
    buf = bytearray(FETCH_BYTES + (1 << 20))
    view = memoryview(buf)
    total = 0
    with socket.create_connection((host, port)) as sock:
        for cid in range(rounds):
            sock.sendall(encode_request(1, 11, cid, "bench", body))
            head = sock.recv(4, socket.MSG_WAITALL)
            size = struct.unpack(">i", head)[0]
            got = 0
            while got < size:
                n = sock.recv_into(view[got:size])
                assert n, "broker closed"
                got += n
            total += size
    return total


def _fill(broker: BrokerProcess) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER})
    value = os.urandom(1000)
    for _ in range(FETCH_BYTES // 1000):
        while True:
            try:
                producer.produce("fetchpath", value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
    assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def fetch_path_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess]]:
    """Two brokers with the same data: one sends segment data with sendfile, one copies it."""
    with BrokerProcess(tmp_path_factory.mktemp("sendfile"), SHARED) as zero_copy, \
            BrokerProcess(tmp_path_factory.mktemp("copy"), {**SHARED, "klog.fetch.sendfile.enable": False}) as copying:
        _fill(zero_copy)
        _fill(copying)
        yield {"sendfile": zero_copy, "copy": copying}


@pytest.mark.parametrize("path", ["sendfile", "copy"])
def test_klog_fetch_path(benchmark: Any, fetch_path_brokers: dict[str, BrokerProcess], path: str) -> None:
    benchmark.group = "klog-fetch-path"
    broker = fetch_path_brokers[path]
    total = benchmark.pedantic(_raw_fetch_bytes, args=(broker.host, broker.port, "fetchpath", 8), rounds=3)
    FIGURES[f"klog fetch {path} GB/s"] = total / benchmark.stats.stats.median / 1e9


MANY_CONNECTIONS = 200
MANY_CONNECTIONS_SECONDS = 4.0


async def _closed_loop_produce(host: str, port: int, topic: str, partitions: int) -> tuple[int, float]:
    """MANY_CONNECTIONS connections, each sending one Produce (10 records of 100 B) and awaiting its answer,
    for MANY_CONNECTIONS_SECONDS. Returns (requests answered, seconds)."""
    import asyncio

    from klog.protocol import ApiKey, decode_response
    from klog.records import encode_batch

    batch = encode_batch([{"value": b"x" * 100}] * 10)

    async def one(i: int, stop_at: float) -> int:
        reader, writer = await asyncio.open_connection(host, port)
        request = encode_request(ApiKey.PRODUCE, 9, i, "bench-conn", {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": topic, "partition_data": [{"index": i % partitions, "records": batch}]}]})
        done = 0
        try:
            while time.perf_counter() < stop_at:
                writer.write(request)
                frame = await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))
                if done == 0:
                    _, body = decode_response(ApiKey.PRODUCE, 9, frame)
                    assert body.responses[0].partition_responses[0].error_code == 0
                done += 1
        finally:
            writer.close()
        return done

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(i, started + MANY_CONNECTIONS_SECONDS) for i in range(MANY_CONNECTIONS)))
    return sum(counts), time.perf_counter() - started


@pytest.mark.parametrize("writer", ["thread", "event-loop"])
def test_klog_many_connections_writer(benchmark: Any, tmp_path: Path, writer: str) -> None:
    """Produce requests/s over MANY_CONNECTIONS closed-loop connections, responses sent by the native writer
    thread or by the event loop (klog.network.writer.thread.enable)."""
    import asyncio

    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    benchmark.group = "klog-many-connections"
    config = {**SHARED, "klog.network.writer.thread.enable": writer == "thread"}
    with BrokerProcess(tmp_path / "data", config) as broker:
        with WireClient(broker.host, broker.port) as wire:
            created = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
                {"name": "conn", "num_partitions": 16, "replication_factor": 1, "assignments": [],
                 "configs": []}], "timeout_ms": 5000, "validate_only": False})
            assert created.topics[0].error_code == 0
        result: list[tuple[int, float]] = []
        benchmark.pedantic(lambda: result.append(asyncio.run(
            _closed_loop_produce(broker.host, broker.port, "conn", 16))), rounds=1, iterations=1)
    requests, seconds = result[0]
    FIGURES[f"klog {MANY_CONNECTIONS} connections writer {writer} req/s"] = requests / seconds
    print(f"\nklog {MANY_CONNECTIONS} connections, writer {writer}: {requests / seconds:,.0f} req/s "
          f"(load {os.getloadavg()[0]:.1f})")


METRICS_OVERHEAD_ROUNDS = 3


def test_klog_metrics_overhead(benchmark: Any, tmp_path: Path) -> None:
    """Closed-loop Produce requests/s with the Prometheus endpoint on (per-request latency and per-topic
    counting, scraped every second) vs off, rounds alternating between two brokers up at the same time.
    Target: metrics on >= 0.95x off."""
    import asyncio
    import re
    import threading
    import urllib.request

    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    benchmark.group = "klog-metrics-overhead"
    brokers = {"on": BrokerProcess(tmp_path / "on", {**SHARED, "klog.metrics.listener": "127.0.0.1:0"}),
               "off": BrokerProcess(tmp_path / "off", SHARED)}
    rates: dict[str, list[float]] = {"on": [], "off": []}
    with brokers["on"], brokers["off"]:
        for broker in brokers.values():
            with WireClient(broker.host, broker.port) as wire:
                created = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
                    {"name": "conn", "num_partitions": 16, "replication_factor": 1, "assignments": [],
                     "configs": []}], "timeout_ms": 5000, "validate_only": False})
                assert created.topics[0].error_code == 0
        match = next(m for m in (re.search(r"metrics on (http://\S+)", line) for line in brokers["on"].lines) if m)
        url = match.group(1)

        def run_rounds() -> None:
            for _ in range(METRICS_OVERHEAD_ROUNDS):
                for name in ("on", "off"):
                    broker = brokers[name]
                    stop = threading.Event()
                    scraper = None
                    if name == "on":
                        def scrape() -> None:
                            while not stop.wait(1.0):
                                urllib.request.urlopen(url, timeout=10).read()
                        scraper = threading.Thread(target=scrape, daemon=True)
                        scraper.start()
                    requests, seconds = asyncio.run(_closed_loop_produce(broker.host, broker.port, "conn", 16))
                    stop.set()
                    if scraper is not None:
                        scraper.join(15)
                    rates[name].append(requests / seconds)

        benchmark.pedantic(run_rounds, rounds=1, iterations=1)
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    FIGURES["klog produce req/s metrics on"] = on
    FIGURES["klog produce req/s metrics off"] = off
    print(f"\nklog closed-loop produce, metrics on: {on:,.0f} req/s, off: {off:,.0f} req/s, "
          f"ratio {on / off:.3f} (rounds on {[round(r) for r in rates['on']]}, off {[round(r) for r in rates['off']]}, "
          f"load {os.getloadavg()[0]:.1f})")
    benchmark.extra_info["metrics on/off"] = on / off
    assert on / off >= 0.95
VALIDATION_REQUESTS = 300
VALIDATION_PIPELINE = 8
VALIDATION_VALUE_SIZES = (100, 10)
#: rounds of the three brokers in turn; the median round counts (this machine's load varies by seconds)
VALIDATION_ROUNDS = 7


def _pipelined_produce(host: str, port: int, topic: str, batch: bytes, requests: int) -> float:
    """``requests`` Produce requests (acks=1) of ``batch``, VALIDATION_PIPELINE in flight; returns seconds."""
    from klog.protocol import ApiKey, decode_response

    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    frames = [encode_request(ApiKey.PRODUCE, 9, cid, "bench-validate", body) for cid in range(VALIDATION_PIPELINE)]
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        sent = answered = 0
        while answered < requests:
            while sent < requests and sent - answered < VALIDATION_PIPELINE:
                sock.sendall(frames[sent % VALIDATION_PIPELINE])
                sent += 1
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            frame = sock.recv(size, socket.MSG_WAITALL)
            if answered == 0:
                _, response = decode_response(ApiKey.PRODUCE, 9, frame)
                assert response.responses[0].partition_responses[0].error_code == 0, response
            answered += 1
        return time.perf_counter() - started


def _create_topic(host: str, port: int, topic: str) -> None:
    """Create a one-partition topic and wait until it takes a produce (Kafka elects its leader first)."""
    from klog.protocol import ApiKey
    from klog.records import encode_batch
    from klog.testing.wire import WireClient

    with WireClient(host, port) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        deadline = time.monotonic() + 30
        while True:
            answer = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                                                      "topic_data": [{"name": topic, "partition_data": [
                                                          {"index": 0, "records": encode_batch([{"value": b"w"}])}]}]})
            code = answer.responses[0].partition_responses[0].error_code
            if code == 0:
                return
            assert time.monotonic() < deadline, f"{topic} on {host}:{port}: produce error {code}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def validation_brokers(tmp_path_factory: pytest.TempPathFactory,
                       kafka_target: Target) -> Iterator[dict[str, tuple[str, int, int | None]]]:
    """klog with and without record validation, and Kafka: name -> (host, port, klog's pid)."""
    with BrokerProcess(tmp_path_factory.mktemp("validate-on"), SHARED) as on, \
            BrokerProcess(tmp_path_factory.mktemp("validate-off"),
                          {**SHARED, "klog.produce.record.validation.enable": False}) as off:
        assert on.proc is not None and off.proc is not None
        host, port = kafka_target.bootstrap.rsplit(":", 1)
        yield {"klog validated": (on.host, on.port, on.proc.pid), "klog unvalidated": (off.host, off.port, off.proc.pid),
               "kafka": (host, int(port), None)}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("value_size", VALIDATION_VALUE_SIZES)
def test_produce_validation_cost(benchmark: Any, validation_brokers: dict[str, tuple[str, int, int | None]],
                                 value_size: int) -> None:
    """Produce MB/s of uncompressed 1 MB batches: klog validating every record vs not, and Kafka (which always
    does); the three are measured round-robin so that machine load hits them alike."""
    from klog.records import encode_batch

    benchmark.group = "produce-validation"
    n = 1_000_000 // (value_size + 10)
    batch = bytes(encode_batch([{"value": os.urandom(value_size)} for _ in range(n)]))
    topic = f"validate-{value_size}-{uuid.uuid4().hex[:6]}"
    seconds: dict[str, list[float]] = {name: [] for name in validation_brokers}
    #: the broker's CPU ms per request (klog only): what validation adds, less swayed by other work on the
    #: machine than wall time, which here also waits for the CPU others hold
    cpu_ms: dict[str, list[float]] = {name: [] for name, (_, _, pid) in validation_brokers.items() if pid}

    def rounds() -> None:
        for name, (host, port, pid) in validation_brokers.items():
            cpu_before = _cpu_seconds(pid) if pid else 0.0
            seconds[name].append(_pipelined_produce(host, port, topic, batch, VALIDATION_REQUESTS))
            if pid:
                cpu_ms[name].append((_cpu_seconds(pid) - cpu_before) / VALIDATION_REQUESTS * 1000)

    for host, port, _ in validation_brokers.values():
        _create_topic(host, port, topic)
        _pipelined_produce(host, port, topic, batch, 5)  # warm up
    benchmark.pedantic(rounds, rounds=VALIDATION_ROUNDS, iterations=1)
    for name, values in seconds.items():
        FIGURES[f"{name} produce {value_size}B MB/s"] = len(batch) * VALIDATION_REQUESTS / statistics.median(values) / 1e6
    on = FIGURES[f"klog validated produce {value_size}B MB/s"]
    off = FIGURES[f"klog unvalidated produce {value_size}B MB/s"]
    kafka = FIGURES[f"kafka produce {value_size}B MB/s"]
    # Each round's two klog runs are seconds apart: the median of their ratios is less exposed to load swings
    paired = statistics.median(u / v for v, u in zip(seconds["klog validated"], seconds["klog unvalidated"]))
    FIGURES[f"klog produce {value_size}B validated/unvalidated paired"] = paired
    # The fastest round of each: the least disturbed by other work on a shared machine
    fastest = min(seconds["klog unvalidated"]) / min(seconds["klog validated"])
    FIGURES[f"klog produce {value_size}B validated/unvalidated fastest"] = fastest
    cpu_on, cpu_off = (statistics.median(cpu_ms[f"klog {kind}"]) for kind in ("validated", "unvalidated"))
    FIGURES[f"klog produce {value_size}B validated/unvalidated CPU"] = cpu_off / cpu_on
    print(f"\n{value_size} B values ({n} records per batch): validated {on:,.0f} MB/s, unvalidated {off:,.0f} MB/s, "
          f"kafka {kafka:,.0f} MB/s; validated/unvalidated {on / off:.3f} (paired rounds {paired:.3f}, fastest rounds "
          f"{fastest:.3f}), "
          f"validated klog/kafka {on / kafka:.2f}; broker CPU a request validated {cpu_on:.3f} ms, unvalidated "
          f"{cpu_off:.3f} ms (unvalidated/validated {cpu_off / cpu_on:.3f}) "
          f"(rounds: {', '.join(f'{k} ' + '/'.join(f'{v:.2f}' for v in vs) + ' s' for k, vs in seconds.items())}; "
          f"load {os.getloadavg()[0]:.1f})")


def test_startup_answers_api_versions_quickly(benchmark: Any, tmp_path: Path) -> None:
    """klog-broker process start to first ApiVersions answer (fresh data dir each round)."""
    benchmark.group = "startup"

    def start_stop() -> None:
        data = tmp_path / uuid.uuid4().hex
        with BrokerProcess(data) as broker:
            assert answers_api_versions(broker.port)

    benchmark.pedantic(start_stop, rounds=3, iterations=1)


def test_broker_summary(benchmark: Any) -> None:
    """Ratios of the figures measured above (same run, same machine); runs last in this module."""
    benchmark.group = "summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    for name, value in sorted(FIGURES.items()):
        print(f"{name}: {value:,.3f}")
    benchmark.extra_info.update(FIGURES)
    needed = ["klog produce rec/s", "kafka produce rec/s", "klog fetch rec/s", "kafka fetch rec/s",
              "klog produce p50 ms", "kafka produce p50 ms", "klog idle RSS MB", "kafka idle RSS MB",
              "klog startup s", "kafka startup s"]
    missing = [name for name in needed if name not in FIGURES]
    assert not missing, f"run the whole module (missing {missing})"
    ratios = {
        "produce throughput klog/kafka": FIGURES["klog produce rec/s"] / FIGURES["kafka produce rec/s"],
        "fetch throughput klog/kafka": FIGURES["klog fetch rec/s"] / FIGURES["kafka fetch rec/s"],
        "produce p50 latency klog/kafka": FIGURES["klog produce p50 ms"] / FIGURES["kafka produce p50 ms"],
        "idle RSS klog/kafka": FIGURES["klog idle RSS MB"] / FIGURES["kafka idle RSS MB"],
        "startup klog/kafka": FIGURES["klog startup s"] / FIGURES["kafka startup s"],
    }
    if "klog fetch sendfile GB/s" in FIGURES and "klog fetch copy GB/s" in FIGURES:
        ratios["fetch path sendfile/copy"] = FIGURES["klog fetch sendfile GB/s"] / FIGURES["klog fetch copy GB/s"]
    thread_key = f"klog {MANY_CONNECTIONS} connections writer thread req/s"
    loop_key = f"klog {MANY_CONNECTIONS} connections writer event-loop req/s"
    if thread_key in FIGURES and loop_key in FIGURES:
        ratios["many connections writer thread/event loop"] = FIGURES[thread_key] / FIGURES[loop_key]
    for size in VALIDATION_VALUE_SIZES:
        on, off = (FIGURES.get(f"klog {kind} produce {size}B MB/s") for kind in ("validated", "unvalidated"))
        kafka = FIGURES.get(f"kafka produce {size}B MB/s")
        if on and off and kafka:
            ratios[f"produce {size}B validated/unvalidated"] = on / off
            ratios[f"produce {size}B validated klog/kafka"] = on / kafka
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    benchmark.extra_info.update(ratios)
    assert ratios["produce throughput klog/kafka"] >= 1.0
    assert ratios["fetch throughput klog/kafka"] >= 0.8
    assert ratios["produce p50 latency klog/kafka"] <= 2.0
    assert ratios["idle RSS klog/kafka"] <= 0.5
    assert ratios["startup klog/kafka"] <= 0.5
    if "many connections writer thread/event loop" in ratios:
        assert ratios["many connections writer thread/event loop"] >= 1.0
    for size in VALIDATION_VALUE_SIZES:
        if f"produce {size}B validated/unvalidated" in ratios:
            assert ratios[f"produce {size}B validated/unvalidated"] >= 0.9

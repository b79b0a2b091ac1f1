"""ListOffsets cost in a real klog-broker, per request, against ApiVersions measured in the same run.

Run: ``.venv/bin/pytest benches/bench_list_offsets.py -p benchmark -o addopts="" --benchmark-only -s``

Spark's Kafka source and Kafka consumers send many small ListOffsets requests (about 40,000 for a 10 M-row
Spark read): one partition each, asking for the latest (-1) or earliest (-2) offset, sometimes the max
timestamp (-3) or a timestamp lookup. A raw socket client sends PIPELINE requests at a time, REQUESTS in all,
and the broker's own CPU time (utime + stime from /proc/<pid>/stat) is divided by the number of requests:
that is the cost of a request on the broker's event loop, less sensitive to other load than wall clock.

Baseline in the same run: ApiVersions v3 (the smallest request every client sends; decode, a handler building
the ~30-entry version list, encode) on the same connection type.

Target (checked in ``test_list_offsets_summary``): a latest/earliest ListOffsets costs the broker at most
LATEST_TARGET x an ApiVersions request.

Most of a small request's broker CPU is the event loop, the socket write and the protocol codec; the ListOffsets
handler itself is under 1 us for latest/earliest (1.5 us before its fast path). A same-run handler comparison
(old vs new, byte-identical responses) is quoted in the commit that added this file.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey, encode_request
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

REQUESTS = 20_000
PIPELINE = 16                 # below klog.connection.max.inflight.requests (32)
ROUNDS = 3
LATEST_TARGET = 0.8
TOPIC = "offsets"
RECORDS = 2_000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

FIGURES: dict[str, float] = {}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15 of the file)


def list_offsets_body(timestamp: int) -> dict[str, Any]:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 30000,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("list-offsets")) as process, \
            WireClient(process.host, process.port) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "segment.bytes", "value": "65536"}]}],
            "timeout_ms": 5000, "validate_only": False})
        assert created.topics[0].error_code == 0
        for start in range(0, RECORDS, 100):  # several segments, timestamps 1000, 1001, ...
            batch = encode_batch([{"key": None, "value": b"v" * 100, "timestamp": 1000 + i}
                                  for i in range(start, start + 100)])
            produced = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
            assert produced.responses[0].partition_responses[0].error_code == 0
        yield process


def drive(process: BrokerProcess, frame: bytes, requests: int) -> float:
    """Send ``requests`` copies of ``frame`` (PIPELINE in flight), read every answer; the broker CPU seconds used."""
    burst = frame * PIPELINE
    with socket.create_connection((process.host, process.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb", buffering=1 << 16)
        before = _cpu_seconds(process.pid)
        for _ in range(requests // PIPELINE):
            sock.sendall(burst)
            for _ in range(PIPELINE):
                size = struct.unpack(">i", reader.read(4))[0]
                assert len(reader.read(size)) == size
        used = _cpu_seconds(process.pid) - before
        reader.close()
    return used


CASES = {
    "api-versions": (ApiKey.API_VERSIONS, 3, {"client_software_name": "bench", "client_software_version": "1"}),
    "latest": (ApiKey.LIST_OFFSETS, 7, list_offsets_body(-1)),
    "earliest": (ApiKey.LIST_OFFSETS, 7, list_offsets_body(-2)),
    "max-timestamp": (ApiKey.LIST_OFFSETS, 7, list_offsets_body(-3)),
    "timestamp": (ApiKey.LIST_OFFSETS, 7, list_offsets_body(1000 + RECORDS // 2)),
    "latest-v1": (ApiKey.LIST_OFFSETS, 1, list_offsets_body(-1)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_broker_cpu_per_request(benchmark: Any, broker: BrokerProcess, case: str) -> None:
    api_key, version, body = CASES[case]
    frame = encode_request(api_key, version, 1, "bench", body)
    drive(broker, frame, PIPELINE * 64)  # warm up (connection, code paths)
    cpu: list[float] = []
    benchmark.group = "broker-cpu-per-request"
    benchmark.pedantic(lambda: cpu.append(drive(broker, frame, REQUESTS)), rounds=ROUNDS, iterations=1)
    FIGURES[f"{case} broker CPU us/request"] = min(cpu) / REQUESTS * 1e6
    FIGURES[f"{case} wall us/request"] = benchmark.stats.stats.min / REQUESTS * 1e6


def test_list_offsets_summary(benchmark: Any) -> None:
    benchmark.group = "summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    base = FIGURES.get("api-versions broker CPU us/request")
    if base is None:
        pytest.skip("run the whole module: the summary needs the same run's ApiVersions baseline")
    load = os.getloadavg()[0]
    print(f"\nListOffsets vs ApiVersions v3, broker CPU per request (min of {ROUNDS} rounds of {REQUESTS}), "
          f"load {load:.2f}")
    for case in CASES:
        cpu = FIGURES[f"{case} broker CPU us/request"]
        ratio = cpu / base
        FIGURES[f"{case} / api-versions"] = ratio
        print(f"  {case:14s} {cpu:6.1f} us CPU  {FIGURES[f'{case} wall us/request']:6.1f} us wall  {ratio:.2f}x")
    benchmark.extra_info.update(FIGURES, load_average=load)
    for case in ("latest", "earliest"):
        assert FIGURES[f"{case} / api-versions"] <= LATEST_TARGET, (case, FIGURES)

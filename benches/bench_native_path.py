"""Broker CPU per one-record Produce, and requests/s over many connections, with the native Produce path on and off
(``klog.produce.native.enable``), in the same run.

Run: ``.venv/bin/python benches/bench_native_path.py`` (or through pytest: ``.venv/bin/pytest
benches/bench_native_path.py -p benchmark -o addopts="" -s``).

Two broker processes (``klog-broker``, one per setting) serve the same load in alternating rounds. The load
generator sends pre-encoded Produce v9 frames (one 100 B record, acks=1, one partition per request) over raw
sockets, pipelined in bursts, and only counts the answers' size prefixes, so its own CPU per request stays small;
it is reported beside the broker's so a reader sees who limited each figure on this 2-core machine.

- **CPU per request**: ``CONNECTIONS_CPU`` connections, ``REQUESTS_CPU`` requests per round; the broker's CPU time
  (utime + stime from /proc) over the requests it answered.
- **requests/s at many connections**: ``CONNECTIONS_MANY`` connections each sending bursts of ``BURST_MANY``
  requests; requests answered over the wall time, with the broker's CPU over the same time.

Each figure is the median over ``ROUNDS`` rounds. No target is asserted (timing under load is not a test).

``--fetch``: the native Fetch path instead (``klog.fetch.native.enable`` on against off, the same alternating
rounds): a caught-up consumer's empty long poll (Fetch v12 without a session at the log end of a partition,
``max_wait_ms=FETCH_WAIT_MS``; ``FETCH_WAIT_CONNECTIONS`` connections, one poll open on each) and a Fetch of a
partition that is behind (from offset 0, ``partition_max_bytes=FETCH_BEHIND_BYTES``, records as sendfile regions;
``CONNECTIONS_BEHIND`` connections, bursts of ``BURST_BEHIND``).
"""

from __future__ import annotations

import os
import selectors
import socket
import statistics
import struct
import sys
import tempfile
import time
from typing import Any

ROUNDS = 5
TOPIC = "bench"
PARTITIONS = 8
CONNECTIONS_CPU = 4
REQUESTS_CPU = 40_000
BURST_CPU = 32
CONNECTIONS_MANY = 200
BURST_MANY = 4
REQUESTS_MANY = 60_000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FETCH_WAIT_MS = 100
FETCH_WAIT_CONNECTIONS = 100
REQUESTS_WAIT = 6_000
FETCH_BEHIND_BYTES = 65536
#: 16 KiB records (one a batch) in the partition the behind case reads
BEHIND_FILL = 64
CONNECTIONS_BEHIND = 2
BURST_BEHIND = 4
REQUESTS_BEHIND = 10_000
IDLE_TOPIC, FILLED_TOPIC = "fetch-idle", "fetch-filled"


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (every thread), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def frames(count: int) -> list[bytes]:
    """``count`` pre-encoded one-record Produce v9 frames (acks=1), round robin over the partitions."""
    from klog.protocol import encode_request
    from klog.records import encode_batch

    out = []
    for i in range(count):
        batch = encode_batch([{"key": b"key-%d" % i, "value": b"v" * 100}])
        out.append(encode_request(0, 9, i, "bench-native", {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": i % PARTITIONS, "records": batch}]}]}))
    return out


def drive(host: str, port: int, payload: list[bytes], connections: int, burst: int, total: int) -> float:
    """Send ``total`` requests over ``connections`` sockets, ``burst`` at a time per socket, and wait for every
    answer; the wall time."""
    selector = selectors.DefaultSelector()
    socks = []
    for _ in range(connections):
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
    sent = 0
    answered = 0
    # per socket: answers still awaited, bytes of a partial answer
    state: dict[socket.socket, list[Any]] = {s: [0, b""] for s in socks}
    started = time.perf_counter()

    def send_burst(s: socket.socket) -> None:
        nonlocal sent
        n = min(burst, total - sent)
        if n <= 0:
            return
        data = b"".join(payload[(sent + k) % len(payload)] for k in range(n))
        sent += n
        s.setblocking(True)
        s.sendall(data)
        s.setblocking(False)
        state[s][0] += n

    for s in socks:
        selector.register(s, selectors.EVENT_READ)
        send_burst(s)
    while answered < total:
        for key, _ in selector.select(30):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed a connection")
            buf = state[s][1] + chunk
            pos = 0
            while len(buf) - pos >= 4:
                size = struct.unpack_from(">i", buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                state[s][0] -= 1
                answered += 1
            state[s][1] = buf[pos:]
            if state[s][0] == 0:
                send_burst(s)
    elapsed = time.perf_counter() - started
    for s in socks:
        selector.unregister(s)
        s.close()
    return elapsed


def start(native: bool, data_dir: str) -> Any:
    from klog.protocol import ApiKey
    from klog.testing.process import BrokerProcess
    from klog.testing.wire import WireClient

    broker = BrokerProcess(data_dir, {"klog.produce.native.enable": native, "max.connections": 5000,
                                      "num.partitions": PARTITIONS})
    broker.start()
    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 10000, "validate_only": False})
        assert response.topics[0].error_code == 0, response
    return broker


def measure(broker: Any, payload: list[bytes], connections: int, burst: int, total: int) -> dict[str, float]:
    cpu0, client0 = cpu_seconds(broker.pid), time.process_time()
    wall = drive(broker.host, broker.port, payload, connections, burst, total)
    cpu, client = cpu_seconds(broker.pid) - cpu0, time.process_time() - client0
    return {"broker_us_per_request": cpu / total * 1e6, "client_us_per_request": client / total * 1e6,
            "requests_per_s": total / wall, "broker_cores": cpu / wall}


def run() -> dict[str, dict[str, dict[str, float]]]:
    payload = frames(4096)
    results: dict[str, dict[str, list[dict[str, float]]]] = {"on": {"cpu": [], "many": []},
                                                              "off": {"cpu": [], "many": []}}
    with tempfile.TemporaryDirectory(prefix="klog-bench-native-") as root:
        brokers = {"on": start(True, os.path.join(root, "on")), "off": start(False, os.path.join(root, "off"))}
        try:
            for broker in brokers.values():   # warm up: routes learned, files and caches hot
                measure(broker, payload, 1, BURST_CPU, 2000)
            for _ in range(ROUNDS):
                for name, broker in brokers.items():
                    results[name]["cpu"].append(measure(broker, payload, CONNECTIONS_CPU, BURST_CPU, REQUESTS_CPU))
                    results[name]["many"].append(measure(broker, payload, CONNECTIONS_MANY, BURST_MANY,
                                                         REQUESTS_MANY))
        finally:
            for broker in brokers.values():
                broker.stop()
    return {name: {kind: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                   for kind, rounds in kinds.items()} for name, kinds in results.items()}


def fetch_frame(topic: str, offset: int, max_wait_ms: int) -> list[bytes]:
    from klog.protocol import encode_request

    return [encode_request(1, 12, 1, "bench-native", {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": FETCH_BEHIND_BYTES,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": FETCH_BEHIND_BYTES}]}],
        "forgotten_topics_data": [], "rack_id": ""})]


def start_fetch(native: bool, data_dir: str) -> Any:
    from klog.protocol import ApiKey, encode_request
    from klog.records import encode_batch
    from klog.testing.process import BrokerProcess
    from klog.testing.wire import WireClient

    broker = BrokerProcess(data_dir, {"klog.fetch.native.enable": native, "max.connections": 5000})
    broker.start()
    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for name in (IDLE_TOPIC, FILLED_TOPIC)], "timeout_ms": 10000, "validate_only": False})
        assert [t.error_code for t in response.topics] == [0, 0], response
        for topic, count, size in ((IDLE_TOPIC, 1, 100), (FILLED_TOPIC, BEHIND_FILL, 16384)):
            for i in range(count):
                wire.send_raw(encode_request(0, 9, i, "bench-native", {
                    "transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic,
                        "partition_data": [{"index": 0, "records": encode_batch([{"value": b"v" * size}])}]}]}))
                wire.read_frame()
    return broker


def run_fetch() -> dict[str, dict[str, dict[str, float]]]:
    waiting, behind = fetch_frame(IDLE_TOPIC, 1, FETCH_WAIT_MS), fetch_frame(FILLED_TOPIC, 0, 0)
    results: dict[str, dict[str, list[dict[str, float]]]] = {"on": {"cpu": [], "many": []},
                                                              "off": {"cpu": [], "many": []}}
    with tempfile.TemporaryDirectory(prefix="klog-bench-native-fetch-") as root:
        brokers = {"on": start_fetch(True, os.path.join(root, "on")),
                   "off": start_fetch(False, os.path.join(root, "off"))}
        try:
            for broker in brokers.values():   # warm up: routes learned (the first fetch of each is Python's)
                measure(broker, behind, 1, 1, 200)
                measure(broker, waiting, FETCH_WAIT_CONNECTIONS, 1, 300)
            for r in range(ROUNDS):
                for name in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    broker = brokers[name]
                    results[name]["cpu"].append(measure(broker, waiting, FETCH_WAIT_CONNECTIONS, 1, REQUESTS_WAIT))
                    results[name]["many"].append(measure(broker, behind, CONNECTIONS_BEHIND, BURST_BEHIND,
                                                         REQUESTS_BEHIND))
        finally:
            for broker in brokers.values():
                broker.stop()
    return {name: {kind: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                   for kind, rounds in kinds.items()} for name, kinds in results.items()}


def report_fetch(summary: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = []
    for kind, title in (("cpu", f"caught-up empty long poll (max_wait_ms={FETCH_WAIT_MS}), "
                                f"{FETCH_WAIT_CONNECTIONS} connections x 1"),
                        ("many", f"Fetch behind ({FETCH_BEHIND_BYTES} B a partition), {CONNECTIONS_BEHIND} connections "
                                 f"x {BURST_BEHIND}")):
        on, off = summary["on"][kind], summary["off"][kind]
        lines.append(f"{title}:")
        for name, row in (("native on ", on), ("native off", off)):
            lines.append(f"  {name}: broker {row['broker_us_per_request']:6.1f} us/request, "
                         f"{row['requests_per_s']:8.0f} requests/s, broker {row['broker_cores']:.2f} cores, "
                         f"client {row['client_us_per_request']:5.1f} us/request")
        lines.append(f"  on/off: broker CPU per request {on['broker_us_per_request'] / off['broker_us_per_request']:.2f}x, "
                     f"requests/s {on['requests_per_s'] / off['requests_per_s']:.2f}x")
    return "\n".join(lines)


def report(summary: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = []
    for kind, title in (("cpu", f"one-record Produce, {CONNECTIONS_CPU} connections, bursts of {BURST_CPU}"),
                        ("many", f"{CONNECTIONS_MANY} connections, bursts of {BURST_MANY}")):
        on, off = summary["on"][kind], summary["off"][kind]
        lines.append(f"{title}:")
        for name, row in (("native on ", on), ("native off", off)):
            lines.append(f"  {name}: broker {row['broker_us_per_request']:6.1f} us/request, "
                         f"{row['requests_per_s']:8.0f} requests/s, broker {row['broker_cores']:.2f} cores, "
                         f"client {row['client_us_per_request']:5.1f} us/request")
        lines.append(f"  on/off: broker CPU per request {on['broker_us_per_request'] / off['broker_us_per_request']:.2f}x, "
                     f"requests/s {on['requests_per_s'] / off['requests_per_s']:.2f}x")
    return "\n".join(lines)


def test_native_path_cpu_per_request_and_requests_per_second(benchmark: Any) -> None:
    summary = benchmark.pedantic(run, rounds=1, iterations=1)
    print(report(summary))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if "--fetch" in sys.argv[1:]:
        print(report_fetch(run_fetch()), flush=True)
    else:
        print(report(run()))

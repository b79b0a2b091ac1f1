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
    print(report(run()))

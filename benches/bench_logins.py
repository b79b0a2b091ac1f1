"""TLS handshakes per second and SCRAM-SHA-512 logins per second, with the broker's CPU per handshake/login, of one
klog broker and one Apache Kafka 4.x broker started from the same properties (issue 33), in the same run.

Run: ``python benches/bench_logins.py`` (``--connections 400 --rounds 5``, the defaults; ``--short`` for one
small round, a smoke check; ``--no-kafka`` for klog alone), or
``.venv/bin/pytest benches/bench_logins.py -p benchmark -o addopts="" -s`` (``KLOG_BENCH_LOGINS_KAFKA=1`` for the
full run against Kafka).

The brokers are bench_tls.py's (:func:`bench_tls._start`: PLAINTEXT, SSL and SASL_SSL listeners, one PEM keystore,
SCRAM-SHA-512 on SASL_SSL). Each round opens ``--connections`` new connections as fast as an asyncio driver can,
``--concurrency`` in flight, and closes each after its exchange:

- ``tls``: a full TLS handshake (Python's ssl module, no session resumption) on the SSL listener, then one
  ApiVersions v0 request and its answer;
- ``scram``: the same on the SASL_SSL listener, then SaslHandshake v1 and the two SaslAuthenticate v1 exchanges of
  a SCRAM-SHA-512 login (klog's own client side, :class:`klog.security.scram.ScramClient`), the server's
  signature checked. A login therefore includes a TLS handshake: the login's own cost is the difference of the rows.

Rounds alternate the kinds and the systems (drift of the shared machine hits all alike); the report gives the
medians over rounds of the rate, the broker process's CPU per connection (user+system from /proc/<pid>/stat) and
the driver's own CPU (this process) per connection, so a reader sees who limited the rate. The driver salts the
password once (the salt and iteration count are fixed per user): PBKDF2 is client-side work in SCRAM, and doing it
per login would make the driver, not the broker, the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import ssl
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tls import _cpu_s, _start, add_scram_user  # noqa: E402

from klog.security import scram  # noqa: E402

KINDS = {"tls": "SSL", "scram": "SASL_SSL"}   # kind -> listener
USER, PASSWORD, MECHANISM = "bench", "bench-pw", "SCRAM-SHA-512"
_SIZE = struct.Struct(">i")


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A request with header v1 (int16 key, int16 version, int32 correlation id, string client id)."""
    client_id = b"bench-logins"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + body
    return _SIZE.pack(len(payload)) + payload


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    """The response body (after the correlation id) of ``request``."""
    writer.write(request)
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    return (await reader.readexactly(size))[4:]


def _sasl_authenticate(token: bytes) -> bytes:
    return _SIZE.pack(len(token)) + token


def _authenticate_answer(body: bytes) -> bytes:
    """The auth bytes of a SaslAuthenticate v1 response; an AssertionError names a refused login."""
    error_code, message_len = struct.unpack_from(">hh", body)
    offset = 4 + max(message_len, 0)
    assert error_code == 0, f"SaslAuthenticate error {error_code}: {body[4:offset]!r}"
    auth_len = _SIZE.unpack_from(body, offset)[0]
    return body[offset + 4:offset + 4 + auth_len]


async def _connect(kind: str, port: int, tls: ssl.SSLContext) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    try:
        api_versions = await _exchange(reader, writer, _request(18, 0, 1, b""))
        assert struct.unpack_from(">h", api_versions)[0] == 0, "ApiVersions failed"
        if kind == "scram":
            mechanism = MECHANISM.encode()
            handshake = await _exchange(reader, writer,
                                        _request(17, 1, 2, struct.pack(">h", len(mechanism)) + mechanism))
            assert struct.unpack_from(">h", handshake)[0] == 0, "SaslHandshake failed"
            client = scram.ScramClient(MECHANISM, USER, PASSWORD)
            server_first = _authenticate_answer(
                await _exchange(reader, writer, _request(36, 1, 3, _sasl_authenticate(client.first()))))
            server_final = _authenticate_answer(await _exchange(
                reader, writer, _request(36, 1, 4, _sasl_authenticate(client.final(server_first)))))
            client.verify(server_final)
    finally:
        writer.transport.abort()   # no TLS close_notify wait: the exchange is what is measured


async def _round_async(kind: str, port: int, tls: ssl.SSLContext, connections: int, concurrency: int) -> None:
    remaining = iter(range(connections))

    async def worker() -> None:
        for _ in remaining:
            await asyncio.wait_for(_connect(kind, port, tls), 30)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _round(kind: str, port: int, pid: int, tls: ssl.SSLContext, connections: int,
           concurrency: int) -> dict[str, float]:
    broker0, driver0, t0 = _cpu_s(pid), time.process_time(), time.perf_counter()
    asyncio.run(_round_async(kind, port, tls, connections, concurrency))
    elapsed = time.perf_counter() - t0
    return {"per_s": connections / elapsed,
            "broker_ms": (_cpu_s(pid) - broker0) * 1000 / connections,
            "driver_ms": (time.process_time() - driver0) * 1000 / connections}


def run(connections: int = 400, rounds: int = 5, concurrency: int = 32,
        systems: tuple[str, ...] = ("klog", "kafka")) -> dict[str, dict[str, float]]:
    """``"<system> <kind>"`` -> the medians over rounds of per_s, broker_ms and driver_ms."""
    from klog.testing.certs import CertificateAuthority

    # the client's PBKDF2 once per (salt, iterations), not per login: see the module's docstring
    scram.salted_password = functools.lru_cache(maxsize=16)(scram.salted_password)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="klog-bench-logins-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        ca = CertificateAuthority(root / "pki")
        cert = ca.issue("broker")
        tls = ssl.create_default_context(cafile=ca.ca_file)
        tls.check_hostname = False   # the chain is verified; the name is the CA's business, not the benchmark's
        brokers = {system: _start(system, root, cert.keystore_file, stack) for system in systems}
        for ports, _ in brokers.values():
            add_scram_user(ports["PLAINTEXT"], USER, PASSWORD)
        for kind, listener in KINDS.items():   # warm-up, not counted (Kafka's JIT, klog's first imports)
            for ports, pid in brokers.values():
                _round(kind, ports[listener], pid, tls, max(connections // 4, 20), concurrency)
        for _ in range(rounds):
            for kind, listener in KINDS.items():
                for system, (ports, pid) in brokers.items():
                    results.setdefault(f"{system} {kind}", []).append(
                        _round(kind, ports[listener], pid, tls, connections, concurrency))
    return {name: {key: statistics.median(r[key] for r in rows) for key in rows[0]} for name, rows in results.items()}


def report(medians: dict[str, dict[str, float]], connections: int, rounds: int, concurrency: int) -> str:
    lines = [f"{connections} connections per round, {concurrency} in flight, medians of {rounds} rounds "
             f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())})",
             f"{'system kind':<14}{'per s':>9}{'broker CPU ms':>15}{'driver CPU ms':>15}"]
    for name, row in medians.items():
        lines.append(f"{name:<14}{row['per_s']:>9.0f}{row['broker_ms']:>15.2f}{row['driver_ms']:>15.2f}")
    for kind in KINDS:
        klog_row, kafka_row = medians.get(f"klog {kind}"), medians.get(f"kafka {kind}")
        if klog_row and kafka_row:
            lines.append(f"klog/Kafka {kind}: rate {klog_row['per_s'] / kafka_row['per_s']:.2f}x, broker CPU per "
                         f"connection {klog_row['broker_ms'] / kafka_row['broker_ms']:.2f}x")
    return "\n".join(lines)


def test_logins() -> None:
    """``pytest benches/bench_logins.py -p benchmark -o addopts="" -s``: one short klog round
    (``KLOG_BENCH_LOGINS_KAFKA=1``: the full run against Kafka)."""
    full = bool(os.environ.get("KLOG_BENCH_LOGINS_KAFKA"))
    connections, rounds = (400, 5) if full else (50, 1)
    medians = run(connections, rounds, systems=("klog", "kafka") if full else ("klog",))
    print("\n" + report(medians, connections, rounds, 32))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=400, help="connections per round, kind and system")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32, help="connections in flight")
    parser.add_argument("--no-kafka", action="store_true", help="klog alone")
    parser.add_argument("--short", action="store_true", help="one round of 50 connections (a smoke check)")
    args = parser.parse_args(argv)
    if args.short:
        args.connections, args.rounds = 50, 1
    systems = ("klog",) if args.no_kafka else ("klog", "kafka")
    medians = run(args.connections, args.rounds, args.concurrency, systems)
    print(report(medians, args.connections, args.rounds, args.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())

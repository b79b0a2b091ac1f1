"""Produce and consume MB/s, and broker CPU per GB, over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners of
one klog broker and, with ``--kafka``, of one Apache Kafka 4.x broker from the same properties, in the same run
(rounds alternate the listeners and the systems); with ``--engines ssl,native``, one klog broker per TLS engine
(``klog.tls.engine``: ``klog-ssl`` and ``klog-native`` in the table) instead of one with the default.

Run: ``python benches/bench_tls.py`` (``--mb 256 --rounds 3 --kafka --engines ssl,native``), or
``.venv/bin/pytest benches/bench_tls.py -p benchmark -o addopts="" -s`` (``KLOG_BENCH_TLS_KAFKA=1`` for Kafka).

Clients are confluent-kafka (librdkafka: its TLS costs the client's CPU, not the broker's). Each round produces
``--mb`` MiB of 1 KiB records (acks=1, lz4 off) to a fresh one-partition topic through the listener, then
consumes them back from the beginning; the broker's CPU is its process's user+system time over each phase
(/proc/<pid>/stat). No target is asserted: the figures compare the listeners on one machine in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

RECORD_BYTES = 1024
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client_conf(listener: str, port: int, ca_file: str) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": listener}
    if listener != "PLAINTEXT":
        conf["ssl.ca.location"] = ca_file
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-pw"})
    return conf


def _round(listener: str, port: int, ca_file: str, pid: int, mb: int) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = _client_conf(listener, port, ca_file)
    topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)   # held until its future is answered
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    count = mb * 1024 * 1024 // RECORD_BYTES
    value = os.urandom(RECORD_BYTES)
    producer = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 512 * 1024, "enable.idempotence": False})
    cpu0, t0 = _cpu_s(pid), time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s, produce_cpu = time.perf_counter() - t0, _cpu_s(pid) - cpu0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    consumer.subscribe([topic])
    got = 0
    cpu0, t0 = _cpu_s(pid), time.perf_counter()
    deadline = t0 + 300
    while got < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    consume_s, consume_cpu = time.perf_counter() - t0, _cpu_s(pid) - cpu0
    consumer.close()
    assert got == count, f"{listener}: consumed {got} of {count}"
    gb = mb / 1024
    return {"produce_mb_s": mb / produce_s, "consume_mb_s": mb / consume_s,
            "produce_cpu_s_per_gb": produce_cpu / gb, "consume_cpu_s_per_gb": consume_cpu / gb}


def _properties(cert_file: str) -> dict[str, object]:
    """The TLS and SASL settings both systems start from (Kafka's names)."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": cert_file,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "log.flush.interval.messages": 2**62}


def _start(system: str, root: Path, cert_file: str, stack: contextlib.ExitStack) -> tuple[dict[str, int], int]:
    """(listener -> port, broker pid) of a started broker of ``system``."""
    props = _properties(cert_file)
    if system == "klog" or system.startswith("klog-"):
        from klog.testing.process import BrokerProcess

        engine = {"klog.tls.engine": system.removeprefix("klog-")} if system != "klog" else {}
        broker = stack.enter_context(BrokerProcess(root / f"{system}-data", {
            **props, **engine, "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}))
        line = next(ln for ln in broker.lines if "listening on" in ln)
        return {n: int(p) for n, p in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}, broker.pid
    from klog.testing.kafka import apache_kafka, free_port

    ports = {name: free_port() for name in (*LISTENERS, "CONTROLLER")}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    bootstrap = stack.enter_context(apache_kafka(root / "kafka", ports["PLAINTEXT"], heap="1g", config={
        **props, "listeners": listeners, "advertised.listeners": listeners.rsplit(",", 1)[0],
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports['CONTROLLER']}"}))
    return ports, bootstrap.pid


def add_scram_user(plaintext_port: int, user: str = "bench", password: str = "bench-pw") -> None:
    """The SCRAM-SHA-512 credential (4096 iterations) the SASL_SSL clients log in with, through the broker's
    PLAINTEXT listener."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plaintext_port}"})
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def run(mb: int = 128, rounds: int = 3, systems: tuple[str, ...] = ("klog",)) -> dict[str, dict[str, float]]:
    """The best round of each ``<system> <listener>``."""
    from klog.testing.certs import CertificateAuthority

    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="klog-bench-tls-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        ca = CertificateAuthority(root / "pki")
        cert = ca.issue("broker")
        brokers = {system: _start(system, root, cert.keystore_file, stack) for system in systems}
        for ports, _ in brokers.values():
            add_scram_user(ports["PLAINTEXT"])
        for _ in range(rounds):
            for name in LISTENERS:   # alternate: drift of the machine hits every listener and system alike
                for system, (ports, pid) in brokers.items():
                    results.setdefault(f"{system} {name}", []).append(_round(name, ports[name], ca.ca_file, pid, mb))
    best: dict[str, dict[str, float]] = {}
    for name, rows in results.items():
        best[name] = {"produce_mb_s": max(r["produce_mb_s"] for r in rows),
                      "consume_mb_s": max(r["consume_mb_s"] for r in rows),
                      "produce_cpu_s_per_gb": min(r["produce_cpu_s_per_gb"] for r in rows),
                      "consume_cpu_s_per_gb": min(r["consume_cpu_s_per_gb"] for r in rows)}
    return best


def report(best: dict[str, dict[str, float]], mb: int, rounds: int) -> str:
    lines = [f"one broker, {mb} MiB of {RECORD_BYTES}-byte records per phase, best of {rounds} rounds "
             "(confluent-kafka clients, one partition)",
             f"{'listener':<22}{'produce MB/s':>14}{'consume MB/s':>14}{'produce CPU s/GB':>18}"
             f"{'consume CPU s/GB':>18}"]
    for name, row in best.items():
        lines.append(f"{name:<22}{row['produce_mb_s']:>14.1f}{row['consume_mb_s']:>14.1f}"
                     f"{row['produce_cpu_s_per_gb']:>18.2f}{row['consume_cpu_s_per_gb']:>18.2f}")
    return "\n".join(lines)


def test_tls_against_plaintext() -> None:
    pytest = __import__("pytest")
    pytest.importorskip("cryptography")
    mb, rounds = int(os.environ.get("KLOG_BENCH_TLS_MB", "128")), int(os.environ.get("KLOG_BENCH_TLS_ROUNDS", "3"))
    systems = ("klog", "kafka") if os.environ.get("KLOG_BENCH_TLS_KAFKA") else ("klog",)
    print("\n" + report(run(mb, rounds, systems), mb, rounds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=128, help="MiB produced (and consumed) per round and listener")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kafka", action="store_true", help="Apache Kafka 4.x beside klog, from the same properties")
    parser.add_argument("--engines", default="",
                        help="comma-separated klog.tls.engine values (ssl, native): one klog broker per engine, "
                             "'klog-<engine>' in the table (default: one broker with the default engine)")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    klogs = tuple(f"klog-{e}" for e in engines) if engines else ("klog",)
    systems = (*klogs, *(("kafka",) if args.kafka else ()))
    print(report(run(args.mb, args.rounds, systems), args.mb, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())

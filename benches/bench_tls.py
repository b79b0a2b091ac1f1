"""Produce and consume MB/s, and broker CPU per GB, over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners of
one klog broker, in the same run (rounds alternate the listeners).

Run: ``python benches/bench_tls.py`` (``--mb 256 --rounds 3``), or
``.venv/bin/pytest benches/bench_tls.py -p benchmark -o addopts="" -s``.

Clients are confluent-kafka (librdkafka: its TLS costs the client's CPU, not the broker's). Each round produces
``--mb`` MiB of 1 KiB records (acks=1, lz4 off) to a fresh one-partition topic through the listener, then
consumes them back from the beginning; the broker's CPU is its process's user+system time over each phase
(/proc/<pid>/stat). No target is asserted: the figures compare the listeners on one machine in one run.
"""

from __future__ import annotations

import argparse
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


def run(mb: int = 128, rounds: int = 3) -> dict[str, dict[str, float]]:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from klog.testing.certs import CertificateAuthority
    from klog.testing.process import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="klog-bench-tls-") as root:
        ca = CertificateAuthority(Path(root) / "pki")
        cert = ca.issue("broker")
        broker = BrokerProcess(Path(root) / "data", {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": cert.keystore_file,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "log.flush.interval.messages": 2**62})
        with broker:
            line = next(ln for ln in broker.lines if "listening on" in ln)
            ports = {n: int(p) for n, p in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            upsert = UserScramCredentialUpsertion("bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                  b"bench-pw")
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(30)
            results: dict[str, list[dict[str, float]]] = {name: [] for name in LISTENERS}
            for _ in range(rounds):
                for name in LISTENERS:   # alternate: drift of the machine hits every listener alike
                    results[name].append(_round(name, ports[name], ca.ca_file, broker.pid, mb))
    best: dict[str, dict[str, float]] = {}
    for name, rows in results.items():
        best[name] = {"produce_mb_s": max(r["produce_mb_s"] for r in rows),
                      "consume_mb_s": max(r["consume_mb_s"] for r in rows),
                      "produce_cpu_s_per_gb": min(r["produce_cpu_s_per_gb"] for r in rows),
                      "consume_cpu_s_per_gb": min(r["consume_cpu_s_per_gb"] for r in rows)}
    return best


def report(best: dict[str, dict[str, float]], mb: int, rounds: int) -> str:
    lines = [f"klog broker, {mb} MiB of {RECORD_BYTES}-byte records per phase, best of {rounds} rounds "
             "(confluent-kafka clients, one partition)",
             f"{'listener':<11}{'produce MB/s':>14}{'consume MB/s':>14}{'produce CPU s/GB':>18}"
             f"{'consume CPU s/GB':>18}"]
    for name, row in best.items():
        lines.append(f"{name:<11}{row['produce_mb_s']:>14.1f}{row['consume_mb_s']:>14.1f}"
                     f"{row['produce_cpu_s_per_gb']:>18.2f}{row['consume_cpu_s_per_gb']:>18.2f}")
    return "\n".join(lines)


def test_tls_against_plaintext() -> None:
    pytest = __import__("pytest")
    pytest.importorskip("cryptography")
    mb, rounds = int(os.environ.get("KLOG_BENCH_TLS_MB", "128")), int(os.environ.get("KLOG_BENCH_TLS_ROUNDS", "3"))
    print("\n" + report(run(mb, rounds), mb, rounds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=128, help="MiB produced (and consumed) per round and listener")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(report(run(args.mb, args.rounds), args.mb, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run Apache Kafka 4.x itself (single KRaft combined node, from the Maven Central jars in .cache/kafka/libs)
as a baseline and behaviour oracle next to klog.

    with apache_kafka(tmp_path, port) as bootstrap:   # "127.0.0.1:<port>"
        ...
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from klog.testing.kafka_tools import kafka_libs_dir

#: how long Kafka may take to answer ApiVersions after start on a loaded 2-core machine
STARTUP_TIMEOUT_S = 120.0
SHUTDOWN_TIMEOUT_S = 30.0


class Bootstrap(str):
    """The bootstrap address ("127.0.0.1:<port>"), also carrying the broker's ``pid``."""

    pid: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers_api_versions(port: int) -> bool:
    """True once a broker on 127.0.0.1:port answers ApiVersions v0 without error."""
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            head = sock.recv(4)
            if len(head) < 4:
                return False
            body = sock.recv(struct.unpack(">i", head)[0])
            correlation_id, error_code = struct.unpack_from(">ih", body)
            return correlation_id == 1 and error_code == 0
    except (OSError, struct.error):
        return False


@contextlib.contextmanager
def apache_kafka(base: str | Path, port: int | None = None, *, config: Mapping[str, Any] | None = None,
                 libs: Path | None = None, heap: str = "1G") -> Iterator[Bootstrap]:
    """Format a KRaft log dir under ``base`` and run ``kafka.Kafka``; yields the bootstrap address.

    The heap flags are those of ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1) unless ``heap`` says otherwise.
    """
    java = shutil.which("java")
    if java is None:
        raise FileNotFoundError("java not found (Apache Kafka 4.x needs Java 17+)")
    libs = libs or kafka_libs_dir()
    if libs is None:
        raise FileNotFoundError("Kafka jars not found: run tools/install-peers.sh")
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    controller = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
    props: dict[str, Any] = {
        "process.roles": "broker,controller", "node.id": 1,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "listeners": listeners, "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(base / "kafka-data"),
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1, "group.initial.rebalance.delay.ms": 0,
        **(config or {}),
    }
    props_file = base / "kafka-server.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    classpath = ["-cp", f"{libs}/*"]
    cluster_id = subprocess.run([java, *classpath, "kafka.tools.StorageTool", "random-uuid"], check=True,
                                capture_output=True, text=True, timeout=120).stdout.split()[-1]
    subprocess.run([java, *classpath, "kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id,
                    "-c", str(props_file)], check=True, capture_output=True, timeout=120)
    log_path = base / "kafka.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([java, f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                                 *classpath, "kafka.Kafka", str(props_file)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not answers_api_versions(port):
            if proc.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {proc.returncode}; see {log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Apache Kafka did not serve within {STARTUP_TIMEOUT_S:.0f}s; see {log_path}")
            time.sleep(0.2)
        bootstrap = Bootstrap(f"127.0.0.1:{port}")
        bootstrap.pid = proc.pid
        yield bootstrap
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

"""Start the two brokers under comparison with equivalent settings and hand back what the harness measures.

Both get the same Kafka ``server.properties`` keys (:func:`shared_properties`): default partitions, segment
size, no per-message fsync (Kafka's and klog's default: ``log.flush.interval.messages`` unset), the same
socket buffer sizes and auto topic creation. Apache Kafka runs as a single KRaft combined node
(broker+controller) with the heap settings of ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .procstat import pid_listening_on

#: How long a broker may take to answer ApiVersions after it was started, on a loaded 2-core machine.
STARTUP_TIMEOUT_S = 120.0
#: How long a broker may take to stop after SIGTERM before it is killed.
SHUTDOWN_TIMEOUT_S = 30.0

#: A 1 GiB segment (Kafka's default), stated explicitly so both brokers roll at the same size.
SEGMENT_BYTES = 1 << 30


def shared_properties(num_partitions: int = 1) -> dict[str, object]:
    """The settings both brokers run with (Kafka property names; klog reads the same keys)."""
    return {
        "num.partitions": num_partitions,
        "log.segment.bytes": SEGMENT_BYTES,
        # No per-message fsync on either broker: both leave flushing to the OS page cache (Kafka's default).
        "log.flush.interval.messages": 9223372036854775807,
        "socket.send.buffer.bytes": 102400,
        "socket.receive.buffer.bytes": 102400,
        "socket.request.max.bytes": 104857600,
        "message.max.bytes": 1048588,
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4,
        "group.initial.rebalance.delay.ms": 0,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
    }


@dataclass
class RunningBroker:
    """A broker process the harness measures."""

    name: str                # "kafka" or "klog"
    bootstrap: str           # host:port
    pid: int                 # the process whose CPU and RSS are read from /proc
    data_dir: Path
    version: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def answers_api_versions(port: int) -> bool:
    """True once the broker answers ApiVersions v0 with no error (a KRaft broker: once it is unfenced)."""
    client_id = b"sidebyside-probe"
    request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            correlation_id, error_code = struct.unpack_from(">ih", _recv_exact(s, size))
            return correlation_id == 1 and error_code == 0
    except (OSError, struct.error):
        return False


def wait_until_serving(port: int, proc: subprocess.Popen[bytes] | None, log: Path, what: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not answers_api_versions(port):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} during startup:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not serve within {STARTUP_TIMEOUT_S:.0f} s:\n{tail(log)}")
        time.sleep(0.2)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} unreadable)"


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def kafka_libs() -> Path:
    """``.cache/kafka/libs`` of this checkout (``$KLOG_KAFKA_LIBS`` overrides), filled by install-peers.sh."""
    env = os.environ.get("KLOG_KAFKA_LIBS")
    libs = Path(env) if env else Path(__file__).resolve().parents[2] / ".cache" / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise FileNotFoundError(f"no Apache Kafka jars in {libs}: run `bash tools/install-peers.sh`")
    return libs


def kafka_version(libs: Path) -> str:
    jar = next(libs.glob("kafka_2.13-*.jar"))
    return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")


@contextlib.contextmanager
def apache_kafka(base: Path, props: Mapping[str, object]) -> Iterator[RunningBroker]:
    """Apache Kafka 4.x, single KRaft combined node, from the Maven Central jars."""
    try:  # the project's shared launcher, once it is on main
        from klog.testing.kafka import apache_kafka as shared_launcher
    except ImportError:
        shared_launcher = None
    libs = kafka_libs()
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    if shared_launcher is not None:
        with shared_launcher(base, port, config=dict(props), libs=libs, heap="1G") as bootstrap:
            yield RunningBroker("kafka", bootstrap, pid_listening_on(port), base / "kafka-data",
                                f"Apache Kafka {kafka_version(libs)}")
        return
    with _private_kafka(base, port, props, libs) as pid:  # until klog.testing.kafka lands
        yield RunningBroker("kafka", f"127.0.0.1:{port}", pid, base / "kafka-data",
                            f"Apache Kafka {kafka_version(libs)}")


@contextlib.contextmanager
def _private_kafka(base: Path, port: int, props: Mapping[str, object], libs: Path) -> Iterator[int]:
    java = shutil.which("java")
    if java is None:
        raise FileNotFoundError("java not found (Apache Kafka 4.x needs Java 17+)")
    controller = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
    all_props = {
        "process.roles": "broker,controller", "node.id": 1,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "listeners": listeners, "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(base / "kafka-data"), **props,
    }
    props_file = base / "server.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in all_props.items()))
    jvm = [java, "-Djava.awt.headless=true", "-cp", f"{libs}/*"]
    uuid = subprocess.run([*jvm, "kafka.tools.StorageTool", "random-uuid"], check=True, capture_output=True,
                          text=True, timeout=120).stdout.split()[-1]
    subprocess.run([*jvm, "kafka.tools.StorageTool", "format", "--standalone", "-t", uuid, "-c",
                    str(props_file)], check=True, capture_output=True, timeout=120)
    log = base / "kafka.stdout"
    with open(log, "wb") as out:
        proc = subprocess.Popen([java, "-Xmx1G", "-Xms1G", "-XX:+UseG1GC", *jvm[1:], "kafka.Kafka",
                                 str(props_file)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until_serving(port, proc, log, "Apache Kafka")
        yield proc.pid
    finally:
        stop_process(proc)


def klog_command() -> list[str]:
    """How to run klog-broker: ``$KLOG_BROKER_CMD`` (split on spaces) or this interpreter's ``klog.broker``."""
    env = os.environ.get("KLOG_BROKER_CMD")
    return env.split() if env else [sys.executable, "-m", "klog.broker"]


def klog_version() -> str:
    try:
        from importlib.metadata import version
        return f"klog {version('klog')}"
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "klog (source)"


@contextlib.contextmanager
def klog_broker(base: Path, props: Mapping[str, object]) -> Iterator[RunningBroker]:
    """klog-broker as its own process, configured with the same Kafka properties file."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    data = base / "klog-data"
    all_props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(data), **props}
    props_file = base / "server.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in all_props.items()))
    log = base / "klog.log"
    with open(log, "wb") as out:
        # cwd=base: a source checkout's klog/ must not shadow the installed package.
        proc = subprocess.Popen([*klog_command(), str(props_file), "--log-level", "WARNING"], cwd=base,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until_serving(port, proc, log, "klog-broker")
        yield RunningBroker("klog", f"127.0.0.1:{port}", proc.pid, data, klog_version())
    finally:
        stop_process(proc)


LAUNCHERS = {"kafka": apache_kafka, "klog": klog_broker}

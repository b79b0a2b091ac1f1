"""Helpers shared by the Spark test modules: a SparkSession, test data producers, Kafka launcher."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def spark_session(app: str, *, master: str = "local[2]", jars: list[str] | None = None, conf: Mapping[str, str] | None = None):
    """A small local SparkSession whose Python workers run this interpreter, with klog registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import klog.spark

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    klog.spark.register(spark)
    return spark


def create_topic(bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=dict(config or {}))], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until every partition has a leader
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after 30 s")


# --- Apache Kafka launcher (interim: replaced by klog.testing.kafka once it is on main) -----------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kafka_libs() -> Path:
    for d in [REPO, *REPO.parents]:
        libs = d / ".cache" / "kafka" / "libs"
        if any(libs.glob("kafka_2.13-*.jar")):
            return libs
    raise FileNotFoundError("Apache Kafka jars not found: run `bash tools/install-peers.sh`")


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def _answers_api_versions(port: int) -> bool:
    req = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(struct.pack(">i", len(req)) + req)
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            correlation_id, error_code = struct.unpack_from(">ih", _recv_exact(s, size))
            return correlation_id == 1 and error_code == 0  # a KRaft broker answers once unfenced
    except (OSError, struct.error):
        return False


@contextlib.contextmanager
def apache_kafka(tmp_dir: Path, config: Mapping[str, object] | None = None) -> Iterator[str]:
    """A single-node KRaft Apache Kafka on a free 127.0.0.1 port; yields the bootstrap address."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    port, ctl = free_port(), free_port()
    data = tmp_dir / "kafka-data"
    props = {
        "process.roles": "broker,controller", "node.id": 1,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{ctl}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}",
        "inter.broker.listener.name": "PLAINTEXT", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data), "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 2,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false",
    }
    props.update(config or {})
    (tmp_dir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cp = ["java", "-cp", f"{kafka_libs()}/*"]
    uuid = subprocess.run([*cp, "kafka.tools.StorageTool", "random-uuid"], check=True, capture_output=True,
                          text=True, timeout=120).stdout.split()[-1]
    subprocess.run([*cp, "kafka.tools.StorageTool", "format", "--standalone", "-t", uuid, "-c",
                    str(tmp_dir / "server.properties")], check=True, capture_output=True, timeout=120)
    out = open(tmp_dir / "kafka.out", "wb")
    proc = subprocess.Popen(["java", "-Xmx768m", "-Xms256m", *cp[1:], "kafka.Kafka", str(tmp_dir / "server.properties")],
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not _answers_api_versions(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Apache Kafka did not start: {(tmp_dir / 'kafka.out').read_text()[-3000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        out.close()

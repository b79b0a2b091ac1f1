"""Start the two brokers under comparison with equivalent settings and hand back what the harness measures.

Both get the same Kafka ``server.properties`` keys (:func:`shared_properties`): default partitions, segment
size, no per-message fsync (Kafka's and klog's default: ``log.flush.interval.messages`` unset), the same
socket buffer sizes and auto topic creation. Apache Kafka runs as a single KRaft combined node
(broker+controller) with the heap settings of ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

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


def kafka_libs() -> Path:
    """The Apache Kafka jars (``$KLOG_KAFKA_LIBS`` or this checkout's ``.cache/kafka/libs``)."""
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir(Path(__file__).resolve().parent)
    if libs is None or not any(libs.glob("kafka_2.13-*.jar")):
        raise FileNotFoundError("no Apache Kafka jars: run `bash tools/install-peers.sh`")
    return libs


def kafka_version(libs: Path) -> str:
    jar = next(libs.glob("kafka_2.13-*.jar"))
    return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")


@contextlib.contextmanager
def apache_kafka(base: Path, props: Mapping[str, object]) -> Iterator[RunningBroker]:
    """Apache Kafka 4.x, single KRaft combined node, from the Maven Central jars (klog.testing.kafka)."""
    from klog.testing.kafka import apache_kafka as launch

    libs = kafka_libs()
    base.mkdir(parents=True, exist_ok=True)
    with launch(base, config=dict(props), libs=libs, heap="1G") as bootstrap:
        yield RunningBroker("kafka", str(bootstrap), bootstrap.pid, base / "kafka-data",
                            f"Apache Kafka {kafka_version(libs)}")


def klog_version() -> str:
    try:
        from importlib.metadata import version
        return f"klog {version('klog')}"
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "klog (source)"


@contextlib.contextmanager
def klog_broker(base: Path, props: Mapping[str, object]) -> Iterator[RunningBroker]:
    """klog-broker as its own process (klog.testing.process; ``$KLOG_BROKER_COMMAND`` overrides the command),
    reading the same Kafka properties file."""
    from klog.testing.process import BrokerProcess

    base.mkdir(parents=True, exist_ok=True)
    data = base / "klog-data"
    props_file = base / "server.properties"
    props_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    # cwd=base: a source checkout's klog/ must not shadow the installed package.
    with BrokerProcess(data, properties_file=props_file, cwd=base) as broker:
        yield RunningBroker("klog", broker.bootstrap_servers, broker.pid, data, klog_version())


LAUNCHERS = {"kafka": apache_kafka, "klog": klog_broker}

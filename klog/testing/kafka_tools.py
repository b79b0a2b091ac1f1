"""Run Apache Kafka's Java CLI tools (TopicCommand, ConsoleProducer, ConsoleConsumer, ProducerPerformance...)
from the jars that ``tools/install-peers.sh`` puts in ``.cache/kafka/libs``.

    run_kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", servers, "--list")
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"


def kafka_libs_dir(start: str | os.PathLike[str] | None = None) -> Path | None:
    """``$KLOG_KAFKA_LIBS``, else the first ``.cache/kafka/libs`` found walking up from ``start`` (default:
    the working directory)."""
    env = os.environ.get("KLOG_KAFKA_LIBS")
    if env:
        return Path(env) if Path(env).is_dir() else None
    here = Path(start or os.getcwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / ".cache" / "kafka" / "libs"
        if candidate.is_dir() and any(candidate.glob("kafka-clients-*.jar")):
            return candidate
    return None


def java_available() -> bool:
    return shutil.which("java") is not None


def kafka_tool_command(main_class: str, *args: str, libs: Path | None = None, heap: str = "256m") -> list[str]:
    """The ``java`` command line running ``main_class`` from the Kafka jars (for a tool run in the background)."""
    libs = libs or kafka_libs_dir()
    if libs is None:
        raise FileNotFoundError("Kafka jars not found: run tools/install-peers.sh (or set KLOG_KAFKA_LIBS)")
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-Dlog4j2.level=WARN", "-cp", f"{libs}/*", main_class, *args]


def run_kafka_tool(main_class: str, *args: str, libs: Path | None = None, input: str | bytes | None = None,
                   timeout: float = 120.0, heap: str = "256m") -> subprocess.CompletedProcess[str]:
    if main_class.endswith("DumpLogSegments") and "--files" in args:
        # DumpLogSegments takes one comma-separated --files value and silently ignores any further arguments:
        # a second file passed on its own would never be read
        rest = args[args.index("--files") + 2:]
        if rest and not rest[0].startswith("--"):
            raise ValueError(f"DumpLogSegments: pass several files as one comma-separated --files value, not {rest[0]!r}")
    cmd = kafka_tool_command(main_class, *args, libs=libs, heap=heap)
    text = not isinstance(input, bytes)
    return subprocess.run(cmd, input=input, capture_output=True, text=text, timeout=timeout)  # type: ignore[call-overload]


def compile_java(source: Path, out: Path, *, libs: Path | None = None, timeout: float = 180.0) -> Path:
    """Compiles one Java ``source`` file against the Kafka jars into ``out``; returns ``out`` (the classpath entry
    of its classes)."""
    libs = libs or kafka_libs_dir()
    if libs is None:
        raise FileNotFoundError("Kafka jars not found: run tools/install-peers.sh (or set KLOG_KAFKA_LIBS)")
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{libs}/*", str(source)], check=True,
                   capture_output=True, timeout=timeout)
    return out

"""Shared helpers of the consumer-group tests: Kafka's jars and the Java record oracle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KAFKA_LIBS = Path(os.environ.get("KLOG_KAFKA_LIBS", REPO / ".cache" / "kafka" / "libs"))


def kafka_classpath() -> str:
    jars = sorted(KAFKA_LIBS.glob("*.jar"))
    if not jars or shutil.which("java") is None:
        pytest.fail(f"Apache Kafka jars not found in {KAFKA_LIBS} (or no java): run `bash tools/install-peers.sh`")
    return os.pathsep.join(str(j) for j in jars)


class RecordOracle:
    """Kafka's own __consumer_offsets serde in a long-lived JVM (tests/java/GroupRecordsOracle.java)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["java", "-cp", kafka_classpath(), str(REPO / "tests" / "java" / "GroupRecordsOracle.java")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, request: dict) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("Kafka record oracle exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

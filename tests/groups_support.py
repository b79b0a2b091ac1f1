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


# --- in-process coordinator harness -----------------------------------------------------------------------


class FakeClock:
    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


class TestContext:
    """What the broker hands the coordinator, for in-process tests: config, identity, known topics."""

    __test__ = False

    def __init__(self, topics: dict[str, int] | None = None, **config) -> None:
        from klog.broker.config import BrokerConfig

        props = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
        props.update({k: str(v) for k, v in config.items()})
        self.config = BrokerConfig(props)
        self.node_id = 1
        self.host = "127.0.0.1"
        self.port = 9092
        self.topics = dict(topics or {})

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str):
        import uuid

        return uuid.uuid5(uuid.NAMESPACE_URL, f"klog-test/{topic}")

    def topic_catalog(self) -> dict:
        return {name: (self.topic_id(name), n) for name, n in self.topics.items()}

    def wait_replicated(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> None:
        return None   # nothing here is replicated: a write is done once appended


def consumer_subscription(*topics: str, owned: list[tuple[str, list[int]]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription (v1 when owned partitions are given, else v0)."""
    import struct

    out = struct.pack(">h", 1 if owned is not None else 0) + struct.pack(">i", len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)  # user data: null
    if owned is not None:
        out += struct.pack(">i", len(owned))
        for t, parts in owned:
            out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(parts))
            out += b"".join(struct.pack(">i", p) for p in parts)
    return out


class Client:
    """Sends requests through klog's wire codec (encode -> decode -> coordinator -> encode -> decode), so
    every answer is checked to be encodable at the version asked."""

    def __init__(self, coordinator, client_id: str = "client", host: str = "/127.0.0.1") -> None:
        self.coordinator = coordinator
        self.client_id = client_id
        self.host = host
        self.correlation = 0

    async def call(self, api_key: int, version: int, **fields):
        from klog import protocol as P

        self.correlation += 1
        frame = P.encode_request(api_key, version, self.correlation, self.client_id, P.Struct(**fields))[4:]
        header, offset = P.decode_request_header(frame)
        request = P.decode_request(header, frame, offset)
        response = await self.coordinator.handle(header, request, client_host=self.host)
        chunks = P.encode_response(api_key, version, self.correlation, response)
        data = b"".join(bytes(c) for c in chunks)[4:]
        correlation, decoded = P.decode_response(api_key, version, data)
        assert correlation == self.correlation
        return decoded


def run_async_tests(namespace: dict) -> None:
    """Turns the module's ``async def test_*`` into plain tests that run on a fresh event loop (bounded)."""
    import asyncio
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def runner(*args, **kwargs):
            return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 30))
        return runner

    for name, fn in list(namespace.items()):
        if name.startswith("test_") and asyncio.iscoroutinefunction(fn):
            namespace[name] = wrap(fn)

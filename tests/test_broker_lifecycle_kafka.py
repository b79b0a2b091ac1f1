"""klog's broker lifecycle state machine against Apache Kafka 4.x's own controller.

A real single-node Kafka (KRaft, combined mode, node 1) is the active controller. A broker "node 2" made of
klog.broker.lifecycle's state machine, run by klog.broker.lifecycle_driver over a klog client connection to
Kafka's controller listener (every message encoded and decoded by klog.protocol), registers, catches up, is
unfenced, leads a partition, shuts down in a controlled way, restarts with a new incarnation, and is "killed"
and restarted at once (a restart is refused with DUPLICATE_BROKER_REGISTRATION until the previous process's last
heartbeat is a session old, after a controlled shutdown too: what Kafka 4.3's controller does, and klog's).
What Kafka's controller answers, and what Kafka's broker then reports (DescribeCluster, Metadata), are the
behaviours klog's controller (klog.controller.brokers) is tested for in test_broker_lifecycle.py's simulation.

No broker process serves node 2's advertised listener: Kafka's broker only logs failed fetches from it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.broker.lifecycle import BrokerLifecycleManager, BrokerState, Listener
from klog.broker.lifecycle_driver import LifecycleDriver
from klog.protocol import ApiKey, decode_response, encode_request, versions
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

SESSION_TIMEOUT_MS = 4000
HEARTBEAT_INTERVAL_MS = 500
NODE = 2
#: Feature ranges node 2 registers with: wide enough for every level a freshly formatted Kafka 4.x finalizes.
FEATURES = [(name, 0, 100) for name in ("metadata.version", "kraft.version", "transaction.version",
                                        "group.version", "eligible.leader.replicas.version", "share.version",
                                        "streams.version")]
FEATURES[0] = ("metadata.version", 1, 100)
#: Bounds on the real-time waits of this test (Kafka on a loaded 2-core machine).
STEP_TIMEOUT_S = 60.0


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class Connection:
    """One blocking connection speaking klog.protocol at our newest versions."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation_id = 0

    def call(self, api_key: int, body: Any, version: int | None = None) -> Any:
        self.correlation_id += 1
        v = versions(api_key)[1] if version is None else version
        self.sock.sendall(encode_request(api_key, v, self.correlation_id, "klog-lifecycle-test", body))
        (size,) = struct.unpack(">i", self._exact(4))
        correlation_id, response = decode_response(api_key, v, self._exact(size))
        assert correlation_id == self.correlation_id
        return response

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


class RecordingManager(BrokerLifecycleManager):
    """Node 2's state machine, keeping every answer; it "replays" the metadata log up to its registration at once
    (a real broker's metadata fetch would) and is ready to unfence as soon as it caught up."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.answers: list[Any] = []

    def on_response(self, request_id: int, response: Any, now_ms: int) -> None:
        self.answers.append(response)
        if getattr(response, "broker_epoch", -1) >= 0 and response.error_code == 0:
            self.set_metadata_offset(response.broker_epoch)
        super().on_response(request_id, response, now_ms)
        if self.state is BrokerState.RECOVERY:
            self.set_ready_to_unfence(now_ms)


class Node2:
    """Node 2: the lifecycle state machine run by klog's asyncio driver against Kafka's controller."""

    def __init__(self, controller_port: int, cluster_id: str) -> None:
        self.m = RecordingManager(NODE, cluster_id, uuid.uuid4(), [Listener("PLAINTEXT", "127.0.0.1", free_port())],
                                  FEATURES, log_dirs=[uuid.uuid4()], heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                                  session_timeout_ms=SESSION_TIMEOUT_MS)
        self.driver = LifecycleDriver(self.m, [("127.0.0.1", controller_port)])
        self.m.start(now_ms())
        self.task = asyncio.get_running_loop().create_task(self.driver.run())

    async def until(self, condition: Callable[[], bool], timeout_s: float = STEP_TIMEOUT_S) -> None:
        try:
            await asyncio.wait_for(self.driver.wait_for(condition), timeout_s)
        except asyncio.TimeoutError:
            raise AssertionError(f"node 2 stuck in {self.m.state.name}, last error {self.m.last_error}") from None

    async def kill(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    try:
        find_kafka_libs()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    base: Path = tmp_path_factory.mktemp("kafka-lifecycle")
    port, controller_port = free_port(), free_port()
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    }
    with apache_kafka(base, port, config=config, heap="512m"):
        yield port, controller_port


def cluster_id(broker: Connection) -> str:
    return str(broker.call(ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": True}).cluster_id)


def broker_fenced(broker: Connection, node: int) -> bool | None:
    """Node ``node``'s fencing as Kafka's broker reports it (None: not registered)."""
    answer = broker.call(ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": True})
    return next((b.is_fenced for b in answer.brokers if b.broker_id == node), None)


def leaders(broker: Connection, topic: str) -> list[int]:
    answer = broker.call(ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    (t,) = answer.topics
    return [p.leader_id for p in sorted(t.partitions, key=lambda p: p.partition_index)]


async def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def test_kafkas_controller_registers_unfences_and_lets_a_klog_lifecycle_broker_shut_down(kafka: tuple[int, int]
                                                                                           ) -> None:
    port, controller_port = kafka
    broker = Connection(port)
    try:
        asyncio.run(asyncio.wait_for(scenario(broker, controller_port), 240))
    finally:
        broker.close()


async def scenario(broker: Connection, controller_port: int) -> None:
    cid = await asyncio.to_thread(cluster_id, broker)
    node = Node2(controller_port, cid)
    await node.until(lambda: node.m.state is BrokerState.RUNNING)
    first_epoch = node.m.broker_epoch
    assert first_epoch > 0 and node.m.last_error is None
    caught_up = [a for a in node.m.answers if hasattr(a, "is_caught_up") and a.is_caught_up]
    assert caught_up and caught_up[0].is_fenced   # caught up first, unfenced only once it asked
    await wait_for(lambda: broker_fenced(broker, NODE) is False, "Kafka's broker to see node 2 unfenced")

    created = await asyncio.to_thread(broker.call, ApiKey.CREATE_TOPICS, {"topics": [{
        "name": "lifecycle", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [NODE, 1]},
                        {"partition_index": 1, "broker_ids": [1, NODE]}]}], "timeout_ms": 30000})
    assert created.topics[0].error_code == 0, created.topics[0].error_message
    await wait_for(lambda: leaders(broker, "lifecycle") == [NODE, 1], "node 2 to lead partition 0")

    # SIGTERM: the driver returns once the controller let node 2 go
    node.m.begin_controlled_shutdown(now_ms())
    node.driver.poke()
    await asyncio.wait_for(node.task, STEP_TIMEOUT_S)
    assert node.m.state is BrokerState.SHUTTING_DOWN
    assert node.m.shutdown_reason == "the controller allowed the controlled shutdown"
    assert node.m.answers[-1].should_shut_down and node.m.answers[-1].is_fenced
    assert await asyncio.to_thread(leaders, broker, "lifecycle") == [1, 1]   # moved before node 2 was let go
    await wait_for(lambda: broker_fenced(broker, NODE) is True, "Kafka's broker to see node 2 fenced")

    # a restart after a clean shutdown: refused while the old process's last heartbeat is younger than a
    # session, then registered with a new epoch
    restarted = Node2(controller_port, cid)
    await restarted.until(lambda: restarted.m.state is BrokerState.RUNNING)
    assert restarted.m.answers[0].error_code == 101   # DUPLICATE_BROKER_REGISTRATION
    assert {a.error_code for a in restarted.m.answers} == {0, 101}
    assert restarted.m.broker_epoch > first_epoch
    assert await asyncio.to_thread(leaders, broker, "lifecycle") == [1, 1]   # in no ISR any more: leads nothing

    # killed (no more heartbeats) and restarted at once: the same, a session after its last heartbeat
    await restarted.kill()
    killed_at = time.monotonic()
    again = Node2(controller_port, cid)
    await again.until(lambda: again.m.last_error is not None, 10)
    assert again.m.last_error == (101, "DUPLICATE_BROKER_REGISTRATION")
    await again.until(lambda: again.m.state is BrokerState.RUNNING)
    assert time.monotonic() - killed_at >= (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000
    assert again.m.broker_epoch > restarted.m.broker_epoch
    await again.kill()

"""The broker lifecycle over the wire, one scenario against two controllers: Apache Kafka 4.x's and klog's.

"Node 2" is klog.broker.lifecycle's state machine run by klog.broker.lifecycle_driver over a klog client
connection to a controller listener (every message encoded and decoded by klog.protocol). It registers, catches
up, is unfenced, leads a partition, shuts down in a controlled way (the leadership moves before the controller
lets it go), restarts with a new incarnation, and is "killed" and restarted at once; a restart is refused with
DUPLICATE_BROKER_REGISTRATION until the previous process's last heartbeat is a session old, after a controlled
shutdown too.

- Kafka: a real single-node Kafka (KRaft, combined mode, node 1) is the active controller; what its broker then
  reports (DescribeCluster, Metadata) is checked. No process serves node 2's advertised listener: Kafka's broker
  only logs failed fetches from it.
- klog: an asyncio controller listener in this test serving ApiVersions, BrokerRegistration and BrokerHeartbeat
  with klog.controller.brokers.ClusterControlManager, committing its records (after a delay) into an image
  replayed through klog.metadata; node 1 is another lifecycle state machine whose metadata offset follows the
  committed log.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.broker.lifecycle import BrokerLifecycleManager, LifecycleState, Listener
from klog.broker.lifecycle_driver import LifecycleDriver
from klog.controller.brokers import ClusterControlManager
from klog.metadata.delta import replay
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol import (
    ApiKey,
    FrameReader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    versions,
)
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port

pytestmark = pytest.mark.timeout(300)

SESSION_TIMEOUT_MS = 4000
HEARTBEAT_INTERVAL_MS = 500
NODE = 2
#: Feature ranges the nodes register with: wide enough for every level a freshly formatted Kafka 4.x finalizes.
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
    """A node's state machine, keeping every answer. Node 2 "replays" the metadata log up to its registration at
    once (a real broker's metadata fetch would); every node is ready to unfence as soon as it caught up."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.answers: list[Any] = []

    def on_response(self, request_id: int, response: Any, now_ms: int) -> None:
        self.answers.append(response)
        if getattr(response, "broker_epoch", -1) >= 0 and response.error_code == 0:
            self.set_metadata_offset(response.broker_epoch)
        super().on_response(request_id, response, now_ms)
        if self.state is LifecycleState.RECOVERY:
            self.set_ready_to_unfence(now_ms)


class Node:
    """A lifecycle state machine run by klog's asyncio driver against a controller listener."""

    def __init__(self, node_id: int, controller_port: int, cluster_id: str) -> None:
        self.m = RecordingManager(node_id, cluster_id, uuid.uuid4(),
                                  [Listener("PLAINTEXT", "127.0.0.1", free_port())], FEATURES,
                                  log_dirs=[uuid.uuid4()], heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                                  session_timeout_ms=SESSION_TIMEOUT_MS)
        self.driver = LifecycleDriver(self.m, [("127.0.0.1", controller_port)])
        self.m.start(now_ms())
        self.task = asyncio.get_running_loop().create_task(self.driver.run())

    async def until(self, condition: Callable[[], bool], timeout_s: float = STEP_TIMEOUT_S) -> None:
        try:
            await asyncio.wait_for(self.driver.wait_for(condition), timeout_s)
        except asyncio.TimeoutError:
            raise AssertionError(f"node {self.m.node_id} stuck in {self.m.state.name}, "
                                 f"last error {self.m.last_error}") from None

    async def kill(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class Backend:
    """What the scenario needs from a cluster besides its controller listener."""

    controller_port: int
    cluster_id: str

    async def fenced(self, node: int) -> bool | None:
        """The node's fencing as the cluster reports it (None: not registered)."""
        raise NotImplementedError

    async def leaders(self, topic: str) -> list[int]:
        raise NotImplementedError

    async def create_topic(self, name: str, assignment: list[list[int]]) -> None:
        raise NotImplementedError


class KafkaBackend(Backend):
    def __init__(self, broker: Connection, controller_port: int) -> None:
        self.broker = broker
        self.controller_port = controller_port

    async def start(self) -> None:
        answer = await asyncio.to_thread(self.broker.call, ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": True})
        self.cluster_id = str(answer.cluster_id)

    async def fenced(self, node: int) -> bool | None:
        answer = await asyncio.to_thread(self.broker.call, ApiKey.DESCRIBE_CLUSTER, {"include_fenced_brokers": True})
        return next((b.is_fenced for b in answer.brokers if b.broker_id == node), None)

    async def leaders(self, topic: str) -> list[int]:
        answer = await asyncio.to_thread(self.broker.call, ApiKey.METADATA,
                                         {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        (t,) = answer.topics
        return [p.leader_id for p in sorted(t.partitions, key=lambda p: p.partition_index)]

    async def create_topic(self, name: str, assignment: list[list[int]]) -> None:
        created = await asyncio.to_thread(self.broker.call, ApiKey.CREATE_TOPICS, {"topics": [{
            "name": name, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": i, "broker_ids": r} for i, r in enumerate(assignment)]}],
            "timeout_ms": 30000})
        assert created.topics[0].error_code == 0, created.topics[0].error_message


#: klog backend: how long a proposal takes to commit, and how often the controller looks for expired sessions
COMMIT_DELAY_S = 0.015
EXPIRY_CHECK_S = 0.05


class KlogBackend(Backend):
    """klog's controller behind an asyncio controller listener, and node 1 heartbeating to it."""

    def __init__(self) -> None:
        self.cluster_id = "klog-lifecycle-wire-test"
        self.controller = ClusterControlManager(self.cluster_id, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.log: list[Any] = []   # MetadataRecords
        self.committed = 0
        self.image = MetadataImage(cluster_id=self.cluster_id)
        self.tasks: list[asyncio.Task[Any]] = []
        self.topics: dict[str, uuid.UUID] = {}

    async def start(self) -> None:
        await self.propose([record("FeatureLevelRecord", name="metadata.version", feature_level=25)])
        self.controller.activate(self.image, now_ms())
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.controller_port = self.server.sockets[0].getsockname()[1]
        self.tasks.append(asyncio.get_running_loop().create_task(self._expire_sessions()))
        self.node1 = Node(1, self.controller_port, self.cluster_id)
        self.tasks.append(asyncio.get_running_loop().create_task(self._node1_replays()))
        await self.node1.until(lambda: self.node1.m.state is LifecycleState.RUNNING)

    async def stop(self) -> None:
        await self.node1.kill()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.server.close()
        await self.server.wait_closed()

    async def propose(self, records: list[MetadataRecord]) -> None:
        """Append now, commit (replay into the image) after the commit delay, in log order."""
        self.log += records
        end = len(self.log)
        await asyncio.sleep(COMMIT_DELAY_S)
        if end > self.committed:
            self.image, _ = replay(self.image, self.log[self.committed:end], self.committed)
            self.committed = end

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(1 << 20)
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                for frame in frames:
                    header, offset = decode_request_header(frame)
                    body = await self._answer(header.api_key, decode_request(header, frame, offset))
                    writer.writelines(encode_response(header.api_key, header.api_version, header.correlation_id,
                                                      body))
                    await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, api_key: int, request: Any) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            return {"error_code": 0, "api_keys": [
                {"api_key": k, "min_version": versions(k)[0], "max_version": versions(k)[1]}
                for k in (ApiKey.API_VERSIONS, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT)]}
        op = self.controller.register_broker if api_key == ApiKey.BROKER_REGISTRATION \
            else self.controller.process_heartbeat
        result = op(request, self.image, now_ms(), record_offset=len(self.log))
        if result.records:
            await self.propose(list(result.records))   # answered once committed, as a Kafka controller does
        return result.response

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            while (result := self.controller.fence_stale_broker(self.image, now_ms())).response is not None:
                if result.records:
                    await self.propose(list(result.records))

    async def _node1_replays(self) -> None:
        while True:
            self.node1.m.set_metadata_offset(self.committed - 1)
            await asyncio.sleep(0.02)

    async def fenced(self, node: int) -> bool | None:
        b = self.image.brokers.get(node)
        return None if b is None else b.fenced

    async def leaders(self, topic: str) -> list[int]:
        t = self.image.topics_by_id[self.topics[topic]]
        return [p.leader for _, p in sorted(t.partitions.items())]

    async def create_topic(self, name: str, assignment: list[list[int]]) -> None:
        tid = self.topics[name] = uuid.uuid4()
        await self.propose([record("TopicRecord", name=name, topic_id=tid)] + [
            record("PartitionRecord", partition_id=i, topic_id=tid, replicas=r, isr=r, leader=r[0], leader_epoch=0,
                   partition_epoch=0) for i, r in enumerate(assignment)])


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


async def wait_for(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def scenario(cluster: Backend) -> None:
    port, cid = cluster.controller_port, cluster.cluster_id
    node = Node(NODE, port, cid)
    await node.until(lambda: node.m.state is LifecycleState.RUNNING)
    first_epoch = node.m.broker_epoch
    assert first_epoch > 0 and node.m.last_error is None
    caught_up = [a for a in node.m.answers if hasattr(a, "is_caught_up") and a.is_caught_up]
    assert caught_up and caught_up[0].is_fenced   # caught up first, unfenced only once it asked
    await wait_for(lambda: _is(cluster.fenced(NODE), False), "the cluster to see node 2 unfenced")

    await cluster.create_topic("lifecycle", [[NODE, 1], [1, NODE]])
    await wait_for(lambda: _is(cluster.leaders("lifecycle"), [NODE, 1]), "node 2 to lead partition 0")

    # SIGTERM: the driver returns once the controller let node 2 go
    node.m.begin_controlled_shutdown(now_ms())
    node.driver.poke()
    await asyncio.wait_for(node.task, STEP_TIMEOUT_S)
    assert node.m.state is LifecycleState.SHUTTING_DOWN
    assert node.m.shutdown_reason == "the controller allowed the controlled shutdown"
    assert node.m.answers[-1].should_shut_down and node.m.answers[-1].is_fenced
    assert await cluster.leaders("lifecycle") == [1, 1]   # moved before node 2 was let go
    await wait_for(lambda: _is(cluster.fenced(NODE), True), "the cluster to see node 2 fenced")

    # a restart after a clean shutdown: refused while the old process's last heartbeat is younger than a
    # session, then registered with a new epoch
    restarted = Node(NODE, port, cid)
    await restarted.until(lambda: restarted.m.state is LifecycleState.RUNNING)
    assert restarted.m.answers[0].error_code == 101   # DUPLICATE_BROKER_REGISTRATION
    assert {a.error_code for a in restarted.m.answers} == {0, 101}
    assert restarted.m.broker_epoch > first_epoch
    assert await cluster.leaders("lifecycle") == [1, 1]   # in no ISR any more: leads nothing

    # killed (no more heartbeats) and restarted at once: the same, a session after its last heartbeat
    await restarted.kill()
    killed_at = time.monotonic()
    again = Node(NODE, port, cid)
    await again.until(lambda: again.m.last_error is not None, 10)
    assert again.m.last_error == (101, "DUPLICATE_BROKER_REGISTRATION")
    await again.until(lambda: again.m.state is LifecycleState.RUNNING)
    assert time.monotonic() - killed_at >= (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000
    assert again.m.broker_epoch > restarted.m.broker_epoch
    await again.kill()


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return await value == expected


@pytest.mark.java
@pytest.mark.long
def test_the_lifecycle_scenario_against_apache_kafkas_controller(kafka: tuple[int, int]) -> None:
    port, controller_port = kafka
    broker = Connection(port)

    async def main() -> None:
        cluster = KafkaBackend(broker, controller_port)
        await cluster.start()
        await scenario(cluster)

    try:
        asyncio.run(asyncio.wait_for(main(), 240))
    finally:
        broker.close()


def test_the_lifecycle_scenario_against_klogs_controller() -> None:
    async def main() -> None:
        cluster = KlogBackend()
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()

    asyncio.run(asyncio.wait_for(main(), 240))

"""A controller quorum of real ``klog-broker`` processes on 127.0.0.1, each started from a properties file with
Kafka's KRaft names (process.roles, node.id, controller.quorum.voters, controller.listener.names, listeners,
listener.security.protocol.map, log.dirs). Raft messages go over each node's controller listener.

Observed through the files Kafka keeps: quorum-state (leader, epoch), meta.properties (cluster id) and each
member's snapshots of its applied metadata image."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from klog.controller.applier import BOOTSTRAP_METADATA_VERSION
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.process import broker_command


@contextlib.asynccontextmanager
async def combined_node(config: Any, **lifecycle: Any) -> AsyncIterator[tuple[Any, Any, Any]]:
    """A combined node in this process, started: (its controller, its broker lifecycle service, its broker server).
    The caller stops the server; the lifecycle service and the controller stop on leaving."""
    from klog.broker.__main__ import controller_listener, controller_node
    from klog.broker.server import BrokerServer
    from klog.controller.broker_service import BrokerLifecycleService

    controller = controller_node(config)
    brokers = BrokerLifecycleService(controller, **lifecycle)   # registration, unfencing
    listener = controller_listener(config, controller, brokers)
    server = BrokerServer(config, controller, controller_listener=listener)
    await controller.start()
    await brokers.start()
    try:
        await asyncio.wait_for(controller.wait_cluster_id(), 30)
        await asyncio.wait_for(server.start(), 30)
        yield controller, brokers, server
    finally:
        await brokers.stop()
        await controller.stop()

#: The active controller appends a NoOpRecord every 200 ms in these tests (metadata.max.idle.interval.ms):
#: the records proposed on the leader that every member must commit and apply.


def test_three_controllers_elect_one_leader_and_establish_one_cluster_id(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3) as q:
        leader = q.wait_for_leader()
        images = q.wait_applied(min_end_offset=3)
        ids = {q.cluster_id(i) for i in q.nodes}
        assert len(ids) == 1 and None not in ids, f"meta.properties disagree: {ids}"
        cluster_id = ids.pop()
        assert cluster_id is not None and len(cluster_id) == 22
        for i, m in images.items():
            assert m.image.metadata_version == BOOTSTRAP_METADATA_VERSION, f"node {i} lacks the bootstrap records"
        assert leader in q.nodes
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i} did not stop cleanly on SIGTERM:\n{node.log_text()[-2000:]}"
            assert "Traceback" not in node.log_text(), node.log_text()[-3000:]


def test_records_proposed_on_the_leader_are_committed_and_applied_on_all_members(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3) as q:
        leader = q.wait_for_leader()
        first = q.wait_applied(min_end_offset=1)
        target = max(m.snapshot.end_offset for m in first.values()) + 20
        images = q.wait_applied(min_end_offset=target)
        for i, m in images.items():
            assert m.snapshot.end_offset >= target
            assert m.image.metadata_version == BOOTSTRAP_METADATA_VERSION
        # Every member applied records of a term no later than the leader's current one.
        epoch = q.quorum_state(q.wait_for_leader()).leader_epoch  # type: ignore[union-attr]
        assert all(1 <= m.snapshot.epoch <= epoch for m in images.values()), {i: m.snapshot for i, m in images.items()}
        assert leader in q.nodes


@pytest.mark.parametrize("size", [3, pytest.param(5, marks=pytest.mark.long)])
def test_sigkill_of_the_leader_elects_a_new_one_committed_records_survive_and_a_restart_catches_up(
        tmp_path: Path, size: int) -> None:
    with ControllerQuorum(tmp_path, size) as q:
        leader = q.wait_for_leader()
        before = q.wait_applied(min_end_offset=10)
        committed = min(m.snapshot.end_offset for m in before.values())
        old_epoch = q.quorum_state(leader).leader_epoch  # type: ignore[union-attr]
        cluster_id = q.cluster_id(leader)

        q.kill(leader)
        new_leader = q.wait_for_leader(exclude=leader)
        assert new_leader != leader
        assert q.quorum_state(new_leader).leader_epoch > old_epoch  # type: ignore[union-attr]
        survivors = q.wait_applied(min_end_offset=committed + 10)
        for i, m in survivors.items():
            assert m.image.metadata_version == BOOTSTRAP_METADATA_VERSION, f"node {i} lost the bootstrap records"
            assert m.snapshot.epoch > old_epoch, "the new leader's records are applied"

        q.start_node(leader)
        target = max(m.snapshot.end_offset for m in survivors.values())
        caught_up = q.wait_applied(min_end_offset=target, nodes=[leader])
        assert caught_up[leader].image.metadata_version == BOOTSTRAP_METADATA_VERSION
        assert q.cluster_id(leader) == cluster_id
        assert q.wait_for_leader() in q.nodes


def test_members_formatted_with_a_cluster_id_use_it_and_a_member_of_another_cluster_is_refused(
        tmp_path: Path) -> None:
    q = ControllerQuorum(tmp_path, 3)
    ours, theirs = "MkU3OEVBNTcwNTJENDM2Qk", "QUJDREVGR0hJSktMTU5PUA"
    for i in q.nodes:
        out = subprocess.run([*broker_command(), "format", "-t", ours if i != 3 else theirs,
                              "-c", str(q.properties_files[i])], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    with q:
        assert q.wait_for_leader(nodes=[1, 2]) in (1, 2)
        images = q.wait_applied(min_end_offset=5, nodes=[1, 2])
        assert q.cluster_id(1) == q.cluster_id(2) == ours
        assert all(m.image.metadata_version == BOOTSTRAP_METADATA_VERSION for m in images.values())
        assert q.member_image(3) is None, "node 3 (another cluster) applied this cluster's log"
        # node 3's hello may reach them after they applied those records (a loaded machine): wait for it, bounded
        deadline = time.monotonic() + 30
        while True:
            refusals = [line for i in (1, 2) for line in q.nodes[i].lines if "belongs to cluster" in line]
            if any(theirs in line for line in refusals) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert any(theirs in line for line in refusals), "\n".join(q.nodes[1].lines[-20:])


def test_format_refuses_a_directory_formatted_for_another_cluster(tmp_path: Path) -> None:
    q = ControllerQuorum(tmp_path, 1)
    fmt = [*broker_command(), "format", "-c", str(q.properties_files[1]), "-t"]
    assert subprocess.run([*fmt, "MkU3OEVBNTcwNTJENDM2Qk"], capture_output=True, timeout=60).returncode == 0
    again = subprocess.run([*fmt, "QUJDREVGR0hJSktMTU5PUA"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "already formatted with cluster.id MkU3OEVBNTcwNTJENDM2Qk" in again.stderr
    bad = subprocess.run([*fmt, "not-an-id"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--cluster-id" in bad.stderr


@pytest.mark.parametrize(("change", "key"), [
    ({"node.id": "4"}, "node.id"),
    ({"controller.listener.names": "NOPE"}, "controller.listener.names"),
    ({"listeners": "CONTROLLER://127.0.0.1:1"}, "listeners"),
    ({"controller.quorum.voters": "1@127.0.0.1"}, "controller.quorum.voters"),
    ({"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0,{listeners}"}, "process.roles"),
])
def test_a_misconfigured_member_stops_with_a_message_naming_the_key(tmp_path: Path, change: dict[str, str],
                                                                     key: str) -> None:
    q = ControllerQuorum(tmp_path, 3)
    path = q.properties_files[1]
    props = dict(line.split("=", 1) for line in path.read_text().splitlines())
    props.update({k: v.format(**props) for k, v in change.items()})
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = subprocess.run([*broker_command(), str(path)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 2, out.stderr
    assert key in out.stderr, out.stderr


def test_no_arguments_is_still_a_single_node(tmp_path: Path) -> None:
    # Zero config: no quorum, no metadata log (the broker tests cover the rest).
    from klog.broker.config import BrokerConfig

    config = BrokerConfig({})
    assert not config.quorum_mode and config.serves_clients


def test_combined_broker_controller_nodes_serve_clients_with_the_cluster_id_the_quorum_established(
        tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    # The rest of Apache Kafka 4's sample combined-mode server.properties, plus its KRaft timing keys.
    kafka_sample = {
        "inter.broker.listener.name": "PLAINTEXT", "num.network.threads": 3, "num.io.threads": 8,
        "socket.send.buffer.bytes": 102400, "socket.receive.buffer.bytes": 102400,
        "socket.request.max.bytes": 104857600, "num.partitions": 1, "num.recovery.threads.per.data.dir": 1,
        "offsets.topic.replication.factor": 1, "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "log.retention.hours": 168, "log.segment.bytes": 1073741824,
        "log.retention.check.interval.ms": 300000, "controller.quorum.request.timeout.ms": 2000,
        "controller.quorum.retry.backoff.ms": 20, "metadata.log.segment.bytes": 1073741824,
        "metadata.log.segment.ms": 604800000, "broker.heartbeat.interval.ms": 2000,
        "broker.session.timeout.ms": 9000,
    }
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=kafka_sample) as q:
        q.wait_for_leader()
        q.wait_applied(min_end_offset=3)
        cluster_id = q.cluster_id(1)
        assert cluster_id is not None
        for i, node in q.nodes.items():
            assert q.cluster_id(i) == cluster_id
            admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
            assert admin.list_topics(timeout=10).cluster_id == cluster_id, f"node {i}'s broker role"
            assert not (q.log_dir(i) / "klog-topics.json").exists() or "__cluster_metadata" not in (
                q.log_dir(i) / "klog-topics.json").read_text(), "the broker adopted the metadata log as a topic"


def test_a_kafka_client_on_the_controller_listener_gets_the_controller_apis_only_and_the_quorum_goes_on(
        tmp_path: Path) -> None:
    # The controller listener serves what a controller serves to Kafka clients (ApiVersions, DescribeCluster,
    # DescribeQuorum, BrokerRegistration/BrokerHeartbeat; tests/test_describe_quorum.py runs kafka-metadata-quorum against it); any other request
    # closes the connection, and a Kafka client is never mistaken for a Raft peer.
    from klog.protocol.messages import ApiKey
    from klog.testing.wire import WireClient

    from klog.broker.forwarding import FORWARDED_APIS

    with ControllerQuorum(tmp_path, 3) as q:
        leader = q.wait_for_leader()
        q.wait_applied(min_end_offset=3, nodes=[leader])   # the cluster id is known: decisions are served
        with WireClient("127.0.0.1", q.controller_ports[leader]) as wire:
            versions = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                              "client_software_version": "1"})
            # and, as Kafka's controllers, the requests brokers forward (a controller-only node decides them) and
            # DescribeConfigs, which a controller answers itself (kafka-configs --bootstrap-controller)
            assert {k.api_key for k in versions.api_keys} == {ApiKey.API_VERSIONS, ApiKey.DESCRIBE_QUORUM,
                                                              ApiKey.DESCRIBE_CLUSTER, ApiKey.BROKER_REGISTRATION,
                                                              ApiKey.BROKER_HEARTBEAT, ApiKey.ALLOCATE_PRODUCER_IDS,
                                                              ApiKey.ALTER_PARTITION, ApiKey.ADD_RAFT_VOTER,
                                                              ApiKey.REMOVE_RAFT_VOTER, ApiKey.UPDATE_RAFT_VOTER,
                                                              ApiKey.ASSIGN_REPLICAS_TO_DIRS, ApiKey.ENVELOPE,
                                                              ApiKey.DESCRIBE_CONFIGS,   # answered here (KIP-919)
                                                              ApiKey.DESCRIBE_ACLS,      # answered here too
                                                              *FORWARDED_APIS}
            wire.send(ApiKey.METADATA, 12, {"topics": None})
            assert wire.is_closed_by_peer()
        before = q.wait_applied(min_end_offset=1)
        q.wait_applied(min_end_offset=max(m.snapshot.end_offset for m in before.values()) + 5)


def test_a_second_process_with_the_same_node_id_stops_with_a_message_naming_it(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path / "a", 1) as q:
        twin = q.properties_files[1].read_text().replace(str(q.log_dir(1)), str(tmp_path / "twin"))
        path = tmp_path / "twin.properties"
        path.write_text(twin)
        out = subprocess.run([*broker_command(), str(path)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, out.stderr
        assert "node.id 1 in controller.quorum.voters" in out.stderr and "already running" in out.stderr, out.stderr


@pytest.mark.long
def test_a_combined_node_opens_its_client_listener_only_once_unfenced_and_sigterm_stops_its_wait(
        tmp_path: Path) -> None:
    import time

    from confluent_kafka.admin import AdminClient

    q = ControllerQuorum(tmp_path, 3, roles="broker,controller")   # writes the files; starts nothing
    lonely = q.nodes[1]
    lonely.spawn()   # no majority: no cluster id, no registration
    # its controller logs this once the node handles SIGTERM (the handlers are installed before it starts); a
    # fixed sleep was too short on a loaded machine (the SIGTERM came before Python had even started)
    deadline = time.monotonic() + 60
    while not [line for line in lonely.lines if "quorum member on" in line]:
        assert time.monotonic() < deadline and lonely.proc is not None and lonely.proc.poll() is None, lonely.lines
        time.sleep(0.1)
    time.sleep(1)   # well into the wait for a leader
    assert lonely.proc is not None and lonely.proc.poll() is None
    assert not [line for line in lonely.lines if "listening on" in line], lonely.lines
    started = time.monotonic()
    assert lonely.stop() == 0, lonely.lines   # SIGTERM during the wait: a clean exit, at once
    assert time.monotonic() - started < 10
    assert any("shutting down before the start finished" in line for line in lonely.lines), lonely.lines

    try:
        for n in q.nodes.values():
            n.spawn()
        for n in q.nodes.values():
            n.wait_started()
        # the first Metadata answer from any node already lists its own, unfenced broker
        for i, n in q.nodes.items():
            brokers = AdminClient({"bootstrap.servers": n.bootstrap_servers}).list_topics(timeout=10).brokers
            assert i in brokers, (i, brokers)
    finally:
        q.close()


def test_records_committed_after_the_broker_role_stopped_reach_only_the_controller_role(tmp_path: Path) -> None:
    # A combined node stops its broker role before its controller role; the quorum may commit more records in
    # between (another broker's CreateTopics). They must not open logs in the closed broker (CI once saw the
    # node exit 1 with "log manager is closed" on SIGTERM).
    import uuid

    from klog.broker.__main__ import load_config
    from klog.controller.result import ControllerResult
    from klog.controller.topics import partition_records
    from klog.metadata.records import record
    from klog.testing.kafka import free_port

    controller_port = free_port()
    config = load_config(None, [
        "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        "controller.listener.names=CONTROLLER",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{controller_port}",
        f"log.dirs={tmp_path / 'data'}"])

    async def scenario() -> None:
        async with combined_node(config) as (controller, brokers, server):
            # one write path per node: the broker role's ControllerApis and the lifecycle service share its lock
            assert server.state.controller_apis.writer.decisions is controller.decisions
            assert brokers.writer.decisions is controller.decisions
            await server.stop()
            topic_id = uuid.uuid4()
            records = [record("TopicRecord", name="after-stop", topic_id=topic_id),
                       *partition_records(topic_id, 0, [[1]])]
            await asyncio.wait_for(controller.writer.write(lambda image: ControllerResult(records, None)), 30)
            assert controller.image.topic("after-stop") is not None
            assert not controller.failed.done(), controller.failed.result()
            assert not (tmp_path / "data" / "after-stop-0").exists()

    asyncio.run(scenario())


def test_a_heartbeat_waiting_behind_a_long_decision_keeps_its_broker_from_being_fenced(tmp_path: Path) -> None:
    """A heartbeat counts from its arrival, not from its decision: while a long decision holds the node's decision
    lock (a large CreateTopics making its partitions' files), the session expiry queues on the lock before the
    heartbeats that arrive after it, and ran first on contact times older than the wait: it fenced brokers that kept
    heartbeating (Kafka: KAFKA-17793, its heartbeat tracker is updated on the request thread)."""
    import logging
    from types import SimpleNamespace

    from klog.broker.__main__ import load_config
    from klog.testing.kafka import free_port

    controller_port = free_port()
    config = load_config(None, [
        "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        "controller.listener.names=CONTROLLER", "broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=200",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{controller_port}",
        f"log.dirs={tmp_path / 'data'}"])
    fenced: list[str] = []

    class Fencing(logging.Handler):
        def emit(self, rec: logging.LogRecord) -> None:
            if "session has timed out" in rec.getMessage():
                fenced.append(rec.getMessage())

    handler = Fencing()
    fencing_log = logging.getLogger("klog.controller.brokers")
    level = fencing_log.level
    fencing_log.setLevel(logging.INFO)
    fencing_log.addHandler(handler)

    async def scenario() -> None:
        async with combined_node(config, session_timeout_ms=config["broker.session.timeout.ms"]) as (
                controller, brokers, server):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not (1 in controller.image.brokers and not controller.image.brokers[1].fenced):
                assert loop.time() < deadline, "the broker was never unfenced"
                await asyncio.sleep(0.05)
            epoch = controller.image.brokers[1].epoch
            heartbeat = SimpleNamespace(broker_id=1, broker_epoch=epoch, current_metadata_offset=1 << 40,
                                        want_fence=False, want_shut_down=False, offline_log_dirs=[])
            try:
                async with controller.decisions:   # a decision taking 3 s, longer than the 2 s session
                    await asyncio.sleep(2.5)
                    # a heartbeat arrives half a second before the lock frees (the session expiry waits on it)
                    late = asyncio.ensure_future(brokers.handle(63, heartbeat))
                    await asyncio.sleep(0.5)
                answer = await asyncio.wait_for(late, 30)
                assert answer["error_code"] == 0
                await asyncio.sleep(0.5)
                assert not controller.image.brokers[1].fenced
                assert fenced == []
            finally:
                await server.stop()

    try:
        asyncio.run(scenario())
    finally:
        fencing_log.removeHandler(handler)
        fencing_log.setLevel(level)

"""KIP-853's ``controller.quorum.bootstrap.servers`` instead of ``controller.quorum.voters``: controllers formatted with
``klog-broker format --initial-controllers`` (as ``kafka-storage format`` prepares a dynamic quorum: a bootstrap
checkpoint with a KRaftVersionRecord and a VotersRecord) form the quorum those voters name; broker-only nodes given
only the bootstrap servers learn the voters from a controller; a misconfigured node stops naming the key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from klog.controller.quorum import BOOTSTRAP_SNAPSHOT, read_initial_voters
from klog.metadata.records import ControlRecordType
from klog.metadata.storage import read_snapshot
from klog.testing.cluster import KlogCluster
from klog.testing.kafka_tools import kafka_libs_dir, run_kafka_tool
from klog.testing.process import broker_command

pytestmark = pytest.mark.timeout(300)


def test_a_dedicated_cluster_found_through_bootstrap_servers_serves_and_survives_a_controller_crash(
        tmp_path: Path) -> None:
    with KlogCluster(tmp_path, 2, controllers=3, bootstrap_servers=True,
                     properties={"default.replication.factor": 2}) as cluster:
        for i in cluster.controller_ids:   # what format wrote, as Kafka's format does
            text = cluster.properties_files[i].read_text()
            assert "controller.quorum.bootstrap.servers=" in text and "controller.quorum.voters" not in text
        for i in cluster.node_ids:
            assert "controller.quorum.voters" not in cluster.properties_files[i].read_text()
        cluster.wait_for_brokers()
        controller = cluster.wait_for_controller()
        assert controller in cluster.controller_ids
        for via in cluster.node_ids:
            assert cluster.create_topic(f"t-{via}", 2, 2, via=via) == (0, None)
            cluster.wait_for_topic(f"t-{via}", 2)
        assert any("(from controller.quorum.bootstrap.servers)" in line for line in cluster.log_lines(1))
        cluster.kill(controller)
        assert cluster.wait_for_controller(exclude=controller) in cluster.controller_ids
        assert cluster.create_topic("after-failover", 2, 2) == (0, None)
        cluster.wait_for_topic("after-failover", 2)
        # the killed controller restarts from its own snapshots (raft dropped the bootstrap checkpoint) and rejoins
        assert not (cluster.quorum.metadata_dir(controller) / BOOTSTRAP_SNAPSHOT).exists()
        cluster.restart(controller)
        assert cluster.create_topic("after-restart", 1, 2) == (0, None)
        cluster.wait_for_topic("after-restart", 1)
        assert cluster.pid(controller) is not None, cluster.log_lines(controller)[-20:]


def _props(path: Path, **props: object) -> Path:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in props.items()))
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*broker_command(), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def _controller(tmp_path: Path, **extra: object) -> Path:
    return _props(tmp_path / "controller.properties", process_roles="controller", node_id=1,
                  controller_listener_names="CONTROLLER", listeners="CONTROLLER://127.0.0.1:19093",
                  log_dirs=tmp_path / "data", **extra)


def test_format_writes_the_initial_voters_kafka_style_and_refuses_a_missing_or_misplaced_choice(
        tmp_path: Path) -> None:
    cfg = _controller(tmp_path, controller_quorum_bootstrap_servers="127.0.0.1:19093,127.0.0.1:19095")
    cid = "MkU3OEVBNTcwNTJENDM2Qk"
    out = _run("format", "-t", cid, "-c", str(cfg))
    assert out.returncode == 2 and "--standalone, --initial-controllers or --no-initial-controllers" in out.stderr
    out = _run("format", "-t", cid, "-c", str(cfg), "--initial-controllers",
               "2@127.0.0.1:19095:AAAAAAAAAAAAAAAAAAAAAg")
    assert out.returncode == 2 and "node.id 1 is not among them" in out.stderr
    out = _run("format", "-t", cid, "-c", str(cfg), "--initial-controllers",
               "1@127.0.0.1:19093:AAAAAAAAAAAAAAAAAAAAAQ,2@127.0.0.1:19095:AAAAAAAAAAAAAAAAAAAAAg")
    assert out.returncode == 0, out.stderr
    snap = read_snapshot(str(tmp_path / "data" / "__cluster_metadata-0" / BOOTSTRAP_SNAPSHOT))
    kinds = [r.type for r in snap.control_records]
    assert kinds == [ControlRecordType.SNAPSHOT_HEADER]   # one control record per batch: the header batch
    voters = read_initial_voters(str(tmp_path / "data"), "CONTROLLER")
    assert voters is not None and {(v.node_id, v.port) for v in voters.values()} == {(1, 19093), (2, 19095)}
    if kafka_libs_dir() is not None:   # Kafka's DumpLogSegments reads the bootstrap checkpoint
        path = tmp_path / "data" / "__cluster_metadata-0" / BOOTSTRAP_SNAPSHOT
        dumped = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder", "--files",
                                str(path), timeout=180)
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        assert "KRaftVersion" in dumped.stdout and "Voters" in dumped.stdout, dumped.stdout
        assert "xception" not in dumped.stdout + dumped.stderr, dumped.stdout + dumped.stderr
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert f"cluster.id={cid}" in meta and "directory.id=AAAAAAAAAAAAAAAAAAAAAQ" in meta

    static = _controller(tmp_path, controller_quorum_voters="1@127.0.0.1:19093")
    out = _run("format", "-t", cid, "-c", str(static), "--standalone", "-g")
    assert out.returncode == 2 and "controller.quorum.voters is set" in out.stderr


@pytest.mark.parametrize(("extra", "key"), [
    ({"controller_quorum_voters": "1@127.0.0.1:19093", "controller_quorum_bootstrap_servers": "127.0.0.1:19093"},
     "controller.quorum.bootstrap.servers"),
    ({"controller_quorum_bootstrap_servers": "127.0.0.1:19093,127.0.0.1:19095"},
     "controller.quorum.bootstrap.servers"),   # not formatted with an initial voter set
    ({"controller_quorum_bootstrap_servers": "127.0.0.1"}, "controller.quorum.bootstrap.servers"),
])
def test_a_controller_without_a_usable_quorum_stops_naming_the_key(tmp_path: Path, extra: dict[str, str],
                                                                    key: str) -> None:
    out = _run(str(_controller(tmp_path, **extra)))
    assert out.returncode == 2, out.stderr
    assert key in out.stderr, out.stderr


def test_a_broker_only_node_without_a_quorum_stops_naming_the_key(tmp_path: Path) -> None:
    cfg = _props(tmp_path / "broker.properties", process_roles="broker", node_id=4,
                 controller_listener_names="CONTROLLER", listeners="PLAINTEXT://127.0.0.1:0",
                 log_dirs=tmp_path / "data")
    out = _run(str(cfg))
    assert out.returncode == 2 and "controller.quorum.voters" in out.stderr, out.stderr


def test_a_node_formatted_standalone_is_a_raft_quorum_of_one_found_through_its_bootstrap_server(
        tmp_path: Path) -> None:
    from klog.testing.kafka import free_port
    from klog.testing.process import BrokerProcess

    cport = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{cport}"
    cfg = _props(tmp_path / "server.properties", process_roles="broker,controller", node_id=1,
                 controller_quorum_bootstrap_servers=f"127.0.0.1:{cport}", controller_listener_names="CONTROLLER",
                 listeners=listeners, log_dirs=tmp_path / "data", **{"metadata.log.max.snapshot.interval.ms": 500})
    out = _run("format", "-t", "MkU3OEVBNTcwNTJENDM2Qk", "-c", str(cfg), "--standalone")
    assert out.returncode == 0, out.stderr
    node = BrokerProcess(tmp_path / "data", {"listeners": listeners}, properties_file=cfg)
    node.start()
    try:
        from klog.protocol import ApiKey
        from klog.testing.wire import WireClient

        with WireClient("127.0.0.1", node.port) as wire:
            quorum = wire.request(ApiKey.DESCRIBE_QUORUM, 0, {"topics": [
                {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
            versions = wire.request(ApiKey.API_VERSIONS, 4, {"client_software_name": "t",
                                                             "client_software_version": "1"})
        partition = quorum.topics[0].partitions[0]
        assert partition.error_code == 0 and partition.leader_id == 1
        # a formatted voter set is KIP-853's kraft.version 1, finalized as Kafka's format --standalone finalizes it
        assert {f.name: f.max_version_level for f in versions.finalized_features}.get("kraft.version") == 1
        assert [v.replica_id for v in partition.current_voters] == [1]
        assert any("quorum member on" in line for line in node.lines), node.lines[-20:]
        assert (tmp_path / "data" / "meta.properties").read_text().count("cluster.id=MkU3OEVBNTcwNTJENDM2Qk") == 1
    finally:
        assert node.stop() == 0, node.lines[-20:]

"""Fault runs on real clusters (issue 17): a seeded clean schedule (kill+restart, a pause longer than the session
timeout, an isolation of the leader) against a 3-node Apache Kafka 4.x cluster (RF=3, min.insync.replicas=2)
finds no anomaly; an unclean election forced on Kafka and on klog (unclean.leader.election.enable=true) is caught
as lost acknowledged writes; the same harness drives klog through the clean schedule and the node faults (full
disk, clock offset, duplicated packets); network namespaces really cut traffic, and they and the nodes' disks are
always removed. Producers are confluent-kafka (p0) and klog's own client (k1)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from klog.testing.faults.cluster import SESSION_TIMEOUT_S
from klog.testing.faults.netns import Network, fill_disk, free_disk, network_available
from klog.testing.faults.schedule import FaultStep, each_once

pytestmark = [pytest.mark.timeout(400)]

#: the clean schedule of the CI run: fixed seed, one step of each kind
CLEAN_SEED = 17
CLEAN_KINDS = ["kill", "pause", "isolate-leader"]


def clean_steps() -> list[FaultStep]:
    return each_once(CLEAN_SEED, [1, 2, 3], CLEAN_KINDS, start_s=3.0, quiet_s=4.0,
                     session_timeout_s=SESSION_TIMEOUT_S, max_duration_s=6.0)


def _needs_network() -> None:
    why = network_available()
    if why:  # CI runs as root with nftables installed by tools/install-peers.sh
        pytest.fail(f"the fault suite's network mode needs root and nftables: {why}")


def _assert_clean(result: object, out: Path) -> None:
    from klog.testing.faults.run import RunResult

    assert isinstance(result, RunResult)
    r = result.check
    assert r.valid, f"{r.summary()}\n{json.dumps({k: v[:5] for k, v in r.details.items() if v}, default=str)}"
    assert result.faults_applied == len(CLEAN_KINDS)
    assert r.stats["acknowledged"] > 200, r.summary()  # the workload did run through the faults
    assert r.stats["polled"] > 0 and r.stats["final_read"] >= r.stats["acknowledged"]
    assert (out / "history.png").stat().st_size > 10_000
    assert json.loads((out / "result.json").read_text())["replicas_compared"] is True
    assert {p.split(".")[0] for p in _acknowledged_processes(out)} >= {"p0", "k1"}  # both producer clients


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.long
def test_kafka_clean_schedule_has_no_anomalies(tmp_path: Path) -> None:
    _needs_network()
    from klog.testing.faults.run import RunConfig, run

    result = run(tmp_path, RunConfig(system="kafka", network=True), clean_steps())
    _assert_clean(result, tmp_path)
    faults = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()
              if '"fault"' in line]
    assert [f["fault"] for f in faults if f["phase"] == "start"] == CLEAN_KINDS
    assert all(f.get("detail") is None for f in faults), faults  # every step hit a node, every restart worked
    for step, start, end in zip(clean_steps(), faults[0::2], faults[1::2]):  # each fault lasted as planned
        assert start["phase"] == "start" and end["phase"] == "end" and start["fault"] == end["fault"] == step.kind
        assert (end["time"] - start["time"]) / 1e9 >= step.duration_s - 0.1, (step, start, end)


_PROBE_PORT = 7000


def _listen(net: Network, node: int) -> subprocess.Popen[bytes]:
    """A TCP listener on node's address, inside its namespace (accepts and closes connections)."""
    code = ("import socket\ns = socket.create_server(('0.0.0.0', %d))\nwhile True:\n    s.accept()[0].close()"
            % _PROBE_PORT)
    proc = subprocess.Popen([*net.exec_prefix(node), sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while not _connects(net, None, node, timeout=0.5):
        assert time.monotonic() < deadline, f"probe listener on node {node} did not start"
    return proc


def _connects(net: Network, src: int | None, dst: int, timeout: float = 1.0) -> bool:
    """Whether a TCP connection from node ``src`` (None: the host) to node ``dst`` succeeds."""
    code = (f"import socket\ntry:\n    socket.create_connection(('{net.ip(dst)}', {_PROBE_PORT}), timeout={timeout})"
            "\nexcept OSError:\n    raise SystemExit(1)")
    prefix = [] if src is None else net.exec_prefix(src)
    return subprocess.run([*prefix, sys.executable, "-c", code], timeout=30).returncode == 0


def test_network_namespaces_and_disks_are_removed_even_on_failure(tmp_path: Path) -> None:
    _needs_network()
    with pytest.raises(RuntimeError, match="boom"):
        with Network(3) as net:
            other = Network(3).open()  # a parallel run: its own names
            try:
                assert net.run_id != other.run_id and net.namespace(1) != other.namespace(1)
                listeners = [_listen(net, n) for n in (1, 2, 3)]
                assert _connects(net, 1, 2) and _connects(net, None, 1)
                net.partition([[1], [2, 3]])
                assert not _connects(net, 1, 2) and not _connects(net, 3, 1) and _connects(net, 2, 3)
                assert _connects(net, None, 1)  # clients on the host still reach an isolated node
                net.heal()
                net.cut([(1, 3)])
                assert not _connects(net, 1, 3) and _connects(net, 1, 2) and _connects(net, 2, 3)
                net.loss(2, 10)
                disk = tmp_path / "disk"
                net.mount_disk(2, disk, 4)
                assert fill_disk(disk) > 3 << 20
                with pytest.raises(OSError, match="No space left"):
                    (disk / "more").write_bytes(b"x" * 8192)
                free_disk(disk)
                (disk / "more").write_bytes(b"x" * 8192)
                # namespaces, bridge, host ends of the veth pairs, the disk
                assert len(net.leftovers()) == 3 + 1 + 3 + 1
                net.heal()
                assert _connects(net, 1, 3)
                net.duplicate(3, 50)
                assert _connects(net, 3, 1)  # TCP takes duplicated segments in its stride
                net.heal()
                for listener in listeners:
                    listener.kill()
                    listener.wait()
            finally:
                other.close()
            assert other.leftovers() == []
            raise RuntimeError("boom")
    assert net.leftovers() == []


def _unclean_election(tmp_path: Path, system: str) -> None:
    """Followers 2 and 3 paused (fenced, out of the ISR) while leader 1 keeps acknowledging with
    min.insync.replicas=1; then the leader is killed and the stale followers resumed: with
    unclean.leader.election.enable=true one of them is elected and the writes only node 1 had are gone.
    On Kafka a dedicated controller (node 100) keeps the metadata quorum up while two brokers are paused; klog's
    run keeps the layout it had before klog had broker-only nodes, 5 combined nodes with the partition on 1-3: nodes 4 and 5 keep a quorum with 1 while 2 and 3 sleep, and with 2 and 3 once
    they wake after 1 was killed."""
    from klog.testing.faults.run import RunConfig, run

    steps = [FaultStep(3.0, "pause", 14.0, target=2), FaultStep(3.0, "pause", 14.0, target=3),
             FaultStep(12.0, "kill", 16.0, target=1)]
    config = RunConfig(system=system, network=False, dedicated_controller=system == "kafka",
                       nodes=3 if system == "kafka" else 5, partitions=1,
                       replica_assignment=[[1, 2, 3]], consumers=("assign",),
                       topic_config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
                       properties={"unclean.leader.election.enable": "true"})
    result = run(tmp_path, config, steps)
    r = result.check
    assert r.counts["lost"] > 0, r.summary()
    lost = r.details["lost"]
    # the lost writes were acknowledged while the followers were paused, and the kill followed them
    assert all(d["fault_after"] is not None and d["fault_after"]["fault"] == "kill" for d in lost[:1]), lost[:3]
    # both producer clients wrote through it (confluent-kafka p0, klog's client k1)
    assert {p.split(".")[0] for p in _acknowledged_processes(tmp_path)} >= {"p0", "k1"}
    print(f"{system} unclean election: {r.summary()}")


def _acknowledged_processes(out: Path) -> set[str]:
    events = (json.loads(line) for line in (out / "history.jsonl").read_text().splitlines())
    return {e["process"] for e in events if e.get("type") == "ok" and e.get("f") == "send"}


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.long
def test_kafka_unclean_election_loses_acknowledged_writes(tmp_path: Path) -> None:
    _unclean_election(tmp_path, "kafka")


@pytest.mark.long
def test_klog_unclean_election_loses_acknowledged_writes(tmp_path: Path) -> None:
    """The checker's proof on klog: klog's controller elects a replica from outside the ISR as Kafka's does
    (the topic allows it, no ISR member is alive), and the writes only the old leader had are reported lost."""
    _unclean_election(tmp_path, "klog")


def test_klog_clean_schedule_or_refuses_rf3_until_it_replicates(tmp_path: Path) -> None:
    """Once klog replicates (MAX_REPLICATION_FACTOR > 1) this is the Kafka clean run against klog-broker nodes
    started from the same properties; until then a 3-node klog cluster must refuse RF=3 with
    INVALID_REPLICATION_FACTOR, so nothing here is silently skipped."""
    from klog.controller.topics import MAX_REPLICATION_FACTOR

    if MAX_REPLICATION_FACTOR > 1:
        _needs_network()
        from klog.testing.faults.run import RunConfig, run

        result = run(tmp_path, RunConfig(system="klog", network=True), clean_steps())
        _assert_clean(result, tmp_path)
        return

    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    from klog.testing.faults.cluster import FaultCluster

    # the Kafka run's properties themselves are refused at startup, naming the property
    with pytest.raises(RuntimeError, match="default.replication.factor"):
        FaultCluster(tmp_path / "rf3", system="klog", nodes=3, network=False).start()
    single = {"default.replication.factor": 1}
    with FaultCluster(tmp_path, system="klog", nodes=3, network=False, properties=single) as cluster:
        assert "process.roles=broker,controller" in (tmp_path / "node-1" / "server.properties").read_text()
        admin = cluster.admin()
        futures = admin.create_topics([NewTopic("faults", 3, 3)], operation_timeout=30)
        with pytest.raises(KafkaException) as refused:
            futures["faults"].result(60)
        assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR, refused.value
        # what klog cannot take of the Kafka run's properties is named, never silently different
        assert cluster.dropped_properties == ["replica.lag.time.max.ms"]


#: the faults that need each node's own filesystem or a process's own clock, and duplication without netem
NODE_KINDS = ["disk-full", "clock", "netem"]


def node_fault_steps() -> list[FaultStep]:
    steps = each_once(CLEAN_SEED, [1, 2, 3], NODE_KINDS, start_s=3.0, quiet_s=4.0,
                      session_timeout_s=SESSION_TIMEOUT_S, max_duration_s=6.0)
    # the seed picks the targets; the offset and the link fault are fixed so the test always covers them
    return [FaultStep(s.at_s, s.kind, s.duration_s, s.target, s.groups,
                      {"clock": {"offset_s": -1800}, "netem": {"duplicate_percent": 50}}.get(s.kind, s.params))
            for s in steps]


@pytest.mark.long
def test_klog_disk_full_clock_offset_and_duplication_lose_nothing(tmp_path: Path) -> None:
    """One node's log dir filled to the last block (then freed and the node restarted), one node restarted with
    its wall clock 30 minutes behind (libfaketime), half of one node's packets sent twice: no anomaly, and the
    full node really ran out of space (its log says which dir went offline)."""
    _needs_network()
    from klog.testing.faults.run import RunConfig, run

    result = run(tmp_path, RunConfig(system="klog", network=True), node_fault_steps())
    r = result.check
    assert r.valid, f"{r.summary()}\n{json.dumps({k: v[:5] for k, v in r.details.items() if v}, default=str)}"
    assert result.faults_applied == len(NODE_KINDS) and r.stats["acknowledged"] > 200, r.summary()
    faults = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()
              if '"fault"' in line]
    starts = {f["fault"]: f for f in faults if f["phase"] == "start"}
    assert starts["disk-full"]["detail"].startswith("filled with"), starts
    assert starts["clock"]["detail"] == "wall clock -1800 s" and starts["netem"]["detail"] == "duplicate 50%"
    assert all(f.get("detail") is None for f in faults if f["phase"] == "end"), faults  # every restart worked
    full = (tmp_path / f"node-{starts['disk-full']['nodes'][0]}" / "node.log").read_text(errors="replace")
    assert "No space left on device" in full
    if "the raft member stopped" in full:  # the metadata log could not be appended to: one line, as Kafka halts
        # the halt names whichever failure stopped the node first: the metadata log, or its only log dir (the
        # data dir holds both, and a failed dir is reported to the controller at once, KIP-858)
        halts = [line for line in full.splitlines() if line.startswith("klog-broker: halted: ")]
        assert halts and all(h.startswith(("klog-broker: halted: controller: the raft member stopped",
                                           "klog-broker: halted: all log dirs are offline")) for h in halts), halts
        assert "During handling of the above exception" not in full
    clocked = tmp_path / f"node-{starts['clock']['nodes'][0]}" / "node.log"
    assert "(wall clock -1800 s)" in clocked.read_text(errors="replace")
    assert {p.split(".")[0] for p in _acknowledged_processes(tmp_path)} >= {"p0", "k1"}

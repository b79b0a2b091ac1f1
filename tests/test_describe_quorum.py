"""DescribeQuorum (55): Kafka's own ``kafka-metadata-quorum`` (MetadataQuorumCommand, from the kafka-tools jar)
describes a 3-member klog quorum through a controller listener (``--bootstrap-controller``) and, on combined
nodes, through a broker listener (``--bootstrap-server``); ``klog cluster info`` shows the quorum of a klog
quorum and of Apache Kafka. The answers are built by a pure function, checked here without sockets too."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.controller.describe_quorum import (
    QuorumStatus,
    ReplicaStatus,
    describe_quorum_response,
    single_voter_status,
)
from klog.controller.quorum import Voter
from klog.protocol import Struct, decode_body, encode_body
from klog.protocol.errors import ErrorCode
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
METADATA_REQUEST = Struct(topics=[Struct(topic_name="__cluster_metadata", partitions=[Struct(partition_index=0)])])

needs_kafka_tools = pytest.mark.skipif(not java_available() or kafka_libs_dir(__file__) is None,
                                       reason="needs java and the Kafka jars (tools/install-peers.sh)")


def _status(is_leader: bool) -> QuorumStatus:
    voters = [ReplicaStatus(1, 120, 5000, 5000), ReplicaStatus(2, 100, 4990, 4000), ReplicaStatus(3, -1, -1, -1)]
    return QuorumStatus(node_id=1 if is_leader else 2, leader_id=1, leader_epoch=7, high_watermark=110,
                        is_leader=is_leader, voters=voters if is_leader else [], observers=[],
                        endpoints={i: Voter(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)}, listener_name="CONTROLLER")


def test_the_leader_describes_every_voter_with_its_offsets_and_endpoint() -> None:
    r = describe_quorum_response(_status(is_leader=True), METADATA_REQUEST)
    assert r["error_code"] == 0
    p = r["topics"][0]["partitions"][0]
    assert (p["error_code"], p["leader_id"], p["leader_epoch"], p["high_watermark"]) == (0, 1, 7, 110)
    assert [(v["replica_id"], v["log_end_offset"], v["last_fetch_timestamp"]) for v in p["current_voters"]] == [
        (1, 120, 5000), (2, 100, 4990), (3, -1, -1)]
    assert [(n["node_id"], n["listeners"][0]["port"]) for n in r["nodes"]] == [(1, 9001), (2, 9002), (3, 9003)]
    assert {n["listeners"][0]["name"] for n in r["nodes"]} == {"CONTROLLER"}
    for version in (0, 1, 2):  # every version encodes, and reads back with the fields it has
        back, _ = decode_body(55, version, encode_body(55, version, r, response=True), response=True)
        assert back.topics[0].partitions[0].current_voters[1].log_end_offset == 100


def test_a_follower_answers_not_leader_or_follower_with_the_leader_it_knows() -> None:
    r = describe_quorum_response(_status(is_leader=False), METADATA_REQUEST)
    p = r["topics"][0]["partitions"][0]
    assert r["error_code"] == 0 and p["error_code"] == ErrorCode["NOT_LEADER_OR_FOLLOWER"]
    assert p["leader_id"] == 1 and p["current_voters"] == [] and r["nodes"] == []


def test_another_partition_than_the_metadata_log_is_unknown_on_each_partition_named() -> None:
    other = Struct(topics=[Struct(topic_name="orders", partitions=[Struct(partition_index=i) for i in (0, 3)])])
    answer = describe_quorum_response(_status(is_leader=True), other)
    assert answer["error_code"] == 0
    assert [(t["topic_name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in answer["topics"]] == [("orders", [(0, ErrorCode["UNKNOWN_TOPIC_OR_PARTITION"]),
                                                       (3, ErrorCode["UNKNOWN_TOPIC_OR_PARTITION"])])]


def test_a_single_voter_leads_its_quorum_of_one_at_its_committed_end() -> None:
    r = describe_quorum_response(single_voter_status(1, 1, 42, 42), METADATA_REQUEST)
    p = r["topics"][0]["partitions"][0]
    assert (r["error_code"], p["error_code"], p["leader_id"], p["leader_epoch"], p["high_watermark"]) == (0, 0, 1, 1, 42)
    assert [(v["replica_id"], v["log_end_offset"]) for v in p["current_voters"]] == [(1, 42)] and r["nodes"] == []


def test_a_node_without_a_quorum_member_answers_not_leader_or_follower() -> None:
    assert describe_quorum_response(None, METADATA_REQUEST)["error_code"] == ErrorCode["NOT_LEADER_OR_FOLLOWER"]


def quorum_tool(*args: str) -> str:
    result = run_kafka_tool(QUORUM_TOOL, *args, libs=kafka_libs_dir(__file__), timeout=120)
    assert result.returncode == 0, f"{QUORUM_TOOL} {' '.join(args)} exited {result.returncode}:\n" \
                                   f"{result.stdout}\n{result.stderr}"
    return result.stdout


def parse_status(out: str) -> dict[str, str]:
    """``describe --status``: ``Key:  value`` lines."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+):\s+(.*)$", out, re.M)}


def parse_replication(out: str) -> list[dict[str, Any]]:
    """``describe --replication``: a header row, then one row per replica (NodeId DirectoryId LogEndOffset Lag
    LastFetchTimestamp LastCaughtUpTimestamp Status)."""
    lines = [ln.split() for ln in out.strip().splitlines() if ln.strip()]
    header = lines[0]
    return [dict(zip(header, row)) for row in lines[1:]]


def check_quorum_described(q: ControllerQuorum, bootstrap: list[str]) -> None:
    leader = q.wait_for_leader()
    applied = q.wait_applied(min_end_offset=10, nodes=[leader])[leader].snapshot.end_offset
    status = parse_status(quorum_tool(*bootstrap, "describe", "--status"))
    assert int(status["LeaderId"]) == leader
    state = q.quorum_state(leader)
    assert state is not None and int(status["LeaderEpoch"]) == state.leader_epoch
    hw = int(status["HighWatermark"])
    # The leader appends a no-op every 200 ms: its high watermark is at or a little past the applied snapshot.
    assert applied <= hw <= applied + 1000, (applied, hw)
    assert status["CurrentVoters"].count('"id"') == 3, status["CurrentVoters"]
    for node, port in q.controller_ports.items():
        assert f"CONTROLLER://127.0.0.1:{port}" in status["CurrentVoters"], (node, status["CurrentVoters"])
    rows = parse_replication(quorum_tool(*bootstrap, "describe", "--replication"))
    assert sorted(int(r["NodeId"]) for r in rows) == [1, 2, 3]
    by_id = {int(r["NodeId"]): r for r in rows}
    assert by_id[leader]["Status"] == "Leader"
    assert all(by_id[n]["Status"] == "Follower" for n in by_id if n != leader)
    assert all(int(r["LogEndOffset"]) >= applied for r in rows), rows
    # Followers fetch continuously (heartbeats, no-ops): both times are the leader's recent wall clock.
    now_ms = time.time() * 1000
    for r in rows:
        for column in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
            assert now_ms - 120_000 < int(r[column]) <= now_ms + 1000, (column, rows)


@needs_kafka_tools
def test_kafka_metadata_quorum_describes_a_klog_controller_quorum(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3) as q:
        controllers = ",".join(f"127.0.0.1:{p}" for p in q.controller_ports.values())
        check_quorum_described(q, ["--bootstrap-controller", controllers])


@needs_kafka_tools
@pytest.mark.long
def test_kafka_metadata_quorum_describes_a_combined_klog_quorum_through_any_broker(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller") as q:
        leader = q.wait_for_leader()
        follower = next(n for n in q.nodes if n != leader)
        # A follower's broker forwards DescribeQuorum to the active controller, as Kafka's brokers do.
        check_quorum_described(q, ["--bootstrap-server", q.nodes[follower].bootstrap_servers])
        for node in (leader, follower):
            out = subprocess.run([sys.executable, "-m", "klog.cli", "cluster", "info", "--bootstrap-server",
                                  q.nodes[node].bootstrap_servers], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert f"controller quorum: leader {leader}, epoch" in out.stdout, out.stdout
            quorum_part = out.stdout.split("controller quorum:")[1]
            voters = re.findall(r"^[^\w\n]*([123])(\*?)[^\w\n]+(\d+)[^\w\n]+(\d+)[^\w\n]", quorum_part, re.M)
            assert sorted(int(v[0]) for v in voters) == [1, 2, 3], out.stdout
            assert [int(v[0]) for v in voters if v[1]] == [leader], out.stdout


@needs_kafka_tools
@pytest.mark.parametrize("server", ["apache-kafka", "klog"])
def test_kafka_metadata_quorum_and_klog_cluster_info_on_a_single_node(tmp_path: Path, server: str) -> None:
    """A single node is its own one-voter quorum: Apache Kafka 4.3.1 in KRaft mode and ``klog-broker`` with no
    arguments answer the same tool the same way."""
    from klog.testing.kafka import apache_kafka
    from klog.testing.process import BrokerProcess

    with contextlib.ExitStack() as stack:
        if server == "apache-kafka":
            bootstrap = str(stack.enter_context(apache_kafka(tmp_path / "kafka", heap="512m")))
        else:
            bootstrap = stack.enter_context(BrokerProcess(tmp_path / "klog")).bootstrap_servers
        status = parse_status(quorum_tool("--bootstrap-server", bootstrap, "describe", "--status"))
        assert status["LeaderId"] == "1" and status["CurrentVoters"].count('"id"') == 1
        hw = int(status["HighWatermark"])
        rows = parse_replication(quorum_tool("--bootstrap-server", bootstrap, "describe", "--replication"))
        assert [(r["NodeId"], r["Status"]) for r in rows] == [("1", "Leader")]
        assert int(rows[0]["LogEndOffset"]) >= hw
        out = subprocess.run([sys.executable, "-m", "klog.cli", "cluster", "info", "--bootstrap-server", bootstrap],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert re.search(r"controller quorum: leader 1, epoch \d+, high watermark \d+", out.stdout), out.stdout
        assert re.search(r"^[^\w\n]*1\*", out.stdout, re.M), out.stdout


#: how long the test's watchdog leaves the raft thread held before it lets the write through (a bound on the old
#: code's stall, so that the test ends; the answers are checked against it, not timed)
HELD_WRITE_BOUND_S = 20


def test_describe_quorum_and_a_voter_change_answer_while_the_raft_thread_holds_the_node(tmp_path: Path) -> None:
    """The raft node's getters take its lock, which the raft thread holds through a ready cycle's (or a snapshot's)
    fsync, with the GIL held: read on the event loop they stopped it until the write ended. DescribeQuorum and
    a voter change's check read the driver's soft state now (refreshed between ready cycles). The raft thread is
    held inside the node for real: the snapshot it writes goes into a FIFO the test has not drained; a watchdog
    process drains it after HELD_WRITE_BOUND_S (the old code waited for that)."""
    import asyncio
    import os

    from klog.broker.__main__ import assemble, load_config
    from klog.controller.describe_quorum import controller_request, forward_describe_quorum
    from klog.records import encode_batch
    from klog.testing.kafka import free_port

    port = free_port()
    config = load_config(None, [
        "process.roles=controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", f"listeners=CONTROLLER://127.0.0.1:{port}", f"log.dirs={tmp_path}"])
    released = tmp_path / "released-by-the-watchdog"

    async def main() -> None:
        node = assemble(config).controller
        assert node is not None
        last: list[tuple[int, int, int]] = []   # (index, term, next offset) of the last committed entry
        node.driver.add_committed_listener(lambda i, t, k, d, b, n: last.append((i, t, n)))
        await node.start()
        watchdog = None
        fifo = -1
        try:
            await asyncio.wait_for(node.wait_cluster_id(), 60)
            index, term, end = last[-1]
            part = Path(node.driver.dir) / f"{end:020d}-{term:010d}.checkpoint.part"
            os.mkfifo(part)
            fifo = os.open(part, os.O_RDONLY | os.O_NONBLOCK)
            watchdog = subprocess.Popen(["sh", "-c", f'sleep {HELD_WRITE_BOUND_S}; : > "{released}"; '
                                                     f'exec cat "{part}" > /dev/null'])
            # more than the FIFO holds: the raft thread stays inside the node's write until the reader drains it
            data = encode_batch([{"key": None, "value": b"x" * (1 << 20), "timestamp": int(time.time() * 1000)}])
            snapshot = node.driver.create_snapshot(index, data)
            while not released.exists() and not _readable(fifo):   # until the raft thread writes into it
                await asyncio.sleep(0.01)
            writing = not released.exists() and os.read(fifo, 1) != b""
            me = Voter(1, "127.0.0.1", port)
            described = await forward_describe_quorum(me, 2, METADATA_REQUEST)
            removal = await controller_request(me, 81, 0, {"cluster_id": node.cluster_id, "voter_id": 1,
                                                           "voter_directory_id": uuid.UUID(int=0)})
            held = not released.exists() and not snapshot.done()
            while True:   # let the write through: it fails at its fsync (a FIFO has none), the node goes on
                try:
                    if os.read(fifo, 1 << 16) == b"":
                        break
                except BlockingIOError:
                    await asyncio.sleep(0.01)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(snapshot, 60)
            assert writing or released.exists(), "the snapshot's write never started"
            assert held, f"answered only once the watchdog let the raft thread's write through " \
                         f"(after {HELD_WRITE_BOUND_S} s)"
            partition = described.topics[0].partitions[0]
            assert partition.error_code == 0 and partition.leader_id == 1 and partition.high_watermark >= end
            assert [v.replica_id for v in partition.current_voters] == [1]
            assert removal.error_code == ErrorCode.UNSUPPORTED_VERSION   # a static voter set: nothing to change
        finally:
            if watchdog is not None:
                watchdog.kill()
                watchdog.wait()
            if fifo >= 0:
                os.close(fifo)
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 5 * HELD_WRITE_BOUND_S))


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])

"""The controller quorum (raft-rs over ``__cluster_metadata-0``) as real OS processes on
127.0.0.1: 3 and 5 members elect a leader, commit proposals, survive SIGKILL of the leader,
a restarted member catches up, and every member ends with the same log, byte for byte."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from klog.testing.quorum_processes import QuorumProcesses


def segment_bytes(member_dir: Path) -> bytes:
    return b"".join((member_dir / n).read_bytes() for n in sorted(os.listdir(member_dir)) if n.endswith(".log"))


def committed_log(cluster: QuorumProcesses, node: int) -> list[tuple[int, int, str, int, int, int]]:
    entries = cluster.members[node].cmd("log")["entries"]
    return [(e["index"], e["term"], e["kind"], e["base"], e["next"], e["crc"]) for e in entries]


def assert_identical_logs(cluster: QuorumProcesses) -> None:
    logs = {n: committed_log(cluster, n) for n in cluster.members}
    first = next(iter(logs.values()))
    for n, entries in logs.items():
        assert entries == first, f"node {n}'s committed log differs"
    indexes = [e[0] for e in first]
    assert indexes == list(range(1, len(indexes) + 1)), "committed entries are delivered once, in order"
    files = {n: segment_bytes(m.dir) for n, m in cluster.members.items()}
    assert len(set(files.values())) == 1, "the metadata log segments are byte-identical"


@pytest.mark.parametrize("size", [3, pytest.param(5, marks=pytest.mark.long)])
def test_quorum_survives_leader_sigkill_and_a_restarted_member_catches_up(tmp_path: Path, size: int) -> None:
    with QuorumProcesses(tmp_path, size) as c:
        leader = c.wait_for_leader()
        before = c.propose(10, records=3)
        assert before == sorted(before) and len(set(before)) == 10

        c.members[leader].kill()
        t0 = time.monotonic()
        new_leader = c.wait_for_leader(exclude=leader)
        failover = time.monotonic() - t0
        assert new_leader != leader
        after = c.propose(10, records=2)
        assert min(after) > max(before), "offsets keep growing across the failover"

        c.members[leader].start()  # same directory: reopens its log and quorum-state
        status = c.members[new_leader].cmd("status")
        c.wait_applied(status["applied"])
        assert_identical_logs(c)
        kinds = [e[2] for e in committed_log(c, new_leader)]
        assert kinds.count("data") == 20
        assert kinds.count("leader_change") >= 2, "each elected leader wrote a LEADER_CHANGE entry"
        assert failover < 15, f"failover took {failover:.1f}s"


def test_a_paused_leader_is_replaced_and_steps_down_when_resumed(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, 3) as c:
        leader = c.wait_for_leader()
        c.propose(3)
        proc = c.members[leader].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            others = [m for n, m in c.members.items() if n != leader]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                states = [m.cmd("status") for m in others]
                if any(s["role"] == "leader" for s in states):
                    break
                time.sleep(0.1)
            else:
                pytest.fail(f"no new leader while node {leader} was paused: {states}")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        new_leader = c.wait_for_leader()
        assert new_leader != leader
        c.propose(3)
        c.wait_applied(c.members[new_leader].cmd("status")["applied"])
        assert_identical_logs(c)


def test_proposals_to_a_follower_are_refused_with_the_leader_named(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, 3) as c:
        leader = c.wait_for_leader()
        follower = next(n for n in c.members if n != leader)
        r = c.members[follower].cmd("propose 1")
        assert r["error"] == "NotLeaderError" and r["leader_id"] == leader, r


def test_leadership_transfer_moves_the_leader(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, 3) as c:
        leader = c.wait_for_leader()
        c.propose(2)
        target = next(n for n in c.members if n != leader)
        c.members[leader].cmd(f"transfer {target}")
        deadline = time.monotonic() + 15
        while c.wait_for_leader() != target:
            assert time.monotonic() < deadline, "leadership did not move"
            time.sleep(0.1)
        c.propose(2)

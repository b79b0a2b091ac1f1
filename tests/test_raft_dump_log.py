"""Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` (DumpLogSegments) reads the metadata
log and snapshot a klog quorum wrote: data batches of NoOpRecords, LEADER_CHANGE and
KRAFT_VOTERS control batches, and a ``.checkpoint`` snapshot, without errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from klog.testing.quorum_processes import QuorumProcesses
from test_storage_oracle import run_dump

pytestmark = pytest.mark.java

ERROR_MARKERS = ("Exception", "rror", "Mismatches", "isvalid: false", "Unknown", "unknown")


def test_dump_log_decodes_the_metadata_log_and_a_snapshot(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, 3) as c:
        leader = c.wait_for_leader()
        c.propose(5, records=2)
        snap = c.members[leader].cmd("snapshot")
        assert "snapshot" in snap, snap
        c.propose(3, records=1)
        leader = c.wait_for_leader()
        c.wait_applied(c.members[leader].cmd("status")["applied"])
        d = c.members[leader].dir
    logs = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".log")]
    out = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
    assert not [l for l in out.splitlines() if any(m in l for m in ERROR_MARKERS)], out[-3000:]
    assert "NO_OP_RECORD" in out, out[-3000:]
    assert "LeaderChange" in out, out[-3000:]

    checkpoint = Path(snap["snapshot"])
    assert checkpoint.name.endswith(".checkpoint") and checkpoint.exists()
    out = run_dump([str(checkpoint)], "--cluster-metadata-decoder")
    assert not [l for l in out.splitlines() if any(m in l for m in ERROR_MARKERS)], out[-3000:]
    assert "SnapshotHeader" in out and "SnapshotFooter" in out and "KRaftVoters" in out, out[-3000:]
    assert "NO_OP_RECORD" in out, out[-3000:]

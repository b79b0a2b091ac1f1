"""Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` (DumpLogSegments) reads the metadata log and the
snapshots a klog controller quorum (3 ``klog-broker`` processes) wrote: the bootstrap transaction with its
FeatureLevelRecord, NoOpRecords, LEADER_CHANGE control batches, and ``.checkpoint`` snapshots of each member's
image, without errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from klog.testing.controller_quorum import ControllerQuorum
from test_storage_oracle import run_dump

pytestmark = pytest.mark.java

ERROR_MARKERS = ("Exception", "rror", "Mismatches", "isvalid: false", "Unknown", "unknown")


def test_dump_log_decodes_every_members_metadata_log_and_snapshot(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3) as q:
        leader = q.wait_for_leader()
        q.wait_applied(min_end_offset=8)
        q.kill(leader)  # a second epoch: another LEADER_CHANGE
        q.wait_for_leader(exclude=leader)
        q.start_node(leader)
        q.wait_applied(min_end_offset=30)
    begin_seen = False
    leader_changes = 0
    for node in q.nodes:
        d = q.metadata_dir(node)
        logs = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".log")]
        log_dump = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
        assert not [line for line in log_dump.splitlines() if any(m in line for m in ERROR_MARKERS)], log_dump[-3000:]
        # DumpLogSegments reports a file whose first offset is not 0 as "-1 is followed by <first>" (later
        # segments; the log after a snapshot installed from the leader). Any other gap is a failure.
        bases = {f"-1 is followed by {int(Path(f).name.split('.')[0])}" for f in logs}
        gaps = [line.strip() for line in log_dump.splitlines() if "is followed by" in line]
        assert set(gaps) <= bases, gaps
        assert "NO_OP_RECORD" in log_dump, f"node {node}: no NO_OP_RECORD in\n{log_dump[-3000:]}"
        leader_changes += log_dump.count("LeaderChange")
        begin_seen |= "BEGIN_TRANSACTION_RECORD" in log_dump and "END_TRANSACTION_RECORD" in log_dump
        checkpoints = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".checkpoint")]
        assert checkpoints, f"node {node} wrote no snapshot"
        snap_dump = run_dump(checkpoints, "--cluster-metadata-decoder")
        assert not [line for line in snap_dump.splitlines() if any(m in line for m in ERROR_MARKERS)], snap_dump[-3000:]
        for expected in ("SnapshotHeader", "KRaftVoters", "FEATURE_LEVEL_RECORD", "metadata.version", "SnapshotFooter"):
            assert expected in snap_dump, f"node {node}: no {expected} in\n{snap_dump[-3000:]}"
    assert begin_seen, "no member's log holds the bootstrap transaction"
    assert leader_changes >= 2, "two epochs, so at least two LEADER_CHANGE control batches"


def test_dump_log_reads_metadata_segments_rolled_at_metadata_log_segment_bytes(tmp_path: Path) -> None:
    props = {"metadata.log.segment.bytes": 1024, "metadata.max.idle.interval.ms": 50,
             "metadata.log.max.snapshot.interval.ms": 0}  # no snapshots: every segment stays
    with ControllerQuorum(tmp_path, 3, properties=props) as q:
        q.wait_for_leader()
        deadline = time.monotonic() + 60
        while min(len(list(q.metadata_dir(i).glob("*.log"))) for i in q.nodes) < 3:
            assert time.monotonic() < deadline, "segments did not roll"
            time.sleep(0.2)
    for node in q.nodes:
        logs = sorted(str(p) for p in q.metadata_dir(node).glob("*.log"))
        assert all(os.path.getsize(f) <= 1024 for f in logs), "metadata.log.segment.bytes bounds each segment"
        out = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
        assert not [line for line in out.splitlines() if any(m in line for m in ERROR_MARKERS)], out[-3000:]
        bases = {f"-1 is followed by {int(Path(f).name.split('.')[0])}" for f in logs}
        assert {line.strip() for line in out.splitlines() if "is followed by" in line} <= bases
        assert "BEGIN_TRANSACTION_RECORD" in out and "NO_OP_RECORD" in out

"""A member of a combined ``broker,controller`` quorum that starts after the others compacted their metadata log
(a snapshot every 500 ms here) catches up from the leader's snapshot, which carries the image but not the
bootstrap record naming the cluster: it still learns the cluster id (from the snapshot) and starts its broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from klog.testing.controller_quorum import ControllerQuorum

pytestmark = pytest.mark.timeout(180)


def test_a_member_started_after_the_log_was_compacted_learns_the_cluster_id_and_starts(tmp_path: Path) -> None:
    q = ControllerQuorum(tmp_path, 3, roles="broker,controller")
    try:
        for i in (1, 2):
            q.nodes[i].spawn()
        for i in (1, 2):
            q.nodes[i].wait_started()
        deadline = time.monotonic() + 30
        # both have written a snapshot, dropping the raft entries before it (the bootstrap records among them)
        while not all(any(p.name.endswith(".checkpoint") for p in q.metadata_dir(i).iterdir()) for i in (1, 2)):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        q.nodes[3].start()
        assert q.cluster_id(3) == q.cluster_id(1) is not None
        for i, node in q.nodes.items():
            assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-15:])
    finally:
        q.close()

"""Commit latency of the controller quorum (raft-rs over ``__cluster_metadata-0``) on loopback.

Run: ``.venv/bin/pytest benches/bench_raft.py -p benchmark -o addopts="" -s``

A 3-member quorum and, as the same-run baseline, a 1-member quorum (same code, same disk: the
fsync alone), each a set of real processes on 127.0.0.1 (``klog.testing.quorum_processes``). The
leader proposes PROPOSALS one-record NoOpRecord batches one after the other, each awaited until
committed (persisted on a majority, fsync included). Reported: p50/p99 per quorum size and the
3-member / 1-member ratio. No absolute-time assertion (the machine is shared); the target is
p50 ratio <= RATIO_TARGET (one extra round trip to a follower and its fsync).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from klog.testing.quorum_processes import QuorumProcesses

PROPOSALS = 500
WARMUP = 20
RATIO_TARGET = 4.0


def commit_latencies(root: Path, size: int) -> list[float]:
    with QuorumProcesses(root, size) as c:
        leader = c.wait_for_leader()
        m = c.members[leader]
        m.cmd(f"bench {WARMUP}", timeout=120)
        return sorted(m.cmd(f"bench {PROPOSALS}", timeout=600)["latencies_ms"])


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def test_raft_commit_latency(tmp_path: Path) -> None:
    single = commit_latencies(tmp_path / "one", 1)
    three = commit_latencies(tmp_path / "three", 3)
    rows = {"1 member (baseline)": single, "3 members": three}
    for name, xs in rows.items():
        print(f"raft commit latency {name}: p50 {pct(xs, 0.5):.2f} ms, p99 {pct(xs, 0.99):.2f} ms, "
              f"mean {statistics.fmean(xs):.2f} ms over {len(xs)}")
    ratio = pct(three, 0.5) / pct(single, 0.5)
    print(f"3-member / 1-member p50 ratio: {ratio:.2f} (target <= {RATIO_TARGET})")
    assert len(three) == PROPOSALS and len(single) == PROPOSALS

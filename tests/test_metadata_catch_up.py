"""When a starting node publishes its first metadata image (Kafka's ``MetadataLoader`` "catching up"), sans IO: the
rule (klog.metadata.loader.StartupCatchUp), how a quorum follower learns the leader's commit index from the raft
messages it steps (the native RaftNode.leader_commit, two native raft nodes exchanging real messages; crafted messages in
rust/klog-core/src/raft/tests.rs), and the committed index an observer reads in the leader's answers
(klog.controller.metadata_feed). The broker side, on real processes, is tests/test_cluster_startup_catch_up.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from klog._native import RaftNode
from klog.controller.applier import noop_batch
from klog.controller.metadata_feed import (
    FeedEntry,
    FeedProtocolError,
    FeedResponse,
    FeedSnapshot,
    decode_response,
    encode_response,
)
from klog.metadata.loader import StartupCatchUp


# -- the rule ----------------------------------------------------------------------------------------------------
def test_nothing_is_published_while_the_high_watermark_is_unknown() -> None:
    rule = StartupCatchUp()
    assert rule.still_catching_up(None, 500, seen_record=True) == "the high watermark is not known yet"
    assert rule.catching_up


def test_nothing_is_published_before_the_loaded_log_reaches_the_high_watermark() -> None:
    rule = StartupCatchUp()
    # Kafka's test: highWaterMark - 1 > offset (the high watermark is the index after the last committed entry)
    assert rule.still_catching_up(11, 9, seen_record=True) == "it has loaded up to 9, but the high watermark is 11"
    assert rule.still_catching_up(11, 10, seen_record=True) is None
    assert not rule.catching_up


def test_a_node_that_loaded_no_record_is_still_catching_up() -> None:
    rule = StartupCatchUp()
    assert "loaded no metadata record" in (rule.still_catching_up(3, 2, seen_record=False) or "")
    assert rule.still_catching_up(3, 2, seen_record=True) is None


def test_once_caught_up_it_stays_caught_up() -> None:
    rule = StartupCatchUp()
    assert rule.still_catching_up(5, 4, seen_record=True) is None
    # a new leader whose high watermark is not known yet, or a burst of entries: every later image is published
    assert rule.still_catching_up(None, 4, seen_record=True) is None
    assert rule.still_catching_up(1000, 4, seen_record=True) is None


# -- a follower learns the leader's commit index from real raft messages -----------------------------------------
def _pump(nodes: dict[int, RaftNode]) -> list[tuple[int, int, bytes]]:
    """Run every node's ready cycle, delivering each message at once (to the nodes in ``nodes``; the others miss
    it), until none has anything to do; returns the messages sent, (from, to, bytes)."""
    sent: list[tuple[int, int, bytes]] = []
    busy = True
    while busy:
        busy = False
        for nid, node in nodes.items():
            if not node.has_ready():
                continue
            early = list(node.begin_ready())
            late, _committed, _snapshot = node.ready()
            for to, message in [*early, *late]:
                sent.append((nid, to, bytes(message)))
                if to in nodes:
                    nodes[to].step(message)
                busy = True
    return sent


@pytest.fixture
def two_voters(tmp_path: Path) -> Iterator[dict[int, RaftNode]]:
    nodes = {i: RaftNode(str(tmp_path / f"n{i}"), i, [1, 2]) for i in (1, 2)}
    nodes[1].campaign()
    _pump(nodes)
    assert nodes[1].role == "leader" and nodes[2].leader_id == 1
    yield nodes
    for node in nodes.values():
        node.close()


def test_an_append_tells_a_follower_the_leaders_commit_index(two_voters: dict[int, RaftNode]) -> None:
    leader, follower = two_voters[1], two_voters[2]
    assert leader.leader_commit is None                             # a leader learns nothing from itself
    before = follower.leader_commit                                 # from the leader's LeaderChange append
    assert before is not None
    leader.propose(noop_batch())
    sent = _pump(two_voters)
    assert any(frm == 1 and to == 2 for frm, to, _ in sent)
    # the leader's last append told the follower the entry just committed
    assert follower.leader_commit == leader.commit_index == follower.commit_index > before


def test_heartbeats_teach_nothing(tmp_path: Path) -> None:
    """A heartbeat carries min(what the leader knows the follower holds, its commit index): short of the high
    watermark whenever the follower lacks entries, which it cannot tell. A third voter that only hears heartbeats
    follows the leader without knowing its commit index; the leader's first append teaches it."""
    nodes = {i: RaftNode(str(tmp_path / f"n{i}"), i, [1, 2, 3]) for i in (1, 2, 3)}
    try:
        third = nodes.pop(3)
        nodes[1].campaign()
        sent = _pump(nodes)                                         # node 3 hears nothing
        nodes[1].propose(noop_batch())
        sent += _pump(nodes)
        leader = nodes[1]
        assert leader.role == "leader" and leader.commit_index > 0
        assert any(to == 3 for _, to, _ in sent)                    # node 3 missed the votes and appends
        heartbeats: list[bytes] = []
        for _ in range(4):                                          # fewer ticks than an election timeout
            leader.tick()
            early = list(leader.begin_ready())
            late, _, _ = leader.ready()
            for to, message in [*early, *late]:
                if to == 3:
                    heartbeats.append(bytes(message))
        assert heartbeats
        for message in heartbeats:
            third.step(message)
        assert (third.leader_id, third.term) == (1, leader.term)
        assert third.leader_commit is None
        nodes[3] = third
        for _ in range(10):                                         # its answers reach the leader: appends follow
            leader.tick()
            _pump(nodes)
        assert third.leader_commit == leader.commit_index == third.commit_index
    finally:
        for node in nodes.values():
            node.close()


# -- an observer reads the leader's committed index in its answers ----------------------------------------------
def test_observer_answers_carry_the_members_committed_index() -> None:
    voters = ((1, "127.0.0.1", 9093),)
    entries = FeedResponse(1, 4, voters, entries=(FeedEntry(7, 4, "data", b"x"),), committed_index=12)
    snapshot = FeedResponse(1, 4, voters, snapshot=FeedSnapshot(9, 100, 4, 0, b"batches"), committed_index=12)
    for resp in (entries, snapshot, FeedResponse(1, 4, voters, committed_index=0)):
        assert decode_response(encode_response(resp)[4:]) == resp
    # a member of an older klog sends none: read as not known
    for resp in (entries, snapshot):
        old = encode_response(FeedResponse(1, 4, voters, entries=resp.entries, snapshot=resp.snapshot))[4:]
        assert decode_response(old).committed_index is None
    with pytest.raises(FeedProtocolError, match="committed_index"):
        decode_response(encode_response(entries)[4:] + b"\x00")

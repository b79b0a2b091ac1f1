"""When a starting node publishes its first metadata image (Kafka's ``MetadataLoader`` "catching up"), sans IO: the
rule (klog.metadata.loader.StartupCatchUp), how a quorum follower learns the leader's commit index from the raft
messages it steps (klog.controller.quorum.LeaderCommit, fed real messages of two native raft nodes), and the committed
index an observer reads in the leader's answers (klog.controller.metadata_feed). The broker side, on real processes,
is tests/test_cluster_startup_catch_up.py."""

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
from klog.controller.quorum import (
    MSG_APPEND,
    MSG_HEARTBEAT,
    LeaderCommit,
    raft_message_commit,
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
    """Run every node's ready cycle, delivering each message at once, until none has anything to do; returns the
    messages sent, (from, to, bytes)."""
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


def test_raft_messages_name_their_type_term_and_commit_index(two_voters: dict[int, RaftNode]) -> None:
    leader = two_voters[1]
    leader.propose(noop_batch())
    sent = _pump(two_voters)
    appends = [raft_message_commit(m) for frm, to, m in sent if frm == 1 and to == 2]
    assert appends and all(a is not None and a[0] == MSG_APPEND and a[1] == leader.term for a in appends)
    # the last append tells the follower the leader's commit index, the entry just committed
    assert appends[-1] is not None and appends[-1][2] == leader.commit_index == two_voters[2].commit_index
    assert raft_message_commit(b"\xff") is None                     # a truncated varint
    assert raft_message_commit(b"\x08\x03\x3a\x05ab") is None       # a length past the end


def test_an_append_tells_a_follower_the_leaders_commit_index(two_voters: dict[int, RaftNode]) -> None:
    leader, follower = two_voters[1], two_voters[2]
    learnt = LeaderCommit()
    assert learnt.commit_index(1, follower.term) is None            # nothing heard yet: not known
    leader.propose(noop_batch())
    for frm, to, message in _pump(two_voters):
        if to == 2:
            learnt.on_message(frm, message, follower.leader_id, follower.term)
    assert learnt.commit_index(1, follower.term) == leader.commit_index
    assert learnt.commit_index(1, follower.term + 1) is None        # another term's leader: not known
    assert learnt.commit_index(2, follower.term) is None


def test_heartbeats_teach_nothing(two_voters: dict[int, RaftNode]) -> None:
    """A heartbeat carries min(what the leader knows the follower holds, its commit index): short of the high
    watermark whenever the follower lacks entries, which it cannot tell."""
    leader, follower = two_voters[1], two_voters[2]
    learnt = LeaderCommit()
    heartbeats = 0
    while heartbeats < 3:
        leader.tick()
        for frm, to, message in _pump(two_voters):
            parsed = raft_message_commit(message)
            if to != 2 or parsed is None:
                continue
            assert parsed[0] == MSG_HEARTBEAT and parsed[2] == leader.commit_index
            learnt.on_message(frm, message, follower.leader_id, follower.term)
            heartbeats += 1
    assert learnt.commit_index(1, follower.term) is None


def _message(kind: int, term: int, commit: int) -> bytes:
    """A raft-rs Message with only its type (field 1), term (4) and commit index (8), each below 128."""
    return bytes([0x08, kind, 0x20, term, 0x40, commit])


def test_only_the_current_leaders_appends_teach_its_commit_index() -> None:
    learnt = LeaderCommit()
    learnt.on_message(1, _message(MSG_APPEND, 2, 90), 1, 2)
    assert learnt.commit_index(1, 2) == 90
    learnt.on_message(1, _message(MSG_APPEND, 2, 80), 1, 2)       # a late append does not move it back
    assert learnt.commit_index(1, 2) == 90
    learnt.on_message(2, _message(MSG_APPEND, 2, 99), 1, 2)       # not from the leader
    learnt.on_message(1, _message(MSG_APPEND, 1, 99), 1, 2)       # an old term's
    assert learnt.commit_index(1, 2) == 90
    learnt.on_message(3, _message(MSG_APPEND, 3, 5), 3, 3)        # a new term's leader: learnt from it anew
    assert learnt.commit_index(1, 2) is None and learnt.commit_index(3, 3) == 5


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

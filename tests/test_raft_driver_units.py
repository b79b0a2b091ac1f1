"""The pure parts of the quorum driver: Kafka's properties -> raft ticks, the tick clock,
proposal matching. No sockets, no clocks."""

from __future__ import annotations

import pytest

from klog.controller.quorum import ProposalTracker, QuorumConfig, QuorumConfigError, TickClock, parse_voters


def test_voters_parse_kafka_syntax_and_bad_entries_name_the_key() -> None:
    v = parse_voters("1@127.0.0.1:9093, 2@[::1]:9094,3@host-3:9095")
    assert [(x.node_id, x.host, x.port) for x in v.values()] == [(1, "127.0.0.1", 9093), (2, "::1", 9094), (3, "host-3", 9095)]
    for bad in ["1@host", "x@h:1", "1@h:0", "1@h:1,1@h:2", "", "0@h:1"]:
        with pytest.raises(QuorumConfigError, match="controller.quorum.voters"):
            parse_voters(bad)


def test_properties_map_onto_raft_ticks() -> None:
    cfg = QuorumConfig.from_properties({"node.id": "2", "controller.quorum.voters": "1@h:1,2@h:2,3@h:3"})
    assert cfg.tick_ms == 100
    # election.timeout 1000 -> 10 ticks; fetch.timeout 2000 -> 20; + backoff.max 1000 -> 30.
    assert cfg.raft_ticks() == {"election_tick": 10, "min_election_tick": 20, "max_election_tick": 30, "heartbeat_tick": 2}
    fast = QuorumConfig.from_properties({
        "node.id": "1", "controller.quorum.voters": "1@h:1",
        "controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000",
        "controller.quorum.election.backoff.max.ms": "250",
    })
    assert fast.tick_ms == 50
    assert fast.raft_ticks() == {"election_tick": 10, "min_election_tick": 20, "max_election_tick": 25, "heartbeat_tick": 2}


def test_misconfiguration_names_the_key() -> None:
    with pytest.raises(QuorumConfigError, match="node.id 4 is not among"):
        QuorumConfig.from_properties({"node.id": "4", "controller.quorum.voters": "1@h:1"})
    with pytest.raises(QuorumConfigError, match="controller.quorum.voters is required"):
        QuorumConfig.from_properties({"node.id": "1"})
    with pytest.raises(QuorumConfigError, match="controller.quorum.fetch.timeout.ms"):
        QuorumConfig.from_properties({"node.id": "1", "controller.quorum.voters": "1@h:1",
                                      "controller.quorum.fetch.timeout.ms": "100"})
    with pytest.raises(QuorumConfigError, match="controller.quorum.election.timeout.ms: 'x'"):
        QuorumConfig.from_properties({"node.id": "1", "controller.quorum.voters": "1@h:1",
                                      "controller.quorum.election.timeout.ms": "x"})


def test_tick_clock_counts_due_ticks_and_bounds_a_burst_after_a_stall() -> None:
    c = TickClock(100, now_ms=0, max_burst=5)
    assert c.due(99) == 0
    assert c.due(100) == 1
    assert c.due(150) == 0
    assert c.until_next(150) == 50
    assert c.due(10_000) == 5, "a stall of 99 ticks fires at most max_burst"
    assert c.due(10_050) == 0


def test_a_proposal_succeeds_only_if_its_term_commits_at_its_index() -> None:
    t: ProposalTracker[str] = ProposalTracker(limit=2)
    t.add(5, 2, "a")
    t.add(6, 2, "b")
    assert t.full()
    assert t.committed(4, 2) is None
    assert t.committed(5, 2) == ("a", True)
    assert t.committed(6, 3) == ("b", False), "another leader's entry at the index: lost"
    t.add(7, 3, "c")
    assert t.drop_through(7) == ["c"] and len(t) == 0

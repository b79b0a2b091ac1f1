"""KIP-392's replica choice (klog.broker.replication.selector), pure: which replica a consumer in a rack reads from."""

from __future__ import annotations

from klog.broker.replication.selector import ReplicaView, preferred_read_replica, select_rack_aware

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def view(broker: int, end: int = 100, since_caught_up_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker, RACKS.get(broker), end, since_caught_up_ms)


def choose(client_rack: str | None, offset: int = 50, *, followers: list[tuple[ReplicaView, int]] | None = None,
           isr: tuple[int, ...] = (1, 2, 3), racks: dict[int, str | None] | None = None) -> int:
    followers = followers if followers is not None else [(view(2), 0), (view(3), 0)]
    return preferred_read_replica(client_rack, offset, view(1), followers, isr, RACKS if racks is None else racks)


def test_a_consumer_in_a_followers_rack_is_sent_to_that_follower() -> None:
    assert choose("b") == 2
    assert choose("c") == 3


def test_a_consumer_without_a_rack_or_in_the_leaders_rack_or_in_an_empty_rack_reads_from_the_leader() -> None:
    assert choose(None) == -1
    assert choose("") == -1
    assert choose("a") == -1
    assert choose("z") == -1


def test_the_leader_wins_when_it_shares_the_clients_rack_with_followers() -> None:
    leader = ReplicaView(1, "b", 100, 0)
    assert select_rack_aware("b", leader, [leader, view(2, end=200)]) is leader


def test_a_follower_out_of_the_isr_is_never_chosen() -> None:
    assert choose("b", isr=(1, 3)) == -1


def test_a_follower_whose_log_does_not_hold_the_fetch_offset_is_never_chosen() -> None:
    assert choose("b", offset=101) == -1                                   # past its log end
    assert choose("b", offset=100) == 2                                    # at its log end: it can answer
    assert choose("b", offset=5, followers=[(view(2), 10), (view(3), 0)]) == -1   # below its log start


def test_a_fenced_or_unregistered_follower_is_never_chosen() -> None:
    assert choose("b", racks={1: "a", 3: "c"}) == -1


def test_among_followers_of_the_clients_rack_the_most_caught_up_wins() -> None:
    followers = [(view(2, end=90), 0), (view(4, end=100), 0), (view(3), 0)]
    assert choose("b", offset=50, followers=followers, isr=(1, 2, 3, 4)) == 4
    # equal log ends: the one caught up most recently
    followers = [(view(2, end=100, since_caught_up_ms=500), 0), (view(4, end=100, since_caught_up_ms=20), 0)]
    assert choose("b", followers=followers, isr=(1, 2, 4)) == 4

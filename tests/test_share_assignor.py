"""Kafka's share-group ``simple`` assignor (klog/broker/groups/share_assignor.py) without sockets: balance, sharing
when members outnumber partitions, heterogeneous subscriptions balanced per topic, and stickiness across epochs
(members joining and leaving move as few partitions as balance allows). The assignment two share consumers get on
a real broker (klog and Apache Kafka) is checked in tests/test_share_groups.py."""

from __future__ import annotations

import uuid
from collections import Counter

from klog.broker.groups.share_assignor import assign, desired_counts

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _parts(assignment, topic=T1):
    return {m: a.get(topic, []) for m, a in assignment.items()}


def _holders(assignment, topic=T1):
    return Counter(p for a in assignment.values() for p in a.get(topic, []))


def test_fewer_members_than_partitions_each_partition_goes_to_one_member_balanced():
    got = assign({"a": {T1}, "b": {T1}}, {T1: 4}, {})
    assert _holders(got) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert sorted(len(ps) for ps in _parts(got).values()) == [2, 2]
    got = assign({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 8}, {})
    assert _holders(got) == Counter(range(8))
    assert sorted(len(ps) for ps in _parts(got).values()) == [2, 3, 3]


def test_as_many_members_as_partitions_one_partition_each():
    got = assign({m: {T1} for m in "abcd"}, {T1: 4}, {})
    assert sorted(p for ps in _parts(got).values() for p in ps) == [0, 1, 2, 3]
    assert all(len(ps) == 1 for ps in _parts(got).values())


def test_more_members_than_partitions_share_partitions():
    got = assign({m: {T1} for m in "abcde"}, {T1: 2}, {})   # sharing ceil(5/2) = 3: 6 slots over 5 members
    assert desired_counts(5, 2) == (3, [2, 1, 1, 1, 1])
    assert sorted(_holders(got).values()) == [3, 3]
    assert all(1 <= len(ps) <= 2 for ps in _parts(got).values())
    got = assign({m: {T1} for m in "abc"}, {T1: 1}, {})
    assert _parts(got) == {"a": [0], "b": [0], "c": [0]}


def test_a_joining_member_takes_partitions_and_the_others_keep_the_rest():
    first = assign({"a": {T1}}, {T1: 6}, {})
    assert _parts(first) == {"a": [0, 1, 2, 3, 4, 5]}
    second = assign({"a": {T1}, "b": {T1}}, {T1: 6}, first)
    assert _holders(second) == Counter(range(6)) and len(second["b"][T1]) == 3
    third = assign({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 6}, second)
    assert _holders(third) == Counter(range(6))
    for m in "ab":   # sticky: a and b each keep two of their three, c gets one from each
        assert set(third[m][T1]) <= set(second[m][T1]) and len(third[m][T1]) == 2
    assert len(third["c"][T1]) == 2


def test_a_leaving_member_s_partitions_go_to_the_remaining_members():
    before = assign({m: {T1} for m in "abc"}, {T1: 6}, {})
    after = assign({"a": {T1}, "c": {T1}}, {T1: 6}, {m: before[m] for m in "ac"})
    assert _holders(after) == Counter(range(6))
    for m in "ac":
        assert set(before[m][T1]) <= set(after[m][T1]) and len(after[m][T1]) == 3


def test_partitions_added_to_a_topic_are_spread_without_moving_the_assigned_ones():
    before = assign({"a": {T1}, "b": {T1}}, {T1: 2}, {})
    after = assign({"a": {T1}, "b": {T1}}, {T1: 4}, before)
    assert _holders(after) == Counter(range(4))
    for m in "ab":
        assert set(before[m][T1]) < set(after[m][T1]) and len(after[m][T1]) == 2


def test_heterogeneous_subscriptions_are_balanced_per_topic():
    # Kafka's example: a on T1, b on T2, c on both: c gets half of each topic
    got = assign({"a": {T1}, "b": {T2}, "c": {T1, T2}}, {T1: 4, T2: 4}, {})
    assert _holders(got, T1) == Counter(range(4)) and _holders(got, T2) == Counter(range(4))
    assert len(got["a"][T1]) == 2 and len(got["c"][T1]) == 2
    assert len(got["b"][T2]) == 2 and len(got["c"][T2]) == 2
    assert T2 not in got["a"] and T1 not in got["b"]


def test_an_unsubscribed_topic_s_partitions_are_revoked_and_given_to_its_subscribers():
    before = assign({"a": {T1, T2}, "b": {T1, T2}}, {T1: 2, T2: 2}, {})
    after = assign({"a": {T1}, "b": {T1, T2}}, {T1: 2, T2: 2}, before)
    assert T2 not in after["a"]
    assert after["b"][T2] == [0, 1]
    assert _holders(after, T1) == Counter(range(2))


def test_missing_topics_and_no_members_assign_nothing():
    assert assign({}, {T1: 3}, {}) == {}
    assert assign({"a": {T2}}, {T1: 3}, {}) == {"a": {}}
    assert assign({"a": set()}, {T1: 3}, {"a": {T1: [0]}}) == {"a": {}}


def test_the_assignment_is_stable_when_nothing_changed():
    members = {m: {T1} for m in "abc"}
    first = assign(members, {T1: 7}, {})
    assert assign(members, {T1: 7}, first) == first
    many = {f"m{i}": {T1} for i in range(7)}
    shared = assign(many, {T1: 3}, {})
    assert assign(many, {T1: 3}, shared) == shared
    assert sorted(_holders(shared).values()) == [3, 3, 3]

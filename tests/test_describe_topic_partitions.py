"""DescribeTopicPartitions (75) on a real broker: topics in name order with their partitions' leader, replicas,
ISR, ELR and offline replicas, at most ``response_partition_limit`` partitions per answer and a cursor to continue
from (Kafka's DescribeTopicPartitionsRequestHandler)."""

from __future__ import annotations

import uuid

from klog.protocol import ApiKey
from klog.testing.wire import WireClient

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


def _create(wire: WireClient, name: str, partitions: int) -> None:
    answer = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False}).topics[0]
    assert answer.error_code == 0, answer.error_message


def _describe(wire: WireClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    return wire.request(75, 0, {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
                                "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                                       "partition_index": cursor[1]}})


def _listed(answer) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in answer.topics]


def test_topics_are_described_in_name_order_and_paged_with_a_cursor(klog_broker) -> None:
    prefix = uuid.uuid4().hex[:6]
    a, b, c = (f"{prefix}-{x}" for x in "abc")
    host, port = klog_broker.bootstrap_servers.split(":")
    with WireClient(host, int(port)) as wire:
        for name, partitions in ((c, 1), (a, 3), (b, 2)):
            _create(wire, name, partitions)
        whole = _describe(wire, [c, "no-such-topic", a, b])
        assert _listed(whole) == [(a, 0, [0, 1, 2]), (b, 0, [0, 1]), (c, 0, [0]),
                                  ("no-such-topic", UNKNOWN_TOPIC_OR_PARTITION, [])]
        assert whole.next_cursor is None
        p = whole.topics[0].partitions[0]
        node = wire.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}).brokers[0].node_id
        assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
            0, node, [node], [node], [])
        assert p.eligible_leader_replicas == [] and p.last_known_elr == []
        assert whole.topics[0].topic_id != uuid.UUID(int=0) and not whole.topics[0].is_internal

        first = _describe(wire, [a, b, c], limit=4)
        assert _listed(first) == [(a, 0, [0, 1, 2]), (b, 0, [0])]
        cursor = (first.next_cursor.topic_name, first.next_cursor.partition_index)
        assert cursor == (b, 1)
        rest = _describe(wire, [a, b, c], limit=4, cursor=cursor)
        assert _listed(rest) == [(b, 0, [1]), (c, 0, [0])] and rest.next_cursor is None
        # the limit reached exactly at a topic's end: the cursor names the next topic's first partition
        exact = _describe(wire, [a, b, c], limit=3)
        assert _listed(exact) == [(a, 0, [0, 1, 2])]
        assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == (b, 0)
        # no topic named: every topic (this module's among them), still in name order
        every = [t.name for t in _describe(wire, []).topics]
        assert every == sorted(every) and {a, b, c} <= set(every)
        # a cursor on a topic the request does not name is refused
        refused = _describe(wire, [a], cursor=(c, 0))
        assert [(t.name, t.error_code) for t in refused.topics] == [(a, INVALID_REQUEST)]

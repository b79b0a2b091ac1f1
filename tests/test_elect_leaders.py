"""ElectLeaders (43) over the wire, checked the same way against Apache Kafka 4.x and klog: Kafka's own
``kafka-leader-election`` tool and raw requests. On a single broker every partition is led by its preferred (and
only) replica, so elections are not needed; what differs between brokers with replicas is decided by
klog.controller.elections (tests/test_controller_elections.py)."""

from __future__ import annotations

import uuid

import pytest

from klog.protocol import ApiKey
from klog.testing.kafka_tools import run_kafka_tool
from klog.testing.wire import WireClient

LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
ELECTION_NOT_NEEDED = 84
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    name = f"elect-{uuid.uuid4().hex[:8]}"
    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as wire:
        r = wire.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
    assert r.topics[0].error_code == 0
    return name


def elect(bootstrap: str, version: int, body: dict) -> object:
    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as wire:
        return wire.request(ApiKey.ELECT_LEADERS, version, body)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_named_partitions_led_by_their_preferred_replica_need_no_election(bootstrap: str, topic: str,
                                                                           version: int) -> None:
    body = {"election_type": 0, "timeout_ms": 30000,
            "topic_partitions": [{"topic": topic, "partitions": [0, 2]}, {"topic": topic + "-nope", "partitions": [0]}]}
    r = elect(bootstrap, version, body)
    got = {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results for p in t.partition_result}
    assert got == {(topic, 0): ELECTION_NOT_NEEDED, (topic, 2): ELECTION_NOT_NEEDED,
                   (topic + "-nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    if version >= 1:
        assert r.error_code == 0


def test_every_partition_at_once_lists_none_that_needed_no_election(bootstrap: str, topic: str) -> None:
    r = elect(bootstrap, 2, {"election_type": 0, "timeout_ms": 30000, "topic_partitions": None})
    assert r.error_code == 0
    assert [(t.topic, p.partition_id) for t in r.replica_election_results for p in t.partition_result
            if t.topic == topic] == []


def test_unclean_election_of_a_partition_with_a_leader_is_not_needed(bootstrap: str, topic: str) -> None:
    r = elect(bootstrap, 1, {"election_type": 1, "timeout_ms": 30000,
                             "topic_partitions": [{"topic": topic, "partitions": [1]}]})
    assert [p.error_code for t in r.replica_election_results for p in t.partition_result] == [ELECTION_NOT_NEEDED]


def test_kafka_leader_election_tool_reports_the_valid_replicas_already_elected(bootstrap: str, topic: str) -> None:
    out = run_kafka_tool(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                         "--topic", topic, "--partition", "1")
    assert out.returncode == 0, out.stderr
    assert f"Valid replica already elected for partitions {topic}-1" in out.stdout, out.stdout
    everything = run_kafka_tool(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                                "--all-topic-partitions")
    assert everything.returncode == 0, everything.stderr
    assert "Successfully completed leader election" not in everything.stdout, everything.stdout

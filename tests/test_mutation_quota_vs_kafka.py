"""The ``controller_mutation_rate`` quota (KIP-599) on klog and on Apache Kafka from the same properties, seen from a
client: partitions created (CreateTopics), added (CreatePartitions) and deleted (DeleteTopics) are taken from a
token bucket of ``controller.quota.window.num`` windows' worth of the rate (measured on Kafka 4.3: 2 windows of 1 s at
5/s hold 10); a mutation is accepted while the bucket is not negative, so one large topic overdraws it, and the
mutations after it are refused with THROTTLING_QUOTA_EXCEEDED and a throttle time (CreateTopics v6+,
CreatePartitions v3+, DeleteTopics v5+) until the bucket refills; older versions are accepted and only told their
throttle time. ``validate_only`` CreateTopics are charged too (Kafka's controller does).

Each test has a client id of its own, with its own quota (set with AlterClientQuotas), so its bucket starts full."""

from __future__ import annotations

import re
import time
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from klog.testing.kafka import one_broker
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.java

#: partitions per second each test's client id may mutate: with 2 windows of 1 s, a full bucket holds 10
RATE = 5.0
#: partitions that overdraw a full bucket by 15: 3 s before it is back at 0 at RATE (a margin for a loaded machine
#: between the overdraft and the requests the tests expect refused)
OVERDRAW = 25
#: the longest throttle time an overdraft of OVERDRAW earns
MAX_THROTTLE_MS = 3000
THROTTLING_QUOTA_EXCEEDED = 89
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, ALTER_CLIENT_QUOTAS = 19, 20, 37, 49
#: the client ids the tests mutate as, each with the quota
CLIENTS = ("creator", "old-creator", "validator", "partitioner", "deleter")


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    """The PLAINTEXT address of a klog or an Apache Kafka broker, each test's client id under the quota (the Kafka
    side takes 25-50 s with its start, nightly)."""
    root = tmp_path_factory.mktemp(request.param)
    with one_broker(request.param, root, {"controller.quota.window.num": 2,
                                                  "controller.quota.window.size.seconds": 1}) as bootstrap:
        host, _, port = bootstrap.rpartition(":")
        address = (host, int(port))
        with WireClient(*address, client_id="admin") as admin:
            answer = admin.request(ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": client}],
                 "ops": [{"key": "controller_mutation_rate", "value": RATE, "remove": False}]}
                for client in CLIENTS], "validate_only": False})
            assert [e.error_code for e in answer.entries] == [0] * len(CLIENTS)
        _wait_applied(address)
        yield address


def _wait_applied(address: tuple[str, int], client: str = CLIENTS[-1]) -> None:
    """Until the quota is in force on the broker (its record applied): DescribeClientQuotas shows it."""
    deadline = time.monotonic() + 15
    with WireClient(*address, client_id="admin") as admin:
        while time.monotonic() < deadline:
            answer = admin.request(48, 1, {"components": [{"entity_type": "client-id", "match_type": 0,
                                                           "match": client}], "strict": False})
            if answer.entries:
                return
            time.sleep(0.1)
    raise AssertionError("the controller_mutation_rate quota never showed")


def _topic(name: str, partitions: int) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}


def _create(address: tuple[str, int], client: str, version: int, *topics: tuple[str, int],
            validate_only: bool = False) -> Any:
    """CreateTopics on a connection of its own (a throttled connection is muted for its throttle time)."""
    with WireClient(*address, client_id=client) as wire:
        return wire.request(CREATE_TOPICS, version, {"topics": [_topic(n, p) for n, p in topics],
                                                     "timeout_ms": 30000, "validate_only": validate_only})


def _unlimited_topics(address: tuple[str, int], *topics: tuple[str, int]) -> None:
    answer = _create(address, "admin", 7, *topics)
    assert [t.error_code for t in answer.topics] == [0] * len(topics)


def _exists(address: tuple[str, int], name: str, wait_s: float = 0.0) -> bool:
    """Whether the broker's Metadata shows the topic (within ``wait_s``: Kafka's broker learns a topic the
    controller created a moment after CreateTopics is answered)."""
    deadline = time.monotonic() + wait_s
    with WireClient(*address, client_id="admin") as wire:
        while True:
            answer = wire.request(3, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                         "include_cluster_authorized_operations": False,
                                         "include_topic_authorized_operations": False})
            if answer.topics[0].error_code == 0 or time.monotonic() >= deadline:
                return answer.topics[0].error_code == 0
            time.sleep(0.05)


def test_one_create_topics_overdraws_the_bucket_then_the_next_gets_throttling_quota_exceeded(server):
    first = _create(server, "creator", 7, ("overdraw", OVERDRAW))   # 25 partitions from a bucket of 10: accepted
    assert first.topics[0].error_code == 0
    second = _create(server, "creator", 7, ("refused", 1), ("refused-too", 1))
    assert [t.error_code for t in second.topics] == [THROTTLING_QUOTA_EXCEEDED] * 2
    assert second.topics[0].error_message is None   # Kafka 4.3 answers no message
    # the bucket is 15 partitions short at 5 a second: up to 3 s to wait
    assert 0 < second.throttle_time_ms <= MAX_THROTTLE_MS, second.throttle_time_ms
    assert not _exists(server, "refused")
    time.sleep(second.throttle_time_ms / 1000 + 0.1)
    third = _create(server, "creator", 7, ("accepted-later", 1))
    assert third.topics[0].error_code == 0, third.topics[0].error_message
    assert _exists(server, "accepted-later", wait_s=5)


def test_create_topics_before_v6_is_accepted_over_the_quota_and_told_its_throttle_time(server):
    first = _create(server, "old-creator", 5, ("old-overdraw", OVERDRAW))
    assert first.topics[0].error_code == 0
    assert 0 < first.throttle_time_ms <= MAX_THROTTLE_MS, first.throttle_time_ms   # the bucket is negative
    second = _create(server, "old-creator", 5, ("old-accepted", 1))
    assert second.topics[0].error_code == 0
    assert second.throttle_time_ms > 0
    assert _exists(server, "old-accepted", wait_s=5)


def test_validate_only_create_topics_is_charged_as_on_kafka(server):
    answer = _create(server, "validator", 7, ("validated", OVERDRAW), validate_only=True)
    assert answer.topics[0].error_code == 0
    answer = _create(server, "validator", 7, ("validated", 1), validate_only=True)
    assert answer.topics[0].error_code == THROTTLING_QUOTA_EXCEEDED
    assert answer.throttle_time_ms > 0
    assert not _exists(server, "validated")


def test_create_partitions_counts_the_partitions_added(server):
    _unlimited_topics(server, ("grown", 1), ("not-grown", 1))   # the admin client id has no quota
    with WireClient(*server, client_id="partitioner") as wire:
        grown = wire.request(CREATE_PARTITIONS, 3, {"topics": [{"name": "grown", "count": 1 + OVERDRAW,
                                                                       "assignments": None}],
                                                    "timeout_ms": 30000, "validate_only": False})
    assert grown.results[0].error_code == 0
    with WireClient(*server, client_id="partitioner") as wire:
        refused = wire.request(CREATE_PARTITIONS, 3, {"topics": [
            {"name": "not-grown", "count": 2, "assignments": None}], "timeout_ms": 30000, "validate_only": False})
    assert refused.results[0].error_code == THROTTLING_QUOTA_EXCEEDED
    assert refused.results[0].error_message is None
    assert refused.throttle_time_ms > 0


def test_delete_topics_counts_the_partitions_deleted(server):
    _unlimited_topics(server, ("deleted", OVERDRAW), ("kept", 1))
    with WireClient(*server, client_id="deleter") as wire:
        deleted = wire.request(DELETE_TOPICS, 5, {"topic_names": ["deleted"], "timeout_ms": 30000})
    assert deleted.responses[0].error_code == 0
    with WireClient(*server, client_id="deleter") as wire:
        refused = wire.request(DELETE_TOPICS, 5, {"topic_names": ["kept"], "timeout_ms": 30000})
    assert refused.responses[0].error_code == THROTTLING_QUOTA_EXCEEDED
    assert refused.responses[0].error_message is None
    assert refused.throttle_time_ms > 0
    assert _exists(server, "kept", wait_s=5)


def _scrape(url: str) -> dict[tuple[str, str], float]:
    """The broker's Prometheus samples (prometheus_client's parser): (name, quota_type label) -> value."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {(s.name, s.labels.get("quota_type", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_throttled_mutation_is_counted_on_the_brokers_metrics(tmp_path):
    """klog only (Kafka's sensors are JMX): the CreateTopics the quota refused is counted under
    quota_type="ControllerMutation" with its throttle time; the one it accepted within the bucket is not."""
    with BrokerProcess(tmp_path, {"controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1,
                                  "klog.metrics.listener": "127.0.0.1:0"}) as broker:
        found = re.search(r"metrics on (http://\S+/metrics)", broker.log_text())
        assert found, broker.log_text()
        address = (broker.host, broker.port)
        with WireClient(*address, client_id="admin") as admin:
            answer = admin.request(ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "metered"}],
                 "ops": [{"key": "controller_mutation_rate", "value": RATE, "remove": False}]}], "validate_only": False})
            assert answer.entries[0].error_code == 0
        _wait_applied(address, "metered")
        assert _create(address, "metered", 7, ("metered-overdraw", OVERDRAW)).topics[0].error_code == 0
        count = ("klog_quota_throttled_requests_total", "ControllerMutation")
        total = ("klog_quota_throttle_time_ms_total", "ControllerMutation")
        before = _scrape(found.group(1))
        refused = _create(address, "metered", 7, ("metered-refused", 1))
        assert refused.topics[0].error_code == THROTTLING_QUOTA_EXCEEDED and refused.throttle_time_ms > 0
        after = _scrape(found.group(1))
        assert after[count] == before[count] + 1, (before.get(count), after.get(count))
        assert after[total] == before[total] + refused.throttle_time_ms
        unmetered = _create(address, "admin", 7, ("unmetered", 1))
        assert unmetered.topics[0].error_code == 0 and unmetered.throttle_time_ms == 0
        assert _scrape(found.group(1))[count] == after[count]

"""Requests found answered unlike Apache Kafka 4.3.1 by a differential probe (2026-12-07: the same wire requests
sent to both brokers through klog's codec), answered by klog as Kafka answers them: a consumer's fetch over its
``consumer_byte_rate``, a partition named twice in one Fetch, DescribeTopicPartitions of names no topic can have,
UpdateFeatures of an unknown feature at level 0, DescribeQuorum of another partition than the metadata log's and a
batch larger than its topic's ``segment.bytes``. One broker of each kind for the module, started from the same
properties; each test failed on klog before (what klog answered is in the test's docstring)."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

#: Kafka's schema default of an omitted authorized-operations field
OMITTED = -2147483648
#: Kafka 4's smallest segment.bytes
MIB = 1 << 20


#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"auto.create.topics.enable": "false"}


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


class Wire(WireClient):
    def __init__(self, bootstrap: str, client_id: str = "fetch-quota-admin-edges") -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id=client_id, timeout=60)

    def topic(self, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        name = f"probe-{uuid.uuid4().hex[:8]}"
        created = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30000, "validate_only": False}).topics[0]
        assert created.error_code == ErrorCode.NONE, created
        return name

    def produce(self, topic: str, partition: int, values: list[bytes]) -> Any:
        """One batch of ``values`` (retried while the new partition has no leader): the partition's answer."""
        for _ in range(200):
            answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                      "topic_data": [{"name": topic, "partition_data": [
                                                          {"index": partition, "records": encode_batch(
                                                              [{"value": v} for v in values])}]}]})
            answer = answer.responses[0].partition_responses[0]
            if answer.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                         ErrorCode.LEADER_NOT_AVAILABLE):
                return answer
            time.sleep(0.05)
        raise AssertionError(f"{topic} has no leader")

    def fetch(self, topic: str, partitions: list[tuple[int, int]], *, version: int = 12, session_id: int = 0,
              session_epoch: int = -1) -> Any:
        """Fetch ``(partition, offset)`` of ``topic`` (v4-v12: by name), nothing waited for."""
        return self.request(ApiKey.FETCH, version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 10_000_000, "isolation_level": 0,
            "session_id": session_id, "session_epoch": session_epoch, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "topic_id": uuid.UUID(int=0), "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1_000_000, "last_fetched_epoch": -1} for p, offset in partitions]}]
            if partitions else []})


def _base_offset(records: Any) -> int:
    return int.from_bytes(bytes(records)[:8], "big")


def _topic_and_a_slow_consumer(bootstrap: str) -> tuple[str, str]:
    """A topic holding 1,500 records and a client id whose consumer_byte_rate (2 KiB/s) one fetch of them exceeds."""
    with Wire(bootstrap) as admin:
        topic = admin.topic()
        for _ in range(3):
            assert admin.produce(topic, 0, [b"v"] * 500).error_code == ErrorCode.NONE
        return topic, _quota_client(admin, 2048.0)


def _quota_client(wire: Wire, consumer_byte_rate: float) -> str:
    """A new client id with its own ``consumer_byte_rate``."""
    client_id = f"quota-{uuid.uuid4().hex[:8]}"
    altered = wire.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": client_id}],
         "ops": [{"key": "consumer_byte_rate", "value": consumer_byte_rate, "remove": False}]}]})
    assert altered.entries[0].error_code == ErrorCode.NONE
    time.sleep(1)   # the brokers' metadata images take the quota
    return client_id


@pytest.mark.parametrize("version", [4, 12])
def test_a_partition_named_twice_in_one_fetch_is_read_once_at_its_first_place_with_its_last_entry(
        bootstrap: str, version: int) -> None:
    """Kafka's FetchRequest keys its partitions in a LinkedHashMap (klog answered the partition once per entry, on
    its Python and its native Fetch path)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic(partitions=2)
        assert wire.produce(topic, 0, [b"a"] * 3).error_code == ErrorCode.NONE
        assert wire.produce(topic, 0, [b"b"] * 3).error_code == ErrorCode.NONE
        assert wire.produce(topic, 1, [b"c"]).error_code == ErrorCode.NONE
        wire.fetch(topic, [(0, 0), (1, 0)], version=version)   # on klog, the native Fetch path serves them next
        answer = wire.fetch(topic, [(0, 0), (1, 0), (0, 4)], version=version)
        assert [(r.topic, [(p.partition_index, p.error_code, _base_offset(p.records)) for p in r.partitions])
                for r in answer.responses] == [(topic, [(0, ErrorCode.NONE, 3), (1, ErrorCode.NONE, 0)])]


def test_describe_topic_partitions_refuses_a_name_no_topic_can_have_and_fails_on_an_empty_one(bootstrap: str) -> None:
    """An invalid name is INVALID_TOPIC_EXCEPTION (with the operations, as for an unknown topic); an empty name fails
    the request, each topic named UNKNOWN_SERVER_ERROR in its order (klog: UNKNOWN_TOPIC_OR_PARTITION for both)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic()

        def describe(names: list[str]) -> list[tuple[str, int, int, int]]:
            answer = wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": n} for n in names], "response_partition_limit": 10, "cursor": None})
            assert answer.next_cursor is None
            return [(t.name, t.error_code, len(t.partitions), t.topic_authorized_operations) for t in answer.topics]

        described = describe([topic])
        operations = described[0][3]
        assert described == [(topic, ErrorCode.NONE, 1, operations)] and operations != OMITTED
        invalid = [".", "..", "a" * 250, "a b", "a/b"]
        assert describe([*invalid, topic]) == sorted(
            [(name, ErrorCode.INVALID_TOPIC_EXCEPTION, 0, operations) for name in invalid]
            + [(topic, ErrorCode.NONE, 1, operations)])
        assert describe(["zz", "", topic]) == [(name, ErrorCode.UNKNOWN_SERVER_ERROR, 0, OMITTED)
                                               for name in ("zz", "", topic)]


@pytest.mark.parametrize("validate_only", [True, False])
def test_update_features_of_an_unknown_feature_at_level_0_is_an_invalid_update_version(
        bootstrap: str, validate_only: bool) -> None:
    """Level 0 of a feature no node supports passes the range check, then Kafka looks the feature up (klog answered
    NONE)."""
    with Wire(bootstrap) as wire:
        answer = wire.request(ApiKey.UPDATE_FEATURES, 1, {"timeout_ms": 10000, "validate_only": validate_only,
                                                          "feature_updates": [
            {"feature": "group.version", "max_version_level": 1, "upgrade_type": 1},
            {"feature": "bogus.feature", "max_version_level": 0, "upgrade_type": 1}]})
        assert (answer.error_code, answer.error_message, answer.results) == (
            ErrorCode.INVALID_UPDATE_VERSION, "The update failed for all features since the following feature had "
            "an error: Invalid update version 0 for feature bogus.feature. Feature bogus.feature not found.", [])


def test_describe_quorum_of_another_partition_refuses_each_partition_it_names(bootstrap: str) -> None:
    """Kafka's getPartitionLevelErrorResponse (klog: the error at the top level, no topics)."""
    with Wire(bootstrap) as wire:
        answer = wire.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [
            {"topic_name": "orders", "partitions": [{"partition_index": 0}, {"partition_index": 3}]}]})
        assert (answer.error_code, answer.error_message, answer.nodes) == (ErrorCode.NONE, "", [])
        assert [(t.topic_name, [(p.partition_index, p.error_code, p.error_message, p.leader_id, p.current_voters)
                                for p in t.partitions]) for t in answer.topics] == [
            ("orders", [(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.",
                         0, []) for index in (0, 3)])]
        described = wire.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        partition = described.topics[0].partitions[0]
        assert (described.error_code, described.error_message, partition.error_code, partition.error_message) == (
            ErrorCode.NONE, "", ErrorCode.NONE, "")


@pytest.mark.parametrize("compression", ["producer", "gzip"])
def test_a_batch_larger_than_its_topics_segment_bytes_is_record_list_too_large(bootstrap: str,
                                                                               compression: str) -> None:
    """Kafka's UnifiedLog.append refuses a batch no segment can hold, once it passed max.message.bytes, without a
    message; the batch as stored counts, so a compressed one may pass (klog stored it in a segment of its own)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic(configs={"segment.bytes": str(MIB), "max.message.bytes": str(3 * MIB),
                                    "compression.type": compression})
        refused = wire.produce(topic, 0, [random.Random(0).randbytes(MIB + 1000)])   # incompressible
        stored = wire.produce(topic, 0, [b"x" * (MIB - 200)])
        compressible = wire.produce(topic, 0, [b"x" * (2 * MIB)])
        answers = [(a.error_code, a.error_message, a.base_offset, a.log_start_offset, a.record_errors)
                   for a in (refused, stored, compressible)]
        assert answers[:2] == [(ErrorCode.RECORD_LIST_TOO_LARGE, None, -1, -1, []), (ErrorCode.NONE, None, 0, 0, [])]
        assert answers[2] == ((ErrorCode.NONE, None, 1, 0, []) if compression == "gzip" else
                              (ErrorCode.RECORD_LIST_TOO_LARGE, None, -1, -1, []))


def test_a_fetch_over_its_consumer_byte_rate_is_answered_empty_and_its_bytes_are_not_counted(bootstrap: str) -> None:
    """Kafka's handleFetchRequest: a throttled fetch is answered with its throttle time and no partition, and what
    it would have sent is taken back from the client's rate, so the next throttle is no longer (klog sent the
    records with the throttle time and counted them: 3.2 s, then 9.6 s)."""
    topic, client_id = _topic_and_a_slow_consumer(bootstrap)
    with Wire(bootstrap, client_id) as consumer:
        first = consumer.fetch(topic, [(0, 0)])
        assert first.throttle_time_ms == 0 and len(bytes(first.responses[0].partitions[0].records)) > 10_000
        throttles = []
        for _ in range(2):
            throttled = consumer.fetch(topic, [(0, 0)])
            assert (throttled.error_code, throttled.session_id, throttled.responses) == (ErrorCode.NONE, 0, [])
            throttles.append(throttled.throttle_time_ms)
        assert 0 < throttles[1] <= throttles[0] + 500, throttles


def test_a_throttled_fetch_of_a_fetch_session_keeps_the_session(bootstrap: str) -> None:
    """An incremental fetch over the quota is answered empty with its session's id; the session goes on at the next
    epoch (klog sent the records)."""
    topic, client_id = _topic_and_a_slow_consumer(bootstrap)
    with Wire(bootstrap, client_id) as consumer:
        opened = consumer.fetch(topic, [(0, 0)], session_epoch=0)
        assert opened.throttle_time_ms == 0 and opened.session_id != 0 and opened.responses
        throttled = consumer.fetch(topic, [], session_id=opened.session_id, session_epoch=1)
        assert (throttled.error_code, throttled.session_id, throttled.responses) == (
            ErrorCode.NONE, opened.session_id, [])
        assert throttled.throttle_time_ms > 0
        later = consumer.fetch(topic, [], session_id=opened.session_id, session_epoch=2)
        assert (later.error_code, later.session_id) == (ErrorCode.NONE, opened.session_id)

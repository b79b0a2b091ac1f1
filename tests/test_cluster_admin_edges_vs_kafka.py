"""Cluster admin requests at their edges (ListOffsets' tiered-storage timestamps and isolation levels,
OffsetForLeaderEpoch, DescribeCluster's endpoint types, DeleteRecords, DescribeTopicPartitions' cursor,
ElectLeaders, AlterPartitionReassignments, DescribeProducers), answered by klog as Apache Kafka 4.x answers them:
one broker of each kind for the module, started from the same properties, the same wire requests sent to both.
Each test failed on klog before 2026-12-07 (what it answered is in the test's docstring)."""

from __future__ import annotations

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


#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"auto.create.topics.enable": "false"}


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="cluster-admin-edges")

    def topic_with_records(self, partitions: int = 1, records: int = 3) -> str:
        """A new topic whose partition 0 holds ``records`` records (one batch), once its leader takes them."""
        name = f"edge-{uuid.uuid4().hex[:8]}"
        created = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 30000, "validate_only": False}).topics[0]
        assert created.error_code == ErrorCode.NONE, created
        for _ in range(200):
            answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                      "topic_data": [{"name": name, "partition_data": [
                                                          {"index": 0, "records": encode_batch(
                                                              [{"value": b"v"}] * records)}]}]})
            code = answer.responses[0].partition_responses[0].error_code
            if code == ErrorCode.NONE:
                return name
            assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.LEADER_NOT_AVAILABLE), code
            time.sleep(0.05)
        raise AssertionError(f"{name} has no leader")

    def list_offsets(self, topic: str, timestamp: int, version: int, isolation_level: int = 0
                     ) -> tuple[int, int, int, int]:
        """(error, offset, timestamp, leader epoch) of partition 0."""
        answer = self.request(ApiKey.LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": isolation_level, "timeout_ms": 10000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": timestamp}]}]})
        p = answer.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp, p.leader_epoch


def test_list_offsets_v9_to_v11_answer_tiered_storage_timestamps_with_no_offset(bootstrap: str) -> None:
    """Kafka 4.x advertises ListOffsets up to v11: latest-tiered (-5, v9+) and earliest-pending-upload (-6, v11+)
    answer no offset without remote storage, -6 below v11 UNSUPPORTED_VERSION (klog advertised 1-8: a v9 request
    closed the connection, so ``OffsetSpec.latestTiered()`` failed)."""
    with Wire(bootstrap) as wire:
        versions = {k.api_key: k.max_version for k in wire.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "edges", "client_software_version": "1"}).api_keys}
        assert versions[ApiKey.LIST_OFFSETS] >= 11
        topic = wire.topic_with_records()
        for version in (9, 10, 11):
            assert wire.list_offsets(topic, -5, version) == (ErrorCode.NONE, -1, -1, -1)
            assert wire.list_offsets(topic, -1, version) == (ErrorCode.NONE, 3, -1, 0)
            assert wire.list_offsets(topic, -6, version)[0] == (
                ErrorCode.NONE if version >= 11 else ErrorCode.UNSUPPORTED_VERSION)
            assert wire.list_offsets(topic, -7, version)[0] == ErrorCode.UNSUPPORTED_VERSION
        assert wire.list_offsets(topic, -6, 11)[1:] == (-1, -1, -1)


def test_list_offsets_with_an_isolation_level_neither_0_nor_1_is_answered_unknown_server_error(
        bootstrap: str) -> None:
    """Kafka's IsolationLevel.forId throws: every partition UNKNOWN_SERVER_ERROR (klog answered as read_uncommitted:
    offset 3)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        for level in (2, -1):
            assert wire.list_offsets(topic, -1, 8, isolation_level=level) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1,
                                                                               -1)
        assert wire.list_offsets(topic, -1, 8, isolation_level=1) == (ErrorCode.NONE, 3, -1, 0)


def test_offset_for_leader_epoch_of_an_epoch_newer_than_every_known_one_is_undefined(bootstrap: str) -> None:
    """Kafka's endOffsetFor: an epoch newer than the leader's latest is UNDEFINED (epoch and offset -1), the latest
    ends at the log end (klog's unreplicated partition answered epoch 0 ending at 3 for epoch 5)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()

        def end_of(epoch: int) -> tuple[int, int, int]:
            p = wire.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                 "leader_epoch": epoch}]}]}).topics[0].partitions[0]
            return p.error_code, p.leader_epoch, p.end_offset

        assert end_of(0) == (ErrorCode.NONE, 0, 3)
        assert end_of(5) == (ErrorCode.NONE, -1, -1)
        assert end_of(-1) == (ErrorCode.NONE, -1, -1)


def test_describe_cluster_on_a_broker_refuses_the_controller_endpoint_type_and_unknown_ones(bootstrap: str) -> None:
    """Kafka's AuthHelper: a broker's listener asked for the controllers answers MISMATCHED_ENDPOINT_TYPE, an unknown
    endpoint type UNSUPPORTED_ENDPOINT_TYPE, each with its message and nothing of the cluster (klog answered type 2
    with the brokers and no error, and unknown types UNSUPPORTED_VERSION)."""
    with Wire(bootstrap) as wire:
        def describe(endpoint_type: int) -> Any:
            return wire.request(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                              "endpoint_type": endpoint_type})

        refused = describe(2)
        assert (refused.error_code, refused.error_message, refused.endpoint_type, refused.cluster_id,
                refused.brokers) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of "
                                     "type BROKER, but we wanted an endpoint of type CONTROLLER", 1, "", [])
        for unknown in (0, 3):
            refused = describe(unknown)
            assert (refused.error_code, refused.error_message, refused.endpoint_type, refused.brokers) == (
                ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {unknown}", 1, [])
        described = describe(1)
        assert (described.error_code, described.endpoint_type, len(described.brokers)) == (ErrorCode.NONE, 1, 1)


def test_delete_records_naming_a_partition_twice_answers_it_once_with_its_last_offset(bootstrap: str) -> None:
    """Kafka keys DeleteRecords' offsets by partition (klog moved the log start twice and answered both)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        answer = wire.request(ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 10000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 2}, {"partition_index": 0, "offset": 1}]},
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}]})
        assert [(t.name, [(p.partition_index, p.error_code, p.low_watermark) for p in t.partitions])
                for t in answer.topics] == [(topic, [(0, ErrorCode.NONE, 1)])]


def test_describe_topic_partitions_refuses_a_negative_cursor_and_answers_unknown_topics_with_operations(
        bootstrap: str) -> None:
    """Kafka refuses a cursor with a negative partition (INVALID_REQUEST for each topic named; klog served from
    partition 0), and an unknown topic carries the operations the principal would have on it (klog: omitted)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records(partitions=2)

        def describe(names: list[str], cursor: dict[str, Any] | None) -> Any:
            return wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": n} for n in names], "response_partition_limit": 10, "cursor": cursor})

        refused = describe([topic], {"topic_name": topic, "partition_index": -1})
        assert [(t.name, t.error_code, t.partitions, t.topic_authorized_operations) for t in refused.topics] == [
            (topic, ErrorCode.INVALID_REQUEST, [], OMITTED)] and refused.next_cursor is None
        unknown = f"{topic}-unknown"
        answered = {t.name: t for t in describe([unknown, topic], None).topics}
        assert answered[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answered[unknown].topic_authorized_operations == answered[topic].topic_authorized_operations != OMITTED


def test_elect_leaders_answers_each_partition_with_kafkas_words(bootstrap: str) -> None:
    """ELECTION_NOT_NEEDED carries Kafka's default message (klog: none); with no partition named every topic is
    listed, its partitions that needed no election left out (klog left the topics out too); an unknown election
    type refuses each named partition (klog: the top-level error only)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records(partitions=2)

        def elect(election_type: int, partitions: Any) -> Any:
            return wire.request(ApiKey.ELECT_LEADERS, 2, {"election_type": election_type, "timeout_ms": 10000,
                                                          "topic_partitions": partitions})

        def results(answer: Any) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
            return [(r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
                    for r in answer.replica_election_results]

        not_needed = "Leader election not needed for topic partition."
        for election_type in (0, 1):
            answer = elect(election_type, [{"topic": topic, "partitions": [0, 1]}])
            assert (answer.error_code, results(answer)) == (ErrorCode.NONE, [
                (topic, [(0, ErrorCode.ELECTION_NOT_NEEDED, not_needed), (1, ErrorCode.ELECTION_NOT_NEEDED,
                                                                           not_needed)])])
        every = dict(results(elect(0, None)))
        assert every[topic] == [] and all(listed == [] for listed in every.values())
        refused = elect(5, [{"topic": topic, "partitions": [0]}])
        assert (refused.error_code, results(refused)) == (ErrorCode.INVALID_REQUEST, [
            (topic, [(0, ErrorCode.INVALID_REQUEST, "Unknown election type 5")])])


def test_partition_reassignments_of_unknown_partitions_and_cancels_with_none_say_what_kafka_says(
        bootstrap: str) -> None:
    """Kafka names the unknown topic or partition, and a cancel with no reassignment in progress has no message
    (klog: "This server does not host this topic-partition." and "No partition reassignment is in progress.")."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        node = wire.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}).brokers[0].node_id
        unknown = f"{topic}-unknown"
        answer = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [
            {"name": unknown, "partitions": [{"partition_index": 0, "replicas": [node]}]},
            {"name": topic, "partitions": [{"partition_index": 9, "replicas": [node]},
                                           {"partition_index": 0, "replicas": None}]}]})
        assert [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                for t in answer.responses] == [
            (unknown, [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {unknown}.")]),
            (topic, [(9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:9."),
                     (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)])]


def test_describe_producers_of_an_unknown_topic_says_the_server_does_not_host_it(bootstrap: str) -> None:
    """Kafka's default message for an unknown topic, none for an unknown partition of a known one (klog: none)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        unknown = f"{topic}-unknown"
        answer = wire.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": unknown, "partition_indexes": [0]}, {"name": topic, "partition_indexes": [9]}]})
        assert [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                for t in answer.topics] == [
            (unknown, [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]),
            (topic, [(9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)])]


def test_metadata_answers_a_topic_named_twice_once_and_flags_an_unknown_internal_name_as_internal(
        bootstrap: str) -> None:
    """Kafka reads Metadata's topic names into a set (klog answered a topic named twice twice), and an error entry
    of an internal topic's name is flagged internal (klog: not)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        answer = wire.request(ApiKey.METADATA, 12, {"allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False, "topics": [
            {"name": n, "topic_id": uuid.UUID(int=0)} for n in (topic, topic, "__transaction_state")]})
        assert sorted((t.name, t.error_code, t.is_internal) for t in answer.topics) == sorted([
            (topic, ErrorCode.NONE, False), ("__transaction_state", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True)])


def test_create_partitions_naming_a_topic_twice_answers_it_once(bootstrap: str) -> None:
    """Kafka's ControllerApis answers a duplicate name once, "Duplicate topic name." (klog: once per entry)."""
    with Wire(bootstrap) as wire:
        topic = wire.topic_with_records()
        answer = wire.request(ApiKey.CREATE_PARTITIONS, 3, {"timeout_ms": 10000, "validate_only": True, "topics": [
            {"name": topic, "count": 3, "assignments": None}, {"name": topic, "count": 4, "assignments": None}]})
        assert [(r.name, r.error_code, r.error_message) for r in answer.results] == [
            (topic, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]


def test_find_coordinator_of_an_unknown_key_type_is_refused_in_kafkas_words(bootstrap: str) -> None:
    """INVALID_REQUEST with the error's default message, in v3 and per key in v4+; a share key (type 2) that is
    not ``group:topicId:partition`` (no group, a topic id that is not a Kafka Uuid, a partition that is not an int)
    with an empty one (klog's first ShareCoordinatorFinder took any topic id, as Kafka's SharePartitionKey does not)."""
    default = ("This most likely occurs because of a request being malformed by the client library or the message "
               "was sent to an incompatible broker. See the broker logs for more details.")
    with Wire(bootstrap) as wire:
        old = wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 9})
        assert (old.error_code, old.error_message, old.node_id) == (ErrorCode.INVALID_REQUEST, default, -1)
        batched = wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 9, "coordinator_keys": ["g", "h"]})
        assert [(c.key, c.error_code, c.error_message, c.node_id) for c in batched.coordinators] == [
            ("g", ErrorCode.INVALID_REQUEST, default, -1), ("h", ErrorCode.INVALID_REQUEST, default, -1)]
        topic_id = "XiBKVgyiQq6SEYcEV_MeGg"
        malformed = ["g:x:0", f":{topic_id}:0", f"g:{topic_id}:x", f"g:{topic_id}:1.5", f"g:{topic_id}", "abc"]
        share = wire.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": malformed})
        assert [(c.key, c.error_code, c.error_message, c.node_id) for c in share.coordinators] == [
            (key, ErrorCode.INVALID_REQUEST, "", -1) for key in malformed]

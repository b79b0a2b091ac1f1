"""The authorization matrix, modelled on Kafka's AuthorizerIntegrationTest: for every API klog implements, a
client with no ACL is refused with Kafka's error (and learns no topic name), and with the ACLs Kafka's request
handlers require it is served. The same matrix runs against a klog-broker process and an Apache Kafka 4.x KRaft
node started from the same properties (StandardAuthorizer, ``allow.everyone.if.no.acl.found=true``).

Until SASL lands every connection is ``User:ANONYMOUS``; the two clients are told apart by host: the admin
connects from 127.0.0.1 and holds ALL on every resource type from that host (wildcard ACLs, which also give every
resource an ACL, so ``allow.everyone.if.no.acl.found`` never applies), the client under test connects from
127.0.0.2 and is given, case by case, ACLs for that host only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.records import encode_batch
from klog.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as Pt, \
    ResourceType as Rt
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PROPERTIES = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true",
              "num.partitions": 1, "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1,
              "auto.create.topics.enable": "false"}
ADMIN_HOST = "127.0.0.1"
CLIENT_HOST = "127.0.0.2"
ANON = "User:ANONYMOUS"
TOPIC = "matrix-topic"
GROUP = "matrix-group"
AUTH_ERRORS = {E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
               E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
#: how long an ACL change may take to reach the broker's authorizer (Kafka applies it from its metadata log)
PROPAGATION_S = 15.0


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory) -> Iterator[tuple[str, str, int]]:
    """(kind, host, port) of a node with the authorizer, the admin's ACLs and a topic with one record."""
    base = tmp_path_factory.mktemp(f"authz-{request.param}")
    if request.param == "klog":
        from klog.testing.process import BrokerProcess

        with BrokerProcess(base, dict(PROPERTIES)) as proc:
            yield from _prepared("klog", proc.host, proc.port)
    else:
        from klog.testing.kafka import KafkaStartError, apache_kafka

        try:
            cm = apache_kafka(base, config=dict(PROPERTIES))
            bootstrap = cm.__enter__()
        except (KafkaStartError, FileNotFoundError) as exc:
            pytest.skip(f"Apache Kafka unavailable: {exc}")
        try:
            host, port = bootstrap.rsplit(":", 1)
            yield from _prepared("kafka", host, int(port))
        finally:
            cm.__exit__(None, None, None)


def _prepared(kind: str, host: str, port: int) -> Iterator[tuple[str, str, int]]:
    with WireClient(host, port, source_host=ADMIN_HOST) as admin:
        creations = [_acl(rtype, "*", Op.ALL, host=ADMIN_HOST)
                     for rtype in (Rt.TOPIC, Rt.GROUP, Rt.CLUSTER, Rt.TRANSACTIONAL_ID)]
        creations[2]["resource_name"] = "kafka-cluster"
        answer = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": creations})
        assert [r.error_code for r in answer.results] == [0, 0, 0, 0], answer
        for name in (TOPIC, TOPIC + "-doomed"):
            _until(lambda: admin.request(ApiKey.CREATE_TOPICS, 5, {
                "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                "timeout_ms": 10_000}).topics[0].error_code in (0, E.TOPIC_ALREADY_EXISTS))
        _until(lambda: _produce(admin, TOPIC).responses[0].partition_responses[0].error_code == 0)
        # a group with a committed offset: ListGroups, DescribeGroups, OffsetFetch have something to show
        # (FindCoordinator makes Kafka create __consumer_offsets)
        _until(lambda: admin.request(ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0}).error_code == 0
               and _commit(admin, GROUP).topics[0].partitions[0].error_code == 0, timeout=60)
    yield kind, host, port


def _until(check: Callable[[], bool], timeout: float = PROPAGATION_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.2)


def _acl(rtype: int, name: str, op: int, *, pattern: int = Pt.LITERAL, host: str = CLIENT_HOST,
         perm: int = Perm.ALLOW) -> dict[str, Any]:
    return {"resource_type": int(rtype), "resource_name": name, "resource_pattern_type": int(pattern),
            "principal": ANON, "host": host, "operation": int(op), "permission_type": int(perm)}


# ---- the requests --------------------------------------------------------------------------------------------

def _produce(c: WireClient, topic: str) -> Any:
    batch = encode_batch([{"key": b"k", "value": b"v"}])
    return c.request(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})


def _commit(c: WireClient, group: str, topic: str = TOPIC) -> Any:
    return c.request(ApiKey.OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                                               "member_id": "", "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0}]}]})


def _topic_id(c: WireClient, topic: str = TOPIC) -> uuid.UUID:
    """The topic's id, asked on an admin connection to the broker ``c`` is connected to."""
    host, port = c.sock.getpeername()[:2]
    with WireClient(host, port, source_host=ADMIN_HOST) as admin:
        return admin.request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}).topics[0].topic_id


def _commit_by_id(c: WireClient, group: str) -> Any:
    """OffsetCommit v10: the topic named by id."""
    return c.request(ApiKey.OFFSET_COMMIT, 10, {"group_id": group, "generation_id_or_member_epoch": -1,
                                                "member_id": "", "topics": [
        {"topic_id": _topic_id(c), "partitions": [{"partition_index": 0, "committed_offset": 0}]}]})


def _fetch_offsets_by_id(c: WireClient, group: str) -> Any:
    """OffsetFetch v10: the topic named by id."""
    return c.request(ApiKey.OFFSET_FETCH, 10, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                           "topics": [{"topic_id": _topic_id(c),
                                                                       "partition_indexes": [0]}]}],
                                               "require_stable": False})


def _group_or_partition_code(response: Any) -> int:
    group = response.groups[0]
    return group.error_code or group.topics[0].partitions[0].error_code


def _fetch(c: WireClient, replica_id: int = -1) -> Any:
    return c.request(ApiKey.FETCH, 12, {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0,
                                        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                                        "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [
                                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                             "current_leader_epoch": -1, "log_start_offset": -1}]}],
                                        "forgotten_topics_data": [], "rack_id": ""})


def _partition_code(response: Any, topics: str = "topics", partitions: str = "partitions") -> int:
    return getattr(response, topics)[0].__dict__[partitions][0].error_code


SHARE_GROUP = "matrix-share-group"


def _share_describe(c: WireClient, all_topics: bool = False) -> Any:
    return c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": SHARE_GROUP, "topics": None if all_topics else [{"topic_name": TOPIC, "partitions": [0]}]}]})


def _share_listed(r: Any) -> Any:
    """The group's error, else the topics answered."""
    return r.groups[0].error_code or [t.topic_name for t in r.groups[0].topics]


def _share_alter(c: WireClient) -> Any:
    return c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": SHARE_GROUP, "topics": [
        {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]})


def _share_delete(c: WireClient) -> Any:
    return c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": SHARE_GROUP,
                                                             "topics": [{"topic_name": TOPIC}]})


def _share_code(r: Any) -> int:
    """The group's error, else the topic's (Delete) or its first partition's (Describe, Alter)."""
    group = r.groups[0] if hasattr(r, "groups") else r
    if group.error_code:
        return group.error_code
    topic = (group.topics if hasattr(group, "topics") else group.responses)[0]
    parts = getattr(topic, "partitions", None)
    return parts[0].error_code if parts else topic.error_code


@dataclass
class Case:
    name: str
    call: Callable[[WireClient], Any]
    #: the error code a response carries (the one that says whether it was authorized)
    code: Callable[[Any], Any]
    #: the refusal without ACLs
    denied: Any
    #: the ACLs that let it through: (resource type, name, operation)
    grants: list[tuple[int, str, int]]
    #: the code once granted (None: anything but an authorization error)
    allowed: Any = E.NONE


CLUSTER = "kafka-cluster"
CASES = [
    Case("Produce", lambda c: _produce(c, TOPIC), lambda r: _partition_code(r, "responses", "partition_responses"),
         E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.WRITE)]),
    Case("Produce to a missing topic", lambda c: _produce(c, "no-such-topic"),
         lambda r: _partition_code(r, "responses", "partition_responses"), E.TOPIC_AUTHORIZATION_FAILED,
         [(Rt.TOPIC, "no-such-topic", Op.WRITE)], allowed=E.UNKNOWN_TOPIC_OR_PARTITION),
    Case("Fetch", _fetch, lambda r: r.responses[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         [(Rt.TOPIC, TOPIC, Op.READ)]),
    Case("Fetch as a replica", lambda c: _fetch(c, replica_id=7), lambda r: r.responses[0].partitions[0].error_code,
         E.TOPIC_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)], allowed=None),
    Case("ListOffsets", lambda c: c.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
         _partition_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DESCRIBE)]),
    Case("Metadata", lambda c: c.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}],
                                                               "allow_auto_topic_creation": False}),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DESCRIBE)]),
    Case("Metadata of a missing topic", lambda c: c.request(ApiKey.METADATA, 12, {
        "topics": [{"name": "no-such-topic"}], "allow_auto_topic_creation": False}),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, "no-such-topic", Op.DESCRIBE)],
         allowed=E.UNKNOWN_TOPIC_OR_PARTITION),
    Case("OffsetForLeaderEpoch", lambda c: c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
        "replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
         _partition_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DESCRIBE)]),
    Case("DescribeTopicPartitions", lambda c: c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": TOPIC}], "response_partition_limit": 100, "cursor": None}),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DESCRIBE)]),
    Case("CreateTopics", lambda c: c.request(ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": "created-" + uuid.uuid4().hex[:8], "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 10_000, "validate_only": True}),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.CREATE)]),
    Case("CreatePartitions", lambda c: c.request(ApiKey.CREATE_PARTITIONS, 2, {
        "topics": [{"name": TOPIC, "count": 2, "assignments": None}], "timeout_ms": 10_000, "validate_only": True}),
         lambda r: r.results[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.ALTER)]),
    Case("DeleteRecords", lambda c: c.request(ApiKey.DELETE_RECORDS, 2, {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000}),
         _partition_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DELETE)]),
    Case("DeleteTopics of a missing topic, with Describe", lambda c: c.request(ApiKey.DELETE_TOPICS, 4, {
        "topic_names": ["no-such-topic"], "timeout_ms": 10_000}),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, "no-such-topic", Op.DESCRIBE)],
         allowed=E.UNKNOWN_TOPIC_OR_PARTITION),
    Case("DeleteTopics", lambda c: c.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [TOPIC + "-doomed"],
                                                                       "timeout_ms": 10_000}),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC + "-doomed", Op.DELETE)]),
    Case("DescribeConfigs of a topic", lambda c: c.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}),
         lambda r: r.results[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS)]),
    Case("IncrementalAlterConfigs of a topic", lambda c: c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "600000"}]}], "validate_only": True}),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.ALTER_CONFIGS)]),
    # KIP-714 client metrics subscriptions: configs of the cluster
    Case("DescribeConfigs of a client metrics subscription", lambda c: c.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 16, "resource_name": "matrix-subscription", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)]),
    Case("IncrementalAlterConfigs of a client metrics subscription", lambda c: c.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 16, "resource_name": "matrix-subscription",
                                                            "configs": [{"name": "metrics", "config_operation": 0,
                                                                         "value": "*"}]}], "validate_only": True}),
         lambda r: r.responses[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)]),
    # KIP-412 log levels (BROKER_LOGGER, 8): configs of the cluster, decided by the broker itself (node id 1)
    Case("DescribeConfigs of a broker's loggers", lambda c: c.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 8, "resource_name": "1", "configuration_keys": ["root"]}],
        "include_synonyms": False, "include_documentation": False}),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)]),
    Case("IncrementalAlterConfigs of a broker's loggers", lambda c: c.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 8, "resource_name": "1", "configs": [
            {"name": "root", "config_operation": 0, "value": "INFO"}]}], "validate_only": True}),
         lambda r: r.responses[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)]),
    Case("ListConfigResources", lambda c: c.request(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [16]}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)]),
    Case("FindCoordinator", lambda c: c.request(ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0}),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE)]),
    Case("JoinGroup", lambda c: c.request(ApiKey.JOIN_GROUP, 5, {
        "group_id": "join-group", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, "join-group", Op.READ)],
         allowed=E.MEMBER_ID_REQUIRED),
    Case("Heartbeat", lambda c: c.request(ApiKey.HEARTBEAT, 3, {"group_id": GROUP, "generation_id": 1,
                                                                 "member_id": "m", "group_instance_id": None}),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.READ)], allowed=None),
    Case("OffsetCommit", lambda c: _commit(c, GROUP), _partition_code, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, GROUP, Op.READ), (Rt.TOPIC, TOPIC, Op.READ)]),
    Case("OffsetCommit without Read on the topic", lambda c: _commit(c, GROUP), _partition_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.READ)], allowed=E.TOPIC_AUTHORIZATION_FAILED),
    Case("OffsetFetch", lambda c: c.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}], "require_stable": False}),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE)]),
    Case("OffsetCommit v10", lambda c: _commit_by_id(c, GROUP), _partition_code, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, GROUP, Op.READ), (Rt.TOPIC, TOPIC, Op.READ)]),
    Case("OffsetCommit v10 without Read on the topic", lambda c: _commit_by_id(c, GROUP), _partition_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.READ)], allowed=E.TOPIC_AUTHORIZATION_FAILED),
    Case("OffsetFetch v10", lambda c: _fetch_offsets_by_id(c, GROUP), _group_or_partition_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE), (Rt.TOPIC, TOPIC, Op.DESCRIBE)]),
    Case("OffsetFetch v10 without Describe on the topic", lambda c: _fetch_offsets_by_id(c, GROUP),
         _group_or_partition_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE)],
         allowed=E.TOPIC_AUTHORIZATION_FAILED),
    Case("DescribeGroups", lambda c: c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP],
                                                                           "include_authorized_operations": True}),
         lambda r: r.groups[0].error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE)]),
    Case("DeleteGroups", lambda c: c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["never-group"]}),
         lambda r: r.results[0].error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, "never-group", Op.DELETE)],
         allowed=None),
    Case("OffsetDelete", lambda c: c.request(ApiKey.OFFSET_DELETE, 0, {"group_id": "never-group", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]}),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, "never-group", Op.DELETE)], allowed=None),
    Case("InitProducerId", lambda c: c.request(ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.IDEMPOTENT_WRITE)]),
    Case("InitProducerId with Write on a topic", lambda c: c.request(ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.TOPIC, TOPIC, Op.WRITE)]),
    Case("InitProducerId with a transactional id", lambda c: c.request(ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": "matrix-tx", "transaction_timeout_ms": 60_000, "producer_id": -1,
        "producer_epoch": -1}),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.WRITE)], allowed=None),
    Case("AddPartitionsToTxn", lambda c: c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "matrix-tx", "v3_and_below_producer_id": 4242,
        "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}),
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.WRITE), (Rt.TOPIC, TOPIC, Op.WRITE)], allowed=None),
    Case("AddPartitionsToTxn without Write on the topic", lambda c: c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "matrix-tx2", "v3_and_below_producer_id": 4242,
        "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}),
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [(Rt.TRANSACTIONAL_ID, "matrix-tx2", Op.WRITE)],
         allowed=E.TOPIC_AUTHORIZATION_FAILED),
    Case("AddOffsetsToTxn", lambda c: c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
        "transactional_id": "matrix-tx", "producer_id": 4242, "producer_epoch": 0, "group_id": GROUP}),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.WRITE), (Rt.GROUP, GROUP, Op.READ)], allowed=None),
    Case("EndTxn", lambda c: c.request(ApiKey.END_TXN, 3, {
        "transactional_id": "matrix-tx", "producer_id": 4242, "producer_epoch": 0, "committed": True}),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.WRITE)], allowed=None),
    Case("TxnOffsetCommit", lambda c: c.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": "matrix-tx", "group_id": GROUP, "producer_id": 4242, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
         _partition_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.WRITE), (Rt.GROUP, GROUP, Op.READ), (Rt.TOPIC, TOPIC, Op.READ)],
         allowed=None),
    Case("DescribeTransactions", lambda c: c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {
        "transactional_ids": ["matrix-tx"]}),
         lambda r: r.transaction_states[0].error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         [(Rt.TRANSACTIONAL_ID, "matrix-tx", Op.DESCRIBE)], allowed=None),
    Case("WriteTxnMarkers", lambda c: c.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": 4242, "producer_epoch": 0, "transaction_result": False,
        "topics": [{"name": TOPIC, "partition_indexes": [0]}], "coordinator_epoch": 0}]}),
         lambda r: r.markers[0].topics[0].partitions[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)], allowed=None),
    Case("DescribeAcls", lambda c: c.request(ApiKey.DESCRIBE_ACLS, 2, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE)]),
    Case("CreateAcls", lambda c: c.request(ApiKey.CREATE_ACLS, 2, {"creations": [
        _acl(Rt.TOPIC, "created-by-client", Op.READ, host="10.9.9.9")]}),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.ALTER)]),
    Case("DeleteAcls", lambda c: c.request(ApiKey.DELETE_ACLS, 2, {"filters": [{
        "resource_type_filter": int(Rt.TOPIC), "resource_name_filter": "created-by-client", "pattern_type_filter": 3,
        "principal_filter": None, "host_filter": "10.9.9.9", "operation": 1, "permission_type": 1}]}),
         lambda r: r.filter_results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.ALTER)]),
    Case("DescribeLogDirs", lambda c: c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE)]),
    Case("ElectLeaders", lambda c: c.request(ApiKey.ELECT_LEADERS, 2, {
        "election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}], "timeout_ms": 5000}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.ALTER)]),
    Case("AlterPartitionReassignments", lambda c: c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 5000, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}]}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.ALTER)]),
    Case("ListPartitionReassignments", lambda c: c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 5000, "topics": None}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE)]),
    Case("DescribeQuorum", lambda c: c.request(ApiKey.DESCRIBE_QUORUM, 1, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE)]),
    # (users named: Kafka 4.3 never answers an unauthorized request for every user, users=null)
    Case("DescribeUserScramCredentials", lambda c: c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {
        "users": [{"name": "nobody"}]}),
         lambda r: (r.error_code, [(x.user, x.error_code) for x in r.results]),
         (E.CLUSTER_AUTHORIZATION_FAILED, [("", E.CLUSTER_AUTHORIZATION_FAILED)]),
         [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE)], allowed=(E.NONE, [("nobody", E.RESOURCE_NOT_FOUND)])),
    Case("AlterUserScramCredentials", lambda c: c.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": []}),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.ALTER)],
         allowed=None),
    Case("DescribeClientQuotas", lambda c: c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [],
                                                                                 "strict": False}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)]),
    Case("AlterClientQuotas", lambda c: c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
        {"entity": [{"entity_type": "user", "entity_name": "nobody"}],
         "ops": [{"key": "producer_byte_rate", "value": 0.0, "remove": True}]}], "validate_only": False}),
         lambda r: r.entries[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         [(Rt.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)]),
    # (validate_only, a level already finalized: nothing changes once allowed)
    Case("UpdateFeatures", lambda c: c.request(ApiKey.UPDATE_FEATURES, 1, {"timeout_ms": 5000, "feature_updates": [
        {"feature": "group.version", "max_version_level": 1, "upgrade_type": 1}], "validate_only": True}),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, [(Rt.CLUSTER, CLUSTER, Op.ALTER)]),
    Case("ConsumerGroupDescribe", lambda c: c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": [GROUP], "include_authorized_operations": False}),
         lambda r: r.groups[0].error_code, E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, GROUP, Op.DESCRIBE)],
         allowed=None),
    # the share offset APIs (KIP-932): the group's ACL, then the topic's (Describe to describe, Read to alter or
    # delete); a refused topic answers TOPIC_AUTHORIZATION_FAILED and the others are served
    Case("DescribeShareGroupOffsets", lambda c: _share_describe(c), _share_code, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, SHARE_GROUP, Op.DESCRIBE), (Rt.TOPIC, TOPIC, Op.DESCRIBE)], allowed=None),
    Case("DescribeShareGroupOffsets without Describe on the topic", lambda c: _share_describe(c), _share_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, SHARE_GROUP, Op.DESCRIBE)], allowed=E.TOPIC_AUTHORIZATION_FAILED),
    Case("AlterShareGroupOffsets", lambda c: _share_alter(c), _share_code, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, SHARE_GROUP, Op.READ), (Rt.TOPIC, TOPIC, Op.READ)], allowed=None),
    Case("AlterShareGroupOffsets without Read on the topic", lambda c: _share_alter(c), _share_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, SHARE_GROUP, Op.READ)], allowed=E.TOPIC_AUTHORIZATION_FAILED),
    # (after the alter above: the group has state on TOPIC) all the group's topics: only the describable ones
    Case("DescribeShareGroupOffsets of all topics", lambda c: _share_describe(c, all_topics=True), _share_listed,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, SHARE_GROUP, Op.DESCRIBE), (Rt.TOPIC, TOPIC, Op.DESCRIBE)],
         allowed=[TOPIC]),
    Case("DescribeShareGroupOffsets of all topics without Describe on the topic",
         lambda c: _share_describe(c, all_topics=True), _share_listed, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, SHARE_GROUP, Op.DESCRIBE)], allowed=[]),
    Case("DeleteShareGroupOffsets", lambda c: _share_delete(c), _share_code, E.GROUP_AUTHORIZATION_FAILED,
         [(Rt.GROUP, SHARE_GROUP, Op.DELETE), (Rt.TOPIC, TOPIC, Op.READ)], allowed=None),
    Case("DeleteShareGroupOffsets without Read on the topic", lambda c: _share_delete(c), _share_code,
         E.GROUP_AUTHORIZATION_FAILED, [(Rt.GROUP, SHARE_GROUP, Op.DELETE)], allowed=E.TOPIC_AUTHORIZATION_FAILED),
]


def _ensure_doomed(admin: WireClient) -> None:
    """The topic the DeleteTopics cases delete exists (an earlier case may have deleted it)."""
    _until(lambda: admin.request(ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": TOPIC + "-doomed", "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 10_000}).topics[0].error_code in (0, E.TOPIC_ALREADY_EXISTS))
    _until(lambda: admin.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC + "-doomed"}],
                                                       "allow_auto_topic_creation": False}).topics[0].error_code == 0)


def _set_grants(admin: WireClient, grants: list[tuple[int, str, int]]) -> None:
    if grants:
        answer = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": [_acl(r, n, o) for r, n, o in grants]})
        assert {r.error_code for r in answer.results} == {0}, answer


def _drop_grants(admin: WireClient) -> None:
    answer = admin.request(ApiKey.DELETE_ACLS, 2, {"filters": [{
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
        "host_filter": CLIENT_HOST, "operation": 1, "permission_type": 1}]})
    assert answer.filter_results[0].error_code == 0, answer


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matrix(server, case: Case) -> None:
    kind, host, port = server
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        if case.name == "DeleteTopics":
            _ensure_doomed(admin)
        try:
            # without ACLs: refused (waiting for an earlier case's ACLs to be gone)
            seen: list[Any] = []

            def refused() -> bool:
                seen.append(case.call(client))
                return case.code(seen[-1]) == case.denied

            try:
                _until(refused)
            except AssertionError:
                raise AssertionError(f"{kind}: expected {case.denied!r}, got {seen[-1]}") from None
            _set_grants(admin, case.grants)

            def served() -> bool:
                seen.append(case.call(client))
                code = case.code(seen[-1])
                return code not in AUTH_ERRORS if case.allowed is None else code == case.allowed

            try:
                _until(served)
            except AssertionError:
                raise AssertionError(f"{kind}: expected {case.allowed!r} once granted, got {seen[-1]}") from None
        finally:
            _drop_grants(admin)


DESCRIBE_ONLY = [c for c in CASES if all(op not in (Op.DESCRIBE,) for _, _, op in c.grants)]


@pytest.mark.parametrize("case", DESCRIBE_ONLY, ids=[c.name for c in DESCRIBE_ONLY])
def test_matrix_with_only_the_implied_describe(server, case: Case) -> None:
    """Describe on the resources an API needs more on (what Read, Write, Delete or Alter would imply) is not
    enough: the same refusal as without any ACL."""
    kind, host, port = server
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        if case.name == "DeleteTopics":
            _ensure_doomed(admin)
        try:
            # with a probe in the same request: once the probe is in force, so are the Describe ACLs
            _set_grants(admin, [(rtype, name, Op.DESCRIBE) for rtype, name, _ in case.grants]
                        + [(Rt.TOPIC, "probe-topic", Op.DESCRIBE)])
            _until(lambda: client.request(ApiKey.METADATA, 12, {
                "topics": [{"name": "probe-topic"}], "allow_auto_topic_creation": False}).topics[0].error_code
                == E.UNKNOWN_TOPIC_OR_PARTITION)
            seen = [case.code(case.call(client)) for _ in range(3)]
            assert seen == [case.denied] * 3, (kind, seen)
        finally:
            _drop_grants(admin)


def test_metadata_lists_only_describable_topics_and_authorized_operations(server) -> None:
    kind, host, port = server
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        try:
            def listed() -> list[str]:
                answer = client.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                              "include_topic_authorized_operations": True})
                return [t.name for t in answer.topics]

            _until(lambda: listed() == [])                   # nothing to describe: no topic named at all
            _set_grants(admin, [(Rt.TOPIC, TOPIC, Op.READ)])
            _until(lambda: listed() == [TOPIC])
            answer = client.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                          "include_topic_authorized_operations": True})
            assert answer.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
            cluster = client.request(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True})
            assert cluster.error_code == 0 and cluster.cluster_authorized_operations == 0
            _set_grants(admin, [(Rt.CLUSTER, CLUSTER, Op.ALTER)])
            _until(lambda: client.request(ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": True}).cluster_authorized_operations
                == (1 << Op.ALTER) | (1 << Op.DESCRIBE))
        finally:
            _drop_grants(admin)


def test_list_groups_shows_only_describable_groups(server) -> None:
    kind, host, port = server
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        try:
            def groups() -> list[str]:
                answer = client.request(ApiKey.LIST_GROUPS, 3, {})
                assert answer.error_code == 0
                return sorted(g.group_id for g in answer.groups)

            _until(lambda: groups() == [])
            _set_grants(admin, [(Rt.GROUP, GROUP, Op.DESCRIBE)])
            _until(lambda: groups() == [GROUP])
            assert [g for g in groups() if g != GROUP] == []
        finally:
            _drop_grants(admin)


def test_deny_wins_and_prefixed_acls(server) -> None:
    kind, host, port = server
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        try:
            code = lambda: _partition_code(_fetch(client), "responses")  # noqa: E731
            answer = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": [
                _acl(Rt.TOPIC, "matrix-", Op.READ, pattern=Pt.PREFIXED)]})
            assert answer.results[0].error_code == 0
            _until(lambda: code() == E.NONE)
            answer = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": [
                _acl(Rt.TOPIC, TOPIC, Op.ALL, perm=Perm.DENY)]})
            assert answer.results[0].error_code == 0
            _until(lambda: code() == E.TOPIC_AUTHORIZATION_FAILED)
        finally:
            _drop_grants(admin)


def test_acl_requests_validation_errors(server) -> None:
    """Kafka's answers to malformed ACLs, item by item; codes it cannot parse (UNKNOWN, 0) close the connection."""
    kind, host, port = server
    valid = _acl(Rt.TOPIC, "t", Op.READ)
    cases = [
        ({**valid, "resource_type": int(Rt.CLUSTER), "resource_name": "other-cluster"},
         (E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")),
        ({**valid, "resource_name": ""}, (E.INVALID_REQUEST, "Invalid empty resource name")),
        ({**valid, "resource_pattern_type": int(Pt.MATCH)}, (E.UNKNOWN_SERVER_ERROR, None)),
        ({**valid, "resource_type": int(Rt.ANY)}, (E.UNKNOWN_SERVER_ERROR, None)),
        ({**valid, "operation": int(Op.ANY)}, (E.UNKNOWN_SERVER_ERROR, None)),
        ({**valid, "permission_type": int(Perm.ANY)}, (E.UNKNOWN_SERVER_ERROR, None)),
        ({**valid, "operation": 99}, (E.INVALID_REQUEST, "Invalid operation UNKNOWN")),
        ({**valid, "principal": "alice"}, (E.INVALID_REQUEST, "Could not parse principal from `alice` (no colon "
                                                              "is present separating the principal type from the "
                                                              "principal name)")),
    ]
    for creation, expected in cases:
        with WireClient(host, port, source_host=ADMIN_HOST) as admin:
            answer = admin.request(ApiKey.CREATE_ACLS, 2, {"creations": [creation]})
            assert (answer.results[0].error_code, answer.results[0].error_message) == expected, (kind, creation)
    every = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    for api_key, body in ((ApiKey.CREATE_ACLS, {"creations": [{**valid, "operation": 0}]}),
                          (ApiKey.DESCRIBE_ACLS, {**every, "resource_type_filter": 0}),
                          (ApiKey.DELETE_ACLS, {"filters": [{**every, "permission_type": 0}]})):
        with WireClient(host, port, source_host=ADMIN_HOST) as admin:
            admin.send(api_key, 2, body)
            with pytest.raises(ConnectionError):
                admin.receive(api_key, 2)


def test_create_topics_answers_a_created_topics_configs_only_to_a_principal_that_may_describe_them(server) -> None:
    """CreateTopics v5+ answers each created topic's configs, partition count and replication factor; a principal
    with Create but not DescribeConfigs on the topic gets TOPIC_AUTHORIZATION_FAILED there instead (the topic is
    created either way)."""
    kind, host, port = server
    suffix = uuid.uuid4().hex[:8]
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        try:
            def create(name: str) -> Any:
                return client.request(ApiKey.CREATE_TOPICS, 7, {
                    "topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}],
                    "timeout_ms": 10_000}).topics[0]

            hidden, shown = f"created-hidden-{suffix}", f"created-shown-{suffix}"
            _set_grants(admin, [(Rt.TOPIC, hidden, Op.CREATE), (Rt.TOPIC, shown, Op.CREATE),
                                (Rt.TOPIC, shown, Op.DESCRIBE_CONFIGS)])
            seen: list[Any] = []
            _until(lambda: seen.append(create(hidden)) or seen[-1].error_code == 0)
            answer = seen[-1]
            assert (answer.topic_config_error_code, answer.num_partitions, answer.replication_factor) == \
                (E.TOPIC_AUTHORIZATION_FAILED, -1, -1), (kind, answer)
            assert not answer.configs, (kind, answer)
            answer = create(shown)
            assert (answer.error_code, answer.topic_config_error_code, answer.num_partitions,
                    answer.replication_factor) == (0, 0, 2, 1), (kind, answer)
            assert any(c.name == "cleanup.policy" for c in answer.configs), (kind, answer)
        finally:
            _drop_grants(admin)


def test_txn_offsets_of_the_readable_topics_join_the_transaction_when_another_topic_is_refused(server) -> None:
    """TxnOffsetCommit v5 (transaction protocol 2) with a topic the principal may not read: that topic answers
    TOPIC_AUTHORIZATION_FAILED, and the readable topic's offset joins the producer's transaction (its group's
    partition added on the server) and counts once the transaction commits. Before, klog wrote the readable
    topic's offset without adding the partition to the transaction, which the coordinator then did not know
    (EndTxn answered INVALID_TXN_STATE) and no marker would close."""
    from test_transactions_v2_wire import committed_offset, end_v5
    from test_transactions_wire import init

    kind, host, port = server
    suffix = uuid.uuid4().hex[:8]
    tid, group = f"matrix-txn-{suffix}", f"matrix-txn-group-{suffix}"
    with WireClient(host, port, source_host=ADMIN_HOST) as admin, \
            WireClient(host, port, source_host=CLIENT_HOST) as client:
        _drop_grants(admin)
        try:
            _set_grants(admin, [(Rt.TRANSACTIONAL_ID, tid, Op.WRITE), (Rt.GROUP, group, Op.READ),
                                (Rt.TOPIC, TOPIC, Op.READ)])
            _until(lambda: client.request(ApiKey.FIND_COORDINATOR, 4, {
                "key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == 0, timeout=60)
            initiated: Any = init(client, tid, version=5)
            assert initiated.error_code == 0, (kind, initiated)
            pid, epoch = initiated.producer_id, initiated.producer_epoch
            seen: list[Any] = []

            def committed() -> bool:
                seen.append(client.request(ApiKey.TXN_OFFSET_COMMIT, 5, {
                    "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                    "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                        {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}
                        for name in (TOPIC, "matrix-unreadable")]}))
                readable = next(t for t in seen[-1].topics if t.name == TOPIC)   # (the refusal comes first)
                return readable.partitions[0].error_code not in (
                    E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
                    E.CONCURRENT_TRANSACTIONS)

            _until(committed, timeout=30)
            codes = {t.name: t.partitions[0].error_code for t in seen[-1].topics}
            assert codes == {TOPIC: E.NONE, "matrix-unreadable": E.TOPIC_AUTHORIZATION_FAILED}, (kind, seen[-1])
            assert end_v5(client, tid, pid, epoch, True)[0] == E.NONE
            assert committed_offset(admin, group, TOPIC) == 5, kind
        finally:
            _drop_grants(admin)

"""Edge cases of the admin APIs (CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs,
AlterConfigs, DescribeConfigs) answered as Apache Kafka 4.3 answers them: the same requests go on the wire to a
klog node and to an Apache Kafka node started from the same properties, and each test checks the error code
(and, where it tells a tool what went wrong, the message) of every item, and that a refused request changes
nothing. Found by a differential probe of both brokers over some 150 edge cases; the cases whose answers already
agreed are kept in the tables at the end, so a change that breaks one shows here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.metadata.config import TOPIC_KEYS
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.timeout(300)

PROPERTIES = {"node.id": 1, "num.partitions": 1, "offsets.topic.num.partitions": 1,
              "offsets.topic.replication.factor": 1, "auto.create.topics.enable": "false"}
ZERO = uuid.UUID(int=0)
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(host, port) of a one-node klog or Apache Kafka cluster, from the same properties."""
    with one_broker(request.param, tmp_path_factory.mktemp(f"admin-{request.param}"), PROPERTIES) as bootstrap:
        host, _, port = bootstrap.rpartition(":")
        until(lambda: _brokers(host, int(port)), "the node's registration")
        yield host, int(port)


def _request(node: tuple[str, int], api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request on a connection of its own (a request one broker leaves unanswered spoils no other)."""
    with WireClient(*node, timeout=30) as wire:
        return wire.request(api_key, version, body)


def _brokers(host: str, port: int) -> bool:
    return bool(_request((host, port), ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).brokers)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(node: tuple[str, int], *topics: dict[str, Any], validate_only: bool = False
            ) -> list[tuple[str, int, str | None]]:
    """CreateTopics v7: (name, error code, message) per result; each topic's fields default to the broker's."""
    items = [{"num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": [], **t} for t in topics]
    answer = _request(node, ApiKey.CREATE_TOPICS, 7, {"topics": items, "timeout_ms": 30_000,
                                                       "validate_only": validate_only})
    return [(t.name, t.error_code, t.error_message) for t in answer.topics]


def _topic(node: tuple[str, int], partitions: int = 1) -> str:
    name = _name("t")
    assert _create(node, {"name": name, "num_partitions": partitions}) == [(name, E.NONE, None)]
    return name


def _partitions(node: tuple[str, int], topic: str) -> int | None:
    """The topic's partition count in the node's metadata; None while it does not know the topic."""
    answer = _request(node, ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": ZERO}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}).topics[0]
    return None if answer.error_code == E.UNKNOWN_TOPIC_OR_PARTITION else len(answer.partitions)


def _delete(node: tuple[str, int], *topics: tuple[str | None, uuid.UUID]) -> list[tuple[str | None, int, str | None]]:
    answer = _request(node, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": n, "topic_id": i} for n, i in topics],
                                                      "timeout_ms": 30_000})
    return [(r.name, r.error_code, r.error_message) for r in answer.responses]


# ---- DeleteTopics ----------------------------------------------------------------------------------------------

def test_delete_topics_naming_a_topic_twice_is_an_invalid_request_that_deletes_nothing(node: tuple[str, int]) -> None:
    """Kafka's ControllerApis.deleteTopics refuses a name the request repeats: one INVALID_REQUEST for the repeat,
    and the topic stays (klog deleted it at its first mention and refused only the second)."""
    topic, other = _topic(node), _topic(node)
    until(lambda: _partitions(node, topic) and _partitions(node, other), "both topics in the metadata")
    # Kafka answers the refusals and the deletions in an order of its own
    assert sorted(_delete(node, (topic, ZERO), (other, ZERO), (topic, ZERO))) == sorted([
        (topic, E.INVALID_REQUEST, "Duplicate topic name."), (other, E.NONE, None)])
    until(lambda: _partitions(node, other) is None, f"{other} deleted")
    assert _partitions(node, topic) == 1


def test_delete_topics_with_neither_a_name_nor_an_id_is_an_invalid_request(node: tuple[str, int]) -> None:
    assert _delete(node, (None, ZERO)) == [(None, E.INVALID_REQUEST, "Neither topic name nor id were specified.")]


# ---- IncrementalAlterConfigs / AlterConfigs: Kafka's ConfigAdminManager.preprocess -----------------------------

Config = tuple[str, int, str | None]


def _alter(node: tuple[str, int], *resources: tuple[int, str, list[Config]], validate_only: bool = False
           ) -> list[tuple[int, str, int, str | None]]:
    """IncrementalAlterConfigs v1, each config (name, operation, value): (type, name, code, message) per resource,
    sorted (Kafka answers the ones its broker refused and the controller's in an order of its own)."""
    answer = _request(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": rtype, "resource_name": rname,
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in configs]}
        for rtype, rname, configs in resources], "validate_only": validate_only})
    return sorted((r.resource_type, r.resource_name, r.error_code, r.error_message) for r in answer.responses)


def _legacy_alter(node: tuple[str, int], *resources: tuple[int, str, list[tuple[str, str | None]]]
                  ) -> list[tuple[int, str, int, str | None]]:
    """AlterConfigs v2 (the whole set of a resource's configs): (type, name, code, message) per resource."""
    answer = _request(node, ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": rtype, "resource_name": rname, "configs": [{"name": k, "value": v} for k, v in configs]}
        for rtype, rname, configs in resources], "validate_only": False})
    return sorted((r.resource_type, r.resource_name, r.error_code, r.error_message) for r in answer.responses)


def _topic_config(node: tuple[str, int], topic: str, key: str) -> tuple[str | None, int]:
    """(value, source) of one of the topic's configs."""
    answer = _request(node, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": [key]}],
        "include_synonyms": False, "include_documentation": False}).results[0]
    assert answer.error_code == E.NONE, answer
    (entry,) = answer.configs
    return entry.value, entry.config_source


def test_incremental_alter_configs_naming_a_resource_twice_refuses_both_and_changes_nothing(
        node: tuple[str, int]) -> None:
    topic, other = _topic(node), _topic(node)
    twice = "Each resource must appear at most once."
    assert _alter(node, (TOPIC, topic, [("retention.ms", SET, "1000")]),
                  (TOPIC, other, [("retention.ms", SET, "3000")]),
                  (TOPIC, topic, [("retention.ms", SET, "2000")])) == sorted([
        (TOPIC, topic, E.INVALID_REQUEST, twice), (TOPIC, topic, E.INVALID_REQUEST, twice),
        (TOPIC, other, E.NONE, None)])
    until(lambda: _topic_config(node, other, "retention.ms")[0] == "3000", f"{other}'s new retention.ms")
    assert _topic_config(node, topic, "retention.ms") == ("604800000", 5)   # the default (DEFAULT_CONFIG)


def test_alter_configs_naming_a_key_twice_or_a_null_value_is_an_invalid_request(node: tuple[str, int]) -> None:
    topic = _topic(node)
    twice = [(TOPIC, topic, E.INVALID_REQUEST, "Error due to duplicate config keys")]
    assert _alter(node, (TOPIC, topic, [("retention.ms", SET, "1000"), ("retention.ms", DELETE, None)])) == twice
    assert _legacy_alter(node, (TOPIC, topic, [("retention.ms", "1000"), ("retention.ms", "2000")])) == twice
    null = [(TOPIC, topic, E.INVALID_REQUEST, "Null value not supported for : retention.ms, cleanup.policy")]
    assert _alter(node, (TOPIC, topic, [("retention.ms", SET, None), ("segment.ms", DELETE, None),
                                        ("cleanup.policy", APPEND, None)])) == null
    assert _legacy_alter(node, (TOPIC, topic, [("retention.ms", None), ("cleanup.policy", None)])) == null
    assert _topic_config(node, topic, "retention.ms") == ("604800000", 5)


def test_a_broker_resource_of_another_broker_id_is_an_invalid_request(node: tuple[str, int]) -> None:
    """``kafka-configs --entity-type brokers --entity-name 7`` on broker 1: Kafka's broker refuses it before the
    controller sees it, whatever the configs (klog answered INVALID_CONFIG for a config it keeps static)."""
    other = [(BROKER, "7", E.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 7")]
    assert _alter(node, (BROKER, "7", [("log.cleaner.threads", SET, "2")])) == other
    assert _alter(node, (BROKER, "7", [("log.retention.ms", SET, "100000")])) == other
    assert _legacy_alter(node, (BROKER, "7", [("log.retention.ms", "100000")])) == other
    assert _alter(node, (BROKER, "one", [("log.retention.ms", SET, "100000")])) == [
        (BROKER, "one", E.INVALID_REQUEST, "Node id must be an integer, but it is: one")]


def test_a_read_only_or_invalid_broker_config_is_an_invalid_request(node: tuple[str, int]) -> None:
    """Kafka's DynamicBrokerConfig refuses what it cannot change and a bad value with INVALID_REQUEST
    (KAFKA-13609 keeps that code), on one broker and on the cluster default."""
    for broker in ("1", ""):
        for key in ("node.id", "log.dirs", "process.roles"):
            (answer,) = _alter(node, (BROKER, broker, [(key, SET, "5")]))
            # klog adds which of its broker configs it does change
            assert answer[2] == E.INVALID_REQUEST, answer
            assert str(answer[3]).startswith(f"Cannot update these configs dynamically: [{key}]"), answer
        (answer,) = _alter(node, (BROKER, broker, [("log.retention.ms", SET, "abc")]))
        assert answer[2] == E.INVALID_REQUEST, answer   # what is wrong with the value in klog's words
        assert str(answer[3]).startswith("Invalid value abc for configuration log.retention.ms: "), answer


# ---- CreateTopics ----------------------------------------------------------------------------------------------

def test_create_topics_with_a_null_config_value_or_a_partition_assigned_twice_is_refused(
        node: tuple[str, int]) -> None:
    """Kafka's ReplicationControlManager refuses both (klog dropped the null config and kept the last of the two
    assignments, creating the topic)."""
    null, twice = _name("null"), _name("twice")
    assert _create(node, {"name": null, "configs": [{"name": "retention.ms", "value": None}]}) == [
        (null, E.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms")]
    assert _create(node, {"name": twice, "assignments": [{"partition_index": 0, "broker_ids": [1]},
                                                         {"partition_index": 1, "broker_ids": [1]},
                                                         {"partition_index": 0, "broker_ids": [1]}]}) == [
        (twice, E.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0")]
    assert _partitions(node, null) is None and _partitions(node, twice) is None


# ---- DescribeConfigs -------------------------------------------------------------------------------------------

def _describe(node: tuple[str, int], rtype: int, rname: str, keys: list[str] | None
              ) -> tuple[int, str | None, list[str]]:
    """DescribeConfigs v4 of one resource: (code, message, the names of the configs described)."""
    answer = _request(node, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rtype, "resource_name": rname, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False}).results[0]
    return answer.error_code, answer.error_message or None, sorted(c.name for c in answer.configs)


def test_describe_configs_with_an_empty_key_list_describes_every_config(node: tuple[str, int]) -> None:
    """Kafka's ConfigHelper reads an empty configuration_keys as a null one: every config (klog described none)."""
    topic = _topic(node)
    every = _describe(node, TOPIC, topic, None)
    assert every[0] == E.NONE and {"cleanup.policy", "retention.ms", "segment.bytes"} <= set(every[2]), every
    assert _describe(node, TOPIC, topic, []) == every
    assert _describe(node, BROKER, "1", [])[2] == _describe(node, BROKER, "1", None)[2]


@pytest.mark.parametrize(("name", "message"), [
    ("a/b", "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' "
            "and '-'"),
    ("t\n", "Topic name is invalid: 't\n' contains one or more characters other than ASCII alphanumerics, '.', "
             "'_' and '-'"),
    ("..", "Topic name is invalid: '..' is not allowed"),
    ("", "Topic name is invalid: the empty string is not allowed"),
    ("x" * 250, f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max allowed length 249"),
])
def test_an_invalid_topic_name_is_answered_invalid_topic_exception_with_kafkas_words(
        node: tuple[str, int], name: str, message: str) -> None:
    """DescribeConfigs of a topic whose name cannot exist: INVALID_TOPIC_EXCEPTION (klog: UNKNOWN_TOPIC_OR_PARTITION);
    CreateTopics of it says why in Kafka's words (Topic.validate)."""
    assert _describe(node, TOPIC, name, None) == (E.INVALID_TOPIC_EXCEPTION, message, [])
    assert _create(node, {"name": name}) == [(name, E.INVALID_TOPIC_EXCEPTION, message)]


def test_the_default_topic_resource_is_an_invalid_request_and_deleting_an_unknown_key_is_no_error(
        node: tuple[str, int]) -> None:
    """Kafka's controller: a topic resource named "" is INVALID_REQUEST (klog: UNKNOWN_TOPIC_OR_PARTITION); a
    DELETE of a key no topic config has removes nothing and is no error (klog: INVALID_CONFIG), a SET of it is."""
    topic = _topic(node)
    assert _alter(node, (TOPIC, "", [("retention.ms", SET, "1000")])) == [
        (TOPIC, "", E.INVALID_REQUEST, "Default topic resources are not allowed.")]
    assert _legacy_alter(node, (TOPIC, "", [("retention.ms", "1000")])) == [
        (TOPIC, "", E.INVALID_REQUEST, "Default topic resources are not allowed.")]
    assert _alter(node, (TOPIC, topic, [("no.such.config", DELETE, None), ("retention.ms", SET, "5000")])) == [
        (TOPIC, topic, E.NONE, None)]
    until(lambda: _topic_config(node, topic, "retention.ms")[0] == "5000", f"{topic}'s new retention.ms")
    assert _alter(node, (TOPIC, topic, [("no.such.config", SET, "1")])) == [
        (TOPIC, topic, E.INVALID_CONFIG, "Unknown topic config name: no.such.config")]


# ---- the cases whose codes already agreed ----------------------------------------------------------------------

def _assign(*replicas: list[int], first: int = 0) -> list[dict[str, Any]]:
    return [{"partition_index": first + i, "broker_ids": r} for i, r in enumerate(replicas)]


def _configs(**configs: str) -> list[dict[str, str]]:
    return [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]


CREATE_CASES: dict[str, tuple[dict[str, Any], int]] = {
    "no partitions": ({"num_partitions": 0}, E.INVALID_PARTITIONS),
    "negative partitions": ({"num_partitions": -2}, E.INVALID_PARTITIONS),
    "replication factor 0": ({"num_partitions": 1, "replication_factor": 0}, E.INVALID_REPLICATION_FACTOR),
    "replication factor -2": ({"num_partitions": 1, "replication_factor": -2}, E.INVALID_REPLICATION_FACTOR),
    "more replicas than brokers": ({"num_partitions": 1, "replication_factor": 3}, E.INVALID_REPLICATION_FACTOR),
    "the defaults": ({}, E.NONE),
    "a broker twice": ({"assignments": _assign([1, 1])}, E.INVALID_REPLICA_ASSIGNMENT),
    "an unknown broker": ({"assignments": _assign([7])}, E.INVALID_REPLICA_ASSIGNMENT),
    "an empty replica list": ({"assignments": _assign([1], [])}, E.INVALID_REPLICA_ASSIGNMENT),
    "assignments from partition 1": ({"assignments": _assign([1], first=1)}, E.INVALID_REPLICA_ASSIGNMENT),
    "assignments with a gap": ({"assignments": [*_assign([1]), *_assign([1], first=2)]},
                               E.INVALID_REPLICA_ASSIGNMENT),
    "assignments and partitions": ({"num_partitions": 1, "assignments": _assign([1])}, E.INVALID_REQUEST),
    "assignments and replicas": ({"replication_factor": 1, "assignments": _assign([1])}, E.INVALID_REQUEST),
    "assignments": ({"assignments": _assign([1], [1])}, E.NONE),
    "an unknown config": ({"configs": _configs(no_such_config="1")}, E.INVALID_CONFIG),
    "a broker config": ({"configs": _configs(log_retention_ms="1000")}, E.INVALID_CONFIG),
    "retention.ms=abc": ({"configs": _configs(retention_ms="abc")}, E.INVALID_CONFIG),
    "retention.ms=-2": ({"configs": _configs(retention_ms="-2")}, E.INVALID_CONFIG),
    "min.insync.replicas=0": ({"configs": _configs(min_insync_replicas="0")}, E.INVALID_CONFIG),
    "cleanup.policy=bogus": ({"configs": _configs(cleanup_policy="bogus")}, E.INVALID_CONFIG),
    "compression.type=zstd2": ({"configs": _configs(compression_type="zstd2")}, E.INVALID_CONFIG),
    "message.timestamp.type=Foo": ({"configs": _configs(message_timestamp_type="Foo")}, E.INVALID_CONFIG),
    "max.message.bytes=-1": ({"configs": _configs(max_message_bytes="-1")}, E.INVALID_CONFIG),
}


@pytest.mark.parametrize("case", CREATE_CASES)
def test_create_topics_answers_each_edge_case_with_kafkas_code(node: tuple[str, int], case: str) -> None:
    fields, code = CREATE_CASES[case]
    name = _name("c")
    ((_, got, message),) = _create(node, {"name": name, **fields})
    assert got == code, message
    if code:
        assert message and _partitions(node, name) is None


def test_create_topics_refuses_an_existing_or_colliding_name_a_repeat_and_validates_only(
        node: tuple[str, int]) -> None:
    topic = _topic(node)
    assert _create(node, {"name": topic})[0][1] == E.TOPIC_ALREADY_EXISTS
    assert _create(node, {"name": topic}, validate_only=True)[0][1] == E.TOPIC_ALREADY_EXISTS
    dotted = _name("a.b")
    assert _create(node, {"name": dotted})[0][1] == E.NONE
    assert _create(node, {"name": dotted.replace(".", "_")}) == [
        (dotted.replace(".", "_"), E.INVALID_TOPIC_EXCEPTION,
         f"Topic '{dotted.replace('.', '_')}' collides with existing topic: {dotted}")]
    twice, checked = _name("r"), _name("v")
    assert {code for _, code, _ in _create(node, {"name": twice}, {"name": twice})} == {
        E.INVALID_REQUEST}   # Kafka answers it once, klog for each mention
    assert _create(node, {"name": checked, "num_partitions": 3}, validate_only=True) == [
        (checked, E.NONE, None)]
    assert _partitions(node, checked) is None and _partitions(node, twice) is None


def _grow(node: tuple[str, int], *topics: dict[str, Any], validate_only: bool = False) -> list[tuple[str, int]]:
    answer = _request(node, ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"assignments": None, **t} for t in topics],
                                                          "timeout_ms": 30_000, "validate_only": validate_only})
    return [(r.name, r.error_code) for r in answer.results]


def test_create_partitions_answers_each_edge_case_with_kafkas_code(node: tuple[str, int]) -> None:
    topic = _topic(node, partitions=2)
    refused = {
        "fewer": ({"count": 1}, E.INVALID_PARTITIONS), "as many": ({"count": 2}, E.INVALID_PARTITIONS),
        "none": ({"count": 0}, E.INVALID_PARTITIONS),
        "too few assignments": ({"count": 4, "assignments": [{"broker_ids": [1]}]}, E.INVALID_REPLICA_ASSIGNMENT),
        "an unknown broker": ({"count": 3, "assignments": [{"broker_ids": [9]}]}, E.INVALID_REPLICA_ASSIGNMENT),
        "a broker twice": ({"count": 3, "assignments": [{"broker_ids": [1, 1]}]}, E.INVALID_REPLICA_ASSIGNMENT),
        "no replicas": ({"count": 3, "assignments": [{"broker_ids": []}]}, E.INVALID_REPLICA_ASSIGNMENT),
    }
    for case, (fields, code) in refused.items():
        assert _grow(node, {"name": topic, **fields}) == [(topic, code)], case
    missing = _name("none")
    assert _grow(node, {"name": missing, "count": 3}) == [(missing, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert {code for _, code in _grow(node, {"name": topic, "count": 3}, {"name": topic, "count": 4})} == {
        E.INVALID_REQUEST}
    assert _grow(node, {"name": topic, "count": 5}, validate_only=True) == [(topic, E.NONE)]
    until(lambda: _partitions(node, topic) == 2, f"{topic} in the metadata")   # validate_only added none
    assert _grow(node, {"name": topic, "count": 3}) == [(topic, E.NONE)]
    until(lambda: _partitions(node, topic) == 3, f"{topic}'s third partition")


def test_delete_topics_of_an_unknown_name_or_id(node: tuple[str, int]) -> None:
    missing = _name("gone")
    assert [code for _, code, _ in _delete(node, (missing, ZERO))] == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert [code for _, code, _ in _delete(node, (None, uuid.uuid4()))] == [E.UNKNOWN_TOPIC_ID]


ALTER_CASES: dict[str, tuple[int, str, list[Config], int]] = {
    "an unknown key": (TOPIC, "", [("no.such.config", SET, "1")], E.INVALID_CONFIG),
    "retention.ms=abc": (TOPIC, "", [("retention.ms", SET, "abc")], E.INVALID_CONFIG),
    "min.insync.replicas=0": (TOPIC, "", [("min.insync.replicas", SET, "0")], E.INVALID_CONFIG),
    "cleanup.policy=bogus": (TOPIC, "", [("cleanup.policy", SET, "bogus")], E.INVALID_CONFIG),
    "compression.type=zstd2": (TOPIC, "", [("compression.type", SET, "zstd2")], E.INVALID_CONFIG),
    "APPEND bogus to cleanup.policy": (TOPIC, "", [("cleanup.policy", APPEND, "bogus")], E.INVALID_CONFIG),
    "APPEND to a number": (TOPIC, "", [("retention.ms", APPEND, "1000")], E.INVALID_CONFIG),
    "SUBTRACT from a number": (TOPIC, "", [("retention.ms", SUBTRACT, "1000")], E.INVALID_CONFIG),
    "DELETE of an unset key": (TOPIC, "", [("segment.ms", DELETE, None)], E.NONE),
    "an unknown topic": (TOPIC, "no-such-topic", [("retention.ms", SET, "1000")], E.UNKNOWN_TOPIC_OR_PARTITION),
    "an unknown resource type": (99, "x", [("a", SET, "1")], E.INVALID_REQUEST),
    "resource type 0": (0, "x", [("a", SET, "1")], E.INVALID_REQUEST),
    "another broker's logger": (8, "7", [("kafka", SET, "INFO")], E.INVALID_REQUEST),
    "a broker id that is no number": (BROKER, "abc", [("log.retention.ms", SET, "1")], E.INVALID_REQUEST),
}


@pytest.mark.parametrize("case", ALTER_CASES)
def test_incremental_alter_configs_answers_each_edge_case_with_kafkas_code(node: tuple[str, int], case: str) -> None:
    rtype, rname, configs, code = ALTER_CASES[case]
    topic = _topic(node)
    ((_, _, got, message),) = _alter(node, (rtype, rname or topic, configs))
    assert got == code, message
    if rtype == TOPIC and not rname and configs[0][0] in TOPIC_KEYS:
        assert _topic_config(node, topic, configs[0][0])[1] != 1   # not the topic's own (TOPIC_CONFIG)


def test_cleanup_policy_takes_append_and_subtract_and_validate_only_changes_nothing(node: tuple[str, int]) -> None:
    topic = _topic(node)
    policy = "cleanup.policy"
    assert _alter(node, (TOPIC, topic, [("retention.ms", SET, "7777")]), validate_only=True)[0][2] == E.NONE
    assert _alter(node, (TOPIC, topic, [(policy, APPEND, "compact")]))[0][2] == E.NONE
    until(lambda: _topic_config(node, topic, policy)[0] == "delete,compact", "the appended policy")
    assert _alter(node, (TOPIC, topic, [(policy, APPEND, "compact")]))[0][2] == E.NONE   # already there
    assert _alter(node, (TOPIC, topic, [(policy, SUBTRACT, "delete")]))[0][2] == E.NONE
    until(lambda: _topic_config(node, topic, policy)[0] == "compact", "the subtracted policy")
    assert _topic_config(node, topic, "retention.ms") == ("604800000", 5)


def test_the_cluster_default_broker_resource_describes_only_its_dynamic_defaults(node: tuple[str, int]) -> None:
    """``kafka-configs --describe --entity-type brokers --entity-default``: Kafka's ConfigHelper lists the dynamic
    defaults set on "" (DYNAMIC_DEFAULT_BROKER_CONFIG), not every broker config (klog listed them all, as for the
    node's own id)."""
    key = "log.index.interval.bytes"   # a default that changes no other test's answers

    def described() -> dict[str, tuple[str | None, int]]:
        answer = _request(node, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": BROKER, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}).results[0]
        assert answer.error_code == E.NONE, answer
        return {c.name: (c.value, c.config_source) for c in answer.configs}

    assert _alter(node, (BROKER, "", [(key, SET, "8192")])) == [(BROKER, "", E.NONE, None)]
    try:
        found = until(lambda: (d := described()).get(key) == ("8192", 3) and d, f"the cluster default of {key}")
        assert "node.id" not in found and "log.dirs" not in found, sorted(found)
        assert {source for _, source in found.values()} == {3}, found
    finally:
        assert _alter(node, (BROKER, "", [(key, DELETE, None)])) == [(BROKER, "", E.NONE, None)]
    until(lambda: key not in described(), f"the cluster default of {key} deleted")


def test_describe_configs_of_another_brokers_loggers_is_an_invalid_request(node: tuple[str, int]) -> None:
    """Kafka's ConfigHelper answers a BROKER_LOGGER resource of another id INVALID_REQUEST (klog: none, no error)."""
    assert _describe(node, 8, "7", None) == (
        E.INVALID_REQUEST, "Unexpected broker id, expected 1 but received 7", [])
    assert _describe(node, 8, "1", None)[0] == E.NONE


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_of_more_than_10000_partitions_in_one_request_is_a_policy_violation(
        node: tuple[str, int], validate_only: bool) -> None:
    """Kafka's controller bounds the partitions one CreateTopics request makes (MAX_PARTITIONS_PER_BATCH, 10000,
    over all its topics): every topic of a request past it is refused POLICY_VIOLATION (klog bounded each topic
    alone, INVALID_PARTITIONS, and made two topics of 6000 partitions each)."""
    big, bigger, small = _name("big"), _name("bigger"), _name("small")
    refused = "Excessively large number of partitions per request."
    assert _create(node, {"name": big, "num_partitions": 6000}, {"name": bigger, "num_partitions": 6000},
                   {"name": small, "num_partitions": 1}, validate_only=validate_only) == [
        (big, E.POLICY_VIOLATION, refused), (bigger, E.POLICY_VIOLATION, refused),
        (small, E.POLICY_VIOLATION, refused)]
    assert _create(node, {"name": big, "num_partitions": 1_000_000}, validate_only=validate_only) == [
        (big, E.POLICY_VIOLATION, refused)]
    assert _partitions(node, big) is None and _partitions(node, small) is None


def test_create_topics_and_create_partitions_say_why_in_kafkas_words(node: tuple[str, int]) -> None:
    """The messages a tool prints (``kafka-topics --create`` / ``--alter``), as Kafka 4.3's controller words them."""
    said = {
        "Number of partitions was set to an invalid non-positive value.": {"num_partitions": 0},
        "Replication factor must be larger than 0, or -1 to use the default value.": {"replication_factor": 0},
        "The manual partition assignment includes the broker 1 more than once.": {"assignments": _assign([1, 1])},
        "The manual partition assignment includes broker 7, but no such broker is registered.": {
            "assignments": _assign([7])},
        "The manual partition assignment includes an empty replica list.": {"assignments": _assign([1], [])},
        "partitions should be a consecutive 0-based integer sequence": {"assignments": _assign([1], first=1)},
        "A manual partition assignment was specified, but numPartitions was not set to -1.": {
            "num_partitions": 1, "assignments": _assign([1])},
        "A manual partition assignment was specified, but replication factor was not set to -1.": {
            "replication_factor": 1, "assignments": _assign([1])},
    }
    for message, fields in said.items():
        name = _name("m")
        assert _create(node, {"name": name, **fields})[0][2] == message, fields
    twice = _name("d")
    assert {message for _, _, message in _create(node, {"name": twice}, {"name": twice})} == {
        "Duplicate topic name."}
    topic, missing = _topic(node, partitions=2), _name("gone")

    def grown(*topics: dict[str, Any]) -> set[tuple[int, str | None]]:
        answer = _request(node, ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"assignments": None, **t} for t in topics],
                                                              "timeout_ms": 30_000, "validate_only": False})
        return {(r.error_code, r.error_message or None) for r in answer.results}

    assert grown({"name": topic, "count": 1}) == {
        (E.INVALID_PARTITIONS, f"The topic {topic} currently has 2 partition(s); 1 would not be an increase.")}
    assert grown({"name": topic, "count": 2}) == {(E.INVALID_PARTITIONS, "Topic already has 2 partition(s).")}
    assert grown({"name": topic, "count": 4, "assignments": [{"broker_ids": [1]}]}) == {
        (E.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were "
                                       "specified.")}
    assert grown({"name": missing, "count": 2}) == {(E.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert grown({"name": topic, "count": 3}, {"name": topic, "count": 3}) == {
        (E.INVALID_REQUEST, "Duplicate topic name.")}


# ---- found by the differential probe of 2026-12-07 (each failed on klog before) --------------------------------

def test_delete_topics_naming_a_topic_by_both_name_and_id_is_an_invalid_request_that_deletes_nothing(
        node: tuple[str, int]) -> None:
    """Kafka's ControllerApis.deleteTopics refuses an item with a name and an id (klog deleted the named topic)."""
    topic = _topic(node)
    until(lambda: _partitions(node, topic), f"{topic} in the metadata")
    assert _delete(node, (topic, uuid.uuid4())) == [
        (topic, E.INVALID_REQUEST, "You may not specify both topic name and topic id.")]
    assert _partitions(node, topic) == 1


@pytest.mark.parametrize("broker", ["1", ""])
def test_append_and_subtract_on_broker_configs_as_kafkas_brokers_answer_them(node: tuple[str, int], broker: str
                                                                             ) -> None:
    """An APPEND to a broker's list config starts from its default (klog closed the connection: it looked the
    broker key up among the topic configs); on a config that is no list Kafka's broker refuses it in its words
    (klog: the controller's words for topics)."""
    assert _alter(node, (BROKER, broker, [("log.cleanup.policy", APPEND, "compact")]), validate_only=True) == [
        (BROKER, broker, E.NONE, None)]
    assert _alter(node, (BROKER, broker, [("log.cleanup.policy", SUBTRACT, "delete")]), validate_only=True) == [
        (BROKER, broker, E.NONE, None)]
    for op, verb in ((APPEND, "append"), (SUBTRACT, "subtract")):
        assert _alter(node, (BROKER, broker, [("log.retention.ms", op, "1")]), validate_only=True) == [
            (BROKER, broker, E.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: log.retention.ms")]


#: (configs, Kafka 4.3.1's message) of topic configs its controller refuses (INVALID_CONFIG): ConfigDef's parse
#: and validators, LogConfig.validate's checks of the values together, every name before any value
TOPIC_CONFIG_REFUSALS: list[tuple[dict[str, str], str]] = [
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": ""}, "Invalid value  for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "99999999999999999999"},
     "Invalid value 99999999999999999999 for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"max.message.bytes": "2147483648"},
     "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT"),
    ({"segment.index.bytes": "3"}, "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"),
    ({"min.insync.replicas": "0"}, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ({"compression.gzip.level": "0"}, "Invalid value 0 for configuration compression.gzip.level: Value must be "
                                      "between 1 and 9 or equal to -1"),
    ({"compression.lz4.level": "18"},
     "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
    ({"min.cleanable.dirty.ratio": "1.1"},
     "Invalid value 1.1 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"min.cleanable.dirty.ratio": " 5 "},
     "Invalid value 5.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or "
                             "false"),
    ({"compression.type": "GZIP"}, "Invalid value GZIP for configuration compression.type: String must be one of: "
                                   "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"message.timestamp.type": "createtime"}, "Invalid value createtime for configuration message.timestamp.type: "
                                               "String must be one of: CreateTime, LogAppendTime"),
    ({"cleanup.policy": "compact,Delete"},
     "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"cleanup.policy": "compact,"}, "Configuration 'cleanup.policy' values must not be empty."),
    ({"leader.replication.throttled.replicas": "0:1,x"},
     "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
     "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: "
     "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ({"local.retention.ms": "-3"}, "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
    ({"local.retention.bytes": "-3"},
     "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2"),
    ({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"},
     "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (10)"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                        "configured with remote log storage."),
    ({"retention.ms": "abc", "no.such.config": "1"}, "Unknown topic config name: no.such.config"),
]


@pytest.mark.parametrize(("configs", "message"), TOPIC_CONFIG_REFUSALS, ids=[
    ",".join(f"{k}={v}" for k, v in c.items()) for c, _ in TOPIC_CONFIG_REFUSALS])
def test_topic_configs_kafka_refuses_are_refused_in_its_words(node: tuple[str, int], configs: dict[str, str],
                                                              message: str) -> None:
    """CreateTopics, IncrementalAlterConfigs and AlterConfigs of the same configs answer Kafka's message (klog:
    "config 'retention.ms': expected an integer, got 'abc'" and the like, and it took an empty cleanup.policy entry,
    local retentions below -2, a min compaction lag above the max, and remote storage it does not have)."""
    name, topic = _name("cfg"), _topic(node)
    assert _create(node, {"name": name, "configs": [{"name": k, "value": v} for k, v in configs.items()]},
                   validate_only=True) == [(name, E.INVALID_CONFIG, message)]
    assert _alter(node, (TOPIC, topic, [(k, SET, v) for k, v in configs.items()])) == [
        (TOPIC, topic, E.INVALID_CONFIG, message)]
    assert _legacy_alter(node, (TOPIC, topic, list(configs.items()))) == [(TOPIC, topic, E.INVALID_CONFIG, message)]
    assert _topic_config(node, topic, "retention.ms") == ("604800000", 5)


def test_create_topics_checks_configs_then_replication_factor_then_partitions(node: tuple[str, int]) -> None:
    """Kafka's ReplicationControlManager checks the configs of every new topic first, the replication factor before
    the partition count, and a manual assignment's replicas sorted, each registered before named once (klog: the
    partitions, then the configs; duplicates before unknown brokers)."""
    unknown = [{"name": "no.such.config", "value": "1"}]
    name = _name("o")
    assert _create(node, {"name": name, "num_partitions": 0, "configs": unknown}, validate_only=True) == [
        (name, E.INVALID_CONFIG, "Unknown topic config name: no.such.config")]
    assert _create(node, {"name": name, "assignments": _assign([7]), "configs": unknown}, validate_only=True) == [
        (name, E.INVALID_CONFIG, "Unknown topic config name: no.such.config")]
    assert _create(node, {"name": name, "num_partitions": 0, "replication_factor": 0}, validate_only=True) == [
        (name, E.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default "
                                             "value.")]
    assert _create(node, {"name": name, "assignments": _assign([7, 7])}, validate_only=True) == [
        (name, E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 7, but no such broker "
                                             "is registered.")]
    assert _create(node, {"name": name, "assignments": _assign([1], [1, 1])}, validate_only=True) == [
        (name, E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 1 more than once.")]
    assert _create(node, {"name": name, "num_partitions": 2, "replication_factor": 1,
                          "assignments": _assign([1])}, validate_only=True) == [
        (name, E.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set "
                                  "to -1.")]


def test_create_partitions_with_an_empty_assignment_list_is_refused(node: tuple[str, int]) -> None:
    """Kafka reads an empty (not null) assignment list as one naming no partition (klog placed the new one)."""
    topic = _topic(node)
    answer = _request(node, ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 2, "assignments": []}],
                                                          "timeout_ms": 30_000, "validate_only": False})
    assert [(r.error_code, r.error_message) for r in answer.results] == [
        (E.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 1 additional partition(s), but only 0 assignment(s) were "
                                       "specified.")]
    assert _partitions(node, topic) == 1


def test_altering_the_configs_of_an_invalid_or_unknown_topic_checks_name_then_configs(node: tuple[str, int]) -> None:
    """Kafka's controller checks the topic name, then the configs, then whether the topic exists (klog: unknown
    topic for all three)."""
    assert _alter(node, (TOPIC, "a/b", [("retention.ms", SET, "1")])) == [
        (TOPIC, "a/b", E.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'a/b' contains one or more characters "
                                                  "other than ASCII alphanumerics, '.', '_' and '-'")]
    missing = _name("gone")
    assert _alter(node, (TOPIC, missing, [("retention.ms", SET, "abc")])) == [
        (TOPIC, missing, E.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type "
                                           "LONG")]
    assert _alter(node, (TOPIC, missing, [("retention.ms", SET, "1")]))[0][2] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_elect_leaders_answers_each_topic_item_of_the_request_in_its_order(node: tuple[str, int]) -> None:
    """Kafka answers one result per topic item, one naming no partition too (klog grouped the partitions by topic
    and left out a topic whose item named none)."""
    topic, missing = _topic(node), _name("gone")
    until(lambda: _partitions(node, topic), f"{topic} in the metadata")
    answer = _request(node, ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 10_000, "topic_partitions": [
        {"topic": topic, "partitions": []}, {"topic": missing, "partitions": []}, {"topic": topic, "partitions": [0]}]})
    assert (answer.error_code, [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
                                for r in answer.replica_election_results]) == (E.NONE, [
        (topic, []), (missing, []), (topic, [(0, E.ELECTION_NOT_NEEDED)])])


@pytest.mark.parametrize("rtype", [0, 1, 3, 99])
def test_altering_configs_of_an_unknown_resource_type_says_so_in_kafkas_words(node: tuple[str, int], rtype: int
                                                                              ) -> None:
    """Kafka's broker: "Unknown resource type N" (klog: "Unsupported resource type N")."""
    refused = [(rtype, "x", E.INVALID_REQUEST, f"Unknown resource type {rtype}")]
    assert _alter(node, (rtype, "x", [("a", SET, "1")]), validate_only=True) == refused
    assert _legacy_alter(node, (rtype, "x", [("a", "1")])) == refused


def test_appending_an_empty_entry_to_cleanup_policy_is_refused(node: tuple[str, int]) -> None:
    """Kafka splits the value as Java's String.split (trailing empty entries dropped) and appends an empty entry,
    which its list validator refuses (klog dropped every empty entry and answered NONE)."""
    topic = _topic(node)
    for value in ("", ",compact"):
        assert _alter(node, (TOPIC, topic, [("cleanup.policy", APPEND, value)]), validate_only=True) == [
            (TOPIC, topic, E.INVALID_CONFIG, "Configuration 'cleanup.policy' values must not be empty.")]
    for value in ("compact,", ","):
        assert _alter(node, (TOPIC, topic, [("cleanup.policy", APPEND, value)]), validate_only=True) == [
            (TOPIC, topic, E.NONE, None)]


@pytest.mark.parametrize("broker", ["1", ""])
def test_a_tls_store_setting_without_its_listener_prefix_is_refused_in_kafkas_words(node: tuple[str, int],
                                                                                     broker: str) -> None:
    """Kafka's DynamicBrokerConfig: a keystore/truststore setting is changed per listener (klog: "Cannot update these
    configs dynamically"); a listener's at the cluster level names it in brackets, as the other keys."""
    assert _alter(node, (BROKER, broker, [("ssl.keystore.location", SET, "/x")]), validate_only=True) == [
        (BROKER, broker, E.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
                                            "using the listener prefix: [ssl.keystore.location]")]
    if broker == "":
        key = "listener.name.plaintext.ssl.keystore.location"
        assert _alter(node, (BROKER, "", [(key, SET, "/x")]), validate_only=True) == [
            (BROKER, "", E.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be "
                                            f"specified: [{key}]")]


def test_describe_configs_of_a_broker_id_that_is_no_integer_or_an_unknown_resource_type(node: tuple[str, int]) -> None:
    """Kafka's ConfigHelper reads a broker (or broker-logger) resource's name as an int first, and answers an
    unknown resource type with INVALID_REQUEST's default message (klog: "Unexpected broker id ..." and
    "Unsupported resource type N")."""
    for rtype in (BROKER, 8):
        assert _describe(node, rtype, "abc", None) == (
            E.INVALID_REQUEST, "Broker id must be an integer, but it is: abc", [])
    default = ("This most likely occurs because of a request being malformed by the client library or the message "
               "was sent to an incompatible broker. See the broker logs for more details.")
    for rtype in (0, 1, 99):
        assert _describe(node, rtype, "x", None) == (E.INVALID_REQUEST, default, [])


@pytest.mark.parametrize("level", ["OFF", "ALL", "debug", "FOO"])
def test_a_logger_level_kafka_does_not_set_is_refused_naming_the_ones_it_does(node: tuple[str, int], level: str
                                                                             ) -> None:
    """Kafka's LogLevelConfig sets FATAL, ERROR, WARN, INFO, DEBUG and TRACE only (klog also set OFF and ALL)."""
    assert _alter(node, (8, "1", [("root", SET, level)]), validate_only=True) == [
        (8, "1", E.INVALID_CONFIG, f"Cannot set the log level of root to {level} as it is not a supported log level. "
                                   "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")]


def test_a_refused_create_topics_item_has_an_empty_config_list_and_a_repeated_id_kafkas_words(
        node: tuple[str, int]) -> None:
    """CreateTopics v5+: a refused topic's configs are an empty list (klog: null); DeleteTopics naming one topic id
    twice says "Duplicate topic id." (klog: "ID")."""
    name = _name("e")
    answer = _request(node, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": 0, "replication_factor": -1, "assignments": [], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False})
    assert [(t.error_code, t.configs, t.num_partitions, t.replication_factor) for t in answer.topics] == [
        (E.INVALID_PARTITIONS, [], -1, -1)]
    topic_id = uuid.uuid4()
    assert _delete(node, (None, topic_id), (None, topic_id)) == [(None, E.INVALID_REQUEST, "Duplicate topic id.")]


def test_a_topics_own_values_are_described_as_parsed_and_appended_to_as_such(node: tuple[str, int]) -> None:
    """Kafka describes a topic's own value parsed and written back, and appends to a list's entries (klog described
    the value as sent, " gzip " and "0.50", and appended "delete" again to "compact , delete")."""
    name = _name("ws")
    sent = {"compression.type": " gzip ", "retention.ms": " 5000 ", "cleanup.policy": "compact , delete",
            "min.cleanable.dirty.ratio": "0.50", "preallocate": "TRUE"}
    assert _create(node, {"name": name, "configs": [{"name": k, "value": v} for k, v in sent.items()]}) == [
        (name, E.NONE, None)]
    described = {"compression.type": ("gzip", 1), "retention.ms": ("5000", 1), "cleanup.policy": ("compact,delete", 1),
                 "min.cleanable.dirty.ratio": ("0.5", 1), "preallocate": ("true", 1)}
    until(lambda: _partitions(node, name), f"{name} in the metadata")
    assert {key: _topic_config(node, name, key) for key in sent} == described
    assert _alter(node, (TOPIC, name, [("cleanup.policy", APPEND, "delete")])) == [(TOPIC, name, E.NONE, None)]
    assert _alter(node, (TOPIC, name, [("retention.ms", SET, "6000")])) == [(TOPIC, name, E.NONE, None)]
    until(lambda: _topic_config(node, name, "retention.ms")[0] == "6000", f"{name}'s new retention.ms")
    assert _topic_config(node, name, "cleanup.policy") == ("compact,delete", 1)


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_making_more_than_10000_records_is_a_policy_violation(node: tuple[str, int],
                                                                              validate_only: bool) -> None:
    """Kafka's controller makes at most 10,000 records for one request (a topic record, and each partition's and
    config's): 9,999 partitions are one topic, 10,000 or 9,999 and a config refuse the whole request (klog made them;
    it bounded partitions only)."""
    refused = "Unable to perform excessively large batch operation."
    big, other = _name("big"), _name("other")
    assert _create(node, {"name": big, "num_partitions": 10_000}, validate_only=validate_only) == [
        (big, E.POLICY_VIOLATION, refused)]
    assert _create(node, {"name": big, "num_partitions": 9_999, "configs": [{"name": "retention.ms", "value": "1"}]},
                   validate_only=validate_only) == [(big, E.POLICY_VIOLATION, refused)]
    assert _create(node, {"name": big, "num_partitions": 5_000}, {"name": other, "num_partitions": 4_999},
                   validate_only=validate_only) == [(big, E.POLICY_VIOLATION, refused),
                                                    (other, E.POLICY_VIOLATION, refused)]
    assert _partitions(node, big) is None and _partitions(node, other) is None
    assert _create(node, {"name": big, "num_partitions": 9_999}, validate_only=True) == [(big, E.NONE, None)]


def test_create_partitions_adding_more_than_10000_partitions_in_one_request_fails_the_topic_past_it(
        node: tuple[str, int]) -> None:
    """Kafka bounds the records of a CreatePartitions request (MAX_RECORDS_PER_USER_OP), answering the topic that
    passes it UNKNOWN_SERVER_ERROR (the ones before it keep theirs), and not a topic's partition count (klog refused
    more than 10,000 partitions in a topic, INVALID_PARTITIONS, and placed any number added)."""
    topic, other = _topic(node, partitions=2), _topic(node)

    def grown(*topics: dict[str, Any]) -> list[tuple[str, int, str | None]]:
        answer = _request(node, ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"assignments": None, **t} for t in topics],
                                                              "timeout_ms": 30_000, "validate_only": True})
        return [(r.name, r.error_code, r.error_message or None) for r in answer.results]

    assert grown({"name": topic, "count": 10_002}) == [(topic, E.NONE, None)]
    assert grown({"name": topic, "count": 10_003}) == [(topic, E.UNKNOWN_SERVER_ERROR, None)]
    # Kafka answers (and adds) the topics in an order of its own
    assert sorted(code for _, code, _ in grown({"name": topic, "count": 5_002}, {"name": other, "count": 5_002})) == [
        E.UNKNOWN_SERVER_ERROR, E.NONE]


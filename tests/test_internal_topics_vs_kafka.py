"""Kafka's internal topics, created the same whoever makes them, on Apache Kafka 4.3.1 and on klog (the same test on
each broker, started from the same properties).

Kafka creates ``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` from their own settings
(``offsets.topic.*``, ``transaction.state.log.*``, ``share.coordinator.state.topic.*``: partitions, replication
factor, segment bytes, min ISR) and topic configs, whether a FindCoordinator or a Metadata request naming the topic
(auto-creation) makes it: its AutoTopicCreationManager gives an internal name its coordinator's spec, never the
broker's num.partitions. Metadata flags each internal (``is_internal``). CreateTopics naming an existing internal
topic answers TOPIC_ALREADY_EXISTS; ``__cluster_metadata`` is refused (INVALID_REQUEST) and never made."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient, until

ZERO = uuid.UUID(int=0)
TOPIC = 2   # DescribeConfigs resource type
#: what Kafka sets on each internal topic (its coordinators' topic configs), as DescribeConfigs reports them
KEYS = ["cleanup.policy", "segment.bytes", "compression.type", "min.insync.replicas", "retention.ms",
        "unclean.leader.election.enable"]
INTERNAL = ("__consumer_offsets", "__transaction_state", "__share_group_state")
#: the settings of each internal topic, other than the fixtures' (partitions, segments, min ISR)
CUSTOM: dict[str, object] = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1,
    "offsets.topic.segment.bytes": 2097152, "offsets.topic.compression.codec": 1,
    "transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 1,
    "transaction.state.log.segment.bytes": 3145728, "transaction.state.log.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 6, "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.segment.bytes": 4194304, "share.coordinator.state.topic.min.isr": 1,
}
#: the fixtures' shared properties (klog.testing.kafka), a new topic with 2 partitions
FIXTURE: dict[str, object] = {"num.partitions": 2}


def _request(wire: WireClient, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return wire.request(api_key, version, body)


def metadata(wire: WireClient, names: list[str], allow: bool) -> dict[str, tuple[int, int, int, bool]]:
    """name -> (error code, partitions, replicas of partition 0, is_internal)."""
    answer = _request(wire, ApiKey.METADATA, 12, {"topics": [{"name": n, "topic_id": ZERO} for n in names],
                                                   "allow_auto_topic_creation": allow,
                                                   "include_topic_authorized_operations": False})
    return {t.name: (t.error_code, len(t.partitions), len(t.partitions[0].replica_nodes) if t.partitions else 0,
                     t.is_internal) for t in answer.topics}


def topic_configs(wire: WireClient, name: str) -> dict[str, str | None]:
    answer = _request(wire, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": name, "configuration_keys": KEYS}],
        "include_synonyms": False, "include_documentation": False}).results[0]
    assert answer.error_code == E.NONE, answer
    return {c.name: c.value for c in answer.configs}


def find_coordinator(wire: WireClient, key_type: int, key: str) -> int:
    answer = _request(wire, ApiKey.FIND_COORDINATOR, 6, {"key_type": key_type, "coordinator_keys": [key]})
    return int(answer.coordinators[0].error_code)


def create_topics(wire: WireClient, names: list[str], validate_only: bool = False) -> list[tuple[str, int, Any]]:
    answer = _request(wire, ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                   for n in names], "timeout_ms": 30_000, "validate_only": validate_only})
    return [(t.name, t.error_code, t.error_message) for t in answer.topics]


def _describe(wire: WireClient) -> dict[str, Any]:
    return {name: (metadata(wire, [name], False)[name], topic_configs(wire, name)) for name in INTERNAL}


#: (properties, how the internal topics are made)
CASES = [("fixture", "metadata"), ("custom", "metadata"), ("custom", "find_coordinator")]


@pytest.fixture(scope="module")
def seen() -> dict[tuple[str, str, str], Any]:
    """What each broker made of its internal topics, per (kind, properties, way)."""
    return {}


@pytest.mark.parametrize("kind", ["kafka", "klog"])
@pytest.mark.parametrize("props,way", CASES)
def test_internal_topics_are_made_with_their_own_settings(kind: str, props: str, way: str,
                                                          tmp_path_factory: pytest.TempPathFactory,
                                                          seen: dict[tuple[str, str, str], Any]) -> None:
    """Each internal topic, made by a Metadata request naming it or by its coordinator's FindCoordinator, has its
    own partition count, replication factor and topic configs; the answer is the same on both brokers."""
    properties = CUSTOM if props == "custom" else FIXTURE
    with one_broker(kind, tmp_path_factory.mktemp(kind), properties) as servers:
        host, port = servers.rsplit(":", 1)
        with WireClient(host, int(port), timeout=30) as wire:
            # without allow_auto_topic_creation none is made
            assert metadata(wire, list(INTERNAL), False) == {n: (E.UNKNOWN_TOPIC_OR_PARTITION, 0, 0, True)
                                                            for n in INTERNAL}
            if way == "metadata":
                until(lambda: all(v[0] == E.NONE for v in metadata(wire, list(INTERNAL), True).values()),
                      "the internal topics auto-created")
            else:
                # a share-partition key: group:topicId (Kafka's base64 Uuid):partition
                share_key = f"g:{base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b'=').decode()}:0"
                for key_type, key in ((0, "group-a"), (1, "txn-a"), (2, share_key)):
                    until(lambda: find_coordinator(wire, key_type, key) == E.NONE, f"coordinator {key_type}")
                until(lambda: all(v[0] == E.NONE for v in metadata(wire, list(INTERNAL), False).values()),
                      "the internal topics created")
            described = _describe(wire)
    expected_partitions = {"fixture": (4, 4, 50), "custom": (3, 5, 6)}[props]
    assert {n: described[n][0][:2] for n in INTERNAL} == {
        n: (E.NONE, p) for n, p in zip(INTERNAL, expected_partitions, strict=True)}
    assert all(described[n][0][2:] == (1, True) for n in INTERNAL), described
    seen[(kind, props, way)] = described
    other = seen.get(("kafka" if kind == "klog" else "klog", props, way))
    if other is not None:
        assert described == other


@pytest.fixture(scope="module", params=["kafka", "klog"])
def wire(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireClient]:
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), FIXTURE) as servers:
        host, port = servers.rsplit(":", 1)
        with WireClient(host, int(port), timeout=30) as client:
            yield client


def test_create_topics_on_internal_names(wire: WireClient) -> None:
    """``__cluster_metadata`` is refused, validate_only or not, and never made; an internal topic once there is
    TOPIC_ALREADY_EXISTS."""
    refused = ("__cluster_metadata", E.INVALID_REQUEST,
               "Creation of internal topic __cluster_metadata is prohibited.")
    assert create_topics(wire, ["__cluster_metadata"], validate_only=True) == [refused]
    assert create_topics(wire, ["__cluster_metadata"]) == [refused]
    assert metadata(wire, ["__cluster_metadata"], False)["__cluster_metadata"][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    until(lambda: find_coordinator(wire, 0, "group-b") == E.NONE, "the group coordinator")
    assert create_topics(wire, ["__consumer_offsets"]) == [
        ("__consumer_offsets", E.TOPIC_ALREADY_EXISTS, "Topic '__consumer_offsets' already exists.")]

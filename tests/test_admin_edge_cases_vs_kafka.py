"""Edge cases of the admin APIs (CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs,
AlterConfigs, DescribeConfigs) answered as Apache Kafka 4.3 answers them: the same requests go on the wire to a
klog node and to an Apache Kafka node started from the same properties, and each test checks the error code
(and, where it tells a tool what went wrong, the message) of every item, and that a refused request changes
nothing. Found by a differential probe of both brokers over some 150 edge cases; the cases whose answers already
agreed are kept in the tables at the end, so a change that breaks one shows here."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient

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
        _until(lambda: _brokers(host, int(port)), "the node's registration")
        yield host, int(port)


def _until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except (OSError, ConnectionError):
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.3)


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
    _until(lambda: _partitions(node, topic) and _partitions(node, other), "both topics in the metadata")
    # Kafka answers the refusals and the deletions in an order of its own
    assert sorted(_delete(node, (topic, ZERO), (other, ZERO), (topic, ZERO))) == sorted([
        (topic, E.INVALID_REQUEST, "Duplicate topic name."), (other, E.NONE, None)])
    _until(lambda: _partitions(node, other) is None, f"{other} deleted")
    assert _partitions(node, topic) == 1


def test_delete_topics_with_neither_a_name_nor_an_id_is_an_invalid_request(node: tuple[str, int]) -> None:
    assert _delete(node, (None, ZERO)) == [(None, E.INVALID_REQUEST, "Neither topic name nor id were specified.")]

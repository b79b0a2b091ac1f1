"""Metadata's auto-creation of topics, on Apache Kafka 4.3.1 and on klog (the same test on each broker).

Kafka's broker does not wait for a topic it auto-creates: its AutoTopicCreationManager sends the CreateTopics to
the controller and the Metadata answer names the topic UNKNOWN_TOPIC_OR_PARTITION (3), on every version, also for
an internal topic (``__transaction_state``: not COORDINATOR_NOT_AVAILABLE); a request naming it while the creation
is under way is answered the same, and once the creation is applied the topic is there with its partitions (a
request right after the first gets one or the other: a race on either broker). An invalid name is
INVALID_TOPIC_EXCEPTION (17) and not created; ``__cluster_metadata`` is never created:
UNKNOWN_TOPIC_OR_PARTITION every time. Without allow_auto_topic_creation (v4+) a missing topic is
UNKNOWN_TOPIC_OR_PARTITION and stays missing. librdkafka's test 0111_delay_create_topics relies on the first answer
(its producer's first message to an unknown topic fails)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.wire import WireClient, until

ZERO = uuid.UUID(int=0)


def metadata(wire: WireClient, version: int, names: list[str], allow: bool | None = None) -> dict[str, Any]:
    """name -> (error code, partition count) of the Metadata answer naming ``names``."""
    body: dict[str, Any] = {"topics": [{"name": n, "topic_id": ZERO} for n in names]}
    if version >= 4:
        body["allow_auto_topic_creation"] = allow
    if 8 <= version <= 10:
        body["include_cluster_authorized_operations"] = False
    if version >= 8:
        body["include_topic_authorized_operations"] = False
    answer = wire.request(ApiKey.METADATA, version, body)
    return {t.name: (t.error_code, len(t.partitions)) for t in answer.topics}


#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"num.partitions": 2}


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    """A broker of this module's own (no internal topic made by another module), 2 partitions per new topic."""
    return klog_and_kafka_bootstrap


@pytest.fixture
def wire(bootstrap: str) -> Iterator[WireClient]:
    host, port = bootstrap.rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        yield client


UNKNOWN = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)


@pytest.mark.parametrize("version,allow", [(0, None), (3, None), (4, True), (9, True), (12, True), (13, True)])
def test_the_first_answer_names_an_auto_created_topic_unknown(wire: WireClient, version: int,
                                                              allow: bool | None) -> None:
    """The first answer names the new topics UNKNOWN_TOPIC_OR_PARTITION, an invalid name INVALID_TOPIC_EXCEPTION;
    later the topics are there with the broker's default partition count."""
    stem = f"auto-{version}-{uuid.uuid4().hex[:8]}"
    a, b = f"{stem}-a", f"{stem}-b"
    first = metadata(wire, version, [a, b, "bad name!"], allow)
    assert first == {a: UNKNOWN, b: UNKNOWN, "bad name!": (ErrorCode.INVALID_TOPIC_EXCEPTION, 0)}
    # asked again at once: still UNKNOWN_TOPIC_OR_PARTITION while the creation is under way (Kafka's in-flight
    # creation is not sent again), or there already: never another code
    assert set(metadata(wire, version, [a, b], allow).values()) <= {UNKNOWN, (ErrorCode.NONE, 2)}
    def both_there() -> dict[str, Any] | None:
        answer = metadata(wire, version, [a, b], allow)
        return answer if UNKNOWN not in answer.values() else None

    created = until(both_there, f"{a} and {b} created")
    assert created == {a: (ErrorCode.NONE, 2), b: (ErrorCode.NONE, 2)}


@pytest.mark.parametrize("version", [4, 12])
def test_without_allow_auto_topic_creation_nothing_is_created(wire: WireClient, version: int) -> None:
    name = f"not-created-{version}-{uuid.uuid4().hex[:8]}"
    assert metadata(wire, version, [name], False) == {name: UNKNOWN}
    # a request that may create it, for comparison: once that one is there, this one would be too
    witness = f"{name}-witness"
    metadata(wire, version, [witness], True)
    until(lambda: metadata(wire, version, [witness], False)[witness] != UNKNOWN, f"{witness} created")
    assert metadata(wire, version, [name], False) == {name: UNKNOWN}


def test_internal_topics(wire: WireClient) -> None:
    """``__transaction_state`` is auto-created as any topic (UNKNOWN_TOPIC_OR_PARTITION first, not
    COORDINATOR_NOT_AVAILABLE, then there), flagged internal; ``__cluster_metadata`` never is."""
    names = ["__transaction_state", "__cluster_metadata"]
    first = metadata(wire, 12, names, True)
    assert first == {"__transaction_state": UNKNOWN, "__cluster_metadata": UNKNOWN}
    until(lambda: metadata(wire, 12, names, True)["__transaction_state"][0] == ErrorCode.NONE,
          "__transaction_state created")
    time.sleep(1)   # a creation of __cluster_metadata would have been applied by now
    assert metadata(wire, 12, ["__cluster_metadata"], True) == {"__cluster_metadata": UNKNOWN}

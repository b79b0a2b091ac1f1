"""The API versions Apache Kafka 4.3 added over klog's, answered as Kafka 4.3.1 answers them: the same requests go
on the wire to a klog node and to an Apache Kafka node started from the same properties.

- Metadata v13 (KIP-1102): a top-level error code, NONE in every answer a broker gives today.
- OffsetCommit v10 and OffsetFetch v10: topics named by id. An id no topic has (the zero id, a random one, a
  deleted topic's) answers UNKNOWN_TOPIC_ID; it never reaches the group coordinator, so a request naming only such
  ids gets no group error either.
- WriteTxnMarkers: v0 is gone (KIP-896): advertised 1-2, a v0 request closes the connection.
- ApiVersions advertises exactly Kafka's ranges for these (TxnOffsetCommit stays 0-5).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient, until

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

PROPERTIES = {"node.id": 1, "num.partitions": 1, "offsets.topic.num.partitions": 1,
              "offsets.topic.replication.factor": 1, "transaction.state.log.num.partitions": 1,
              "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
              "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": 0}
ZERO = uuid.UUID(int=0)
Node = tuple[str, int]


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """(host, port) of a one-node klog or Apache Kafka cluster, from the same properties, its group coordinator
    loaded."""
    with one_broker(request.param, tmp_path_factory.mktemp(f"wire-{request.param}"), PROPERTIES) as bootstrap:
        host, _, port = bootstrap.rpartition(":")
        node = (host, int(port))
        until(lambda: _request(node, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["warm"]})
              .coordinators[0].error_code == E.NONE, "the group coordinator")
        yield node


def _request(node: Node, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request on a connection of its own."""
    with WireClient(*node, timeout=30) as wire:
        return wire.request(api_key, version, body)


def _metadata(node: Node, topics: list[dict[str, Any]] | None, version: int = 12) -> Any:
    return _request(node, ApiKey.METADATA, version, {"topics": topics, "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})


def _topic(node: Node, partitions: int = 1) -> tuple[str, uuid.UUID]:
    """A new topic, known to the node's metadata: (name, id)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    answer = _request(node, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False})
    assert answer.topics[0].error_code == E.NONE

    def known() -> uuid.UUID | None:
        t = _metadata(node, [{"name": name, "topic_id": ZERO}]).topics[0]
        return t.topic_id if t.error_code == E.NONE and len(t.partitions) == partitions else None

    return name, until(known, f"topic {name} in metadata")


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _commit(node: Node, group: str, topics: list[tuple[uuid.UUID, list[tuple[int, int]]]], *,
            generation: int = -1, member: str = "", version: int = 10) -> list[tuple[uuid.UUID | str, list]]:
    """OffsetCommit of (topic id, [(partition, offset)]) (v9 and earlier: the id is the topic's name): (topic,
    [(partition, error code)]) per answered topic, in the answer's order."""
    key = "topic_id" if version >= 10 else "name"
    answer = _request(node, ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": [
            {key: t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                     "committed_metadata": "m"} for p, o in parts]} for t, parts in topics]})
    return [(getattr(t, key), [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics]


def _fetch(node: Node, groups: list[tuple[str, list[tuple[Any, list[int]]] | None]], *, member: str | None = None,
           epoch: int = -1, version: int = 10, require_stable: bool = False) -> list[tuple[str, int, list]]:
    """OffsetFetch of (group, [(topic id, [partition])] or None for all): (group, error code, [(topic, [(partition,
    offset, metadata, error code)])]) per group, in the answer's order."""
    key = "topic_id" if version >= 10 else "name"
    answer = _request(node, ApiKey.OFFSET_FETCH, version, {"require_stable": require_stable, "groups": [
        {"group_id": g, "member_id": member, "member_epoch": epoch,
         "topics": None if ts is None else [{key: t, "partition_indexes": ps} for t, ps in ts]} for g, ts in groups]})
    return [(g.group_id, g.error_code, [(getattr(t, key), [(p.partition_index, p.committed_offset, p.metadata,
                                                             p.error_code) for p in t.partitions])
                                        for t in g.topics]) for g in answer.groups]


def test_api_versions_advertise_kafka_4_3_ranges(node: Node) -> None:
    answer = _request(node, ApiKey.API_VERSIONS, 3, {"client_software_name": "klog-test",
                                                     "client_software_version": "1"})
    ranges = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
    assert {k: ranges[k] for k in (3, 8, 9, 27, 28)} == {
        ApiKey.METADATA: (0, 13), ApiKey.OFFSET_COMMIT: (2, 10), ApiKey.OFFSET_FETCH: (1, 10),
        ApiKey.WRITE_TXN_MARKERS: (1, 2), ApiKey.TXN_OFFSET_COMMIT: (0, 5)}


def test_offset_commit_v10_answers_unknown_topic_ids_and_merges_by_id(node: Node) -> None:
    _, a = _topic(node, 2)
    _, b = _topic(node)
    unknown, group = uuid.uuid4(), _group()
    answer = _commit(node, group, [(a, [(0, 5), (1, 6), (7, 1)]), (unknown, [(0, 1)]), (ZERO, [(0, 2)]),
                                   (b, [(0, 9)]), (a, [(0, 8)])])
    # refusals first (the missing partition 7 among them), then the coordinator's answers merged by topic id
    assert answer == [(a, [(7, E.UNKNOWN_TOPIC_OR_PARTITION), (0, E.NONE), (1, E.NONE), (0, E.NONE)]),
                      (unknown, [(0, E.UNKNOWN_TOPIC_ID)]), (ZERO, [(0, E.UNKNOWN_TOPIC_ID)]), (b, [(0, E.NONE)])]
    # the later commit of a's partition 0 wins; v9 reads the same offsets by name
    assert _fetch(node, [(group, [(a, [0, 1])])])[0][2] == [(a, [(0, 8, "m", E.NONE), (1, 6, "m", E.NONE)])]


def test_offset_commit_v10_of_unknown_ids_only_does_not_ask_the_group(node: Node) -> None:
    _, a = _topic(node)
    unknown, group = uuid.uuid4(), _group()
    # generation 3 of a group that does not exist: only a topic the coordinator sees gets GROUP_ID_NOT_FOUND
    assert _commit(node, group, [(unknown, [(0, 1)])], generation=3, member="m") == [
        (unknown, [(0, E.UNKNOWN_TOPIC_ID)])]
    assert _commit(node, group, [(unknown, [(0, 1)]), (a, [(0, 1)])], generation=3, member="m") == [
        (unknown, [(0, E.UNKNOWN_TOPIC_ID)]), (a, [(0, E.GROUP_ID_NOT_FOUND)])]
    assert _commit(node, group, []) == []


def test_offset_fetch_v10_answers_unknown_ids_after_the_known_topics(node: Node) -> None:
    name_a, a = _topic(node, 2)
    name_b, b = _topic(node)
    unknown, group = uuid.uuid4(), _group()
    assert _commit(node, group, [(name_a, [(0, 4)]), (name_b, [(0, 9)])], version=9) == [
        (name_a, [(0, E.NONE)]), (name_b, [(0, E.NONE)])]
    none = (-1, "", E.NONE)
    assert _fetch(node, [(group, [(a, [0, 1, 9]), (unknown, [0]), (ZERO, [0]), (b, [0]), (a, [1])])]) == [
        (group, E.NONE, [(a, [(0, 4, "m", E.NONE), (1, *none), (9, *none)]), (b, [(0, 9, "m", E.NONE)]),
                         (a, [(1, *none)]), (unknown, [(0, -1, "", E.UNKNOWN_TOPIC_ID)]),
                         (ZERO, [(0, -1, "", E.UNKNOWN_TOPIC_ID)])])]
    # every topic of the group, each by its id (in no particular order)
    (_, code, topics), = _fetch(node, [(group, None)])
    assert code == E.NONE and sorted(topics) == sorted([(a, [(0, 4, "m", E.NONE)]), (b, [(0, 9, "m", E.NONE)])])
    # several groups: a group unknown to the coordinator has no offsets, asked for all or by topic
    assert _fetch(node, [(group, [(b, [0]), (unknown, [3])]), (_group(), None), (_group(), [(a, [0])])])[0] == (
        group, E.NONE, [(b, [(0, 9, "m", E.NONE)]), (unknown, [(3, -1, "", E.UNKNOWN_TOPIC_ID)])])
    assert [g[1:] for g in _fetch(node, [(_group(), None), (_group(), [(a, [0])])])] == [
        (E.NONE, []), (E.NONE, [(a, [(0, *none)])])]


def test_offsets_v10_of_a_deleted_topic_answer_unknown_topic_id(node: Node) -> None:
    name, gone = _topic(node)
    _, kept = _topic(node)
    group = _group()
    assert _commit(node, group, [(gone, [(0, 4)])]) == [(gone, [(0, E.NONE)])]
    answer = _request(node, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": ZERO}],
                                                      "timeout_ms": 30_000})
    assert answer.responses[0].error_code == E.NONE
    until(lambda: _metadata(node, [{"name": None, "topic_id": gone}]).topics[0].error_code == E.UNKNOWN_TOPIC_ID,
          f"topic {name} deleted")
    assert _commit(node, group, [(gone, [(0, 5)]), (kept, [(0, 1)])]) == [
        (gone, [(0, E.UNKNOWN_TOPIC_ID)]), (kept, [(0, E.NONE)])]
    assert _fetch(node, [(group, [(gone, [0]), (kept, [0])])]) == [
        (group, E.NONE, [(kept, [(0, 1, "m", E.NONE)]), (gone, [(0, -1, "", E.UNKNOWN_TOPIC_ID)])])]
    until(lambda: _fetch(node, [(group, None)]) == [(group, E.NONE, [(kept, [(0, 1, "m", E.NONE)])])],
          "the deleted topic's offsets gone from the group")


def _join_consumer_group(node: Node, group: str, topic: str) -> tuple[str, int]:
    """A KIP-848 member of ``group`` subscribed to ``topic``: (member id, epoch)."""
    answer = _request(node, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [topic],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert answer.error_code == E.NONE and answer.member_epoch > 0
    return answer.member_id, answer.member_epoch


def test_offsets_v10_check_a_consumer_group_member_and_epoch(node: Node) -> None:
    name, a = _topic(node, 2)
    unknown, group = uuid.uuid4(), _group()
    member, epoch = _join_consumer_group(node, group, name)
    assert _commit(node, group, [(a, [(0, 3)]), (unknown, [(0, 1)])], generation=epoch, member=member) == [
        (unknown, [(0, E.UNKNOWN_TOPIC_ID)]), (a, [(0, E.NONE)])]
    assert _commit(node, group, [(a, [(0, 3)]), (unknown, [(0, 1)])], generation=epoch + 5, member=member) == [
        (unknown, [(0, E.UNKNOWN_TOPIC_ID)]), (a, [(0, E.STALE_MEMBER_EPOCH)])]
    assert _commit(node, group, [(a, [(0, 3)])], generation=epoch, member="nobody") == [
        (a, [(0, E.UNKNOWN_MEMBER_ID)])]
    offsets = [(a, [(0, 3, "m", E.NONE), (1, -1, "", E.NONE)])]
    assert _fetch(node, [(group, [(a, [0, 1])])], member=member, epoch=epoch) == [(group, E.NONE, offsets)]
    # a group error is answered alone: the unknown id is not listed beside it
    assert _fetch(node, [(group, [(a, [0]), (unknown, [0])])], member=member, epoch=epoch + 5) == [
        (group, E.STALE_MEMBER_EPOCH, [])]
    assert _fetch(node, [(group, [(a, [0])])], member="nobody", epoch=epoch) == [(group, E.UNKNOWN_MEMBER_ID, [])]
    # without a member (an admin client) the offsets are answered; a classic group ignores the member fields
    assert _fetch(node, [(group, None)]) == [(group, E.NONE, [(a, [(0, 3, "m", E.NONE)])])]
    classic = _group()
    assert _commit(node, classic, [(a, [(1, 7)])]) == [(a, [(1, E.NONE)])]
    assert _fetch(node, [(classic, [(a, [1])])], member="someone", epoch=3) == [
        (classic, E.NONE, [(a, [(1, 7, "m", E.NONE)])])]


def test_offset_fetch_v10_require_stable_waits_for_a_pending_transactional_offset(node: Node) -> None:
    name, a = _topic(node)
    group = _group()
    assert _commit(node, group, [(a, [(0, 2)])]) == [(a, [(0, E.NONE)])]
    bootstrap = f"{node[0]}:{node[1]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(name, 0, 11)], consumer.consumer_group_metadata(), 30)
        assert _fetch(node, [(group, [(a, [0])])], require_stable=True) == [
            (group, E.NONE, [(a, [(0, -1, "", E.UNSTABLE_OFFSET_COMMIT)])])]
        assert _fetch(node, [(group, [(a, [0])])]) == [(group, E.NONE, [(a, [(0, 2, "m", E.NONE)])])]
        producer.commit_transaction(30)
        until(lambda: _fetch(node, [(group, [(a, [0])])], require_stable=True) == [
            (group, E.NONE, [(a, [(0, 11, "", E.NONE)])])], "the transaction's offset committed")
    finally:
        consumer.close()


def test_metadata_v13_answers_a_top_level_error_code(node: Node) -> None:
    name, a = _topic(node)
    unknown = uuid.uuid4()
    every = _metadata(node, None, 13)
    assert every.error_code == E.NONE and name in {t.name for t in every.topics}
    asked = _metadata(node, [{"name": name, "topic_id": ZERO}, {"name": "nope", "topic_id": ZERO},
                             {"name": "bad name!", "topic_id": ZERO}], 13)
    assert asked.error_code == E.NONE
    assert [(t.name, t.error_code, t.topic_id) for t in asked.topics] == [
        (name, E.NONE, a), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, ZERO), ("bad name!", E.INVALID_TOPIC_EXCEPTION, ZERO)]
    by_id = _metadata(node, [{"name": None, "topic_id": a}, {"name": None, "topic_id": unknown}], 13)
    assert by_id.error_code == E.NONE
    assert sorted((str(t.topic_id), t.name, t.error_code) for t in by_id.topics) == sorted(
        [(str(a), name, E.NONE), (str(unknown), None, E.UNKNOWN_TOPIC_ID)])
    # the same answer as v12 otherwise
    v12 = _metadata(node, [{"name": name, "topic_id": ZERO}], 12)
    v13 = _metadata(node, [{"name": name, "topic_id": ZERO}], 13)
    assert (v13.brokers, v13.cluster_id, v13.controller_id, v13.topics) == (
        v12.brokers, v12.cluster_id, v12.controller_id, v12.topics)


def test_write_txn_markers_v0_is_refused_v1_answered(node: Node) -> None:
    name, _ = _topic(node)
    body = {"markers": [{"producer_id": 5, "producer_epoch": 0, "transaction_result": False,
                         "topics": [{"name": name, "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    with WireClient(*node, timeout=30) as wire:
        wire.send(ApiKey.WRITE_TXN_MARKERS, 0, body)
        assert wire.is_closed_by_peer()
    answer = _request(node, ApiKey.WRITE_TXN_MARKERS, 1, body)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for m in answer.markers for t in m.topics] == [(name, [(0, E.NONE)])]


def test_metadata_naming_topic_ids_answers_each_id_once_and_no_name_beside_them(node: Node) -> None:
    """Kafka's handleTopicMetadataRequest reads a v12+ request's topic ids into a set and, when there is any,
    answers the ids alone: an id named twice once, a name beside them not at all, a name given with an id by the
    id (klog answered every entry, an id with a name by the name, until 2026-12-07)."""
    name, a = _topic(node)
    other, _ = _topic(node)
    unknown = uuid.uuid4()
    for version in (12, 13):
        answer = _metadata(node, [{"name": None, "topic_id": a}, {"name": other, "topic_id": ZERO},
                                  {"name": None, "topic_id": a}, {"name": name, "topic_id": unknown}], version)
        assert sorted((str(t.topic_id), t.name, t.error_code) for t in answer.topics) == sorted(
            [(str(a), name, E.NONE), (str(unknown), None, E.UNKNOWN_TOPIC_ID)])
    # names alone: answered by name, as before
    assert [(t.name, t.error_code) for t in _metadata(node, [{"name": other, "topic_id": ZERO}]).topics] == [
        (other, E.NONE)]

"""Metadata answers kept encoded (klog/broker/metadata_answers.py): a repeated Metadata request is answered with
the bytes the handler gave the first time (its correlation id replaced), and never with an answer the metadata has
moved past, nor, under an authorizer, one computed for another client.

Real broker processes (one node; three for a leader that moves), Kafka clients (confluent-kafka's AdminClient) and
raw frames (klog.protocol); ``klog_metadata_kept_answers_total`` (the metrics listener) tells the kept answers from
the handler's.
"""

from __future__ import annotations

import struct
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewPartitions, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

from klog.protocol import ApiKey, decode_response, encode_request
from klog.protocol.error_codes import ErrorCode
from klog.testing.cluster import KlogCluster
from klog.testing.ports import free_port
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.timeout(180)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ZERO = uuid.UUID(int=0)


def scrape(port: int, name: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return next((int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(name + " ")), 0)


def kept_answers(port: int) -> int:
    return scrape(port, "klog_metadata_kept_answers_total")


def metadata_body(version: int, topics: list[str] | None, *, auto_create: bool = False, ops: bool = False) -> dict:
    if topics is None and version == 0:
        named: list[dict[str, Any]] | None = []   # v0: an empty list means every topic
    else:
        named = None if topics is None else [{"name": t, "topic_id": ZERO} for t in topics]
    return {"topics": named, "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": ops, "include_topic_authorized_operations": ops}


class Asker:
    """Metadata requests as raw frames on one connection; each answer as bytes (without the size prefix)."""

    def __init__(self, host: str, port: int, *, source_host: str | None = None) -> None:
        self.wire = WireClient(host, port, source_host=source_host)
        self.cid = 100

    def raw(self, version: int, topics: list[str] | None, *, client_id: str = "asker", **options: Any) -> bytes:
        self.cid += 1
        self.wire.send_raw(encode_request(ApiKey.METADATA, version, self.cid, client_id,
                                          metadata_body(version, topics, **options)))
        frame = self.wire.read_frame()
        assert struct.unpack(">i", frame[:4])[0] == self.cid
        return frame

    def ask(self, version: int, topics: list[str] | None, **options: Any) -> Any:
        return decode_response(ApiKey.METADATA, version, self.raw(version, topics, **options))[1]

    def close(self) -> None:
        self.wire.close()


def topic_of(answer: Any, name: str) -> Any:
    return next((t for t in answer.topics if t.name == name), None)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    with BrokerProcess(tmp_path_factory.mktemp("kept"), {"num.partitions": 1,
                                                         "klog.metrics.listener": f"127.0.0.1:{port}"}) as proc:
        yield proc, port


@pytest.fixture()
def asker(node) -> Iterator[Asker]:
    broker, _ = node
    client = Asker(broker.host, broker.port)
    yield client
    client.close()


def test_every_version_answers_again_with_the_handlers_bytes(node, asker):
    """Versions 0-12, a topic that exists, every topic, an invalid name, an unknown topic (not auto-created): the
    second identical request (another correlation id and client id) gets the first answer's bytes, kept."""
    broker, port = node
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic("kept-a", 2, 1)]).values():
        future.result(30)
    for version in range(13):
        cases: list[tuple[list[str] | None, dict[str, Any]]] = [
            (["kept-a"], {}), (None, {}), (["bad name!"], {}), (["kept-a"], {"ops": version >= 8})]
        if version >= 4:   # before v4 a named unknown topic is always auto-created
            cases.append((["kept-missing"], {"auto_create": False}))
        for topics, options in cases:
            first = asker.raw(version, topics, client_id="first", **options)
            before = kept_answers(port)
            second = asker.raw(version, topics, client_id="another-client", **options)
            assert kept_answers(port) == before + 1, (version, topics, options)
            assert second[4:] == first[4:], (version, topics, options)
        answer = asker.ask(version, ["kept-a", "bad name!"])
        assert [t.error_code for t in answer.topics] == [ErrorCode.NONE, ErrorCode.INVALID_TOPIC_EXCEPTION]
        assert len(answer.topics[0].partitions) == 2
        if version >= 4:
            missing = asker.ask(version, ["kept-missing"])
            assert missing.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_kept_answers_follow_topics_created_grown_and_deleted(node, asker):
    """A kept answer is never given for a metadata image it was not computed from: a topic created, partitions
    added, a topic deleted each show in the next answer (raw frames and confluent-kafka's list_topics)."""
    broker, port = node
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def both() -> tuple[Any, Any]:
        """(every topic, the topic named) twice each: the second answers are the kept ones."""
        asker.ask(12, None)
        asker.ask(12, ["grows"])
        before = kept_answers(port)
        answers = asker.ask(12, None), asker.ask(12, ["grows"])
        assert kept_answers(port) == before + 2
        return answers

    everything, named = both()
    assert topic_of(everything, "grows") is None
    assert named.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for future in admin.create_topics([NewTopic("grows", 1, 1)]).values():
        future.result(30)
    everything, named = both()
    assert len(topic_of(everything, "grows").partitions) == 1
    assert named.topics[0].error_code == ErrorCode.NONE and len(named.topics[0].partitions) == 1
    assert len(admin.list_topics(timeout=30).topics["grows"].partitions) == 1
    for future in admin.create_partitions([NewPartitions("grows", 3)]).values():
        future.result(30)
    everything, named = both()
    assert sorted(p.partition_index for p in topic_of(everything, "grows").partitions) == [0, 1, 2]
    assert sorted(p.partition_index for p in named.topics[0].partitions) == [0, 1, 2]
    assert len(admin.list_topics(timeout=30).topics["grows"].partitions) == 3
    for future in admin.delete_topics(["grows"]).values():
        future.result(30)
    everything, named = both()
    assert topic_of(everything, "grows") is None
    assert named.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "grows" not in admin.list_topics(timeout=30).topics


def test_auto_creation_is_never_answered_from_a_kept_answer(node, asker):
    """A request that starts creating its topic runs the handler every time (its answer, UNKNOWN_TOPIC_OR_PARTITION
    as Kafka's, is never kept: kept, it would hide the topic, or a failed creation would never be tried again);
    a later one lists it."""
    _, port = node
    before = kept_answers(port)
    first = asker.ask(12, ["made-on-ask"], auto_create=True)
    assert first.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    later = until(lambda: (answer := asker.ask(12, ["made-on-ask"], auto_create=True)).topics[0].error_code
                  == ErrorCode.NONE and answer, "made-on-ask created")
    assert len(later.topics[0].partitions) == 1
    assert kept_answers(port) == before   # none of those was kept: the last came from a new image


def test_a_moved_leader_shows_in_the_next_answer(tmp_path):
    """Three nodes, a topic of replication factor 3: the node that stays answers the new leader once the old one
    stopped (a controlled shutdown moves it), not the answer it kept before."""
    ports = {i: free_port() for i in (1, 2, 3)}
    with KlogCluster(tmp_path, 3, node_properties={i: {"klog.metrics.listener": f"127.0.0.1:{p}"}
                                                   for i, p in ports.items()}) as cluster:
        cluster.wait_for_brokers()
        assert cluster.create_topic("moves", 1, 3)[0] == ErrorCode.NONE
        old = cluster.wait_for_topic("moves", 1)[0]
        watcher = next(i for i in cluster.node_ids if i != old)
        asker = Asker("127.0.0.1", cluster.client_ports[watcher])
        try:
            asker.ask(12, ["moves"])
            before = kept_answers(ports[watcher])
            assert asker.ask(12, ["moves"]).topics[0].partitions[0].leader_id == old
            assert kept_answers(ports[watcher]) == before + 1
            cluster.stop_node(old)
            new = cluster.wait_for_leader("moves", 0, exclude=old)
            for _ in range(2):   # the handler's answer, then the kept one
                answer = asker.ask(12, ["moves"])
                assert answer.topics[0].partitions[0].leader_id == new != old
                assert old not in {b.node_id for b in answer.brokers}
        finally:
            asker.close()


def test_under_an_authorizer_each_client_gets_its_own_answer(tmp_path):
    """Under an authorizer nothing is kept: a client the ACLs let describe a topic and one they do not get their
    own answers, whichever asked first, and an ACL added shows in the next answer."""
    port = free_port()
    props = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true",
             "klog.metrics.listener": f"127.0.0.1:{port}"}
    with BrokerProcess(tmp_path, props) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic("guarded", 1, 1)]).values():
            future.result(30)

        def allow(host: str) -> None:
            binding = AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:ANONYMOUS", host,
                                 AclOperation.DESCRIBE, AclPermissionType.ALLOW)
            for future in admin.create_acls([binding]).values():
                assert future.result(30) is None

        allow("127.0.0.1")
        allowed = Asker(broker.host, broker.port)
        other = Asker(broker.host, broker.port, source_host="127.0.0.2")
        try:
            for _ in range(2):
                assert allowed.ask(12, ["guarded"]).topics[0].error_code == ErrorCode.NONE
                assert other.ask(12, ["guarded"]).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                assert topic_of(allowed.ask(12, None), "guarded") is not None
                assert topic_of(other.ask(12, None), "guarded") is None
            allow("127.0.0.2")
            assert other.ask(12, ["guarded"]).topics[0].error_code == ErrorCode.NONE
            assert topic_of(other.ask(12, None), "guarded") is not None
        finally:
            allowed.close()
            other.close()
        assert kept_answers(port) == 0


def test_a_malformed_header_is_refused_even_when_its_body_was_answered_before(node, asker):
    """A kept answer is never given to a frame the Python path refuses: a client id that is not UTF-8 in front of a
    body answered before, or a header cut short, closes the connection as before."""
    broker, port = node
    asker.ask(12, None)
    asker.ask(12, None)
    before = kept_answers(port)
    good = encode_request(ApiKey.METADATA, 12, 7, "ab", metadata_body(12, None))
    bad_client_id = good[:14] + b"\xff\xfe" + good[16:]   # the client id's two bytes (after the 4-byte size prefix)
    for frame in (bad_client_id, struct.pack(">i", 5) + b"\x00\x03\x00\x0c\x00"):
        with WireClient(broker.host, broker.port) as wire:
            wire.send_raw(frame)
            assert wire.is_closed_by_peer()
    assert kept_answers(port) == before


def test_a_client_quota_keeps_metadata_on_the_handler(node, asker):
    """While a client quota is set the answer carries a throttle time: no answer is kept or given again; once the
    quota is removed they are again."""
    broker, port = node

    def quota(remove: bool) -> None:
        with WireClient(broker.host, broker.port, client_id="admin") as admin:
            answer = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "limited"}],
                 "ops": [{"key": "request_percentage", "value": 1000.0, "remove": remove}]}], "validate_only": False})
            assert [e.error_code for e in answer.entries] == [ErrorCode.NONE]

    quota(remove=False)
    try:
        before = kept_answers(port)
        for _ in range(3):
            asker.raw(12, ["bad name!"], client_id="unlimited")
        assert kept_answers(port) == before
    finally:
        quota(remove=True)
    for _ in range(2):
        asker.raw(12, ["bad name!"], client_id="unlimited")
    assert kept_answers(port) == before + 1

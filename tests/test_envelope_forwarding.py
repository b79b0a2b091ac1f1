"""Forwarding with the client's principal (KIP-590's EnvelopeRequest, API 58): a broker sends the controller's APIs
(CreateTopics, CreateAcls, ...) to the active controller wrapped in an envelope that names the client's principal and
address, and the controller authorizes them as that client with its own authorizer.

The layout makes the difference visible: one ``process.roles=controller`` node with the StandardAuthorizer and one
``process.roles=broker`` node without any (``authorizer.class.name`` empty), SASL_PLAINTEXT everywhere (clients log in
to the broker with PLAIN, the broker to the controller listener with PLAIN as ``User:controller``, a super user).
Every refusal seen through the broker is therefore the controller's, made for the client's principal: a broker that
forwarded as itself would have every request allowed. Each test runs on klog and on Apache Kafka 4.x from the same
properties; the raw test also sends envelopes to the controller listener itself (a principal without ClusterAction,
a principal that does not parse)."""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from klog.client.security import ClientSecurity
from klog.client.stream_login import open_logged_in
from klog.protocol import decode_response, encode_request
from klog.protocol.errors import ErrorCode
from klog.security.principal import KafkaPrincipal, deserialize_principal, serialize_principal
from klog.testing.cluster import CONTROLLER_ID_BASE, cluster_of

pytestmark = pytest.mark.timeout(300)

CONTROLLER = CONTROLLER_ID_BASE + 1
#: the controller listener's PLAIN users: the nodes' own (a super user) and one that may log in but is no node
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="controller-secret" user_controller="controller-secret" user_intruder="intruder-secret";')
#: the broker's client listener (named PLAINTEXT, SASL_PLAINTEXT by the map): an admin (super user) and alice
CLIENT_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
               'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
    "listener.name.plaintext.plain.sasl.jaas.config": CLIENT_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:controller;User:admin",
    "offsets.topic.replication.factor": 1,
    "default.replication.factor": 1,
}
#: the broker authorizes nothing itself: what it refuses, the controller refused
BROKER_PROPERTIES = {1: {"authorizer.class.name": ""}}
CREATE_TOPICS_VERSION = 5
_SIZE = struct.Struct(">i")


@pytest.fixture(params=["klog", "kafka"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One controller-only node (101) with the authorizer, one broker-only node (1) without."""
    with cluster_of(request.param, tmp_path, 1, controllers=1, properties=PROPERTIES,
                    node_properties=BROKER_PROPERTIES) as started:
        yield started


def admin(cluster: Any, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.client_ports[1]}",
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": user, "sasl.password": f"{user}-secret"})


def create_topic(client: AdminClient, name: str, deadline_s: float = 60.0) -> int:
    """The error code of CreateTopics for ``name`` (0: created), once the cluster answers it (the broker registered:
    until then the controller refuses it for want of brokers, or the broker has no controller yet)."""
    deadline = time.monotonic() + deadline_s
    while True:
        future = client.create_topics([NewTopic(name, 1, 1)], request_timeout=15)[name]
        try:
            future.result(timeout=30)
            return 0
        except KafkaException as exc:
            error = exc.args[0]
            waiting = error.code() in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.REQUEST_TIMED_OUT,
                                       KafkaError._TIMED_OUT, KafkaError.NOT_CONTROLLER,
                                       KafkaError.BROKER_NOT_AVAILABLE)
            if not waiting or time.monotonic() > deadline:
                return int(error.code())
        time.sleep(0.5)


def allow_alice_to_create(client: AdminClient, prefix: str) -> None:
    binding = AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.CREATE, AclPermissionType.ALLOW)
    client.create_acls([binding], request_timeout=30)[binding].result(timeout=60)


def test_a_forwarded_request_is_authorized_by_the_controller_as_the_client(cluster: Any) -> None:
    superuser, alice = admin(cluster, "admin"), admin(cluster, "alice")
    # the broker has no authorizer: the refusal is the controller's, for User:alice
    assert create_topic(superuser, "env-admin-made") == 0
    assert create_topic(alice, "env-alice") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # alice may not create ACLs either (Alter on the Cluster, checked by the controller)
    mine = AclBinding(ResourceType.TOPIC, "env-", ResourcePatternType.PREFIXED, "User:alice", "*",
                      AclOperation.CREATE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([mine], request_timeout=30)[mine].result(timeout=60)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # the super user grants Create on env-*: the controller then lets alice create such topics, and only those
    allow_alice_to_create(superuser, "env-")
    assert create_topic(alice, "env-alice") == 0
    assert create_topic(alice, "other-alice") == KafkaError.TOPIC_AUTHORIZATION_FAILED


async def _requests_as(port: int, user: str, requests: list[tuple[int, int, dict[str, Any]]]) -> list[Any]:
    """Each (api key, version, body)'s answer, sent on one connection logged in as ``user`` (PLAIN)."""
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, f"{user}-secret")
    reader, writer = await open_logged_in("127.0.0.1", port, security, 30.0, client_id=f"{user}-app")
    answers = []
    try:
        for correlation, (api_key, version, body) in enumerate(requests, start=1):
            writer.write(encode_request(api_key, version, correlation, f"{user}-app", body))
            await writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(_SIZE.size), 30))
            got, answer = decode_response(api_key, version, await asyncio.wait_for(reader.readexactly(size), 30))
            assert got == correlation
            answers.append(answer)
    finally:
        writer.close()
    return answers


def _create_topics_v7(name: str, partitions: int) -> tuple[int, int, dict[str, Any]]:
    return (19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False})


def test_the_controller_charges_a_forwarded_mutation_to_the_clients_user_quota(cluster: Any) -> None:
    """controller_mutation_rate of User:alice (1 partition/s, a bucket of 11 with Kafka's default 11 windows of 1 s):
    the broker's envelope names alice, so the controller refuses her topics past the bucket while the admin's,
    forwarded by the same broker, are still created."""
    superuser = admin(cluster, "admin")
    assert create_topic(superuser, "mq-ready") == 0   # the broker registered: topics can be made
    allow_alice_to_create(superuser, "mq-")
    port = cluster.client_ports[1]
    (quota,) = asyncio.run(_requests_as(port, "admin", [(49, 1, {"entries": [
        {"entity": [{"entity_type": "user", "entity_name": "alice"}],
         "ops": [{"key": "controller_mutation_rate", "value": 1.0, "remove": False}]}], "validate_only": False})]))
    assert quota.entries[0].error_code == 0
    time.sleep(1.0)   # the record reaches the controller's image
    first, second = asyncio.run(_requests_as(port, "alice", [_create_topics_v7("mq-alice-big", 12),
                                                             _create_topics_v7("mq-alice-next", 1)]))
    assert first.topics[0].error_code == ErrorCode.NONE
    assert second.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert 0 < second.throttle_time_ms <= 1000
    (other,) = asyncio.run(_requests_as(port, "admin", [_create_topics_v7("mq-admin-next", 1)]))
    assert other.topics[0].error_code == ErrorCode.NONE and other.throttle_time_ms == 0


def _envelope(principal: bytes | None, inner: bytes, address: bytes = bytes([127, 0, 0, 1])) -> dict[str, Any]:
    return {"request_data": inner, "request_principal": principal, "client_host_address": address}


def _inner_create_topics(name: str, correlation: int) -> bytes:
    """A client's CreateTopics request (header and body, without the size prefix), as a broker wraps it."""
    frame = encode_request(19, CREATE_TOPICS_VERSION, correlation, "alice-app", {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False})
    return frame[_SIZE.size:]


async def _send_envelopes(port: int, user: str, envelopes: list[dict[str, Any]]) -> list[Any]:
    """Each envelope's answer, sent on one connection to the controller listener logged in as ``user``."""
    return await _requests_as(port, user, [(58, 0, body) for body in envelopes])


def _create_topics_code(answer: Any) -> int:
    assert answer.error_code == 0, ErrorCode(answer.error_code).name
    _, inner = decode_response(19, CREATE_TOPICS_VERSION, bytes(answer.response_data))
    return int(inner.topics[0].error_code)


def test_the_controller_listener_answers_envelopes_as_the_principal_they_name(cluster: Any) -> None:
    assert create_topic(admin(cluster, "admin"), "env-ready") == 0   # the broker registered: topics can be made
    port = cluster.controller_ports[CONTROLLER]
    alice = serialize_principal(KafkaPrincipal("User", "alice"))
    superuser = serialize_principal(KafkaPrincipal("User", "admin"))
    answers = asyncio.run(_send_envelopes(port, "controller", [
        _envelope(alice, _inner_create_topics("raw-alice", 11)),
        _envelope(superuser, _inner_create_topics("raw-admin", 12)),
        _envelope(b"\x00\x07garbage", _inner_create_topics("raw-garbage", 13)),
        _envelope(None, _inner_create_topics("raw-null", 14)),
    ]))
    # the answer inside the envelope carries the client's correlation id and the decision for its principal
    assert decode_response(19, CREATE_TOPICS_VERSION, bytes(answers[0].response_data))[0] == 11
    assert _create_topics_code(answers[0]) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _create_topics_code(answers[1]) == ErrorCode.NONE
    assert [a.error_code for a in answers[2:]] == [ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE] * 2
    assert all(a.response_data is None for a in answers[2:])
    # a principal that may log in but has no ClusterAction may not send envelopes at all
    (intruder,) = asyncio.run(_send_envelopes(port, "intruder", [
        _envelope(superuser, _inner_create_topics("raw-intruder", 15))]))
    assert intruder.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert intruder.response_data is None
    # nothing the refused envelopes named was created
    listed = admin(cluster, "admin").list_topics(timeout=30).topics
    assert "raw-admin" in listed
    assert not {"raw-alice", "raw-garbage", "raw-null", "raw-intruder"} & set(listed)


def test_the_envelope_principal_keeps_its_token_flag_and_bad_bytes_are_refused() -> None:
    token_login = KafkaPrincipal("User", "alice", token_authenticated=True)
    # Kafka's DefaultPrincipalData v0: int16 version, compact strings, bool, no tagged fields
    assert serialize_principal(token_login) == b"\x00\x00\x05User\x06alice\x01\x00"
    read = deserialize_principal(serialize_principal(token_login))
    assert (read, read.token_authenticated) == (token_login, True)
    assert not deserialize_principal(serialize_principal(KafkaPrincipal("User", "bob"))).token_authenticated
    for bad in (b"", b"\x00\x01\x05User\x06alice\x00\x00", b"\x00\x00\x05User\x06alice", b"\x00\x00\x01\x01\x00\x00",
                b"\x00\x00\x05User\x06alice\x00\x00trailing", b"\x00\x00\xff\xff\xff\xff\xff\xff"):
        with pytest.raises(ValueError):
            deserialize_principal(bad)


def test_unregister_broker_and_voter_changes_forwarded_need_alter_on_the_cluster(cluster: Any) -> None:
    """UnregisterBroker (64) and RemoveRaftVoter (81) sent to the broker go to the controller in an envelope, which
    checks Alter on the Cluster of the client it names (Kafka 4.3's ControllerApis): alice is refused, the super
    user gets the controller's own answer (klog's broker listener did not serve either before 2026-12-07)."""
    assert create_topic(admin(cluster, "admin"), "env-ready") == 0   # the broker forwards by now
    port = cluster.client_ports[1]
    unregister = (64, 0, {"broker_id": 77})
    remove_voter = (81, 0, {"cluster_id": None, "voter_id": 77, "voter_directory_id": uuid.UUID(int=7)})
    refused = asyncio.run(_requests_as(port, "alice", [unregister, remove_voter]))
    assert [a.error_code for a in refused] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    allowed = asyncio.run(_requests_as(port, "admin", [unregister, remove_voter]))
    assert (allowed[0].error_code, allowed[0].error_message) == (ErrorCode.BROKER_ID_NOT_REGISTERED,
                                                                 "Broker ID 77 is not currently registered")
    # a static quorum (controller.quorum.voters, kraft.version 0) changes no voter
    assert allowed[1].error_code == ErrorCode.UNSUPPORTED_VERSION


def test_describe_acls_on_the_controller_listener_needs_describe_on_the_cluster(cluster: Any) -> None:
    """``kafka-acls --bootstrap-controller --list`` (DescribeAcls, 29, served by Kafka 4.3's controller listener; not
    by klog's before 2026-12-07): the controller's ACLs for a principal with Describe on the Cluster."""
    superuser = admin(cluster, "admin")
    allow_alice_to_create(superuser, "acl-listed-")
    port = cluster.controller_ports[CONTROLLER]
    any_acl = (29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                       "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    (refused,) = asyncio.run(_requests_as(port, "intruder", [any_acl]))
    assert (refused.error_code, list(refused.resources)) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])

    def listed() -> list[str]:
        (answer,) = asyncio.run(_requests_as(port, "controller", [any_acl]))
        assert answer.error_code == ErrorCode.NONE, answer
        return [r.resource_name for r in answer.resources]

    deadline = time.monotonic() + 30
    while "acl-listed-" not in listed() and time.monotonic() < deadline:   # the controller applied the ACL
        time.sleep(0.5)
    assert "acl-listed-" in listed()

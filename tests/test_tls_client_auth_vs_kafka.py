"""``ssl.client.auth`` on the wire, on klog and on Apache Kafka 4.x from the same properties: an SSL listener that
requires client certificates and one that requests them, ``ssl.principal.mapping.rules`` mapping a certificate's
DN to its CN, Kafka's StandardAuthorizer with ``User:ANONYMOUS`` a super user and ``User:client`` allowed to
describe one topic. The principal a connection gets is seen through Metadata's authorization: a certificate's
connection is ``User:client`` (its topic described, the other refused TOPIC_AUTHORIZATION_FAILED), one without a
certificate on the requesting listener is ``User:ANONYMOUS`` (both described); without a certificate the
requiring listener fails the handshake; plaintext bytes sent to a TLS listener close that connection and the
listener serves on."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from klog.protocol import ApiKey, decode_response, encode_request  # noqa: E402
from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import free_port, one_broker  # noqa: E402
from klog.testing.tls_probe import connect  # noqa: E402
from klog.testing.wire import read_frame  # noqa: E402

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

MINE, OTHER = "client-topic", "other-topic"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return {"ca": ca, "broker": ca.issue("broker"), "client": ca.issue("client")}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def ports(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pki: dict[str, object]
          ) -> Iterator[dict[str, int]]:
    """The REQUIRED and REQUESTED SSL listeners' ports of a klog broker or an Apache Kafka broker."""
    ca, broker = pki["ca"], pki["broker"]
    required, requested = free_port(), free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,REQUIRED:SSL,REQUESTED:SSL",
             "num.partitions": 1, "offsets.topic.replication.factor": 1,
             "ssl.keystore.type": "PEM", "ssl.keystore.location": broker.keystore_file,  # type: ignore[attr-defined]
             "ssl.truststore.type": "PEM", "ssl.truststore.location": ca.ca_file,  # type: ignore[attr-defined]
             "listener.name.required.ssl.client.auth": "required",
             "listener.name.requested.ssl.client.auth": "requested",
             "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)(,.*)?$/$1/L,DEFAULT",
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             # the PLAINTEXT listeners (the admin below, Kafka's controller) are ANONYMOUS
             "super.users": "User:ANONYMOUS"}
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), props,
                    extra_listeners=[f"REQUIRED://127.0.0.1:{required}",
                                     f"REQUESTED://127.0.0.1:{requested}"]) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(MINE, 1, 1), NewTopic(OTHER, 1, 1)]).values():
            future.result(30)
        allow = AclBinding(ResourceType.TOPIC, MINE, ResourcePatternType.LITERAL, "User:client", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([allow]).values():
            future.result(30)
        yield {"required": required, "requested": requested}


def _described(port: int, pki: dict[str, object], with_certificate: bool) -> dict[str, int]:
    """Metadata of both topics over a TLS connection to ``port``: topic -> error code."""
    client = pki["client"] if with_certificate else None
    with connect(("127.0.0.1", port), pki["ca"].ca_file, client) as tls:  # type: ignore[attr-defined]
        tls.sendall(encode_request(ApiKey.METADATA, 9, 1, "tls-client-auth-test",
                                   {"topics": [{"name": MINE}, {"name": OTHER}],
                                    "allow_auto_topic_creation": False}))
        _, answer = decode_response(ApiKey.METADATA, 9, read_frame(tls))
    return {topic.name: topic.error_code for topic in answer.topics}


@pytest.mark.parametrize("listener", ["required", "requested"])
def test_a_certificate_is_the_principal_its_dn_maps_to(ports: dict[str, int], pki: dict[str, object],
                                                       listener: str) -> None:
    assert _described(ports[listener], pki, with_certificate=True) == {
        MINE: ErrorCode.NONE, OTHER: ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_no_certificate_on_the_requesting_listener_is_anonymous(ports: dict[str, int], pki: dict[str, object]
                                                                ) -> None:
    assert _described(ports["requested"], pki, with_certificate=False) == {
        MINE: ErrorCode.NONE, OTHER: ErrorCode.NONE}


def test_no_certificate_on_the_requiring_listener_fails_the_handshake(ports: dict[str, int],
                                                                      pki: dict[str, object]) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _described(ports["required"], pki, with_certificate=False)


def test_plaintext_bytes_to_a_tls_listener_close_the_connection_and_it_serves_on(ports: dict[str, int],
                                                                                 pki: dict[str, object]) -> None:
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", ports["required"]), timeout=15) as raw:
        raw.sendall(struct.pack(">i", len(body)) + body)
        try:
            while raw.recv(4096):   # a TLS alert may come first
                pass
        except ConnectionResetError:
            pass
    assert _described(ports["required"], pki, with_certificate=True)[MINE] == ErrorCode.NONE

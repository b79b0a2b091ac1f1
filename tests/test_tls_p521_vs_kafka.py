"""P-521 on an mTLS listener, on klog and on Apache Kafka 4.3 from the same properties: the broker's keystore is a
P-521 key, its truststore a P-521 CA (signing with SHA-512), ``ssl.client.auth=required``, and clients present
P-521 certificates that CA signed. Kafka (Java's JSSE) serves all of it; klog serves it from its native TLS session
(klog_core::tls_p521: RustCrypto's p521 in rustls's ring provider), with no fallback to Python's ssl module.
confluent-kafka, kcat and Kafka's Java console clients produce and consume; the principal is mapped from the client
certificate's DN (``ssl.principal.mapping.rules``) and checked by the StandardAuthorizer: only the client whose CN
the ACLs name may write, another client of the same CA is refused TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from klog.testing import kafka_tools as kt  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import free_port, one_broker_node  # noqa: E402
from klog.testing.tls_probe import produce_and_consume  # noqa: E402

TOPIC = "p521"
FALLBACK = "served by Python's ssl module, not klog's native TLS session"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A P-521 CA signing with SHA-512, the broker's P-521 certificate, and two P-521 clients of it."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("p521-pki"), "P-521 CA", curve=ec.SECP521R1(),
                              digest=hashes.SHA512())
    return {"ca": ca, "broker": ca.issue("broker", curve=ec.SECP521R1()),
            "client": ca.issue("p521client", curve=ec.SECP521R1()),
            "stranger": ca.issue("stranger", curve=ec.SECP521R1())}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, pki):
    """(SSL listener bootstrap, the klog process or None) of a broker whose SSL listener serves the P-521 keystore
    and requires client certificates of the P-521 CA; User:p521client may read and write the topic."""
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL", "node.id": 1,
             "num.partitions": 1, "offsets.topic.replication.factor": 1,
             "listener.name.ssl.ssl.keystore.type": "PEM",
             "listener.name.ssl.ssl.keystore.location": pki["broker"].keystore_file,
             "listener.name.ssl.ssl.truststore.type": "PEM",
             "listener.name.ssl.ssl.truststore.location": pki["ca"].ca_file,
             "listener.name.ssl.ssl.client.auth": "required",
             "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),O=.*$/$1/L,DEFAULT",
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             # the PLAINTEXT listeners (the admin below, Kafka's controller) are ANONYMOUS
             "super.users": "User:ANONYMOUS"}
    with one_broker_node(request.param, tmp_path_factory.mktemp(request.param), props,
                         extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) as (bootstrap, node):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        allow = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:p521client", "*",
                            AclOperation.ALL, AclPermissionType.ALLOW),
                 AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:p521client", "*",
                            AclOperation.ALL, AclPermissionType.ALLOW)]
        for future in admin.create_acls(allow).values():
            future.result(30)
        yield f"127.0.0.1:{ssl_port}", node


def _conf(server, pki, client: str) -> dict[str, object]:
    issued = pki[client]
    return {"bootstrap.servers": server[0], "security.protocol": "SSL", "ssl.ca.location": pki["ca"].ca_file,
            "ssl.certificate.location": issued.cert_file, "ssl.key.location": issued.key_file,
            "ssl.endpoint.identification.algorithm": "https", "socket.timeout.ms": 10000}


def _served_natively(node) -> None:
    if node is not None:
        assert any("listener SSL: TLS served by klog's native TLS session" in ln for ln in node.lines), node.lines
        assert not any(FALLBACK in ln for ln in node.lines), [ln for ln in node.lines if FALLBACK in ln]


def test_confluent_kafka_with_a_p521_client_certificate_is_the_principal_of_its_dn(server, pki):
    """The P-521 client produces and consumes as User:p521client (its CN, by the mapping rule); the other P-521
    client of the same CA completes the handshake but, as User:stranger, is refused TOPIC_AUTHORIZATION_FAILED."""
    produce_and_consume(_conf(server, pki, "client"), TOPIC)
    errors: list[KafkaError] = []
    producer = Producer({**_conf(server, pki, "stranger"), "message.timeout.ms": 15000})
    producer.produce(TOPIC, b"refused", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert [e.code() if e is not None else None for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    _served_natively(server[1])


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by tools/install-peers.sh")
def test_kcat_with_a_p521_client_certificate(server, pki):
    conf = _conf(server, pki, "client")
    args = ["kcat", "-b", str(conf.pop("bootstrap.servers"))]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    value = f"kcat-{uuid.uuid4()}"
    produced = subprocess.run(args + ["-P", "-t", TOPIC], input=value, text=True, capture_output=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    out = subprocess.run(args + ["-C", "-t", TOPIC, "-o", "beginning", "-e", "-q"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0 and value in out.stdout, out.stderr
    _served_natively(server[1])


@pytest.mark.java
def test_the_java_clients_with_a_p521_pem_keystore(server, pki, tmp_path):
    """Kafka's console producer and consumer with the P-521 client's PEM keystore and the CA's PEM truststore."""
    libs = kt.kafka_libs_dir(__file__)
    if libs is None or not kt.java_available():
        pytest.skip("the Kafka jars and java (tools/install-peers.sh)")
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.keystore.type=PEM\n"
                      f"ssl.keystore.location={pki['client'].keystore_file}\n"
                      f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca'].ca_file}\n")
    value = f"java-{uuid.uuid4()}"
    produced = kt.run_kafka_tool(kt.CONSOLE_PRODUCER, "--bootstrap-server", server[0], "--topic", TOPIC,
                                 "--command-config", str(config), input=value + "\n", libs=libs)
    assert produced.returncode == 0, produced.stderr
    consumed = kt.run_kafka_tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", server[0], "--topic", TOPIC,
                                 "--command-config", str(config), "--from-beginning", "--timeout-ms", "20000",
                                 libs=libs)
    assert value in consumed.stdout.splitlines(), consumed.stderr[-2000:]
    _served_natively(server[1])


@pytest.fixture(scope="module")
def sha512_pki(tmp_path_factory):
    """A P-256 CA and a P-384 CA that sign with SHA-512 (ecdsa-with-SHA512: ring verifies ECDSA with SHA-256/384
    only), one truststore holding both, the broker's certificate and a client of each."""
    root = tmp_path_factory.mktemp("sha512-pki")
    p256 = CertificateAuthority(root / "p256", "P-256 SHA-512 CA", curve=ec.SECP256R1(), digest=hashes.SHA512())
    p384 = CertificateAuthority(root / "p384", "P-384 SHA-512 CA", curve=ec.SECP384R1(), digest=hashes.SHA512())
    both = root / "both-cas.pem"
    both.write_text(p256.pem + p384.pem)
    return {"ca": p256, "truststore": str(both), "broker": p256.issue("broker"),
            "p256-client": p256.issue("p256client"), "p384-client": p384.issue("p384client", curve=ec.SECP384R1())}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def sha512_server(request, tmp_path_factory, sha512_pki):
    """(SSL listener address, the klog process or None) of an mTLS listener trusting the two SHA-512 CAs."""
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL", "node.id": 1,
             "listener.name.ssl.ssl.keystore.type": "PEM",
             "listener.name.ssl.ssl.keystore.location": sha512_pki["broker"].keystore_file,
             "listener.name.ssl.ssl.truststore.type": "PEM",
             "listener.name.ssl.ssl.truststore.location": sha512_pki["truststore"],
             "listener.name.ssl.ssl.client.auth": "required"}
    with one_broker_node(request.param, tmp_path_factory.mktemp(f"sha512-{request.param}"), props,
                         extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) as (_bootstrap, node):
        yield ("127.0.0.1", ssl_port), node


@pytest.mark.parametrize("client", ["p256-client", "p384-client"])
def test_client_certificates_signed_with_ecdsa_sha512_on_p256_and_p384_are_admitted(sha512_server, sha512_pki,
                                                                                    client):
    from klog.testing.tls_probe import admits

    address, node = sha512_server
    assert admits(address, sha512_pki["ca"].ca_file, sha512_pki[client])
    _served_natively(node)

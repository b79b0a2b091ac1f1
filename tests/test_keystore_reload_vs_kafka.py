"""A TLS listener's keystore replaced without a restart, on klog and on Apache Kafka 4.3 from the same properties:
``kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
listener.name.ssl.ssl.keystore.location=...`` makes new connections get the new certificate while a connection
opened before keeps working; a keystore that does not load, or whose certificate has another subject (Kafka's
``ssl.allow.dn.changes=false``), is refused with the same error code and changes nothing; a truststore replaced
on an mTLS listener makes new connections trust the CA it adds; an inline PEM key and chain are replaced as well."""

from __future__ import annotations

import shutil
import ssl
import time

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402
from cryptography import x509  # noqa: E402

from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.testing import kafka_tools as kt  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port, one_broker  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402
from klog.testing.tls_probe import (  # noqa: E402
    admits,
    alter_broker_config,
    api_versions_v0,
    connect,
    served_certificate,
    wait_for_served_serial,
)

pytestmark = pytest.mark.java

KEY = "listener.name.ssl.ssl.keystore.location"
TRUSTSTORE = "listener.name.ssl.ssl.truststore.location"
#: how long a change may take to reach the listener (the broker applies the committed record)
APPLY_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two keystores of the same subject (the second a renewal: a new key and serial), one of another subject."""
    root = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(root)
    stores = {}
    for label, name in (("first", "broker"), ("renewed", "broker"), ("other", "impostor")):
        issued = ca.issue(name)
        stores[label] = str(root / f"{label}-keystore.pem")
        shutil.copy(issued.keystore_file, stores[label])
    return {"ca": ca, **stores}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, pki):
    """(plaintext bootstrap, SSL listener address) of a klog broker or an Apache Kafka broker, node id 1."""
    tmp_path = tmp_path_factory.mktemp(request.param)
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
             "ssl.keystore.type": "PEM", KEY: pki["first"]}
    with one_broker(request.param, tmp_path, {**props, "node.id": 1},
                    extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) as bootstrap:
        yield bootstrap, ("127.0.0.1", ssl_port)


def _serial(path: str) -> int:
    return x509.load_pem_x509_certificate(open(path, "rb").read()).serial_number


def _served_serial(address, ca_file) -> int:
    return served_certificate(address, ca_file).serial_number


def _alter(bootstrap: str, value: str) -> tuple[int, str]:
    """IncrementalAlterConfigs SET of the keystore on broker 1 with confluent-kafka: (error code, message)."""
    return alter_broker_config(bootstrap, KEY, value)


def test_kafka_configs_replaces_the_keystore_for_new_connections_and_open_ones_continue(server, pki):
    plaintext, address = server
    ca = pki["ca"].ca_file
    assert _served_serial(address, ca) == _serial(pki["first"])
    before = connect(address, ca)
    try:
        assert api_versions_v0(before, 1) == 0
        result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", plaintext, "--entity-type", "brokers",
                                   "--entity-name", "1", "--alter", "--add-config", f"{KEY}={pki['renewed']}")
        assert result.returncode == 0, result.stderr
        wait_for_served_serial(address, ca, _serial(pki["renewed"]), APPLY_TIMEOUT_S)
        described = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", plaintext, "--entity-type",
                                      "brokers", "--entity-name", "1", "--describe")
        assert described.returncode == 0, described.stderr
        assert f"{KEY}={pki['renewed']}" in described.stdout, described.stdout
        assert api_versions_v0(before, 2) == 0   # opened with the first certificate, still served
        assert x509.load_der_x509_certificate(before.getpeercert(binary_form=True)).serial_number == \
            _serial(pki["first"])
    finally:
        before.close()


def test_a_keystore_that_does_not_load_or_changes_the_subject_is_refused(server, pki, tmp_path):
    plaintext, address = server
    ca = pki["ca"].ca_file
    served = _served_serial(address, ca)
    garbage = tmp_path / "garbage-keystore.pem"
    garbage.write_text("not a keystore\n")
    for value in (str(tmp_path / "missing-keystore.pem"), str(garbage)):
        code, message = _alter(plaintext, value)
        assert code == ErrorCode.INVALID_REQUEST, message
        assert value in message
    code, message = _alter(plaintext, pki["other"])
    assert code == ErrorCode.INVALID_REQUEST, message
    assert "DistinguishedName does not match" in message and "CN=impostor" in message
    assert _served_serial(address, ca) == served


@pytest.fixture(scope="module")
def mtls_pki(tmp_path_factory):
    """The broker's CA (and the truststore of its clients' CA at start), and a client of another CA."""
    root = tmp_path_factory.mktemp("mtls-pki")
    broker_ca = CertificateAuthority(root / "broker-ca", name="broker CA")
    other_ca = CertificateAuthority(root / "other-ca", name="other CA")
    both = root / "both-cas.pem"
    both.write_text(broker_ca.pem + other_ca.pem)
    return {"broker_ca": broker_ca, "broker": broker_ca.issue("broker"), "client": other_ca.issue("client"),
            "both": str(both)}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def mtls_server(request, tmp_path_factory, mtls_pki):
    """(plaintext bootstrap, SSL listener address) of a broker whose SSL listener requires client certificates."""
    tmp_path = tmp_path_factory.mktemp(f"mtls-{request.param}")
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
             "ssl.keystore.type": "PEM", KEY: mtls_pki["broker"].keystore_file,
             "ssl.truststore.type": "PEM", TRUSTSTORE: mtls_pki["broker_ca"].ca_file,
             "listener.name.ssl.ssl.client.auth": "required"}
    with one_broker(request.param, tmp_path, {**props, "node.id": 1},
                    extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) as bootstrap:
        yield bootstrap, ("127.0.0.1", ssl_port)


def test_kafka_configs_replaces_the_truststore_and_new_connections_trust_the_added_ca(mtls_server, mtls_pki):
    plaintext, address = mtls_server
    assert not admits(address, mtls_pki["broker_ca"].ca_file, mtls_pki["client"])   # its CA is not trusted yet
    result = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", plaintext, "--entity-type", "brokers",
                               "--entity-name", "1", "--alter", "--add-config", f"{TRUSTSTORE}={mtls_pki['both']}")
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + APPLY_TIMEOUT_S
    while not admits(address, mtls_pki["broker_ca"].ca_file, mtls_pki["client"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert admits(address, mtls_pki["broker_ca"].ca_file, mtls_pki["client"]), "a client of the CA added to the truststore is still refused"


CHAIN = "listener.name.ssl.ssl.keystore.certificate.chain"
INLINE_KEY = "listener.name.ssl.ssl.keystore.key"


@pytest.fixture(scope="module")
def inline_pki(tmp_path_factory):
    """A certificate and its renewal (same subject), as inline PEM."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("inline-pki"))
    return {"ca": ca, "first": ca.issue("broker"), "renewed": ca.issue("broker")}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def inline_server(request, tmp_path_factory, inline_pki):
    """(plaintext bootstrap, SSL listener address) of a broker whose SSL listener's key and chain are inline PEM."""
    tmp_path = tmp_path_factory.mktemp(f"inline-{request.param}")
    ssl_port = free_port()
    first = inline_pki["first"]
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
             "ssl.keystore.type": "PEM", CHAIN: first.cert_pem.strip(), INLINE_KEY: first.key_pem.strip()}
    if request.param == "klog":
        with BrokerProcess(tmp_path / "data", {
                **props, "node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}"}) as node:
            yield node.bootstrap_servers, ("127.0.0.1", ssl_port)
        return
    try:
        find_kafka_libs()
    except Exception as exc:  # the jars are fetched by tools/install-peers.sh
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    port, controller = free_port(), free_port()
    escaped = {key: value.replace("\n", "\\n") if "-----" in str(value) else value for key, value in props.items()}
    with apache_kafka(tmp_path, port, heap="512m", config={
            **escaped, "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},"
                                    f"CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}"}) as bootstrap:
        yield str(bootstrap), ("127.0.0.1", ssl_port)


def test_inline_pem_key_and_chain_are_replaced_for_new_connections(inline_server, inline_pki):
    plaintext, address = inline_server
    ca = inline_pki["ca"].ca_file
    renewed = inline_pki["renewed"]
    serial = x509.load_pem_x509_certificate(renewed.cert_pem.encode()).serial_number
    assert _served_serial(address, ca) == x509.load_pem_x509_certificate(
        inline_pki["first"].cert_pem.encode()).serial_number
    admin = AdminClient({"bootstrap.servers": plaintext})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry(CHAIN, renewed.cert_pem.strip(), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(INLINE_KEY, renewed.key_pem.strip(), incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_for_served_serial(address, ca, serial, APPLY_TIMEOUT_S)


def _anonymous_admitted(address, ca_file) -> bool:
    """Whether a connection presenting no client certificate is answered (ApiVersions)."""
    try:
        with connect(address, ca_file) as tls:
            return api_versions_v0(tls, 4) == 0
    except (ssl.SSLError, ConnectionError, AssertionError, OSError):
        return False


def test_a_listeners_other_tls_settings_are_stored_but_the_running_listener_keeps_its_own(mtls_server, mtls_pki):
    """Kafka accepts ssl.client.auth, ssl.cipher.suites and ssl.enabled.protocols as a listener's dynamic
    configs and kafka-configs describes them, but an existing listener keeps the settings it started with (Kafka
    4.3 applies them to listeners added later only); a bad value, or the setting without its listener name, is
    INVALID_REQUEST."""
    plaintext, address = mtls_server
    ca = mtls_pki["broker_ca"].ca_file
    assert not _anonymous_admitted(address, ca)
    changes = {"listener.name.ssl.ssl.client.auth": "none",
               "listener.name.ssl.ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
               "listener.name.ssl.ssl.enabled.protocols": "TLSv1.2"}
    for key, value in changes.items():
        assert alter_broker_config(plaintext, key, value) == (0, ""), key
    described = kt.run_kafka_tool(kt.CONFIG_COMMAND, "--bootstrap-server", plaintext, "--entity-type", "brokers",
                                  "--entity-name", "1", "--describe")
    assert described.returncode == 0, described.stderr
    for key, value in changes.items():
        assert f"  {key}={value} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{key}={value}" in described.stdout, \
            described.stdout
    time.sleep(3)   # as long as the keystore changes above take to apply
    assert not _anonymous_admitted(address, ca)
    with connect(address, ca) as tls:
        assert tls.version() == "TLSv1.3"

    code, message = alter_broker_config(plaintext, "listener.name.ssl.ssl.client.auth", "bogus")
    assert code == ErrorCode.INVALID_REQUEST and "Invalid value bogus for configuration ssl.client.auth" in message, \
        message
    code, message = alter_broker_config(plaintext, "ssl.client.auth", "required")
    assert code == ErrorCode.INVALID_REQUEST and "Configs cannot be updated dynamically for existing listener" in \
        message, message

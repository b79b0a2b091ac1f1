"""Sensitive dynamic broker configs and Kafka's password encoder settings, on klog and on Apache Kafka 4.3 from the
same properties.

Kafka 4 removed the KIP-226 password encoder with ZooKeeper: ``password.encoder.secret``,
``password.encoder.old.secret``, ``password.encoder.keyfactory.algorithm``, ``password.encoder.cipher.algorithm``,
``password.encoder.key.length`` and ``password.encoder.iterations`` are accepted in server.properties and unused
(described as any supplied key Kafka does not know: static, read-only, null and sensitive), and a password set at
runtime (``listener.name.<l>.ssl.keystore.password`` with
IncrementalAlterConfigs) is kept unencrypted in the metadata log's ConfigRecord, used by the listener, and described
as null and sensitive."""

from __future__ import annotations

import glob
import os
import socket
import ssl
import time

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402
from cryptography import x509  # noqa: E402

from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import free_port, one_broker  # noqa: E402

pytestmark = pytest.mark.java

ENCODER = {"password.encoder.secret": "encoder-secret", "password.encoder.old.secret": "older-secret",
           "password.encoder.keyfactory.algorithm": "PBKDF2WithHmacSHA512",
           "password.encoder.cipher.algorithm": "AES/CBC/PKCS5Padding", "password.encoder.key.length": 128,
           "password.encoder.iterations": 4096}
LOCATION = "listener.name.ssl.ssl.keystore.location"
PASSWORD = "listener.name.ssl.ssl.keystore.password"
#: a per-mechanism SASL setting (unused on an SSL listener, accepted and described all the same)
JAAS = "listener.name.ssl.plain.sasl.jaas.config"
DEFAULT_CONFIG = 5
#: DescribeConfigs' config_source of a broker's own dynamic config (Kafka's ConfigSource)
DYNAMIC_BROKER_CONFIG = 2
STATIC_BROKER_CONFIG = 4


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(root)
    first, renewed = ca.issue("broker"), ca.issue("broker")
    return {"ca": ca, "first": first.pkcs12(root / "first.p12", "first-pass"),
            "renewed": renewed.pkcs12(root / "renewed.p12", "renewed-pass-7f3a"),
            "renewed_serial": x509.load_pem_x509_certificate(renewed.cert_pem.encode()).serial_number}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, pki):
    """(bootstrap, SSL listener address, data root) of a broker (node id 1) with a PKCS12 keystore on its SSL
    listener and every password.encoder.* setting."""
    root = tmp_path_factory.mktemp(request.param)
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
             "listener.name.ssl.ssl.keystore.type": "PKCS12", LOCATION: pki["first"], PASSWORD: "first-pass",
             JAAS: 'org.apache.kafka.common.security.plain.PlainLoginModule required user_app="app-secret";',
             "node.id": 1, **ENCODER}
    with one_broker(request.param, root, props, extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) as bootstrap:
        yield bootstrap, ("127.0.0.1", ssl_port), root


def _describe(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("broker", "1")
    return admin.describe_configs([resource])[resource].result(30)


def _served_serial(address, ca_file):
    context = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection(address, timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=address[0]) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_password_encoder_settings_are_accepted_and_described_as_unknown_static_secrets(server):
    bootstrap, _, _ = server
    described = _describe(bootstrap)
    shown = {name: (e.value, e.is_sensitive, int(e.source), e.is_read_only) for name, e in described.items()
             if name.startswith("password.encoder.")}
    assert shown == {name: (None, True, STATIC_BROKER_CONFIG, True) for name in ENCODER}


def test_static_listener_settings_are_described_as_static_and_secrets_as_null(server, pki):
    """``kafka-configs --describe --all`` on a broker: every listener.name.* line of server.properties, read-only,
    STATIC_BROKER_CONFIG, the passwords and JAAS configs null and sensitive, with the setting it overrides as a
    synonym (runs before the keystore is changed at runtime: the module's broker is shared)."""
    bootstrap, _, _ = server
    described = _describe(bootstrap)
    shown = {name: (e.value, e.is_sensitive, int(e.source), e.is_read_only, e.is_default)
             for name, e in described.items() if name.startswith("listener.name.")}
    assert shown == {"listener.name.ssl.ssl.keystore.type": ("PKCS12", False, STATIC_BROKER_CONFIG, True, False),
                     LOCATION: (pki["first"], False, STATIC_BROKER_CONFIG, True, False),
                     PASSWORD: (None, True, STATIC_BROKER_CONFIG, True, False),
                     JAAS: (None, True, STATIC_BROKER_CONFIG, True, False)}
    synonyms = {name: [(s.name, s.value, int(s.source)) for s in described[name].synonyms.values()]
                for name in ("listener.name.ssl.ssl.keystore.type", PASSWORD)}
    assert synonyms == {
        "listener.name.ssl.ssl.keystore.type": [("listener.name.ssl.ssl.keystore.type", "PKCS12", STATIC_BROKER_CONFIG),
                                                ("ssl.keystore.type", "JKS", DEFAULT_CONFIG)],
        PASSWORD: [(PASSWORD, None, STATIC_BROKER_CONFIG)]}
    # the settings they override are dynamic broker configs on Kafka (not read-only), unset here
    assert {(described[k].is_read_only, described[k].is_default) for k in ("ssl.keystore.location",
                                                                           "ssl.keystore.password")} == {(False, True)}


def test_a_keystore_password_set_at_runtime_is_used_and_described_as_null_and_sensitive(server, pki):
    bootstrap, address, root = server
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry(LOCATION, pki["renewed"], incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(PASSWORD, "renewed-pass-7f3a", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)

    deadline = time.monotonic() + 60   # the listener loaded the store with the password (a loaded machine: slow)
    while _served_serial(address, pki["ca"].ca_file) != pki["renewed_serial"]:
        assert time.monotonic() < deadline, "the listener does not serve the keystore opened with the new password"
        time.sleep(0.2)

    deadline = time.monotonic() + 30   # Kafka's DescribeConfigs may show the previous value for a moment
    while (described := _describe(bootstrap))[LOCATION].value != pki["renewed"] and time.monotonic() < deadline:
        time.sleep(0.5)
    password, location = described[PASSWORD], described[LOCATION]
    assert (password.value, password.is_sensitive, int(password.source)) == (None, True, DYNAMIC_BROKER_CONFIG)
    assert (location.value, location.is_sensitive, int(location.source)) == \
        (pki["renewed"], False, DYNAMIC_BROKER_CONFIG)
    assert location.is_read_only and password.is_read_only   # Kafka: only the unprefixed names are dynamic

    # ... and kept in the clear in the metadata log's ConfigRecord (Kafka 4 encrypts nothing there)
    def in_the_clear():
        segments = glob.glob(os.path.join(str(root), "**", "__cluster_metadata-0", "*.log"), recursive=True)
        return any(b"renewed-pass-7f3a" in open(path, "rb").read() for path in segments)

    deadline = time.monotonic() + 20
    while not in_the_clear():
        assert time.monotonic() < deadline, f"the password is not in a metadata log segment under {root}"
        time.sleep(0.5)

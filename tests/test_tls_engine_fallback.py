"""TLS settings klog's native TLS session cannot serve (an Ed448 key, OpenSSL's CBC suites only) with
``klog.tls.engine`` left at its default: served by Python's ssl module, at start-up (one warning per listener) and
when a dynamic keystore change brings them (``kafka-configs``/IncrementalAlterConfigs of
``listener.name.ssl.ssl.keystore.location``: new connections then served by the ssl module under the native
engine's protocol, connections already open kept; a keystore the native session serves again brings it back). With
``klog.tls.engine=native`` set, the same change is refused INVALID_REQUEST with the reason, as at start-up.

P-521 keys and CAs, which the native session once sent to the ssl module too, are served natively now
(klog_core::tls_p521): Apache Kafka 4.3 takes a P-521 keystore and a truststore with a P-521 CA by reload, and so
does klog, with no fallback. (Kafka's PEM keystores read RSA, DSA and EC keys only, so the Ed448 reload is klog's
alone.)"""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import time

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import free_port, one_broker_node  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402
from klog.testing.tls_probe import (  # noqa: E402
    admits,
    alter_broker_config,
    api_versions_v0,
    connect,
    produce_and_consume,
    served_certificate,
    wait_for_served_serial,
)

KEY = "listener.name.ssl.ssl.keystore.location"
TRUSTSTORE = "listener.name.ssl.ssl.truststore.location"
#: how long a change may take to reach the listener (the broker applies the committed record)
APPLY_TIMEOUT_S = 30
FALLBACK = "served by Python's ssl module, not klog's native TLS session"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Keystores of one subject: P-256 (the native session serves it), its P-521 renewal (served natively too, as
    Java's does), an Ed448 one (only the ssl module serves it), and a P-256 one again; a client certificate for
    mTLS."""
    root = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(root)
    stores = {}
    for label, curve, ed448_key in (("first", None, False), ("p521", ec.SECP521R1(), False), ("ed448", None, True),
                                    ("renewed", None, False)):
        issued = ca.issue("broker", curve=curve, ed448_key=ed448_key)
        stores[label] = str(root / f"{label}-keystore.pem")
        shutil.copy(issued.keystore_file, stores[label])
    return {"ca": ca, "client": ca.issue("client"), **stores}


def _serial(path: str) -> int:
    return x509.load_pem_x509_certificate(open(path, "rb").read()).serial_number


def _alter(bootstrap: str, value: str) -> tuple[int, str]:
    """IncrementalAlterConfigs SET of the SSL listener's keystore on broker 1: (error code, message)."""
    return alter_broker_config(bootstrap, KEY, value)


def _round_trip(address, ca_file: str, topic: str) -> None:
    """confluent-kafka produces a record over the SSL listener (verifying the certificate it serves against the
    CA, host name included) and a consumer reads it back over the same listener."""
    produce_and_consume({"bootstrap.servers": f"{address[0]}:{address[1]}", "security.protocol": "SSL",
                         "ssl.ca.location": ca_file, "ssl.endpoint.identification.algorithm": "https",
                         "socket.timeout.ms": 10000}, topic)


def test_a_listener_the_ssl_module_serves_at_start_up_is_logged_once(tmp_path, pki):
    """Two listeners whose settings only the ssl module serves (an Ed448 key; OpenSSL's CBC suites only): each is
    named in one warning, not one per reading of the settings; a TLS client is served on both, and on a third
    listener with a P-521 key, which the native session serves (no warning)."""
    ca = pki["ca"].ca_file
    node = BrokerProcess(tmp_path / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,ED448://127.0.0.1:0,CBC://127.0.0.1:0,P521://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,ED448:SSL,CBC:SSL,P521:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["first"],
        "listener.name.ed448.ssl.keystore.location": pki["ed448"],
        "listener.name.p521.ssl.keystore.location": pki["p521"],
        "listener.name.cbc.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"})
    with node:
        line = next(ln for ln in node.lines if "listening on" in ln)
        ports = {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}
        for name in ("ED448", "CBC", "P521"):
            port = ports[name]
            context = ssl.create_default_context(cafile=ca)
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                     server_hostname="127.0.0.1") as tls:
                assert api_versions_v0(tls, 1) == 0
        log = node.log_text()
    warnings = [ln for ln in log.splitlines() if FALLBACK in ln]
    assert len([ln for ln in warnings if "listener ED448:" in ln]) == 1, warnings
    assert len([ln for ln in warnings if "listener CBC:" in ln]) == 1, warnings
    assert len(warnings) == 2, warnings
    assert any("an Ed448 key" in ln for ln in warnings if "listener ED448:" in ln), warnings
    assert "listener P521: TLS served by klog's native TLS session" in log


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("reloaded", 1, 1)])["reloaded"].result(30)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, pki):
    """(plaintext bootstrap, SSL listener address, the klog process or None) of a klog broker (klog.tls.engine at
    its default) or an Apache Kafka broker, node id 1, serving the P-256 keystore; a topic created."""
    tmp_path = tmp_path_factory.mktemp(request.param)
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
             "ssl.keystore.type": "PEM", KEY: pki["first"], "node.id": 1, "num.partitions": 1,
             "offsets.topic.replication.factor": 1}
    with one_broker_node(request.param, tmp_path, props, extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) \
            as (bootstrap, node):
        if node is not None:
            assert any("listener SSL: TLS served by klog's native TLS session" in ln for ln in node.lines)
        _create_topic(bootstrap)
        yield bootstrap, ("127.0.0.1", ssl_port), node


def test_a_p521_keystore_is_taken_by_a_reload_and_served_to_new_clients(server, pki):
    """Kafka takes the P-521 keystore (no error); klog, its engine at its default, too: new connections get the
    P-521 certificate, from the native session (no fallback warning), confluent-kafka produces and consumes over
    the listener verifying it, a connection opened before keeps its certificate and is served. On klog an Ed448
    keystore then moves new connections to the ssl module (one warning naming the listener and why) and still
    serves them; a P-256 keystore after it is served again (by the native session on klog)."""
    plaintext, address, node = server
    ca = pki["ca"].ca_file
    assert served_certificate(address, ca).serial_number == _serial(pki["first"])
    before = connect(address, ca)
    try:
        assert api_versions_v0(before, 1) == 0
        code, message = _alter(plaintext, pki["p521"])
        assert code == 0, message
        wait_for_served_serial(address, ca, _serial(pki["p521"]))
        served = served_certificate(address, ca)
        assert isinstance(served.public_key(), ec.EllipticCurvePublicKey)
        assert served.public_key().curve.name == "secp521r1"
        _round_trip(address, ca, "reloaded")
        assert api_versions_v0(before, 2) == 0   # opened on the first keystore, still served with it
        assert x509.load_der_x509_certificate(before.getpeercert(binary_form=True)).serial_number == \
            _serial(pki["first"])
        if node is not None:
            assert not any(FALLBACK in ln for ln in node.lines), node.lines[-20:]
            assert any("listener SSL: new connections use the reloaded TLS settings (ssl.keystore.location)" in ln
                       for ln in node.lines), node.lines[-20:]
            code, message = _alter(plaintext, pki["ed448"])
            assert code == 0, message
            wait_for_served_serial(address, ca, _serial(pki["ed448"]))
            _round_trip(address, ca, "reloaded")
            warnings = [ln for ln in node.lines if FALLBACK in ln]
            assert len(warnings) == 1 and "listener SSL:" in warnings[0] and "an Ed448 key" in warnings[0] \
                and KEY.removeprefix("listener.name.ssl.") in warnings[0], warnings
        code, message = _alter(plaintext, pki["renewed"])
        assert code == 0, message
        wait_for_served_serial(address, ca, _serial(pki["renewed"]))
        _round_trip(address, ca, "reloaded")
        if node is not None:
            assert any("served by klog's native TLS session again" in ln for ln in node.lines), node.lines[-20:]
            assert len([ln for ln in node.lines if FALLBACK in ln]) == 1
    finally:
        before.close()


def test_an_ed448_keystore_is_refused_when_the_native_engine_is_asked_for(tmp_path, pki):
    """klog.tls.engine=native set: the Ed448 keystore is refused INVALID_REQUEST naming the key and the engine
    (as a start-up with it would be), and the listener keeps its certificate; the P-521 keystore is taken and
    served."""
    ca = pki["ca"].ca_file
    ssl_port = free_port()
    with BrokerProcess(tmp_path / "data", {
            "klog.tls.engine": "native", "node.id": 1,
            "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM", KEY: pki["first"]}) as node:
        address = ("127.0.0.1", ssl_port)
        code, message = _alter(node.bootstrap_servers, pki["ed448"])
        assert code == ErrorCode.INVALID_REQUEST, message
        assert "listener SSL" in message and "an Ed448 key" in message and "klog.tls.engine=ssl" in message, message
        time.sleep(1)
        assert served_certificate(address, ca).serial_number == _serial(pki["first"])
        code, message = _alter(node.bootstrap_servers, pki["p521"])
        assert code == 0, message
        wait_for_served_serial(address, ca, _serial(pki["p521"]))
        with connect(address, ca) as tls:
            assert api_versions_v0(tls, 1) == 0
        assert not any(FALLBACK in ln for ln in node.lines)


def test_client_certificates_are_checked_after_a_reload_to_the_ssl_module(tmp_path, pki):
    """ssl.client.auth=required on the default engine, the keystore reloaded to the Ed448 one: new connections,
    now served by the ssl module, still need a client certificate the truststore trusts (one without is refused,
    one with is served)."""
    ca = pki["ca"].ca_file
    ssl_port = free_port()
    with BrokerProcess(tmp_path / "data", {
            "node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM", KEY: pki["first"], "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca, "ssl.client.auth": "required"}) as node:
        address = ("127.0.0.1", ssl_port)
        code, message = _alter(node.bootstrap_servers, pki["ed448"])
        assert code == 0, message
        deadline = time.monotonic() + APPLY_TIMEOUT_S
        while not any(FALLBACK in ln for ln in node.lines) and time.monotonic() < deadline:
            with connect(address, ca, pki["client"]) as tls:   # a new connection applies the change
                assert api_versions_v0(tls, 1) == 0
            time.sleep(0.2)
        with connect(address, ca, pki["client"]) as tls:
            assert api_versions_v0(tls, 2) == 0
            peer = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
            assert peer.serial_number == _serial(pki["ed448"])
        with pytest.raises((ssl.SSLError, ConnectionError, AssertionError, OSError)):
            with connect(address, ca) as tls:   # TLS 1.3: the refusal comes with the first read
                api_versions_v0(tls, 3)


@pytest.fixture(scope="module")
def p521_ca_pki(tmp_path_factory):
    """The broker's CA (P-256), a second CA whose key is P-521 with a client it signed, and a truststore of both."""
    root = tmp_path_factory.mktemp("p521-ca-pki")
    broker_ca = CertificateAuthority(root / "broker-ca", name="broker CA")
    p521_ca = CertificateAuthority(root / "p521-ca", name="P-521 CA", curve=ec.SECP521R1())
    both = root / "both-cas.pem"
    both.write_text(broker_ca.pem + p521_ca.pem)
    return {"broker_ca": broker_ca, "broker": broker_ca.issue("broker"), "client": p521_ca.issue("client"),
            "both": str(both)}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def mtls_server(request, tmp_path_factory, p521_ca_pki):
    """(plaintext bootstrap, SSL listener address, the klog process or None) of a broker whose SSL listener requires
    client certificates of the broker's CA (klog.tls.engine at its default)."""
    tmp_path = tmp_path_factory.mktemp(f"mtls-{request.param}")
    ssl_port = free_port()
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL", "node.id": 1,
             "ssl.keystore.type": "PEM", KEY: p521_ca_pki["broker"].keystore_file, "ssl.truststore.type": "PEM",
             TRUSTSTORE: p521_ca_pki["broker_ca"].ca_file, "listener.name.ssl.ssl.client.auth": "required"}
    with one_broker_node(request.param, tmp_path, props, extra_listeners=[f"SSL://127.0.0.1:{ssl_port}"]) \
            as (bootstrap, node):
        yield bootstrap, ("127.0.0.1", ssl_port), node


def test_a_truststore_reloaded_with_a_p521_ca_admits_the_clients_it_signed(mtls_server, p521_ca_pki):
    """The truststore of an mTLS listener replaced by one that adds a CA whose key is P-521: Kafka then admits
    the clients that CA signed; so does klog on its default engine, from the native session (no fallback
    warning)."""
    plaintext, address, node = mtls_server
    assert not admits(address, p521_ca_pki["broker_ca"].ca_file, p521_ca_pki["client"])   # its CA is not trusted yet
    code, message = alter_broker_config(plaintext, TRUSTSTORE, p521_ca_pki["both"])
    assert code == 0, message
    deadline = time.monotonic() + APPLY_TIMEOUT_S
    while not admits(address, p521_ca_pki["broker_ca"].ca_file, p521_ca_pki["client"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert admits(address, p521_ca_pki["broker_ca"].ca_file, p521_ca_pki["client"]), "a client of the P-521 CA added to the truststore is refused"
    if node is not None:
        assert not any(FALLBACK in ln for ln in node.lines), node.lines[-20:]
        assert any("listener SSL: new connections use the reloaded TLS settings (ssl.truststore.location)" in ln
                   for ln in node.lines), node.lines[-20:]

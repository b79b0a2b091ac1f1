"""klog._native's sans-IO TLS server session (klog_core::tls, rustls) against Python's ssl module as the client,
with certificates of a test CA: the handshake, many records decrypted in one call, client certificates, the enabled
protocols and cipher suites, and bad settings and bad bytes answered with errors."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from klog._native import TlsError, TlsServerConfig, TlsServerSession
from klog.testing.certs import CertificateAuthority, Issued

Pki = tuple[CertificateAuthority, Issued, Issued]


class Client:
    """Python's ssl module over memory BIOs, talking to a native server session."""

    def __init__(self, context: ssl.SSLContext, server: TlsServerSession) -> None:
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")
        self.server = server

    def flush(self) -> bytes:
        """Hand the client's ciphertext to the server and the server's back: the plaintext the server got."""
        plaintext = self.server.receive(self.outgoing.read())
        self.incoming.write(self.server.outgoing())
        return plaintext

    def handshake(self) -> None:
        for _ in range(10):
            try:
                self.tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            self.flush()
            if done and not self.server.handshaking:
                return
        raise AssertionError("no handshake in 10 rounds")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return ca, ca.issue("broker"), ca.issue("client", hosts=())


def client_context(ca: CertificateAuthority, cert: Issued | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.ca_file)
    if cert is not None:
        context.load_cert_chain(cert.cert_file, cert.key_file)
    return context


def server_config(pki: Pki, **settings: Any) -> TlsServerConfig:
    ca, broker, _ = pki
    return TlsServerConfig(broker.cert_pem.encode(), broker.key_pem.encode(), client_ca_pem=ca.pem.encode(),
                           **settings)


def test_every_record_of_one_read_is_decrypted_in_one_call(pki: Pki) -> None:
    ca = pki[0]
    server = TlsServerSession(server_config(pki))
    client = Client(client_context(ca), server)
    client.handshake()
    assert server.protocol_version == "TLSv1.3"
    assert server.server_name == "localhost"
    assert server.peer_certificates() == []
    # librdkafka's way: a TLS record per 2304 bytes of a request; all of them reach the server in one read
    sent = bytes(range(256)) * 2700
    for start in range(0, len(sent), 2304):
        client.tls.write(sent[start:start + 2304])
    wire = client.outgoing.read()
    assert len(wire) > 300 * 2304
    assert server.receive(memoryview(wire)[:1000]) + server.receive(bytearray(wire[1000:])) == sent

    client.incoming.write(server.send(b"the answer"))
    assert client.tls.read(100) == b"the answer"

    with pytest.raises(ssl.SSLWantReadError):
        client.tls.unwrap()   # sends close_notify, waits for the server's
    assert client.flush() == b""
    assert server.peer_closed
    client.incoming.write(server.close())
    client.tls.unwrap()


def test_a_required_client_certificate_is_checked_and_shown(pki: Pki) -> None:
    ca, _, client_cert = pki
    config = server_config(pki, client_auth="required")
    server = TlsServerSession(config)
    Client(client_context(ca, client_cert), server).handshake()
    # the client's own certificate first (OpenSSL sends the CA's after it)
    assert server.peer_certificates()[0] == ssl.PEM_cert_to_DER_cert(client_cert.cert_pem)

    server = TlsServerSession(config)
    client = Client(client_context(ca), server)
    with pytest.raises(TlsError, match="certificate"):
        client.handshake()
    client.incoming.write(server.outgoing())   # the alert
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"):
        client.tls.read(1)


def test_a_requested_client_certificate_may_be_missing(pki: Pki) -> None:
    ca, _, client_cert = pki
    config = server_config(pki, client_auth="requested")
    server = TlsServerSession(config)
    Client(client_context(ca), server).handshake()
    assert server.peer_certificates() == []
    server = TlsServerSession(config)
    Client(client_context(ca, client_cert), server).handshake()
    assert server.peer_certificates()[0] == ssl.PEM_cert_to_DER_cert(client_cert.cert_pem)


def test_enabled_protocols_and_cipher_suites_bound_the_handshake(pki: Pki) -> None:
    ca = pki[0]
    old_client = client_context(ca)
    old_client.maximum_version = ssl.TLSVersion.TLSv1_2
    server = TlsServerSession(server_config(pki, protocols=["TLSv1.3"]))
    with pytest.raises(TlsError):
        Client(old_client, server).handshake()

    config = server_config(pki, cipher_suites=["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"])
    server = TlsServerSession(config)
    client = Client(old_client, server)
    client.handshake()
    assert server.protocol_version == "TLSv1.2"
    assert server.cipher_suite == "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    assert (client.tls.cipher() or ("",))[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


def test_settings_that_cannot_serve_say_which(pki: Pki) -> None:
    ca, broker, other = pki
    with pytest.raises(ValueError, match="ssl.cipher.suites"):
        server_config(pki, cipher_suites=["TLS_RSA_WITH_AES_128_CBC_SHA"])
    with pytest.raises(ValueError, match="ssl.enabled.protocols"):
        server_config(pki, protocols=["TLSv1.1"])
    with pytest.raises(ValueError, match="ssl.client.auth"):
        server_config(pki, client_auth="sometimes")
    with pytest.raises(ValueError, match="truststore"):
        TlsServerConfig(broker.cert_pem.encode(), broker.key_pem.encode(), client_auth="required")
    with pytest.raises(ValueError, match="private key"):
        TlsServerConfig(broker.cert_pem.encode(), b"not a key")
    with pytest.raises(ValueError, match="does not serve"):
        TlsServerConfig(broker.cert_pem.encode(), other.key_pem.encode())
    with pytest.raises(TypeError, match="bytes-like"):
        TlsServerConfig(broker.cert_pem, broker.key_pem)


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x01\xff\xff" + bytes(6), bytes(100)])
def test_bytes_that_are_not_tls_end_the_session_with_an_alert(pki: Pki, garbage: bytes) -> None:
    server = TlsServerSession(server_config(pki))
    with pytest.raises(TlsError):
        server.receive(garbage)
    assert server.outgoing()[:1] == b"\x15"   # a plaintext alert record: no keys yet


def test_a_record_that_fails_its_authentication_ends_the_session(pki: Pki) -> None:
    server = TlsServerSession(server_config(pki))
    client = Client(client_context(pki[0]), server)
    client.handshake()
    client.tls.write(b"a request")
    wire = bytearray(client.outgoing.read())
    wire[-1] ^= 1
    with pytest.raises(TlsError):
        server.receive(wire)
    assert server.outgoing()

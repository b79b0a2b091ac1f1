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


def test_records_are_decrypted_straight_into_buffers_of_any_size(pki: Pki) -> None:
    server = TlsServerSession(server_config(pki))
    client = Client(client_context(pki[0]), server)
    with pytest.raises(ssl.SSLWantReadError):
        client.tls.do_handshake()
    assert server.receive_into(client.outgoing.read(), bytearray())[1] == 0   # the ClientHello
    client.incoming.write(server.outgoing())
    client.tls.do_handshake()
    sent = bytes(range(256)) * 100
    for start in range(0, len(sent), 2304):
        client.tls.write(sent[start:start + 2304])
    wire = memoryview(client.outgoing.read())   # the client's Finished, then its records
    consumed, written = server.receive_into(wire, bytearray())
    assert not server.handshaking and written == 0 and consumed > 0
    wire = wire[consumed:]
    got = bytearray()
    for room in (1, 7, 1000, 3000, 100_000):   # records split over buffers, many records in one
        target = bytearray(room)
        consumed, written = server.receive_into(wire, memoryview(target))
        wire = wire[consumed:]
        got += target[:written]
        assert written == min(room, len(sent) - len(got) + written)
    assert not wire and bytes(got) == sent
    with pytest.raises(TypeError, match="writable"):
        server.receive_into(b"", b"read-only")


def _receive_reads(server: TlsServerSession, reads: list[bytearray], room: int) -> bytes:
    """Each read (a socket buffer, the session's scratch) decrypted into targets of ``room`` bytes."""
    got = bytearray()
    for read in reads:
        data = memoryview(read)
        while True:
            target = bytearray(room)
            consumed, written = server.receive_into(data, target)
            data = data[consumed:]
            got += target[:written]
            if not data and written < room:
                break
    return bytes(got)


def test_reads_are_decrypted_in_place_and_a_record_cut_at_any_byte_comes_out_whole(pki: Pki) -> None:
    server = TlsServerSession(server_config(pki))
    client = Client(client_context(pki[0]), server)
    client.handshake()
    pieces = (b"request " * 40, b"x", b"tail" * 30)
    client.tls.write(pieces[0])
    read = bytearray(client.outgoing.read())
    target = bytearray(1000)
    assert server.receive_into(read, target) == (len(read), len(pieces[0]))
    assert read[5:5 + len(pieces[0])] == pieces[0]   # TLS 1.3: decrypted where the ciphertext was read
    for cut in range(1, 500):
        for piece in pieces:
            client.tls.write(piece)
        wire = client.outgoing.read()
        assert cut < len(wire)
        # targets of 64 bytes: a record's plaintext also waits in the session for the next target
        assert _receive_reads(server, [bytearray(wire[:cut]), bytearray(wire[cut:])], 64) == b"".join(pieces)
        assert server.plaintext_waiting == 0


def test_plaintext_that_does_not_fit_waits_in_the_session(pki: Pki) -> None:
    server = TlsServerSession(server_config(pki))
    client = Client(client_context(pki[0]), server)
    client.handshake()
    client.tls.write(b"a" * 1000)
    client.tls.write(b"b" * 1000)
    read = bytearray(client.outgoing.read())
    consumed, written = server.receive_into(read, bytearray(300))
    assert written == 300 and server.plaintext_waiting == 700 and consumed < len(read)
    target = bytearray(5000)
    assert server.receive_into(b"", target) == (0, 700)   # the waiting plaintext, no ciphertext needed
    assert server.receive_into(memoryview(read)[consumed:], target) == (len(read) - consumed, 1000)
    assert target[:1000] == b"b" * 1000
    with pytest.raises(ValueError, match="overlap"):
        server.receive_into(memoryview(read)[:10], memoryview(read)[5:])


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


# ---- the listener's settings (klog.security.tls.native_server_config) and the client certificate's subject -------

def _serves(config: TlsServerConfig, ca: CertificateAuthority) -> None:
    server = TlsServerSession(config)
    client = Client(client_context(ca), server)
    client.handshake()
    client.tls.write(b"ping")
    assert client.flush() == b"ping"


def test_native_settings_read_every_keystore_form_the_ssl_engine_reads(pki: Pki, tmp_path: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    from klog.security.tls import TlsConfigError, native_server_config

    ca, broker, _ = pki
    _serves(native_server_config({"ssl.keystore.type": "PEM", "ssl.keystore.location": broker.keystore_file}), ca)
    _serves(native_server_config({"ssl.keystore.key": broker.key_pem,
                                  "ssl.keystore.certificate.chain": broker.cert_pem}), ca)
    store = broker.pkcs12(tmp_path / "broker.p12", "store-pw")
    _serves(native_server_config({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": store,
                                  "ssl.keystore.password": "store-pw"}), ca)
    key = serialization.load_pem_private_key(broker.key_pem.encode(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pw")).decode()
    keystore = tmp_path / "encrypted-keystore.pem"
    keystore.write_text(broker.cert_pem + encrypted)   # the certificate first, then the key
    _serves(native_server_config({"ssl.keystore.location": str(keystore), "ssl.key.password": "key-pw"}), ca)
    # client certificates checked against a PEM file, inline PEM or a PKCS12 truststore
    native_server_config({"ssl.keystore.location": broker.keystore_file, "ssl.client.auth": "required",
                          "ssl.truststore.location": ca.ca_file})
    native_server_config({"ssl.keystore.location": broker.keystore_file, "ssl.client.auth": "requested",
                          "ssl.truststore.certificates": ca.pem})

    for settings, key_name in [
        ({"ssl.keystore.location": str(keystore), "ssl.key.password": "wrong"}, "ssl.keystore.location"),
        ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "ssl.keystore.location"),
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.location": broker.keystore_file, "ssl.client.auth": "required"}, "ssl.truststore.location"),
        ({"ssl.keystore.location": broker.keystore_file, "ssl.cipher.suites": "TLS_RSA_WITH_AES_128_CBC_SHA"},
         "ssl.cipher.suites"),
        ({"ssl.keystore.location": broker.keystore_file, "ssl.enabled.protocols": ["TLSv1.1"]},
         "ssl.enabled.protocols"),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": broker.keystore_file}, "ssl.keystore.type"),
    ]:
        with pytest.raises(TlsConfigError) as raised:
            native_server_config(settings)
        assert raised.value.key == key_name, (settings, raised.value)


def test_the_client_certificate_subject_reads_as_the_ssl_module_reads_it(tmp_path: Any) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from klog.security.tls import PrincipalMapper, distinguished_name, peercert_of

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COUNTRY_NAME, "US")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.LOCALITY_NAME, "Palo Alto")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example, Inc.")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                                        x509.NameAttribute(NameOID.USER_ID, "u42")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "client+1")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(x509.ObjectIdentifier("1.2.3.4.5"), "custom")]),
    ])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    path = tmp_path / "client.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ssl_module = ssl._ssl._test_decode_cert(str(path))   # type: ignore[attr-defined]
    native = peercert_of(cert.public_bytes(serialization.Encoding.DER))
    assert native["subject"] == ssl_module["subject"]
    assert distinguished_name(native) == distinguished_name(ssl_module)
    mapper = PrincipalMapper("RULE:^.*CN=([^,]+),.*$/$1/U,DEFAULT")
    assert mapper.principal(native) == mapper.principal(ssl_module)


def test_p521_keys_and_cas_are_served_and_verified_and_ed448_is_not(tmp_path: Any) -> None:
    """A P-521 CA (signing with SHA-512), a P-521 server key (PKCS#8 and SEC1, raw to TlsServerConfig) and a P-521
    client certificate: handshakes with Python's ssl module as the client over TLS 1.2 and 1.3, the client's
    certificate shown. A P-521 key of another certificate, a truncated one, and an Ed448 key (which the native
    session does not serve) are clear errors, not crashes."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from klog.security.tls import TlsConfigError, native_server_config

    ca = CertificateAuthority(tmp_path / "ca", "P-521 CA", curve=ec.SECP521R1(), digest=hashes.SHA512())
    broker, client = ca.issue("broker", curve=ec.SECP521R1()), ca.issue("client", curve=ec.SECP521R1(), hosts=())
    key = serialization.load_pem_private_key(broker.key_pem.encode(), None)
    sec1 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())
    assert sec1.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    for key_pem in (broker.key_pem.encode(), sec1):
        config = TlsServerConfig(broker.cert_pem.encode(), key_pem, client_ca_pem=ca.pem.encode(),
                                 client_auth="required")
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            context = client_context(ca, client)
            context.minimum_version = context.maximum_version = version
            server = TlsServerSession(config)
            tls_client = Client(context, server)
            tls_client.handshake()
            assert server.protocol_version == version.name.replace("v1_", "v1.")
            assert server.peer_certificates()[0] == ssl.PEM_cert_to_DER_cert(client.cert_pem)
            tls_client.tls.write(b"ping")
            assert tls_client.flush() == b"ping"
    _serves(native_server_config({"ssl.keystore.location": broker.keystore_file, "ssl.client.auth": "requested",
                                  "ssl.truststore.location": ca.ca_file}), ca)

    with pytest.raises(ValueError, match="does not serve"):
        TlsServerConfig(broker.cert_pem.encode(), client.key_pem.encode())
    truncated = broker.key_pem.splitlines()
    with pytest.raises(ValueError, match="private key is not one the native TLS session serves.*or is malformed"):
        TlsServerConfig(broker.cert_pem.encode(), ("\n".join(truncated[:3] + truncated[-1:]) + "\n").encode())
    ed448 = ca.issue("ed448", ed448_key=True)
    with pytest.raises(TlsConfigError, match="an Ed448 key"):
        native_server_config({"ssl.keystore.location": ed448.keystore_file})

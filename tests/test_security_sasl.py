"""SCRAM (RFC 5802/7677) and PLAIN server and client state machines, JAAS parsing, TLS principal mapping: the
sans-IO cores of klog.security, without sockets."""

from __future__ import annotations

import base64

import pytest

from klog.security.principal import KafkaPrincipal
from klog.security.sasl import AuthenticationFailed, SaslSession, parse_jaas, plain_token
from klog.security.scram import (
    ScramClient,
    ScramError,
    ScramServer,
    credential_from_salted,
    make_credential,
    salted_password,
)
from klog.security.tls import PrincipalMapper, distinguished_name, openssl_cipher_name

# RFC 7677 section 3
RFC_USER, RFC_PASSWORD = "user", "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential():
    return make_credential("SCRAM-SHA-256", RFC_PASSWORD, 4096, RFC_SALT)


def test_rfc7677_vector_client_and_server():
    client = ScramClient("SCRAM-SHA-256", RFC_USER, RFC_PASSWORD, nonce=RFC_CLIENT_NONCE)
    server = ScramServer("SCRAM-SHA-256", {RFC_USER: _rfc_credential()}.get, nonce=RFC_SERVER_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert server.first(client.first()) == RFC_SERVER_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"
    client.verify(RFC_SERVER_FINAL)


def test_salted_password_gives_the_same_credential_as_the_password():
    salted = salted_password("SCRAM-SHA-512", "pw", b"salt" * 4, 4096)
    assert credential_from_salted("SCRAM-SHA-512", salted, b"salt" * 4, 4096) == \
        make_credential("SCRAM-SHA-512", "pw", 4096, b"salt" * 4)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_at_the_proof_and_an_unknown_user_at_the_client_first_message(mechanism):
    # as Kafka's ScramSaslServer (tests/test_sasl_handshake_vs_kafka.py runs the logins on both)
    creds = {"alice": make_credential(mechanism, "right")}
    client = ScramClient(mechanism, "alice", "wrong")
    server = ScramServer(mechanism, creds.get)
    server_first = server.first(client.first())
    with pytest.raises(ScramError, match="invalid credentials"):
        server.final(client.final(server_first))
    assert not server.complete
    with pytest.raises(ScramError, match="invalid credentials"):
        ScramServer(mechanism, creds.get).first(ScramClient(mechanism, "nobody", "right").first())


def test_a_server_that_does_not_know_the_credential_is_caught_by_the_client():
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256", {"alice": make_credential("SCRAM-SHA-256", "pw")}.get)
    server.final(client.final(server.first(client.first())))
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("message", [b"", b"p=tls-unique,,n=a,r=b", b"n,,r=abc", b"n,,n=a", b"\xff\xfe",
                                     b"n,,n=a=,r=x", b"n,,n=a,r=x,m=ext",
                                     b"n,a=other,n=a,r=x", b"n,,n=a,r=" + b"x" * 5000])
def test_bad_client_first_messages_are_refused(message):
    server = ScramServer("SCRAM-SHA-256", lambda user: None)
    with pytest.raises(ScramError):
        server.first(message)


def test_bad_client_final_messages_are_refused():
    creds = {"a": make_credential("SCRAM-SHA-256", "pw")}
    client = ScramClient("SCRAM-SHA-256", "a", "pw")
    server = ScramServer("SCRAM-SHA-256", creds.get)
    server_first = server.first(client.first())
    good = client.final(server_first)
    for bad in (b"c=biws,r=other", good.replace(b"c=biws", b"c=eSws"), good.replace(b"r=", b"r=x"),
                good[:-4] + b"!!!!", good.rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(b"short")):
        with pytest.raises(ScramError):
            ScramServer("SCRAM-SHA-256", creds.get).final(bad)   # no first message: nonce mismatch
        with pytest.raises(ScramError):
            server.final(bad)
    assert server.final(good).startswith(b"v=")


def test_user_names_with_comma_and_equals_are_escaped():
    creds = {"a,b=c": make_credential("SCRAM-SHA-256", "pw")}
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw")
    assert b"n=a=2Cb=3Dc," in client.first()
    server = ScramServer("SCRAM-SHA-256", creds.get)
    server.final(client.final(server.first(client.first())))
    assert server.username == "a,b=c"


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n username="admin" '
        'password="admin-secret"\n user_admin="admin-secret" user_alice="al\\"ice" user_bob=bobpw;')


def test_jaas_parsing():
    jaas = parse_jaas(JAAS)
    assert jaas.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.options["username"] == "admin"
    assert jaas.plain_users() == {"admin": "admin-secret", "alice": 'al"ice', "bob": "bobpw"}
    for bad in ("", "PlainLoginModule", 'x required user_a="b"', 'x required user_a="b" junk;'):
        with pytest.raises(ValueError) as info:
            parse_jaas(bad)
        assert "b\"" not in str(info.value)


def test_sasl_session_plain_and_scram():
    scram = {("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "s3cret")}
    session = SaslSession(["PLAIN", "SCRAM-SHA-512", "GSSAPI"], {"bob": "pw"},
                          lambda mech, user: scram.get((user, mech)))
    assert session.enabled == ["PLAIN", "SCRAM-SHA-512"]
    assert not session.handshake("GSSAPI") and not session.handshake("SCRAM-SHA-256")
    assert session.handshake("PLAIN")
    assert session.authenticate(plain_token("bob", "pw")) == b"" and session.principal == KafkaPrincipal("User", "bob")

    for token, reason in ((plain_token("bob", "nope"), "wrong password"), (plain_token("eve", "pw"), "no such user"),
                          (b"bob\0pw", "malformed"), (plain_token("", "pw"), "without a user"),
                          (plain_token("bob", "pw", "admin"), "authorization id")):
        failing = SaslSession(["PLAIN"], {"bob": "pw"}, lambda mech, user: None)
        failing.handshake("PLAIN")
        with pytest.raises(AuthenticationFailed) as info:
            failing.authenticate(token)
        assert reason in info.value.log_reason and "nope" not in str(info.value)
        assert failing.principal is None

    session = SaslSession(["SCRAM-SHA-512"], {}, lambda mech, user: scram.get((user, mech)))
    session.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "s3cret")
    first = session.authenticate(client.first())
    assert session.principal is None
    client.verify(session.authenticate(client.final(first)))
    assert session.principal == KafkaPrincipal("User", "alice")

    session = SaslSession(["SCRAM-SHA-512"], {}, lambda mech, user: scram.get((user, mech)))
    session.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "wrong")
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-512") as info:
        session.authenticate(client.final(session.authenticate(client.first())))
    assert info.value.log_reason == "user 'alice': wrong password"


def test_distinguished_names_and_principal_mapping_rules():
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Example, Inc"),),
                        (("commonName", "Client One"),))}
    dn = distinguished_name(cert)
    assert dn == "CN=Client One,O=Example\\, Inc,C=US"
    assert PrincipalMapper("DEFAULT").principal(cert) == KafkaPrincipal("User", dn)
    rules = PrincipalMapper("RULE:^CN=(.*?),O=(.*)$/$1@$2/L, RULE:^CN=(.*)$/$1/U, DEFAULT")
    assert rules.principal_name("CN=Client One,O=Acme") == "client one@acme"
    assert rules.principal_name("CN=bob") == "BOB"
    assert rules.principal_name("OU=x") == "OU=x"
    assert distinguished_name({}) is None
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        PrincipalMapper("RULE:nope")


def test_cipher_suite_names():
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_AES_256_GCM_SHA384") is None
    assert openssl_cipher_name("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"


def test_format_add_scram_argument():
    from klog.broker.__main__ import scram_record
    from klog.security.scram import ScramCredential

    rec = scram_record("SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]")
    assert (rec.data.name, rec.data.mechanism, rec.data.iterations) == ("alice", 1, 8192)
    credential = ScramCredential(rec.data.salt, rec.data.stored_key, rec.data.server_key, rec.data.iterations)
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server = ScramServer("SCRAM-SHA-256", {"alice": credential}.get)
    client.verify(server.final(client.final(server.first(client.first()))))
    for bad in ("SCRAM-SHA-256", "SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[name=a]",
                "SCRAM-SHA-512=[password=secret-pw]", "SCRAM-SHA-512=[name=a,password=b,iterations=x]",
                "SCRAM-SHA-512=[name=a,password=b,iterations=10]", "SCRAM-SHA-512=name=a,password=b"):
        with pytest.raises(ValueError) as info:
            scram_record(bad)
        assert "secret-pw" not in str(info.value)

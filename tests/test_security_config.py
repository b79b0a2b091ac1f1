"""Kafka's security settings in broker configs: every ssl.*/sasl.* key accepted, listener.name.<l>.<key> overrides,
and each listener's TLS context and SASL users built from them (PEM files, inline PEM, PKCS12), with errors that
name the setting."""

from __future__ import annotations

import ssl

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from klog.broker.security import listener_securities
from klog.metadata.config import BrokerConfig, ConfigError
from klog.testing.certs import CertificateAuthority

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a-pw";'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return ca, ca.issue("broker")


def test_kafka_security_keys_are_accepted(tmp_path):
    config = BrokerConfig({
        "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "sasl.mechanism.controller.protocol": "PLAIN",
        "security.inter.broker.protocol": "SASL_SSL", "ssl.client.auth": "requested",
        "ssl.endpoint.identification.algorithm": "", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "connections.max.reauth.ms": "60000", "sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": JAAS,
        "listener.name.internal.ssl.client.auth": "required",
    })
    assert config["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert config.listener_setting("INTERNAL", "ssl.client.auth") == "required"
    assert config.listener_setting("OTHER", "ssl.client.auth") == "requested"
    assert config.listener_setting("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == JAAS
    assert config.listener_setting("SASL_SSL", "sasl.jaas.config", "PLAIN") is None
    assert "sasl.kerberos.service.name" in config.ignored_keys()


@pytest.mark.parametrize("props, expected", [
    ({}, "PLAINTEXT"),   # Kafka's default: the listener named PLAINTEXT
    ({"inter.broker.listener.name": "internal"}, "INTERNAL"),
    ({"security.inter.broker.protocol": "SASL_SSL"}, "SASL_SSL"),
    ({"listeners": "INTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}, "INTERNAL"),   # no PLAINTEXT: the first
    ({"inter.broker.listener.name": "INTERNAL", "security.inter.broker.protocol": "SSL"},
     "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ({"inter.broker.listener.name": "CONTROLLER"}, "inter.broker.listener.name"),
])
def test_inter_broker_listener_resolved_as_kafka_does(tmp_path, props, expected):
    base = {"log.dirs": str(tmp_path), "listeners": "SASL_SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0,"
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:SSL,PLAINTEXT:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT"}
    if expected.islower():
        with pytest.raises(ConfigError) as info:
            BrokerConfig({**base, **props})
        assert info.value.key == expected
        return
    config = BrokerConfig({**base, **props})
    assert config.inter_broker_listener is not None and config.inter_broker_listener.name == expected


@pytest.mark.parametrize("key, value, named", [
    ("listener.name.x.ssl.keystore.locaton", "f", "listener.name.x.ssl.keystore.locaton"),
    ("listener.name.x.ssl.client.auth", "maybe", "listener.name.x.ssl.client.auth"),
    ("ssl.enabled.protocols", "TLSv1.1", "ssl.enabled.protocols"),
    ("ssl.keystore.type", "JKS", None),  # accepted here; refused when a listener uses it
    ("sasl.enabled.mechanisms", "KERBEROS", "sasl.enabled.mechanisms"),
])
def test_bad_security_values_name_the_key(tmp_path, key, value, named):
    props = {"log.dirs": str(tmp_path), key: value}
    if named is None:
        BrokerConfig(props)
        return
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert info.value.key == named


def _securities(tmp_path, **props):
    return listener_securities(BrokerConfig({"log.dirs": str(tmp_path), **props}))


def test_tls_listeners_from_pem_files_inline_pem_and_pkcs12(tmp_path, pki):
    ca, cert = pki
    store = cert.pkcs12(tmp_path / "broker.p12", "store-pw")
    trust = ca.issue("unused").pkcs12(tmp_path / "unused.p12", "x")   # noqa: F841 (a second store to ignore)
    securities = _securities(
        tmp_path, listeners="PLAINTEXT://127.0.0.1:0,A://127.0.0.1:0,B://127.0.0.1:0,C://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,A:SSL,B:SASL_SSL,C:SSL",
           "listener.name.a.ssl.keystore.type": "PEM", "listener.name.a.ssl.keystore.location": cert.keystore_file,
           "listener.name.a.ssl.truststore.type": "PEM", "listener.name.a.ssl.truststore.location": ca.ca_file,
           "listener.name.a.ssl.client.auth": "required",
           "listener.name.b.ssl.keystore.type": "PEM", "listener.name.b.ssl.keystore.key": cert.key_pem,
           "listener.name.b.ssl.keystore.certificate.chain": cert.cert_pem,
           "listener.name.b.ssl.truststore.type": "PEM", "listener.name.b.ssl.truststore.certificates": ca.pem,
           "listener.name.b.ssl.client.auth": "requested", "listener.name.b.ssl.enabled.protocols": "TLSv1.3",
           "listener.name.b.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
           "listener.name.b.plain.sasl.jaas.config": JAAS,
           "listener.name.c.ssl.keystore.type": "PKCS12", "listener.name.c.ssl.keystore.location": store,
           "listener.name.c.ssl.keystore.password": "store-pw",
           "listener.name.c.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    assert securities["PLAINTEXT"].ssl_context is None and not securities["PLAINTEXT"].sasl
    assert securities["A"].ssl_context.verify_mode == ssl.CERT_REQUIRED
    b = securities["B"]
    assert b.ssl_context.verify_mode == ssl.CERT_OPTIONAL and b.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert b.sasl and b.mechanisms == ["PLAIN", "SCRAM-SHA-512"] and b.plain_users == {"alice": "a-pw"}
    c = securities["C"].ssl_context
    assert c.verify_mode == ssl.CERT_NONE
    assert [x["name"] for x in c.get_ciphers() if x["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES128-GCM-SHA256"]


@pytest.mark.parametrize("props, named", [
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": "x.jks"},
     "ssl.keystore.type"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
     "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "{p12}",
      "ssl.keystore.password": "wrong"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}",
      "ssl.client.auth": "required"}, "ssl.truststore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}",
      "ssl.cipher.suites": "TLS_NOT_A_SUITE_WITH_NOTHING"}, "ssl.cipher.suites"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "not jaas"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
])
def test_unusable_listener_security_names_the_setting(tmp_path, pki, props, named):
    _, cert = pki
    p12 = cert.pkcs12(tmp_path / "k.p12", "right")
    props = {k: v.format(p12=p12, pem=cert.keystore_file) for k, v in props.items()}
    with pytest.raises(ConfigError) as info:
        _securities(tmp_path, **props)
    assert info.value.key == named


def test_settings_only_the_ssl_engine_serves_fall_back_to_it_unless_native_is_asked_for(tmp_path, pki, caplog):
    """klog.tls.engine defaults to native; a listener whose settings the native session cannot serve (here only
    OpenSSL's CBC suites) is served by Python's ssl module, as a Kafka node with the same properties would serve
    it (the setting and why kept for the one warning the listener logs as it binds, none logged here: the
    broker reads its listeners' settings twice at start-up, tests/test_tls_engine_fallback.py counts the
    warnings); asking for native explicitly refuses them, naming the setting."""
    _, cert = pki
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,GCM://127.0.0.1:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,GCM:SSL",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": cert.keystore_file,
             "listener.name.ssl.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"}
    securities = _securities(tmp_path, **props)
    cbc = securities["SSL"]
    assert cbc.native is None
    assert [x["name"] for x in cbc.ssl_context.get_ciphers() if x["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES128-SHA256"]
    assert securities["GCM"].native is not None   # the other TLS listener keeps the native session
    assert cbc.fallback is not None and cbc.fallback.startswith(
        "ssl.cipher.suites: none of TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256 is a cipher suite"), cbc.fallback
    assert securities["GCM"].fallback is None
    assert not [r.getMessage() for r in caplog.records if "ssl module" in r.getMessage()]
    with pytest.raises(ConfigError) as info:
        _securities(tmp_path, **props, **{"klog.tls.engine": "native"})
    assert info.value.key == "listener.name.ssl.ssl.cipher.suites"


@pytest.mark.parametrize("roles, protocol, expected", [
    ("broker,controller", "SSL", "tls"),
    ("controller", "PLAINTEXT", "plaintext"),
    ("broker", "SSL", "tls"),        # an observer connects to the controllers' SSL listener
    # a SASL controller listener needs sasl.mechanism.controller.protocol (Kafka's default, GSSAPI, is not served)
    ("broker,controller", "SASL_SSL", "sasl.mechanism.controller.protocol"),
])
def test_controller_listener_tls(tmp_path, pki, roles, protocol, expected):
    from klog.broker.__main__ import quorum_config

    ca, cert = pki
    node = 1 if "controller" in roles else 4
    props = {"log.dirs": str(tmp_path), "node.id": node, "process.roles": roles,
             "controller.quorum.voters": "1@127.0.0.1:19093", "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:{protocol}",
             "listener.name.controller.ssl.keystore.location": cert.keystore_file,
             "listener.name.controller.ssl.keystore.type": "PEM",
             "listener.name.controller.ssl.truststore.location": ca.ca_file,
             "listener.name.controller.ssl.truststore.type": "PEM",
             "listener.name.controller.ssl.client.auth": "required"}
    listeners = ["PLAINTEXT://127.0.0.1:0"] if "broker" in roles else []
    if "controller" in roles:
        listeners.append("CONTROLLER://127.0.0.1:19093")
    props["listeners"] = ",".join(listeners)
    config = BrokerConfig(props)
    if expected == "sasl.mechanism.controller.protocol":
        with pytest.raises(ConfigError) as info:
            quorum_config(config)
        assert info.value.key == expected and "GSSAPI" in str(info.value)
        return
    quorum = quorum_config(config)
    assert (quorum.client_security is not None and quorum.client_security.ssl_context is not None) == \
        (expected == "tls")
    if "controller" in roles:
        assert (quorum.server_ssl is not None) == (expected == "tls")
        if expected == "tls":
            assert quorum.server_ssl.verify_mode == ssl.CERT_REQUIRED


CONTROLLER_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                         'password="controller-secret" user_controller="controller-secret";')


@pytest.mark.parametrize("roles", ["broker,controller", "controller", "broker"])
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_controller_listener_logs_in_with_the_controller_mechanism(tmp_path, pki, roles, protocol):
    """A SASL controller listener, as Kafka configures it: every node connects with TLS (SASL_SSL) and logs in with
    sasl.mechanism.controller.protocol and the username/password of that mechanism's JAAS config on the listener; a
    node that serves it offers the listener's mechanisms and PLAIN users."""
    from klog.broker.__main__ import quorum_config

    ca, cert = pki
    node = 1 if "controller" in roles else 4
    props = {"log.dirs": str(tmp_path), "node.id": node, "process.roles": roles,
             "controller.quorum.voters": "1@127.0.0.1:19093", "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:{protocol}",
             "ssl.keystore.location": cert.keystore_file, "ssl.keystore.type": "PEM",
             "ssl.truststore.location": ca.ca_file, "ssl.truststore.type": "PEM",
             "sasl.mechanism.controller.protocol": "PLAIN",
             "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
             "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_PLAIN_JAAS}
    listeners = ["PLAINTEXT://127.0.0.1:0"] if "broker" in roles else []
    if "controller" in roles:
        listeners.append("CONTROLLER://127.0.0.1:19093")
    props["listeners"] = ",".join(listeners)
    quorum = quorum_config(BrokerConfig(props))
    client = quorum.client_security
    assert (client.protocol, client.mechanism, client.username, client.password) == \
        (protocol, "PLAIN", "controller", "controller-secret")
    assert (client.ssl_context is not None) == (protocol == "SASL_SSL")
    if "controller" in roles:
        assert quorum.server_login.mechanisms == ("PLAIN",)
        assert dict(quorum.server_login.plain_users) == {"controller": "controller-secret"}
        assert (quorum.server_ssl is not None) == (protocol == "SASL_SSL")


@pytest.mark.parametrize("change, named", [
    ({"listener.name.controller.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_controller="x";'},
     "listener.name.controller.plain.sasl.jaas.config"),
    # a mechanism the controller listener does not offer
    ({"sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
      "listener.name.controller.scram-sha-512.sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required username="c" password="p";'},
     "sasl.mechanism.controller.protocol"),
    ({"listener.name.controller.sasl.enabled.mechanisms": "GSSAPI"},
     "listener.name.controller.sasl.enabled.mechanisms"),
])
def test_unusable_sasl_controller_listener_names_the_setting(tmp_path, change, named):
    from klog.broker.__main__ import quorum_config

    props = {"log.dirs": str(tmp_path), "node.id": 1, "process.roles": "broker,controller",
             "controller.quorum.voters": "1@127.0.0.1:19093", "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
             "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
             "sasl.mechanism.controller.protocol": "PLAIN",
             "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
             "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_PLAIN_JAAS, **change}
    with pytest.raises(ConfigError) as info:
        quorum_config(BrokerConfig(props))
    assert info.value.key == named, info.value

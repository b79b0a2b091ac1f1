"""Kafka's security configs: the ``ssl.*``/``sasl.*`` keys a listener may override as
``listener.name.<name>.<key>``, the broker-wide ones (inter-broker protocol, re-authentication, delegation tokens),
and the listeners themselves (``listeners`` with ``listener.security.protocol.map``). klog.metadata.config merges
them into the broker's keys; docs/security.md says what each does."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from klog.metadata.config_keys import _KAFKA_ONLY, ConfigError, ConfigKey, _k, at_least, one_of

SSL_CLIENT_AUTH = ("required", "requested", "none")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
#: the SASL mechanisms klog's brokers serve
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NO_KERBEROS = "Kerberos (GSSAPI) is not served by klog: " + _KAFKA_ONLY
#: Kafka's default classes of its class-typed security configs: the only values klog takes for them
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
DEFAULT_JWT_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"
DEFAULT_JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator"


def _only(default: str) -> Callable[[Any], str | None]:
    """A class-typed config klog has only Kafka's default of (it runs no Java plugins)."""
    return lambda v: None if v == default else f"klog cannot load {v!r}: it runs no Java plugins (only {default})"


def _no_plugin(value: Any) -> str | None:
    return f"klog cannot load {value!r}: it runs no Java plugins" if value else None


def _keystore_type(value: str) -> str | None:
    if value.upper() in ("PEM", "PKCS12"):
        return None
    if value.upper() == "JKS":
        return "JKS keystores are Java's own format: convert with keytool -importkeystore -deststoretype PKCS12"
    return f"{value!r} is not one of PEM, PKCS12"


def _tls_protocols(values: list[str]) -> str | None:
    for value in values:
        if value not in TLS_PROTOCOLS:
            return f"{value!r}: klog serves {', '.join(TLS_PROTOCOLS)} (older protocols are insecure)"
    return None


def _mechanisms(values: list[str]) -> str | None:
    for value in values:
        if value not in SASL_MECHANISMS + ("GSSAPI", "OAUTHBEARER"):
            return f"{value!r} is not a SASL mechanism Kafka knows"
    return None


#: Kafka's ``ssl.*``/``sasl.*`` broker configs that a listener may override as ``listener.name.<name>.<key>``
SECURITY_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    _k("ssl.protocol", "string", "TLSv1.3", "the newest TLS protocol the listener negotiates"),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS protocols a listener accepts", _tls_protocols),
    _k("ssl.provider", "string", None, _KAFKA_ONLY, no_effect=True),
    _k("ssl.keystore.type", "string", "JKS", "PEM or PKCS12 (Kafka's default JKS must be converted to PKCS12)"),
    _k("ssl.keystore.location", "string", None, "the listener's key and certificate chain (a PEM file with both, "
       "or a PKCS12 file)"),
    _k("ssl.keystore.password", "password", None, "password of a PKCS12 keystore", sensitive=True),
    _k("ssl.key.password", "password", None, "password of the private key (encrypted PEM key)", sensitive=True),
    _k("ssl.keystore.key", "password", None, "the private key in PEM, inline (ssl.keystore.type=PEM)",
       sensitive=True),
    _k("ssl.keystore.certificate.chain", "password", None, "the certificate chain in PEM, inline "
       "(ssl.keystore.type=PEM)", sensitive=True),
    _k("ssl.truststore.type", "string", "JKS", "PEM or PKCS12"),
    _k("ssl.truststore.location", "string", None, "the CA certificates client (and peer broker) certificates are "
       "checked against"),
    _k("ssl.truststore.password", "password", None, "password of a PKCS12 truststore", sensitive=True),
    _k("ssl.truststore.certificates", "password", None, "trusted CA certificates in PEM, inline "
       "(ssl.truststore.type=PEM)", sensitive=True),
    _k("ssl.keymanager.algorithm", "string", "SunX509", _KAFKA_ONLY, no_effect=True),
    _k("ssl.trustmanager.algorithm", "string", "PKIX", _KAFKA_ONLY, no_effect=True),
    _k("ssl.endpoint.identification.algorithm", "string", "https", "https: a broker checks the host name of the "
       "brokers and controllers it connects to against their certificates; empty: it does not"),
    _k("ssl.secure.random.implementation", "string", None, _KAFKA_ONLY, no_effect=True),
    _k("ssl.client.auth", "string", "none", "required: clients must present a certificate the truststore trusts "
       "(mTLS; the principal is its subject); requested: they may; none", one_of(*SSL_CLIENT_AUTH)),
    _k("ssl.cipher.suites", "list", [], "TLS 1.2 cipher suites (Kafka's IANA names or OpenSSL's); empty: OpenSSL's "
       "secure defaults"),
    _k("ssl.principal.mapping.rules", "string", "DEFAULT", "RULE:pattern/replacement/[LU] rules turning a client "
       "certificate's distinguished name into the principal's name (DEFAULT: the whole DN)"),
    _k("ssl.engine.factory.class", "class", None, "an SslEngineFactory class: must be unset (klog runs no Java "
       "plugins; klog.tls.engine chooses its TLS engine)", _no_plugin),
    _k("ssl.allow.dn.changes", "boolean", False, "true: a keystore reloaded without a restart may have a "
       "certificate of another subject (false: refused with INVALID_REQUEST)"),
    _k("ssl.allow.san.changes", "boolean", False, "true: a keystore reloaded without a restart may have a "
       "certificate of other subject alternative names"),
    _k("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms a SASL listener offers (klog serves PLAIN, "
       "SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER)", _mechanisms),
    _k("sasl.jaas.config", "password", None, "JAAS login module options: PlainLoginModule's user_<name>=\"<password>\" "
       "entries are the PLAIN users; username/password are what this broker logs in with", sensitive=True),
    _k("sasl.server.callback.handler.class", "class", None, "per mechanism: OAUTHBEARER's token validator (unset: "
       "Kafka's unsecured one; org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler: "
       "signed tokens checked against sasl.oauthbearer.jwks.endpoint.url)"),
    _k("sasl.client.callback.handler.class", "class", None, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.class", "class", None, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.callback.handler.class", "class", None, _KAFKA_ONLY, no_effect=True),
    _k("sasl.server.max.receive.size", "int", 524288, "the largest SASL token a client may send before it is "
       "authenticated", at_least(1)),
    _k("sasl.kerberos.service.name", "string", None, _NO_KERBEROS, no_effect=True),
    _k("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", _NO_KERBEROS, no_effect=True),
    _k("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, _NO_KERBEROS, no_effect=True),
    _k("sasl.kerberos.ticket.renew.jitter", "double", 0.05, _NO_KERBEROS, no_effect=True),
    _k("sasl.kerberos.min.time.before.relogin", "long", 60000, _NO_KERBEROS, no_effect=True),
    _k("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"], _NO_KERBEROS, no_effect=True),
    _k("sasl.login.refresh.window.factor", "double", 0.8, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.refresh.window.jitter", "double", 0.05, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.refresh.min.period.seconds", "short", 60, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.refresh.buffer.seconds", "short", 300, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.connect.timeout.ms", "int", None, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.read.timeout.ms", "int", None, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.retry.backoff.max.ms", "long", 10000, _KAFKA_ONLY, no_effect=True),
    _k("sasl.login.retry.backoff.ms", "long", 100, _KAFKA_ONLY, no_effect=True),
    _k("sasl.oauthbearer.scope.claim.name", "string", "scope", "the JWT claim holding an OAUTHBEARER token's scope"),
    _k("sasl.oauthbearer.sub.claim.name", "string", "sub", "the JWT claim naming an OAUTHBEARER token's principal "
       "(User:<claim>)"),
    _k("sasl.oauthbearer.token.endpoint.url", "string", None, "a client's token endpoint: " + _KAFKA_ONLY,
       no_effect=True),
    _k("sasl.oauthbearer.jwks.endpoint.url", "string", None, "the key set OAUTHBEARER tokens are checked against "
       "(http(s) or file: URL) with OAuthBearerValidatorCallbackHandler"),
    _k("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000, "how often the JWKS is fetched again",
       at_least(1)),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000, _KAFKA_ONLY, no_effect=True),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100, "the shortest time between two JWKS fetches "
       "for a key id the broker does not know", at_least(0)),
    _k("sasl.oauthbearer.clock.skew.seconds", "int", 30, "leeway on an OAUTHBEARER token's exp, iat and nbf",
       at_least(0)),
    _k("sasl.oauthbearer.expected.audience", "list", [], "an OAUTHBEARER token's aud must name one of these "
       "(unset: not checked)"),
    _k("sasl.oauthbearer.expected.issuer", "string", None, "an OAUTHBEARER token's iss must be this (unset: not "
       "checked)"),
    _k("sasl.oauthbearer.header.urlencode", "boolean", False, _KAFKA_ONLY, no_effect=True, internal=True),
    _k("sasl.oauthbearer.jwt.retriever.class", "class", DEFAULT_JWT_RETRIEVER, "the JwtRetriever of the broker's "
       "own OAUTHBEARER login: only Kafka's default (" + _KAFKA_ONLY + ")", _only(DEFAULT_JWT_RETRIEVER),
       no_effect=True),
    _k("sasl.oauthbearer.jwt.validator.class", "class", DEFAULT_JWT_VALIDATOR, "the JwtValidator of OAUTHBEARER "
       "tokens: only Kafka's default (klog validates them as it does, see sasl.oauthbearer.jwks.endpoint.url)",
       _only(DEFAULT_JWT_VALIDATOR), no_effect=True),
]}

#: the broker-wide security configs (not per listener)
BROKER_SECURITY_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    _k("security.inter.broker.protocol", "string", "PLAINTEXT", "security protocol of the inter-broker listener "
       "(when inter.broker.listener.name is not set)", one_of(*_SECURITY_PROTOCOLS)),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "the SASL mechanism brokers log in to each "
       "other with"),
    _k("sasl.mechanism.controller.protocol", "string", "GSSAPI", "the SASL mechanism brokers and controllers log "
       "in to controllers with"),
    _k("connections.max.reauth.ms", "long", 0, "KIP-368: a SASL session lasts at most this long (0: for ever); "
       "clients re-authenticate before it ends", at_least(0)),
    _k("connection.failed.authentication.delay.ms", "int", 100, "a failed login is answered after this delay "
       "(slows password guessing); it must be below connections.max.idle.ms", at_least(0)),
    _k("principal.builder.class", "class", DEFAULT_PRINCIPAL_BUILDER, "the KafkaPrincipalBuilder: only Kafka's "
       "default, which klog's principals follow", _only(DEFAULT_PRINCIPAL_BUILDER)),
    _k("security.providers", "string", None, _KAFKA_ONLY, no_effect=True),
    _k("delegation.token.secret.key", "password", None, "the secret every node derives delegation tokens' HMACs "
       "from (the same on every node); unset: delegation tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED)",
       sensitive=True),
    _k("delegation.token.master.key", "password", None, "deprecated name of delegation.token.secret.key (used when "
       "that one is unset)", sensitive=True, internal=True),
    _k("delegation.token.max.lifetime.ms", "long", 604800000, "a token's longest life: renewals never take it past "
       "its issue time plus this (a CreateDelegationToken max_lifetime_ms may only shorten it)", at_least(1)),
    _k("delegation.token.expiry.time.ms", "long", 86400000, "how long a token lives without a renewal (and the "
       "longest one renewal extends it)", at_least(1)),
    _k("delegation.token.expiry.check.interval.ms", "long", 3600000, "how often the active controller removes the "
       "expired tokens (RemoveDelegationTokenRecord)", at_least(1)),
]}
#: ``listener.name.<listener>.<mechanism>.<key>``: what Kafka lets a listener set per SASL mechanism
_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.server.callback.handler.class", "sasl.login.callback.handler.class",
                   "sasl.login.class")
_LISTENER_OWN_KEYS = ("connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
                      "max.connection.creation.rate")
_LISTENER_KEY_RE = re.compile(r"^listener\.name\.(?P<listener>[A-Za-z0-9_]+)\.(?P<rest>.+)$")

#: Kafka's reconfigurable TLS settings (SslConfigs.RECONFIGURABLE_CONFIGS): IncrementalAlterConfigs/AlterConfigs
#: may set them as ``listener.name.<listener>.<key>`` on one broker's resource; new connections use them
DYNAMIC_SSL_KEYS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                              "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                              "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
                              "ssl.truststore.certificates"})


#: Kafka's other per-listener TLS configs (DynamicListenerConfig's): a broker's resource may hold them as
#: ``listener.name.<listener>.<key>`` (validated, stored, described), but a listener that exists keeps its
#: settings: Kafka 4.3 applies them only to a listener added later, not to a running one nor after a restart
#: (tests/test_keystore_reload_vs_kafka.py shows it on both)
STORED_SSL_KEYS = frozenset({"ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
                             "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
                             "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
                             "ssl.client.auth", "ssl.engine.factory.class"})


def dynamic_ssl_key(name: str) -> tuple[str, str] | None:
    """(listener name in upper case, ssl key) of a reloadable ``listener.name.<listener>.ssl.*`` broker config
    (:data:`DYNAMIC_SSL_KEYS`); None for any other name."""
    key = listener_ssl_key(name)
    return key if key is not None and key[1] in DYNAMIC_SSL_KEYS else None


def listener_ssl_key(name: str) -> tuple[str, str] | None:
    """(listener name in upper case, ssl key) of any ``listener.name.<listener>.ssl.*`` config a broker's resource
    may hold dynamically (:data:`DYNAMIC_SSL_KEYS` and :data:`STORED_SSL_KEYS`); None for any other name."""
    match = _LISTENER_KEY_RE.match(name)
    if match is None or match["rest"] not in DYNAMIC_SSL_KEYS | STORED_SSL_KEYS:
        return None
    return match["listener"].upper(), match["rest"]


def dynamic_ssl_settings(broker_configs: Mapping[str, str], listener: str) -> dict[str, str]:
    """The dynamic ssl.* settings of ``listener`` among one broker resource's ConfigRecords (unparsed)."""
    out = {}
    for name, value in broker_configs.items():
        key = dynamic_ssl_key(name)
        if key is not None and key[0] == listener.upper():
            out[key[1]] = value
    return out


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    security_protocol: str
    host: str      # "" = all interfaces
    port: int

    def uri(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?\d+)$")


def parse_listeners(key: str, uris: Iterable[str], protocol_map: Mapping[str, str]) -> list[Listener]:
    listeners = []
    for uri in uris:
        match = _LISTENER_RE.match(uri.strip())
        if not match:
            raise ConfigError(key, f"{uri!r} is not NAME://host:port")
        name = match["name"].upper()
        host = match["host"].strip("[]")
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"port {port} of {uri!r} is outside [0, 65535]")
        protocol = protocol_map.get(name, name if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
                                    else "")
        if not protocol:
            raise ConfigError(key, f"listener {name} has no entry in listener.security.protocol.map")
        listeners.append(Listener(name, protocol, host, port))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(key, "each listener name may appear once")
    return listeners

"""The client's side of Kafka security: ``security.protocol`` SSL, SASL_PLAINTEXT and SASL_SSL with confluent-kafka's
(librdkafka's) setting names (``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``sasl.mechanism``, ``sasl.username``, ``sasl.password``), the Java client's where they differ
(``ssl.truststore.location``, ``ssl.keystore.location``, ``sasl.jaas.config``), and the SASL login
(SaslHandshake v1, then SaslAuthenticate tokens: PLAIN, or SCRAM-SHA-256/512 with klog.security's client).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.security.sasl import parse_jaas, plain_token
from klog.security.scram import ScramClient
from klog.security.tls import TlsConfigError, client_context

from .errors import ConfigError

__all__ = ["ClientSecurity", "SECURITY_CONFIG_KEYS", "client_security"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: the settings read here (every client config takes them; klog.client.config lists their defaults)
SECURITY_CONFIG_KEYS = (
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.jaas.config",
    "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location",
    "ssl.key.pem", "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain",
)


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None
    mechanism: str | None
    username: str | None
    password: str | None
    #: a delegation token login (ScramLoginModule's ``tokenauth="true"``: the user name is the token id, the
    #: password its HMAC)
    token_auth: bool = False
    #: where each new connection's TLS context comes from when it changes at runtime (a broker's connections to
    #: other brokers and controllers follow their listener's dynamic keystore: klog.security.tls.DynamicTls.client);
    #: None: ``ssl_context``
    tls_source: Callable[[], ssl.SSLContext] | None = field(default=None, compare=False, repr=False)

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None

    def tls(self) -> ssl.SSLContext | None:
        """The TLS context of a new connection (None: no TLS)."""
        if self.ssl_context is None:
            return None
        return self.tls_source() if self.tls_source is not None else self.ssl_context

    def authenticator(self) -> Any:
        """A fresh login: ``first()`` -> token, ``next(server_token)`` -> token or None when done."""
        return _Login(self.mechanism or "", self.username or "", self.password or "", self.token_auth)


class _Login:
    def __init__(self, mechanism: str, username: str, password: str, token_auth: bool = False) -> None:
        self.mechanism = mechanism
        extensions = {"tokenauth": "true"} if token_auth else None
        self._scram = ScramClient(mechanism, username, password, extensions=extensions) \
            if mechanism.startswith("SCRAM") else None
        self._plain = plain_token(username, password)
        self._step = 0

    def first(self) -> bytes:
        return self._scram.first() if self._scram is not None else self._plain

    def next(self, server_token: bytes) -> bytes | None:
        """The next token to send, or None once the login is complete (the server's last token checked)."""
        self._step += 1
        if self._scram is None:
            return None
        if self._step == 1:
            return self._scram.final(server_token)
        self._scram.verify(server_token)
        return None


def _setting(config: Mapping[str, Any], key: str) -> Any:
    value = config.get(key)
    return None if value in (None, "") else value


def client_security(config: Mapping[str, Any]) -> ClientSecurity | None:
    """The TLS context and SASL login of a client config; None for PLAINTEXT. A ConfigError names a setting that
    cannot be used (a missing file, an unknown mechanism, SASL without a user name)."""
    protocol = str(config.get("security.protocol") or "plaintext").upper()
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        settings: dict[str, Any] = {
            "ssl.endpoint.identification.algorithm": config.get("ssl.endpoint.identification.algorithm", "https"),
            "ssl.cipher.suites": config.get("ssl.cipher.suites") or [],
            "ssl.enabled.protocols": config.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"],
            "ssl.key.password": _setting(config, "ssl.key.password"),
        }
        # the truststore: librdkafka's ssl.ca.location / ssl.ca.pem, or Java's
        if _setting(config, "ssl.ca.pem"):
            settings["ssl.truststore.certificates"] = config["ssl.ca.pem"]
        elif _setting(config, "ssl.ca.location"):
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": config["ssl.ca.location"]})
        else:
            for key in ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
                        "ssl.truststore.certificates"):
                settings[key] = _setting(config, key)
        # the client certificate (mTLS)
        cert_pem = _setting(config, "ssl.certificate.pem")
        key_pem = _setting(config, "ssl.key.pem")
        if _setting(config, "ssl.certificate.location") or _setting(config, "ssl.key.location"):
            try:
                with open(config["ssl.certificate.location"], encoding="ascii") as handle:
                    cert_pem = handle.read()
                with open(config["ssl.key.location"], encoding="ascii") as handle:
                    key_pem = handle.read()
            except (OSError, KeyError, TypeError) as exc:
                raise ConfigError(f"ssl.certificate.location / ssl.key.location: cannot read the client "
                                  f"certificate and key ({exc})") from None
        if cert_pem or key_pem:
            settings.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert_pem,
                             "ssl.keystore.key": key_pem})
        else:
            for key in ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.keystore.key",
                        "ssl.keystore.certificate.chain"):
                settings[key] = _setting(config, key)
        try:
            context = client_context(settings)
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None
    mechanism = username = password = None
    token_auth = False
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(_setting(config, "sasl.mechanism") or _setting(config, "sasl.mechanisms") or "GSSAPI")
        mechanism = mechanism.upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism {mechanism!r}: klog's client logs in with {', '.join(MECHANISMS)}")
        username, password = _setting(config, "sasl.username"), _setting(config, "sasl.password")
        jaas_text = _setting(config, "sasl.jaas.config")
        if jaas_text and not username:
            try:
                options = parse_jaas(jaas_text).options
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            username, password = options.get("username"), options.get("password")
            token_auth = options.get("tokenauth", "false").lower() == "true"
        if not username or password is None:
            raise ConfigError(f"security.protocol={protocol}: set sasl.username and sasl.password (or "
                              "sasl.jaas.config with username and password)")
    elif protocol not in ("SSL",):
        raise ConfigError(f"security.protocol {protocol!r} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    return ClientSecurity(protocol, context, mechanism, username, password, token_auth)

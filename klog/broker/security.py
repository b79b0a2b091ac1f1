"""Each listener's security (``listener.security.protocol.map``): its TLS context, its SASL mechanisms and users,
and how a connection's principal is found.

``SSL`` and ``SASL_SSL`` listeners wrap their connections in TLS (:func:`klog.security.tls.server_context` from the
listener's ``ssl.*`` settings, ``listener.name.<l>.ssl.*`` first); ``SASL_PLAINTEXT`` and ``SASL_SSL`` ones admit
only ApiVersions, SaslHandshake and SaslAuthenticate until the client logged in (anything else closes the
connection, as Kafka does). The principal: the SASL user, else the client certificate's subject mapped by
``ssl.principal.mapping.rules`` (mTLS), else ``User:ANONYMOUS``.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from klog.metadata.config import SASL_MECHANISMS, BrokerConfig, ConfigError, Listener
from klog.security.sasl import JaasConfig, SaslSession, parse_jaas
from klog.security.scram import ScramCredential, mechanism_type
from klog.security.tls import PrincipalMapper, TlsConfigError, server_context

if TYPE_CHECKING:
    from klog.client.connection import BrokerConnection

__all__ = ["InterBrokerConnector", "ListenerSecurity", "inter_broker_security", "listener_securities"]

#: what a client may send on a SASL listener before it is authenticated
PRE_AUTH_APIS = frozenset({17, 18, 36})   # SaslHandshake, ApiVersions, SaslAuthenticate


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    #: SASL mechanisms offered (empty: not a SASL listener)
    mechanisms: list[str] = field(default_factory=list)
    #: PLAIN's users, per mechanism JAAS config (``listener.name.<l>.plain.sasl.jaas.config`` first)
    plain_users: Mapping[str, str] = field(default_factory=dict)
    principal_mapper: PrincipalMapper | None = None
    #: connection.failed.authentication.delay.ms, in seconds
    failed_auth_delay_s: float = 0.1
    #: sasl.server.max.receive.size
    max_receive_size: int = 524288
    #: connections.max.reauth.ms (0: sessions never expire)
    reauth_ms: int = 0

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def new_session(self, scram_lookup: Callable[[str, str], ScramCredential | None]) -> SaslSession:
        return SaslSession(self.mechanisms, self.plain_users, scram_lookup)


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    text = config.listener_setting(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        raise ConfigError(key, str(exc)) from None


def _security(config: BrokerConfig, lst: Listener) -> ListenerSecurity:
    protocol = lst.security_protocol
    settings = config.listener_security(lst.name)
    security = ListenerSecurity(lst.name, protocol,
                                failed_auth_delay_s=settings["connection.failed.authentication.delay.ms"] / 1000,
                                max_receive_size=settings["sasl.server.max.receive.size"],
                                reauth_ms=settings["connections.max.reauth.ms"])
    if protocol in ("SSL", "SASL_SSL"):
        try:
            security.ssl_context = server_context(settings)
            security.principal_mapper = PrincipalMapper(settings["ssl.principal.mapping.rules"])
        except TlsConfigError as exc:
            key = exc.key if exc.key not in config.listener_settings.get(lst.name, {}) \
                else f"listener.name.{lst.name.lower()}.{exc.key}"
            raise ConfigError(key, f"listener {lst.name} ({protocol}): {str(exc).partition(': ')[2]}") from None
    if security.sasl:
        enabled = settings["sasl.enabled.mechanisms"]
        served = [m for m in enabled if m in SASL_MECHANISMS]
        if not served:
            raise ConfigError("sasl.enabled.mechanisms", f"listener {lst.name} ({protocol}) offers "
                              f"{', '.join(enabled)}; klog serves {', '.join(SASL_MECHANISMS)}: set "
                              f"listener.name.{lst.name.lower()}.sasl.enabled.mechanisms")
        security.mechanisms = served
        if "PLAIN" in served:
            jaas = _jaas(config, lst.name, "PLAIN")
            security.plain_users = jaas.plain_users() if jaas is not None else {}
    return security


def listener_securities(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every served listener's security by name; a ConfigError names a setting that cannot be used."""
    return {lst.name: _security(config, lst) for lst in config.listeners}


def scram_lookup(image_of: Callable[[], Any]) -> Callable[[str, str], ScramCredential | None]:
    """``lookup(mechanism, user)`` over the current metadata image's UserScramCredentialRecords."""

    def lookup(mechanism: str, user: str) -> ScramCredential | None:
        stored = image_of().scram_credentials.get((user, mechanism_type(mechanism)))
        if stored is None:
            return None
        return ScramCredential(stored.salt, stored.stored_key, stored.server_key, stored.iterations)

    return lookup


def inter_broker_security(config: BrokerConfig, listener: str | None = None, *,
                          mechanism_key: str = "sasl.mechanism.inter.broker.protocol") -> Any:
    """How this broker connects to other brokers' ``listener`` (default: the inter-broker listener,
    ``config.inter_broker_listener``):
    TLS with that listener's truststore (and its keystore as the client certificate, for mTLS listeners) and host
    name checks per ``ssl.endpoint.identification.algorithm``; SASL with ``mechanism_key``'s mechanism and the
    ``username``/``password`` of that mechanism's JAAS config on the listener, as Kafka's brokers log in to each
    other. None for PLAINTEXT. A ConfigError names what is missing."""
    from klog.client.security import ClientSecurity
    from klog.security.tls import client_context

    default = config.inter_broker_listener
    name = listener or (default.name if default is not None else "")
    lst = next((x for x in config.listeners if x.name == name), None)
    protocol = lst.security_protocol if lst is not None else "PLAINTEXT"
    if protocol == "PLAINTEXT":
        return None
    settings = config.listener_security(name)
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = client_context(settings)
        except TlsConfigError as exc:
            raise ConfigError(exc.key, f"inter-broker connections over {name}: {str(exc).partition(': ')[2]}") \
                from None
    mechanism = username = password = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(config[mechanism_key]).upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(mechanism_key, f"{mechanism}: listener {name} is {protocol}; brokers log in to each "
                              f"other with one of {', '.join(SASL_MECHANISMS)}")
        jaas = _jaas(config, name, mechanism)
        username = jaas.options.get("username") if jaas is not None else None
        password = jaas.options.get("password") if jaas is not None else None
        if not username or password is None:
            raise ConfigError(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              f"brokers log in to listener {name} with {mechanism}: its JAAS config needs "
                              "username=\"...\" password=\"...\"")
    return ClientSecurity(protocol, context, mechanism, username, password)


class InterBrokerConnector:
    """Opens this broker's connections to the other brokers' inter-broker listener with that listener's TLS and
    SASL settings (:func:`inter_broker_security`, built once): the one way the replica fetchers, the transaction
    coordinator (WriteTxnMarkers, verify-only AddPartitionsToTxn) and the share-group state writes reach another
    broker. A ConfigError at construction names a setting that cannot be used."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        lst = getattr(config, "inter_broker_listener", None)
        #: the inter-broker listener's name (other brokers' endpoints are looked up under it)
        self.listener_name: str = lst.name if lst is not None else ""
        #: klog.client.security.ClientSecurity of those connections (None: PLAINTEXT)
        self.security = inter_broker_security(config) if lst is not None else None

    async def open(self, host: str, port: int, node_id: int, *, client_id: str, request_timeout_ms: int,
                   max_response_bytes: int, connect_timeout_ms: int) -> BrokerConnection:
        """A connected, logged-in klog.client.connection.BrokerConnection to another broker."""
        from klog.client.connection import BrokerConnection

        return await BrokerConnection.open(host, port, node_id, client_id=client_id,
                                           request_timeout_ms=request_timeout_ms,
                                           max_response_bytes=max_response_bytes,
                                           connect_timeout_ms=connect_timeout_ms, security=self.security)

"""Each listener's security (``listener.security.protocol.map``): its TLS context, its SASL mechanisms and users,
and how a connection's principal is found.

``SSL`` and ``SASL_SSL`` listeners wrap their connections in TLS (:func:`klog.security.tls.server_context` from the
listener's ``ssl.*`` settings, ``listener.name.<l>.ssl.*`` first); ``SASL_PLAINTEXT`` and ``SASL_SSL`` ones admit
only ApiVersions, SaslHandshake and SaslAuthenticate until the client logged in (anything else closes the
connection, as Kafka does). The principal: the SASL user, else the client certificate's subject mapped by
``ssl.principal.mapping.rules`` (mTLS), else ``User:ANONYMOUS``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from klog._native import TlsServerConfig
from klog.metadata.config import SASL_MECHANISMS, SECURITY_KEYS, BrokerConfig, ConfigError, Listener
from klog.metadata.config_security import dynamic_ssl_settings
from klog.security.oauth import Validator
from klog.security.sasl import SaslSession, listener_jaas, listener_oauth_validator
from klog.security.scram import ScramCredential, mechanism_type
from klog.security.tokens import TokenLogin
from klog.security.tls import (
    DynamicTls,
    PrincipalMapper,
    TlsConfigError,
    client_context,
    native_server_config,
    reloaded_server_context,
    server_context,
    with_dynamic,
)

if TYPE_CHECKING:
    from klog.client.connection import BrokerConnection

__all__ = ["InterBrokerConnector", "ListenerSecurity", "dynamic_ssl_problem", "inter_broker_security",
           "listener_securities"]

log = logging.getLogger("klog.broker.security")

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
    #: how OAUTHBEARER tokens are checked (None: the listener does not offer OAUTHBEARER)
    oauth_validator: Validator | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    #: the listener's static ssl.*/sasl.* settings (listener.name.<l>.* resolved), under the dynamic ones
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: the dynamic ssl.* settings (this broker's ConfigRecords) new connections are served with
    applied_dynamic: Mapping[str, str] = field(default_factory=dict)
    #: the context of applied_dynamic (None: ssl_context, the static settings')
    served_context: ssl.SSLContext | None = None
    #: klog.tls.engine=native: the native session's settings, the static ones and applied_dynamic's (None: the static)
    native: TlsServerConfig | None = None
    served_native: TlsServerConfig | None = None
    #: klog.tls.engine=native set explicitly: settings the native session cannot serve are refused, not served by
    #: the ssl module
    native_required: bool = False
    #: why the listener's static settings are served by the ssl module though klog.tls.engine is native (left at
    #: its default): the setting and what the native session cannot do with it (None: not fallen back)
    fallback: str | None = None
    #: the applied dynamic settings are ones only the ssl module serves (klog.tls.engine left at its default): new
    #: connections are served by it (with served_context), under the native engine's protocol
    served_by_ssl: bool = False
    #: the listener's current dynamic ssl.* settings (follow_dynamic_ssl; None: not followed)
    dynamic_of: Callable[[], Mapping[str, str]] | None = None

    def new_session(self, scram_lookup: Callable[[str, str], ScramCredential | None],
                    token_lookup: Callable[[str, str], TokenLogin | None] | None = None) -> SaslSession:
        return SaslSession(self.mechanisms, self.plain_users, scram_lookup, token_lookup, self.oauth_validator)

    def settings_with(self, dynamic: Mapping[str, str]) -> dict[str, Any]:
        """The static settings with the dynamic ssl.* ones (ConfigRecord strings) over them."""
        out = dict(self.settings)
        for key, value in dynamic.items():
            out[key] = SECURITY_KEYS[key].parse(value)
        return out

    def follow_dynamic_ssl(self, dynamic_of: Callable[[], Mapping[str, str]]) -> None:
        """Serve every new TLS connection with the listener's current dynamic ssl.* settings (``dynamic_of()``),
        as Kafka's reconfigured SslFactory: the server-name callback, called on each ClientHello (with or without
        SNI), swaps the context of the settings in; connections already open keep the one they started with."""
        assert self.ssl_context is not None
        self.dynamic_of = dynamic_of

        def choose(sslobj: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
            self._follow_dynamic()
            if self.served_context is not None:
                sslobj.context = self.served_context

        self.ssl_context.sni_callback = choose

    def native_config(self) -> TlsServerConfig | ssl.SSLContext:
        """klog.tls.engine=native: the settings a new connection is served with (the dynamic ones applied), or,
        when those are settings only Python's ssl module serves (the engine left at its default), their context
        (the connection is then served by the ssl module under the native engine's protocol)."""
        self._follow_dynamic()
        if self.served_by_ssl and self.served_context is not None:
            return self.served_context
        config = self.served_native or self.native
        assert config is not None, f"listener {self.name} has no native TLS settings"
        return config

    def _follow_dynamic(self) -> None:
        if self.dynamic_of is None:
            return
        try:
            dynamic = self.dynamic_of()
            if dynamic != self.applied_dynamic:
                self._reload(dynamic)
        except Exception:   # never fail a handshake for this: the previous settings serve
            log.exception("listener %s: cannot apply its dynamic TLS settings", self.name)

    def _reload(self, dynamic: Mapping[str, str]) -> None:
        by_ssl = None   # why the native session cannot serve the new settings (klog.tls.engine at its default)
        try:
            context = None if not dynamic else reloaded_server_context(self.settings_with(self.applied_dynamic),
                                                                       self.settings_with(dynamic))
            native = None
            if dynamic and self.native is not None:
                try:
                    native = native_server_config(self.settings_with(dynamic))
                except TlsConfigError as exc:
                    if self.native_required:
                        raise
                    by_ssl = _why(exc)
        except (TlsConfigError, ConfigError) as exc:   # validated before it was written: the files changed since
            log.error("listener %s: keeping its TLS settings, the dynamic ones cannot be used: %s", self.name, exc)
        else:
            self.served_context = context
            self.served_native = native
            if by_ssl is not None:   # as the listener would have started with these settings
                log.warning("listener %s: new connections use the reloaded TLS settings (%s), served by Python's ssl "
                            "module, not klog's native TLS session, which cannot serve them (%s); connections "
                            "already open keep theirs", self.name, ", ".join(sorted(dynamic)), by_ssl)
            else:
                log.info("listener %s: new connections use the reloaded TLS settings (%s)%s", self.name,
                         ", ".join(sorted(dynamic)) or "the static ones",
                         ", served by klog's native TLS session again" if self.served_by_ssl else "")
            self.served_by_ssl = by_ssl is not None
        self.applied_dynamic = dict(dynamic)


def _security(config: BrokerConfig, lst: Listener) -> ListenerSecurity:
    protocol = lst.security_protocol
    settings = config.listener_security(lst.name)
    security = ListenerSecurity(lst.name, protocol, settings=settings,
                                failed_auth_delay_s=settings["connection.failed.authentication.delay.ms"] / 1000,
                                max_receive_size=settings["sasl.server.max.receive.size"],
                                reauth_ms=settings["connections.max.reauth.ms"])
    if protocol in ("SSL", "SASL_SSL"):
        try:
            security.ssl_context = server_context(settings)
            if config["klog.tls.engine"] == "native":
                security.native_required = _native_required(config)
                security.native, security.fallback = _native_or_why_not(security, settings)
            security.principal_mapper = PrincipalMapper(settings["ssl.principal.mapping.rules"])
        except TlsConfigError as exc:
            key = exc.key if exc.key not in config.listener_settings.get(lst.name, {}) \
                else f"listener.name.{lst.name.lower()}.{exc.key}"
            raise ConfigError(key, f"listener {lst.name} ({protocol}): {str(exc).partition(': ')[2]}") from None
    if security.sasl:
        enabled = settings["sasl.enabled.mechanisms"]
        served = [m for m in enabled if m in SASL_MECHANISMS or m == "OAUTHBEARER"]
        if not served:
            raise ConfigError("sasl.enabled.mechanisms", f"listener {lst.name} ({protocol}) offers "
                              f"{', '.join(enabled)}; klog serves {', '.join(SASL_MECHANISMS)}, OAUTHBEARER: set "
                              f"listener.name.{lst.name.lower()}.sasl.enabled.mechanisms")
        security.mechanisms = served
        if "PLAIN" in served:
            jaas = listener_jaas(config, lst.name, "PLAIN")
            security.plain_users = jaas.plain_users() if jaas is not None else {}
        if "OAUTHBEARER" in served:
            security.oauth_validator = listener_oauth_validator(config, lst.name)
    return security


def _native_or_why_not(security: ListenerSecurity, settings: Mapping[str, Any]
                        ) -> tuple[TlsServerConfig | None, str | None]:
    """The listener's native TLS settings; (None, why) where the native session cannot serve settings Python's ssl
    module can (OpenSSL's CBC suites only, an Ed448 or DSA key) and klog.tls.engine was left at its default: a properties
    file that starts a Kafka node starts this one, on the ssl engine (the listener logs it when it binds). Set
    explicitly, native must serve them."""
    try:
        return native_server_config(settings), None
    except TlsConfigError as exc:
        if security.native_required:
            raise
        return None, _why(exc)


def _why(exc: TlsConfigError) -> str:
    """A setting the native session cannot serve and why, for the warning of a fallback to the ssl module."""
    return f"{exc.key}: {str(exc).partition(': ')[2] or exc}"


def _native_required(config: BrokerConfig) -> bool:
    """klog.tls.engine=native was set: TLS settings the native session cannot serve are refused."""
    return config["klog.tls.engine"] == "native" and config.is_set("klog.tls.engine")


def listener_securities(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every served listener's security by name; a ConfigError names a setting that cannot be used. Logs nothing:
    a listener served by the ssl module for want of the native session's support (``fallback``) is logged when it
    binds (klog.broker.network.listener), once."""
    return {lst.name: _security(config, lst) for lst in config.listeners}


def dynamic_ssl_problem(config: BrokerConfig, current: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    """Why this broker's dynamic configs ``after`` (its resource's, from ``current``) cannot be served by its TLS
    listeners, its controller listener included (Kafka's validation of a dynamic SslFactory update: the stores
    load, the certificate keeps its subject and alternative names, and makes a client context for the node's own
    connections); None if they can. With klog.tls.engine=native set, a broker listener's settings must also be ones
    the native session serves; left at its default, those only the ssl module serves are taken (the listener's
    new connections then go to the ssl module, as at start-up)."""
    controllers = {lst.name for lst in config.controller_listeners}
    for lst in [*config.listeners, *config.controller_listeners]:
        before_l, after_l = dynamic_ssl_settings(current, lst.name), dynamic_ssl_settings(after, lst.name)
        if lst.security_protocol not in ("SSL", "SASL_SSL") or before_l == after_l:
            continue
        settings = config.listener_security(lst.name)
        try:
            new = with_dynamic(settings, after_l)
            reloaded_server_context(with_dynamic(settings, before_l), new)
            if _native_required(config) and lst.name not in controllers:
                native_server_config(new)
            client_context(new)
        except (TlsConfigError, ConfigError) as exc:
            return (f"Invalid value {exc} for listener {lst.name}: validation of dynamic config update of its TLS "
                    "settings failed")
    return None


def scram_lookup(image_of: Callable[[], Any]) -> Callable[[str, str], ScramCredential | None]:
    """``lookup(mechanism, user)`` over the current metadata image's UserScramCredentialRecords."""

    def lookup(mechanism: str, user: str) -> ScramCredential | None:
        stored = image_of().scram_credentials.get((user, mechanism_type(mechanism)))
        if stored is None:
            return None
        return ScramCredential(stored.salt, stored.stored_key, stored.server_key, stored.iterations)

    return lookup


def dynamic_ssl_of(config: BrokerConfig, listener: str, image_configs: Callable[[], Mapping[Any, Mapping[str, str]]]
                   ) -> Callable[[], Mapping[str, str]]:
    """``listener``'s dynamic ssl.* settings among this broker's ConfigRecords in ``image_configs()`` (the metadata
    image's configs), read at each call."""
    from klog.metadata.image import ConfigResourceType

    resource = (ConfigResourceType.BROKER, str(config.node_id))
    return lambda: dynamic_ssl_settings(image_configs().get(resource, {}), listener)


def inter_broker_security(config: BrokerConfig, listener: str | None = None, *,
                          mechanism_key: str = "sasl.mechanism.inter.broker.protocol",
                          image_configs: Callable[[], Mapping[Any, Mapping[str, str]]] | None = None) -> Any:
    """How this broker connects to other brokers' ``listener`` (default: the inter-broker listener,
    ``config.inter_broker_listener``):
    TLS with that listener's truststore (and its keystore as the client certificate, for mTLS listeners) and host
    name checks per ``ssl.endpoint.identification.algorithm``; SASL with ``mechanism_key``'s mechanism and the
    ``username``/``password`` of that mechanism's JAAS config on the listener, as Kafka's brokers log in to each
    other. None for PLAINTEXT. ``image_configs``: the metadata image's configs, whose dynamic
    ``listener.name.<l>.ssl.*`` settings of this broker each new connection follows (as Kafka reconfigures its
    inter-broker clients' SslFactory); None: the static settings only. A ConfigError names what is missing."""
    from klog.client.security import ClientSecurity

    default = config.inter_broker_listener
    name = listener or (default.name if default is not None else "")
    lst = next((x for x in config.listeners if x.name == name), None)
    protocol = lst.security_protocol if lst is not None else "PLAINTEXT"
    if protocol == "PLAINTEXT":
        return None
    settings = config.listener_security(name)
    context = None
    source = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = client_context(settings)
        except TlsConfigError as exc:
            raise ConfigError(exc.key, f"inter-broker connections over {name}: {str(exc).partition(': ')[2]}") \
                from None
        if image_configs is not None:
            source = DynamicTls(name, settings, dynamic_ssl_of(config, name, image_configs)).client
    mechanism = username = password = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(config[mechanism_key]).upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(mechanism_key, f"{mechanism}: listener {name} is {protocol}; brokers log in to each "
                              f"other with one of {', '.join(SASL_MECHANISMS)}")
        jaas = listener_jaas(config, name, mechanism)
        username = jaas.options.get("username") if jaas is not None else None
        password = jaas.options.get("password") if jaas is not None else None
        if not username or password is None:
            raise ConfigError(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              f"brokers log in to listener {name} with {mechanism}: its JAAS config needs "
                              "username=\"...\" password=\"...\"")
    return ClientSecurity(protocol, context, mechanism, username, password, tls_source=source)


class InterBrokerConnector:
    """Opens this broker's connections to the other brokers' inter-broker listener with that listener's TLS and
    SASL settings (:func:`inter_broker_security`, built once): the one way the replica fetchers, the transaction
    coordinator (WriteTxnMarkers, verify-only AddPartitionsToTxn) and the share-group state writes reach another
    broker. A ConfigError at construction names a setting that cannot be used."""

    def __init__(self, config: BrokerConfig,
                 image_configs: Callable[[], Mapping[Any, Mapping[str, str]]] | None = None) -> None:
        """``image_configs``: the broker's metadata image's configs (new connections follow the inter-broker
        listener's dynamic ssl.* settings of this broker); None: the static settings."""
        self.config = config
        lst = getattr(config, "inter_broker_listener", None)
        #: the inter-broker listener's name (other brokers' endpoints are looked up under it)
        self.listener_name: str = lst.name if lst is not None else ""
        #: klog.client.security.ClientSecurity of those connections (None: PLAINTEXT)
        self.security = inter_broker_security(config, image_configs=image_configs) if lst is not None else None

    async def open(self, host: str, port: int, node_id: int, *, client_id: str, request_timeout_ms: int,
                   max_response_bytes: int, connect_timeout_ms: int) -> BrokerConnection:
        """A connected, logged-in klog.client.connection.BrokerConnection to another broker."""
        from klog.client.connection import BrokerConnection

        return await BrokerConnection.open(host, port, node_id, client_id=client_id,
                                           request_timeout_ms=request_timeout_ms,
                                           max_response_bytes=max_response_bytes,
                                           connect_timeout_ms=connect_timeout_ms, security=self.security)

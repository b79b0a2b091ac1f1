"""The server side of SASL as a Kafka broker runs it, sans IO: the mechanism a connection chose in SaslHandshake,
then the tokens of SaslAuthenticate, until the client is authenticated (:class:`SaslSession`).

Mechanisms: PLAIN (RFC 4616; the users are the ``user_<name>="<password>"`` options of the listener's
``PlainLoginModule`` JAAS config, :func:`parse_jaas`) and SCRAM-SHA-256/512 (:mod:`klog.security.scram`;
the credentials are the metadata image's ``UserScramCredentialRecord``\\s).

A failure raises :class:`AuthenticationFailed`, whose message is what Kafka sends the client: PlainSaslServer's own
words for PLAIN ("Authentication failed: Invalid username or password"), "Authentication failed during
authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" for any SCRAM refusal but an
authorization id other than the user; ``log_reason`` is for the broker's one log line (it names the user, never a
password).
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from klog.metadata.config import BrokerConfig, ConfigError
from klog.metadata.config_security import SECURITY_KEYS
from klog.protocol.errors import ErrorCode
from klog.protocol.messages import api_name
from klog.security.oauth import JwksValidator, OAuthBearerServer, TokenRefused, Validator, validator_for
from klog.security.principal import KafkaPrincipal
from klog.security.scram import AuthorizationIdDiffers, ScramCredential, ScramError, ScramServer
from klog.security.tokens import TokenLogin

__all__ = ["AuthenticationFailed", "JaasConfig", "SaslSession", "listener_jaas", "listener_oauth_validator",
           "parse_jaas", "plain_token", "principal_changed", "reauth_mechanism_refusal", "unexpected_during_login"]

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka's words (PlainSaslServer, ScramSaslServer) for a login asking for another principal's authorization id
AUTHORIZATION_ID_DIFFERS = "Authentication failed: Client requested an authorization id that is different from username"

_JAAS_RE = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\s*(?P<opts>.*?)"
                      r"\s*;\s*$", re.S)
_OPTION_RE = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))\s*', re.S)


@dataclass(frozen=True)
class JaasConfig:
    """One ``sasl.jaas.config`` entry: the login module and its options."""

    module: str
    options: Mapping[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>`` options: user -> password."""
        return {key[5:]: value for key, value in self.options.items() if key.startswith("user_")}


def parse_jaas(text: str) -> JaasConfig:
    """``org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";`` ->
    JaasConfig. A ValueError says what is wrong (never quoting the text: it holds passwords)."""
    match = _JAAS_RE.match(text or "")
    if match is None:
        raise ValueError("sasl.jaas.config must be '<LoginModule class> required <option>=\"<value>\" ...;'")
    options: dict[str, str] = {}
    rest = match["opts"]
    pos = 0
    while pos < len(rest):
        option = _OPTION_RE.match(rest, pos)
        if option is None or option.end() == pos:
            raise ValueError(f"sasl.jaas.config: option {pos + 1} of the login module options is not "
                             "name=\"value\"")
        value = option[2] if option[2] is not None else option[3]
        options[option[1]] = re.sub(r"\\(.)", r"\1", value)
        pos = option.end()
    return JaasConfig(match["module"], options)


def plain_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN token."""
    return f"{authzid}\0{username}\0{password}".encode("utf-8")


class AuthenticationFailed(Exception):
    """The client could not be authenticated: ``str(exc)`` goes to the client, ``log_reason`` to the log."""

    def __init__(self, message: str, log_reason: str) -> None:
        super().__init__(message)
        self.log_reason = log_reason


def _invalid_credentials(mechanism: str, log_reason: str) -> AuthenticationFailed:
    return AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials with SASL "
                                f"mechanism {mechanism}", log_reason)


def principal_changed(previous: KafkaPrincipal, new: KafkaPrincipal) -> AuthenticationFailed:
    """A KIP-368 re-authentication as another principal: refused with Kafka's message (ReauthInfo's
    ensurePrincipalUnchanged)."""
    return AuthenticationFailed(f"Cannot change principals during re-authentication from {previous.principal_type}."
                                f"{previous.name}: {new.principal_type}.{new.name}",
                                f"re-authentication as {new} on a session of {previous}")

def unexpected_during_login(api_key: int, request: Any) -> dict[str, Any]:
    """The answer to a request other than SaslAuthenticate while a login is in progress: as Kafka's
    SaslServerAuthenticator, the request's error response for ErrorCode.ILLEGAL_SASL_STATE ("Unexpected Kafka request of type
    METADATA during SASL authentication."), after which the connection closes. Metadata's names each requested
    topic with the error (it has no top-level error in Kafka's error response); the others carry it at the top."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", api_name(api_key)).upper()
    message = f"Unexpected Kafka request of type {name} during SASL authentication."
    if api_key == 3:
        topics = getattr(request, "topics", None) or []
        return {"topics": [{"name": topic.name, "topic_id": getattr(topic, "topic_id", None),
                            "error_code": ErrorCode.ILLEGAL_SASL_STATE, "partitions": []} for topic in topics]}
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": message}



def reauth_mechanism_refusal(previous: str, requested: str) -> str | None:
    """Why a KIP-368 re-authentication may not use ``requested`` on a connection that logged in with ``previous``
    (Kafka's ReauthInfo.saslMechanismUnchanged): None when it is the same mechanism."""
    if requested == previous:
        return None
    return (f"SASL mechanism '{requested}' requested by client is not supported for re-authentication of "
            f"mechanism '{previous}'")


class SaslSession:
    """One connection's SASL login. ``plain_users``: PLAIN's users; ``scram_lookup(mechanism, user)``: the SCRAM
    credential. Feed :meth:`handshake` the mechanism, then :meth:`authenticate` each token until
    :attr:`principal` is set."""

    def __init__(self, enabled_mechanisms: list[str], plain_users: Mapping[str, str],
                 scram_lookup: Callable[[str, str], ScramCredential | None],
                 token_lookup: Callable[[str, str], TokenLogin | None] | None = None,
                 oauth_validator: Validator | None = None, now_ms: Callable[[], int] | None = None) -> None:
        """``token_lookup(mechanism, token_id)``: a delegation token's login (SCRAM ``tokenauth=true``);
        ``oauth_validator``: how OAUTHBEARER tokens are checked (None: OAUTHBEARER is not offered)."""
        self.enabled = [m for m in enabled_mechanisms if m == PLAIN or m in SCRAM_MECHANISMS
                        or (m == OAUTHBEARER and oauth_validator is not None)]
        self.oauth_validator = oauth_validator
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._oauth: OAuthBearerServer | None = None
        self.plain_users = plain_users
        self.scram_lookup = scram_lookup
        self.token_lookup = token_lookup
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        #: when the credential logged in with expires (a delegation token's expiry, ms since the epoch), else None
        self.credential_expiry_ms: int | None = None
        self._scram: ScramServer | None = None
        self._token: TokenLogin | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> bool:
        """Choose ``mechanism``; False when this listener does not offer it (UNSUPPORTED_SASL_MECHANISM)."""
        if mechanism not in self.enabled:
            return False
        self.mechanism = mechanism
        if mechanism == OAUTHBEARER:
            assert self.oauth_validator is not None
            self._oauth = OAuthBearerServer(self.oauth_validator, self._now_ms)
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramServer(mechanism, lambda user: self.scram_lookup(mechanism, user),
                                      token_lookup=self._token_credential)
        return True

    def _token_credential(self, token_id: str) -> ScramCredential | None:
        assert self.mechanism is not None
        self._token = self.token_lookup(self.mechanism, token_id) if self.token_lookup is not None else None
        return self._token.credential if self._token is not None else None

    def authenticate(self, token: bytes) -> bytes:
        """The answer to one client token; sets :attr:`principal` once the login succeeded."""
        mechanism = self.mechanism
        if mechanism is None:
            raise AuthenticationFailed("SaslAuthenticate before SaslHandshake", "SaslAuthenticate before handshake")
        if mechanism == PLAIN:
            return self._plain(token)
        if mechanism == OAUTHBEARER:
            return self._oauthbearer(token)
        scram = self._scram
        assert scram is not None
        try:
            if scram.username is None:
                return scram.first(token)
            answer = scram.final(token)
        except AuthorizationIdDiffers:
            raise AuthenticationFailed(AUTHORIZATION_ID_DIFFERS, f"user {scram.username!r}: another authorization id"
                                       ) from None
        except ScramError as exc:
            # Kafka's ScramSaslServer words none of these for the client
            user = scram.username
            if str(exc) != "invalid credentials":
                raise _invalid_credentials(mechanism, f"user {user!r}: {exc}") from None
            if scram.token_auth:   # the log names the token id, never its HMAC
                raise _invalid_credentials(mechanism, f"delegation token {user!r}: " + (
                    "wrong HMAC" if self._token is not None else "no such token (or expired)")) from None
            known = self.scram_lookup(mechanism, user) is not None if user is not None else False
            raise _invalid_credentials(mechanism, f"user {user!r}: " + (
                "wrong password" if known else "no such user")) from None
        if scram.token_auth:
            # a token login is its owner's, marked token-authenticated (Kafka: the ScramSaslServer's
            # authorization id is the token's owner)
            assert self._token is not None
            self.principal = self._token.owner
            self.credential_expiry_ms = self._token.expiry_timestamp_ms
        else:
            self.principal = KafkaPrincipal("User", scram.username or "")
        return answer

    def session_lifetime_ms(self, reauth_ms: int, now_ms: int | None = None) -> int | None:
        """KIP-368: how long the session of this login lasts (SaslAuthenticate v1+ ``session_lifetime_ms``, and
        when a request closes the connection unless it re-authenticated), as Kafka's SaslServerAuthenticator
        computes it: ``connections.max.reauth.ms`` (``reauth_ms``, 0: unset), no longer than the credential logged in
        with (an OAUTHBEARER token's ``exp``, a delegation token's expiry; that ends the session even when
        ``reauth_ms`` is 0), never negative; None when the session never ends (``reauth_ms`` 0 and a credential
        without an expiry) or nobody is logged in yet. The one rule of every SASL listener, the broker's and the
        controller's."""
        if self.principal is None:
            return None
        if self.credential_expiry_ms is None:
            return reauth_ms if reauth_ms > 0 else None
        now = self._now_ms() if now_ms is None else now_ms
        left = max(0, self.credential_expiry_ms - now)
        return min(reauth_ms, left) if reauth_ms > 0 else left

    @property
    def blocking(self) -> bool:
        """:meth:`authenticate` may block (an OAUTHBEARER token checked against a JWKS it may have to fetch): run
        it off the event loop."""
        return self._oauth is not None and isinstance(self._oauth.validator, JwksValidator)

    def _oauthbearer(self, token: bytes) -> bytes:
        server = self._oauth
        assert server is not None
        try:
            answer = server.evaluate(token)
        except TokenRefused as exc:
            # Kafka's client sees the RFC 7628 error it acknowledged (or why the message was refused)
            message = exc.json() if server.error is exc else str(exc)
            raise AuthenticationFailed(message, f"OAUTHBEARER token refused: {exc}") from None
        if server.token is not None:
            self.principal = KafkaPrincipal("User", server.token.principal_name)
            self.credential_expiry_ms = server.token.lifetime_ms
        return answer

    def _plain(self, token: bytes) -> bytes:
        """Kafka's PlainSaslServer: its checks in its order, its messages (sent as they are)."""
        tokens = _plain_tokens(token.decode("utf-8", errors="replace"))
        if len(tokens) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}",
                                       "malformed PLAIN token")
        authzid, username, password = tokens
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified",
                                       "PLAIN token without a user name")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified",
                                       f"user {username!r}: PLAIN token without a password")
        expected = self.plain_users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
            raise AuthenticationFailed("Authentication failed: Invalid username or password",
                                       f"user {username!r}: " + ("no such user" if expected is None
                                                                 else "wrong password"))
        if authzid and authzid != username:
            raise AuthenticationFailed(AUTHORIZATION_ID_DIFFERS, f"user {username!r}: authorization id {authzid!r}")
        self.principal = KafkaPrincipal("User", username)
        return b""


def _plain_tokens(text: str) -> list[str]:
    """A PLAIN response cut at its NULs as Kafka's PlainSaslServer.extractTokens does: at most four pieces (three
    is a well-formed response; a fourth NUL and what follows it make no fifth)."""
    tokens: list[str] = []
    start = 0
    for _ in range(4):
        end = text.find("\0", start)
        if end == -1:
            tokens.append(text[start:])
            break
        tokens.append(text[start:end])
        start = end + 1
    return tokens


def listener_jaas(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """The JAAS config of ``mechanism`` on ``listener`` (``listener.name.<l>.<mechanism>.sasl.jaas.config`` first,
    as Kafka looks it up); None when none is set. A ConfigError names a setting that cannot be read."""
    text = config.listener_setting(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        raise ConfigError(key, str(exc)) from None


def listener_oauth_validator(config: BrokerConfig, listener: str) -> Validator:
    """Kafka's choice of OAUTHBEARER server callback handler for ``listener`` (each sasl.oauthbearer.* setting may
    be given for the listener, or for its OAUTHBEARER mechanism): the same on broker and controller listeners."""
    mechanism = OAUTHBEARER
    key = f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class"
    handler_class = config.listener_setting(listener, "sasl.server.callback.handler.class", mechanism)
    jaas = listener_jaas(config, listener, mechanism)
    settings = {k: config.listener_setting(listener, k, mechanism) for k in SECURITY_KEYS
                if k.startswith("sasl.oauthbearer.")}
    try:
        return validator_for(handler_class, jaas.options if jaas is not None else {}, settings)
    except ValueError as exc:
        raise ConfigError(key, f"listener {listener}: {exc}") from None

"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) as Kafka's brokers serve it, sans IO except the JWKS fetch.

The client's one message is ``n,a=<authzid>,\\x01auth=Bearer <JWT>\\x01<key>=<value>\\x01...\\x01``
(:func:`parse_client_response`). The JWT is checked by one of Kafka's two server callback handlers, chosen as
Kafka chooses them (``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``):

- unset: ``OAuthBearerUnsecuredValidatorCallbackHandler`` (:class:`UnsecuredValidator`), for development: an
  unsigned JWS (``alg: none``) whose principal claim, ``exp``, ``iat`` and scope are checked, with the
  ``unsecuredValidator*`` options of the listener's OAUTHBEARER JAAS config;
- ``org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`` (or its older
  ``...oauthbearer.secured.`` name): :class:`JwksValidator`, the signature checked against the keys of
  ``sasl.oauthbearer.jwks.endpoint.url`` (an http(s) URL or a ``file:`` one, refreshed every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``), ``exp`` and ``iat`` required, ``sasl.oauthbearer.expected.audience``
  / ``.expected.issuer`` checked when set, ``sasl.oauthbearer.clock.skew.seconds`` of leeway (PyJWT does the
  cryptography).

The principal is ``User:<the principal claim>`` (``sasl.oauthbearer.sub.claim.name``, default ``sub``). A
refused token is answered, as Kafka does, with an RFC 7628 error (``{"status":"invalid_token"}``) the client
acknowledges with ``\\x01`` before the login fails (:class:`OAuthBearerServer`).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JwksValidator", "OAuthBearerServer", "OAuthToken", "TokenRefused", "UnsecuredValidator",
           "parse_client_response", "validator_for"]

#: the server callback handler classes of Kafka's JWKS validator (4.x name, then the 3.x one)
JWKS_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                 "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
UNSECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerUnsecuredValidatorCallbackHandler"
#: the longest client message accepted (a JWT of a few KiB fits many times)
MAX_MESSAGE_BYTES = 65536
#: signature algorithms a JWKS-validated token may use (asymmetric only: "none" and HMAC are refused)
JWKS_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
#: how long a JWKS fetch may take
JWKS_FETCH_TIMEOUT_S = 10.0
#: the largest JWKS document read
MAX_JWKS_BYTES = 1 << 20
CONTROL_A = b"\x01"
_RESPONSE_RE = re.compile(rb"^(?P<gs2>[ny]),(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvpairs>(?:[^\x01]*\x01)*)\x01$", re.S)
_AUTH_RE = re.compile(r"^[Bb]earer +(?P<token>[\x20-\x7e]+)$")


@dataclass(frozen=True)
class OAuthToken:
    """A validated token: its principal name, scope and lifetime (ms since the epoch)."""

    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int


class TokenRefused(Exception):
    """The token is not valid: ``status`` (RFC 7628 ``invalid_token`` or ``insufficient_scope``), ``scope`` (the
    scope missing), ``str(exc)`` why (for the broker's log, never the token)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        """Kafka's ``jsonErrorResponse``."""
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        return out + "}"


def parse_client_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """The client's initial response -> (authorization id, token, extensions); ValueError when malformed."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise ValueError(f"OAUTHBEARER message of {len(message)} bytes is above {MAX_MESSAGE_BYTES}")
    match = _RESPONSE_RE.match(message)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    try:
        pairs = [p.decode("utf-8") for p in match["kvpairs"].split(CONTROL_A)[:-1]]
        authzid = (match["authzid"] or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    token = None
    extensions: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError("Invalid OAUTHBEARER client first message: a key-value pair without '='")
        if key == "auth":
            auth = _AUTH_RE.match(value)
            if auth is None:
                raise ValueError("Invalid OAUTHBEARER client first message: auth is not 'Bearer <token>'")
            token = auth["token"]
        else:
            extensions[key] = value
    if token is None:
        raise ValueError("Invalid OAUTHBEARER client first message: no auth=Bearer token")
    return authzid, token, extensions


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except ValueError:
        raise TokenRefused(f"the JWT's {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenRefused(f"the JWT's {what} is not a JSON object")
    return value


def _scope_of(claims: Mapping[str, Any], scope_claim: str) -> frozenset[str]:
    """A scope claim is a list of strings, or one string that is one scope (as Kafka reads it: not split)."""
    value = claims.get(scope_claim)
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    return frozenset()


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRefused(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenRefused(f"The {name} claim is not a number")
    return float(value)


class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``, with the options of the listener's OAUTHBEARER
    JAAS config: ``unsecuredValidatorPrincipalClaimName`` (default ``sub``), ``unsecuredValidatorScopeClaimName``
    (``scope``), ``unsecuredValidatorRequiredScope`` (space-separated, none by default) and
    ``unsecuredValidatorAllowableClockSkewMs`` (0)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = tuple(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or "0"
        try:
            self.clock_skew_ms = int(skew)
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs: {skew!r} is not an integer") from None
        if self.clock_skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str, now_ms: int) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRefused("an unsecured JWS has three dot-separated parts")
        if parts[2]:
            raise TokenRefused("an unsecured JWS has an empty signature")
        header = _b64url_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenRefused(f"an unsecured JWS has alg none, not {header.get('alg')!r}")
        claims = _b64url_json(parts[1], "claims")
        exp = _number(claims, "exp", True)
        assert exp is not None
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRefused(f"The principal claim {self.principal_claim!r} is missing or not a string")
        iat = _number(claims, "iat", False)
        skew = self.clock_skew_ms
        if iat is not None and iat * 1000 - skew > now_ms:
            raise TokenRefused("The indicated time (iat) is in the future")
        if now_ms >= exp * 1000 + skew:
            raise TokenRefused("The indicated time (exp) has passed")
        if iat is not None and exp <= iat:
            raise TokenRefused("The expiration time (exp) is not after the issued-at time (iat)")
        scope = _scope_of(claims, self.scope_claim)
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            # the error names the required scope as Kafka's List.toString() does
            raise TokenRefused(f"The token lacks the required scope: {' '.join(missing)}", "insufficient_scope",
                               "[" + ", ".join(self.required_scope) + "]")
        return OAuthToken(principal, scope, int(exp * 1000))


class JwksValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` over a JWKS (``url``: http(s) or ``file:``), refreshed
    every ``refresh_ms`` (and at once, at most every ``retry_backoff_ms``, for a key id it does not know).
    Blocking: call :meth:`validate` off the event loop."""

    def __init__(self, url: str, *, refresh_ms: int = 3600000, retry_backoff_ms: int = 100,
                 expected_audience: list[str] | None = None, expected_issuer: str | None = None,
                 clock_skew_s: int = 30, sub_claim: str = "sub", scope_claim: str = "scope",
                 clock: Callable[[], float] = time.time) -> None:
        if not re.match(r"^(https?|file):", url):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url {url!r} is not an http(s) or file: URL")
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.expected_audience = list(expected_audience or [])
        self.expected_issuer = expected_issuer
        self.clock_skew_s = clock_skew_s
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, Any] = {}
        self._fetched_at = float("-inf")

    def _fetch(self) -> None:
        # Here, not at the top: urllib.request brings http.client and email (~2 MiB) into every broker otherwise.
        import urllib.request

        import jwt

        with urllib.request.urlopen(self.url, timeout=JWKS_FETCH_TIMEOUT_S) as response:  # noqa: S310 - configured URL
            text = response.read(MAX_JWKS_BYTES + 1)
        if len(text) > MAX_JWKS_BYTES:
            raise TokenRefused(f"the JWKS at {self.url} is above {MAX_JWKS_BYTES} bytes")
        keys: dict[str | None, Any] = {}
        for key in jwt.PyJWKSet.from_json(text.decode("utf-8")).keys:
            keys[key.key_id] = key
        self._keys = keys
        self._fetched_at = self._clock()

    def _key(self, kid: str | None) -> Any:
        with self._lock:
            now = self._clock()
            stale = now - self._fetched_at >= self.refresh_s
            unknown = kid not in self._keys and not (kid is None and len(self._keys) == 1)
            if stale or (unknown and now - self._fetched_at >= self.retry_backoff_s):
                try:
                    self._fetch()
                except (OSError, ValueError) as exc:
                    if not self._keys:
                        raise TokenRefused(f"cannot read the JWKS at {self.url}: {exc}") from None
            if kid is None and len(self._keys) == 1:
                return next(iter(self._keys.values()))
            key = self._keys.get(kid)
            if key is None:
                raise TokenRefused(f"no key with id {kid!r} in the JWKS at {self.url}")
            return key

    def validate(self, token: str, now_ms: int) -> OAuthToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"malformed JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in JWKS_ALGORITHMS:
            raise TokenRefused(f"JWT algorithm {alg!r} is not allowed")
        key = self._key(header.get("kid"))
        try:
            claims = jwt.decode(token, key.key, algorithms=[alg], audience=self.expected_audience or None,
                                issuer=self.expected_issuer, leeway=self.clock_skew_s,
                                options={"require": ["exp", "iat"], "verify_aud": bool(self.expected_audience)})
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"JWT validation failed: {exc}") from None
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRefused(f"The principal claim {self.sub_claim!r} is missing or not a string")
        return OAuthToken(principal, _scope_of(claims, self.scope_claim), int(float(claims["exp"]) * 1000))


Validator = UnsecuredValidator | JwksValidator


def validator_for(handler_class: str | None, jaas_options: Mapping[str, str], settings: Mapping[str, Any]
                  ) -> Validator:
    """The validator Kafka would use for a listener: by its OAUTHBEARER server callback handler class
    (``settings``: the listener's ssl.*/sasl.* settings). A ValueError says what cannot be used."""
    if not handler_class or handler_class == UNSECURED_HANDLER:
        return UnsecuredValidator(jaas_options)
    if handler_class not in JWKS_HANDLERS:
        raise ValueError(f"{handler_class}: klog serves OAUTHBEARER with {UNSECURED_HANDLER} (the default) or "
                         f"{JWKS_HANDLERS[0]}")
    url = settings.get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ValueError(f"{handler_class} needs sasl.oauthbearer.jwks.endpoint.url")
    return JwksValidator(url, refresh_ms=int(settings["sasl.oauthbearer.jwks.endpoint.refresh.ms"]),
                         retry_backoff_ms=int(settings["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"]),
                         expected_audience=settings.get("sasl.oauthbearer.expected.audience") or None,
                         expected_issuer=settings.get("sasl.oauthbearer.expected.issuer") or None,
                         clock_skew_s=int(settings["sasl.oauthbearer.clock.skew.seconds"]),
                         sub_claim=settings["sasl.oauthbearer.sub.claim.name"] or "sub",
                         scope_claim=settings["sasl.oauthbearer.scope.claim.name"] or "scope")


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's ``OAuthBearerSaslServer``): :meth:`evaluate` answers each client
    message; ``token`` is set once the client is authenticated. A refused token is answered with the JSON error
    (the exchange goes on); the client's ``\\x01`` after it raises :class:`TokenRefused` (the login fails)."""

    def __init__(self, validator: Validator, now_ms: Callable[[], int]) -> None:
        self.validator = validator
        self._now_ms = now_ms
        self.token: OAuthToken | None = None
        self.error: TokenRefused | None = None
        self.extensions: dict[str, str] = {}

    def evaluate(self, message: bytes) -> bytes:
        if message == CONTROL_A and self.error is not None:
            raise self.error
        self.error = None
        try:
            authzid, token, extensions = parse_client_response(message)
        except ValueError as exc:
            raise TokenRefused(str(exc)) from None
        try:
            validated = self.validator.validate(token, self._now_ms())
        except TokenRefused as exc:
            self.error = exc
            return exc.json().encode("utf-8")
        if authzid and authzid != validated.principal_name:
            raise TokenRefused(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                               f"different from the token's principal name ({validated.principal_name})")
        self.token = validated
        self.extensions = extensions   # as Kafka's default handlers: accepted, not interpreted
        return b""

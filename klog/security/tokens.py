"""Delegation tokens as Kafka's brokers see them (KIP-48), sans IO: a token's HMAC, and the SCRAM credential a
client logs in with (user name: the token id; password: the HMAC in base64; the SCRAM ``tokenauth=true``
extension).

The metadata log keeps only what a token is (``DelegationTokenRecord``: its id, owner, requester, renewers and
times); its HMAC is never written anywhere. Every node derives it from ``delegation.token.secret.key`` as Kafka's
``DelegationTokenManager`` does (HmacSHA512 of the token id keyed by the secret's UTF-8 bytes), so all nodes must
share the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from klog.metadata.config import BrokerConfig
from klog.metadata.image import DelegationToken
from klog.security.principal import KafkaPrincipal
from klog.security.scram import MIN_ITERATIONS, ScramCredential, make_credential

__all__ = ["TokenCredentials", "TokenLogin", "token_hmac", "token_password", "token_secret_key"]

#: how many tokens' derived SCRAM credentials a broker keeps (each is one PBKDF2 of MIN_ITERATIONS rounds)
MAX_CACHED_CREDENTIALS = 10_000


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """The token's HMAC (Kafka: ``Mac.getInstance("HmacSHA512")`` keyed by the secret's UTF-8 bytes)."""
    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def token_password(secret_key: str, token_id: str) -> str:
    """What a client logs in with as the SCRAM password: the HMAC in base64 (``hmacAsBase64String``)."""
    return base64.b64encode(token_hmac(secret_key, token_id)).decode("ascii")


@dataclass(frozen=True, slots=True)
class TokenLogin:
    """A token a client may log in with: the SCRAM credential of its password, its owner and its expiry."""

    credential: ScramCredential
    owner: KafkaPrincipal
    expiry_timestamp_ms: int


class TokenCredentials:
    """SCRAM credentials of the tokens of the current image (``tokens_of()``: token id -> the image's
    DelegationToken), derived on first use and kept while the token's record is unchanged, as Kafka's
    ``DelegationTokenCache`` keeps one ScramCredential per token and mechanism. ``secret_key`` None: tokens are
    disabled and no token logs in."""

    def __init__(self, secret_key: str | None, tokens_of: Callable[[], Mapping[str, DelegationToken]],
                 now_ms: Callable[[], int]) -> None:
        self.secret_key = secret_key
        self._tokens_of = tokens_of
        self._now_ms = now_ms
        self._cache: dict[tuple[str, str], tuple[DelegationToken, ScramCredential]] = {}

    def lookup(self, mechanism: str, token_id: str) -> TokenLogin | None:
        """The login of ``token_id`` for ``mechanism``; None for an unknown or expired token (Kafka removes
        expired tokens with its periodic check; a login is refused from the expiry time on)."""
        if self.secret_key is None:
            return None
        token = self._tokens_of().get(token_id)
        if token is None:
            return None
        expiry = token.expiration_timestamp
        if min(expiry, token.max_timestamp) < self._now_ms():
            return None
        try:
            owner = KafkaPrincipal.parse(token.owner)
        except ValueError:
            return None
        key = (token_id, mechanism)
        cached = self._cache.get(key)
        if cached is not None and cached[0] is token:
            credential = cached[1]
        else:
            credential = make_credential(mechanism, token_password(self.secret_key, token_id), MIN_ITERATIONS)
            if len(self._cache) >= MAX_CACHED_CREDENTIALS:
                self._cache.clear()
            self._cache[key] = (token, credential)
        return TokenLogin(credential, KafkaPrincipal(owner.principal_type, owner.name, token_authenticated=True),
                          expiry)


def token_secret_key(config: BrokerConfig) -> str | None:
    """``delegation.token.secret.key`` (else its deprecated name ``delegation.token.master.key``); None: tokens
    are disabled."""
    return config["delegation.token.secret.key"] or config["delegation.token.master.key"] or None

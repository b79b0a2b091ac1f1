"""KIP-368 with OAUTHBEARER on a SASL controller listener, on klog and on Apache Kafka 4.x from the same properties
(one combined node; the Kafka side under ``long``).

The listener's ``connections.max.reauth.ms`` is 10 minutes, or unset (0: sessions without an expiring credential never
end), so a session's end is its token's: SaslAuthenticate's ``session_lifetime_ms`` is the token's remaining life, a
connection whose token expired is closed at its first request after the expiry, one that logged in again with a
fresh token on the open connection keeps being served, and a PLAIN login on the same listener keeps the whole 10
minutes (or never ends). (The node's own connections log in with PLAIN.)"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol.errors import ErrorCode
from klog.testing.cluster import cluster_of
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

REAUTH_MS = 600_000
#: the short-lived tokens' lifetime
TOKEN_S = 3
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="controller-secret" user_controller="controller-secret";')
#: Kafka's default (unsecured JWS) OAUTHBEARER validator, as a development setup configures it
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="controller";')
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
    "listener.name.controller.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    "offsets.topic.replication.factor": 1,
}


@pytest.fixture(scope="module", params=[REAUTH_MS, 0], ids=["reauth-10min", "reauth-unset"])
def reauth_ms(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, reauth_ms: int, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp(f"oauth-expiry-{request.param}")
    properties: dict[str, object] = dict(PROPERTIES)
    if reauth_ms:
        properties["listener.name.controller.connections.max.reauth.ms"] = reauth_ms
    with cluster_of(request.param, root, 1, properties=properties) as started:
        yield started


def _b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def unsecured_token(lifetime_s: int) -> tuple[str, float]:
    """An unsecured JWS for ``alice`` expiring in ``lifetime_s`` seconds, and its expiry (epoch seconds)."""
    now = int(time.time())
    expiry = now + lifetime_s
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': 'alice', 'iat': now, 'exp': expiry})}.", float(expiry)


class Raw(WireClient):
    """One connection to the controller listener, speaking Kafka's protocol request by request."""

    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port, client_id="oauth-expiry-test")

    def login(self, mechanism: str, auth_bytes: bytes) -> Any:
        """SaslHandshake v1 then SaslAuthenticate v2: the SaslAuthenticate answer."""
        handshake = self.request(17, 1, {"mechanism": mechanism})
        assert handshake.error_code == ErrorCode.NONE, handshake
        return self.request(36, 2, {"auth_bytes": auth_bytes})

    def login_with_token(self, token: str) -> Any:
        return self.login("OAUTHBEARER", f"n,,\x01auth=Bearer {token}\x01\x01".encode())

    def api_versions(self) -> int:
        return int(self.request(18, 3, {"client_software_name": "oauth-expiry-test", "client_software_version": "1"})
                   .error_code)


def test_a_token_session_ends_with_the_token_not_with_connections_max_reauth_ms(node: Any, reauth_ms: int) -> None:
    port = node.controller_ports[node.controller_ids[0]]
    expiring, renewed, plain = Raw(port), Raw(port), Raw(port)
    try:
        token, expiry = unsecured_token(TOKEN_S)
        first = expiring.login_with_token(token)
        # the token's remaining life (under 3 s, less the time since its iat second), not the listener's 10 minutes
        # (nor "never" without connections.max.reauth.ms)
        assert first.error_code == ErrorCode.NONE, first
        assert 1000 < first.session_lifetime_ms <= TOKEN_S * 1000
        again = renewed.login_with_token(token)
        assert again.error_code == ErrorCode.NONE and again.session_lifetime_ms <= TOKEN_S * 1000
        answer = plain.login("PLAIN", b"\0controller\0controller-secret")
        assert (answer.error_code, answer.session_lifetime_ms) == (ErrorCode.NONE, reauth_ms)
        assert expiring.api_versions() == ErrorCode.NONE   # served while the token lives
        time.sleep(1.2)   # Kafka starts at most one re-authentication a second
        fresh = renewed.login_with_token(unsecured_token(600)[0])
        assert fresh.error_code == ErrorCode.NONE
        assert REAUTH_MS - 5000 < fresh.session_lifetime_ms <= REAUTH_MS
        time.sleep(max(0.0, expiry + 0.7 - time.time()))
        # past the first token's expiry: its connection is closed at its next request, the others are served
        with pytest.raises(OSError):
            expiring.api_versions()
        assert renewed.api_versions() == ErrorCode.NONE
        assert plain.api_versions() == ErrorCode.NONE
    finally:
        expiring.close()
        renewed.close()
        plain.close()

"""SASL/OAUTHBEARER on klog and on Apache Kafka 4.x from the same properties, with confluent-kafka's ``oauth_cb``
handing over tokens made here: Kafka's default unsecured JWS validator (``unsecuredValidatorRequiredScope``) on one
listener, and ``OAuthBearerValidatorCallbackHandler`` against a JWKS served by this test over HTTP (expected
audience and issuer) on another. Good tokens produce; an expired one, one without the required scope, one signed by
a key not in the JWKS and one for another audience are refused with SASL_AUTHENTICATION_FAILED while the broker
keeps serving. One broker of each kind for the module."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import struct
import threading
import time
import uuid

import pytest

import jwt
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa

from klog.protocol import decode_response, encode_request
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import free_port, one_broker

pytestmark = pytest.mark.java

LOGIN = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
         'unsecuredLoginStringClaim_sub="broker"')
ISSUER = "https://idp.klog.test"
REAUTH_MS = 600_000
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks_url():
    """A JWKS with KEY (kid k1), served over HTTP for the module."""
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key())), "kid": "k1", "alg": "RS256",
           "use": "sig"}
    body = json.dumps({"keys": [jwk]}).encode()

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _properties(jwks_url):
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,OIDC:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            LOGIN + ' unsecuredValidatorRequiredScope="kafka";',
        "listener.name.oidc.oauthbearer.sasl.jaas.config": LOGIN + ";",
        "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "connection.failed.authentication.delay.ms": 100,
        # KIP-368: sessions last at most 10 minutes, and no longer than their token
        "connections.max.reauth.ms": REAUTH_MS,
    }


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, jwks_url):
    """(unsecured-validator listener, JWKS listener) bootstraps of a klog broker or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    unsecured_port, oidc_port = free_port(), free_port()
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{unsecured_port},OIDC://127.0.0.1:{oidc_port}"
    bootstraps = (f"127.0.0.1:{unsecured_port}", f"127.0.0.1:{oidc_port}")
    # Kafka 4 reads a JWKS only from URLs this system property allows
    with one_broker(request.param, root, _properties(jwks_url), extra_listeners=listeners.split(","),
                    jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks_url}"]):
        yield bootstraps


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _unsecured(**claims) -> str:
    now = int(time.time())
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': 'alice', 'iat': now, 'exp': now + 600, **claims})}."


def _signed(key=KEY, **claims) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "svc", "aud": "kafka", "iss": ISSUER, "iat": now, "exp": now + 600, **claims}, key,
                      algorithm="RS256", headers={"kid": "k1"})


def _produce(bootstrap: str, token: str) -> tuple[bool, list]:
    """Produce one record to a new topic as ``token``'s holder: (the topic exists after it, the client's
    errors)."""
    errors: list = []

    def oauth_cb(_config):
        return token, time.time() + 600, "client"

    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": oauth_cb, "error_cb": errors.append,
                         "message.timeout.ms": 8000, "reconnect.backoff.ms": 2000})
    topic = f"oauth-{uuid.uuid4().hex[:6]}"
    producer.produce(topic, b"hello")
    producer.flush(12)
    if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        return False, errors
    return topic in producer.list_topics(topic, timeout=10).topics, errors


def _refused(bootstrap: str, token: str) -> str:
    ok, errors = _produce(bootstrap, token)
    assert not ok
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    return auth[0].str()


def test_the_unsecured_validator_admits_a_token_with_the_required_scope(server):
    unsecured, _ = server
    assert _produce(unsecured, _unsecured(scope=["kafka", "other"]))[0]
    assert "invalid_token" in _refused(unsecured, _unsecured(scope="kafka", exp=int(time.time()) - 60))
    assert "insufficient_scope" in _refused(unsecured, _unsecured(scope="other"))


@pytest.mark.long
def test_the_jwks_validator_admits_only_tokens_signed_by_its_keys_for_its_audience(server):
    _, oidc = server
    assert _produce(oidc, _signed())[0]
    assert "invalid_token" in _refused(oidc, _signed(STRANGER))
    assert "invalid_token" in _refused(oidc, _signed(aud="someone-else"))
    assert "invalid_token" in _refused(oidc, _unsecured())
    assert _produce(oidc, _signed())[0]   # still serving


class _Wire:
    """A raw connection speaking SaslHandshake v1 / SaslAuthenticate v2 (KIP-368's session lifetime)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, api_key, version, body):
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "reauth-test", body))
        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(api_key, version, self._read(size))[1]

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def handshake(self):
        return self.call(17, 1, {"mechanism": "OAUTHBEARER"}).error_code

    def authenticate(self, token: str):
        return self.call(36, 2, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})

    def login(self, token: str):
        assert self.handshake() == ErrorCode.NONE
        return self.authenticate(token)


def test_a_session_ends_with_its_token_and_reauthenticates_only_as_the_same_principal(server):
    """KIP-368 with OAUTHBEARER: SaslAuthenticate's session_lifetime_ms is the shorter of connections.max.reauth.ms
    and the token's remaining life; the client logs in again on the same connection with a fresh token (at most once
    a second: a second re-authentication at once is ILLEGAL_SASL_STATE), and a token of another principal is
    refused there."""
    unsecured, _ = server
    wire = _Wire(unsecured)
    now = int(time.time())
    first = wire.login(_unsecured(scope="kafka", exp=now + 60))
    assert first.error_code == ErrorCode.NONE
    assert 50_000 < first.session_lifetime_ms <= 60_000
    again = wire.login(_unsecured(scope="kafka", exp=now + 3600))
    assert again.error_code == ErrorCode.NONE and again.session_lifetime_ms == REAUTH_MS
    assert wire.handshake() == ErrorCode.ILLEGAL_SASL_STATE   # within a second of the last re-authentication
    deadline = time.monotonic() + 10
    while (code := wire.handshake()) == ErrorCode.ILLEGAL_SASL_STATE and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == ErrorCode.NONE
    other = wire.authenticate(_unsecured(scope="kafka", sub="mallory", exp=now + 3600))
    assert other.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    wire.sock.close()

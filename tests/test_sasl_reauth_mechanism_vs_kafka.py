"""KIP-368 re-authentication keeps the connection's SASL mechanism and principal, on klog and on Apache Kafka 4.x
from the same properties: a listener offering PLAIN and OAUTHBEARER (Kafka's unsecured validator), where user
``alice`` can log in either way as the same principal ``User:alice``. Re-authenticating with the first login's
mechanism is served; a re-authentication's SaslHandshake naming the other (enabled) mechanism is answered NONE, as
Kafka's SaslServerAuthenticator does, but the connection's next request (its SaslAuthenticate or any other) closes
it unanswered (Kafka's REAUTH_BAD_MECHANISM state); one naming a mechanism the listener does not offer closes it
unanswered; one as another principal is SASL_AUTHENTICATION_FAILED with Kafka's message, and closes it."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol.errors import ErrorCode
from klog.testing.kafka import free_port, one_broker
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret" '
              'user_bob="bob-secret";')
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="broker";')


@pytest.fixture(scope="module", params=["klog", "kafka"])
def port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The PLAIN + OAUTHBEARER SASL_PLAINTEXT listener of a klog broker or an Apache Kafka broker."""
    sasl_port = free_port()
    properties = {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "connections.max.reauth.ms": 600_000,
        "connection.failed.authentication.delay.ms": 100,
        "offsets.topic.replication.factor": 1,
    }
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), properties,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]):
        yield sasl_port


def _b64(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _token(sub: str) -> bytes:
    now = int(time.time())
    jws = f"{_b64({'alg': 'none'})}.{_b64({'sub': sub, 'iat': now, 'exp': now + 600})}."
    return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()


def _plain(user: str) -> bytes:
    return f"\0{user}\0{user}-secret".encode()


class Sasl(WireClient):
    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port, client_id="reauth-mechanism-test")

    def handshake(self, mechanism: str) -> int:
        return int(self.request(17, 1, {"mechanism": mechanism}).error_code)

    def authenticate(self, auth_bytes: bytes) -> Any:
        return self.request(36, 2, {"auth_bytes": auth_bytes})

    def login(self, mechanism: str, auth_bytes: bytes) -> int:
        assert self.handshake(mechanism) == ErrorCode.NONE
        return int(self.authenticate(auth_bytes).error_code)

    def served(self) -> bool:
        """The connection still answers a request (ApiVersions), i.e. it is open and authenticated."""
        try:
            return self.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}
                                ).error_code == ErrorCode.NONE
        except OSError:
            return False


def test_a_re_authentication_with_the_same_mechanism_is_served(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.login("OAUTHBEARER", _token("alice")) == ErrorCode.NONE
        assert wire.login("OAUTHBEARER", _token("alice")) == ErrorCode.NONE
        assert wire.served()


def test_a_re_authentication_with_another_mechanism_is_refused_and_closes_the_connection(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.login("PLAIN", _plain("alice")) == ErrorCode.NONE
        # the handshake names an enabled mechanism: answered, then the re-authentication fails unanswered
        assert wire.handshake("OAUTHBEARER") == ErrorCode.NONE
        with pytest.raises(ConnectionError):
            wire.authenticate(_token("alice"))


def test_a_request_after_a_handshake_with_another_mechanism_closes_the_connection(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.login("OAUTHBEARER", _token("alice")) == ErrorCode.NONE
        assert wire.handshake("PLAIN") == ErrorCode.NONE
        with pytest.raises(ConnectionError):
            wire.request(3, 9, {"topics": None})


def test_a_re_authentication_with_a_mechanism_not_offered_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.login("PLAIN", _plain("alice")) == ErrorCode.NONE
        with pytest.raises(ConnectionError):
            wire.handshake("SCRAM-SHA-256")


def test_a_re_authentication_as_another_principal_is_refused_and_closes_the_connection(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.login("PLAIN", _plain("alice")) == ErrorCode.NONE
        assert wire.handshake("PLAIN") == ErrorCode.NONE
        refused = wire.authenticate(_plain("bob"))
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User.alice: User.bob")
        assert wire.is_closed_by_peer()



def _between_handshake_and_authenticate(wire: Sasl, api_key: int, version: int, body: Any) -> Any:
    """A request sent after a re-authentication's SaslHandshake, before its SaslAuthenticate: its answer."""
    assert wire.login("PLAIN", _plain("alice")) == ErrorCode.NONE
    assert wire.handshake("PLAIN") == ErrorCode.NONE
    return wire.request(api_key, version, body)


def test_metadata_during_a_re_authentication_gets_an_error_response_and_closes_the_connection(port: int) -> None:
    with Sasl(port) as wire:
        answer = _between_handshake_and_authenticate(wire, 3, 9, {"topics": [{"name": "t1"}]})
        assert (answer.brokers, answer.controller_id, answer.cluster_id) == ([], -1, None)
        assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [
            ("t1", ErrorCode.ILLEGAL_SASL_STATE, [])]
        assert wire.is_closed_by_peer()


def test_api_versions_during_a_re_authentication_gets_illegal_sasl_state_and_closes_the_connection(port: int
                                                                                                     ) -> None:
    with Sasl(port) as wire:
        answer = _between_handshake_and_authenticate(
            wire, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert (answer.error_code, answer.api_keys) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert wire.is_closed_by_peer()


def test_api_versions_between_a_first_handshake_and_its_authenticate_gets_illegal_sasl_state(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN") == ErrorCode.NONE
        answer = wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert (answer.error_code, answer.api_keys) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert wire.is_closed_by_peer()

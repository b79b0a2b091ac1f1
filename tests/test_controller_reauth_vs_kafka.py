"""KIP-368 re-authentication on a SASL controller listener (``listener.name.controller.connections.max.reauth.ms``), on
klog and on Apache Kafka 4.x from the same properties (one combined node; the Kafka side under ``long``).

A login's SaslAuthenticate answer names the session's lifetime; a client that logs in again on the open connection
(SaslHandshake, SaslAuthenticate, the same principal) keeps it past the first session's end; one that does not is
disconnected at its next request after the end; one that re-authenticates as another principal is refused
SASL_AUTHENTICATION_FAILED and disconnected, as is one naming another SASL mechanism than its login's (after the
handshake's answer) or one the listener does not offer (unanswered). The node itself (its broker's own connections to the controller
listener) keeps working across several session ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import cluster_of
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

REAUTH_MS = 3000
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="controller-secret" user_controller="controller-secret" user_other="other-secret";')
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="controller";')
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
    "listener.name.controller.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    "listener.name.controller.connections.max.reauth.ms": REAUTH_MS,
    "offsets.topic.replication.factor": 1,
}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp(f"reauth-{request.param}")
    with cluster_of(request.param, root, 1, properties=PROPERTIES) as started:
        yield started


class Raw(WireClient):
    """One connection to the controller listener, speaking Kafka's protocol request by request."""

    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port, client_id="reauth-test")

    def login(self, user: str) -> Any:
        """SaslHandshake v1 then SaslAuthenticate v2 with PLAIN: the SaslAuthenticate answer."""
        assert self.handshake("PLAIN") == ErrorCode.NONE
        return self.request(36, 2, {"auth_bytes": f"\0{user}\0{user}-secret".encode()})

    def handshake(self, mechanism: str) -> int:
        return int(self.request(17, 1, {"mechanism": mechanism}).error_code)

    def api_versions(self) -> int:
        return int(self.request(18, 3, {"client_software_name": "reauth-test", "client_software_version": "1"})
                   .error_code)


def test_a_controller_listener_session_ends_unless_the_client_logs_in_again(node: Any) -> None:
    port = node.controller_ports[node.controller_ids[0]]
    renewing, idle = Raw(port), Raw(port)
    try:
        first = renewing.login("controller")
        assert (first.error_code, first.session_lifetime_ms) == (ErrorCode.NONE, REAUTH_MS)
        assert idle.login("controller").session_lifetime_ms == REAUTH_MS
        started = time.monotonic()
        time.sleep(1.5)   # Kafka starts at most one re-authentication a second
        again = renewing.login("controller")
        assert (again.error_code, again.session_lifetime_ms) == (ErrorCode.NONE, REAUTH_MS)
        time.sleep(max(0.0, started + REAUTH_MS / 1000 + 0.5 - time.monotonic()))
        # past the first session's end: the renewed connection is served, the other one is closed
        assert renewing.api_versions() == ErrorCode.NONE
        with pytest.raises(OSError):
            idle.api_versions()
    finally:
        renewing.close()
        idle.close()


def test_a_re_authentication_as_another_principal_is_refused_and_closes_the_connection(node: Any) -> None:
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        assert raw.login("controller").error_code == ErrorCode.NONE
        time.sleep(1.2)
        refused = raw.login("other")
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User.controller: User.other")
        with pytest.raises(OSError):
            raw.api_versions()
    finally:
        raw.close()


def test_a_re_authentication_with_another_mechanism_closes_the_connection_unanswered(node: Any) -> None:
    """The handshake names another mechanism the listener offers (OAUTHBEARER after a PLAIN login): answered, as
    Kafka's SaslServerAuthenticator does, and the next request ends the connection without an answer."""
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        assert raw.login("controller").error_code == ErrorCode.NONE
        assert raw.handshake("OAUTHBEARER") == ErrorCode.NONE
        with pytest.raises(OSError):
            raw.api_versions()
    finally:
        raw.close()


def test_a_request_during_a_re_authentication_gets_illegal_sasl_state_and_closes_the_connection(node: Any) -> None:
    """Between a re-authentication's SaslHandshake and its SaslAuthenticate the connection is in Kafka's
    SaslServerAuthenticator: another request gets its error response (ILLEGAL_SASL_STATE), then the connection
    closes."""
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        assert raw.login("controller").error_code == ErrorCode.NONE
        assert raw.handshake("PLAIN") == ErrorCode.NONE
        answer = raw.request(18, 3, {"client_software_name": "reauth-test", "client_software_version": "1"})
        assert (answer.error_code, answer.api_keys) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert raw.is_closed_by_peer()
    finally:
        raw.close()


def test_a_re_authentication_with_a_mechanism_not_offered_closes_the_connection_unanswered(node: Any) -> None:
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        assert raw.login("controller").error_code == ErrorCode.NONE
        with pytest.raises(OSError):
            raw.handshake("SCRAM-SHA-512")
    finally:
        raw.close()


def test_the_node_keeps_working_across_session_ends(node: Any) -> None:
    time.sleep(2 * REAUTH_MS / 1000)   # the node's own sessions with its controller listener ended twice
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.client_ports[node.node_ids[0]]}"})
    admin.create_topics([NewTopic("after-reauth", 1, 1)])["after-reauth"].result(timeout=60)
    assert "after-reauth" in admin.list_topics(timeout=30).topics


# ---- the login's order on the controller listener, as Kafka's SaslServerAuthenticator (as on broker listeners,
# tests/test_sasl_handshake_vs_kafka.py) ----------------------------------------------------------------------------

def test_a_second_api_versions_before_the_login_closes_the_connection_unanswered(node: Any) -> None:
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        assert raw.api_versions() == ErrorCode.NONE
        raw.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "reauth-test", "client_software_version": "1"})
        assert raw.is_closed_by_peer()
    finally:
        raw.close()


def test_a_too_new_api_versions_gets_only_api_versions_versions_and_the_login_goes_on(node: Any) -> None:
    raw = Raw(node.controller_ports[node.controller_ids[0]])
    try:
        raw.send_header_only(ApiKey.API_VERSIONS, 99, correlation_id=7)
        correlation_id, answer = raw.receive(ApiKey.API_VERSIONS, 0)
        assert (correlation_id, answer.error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
        assert [(k.api_key, k.min_version) for k in answer.api_keys] == [(ApiKey.API_VERSIONS, 0)]
        assert raw.login("controller").error_code == ErrorCode.NONE
        assert raw.api_versions() == ErrorCode.NONE
    finally:
        raw.close()


def test_a_sasl_handshake_v0_login_takes_bare_token_frames(node: Any) -> None:
    port = node.controller_ports[node.controller_ids[0]]
    raw, refused = Raw(port), Raw(port)
    try:
        handshake = raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert handshake.error_code == ErrorCode.NONE
        assert raw.sasl_token(b"\0controller\0controller-secret") == b""
        assert raw.api_versions() == ErrorCode.NONE
        assert refused.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == ErrorCode.NONE
        with pytest.raises(ConnectionError):   # a refused bare token: no header to answer, the connection closed
            refused.sasl_token(b"\0controller\0wrong-secret")
    finally:
        raw.close()
        refused.close()

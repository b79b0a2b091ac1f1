"""The SASL login's wire edges on klog and on Apache Kafka 4.x from the same properties, over raw frames: a
SASL_PLAINTEXT listener offering PLAIN and SCRAM-SHA-256. What SaslServerAuthenticator answers (codes, messages,
fields) and whether it then closes the connection: a mechanism the listener does not offer, requests out of order
before the login (SaslAuthenticate first, a second ApiVersions, a too-new ApiVersions), PLAIN and SCRAM tokens
that are malformed or carry wrong credentials, a frame above ``sasl.server.max.receive.size``, a SaslHandshake on an
authenticated connection without re-authentication, and the SaslHandshake v0 flow (raw tokens without a request
header)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.security.scram import ScramClient
from klog.testing.kafka import free_port, one_broker
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SCRAM = "SCRAM-SHA-256"
SCRAM_ITERATIONS = 8192
INVALID_SCRAM = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {SCRAM}"


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(PLAINTEXT bootstrap, SASL_PLAINTEXT port) of a klog broker or an Apache Kafka broker, with SCRAM user
    ``carol``."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    sasl_port = free_port()
    properties = {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": f"PLAIN,{SCRAM}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        f"listener.name.sasl_plaintext.{SCRAM.lower()}.sasl.jaas.config": SCRAM_JAAS,
        "connection.failed.authentication.delay.ms": 0,
        "offsets.topic.replication.factor": 1,
    }
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), properties,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, SCRAM_ITERATIONS)
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("carol", credential, b"carol-pw")]).values():
            future.result(30)
        yield bootstrap, sasl_port


@pytest.fixture
def port(server: tuple[str, int]) -> int:
    return server[1]


class Sasl(WireClient):
    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port, client_id="sasl-handshake-test")

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})

    def authenticate(self, auth_bytes: bytes) -> Any:
        return self.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": auth_bytes})

    def api_versions(self, version: int = 3) -> Any:
        return self.request(ApiKey.API_VERSIONS, version, {"client_software_name": "t",
                                                            "client_software_version": "1"})

    def unanswered(self, api_key: int, version: int, body: Any) -> bool:
        """The request is not answered: the broker closes the connection instead."""
        self.send(api_key, version, body)
        return self.is_closed_by_peer()


def _refused(port: int, mechanism: str, token: bytes) -> tuple[int, str | None, bool]:
    """A login's SaslAuthenticate error code and message, and whether the connection was closed after it."""
    with Sasl(port) as wire:
        assert wire.handshake(mechanism).error_code == ErrorCode.NONE
        answer = wire.authenticate(token)
        return answer.error_code, answer.error_message, wire.is_closed_by_peer()


def test_a_mechanism_the_listener_does_not_offer_is_answered_with_the_offered_ones_and_closes(port: int) -> None:
    with Sasl(port) as wire:
        answer = wire.handshake("GSSAPI")
        assert (answer.error_code, answer.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN", SCRAM])
        assert wire.is_closed_by_peer()


def test_sasl_authenticate_before_sasl_handshake_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.unanswered(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-pw"})


def test_metadata_before_the_login_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.api_versions().error_code == ErrorCode.NONE
        assert wire.unanswered(ApiKey.METADATA, 9, {"topics": None})


def test_a_second_api_versions_before_the_handshake_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.api_versions().error_code == ErrorCode.NONE
        assert wire.unanswered(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


def test_a_too_new_api_versions_before_the_handshake_is_answered_and_the_login_goes_on(port: int) -> None:
    with Sasl(port) as wire:
        # Kafka answers an ApiVersions above its versions in v0's format (KIP-511), and the login goes on
        wire.send_header_only(ApiKey.API_VERSIONS, 99, correlation_id=7)
        got_cid, answer = wire.receive(ApiKey.API_VERSIONS, 0)
        assert got_cid == 7 and answer.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version) for k in answer.api_keys] == [(ApiKey.API_VERSIONS, 0)]
        assert wire.api_versions().error_code == ErrorCode.NONE
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE
        assert wire.authenticate(b"\0alice\0alice-pw").error_code == ErrorCode.NONE


def test_a_too_new_api_versions_gets_only_the_api_versions_versions_on_a_plaintext_listener_too(
        server: tuple[str, int]) -> None:
    with WireClient.of_bootstrap(server[0]) as wire:
        wire.send_header_only(ApiKey.API_VERSIONS, 99, correlation_id=7)
        got_cid, answer = wire.receive(ApiKey.API_VERSIONS, 0)
        assert (got_cid, answer.error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
        assert [(k.api_key, k.min_version) for k in answer.api_keys] == [(ApiKey.API_VERSIONS, 0)]


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong-pw", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0alice-pw", "Authentication failed: Invalid username or password"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"\0\0alice-pw", "Authentication failed: username not specified"),
    (b"admin\0alice\0alice-pw", "Authentication failed: Client requested an authorization id that is different "
                                "from username"),
    (b"admin\0alice\0wrong-pw", "Authentication failed: Invalid username or password"),
    (b"alice\0alice-pw", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0alice-pw\0x\0y", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0alice\0" + b"x" * 8000, "Authentication failed: Invalid username or password"),
], ids=["wrong-password", "unknown-user", "no-password", "no-user", "other-authzid", "other-authzid-wrong-password",
        "two-tokens", "five-tokens", "empty", "long-password"])
def test_refused_plain_logins_get_kafkas_message_and_close(port: int, token: bytes, message: str) -> None:
    assert _refused(port, "PLAIN", token) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message, True)


def test_a_plain_login_as_its_own_authorization_id_is_served(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE
        answer = wire.authenticate(b"alice\0alice\0alice-pw")
        assert (answer.error_code, answer.error_message, answer.session_lifetime_ms) == (ErrorCode.NONE, "", 0)
        assert wire.api_versions().error_code == ErrorCode.NONE


@pytest.mark.parametrize("token", [b"garbage", b"n,,n=carol", b"p=tls-unique,,n=carol,r=abc", b"",
                                   b"y,,n=carol,r=abc", b"n,,r=abc,n=carol", b"n,,n=caro\xc3\xa9,r=abc",
                                   b"n,a=nobody,n=nobody,r=abc"],
                         ids=["garbage", "no-nonce", "channel-binding", "empty", "gs2-y", "nonce-first",
                              "non-ascii-user", "unknown-user-with-authzid"])
def test_a_malformed_scram_client_first_message_is_refused_as_invalid_credentials(port: int, token: bytes) -> None:
    assert _refused(port, SCRAM, token) == (ErrorCode.SASL_AUTHENTICATION_FAILED, INVALID_SCRAM, True)


def test_an_unknown_scram_user_is_refused_at_the_client_first_message(port: int) -> None:
    assert _refused(port, SCRAM, ScramClient(SCRAM, "nobody", "pw").first()) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED, INVALID_SCRAM, True)


def test_a_scram_authorization_id_other_than_the_user_is_refused_with_kafkas_message(port: int) -> None:
    client_first = ScramClient(SCRAM, "carol", "carol-pw").first().replace(b"n,,", b"n,a=admin,", 1)
    assert _refused(port, SCRAM, client_first) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Authentication failed: Client requested an authorization id that is different from username", True)


def _scram_final(port: int, password: str, tamper: Any = None, extensions: dict[str, str] | None = None
                 ) -> tuple[Any, Any, bool]:
    """A SCRAM login of carol: the server-first answer, the client-final answer, whether it then closed."""
    client = ScramClient(SCRAM, "carol", password, extensions=extensions)
    with Sasl(port) as wire:
        assert wire.handshake(SCRAM).error_code == ErrorCode.NONE
        first = wire.authenticate(client.first())
        final = client.final(first.auth_bytes)
        answer = wire.authenticate(tamper(final) if tamper is not None else final)
        closed = answer.error_code != ErrorCode.NONE and wire.is_closed_by_peer()
        return first, answer, closed


def test_a_scram_login_gets_the_users_iterations_and_its_session_lifetime(port: int) -> None:
    first, answer, _ = _scram_final(port, "carol-pw")
    assert first.error_code == ErrorCode.NONE and f",i={SCRAM_ITERATIONS}".encode() in first.auth_bytes
    assert (answer.error_code, answer.error_message, answer.session_lifetime_ms) == (ErrorCode.NONE, "", 0)
    assert answer.auth_bytes.startswith(b"v=")


def test_an_extension_the_server_does_not_know_is_ignored(port: int) -> None:
    # "m", which RFC 5802 has a server refuse: Kafka's pattern takes it as one more extension (one only: Kafka
    # rebuilds the client-first message from its map of them, in the map's order, for the proof)
    _, answer, _ = _scram_final(port, "carol-pw", extensions={"m": "mandatory"})
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, "")


@pytest.mark.parametrize("password, tamper", [
    ("wrong-pw", None),
    ("carol-pw", lambda final: final.replace(b",r=", b",r=x", 1)),
    ("carol-pw", lambda final: final.split(b",p=")[0]),
    ("carol-pw", lambda final: b"c=biws"),
], ids=["wrong-password", "wrong-nonce", "no-proof", "garbage"])
def test_a_refused_scram_client_final_message_gets_invalid_credentials(port: int, password: str, tamper: Any
                                                                       ) -> None:
    _, answer, closed = _scram_final(port, password, tamper)
    assert (answer.error_code, answer.error_message, closed) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                                 INVALID_SCRAM, True)


def test_a_frame_above_the_sasl_receive_limit_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE
        assert wire.unanswered(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + b"x" * 524288})


def test_a_sasl_handshake_after_the_login_without_re_authentication_is_illegal_and_the_connection_stays(
        port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE
        assert wire.authenticate(b"\0alice\0alice-pw").error_code == ErrorCode.NONE
        again = wire.handshake("PLAIN")
        assert (again.error_code, again.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert wire.api_versions().error_code == ErrorCode.NONE


def test_a_first_frame_above_the_sasl_receive_limit_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        wire.send_raw(struct.pack(">i", 524289) + struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 7, 1) + b"t")
        assert wire.is_closed_by_peer()


def test_sasl_authenticate_after_the_login_is_illegal_and_the_connection_stays(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN").error_code == ErrorCode.NONE
        assert wire.authenticate(b"\0alice\0alice-pw").error_code == ErrorCode.NONE
        again = wire.authenticate(b"\0alice\0alice-pw")
        assert (again.error_code, again.error_message) == (
            ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
        assert wire.api_versions().error_code == ErrorCode.NONE


def test_sasl_requests_on_a_plaintext_listener_are_illegal_and_the_connection_stays(server: tuple[str, int]
                                                                                    ) -> None:
    with WireClient.of_bootstrap(server[0]) as wire:
        handshake = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert (handshake.error_code, handshake.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-pw"})
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
        assert wire.request(ApiKey.METADATA, 9, {"topics": []}).brokers


def test_sasl_handshake_v0_is_followed_by_raw_scram_tokens(port: int) -> None:
    client = ScramClient(SCRAM, "carol", "carol-pw")
    with Sasl(port) as wire:
        assert wire.handshake(SCRAM, version=0).error_code == ErrorCode.NONE
        server_first = wire.sasl_token(client.first())
        assert f",i={SCRAM_ITERATIONS}".encode() in server_first
        client.verify(wire.sasl_token(client.final(server_first)))
        assert wire.api_versions().error_code == ErrorCode.NONE


def test_a_refused_raw_token_closes_the_connection_unanswered(port: int) -> None:
    with Sasl(port) as wire:
        assert wire.handshake("PLAIN", version=0).error_code == ErrorCode.NONE
        with pytest.raises(ConnectionError):
            wire.sasl_token(b"\0alice\0wrong-pw")


def test_sasl_handshake_v0_is_followed_by_raw_tokens(port: int) -> None:
    with Sasl(port) as wire:
        answer = wire.handshake("PLAIN", version=0)
        assert (answer.error_code, answer.mechanisms) == (ErrorCode.NONE, ["PLAIN", SCRAM])
        assert wire.sasl_token(b"\0alice\0alice-pw") == b""
        assert wire.api_versions().error_code == ErrorCode.NONE

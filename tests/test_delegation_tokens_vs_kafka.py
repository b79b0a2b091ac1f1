"""Delegation tokens (KIP-48) on klog and on Apache Kafka 4.x from the same properties, driven by Kafka's own
``kafka-delegation-tokens`` tool and Java client: a token is created (with a renewer), described, used to log in
(SCRAM-SHA-512 with ``tokenauth=true``: the client acts as the token's owner, and may not make tokens itself),
renewed by its renewer and refused to anyone else, expired, and then neither described nor accepted at login.
Token requests over PLAINTEXT are refused. One broker of each kind for the module."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.security.sasl import plain_token
from klog.testing import kafka_tools as kt
from klog.testing.kafka import free_port, one_broker
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.java

TOKEN_COMMAND = "org.apache.kafka.tools.DelegationTokenCommand"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw" user_bob="bob-pw" user_carol="carol-pw";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "delegation.token.secret.key": "klog-test-token-secret",
    "delegation.token.max.lifetime.ms": 7 * 24 * 3600 * 1000,
    "delegation.token.expiry.time.ms": 24 * 3600 * 1000,
    # the expired-token check runs often here (default: hourly)
    "delegation.token.expiry.check.interval.ms": 500,
}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    """(plaintext bootstrap, SASL_PLAINTEXT bootstrap) of a klog broker or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    with one_broker(request.param, root, PROPERTIES,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]) as bootstrap:
        yield bootstrap, f"127.0.0.1:{sasl_port}"


PASSWORDS = {"admin": "admin-pw", "bob": "bob-pw", "carol": "carol-pw"}


@contextlib.contextmanager
def _logged_in(sasl: str, user: str) -> Iterator[WireClient]:
    """A raw connection to the SASL_PLAINTEXT listener, logged in with PLAIN as ``user``."""
    host, port = sasl.rsplit(":", 1)
    with WireClient(host, int(port)) as wire:
        assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.NONE
        login = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token(user, PASSWORDS[user])})
        assert login.error_code == ErrorCode.NONE
        yield wire


def _plain(path: Path, user: str, password: str) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{password}";\n')
    return str(path)


def _token_login(path: Path, token_id: str, hmac: str) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{token_id}" password="{hmac}" tokenauth="true";\n')
    return str(path)


def _tokens(bootstrap: str, config: str, *args: str):
    return kt.run_kafka_tool(TOKEN_COMMAND, "--bootstrap-server", bootstrap, "--command-config", config, *args)


def _topics(bootstrap: str, config: str, *args: str):
    return kt.run_kafka_tool(kt.TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--command-config", config, *args)


def _token_rows(output: str) -> list[list[str]]:
    """The rows of the tool's token table (after its TOKENID header)."""
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TOKENID"))
    return [line.split() for line in lines[header + 1:] if line.strip()]


@pytest.mark.long
def test_a_token_is_created_described_used_renewed_and_expired_with_kafkas_tool(server, tmp_path):
    _, sasl = server
    admin = _plain(tmp_path / "admin.properties", "admin", "admin-pw")
    bob = _plain(tmp_path / "bob.properties", "bob", "bob-pw")
    carol = _plain(tmp_path / "carol.properties", "carol", "carol-pw")

    created = _tokens(sasl, admin, "--create", "--max-life-time-period", "3600000", "--renewer-principal",
                      "User:bob")
    assert created.returncode == 0, created.stderr + created.stdout
    [row] = _token_rows(created.stdout)
    token_id, hmac, owner, requester = row[:4]
    assert (owner, requester) == ("User:admin", "User:admin") and "User:bob" in row[4], created.stdout

    # (the tool without --owner-principal sends an empty owner list, which Kafka answers with no token)
    described = _tokens(sasl, admin, "--describe", "--owner-principal", "User:admin")
    assert described.returncode == 0, described.stderr
    assert [r[:3] for r in _token_rows(described.stdout)] == [[token_id, hmac, "User:admin"]], described.stdout
    # the renewer sees it (one's own tokens need no ACL); without an authorizer so does everyone else
    assert token_id in _tokens(sasl, bob, "--describe", "--owner-principal", "User:admin").stdout
    assert token_id in _tokens(sasl, carol, "--describe", "--owner-principal", "User:admin").stdout

    # the Java client logs in with the token, as its owner
    login = _token_login(tmp_path / "token.properties", token_id, hmac)
    topic = f"t-{uuid.uuid4().hex[:6]}"
    made = _topics(sasl, login, "--create", "--topic", topic, "--partitions", "1")
    assert made.returncode == 0, made.stderr
    assert topic in _topics(sasl, login, "--list").stdout
    # so does klog's own client, from the same JAAS config (as Spark's kafka.sasl.jaas.config passes it)
    import klog

    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{token_id}" password="{hmac}" tokenauth="true";')
    with klog.AdminClient(sasl, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                   "sasl.jaas.config": jaas}) as client:
        assert topic in client.list_topics()
    # ... and may not make tokens with it
    refused = _tokens(sasl, login, "--create", "--max-life-time-period", "-1")
    assert refused.returncode != 0
    assert "not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels" in \
        refused.stdout + refused.stderr

    # renewal: the renewer may, anyone else is told DELEGATION_TOKEN_OWNER_MISMATCH
    renewed = _tokens(sasl, bob, "--renew", "--hmac", hmac, "--renew-time-period", "600000")
    assert renewed.returncode == 0 and "Completed renew operation" in renewed.stdout, renewed.stderr
    mismatch = _tokens(sasl, carol, "--renew", "--hmac", hmac, "--renew-time-period", "600000")
    assert "Specified Principal is not valid Owner/Renewer" in mismatch.stdout + mismatch.stderr
    unknown = _tokens(sasl, admin, "--renew", "--hmac", "bm8tc3VjaC10b2tlbg==", "--renew-time-period", "1000")
    assert "Delegation Token is not found on server" in unknown.stdout + unknown.stderr

    # expire at once: gone from describe, and its logins fail
    expired = _tokens(sasl, admin, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout, expired.stderr
    assert token_id not in _tokens(sasl, admin, "--describe", "--owner-principal", "User:admin").stdout
    gone = _topics(sasl, login, "--list")
    assert gone.returncode != 0
    assert re.search(r"SaslAuthenticationException|Authentication failed", gone.stdout + gone.stderr)


def test_token_requests_over_plaintext_are_refused(server, tmp_path):
    plaintext, _ = server
    config = tmp_path / "plain.properties"
    config.write_text("security.protocol=PLAINTEXT\n")
    refused = _tokens(plaintext, str(config), "--create", "--max-life-time-period", "-1")
    assert refused.returncode != 0
    assert "not allowed on PLAINTEXT/1-way SSL channels" in refused.stdout + refused.stderr


def test_the_periodic_check_removes_a_token_once_it_expired(server):
    """delegation.token.expiry.check.interval.ms: the active controller removes a token past its max lifetime
    (RemoveDelegationTokenRecord), so DescribeDelegationToken stops listing it."""
    _, sasl = server
    with _logged_in(sasl, "bob") as wire:
        created = wire.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, {
            "owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": 3000})
        assert created.error_code == ErrorCode.NONE
        assert created.max_timestamp_ms - created.issue_timestamp_ms == 3000

        def listed() -> bool:
            answer = wire.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3,
                                  {"owners": [{"principal_type": "User", "principal_name": "bob"}]})
            return created.token_id in [t.token_id for t in answer.tokens]

        deadline = time.monotonic() + 10   # Kafka's broker answers from its token cache, updated a moment later
        while not listed() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listed()
        deadline = time.monotonic() + 20
        while listed() and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not listed()


# ------------------------------------------------------------------------------------- raw requests at the edges

def create_token_body(owner: tuple[str | None, str | None] = (None, None), renewers: tuple[tuple[str, str], ...] = (),
                      max_lifetime_ms: int = -1) -> dict[str, Any]:
    """A CreateDelegationToken v3 request body."""
    return {"owner_principal_type": owner[0], "owner_principal_name": owner[1], "max_lifetime_ms": max_lifetime_ms,
            "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers]}


def created_fields(answer: Any) -> tuple[Any, ...]:
    """A CreateDelegationToken answer but its times of a success: (error, owner, requester, times, id, HMAC)."""
    return (answer.error_code, answer.principal_type, answer.principal_name, answer.token_requester_principal_type,
            answer.token_requester_principal_name, answer.issue_timestamp_ms, answer.expiry_timestamp_ms,
            answer.max_timestamp_ms, answer.token_id, bytes(answer.hmac))


def test_token_requests_at_their_edges_are_answered_as_kafka(server):
    """Raw requests: an owner named without a type (Kafka cannot make that principal: UNKNOWN_SERVER_ERROR naming
    ANONYMOUS; klog made a User's token), a renewer that is not a User, an empty owner name (the requester's
    token), another type of owner; Renew/Expire of an unknown token or by a principal neither owner nor renewer
    answer the controller's response default expiry 0 (klog answered -1), refusals on PLAINTEXT -1; Expire with
    Long.MAX_VALUE stops at the max timestamp, and a negative period removes the token, answering the time of
    the removal (klog answered the period)."""
    plaintext, sasl = server
    E = ErrorCode
    with _logged_in(sasl, "bob") as bob, _logged_in(sasl, "carol") as carol:
        no_type = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body((None, "carol")))
        assert created_fields(no_type) == (E.UNKNOWN_SERVER_ERROR, "User", "ANONYMOUS", "User", "ANONYMOUS",
                                           -1, -1, -1, "", b"")
        group = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(renewers=(("Group", "g"),)))
        assert created_fields(group) == (E.INVALID_PRINCIPAL_TYPE, "User", "bob", "User", "bob", -1, -1, -1, "", b"")
        other = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(("Group", "team")))
        assert created_fields(other)[:5] == (E.NONE, "Group", "team", "User", "bob")
        created = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(
            ("Group", ""), renewers=(("User", "carol"),), max_lifetime_ms=3_600_000))
        assert created_fields(created)[:5] == (E.NONE, "User", "bob", "User", "bob")
        mac = bytes(created.hmac)

        def renewed(wire: WireClient, hmac: bytes, period: int = 1000) -> tuple[int, int]:
            answer = wire.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": period})
            return answer.error_code, answer.expiry_timestamp_ms

        def expired(wire: WireClient, hmac: bytes, period: int) -> tuple[int, int]:
            answer = wire.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": period})
            return answer.error_code, answer.expiry_timestamp_ms

        with _logged_in(sasl, "admin") as admin:
            # (Kafka's controller finds the token once its cache has the new record)
            until(lambda: renewed(admin, mac) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0), "the token", timeout=30)
            assert expired(admin, mac, -1) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
        for unknown in (b"", b"no-such-token"):
            assert renewed(bob, unknown) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
            assert expired(bob, unknown, -1) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
        host, port = plaintext.rsplit(":", 1)
        with WireClient(host, int(port)) as anonymous:
            assert renewed(anonymous, mac) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
            assert expired(anonymous, mac, -1) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
        assert expired(carol, mac, 2 ** 63 - 1) == (E.NONE, created.max_timestamp_ms)
        before = int(time.time() * 1000)
        code, when = expired(carol, mac, -5)
        assert code == E.NONE and before - 5000 <= when <= int(time.time() * 1000) + 5000, when
        until(lambda: renewed(bob, mac)[0] == E.DELEGATION_TOKEN_NOT_FOUND, "the token removed", timeout=30)


def test_tokens_with_an_empty_renewer_name_or_owner_type_are_described(server):
    """A renewer ``User:`` (empty name) and an owner of an empty type are taken and stored as Kafka stores them,
    and DescribeDelegationToken lists those tokens with them (klog's broker failed on them and closed the
    connection of every principal concerned)."""
    _, sasl = server
    E = ErrorCode
    with _logged_in(sasl, "bob") as bob:
        renewer = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(renewers=(("User", ""),)))
        untyped = bob.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(("", "z")))
        assert created_fields(renewer)[:5] == (E.NONE, "User", "bob", "User", "bob")
        assert created_fields(untyped)[:5] == (E.NONE, "", "z", "User", "bob")

        def described() -> dict[str, tuple[Any, ...]]:
            answer = bob.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert answer.error_code == E.NONE
            return {t.token_id: (t.principal_type, t.principal_name, t.token_requester_principal_type,
                                 t.token_requester_principal_name,
                                 [(r.principal_type, r.principal_name) for r in t.renewers]) for t in answer.tokens}

        # (Kafka's broker answers from its token cache, updated a moment after the commit)
        tokens = until(lambda: (lambda d: d if {renewer.token_id, untyped.token_id} <= set(d) else None)(described()),
                       "the tokens", timeout=30)
        assert tokens[renewer.token_id] == ("User", "bob", "User", "bob", [("User", "")])
        assert tokens[untyped.token_id] == ("", "z", "User", "bob", [])

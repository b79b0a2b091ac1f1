"""Delegation tokens (KIP-48) on klog and on Apache Kafka 4.x from the same properties, driven by Kafka's own
``kafka-delegation-tokens`` tool and Java client: a token is created (with a renewer), described, used to log in
(SCRAM-SHA-512 with ``tokenauth=true``: the client acts as the token's owner, and may not make tokens itself),
renewed by its renewer and refused to anyone else, expired, and then neither described nor accepted at login.
Token requests over PLAINTEXT are refused. One broker of each kind for the module."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest

from klog.testing import kafka_tools as kt
from klog.testing.kafka import free_port, one_broker

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
    from klog.protocol import ApiKey
    from klog.protocol.errors import ErrorCode
    from klog.security.sasl import plain_token
    from klog.testing.wire import WireClient

    _, sasl = server
    host, port = sasl.rsplit(":", 1)
    with WireClient(host, int(port)) as wire:
        assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.NONE
        login = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token("bob", "bob-pw")})
        assert login.error_code == ErrorCode.NONE
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

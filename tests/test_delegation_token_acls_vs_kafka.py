"""Delegation tokens under Kafka's StandardAuthorizer, on klog and on Apache Kafka 4.x from the same properties,
with Kafka's own ``kafka-delegation-tokens`` and ``kafka-acls``: a principal makes its own tokens without any ACL,
a token for another owner needs CreateTokens on that User (else DELEGATION_TOKEN_AUTHORIZATION_FAILED), and another
principal sees a token only with Describe on the DelegationToken (its id); the owner always sees its tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from klog.testing import kafka_tools as kt
from klog.testing.kafka import free_port, one_broker, sasl_plain_authorizer_properties

# nightly (make test-long): seven Java tool runs per broker; test_delegation_tokens_vs_kafka.py is CI's proof
pytestmark = [pytest.mark.java, pytest.mark.long]

TOKEN_COMMAND = "org.apache.kafka.tools.DelegationTokenCommand"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
PROPERTIES = {**sasl_plain_authorizer_properties(USERS), "delegation.token.secret.key": "klog-acl-token-secret"}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def sasl(request, tmp_path_factory):
    """The SASL_PLAINTEXT bootstrap of a klog broker or an Apache Kafka broker with an authorizer."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    with one_broker(request.param, root, PROPERTIES, extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]):
        yield f"127.0.0.1:{sasl_port}"


@pytest.fixture
def configs(tmp_path):
    out = {}
    for user, password in USERS.items():
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="{user}" password="{password}";\n')
        out[user] = str(path)
    return out


def _tokens(bootstrap: str, config: str, *args: str):
    return kt.run_kafka_tool(TOKEN_COMMAND, "--bootstrap-server", bootstrap, "--command-config", config, *args)


def _acl(bootstrap: str, config: str, *args: str) -> None:
    done = kt.run_kafka_tool(ACL_COMMAND, "--bootstrap-server", bootstrap, "--command-config", config, "--add",
                             *args)
    assert done.returncode == 0, done.stderr + done.stdout


def _token_rows(output: str) -> list[list[str]]:
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TOKENID"))
    return [line.split() for line in lines[header + 1:] if line.strip()]


def test_token_acls_create_tokens_and_describe_as_kafka(sasl: str, configs: dict[str, str]) -> None:
    own = _tokens(sasl, configs["alice"], "--create", "--max-life-time-period", "-1")
    assert own.returncode == 0, own.stderr + own.stdout
    [[alice_token, *_]] = _token_rows(own.stdout)

    # a token for another owner needs CreateTokens on that User
    refused = _tokens(sasl, configs["alice"], "--create", "--max-life-time-period", "-1", "--owner-principal",
                      "User:carol")
    assert "Delegation Token authorization failed" in refused.stdout + refused.stderr
    _acl(sasl, configs["admin"], "--allow-principal", "User:alice", "--operation", "CreateTokens",
         "--user-principal", "User:carol")
    for_carol = _tokens(sasl, configs["alice"], "--create", "--max-life-time-period", "-1", "--owner-principal",
                        "User:carol")
    assert for_carol.returncode == 0, for_carol.stderr + for_carol.stdout
    [[carol_token, _, owner, requester, *_]] = _token_rows(for_carol.stdout)
    assert (owner, requester) == ("User:carol", "User:alice")

    # the owner sees its token; another principal only with Describe on it
    described = _tokens(sasl, configs["carol"], "--describe", "--owner-principal", "User:carol")
    assert [r[0] for r in _token_rows(described.stdout)] == [carol_token], described.stdout
    assert alice_token not in _tokens(sasl, configs["bob"], "--describe", "--owner-principal", "User:alice").stdout
    _acl(sasl, configs["admin"], "--allow-principal", "User:bob", "--operation", "Describe", "--delegation-token",
         alice_token)
    seen = _tokens(sasl, configs["bob"], "--describe", "--owner-principal", "User:alice")
    assert [r[0] for r in _token_rows(seen.stdout)] == [alice_token], seen.stdout

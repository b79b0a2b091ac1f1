"""``klog users`` (and the admin client's ``describe_user_scram_credentials`` / ``alter_user_scram_credentials``
under it) on klog and on Apache Kafka 4.x from the same properties: a password set with ``klog users
set-password`` lets confluent-kafka log in with SCRAM over SASL_PLAINTEXT (a wrong one is refused); ``list`` and
``describe`` show the user's mechanisms and iterations, never a password or salt; ``delete`` ends the logins;
an unknown user is RESOURCE_NOT_FOUND, out-of-range iterations are refused. One broker of each kind for the
module."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from klog.client.admin import (
    AdminClient as KlogAdmin,
    AsyncAdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from klog.client.errors import KafkaError as KlogKafkaError
from klog.testing.kafka import free_port, one_broker

pytestmark = pytest.mark.java

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "connection.failed.authentication.delay.ms": 100,
}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    """(plaintext bootstrap, SASL_PLAINTEXT bootstrap) of a klog broker or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    with one_broker(request.param, root, PROPERTIES,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]) as bootstrap:
        yield bootstrap, f"127.0.0.1:{sasl_port}"


def _users(bootstrap, *args, stdin=None, config=None):
    cmd = [sys.executable, "-m", "klog.cli", "users", *args, "--bootstrap-server", bootstrap, "--timeout", "30"]
    if config is not None:
        cmd += ["--command-config", str(config)]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "COLUMNS": "200"})


def _ok(done):
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _client(sasl, user, password, mechanism):
    return {"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "socket.timeout.ms": 5000,
            "reconnect.backoff.ms": 5000}


def _login(sasl, user, password, mechanism):
    """None when confluent-kafka logs in and lists topics, else the error it reported."""
    seen = []
    admin = AdminClient({**_client(sasl, user, password, mechanism), "error_cb": seen.append})
    try:
        admin.list_topics(timeout=5)
        return None
    except KafkaException as exc:
        admin.poll(0)
        return seen[0] if seen else exc.args[0]


def _logs_in(sasl, user, password, mechanism, timeout=20.0):
    deadline = time.monotonic() + timeout
    while (error := _login(sasl, user, password, mechanism)) is not None:
        assert time.monotonic() < deadline, f"{user} could not log in with {mechanism}: {error}"
        time.sleep(0.5)


def _refused(sasl, user, password, mechanism, timeout=20.0):
    deadline = time.monotonic() + timeout
    while (error := _login(sasl, user, password, mechanism)) is None:
        assert time.monotonic() < deadline, f"{user} still logs in with {mechanism}"
        time.sleep(0.5)
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert f"invalid credentials with SASL mechanism {mechanism}" in error.str()



def test_klog_users_sets_lists_and_deletes_credentials_that_clients_log_in_with(server, tmp_path):
    plaintext, sasl = server
    user = f"alice-{uuid.uuid4().hex[:6]}"
    out = _ok(_users(plaintext, "set-password", user, "--mechanism", "SCRAM-SHA-512", "--password", "s3cret-pw",
                     "--iterations", "8192"))
    assert user in out and "s3cret" not in out
    # the password from stdin, over the SASL listener as the PLAIN admin through a --command-config file
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="admin" password="admin-pw";\n')
    _ok(_users(sasl, "set-password", user, "--mechanism", "SCRAM-SHA-256", "--password-stdin",
               stdin="other-pw\n", config=config))

    _logs_in(sasl, user, "s3cret-pw", "SCRAM-SHA-512")
    _logs_in(sasl, user, "other-pw", "SCRAM-SHA-256")
    _refused(sasl, user, "wrong-pw", "SCRAM-SHA-512")

    listing = _ok(_users(plaintext, "list"))
    lines = [line for line in listing.splitlines() if user in line]
    assert len(lines) == 2, listing
    assert any("SCRAM-SHA-512" in line and "8192" in line for line in lines), listing
    assert any("SCRAM-SHA-256" in line and "4096" in line for line in lines), listing
    assert "s3cret" not in listing and "other-pw" not in listing
    described = _ok(_users(sasl, "describe", user, config=config))
    assert [line for line in described.splitlines() if user in line] == lines, described

    _ok(_users(plaintext, "delete", user, "--mechanism", "SCRAM-SHA-512"))
    _refused(sasl, user, "s3cret-pw", "SCRAM-SHA-512")
    _logs_in(sasl, user, "other-pw", "SCRAM-SHA-256")
    lines = [line for line in _ok(_users(plaintext, "list")).splitlines() if user in line]
    assert len(lines) == 1 and "SCRAM-SHA-256" in lines[0], lines
    _ok(_users(plaintext, "delete", user, "--mechanism", "SCRAM-SHA-256"))
    _refused(sasl, user, "other-pw", "SCRAM-SHA-256")
    assert user not in _ok(_users(plaintext, "list"))


def test_klog_users_reports_kafkas_errors_with_the_user_and_a_non_zero_exit(server):
    plaintext, _ = server
    unknown = f"nobody-{uuid.uuid4().hex[:6]}"
    done = _users(plaintext, "describe", unknown)
    assert done.returncode == 1, done
    assert "RESOURCE_NOT_FOUND" in done.stderr and unknown in done.stderr, done.stderr
    done = _users(plaintext, "delete", unknown, "--mechanism", "SCRAM-SHA-256")
    assert done.returncode == 1 and "RESOURCE_NOT_FOUND" in done.stderr and unknown in done.stderr, done.stderr
    for iterations in ("4095", "16385"):
        done = _users(plaintext, "set-password", unknown, "--password", "pw", "--iterations", iterations)
        assert done.returncode == 1 and iterations in done.stderr and unknown in done.stderr, done.stderr
    done = _users(plaintext, "set-password", unknown, "--mechanism", "SCRAM-SHA-1", "--password", "pw")
    assert done.returncode == 1 and "SCRAM-SHA-1" in done.stderr, done.stderr
    done = _users(plaintext, "set-password", unknown)
    assert done.returncode == 1 and "--password" in done.stderr, done.stderr


def test_admin_client_describes_and_alters_scram_credentials(server):
    plaintext, sasl = server
    bob, carol = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("bob", "carol"))
    with KlogAdmin(plaintext) as admin:
        admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(bob, "SCRAM-SHA-256", "bob-pw", 16384),
            UserScramCredentialUpsertion(carol, "scram-sha-512", "carol-pw", 5000)])
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(bob, "SCRAM-SHA-512", "bob-pw")])
        found = admin.describe_user_scram_credentials([bob, carol])
        assert sorted(found[bob], key=lambda i: i.mechanism) == [
            ScramCredentialInfo("SCRAM-SHA-256", 16384), ScramCredentialInfo("SCRAM-SHA-512", 4096)]
        assert found[carol] == [ScramCredentialInfo("SCRAM-SHA-512", 5000)]
        everyone = admin.describe_user_scram_credentials()
        assert {bob, carol} <= set(everyone) and everyone[carol] == found[carol]
        _logs_in(sasl, bob, "bob-pw", "SCRAM-SHA-256")

        # Kafka's per-user errors, raised after every item was tried and naming the user
        with pytest.raises(KlogKafkaError) as err:
            admin.describe_user_scram_credentials([carol, "no-such-user"])
        assert err.value.name == "RESOURCE_NOT_FOUND" and "no-such-user" in str(err.value)
        with pytest.raises(KlogKafkaError) as err:
            admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(carol, "SCRAM-SHA-256")])
        assert err.value.name == "RESOURCE_NOT_FOUND" and carol in str(err.value)
        with pytest.raises(ValueError, match="16385"):
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(carol, "SCRAM-SHA-512", "x", 16385)])

        admin.alter_user_scram_credentials(deletions=[(bob, "SCRAM-SHA-256"), (carol, "SCRAM-SHA-512")])
        admin.alter_user_scram_credentials(deletions=[(bob, "SCRAM-SHA-512")])
        _refused(sasl, bob, "bob-pw", "SCRAM-SHA-256")

    async def described():
        async with AsyncAdminClient(plaintext) as aio:
            return await aio.describe_user_scram_credentials()

    remaining = asyncio.run(described())
    assert bob not in remaining and carol not in remaining


def test_one_request_altering_a_user_twice_is_refused_for_that_user_only(server):
    """Kafka's ScramControlManager allows one alteration per user and request: a second one for the same user
    (another mechanism, or a deletion and an upsertion) fails that user with DUPLICATE_RESOURCE and changes none
    of its credentials; other users in the request are altered. (So kafka-configs cannot add SCRAM-SHA-256 and
    SCRAM-SHA-512 in one --add-config, on Kafka as on klog.)"""
    from confluent_kafka.admin import (
        ScramCredentialInfo as CkInfo,
        ScramMechanism,
        UserScramCredentialDeletion as CkDeletion,
        UserScramCredentialUpsertion as CkUpsertion,
    )
    plaintext, sasl = server
    twice, once, both, ghost = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("twice", "once", "both", "ghost"))
    admin = AdminClient({"bootstrap.servers": plaintext})

    def upsert(user, mechanism):
        return CkUpsertion(user, CkInfo(mechanism, 4096), f"{user}-pw".encode())

    def codes(alterations):
        out = {}
        for user, future in admin.alter_user_scram_credentials(alterations).items():
            try:
                future.result(30)
                out[user] = "NONE"
            except KafkaException as exc:
                out[user] = exc.args[0].name()
        return out

    assert codes([upsert(twice, ScramMechanism.SCRAM_SHA_256), upsert(twice, ScramMechanism.SCRAM_SHA_512),
                  upsert(once, ScramMechanism.SCRAM_SHA_512)]) == {twice: "DUPLICATE_RESOURCE", once: "NONE"}
    with KlogAdmin(plaintext) as klog_admin:
        found = klog_admin.describe_user_scram_credentials()
    assert twice not in found and found[once] == [ScramCredentialInfo("SCRAM-SHA-512", 4096)]
    assert _login(sasl, once, f"{once}-pw", "SCRAM-SHA-512") is None

    # one mechanism each in two requests is how a user gets both
    assert codes([upsert(both, ScramMechanism.SCRAM_SHA_256)]) == {both: "NONE"}
    assert codes([upsert(both, ScramMechanism.SCRAM_SHA_512)]) == {both: "NONE"}
    # a deletion and an upsertion of one user: refused, both credentials stay
    assert codes([CkDeletion(both, ScramMechanism.SCRAM_SHA_256), upsert(both, ScramMechanism.SCRAM_SHA_512),
                  CkDeletion(once, ScramMechanism.SCRAM_SHA_512)]) == {both: "DUPLICATE_RESOURCE", once: "NONE"}
    with KlogAdmin(plaintext) as klog_admin:
        found = klog_admin.describe_user_scram_credentials()
    assert sorted(i.mechanism for i in found[both]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"] and once not in found
    # a user's first item that fails keeps its own error: the deletion of a credential that does not exist
    assert codes([CkDeletion(ghost, ScramMechanism.SCRAM_SHA_256),
                  upsert(ghost, ScramMechanism.SCRAM_SHA_512)]) == {ghost: "RESOURCE_NOT_FOUND"}

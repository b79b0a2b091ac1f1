"""SASL_SSL on klog and on Apache Kafka 4.x from the same properties: Kafka's own ``kafka-configs --alter
--add-config 'SCRAM-SHA-512=[...]' --entity-type users`` creates a user who then logs in (confluent-kafka, and
the Java console tools through a client properties file), ``--describe`` shows the credential, a wrong password and
an unknown user get the same SASL_AUTHENTICATION_FAILED message, and ``--delete-config`` ends the user's logins.
One broker of each kind for the module."""

from __future__ import annotations

import re
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from klog.testing import kafka_tools as kt  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port  # noqa: E402
from klog.testing.process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.java

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _security_properties(pki, sasl_port):
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"].keystore_file,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "connection.failed.authentication.delay.ms": 100,
    }


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return {"ca": ca, "broker": ca.issue("broker")}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory, pki):
    """(plaintext bootstrap, SASL_SSL bootstrap) of a klog broker or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    props = _security_properties(pki, sasl_port)
    if request.param == "klog":
        node = BrokerProcess(root / "data", {
            **props, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{sasl_port}"})
        with node:
            yield node.bootstrap_servers, f"127.0.0.1:{sasl_port}"
        return
    try:
        find_kafka_libs()
    except Exception as exc:  # the jars are fetched by tools/install-peers.sh
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    port = free_port()
    controller = free_port()
    listeners = (f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port},"
                 f"CONTROLLER://127.0.0.1:{controller}")
    with apache_kafka(root, port, heap="512m", config={
            **props, "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}"}) as bootstrap:
        yield str(bootstrap), f"127.0.0.1:{sasl_port}"


def _client(pki, sasl_bootstrap, user, password):
    return {"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": pki["ca"].ca_file,
            "socket.timeout.ms": 5000, "reconnect.backoff.ms": 5000}


def _login_error(conf):
    seen = []
    admin = AdminClient({**conf, "error_cb": seen.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(0)
    assert seen, "no error reported"
    return seen[0]


def _configs(*args):
    result = kt.run_kafka_tool(kt.CONFIG_COMMAND, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kafka_configs_adds_a_scram_user_who_logs_in_and_is_refused_after_deletion(server, pki, tmp_path):
    plaintext, sasl = server
    user = f"user-{uuid.uuid4().hex[:6]}"
    _configs("--bootstrap-server", plaintext, "--alter", "--add-config",
             "SCRAM-SHA-512=[iterations=8192,password=s3cret-pw]", "--entity-type", "users", "--entity-name", user)
    described = _configs("--bootstrap-server", plaintext, "--describe", "--entity-type", "users",
                         "--entity-name", user)
    assert re.search(r"SCRAM-SHA-512=iterations=8192", described), described

    # confluent-kafka logs in and produces
    topic = f"t-{uuid.uuid4().hex[:6]}"
    producer = Producer({**_client(pki, sasl, user, "s3cret-pw"), "socket.timeout.ms": 30000,
                         "reconnect.backoff.ms": 100})
    producer.produce(topic, b"hello")
    assert producer.flush(60) == 0

    # the Java console consumer logs in through a client properties file
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{user}" password="s3cret-pw";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca'].ca_file}\n")
    consumed = kt.run_kafka_tool(kt.CONSOLE_CONSUMER, "--bootstrap-server", sasl, "--topic", topic,
                                 "--from-beginning", "--max-messages", "1", "--timeout-ms", "60000",
                                 "--command-config", str(props))
    assert consumed.returncode == 0 and "hello" in consumed.stdout, consumed.stderr

    # a wrong password and an unknown user: the same error
    for who, password in ((user, "wrong-pw"), ("nobody", "s3cret-pw")):
        error = _login_error(_client(pki, sasl, who, password))
        assert error.code() == KafkaError._AUTHENTICATION, error
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in error.str()

    _configs("--bootstrap-server", plaintext, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type",
             "users", "--entity-name", user)
    error = _login_error(_client(pki, sasl, user, "s3cret-pw"))
    assert error.code() == KafkaError._AUTHENTICATION

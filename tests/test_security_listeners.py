"""SSL, mTLS, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with real clients:
confluent-kafka, kafka-python, kcat and klog's own client; wrong passwords, unknown users and protocol mismatches
refused with the right error while the broker keeps serving others. One broker for the module, certificates made
here with ``cryptography``."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
import time
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from klog.testing.certs import CertificateAuthority
from klog.testing.process import BrokerProcess
from klog.testing.tls_probe import produce_and_consume

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

PLAIN_USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" ' \
       f'password="admin-secret" {PLAIN_USERS};'
TOPIC = "secured"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return {"ca": ca, "broker": ca.issue("broker"), "client": ca.issue("client", org="Example"),
            "other_ca": CertificateAuthority(tmp_path_factory.mktemp("other-pki"), "untrusted CA")}


@pytest.fixture(scope="module", params=["ssl", "native"])
def broker(request, tmp_path_factory, pki):
    """The broker, its TLS served by Python's ssl module and by klog's native TLS session (klog.tls.engine)."""
    data = tmp_path_factory.mktemp("secure-broker")
    node = BrokerProcess(data, {
        "klog.tls.engine": request.param,
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0,REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL,REAUTH:SASL_PLAINTEXT",
        "listener.name.reauth.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.connections.max.reauth.ms": 1000,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"].keystore_file,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"].ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),O=.*$/$1/L,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": 200,
        "num.partitions": 1,
    })
    with node:
        line = next(ln for ln in node.lines if "listening on" in ln)
        node.ports = {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}
        native = {ln.split("listener ")[1].split(":")[0] for ln in node.lines if "native TLS session" in ln}
        assert native == ({"SSL", "SASL_SSL", "MTLS"} if request.param == "native" else set())
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])["secured"].result(30)
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):  # one per user and request
            upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                       for user, password in (("alice", "alice-scram"), ("bob", "bob-scram"))]
            for future in admin.alter_user_scram_credentials(upserts).values():
                future.result(30)
        yield node


def _conf(broker, listener, pki, **extra):
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}", "security.protocol": listener
            if listener != "MTLS" else "SSL", "socket.timeout.ms": 10000, **extra}
    if conf["security.protocol"] in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = pki["ca"].ca_file
    return conf


CASES = {
    "ssl": ("SSL", {}),
    "mtls": ("MTLS", {"client": True}),
    "sasl_plaintext-plain": ("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                                "sasl.password": "alice-secret"}),
    "sasl_ssl-plain": ("SASL_SSL", {"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                    "sasl.password": "alice-secret"}),
    "sasl_plaintext-scram256": ("SASL_PLAINTEXT", {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                                                   "sasl.password": "alice-scram"}),
    "sasl_ssl-scram512": ("SASL_SSL", {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
                                       "sasl.password": "bob-scram"}),
}


def _client_conf(broker, pki, case):
    listener, settings = CASES[case]
    settings = dict(settings)
    if settings.pop("client", False):
        settings.update({"ssl.certificate.location": pki["client"].cert_file,
                         "ssl.key.location": pki["client"].key_file})
    return _conf(broker, listener, pki, **settings)


@pytest.mark.parametrize("case", list(CASES))
def test_confluent_kafka_produces_and_consumes(broker, pki, case):
    produce_and_consume(_client_conf(broker, pki, case), TOPIC, f"{case}-{uuid.uuid4()}".encode())


def _fetch_frame(sock, topic, slow=False):
    """The raw answer frame of one Fetch v11 of ``topic``-0 from offset 0 (up to 64 MiB) on ``sock``; ``slow``: read
    16 KiB at a time with a pause between reads."""
    from klog.protocol import encode_request

    sock.sendall(encode_request(1, 11, 1, "tls-large", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 64 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}))
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(16384 if slow else 1 << 20)
        assert chunk, "the broker closed the connection"
        data += chunk
        if slow:
            time.sleep(0.001)
    return data


def test_a_large_fetch_over_tls_is_the_plaintext_answer_byte_for_byte_through_a_slow_reader(broker, pki):
    """A 12 MiB fetch response over TLS: the broker reads and encrypts its records a slice at a time
    (klog/broker/network/writer.py COPY_SLICE_BYTES), waiting for the transport between slices while a client
    with a small receive buffer reads slowly; the answer is the one the PLAINTEXT listener sends with sendfile."""
    topic = f"tls-large-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20, "batch.size": 1_000_000})
    for i in range(3000):
        producer.produce(topic, i.to_bytes(4, "big") * 1024)
    assert producer.flush(60) == 0
    with socket.create_connection(("127.0.0.1", broker.ports["PLAINTEXT"]), timeout=30) as plain:
        expected = _fetch_frame(plain, topic)
    assert len(expected) > 12_000_000
    context = ssl.create_default_context(cafile=pki["ca"].ca_file)
    context.check_hostname = False
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", broker.ports["SSL"]))
    with context.wrap_socket(raw) as tls:
        assert _fetch_frame(tls, topic, slow=True) == expected
        assert _fetch_frame(tls, topic) == expected   # the connection serves on


def _metadata_error(conf):
    """The error a client gets asking for metadata: the first one its error callback saw (librdkafka reports
    authentication and TLS errors there), else the one list_topics raised."""
    seen = []
    admin = AdminClient({**conf, "socket.timeout.ms": 3000, "reconnect.backoff.ms": 5000, "error_cb": seen.append})
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=3)
    admin.poll(0)
    return seen[0] if seen else info.value.args[0]


def _refusal(mechanism):
    """Kafka's message for a wrong password or an unknown user (PlainSaslServer's own words for PLAIN;
    tests/test_sasl_handshake_vs_kafka.py compares them with Kafka's)."""
    if mechanism == "PLAIN":
        return "Authentication failed: Invalid username or password"
    return f"invalid credentials with SASL mechanism {mechanism}"


@pytest.mark.parametrize("mechanism, user, password", [
    ("PLAIN", "alice", "Wr0ng-secret"), ("PLAIN", "mallory", "M4llory-secret"),
    ("SCRAM-SHA-256", "alice", "Wr0ng-secret"), ("SCRAM-SHA-512", "mallory", "M4llory-secret")])
def test_a_failed_login_is_sasl_authentication_failed_and_logged_once_without_the_password(
        broker, pki, mechanism, user, password):
    before = len(broker.lines)
    started = time.monotonic()
    error = _metadata_error(_conf(broker, "SASL_SSL", pki, **{
        "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}))
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert _refusal(mechanism) in error.str()
    assert time.monotonic() - started >= 0.2   # connection.failed.authentication.delay.ms
    deadline = time.monotonic() + 5
    mine = f"({mechanism}): user {user!r}"
    while not any(mine in ln for ln in broker.lines[before:]) and time.monotonic() < deadline:
        time.sleep(0.05)
    failed = [ln for ln in broker.lines[before:] if "klog.broker.sasl" in ln and mine in ln]
    assert failed and all(("wrong password" if user == "alice" else "no such user") in ln for ln in failed)
    assert not any(password in ln for ln in broker.lines[before:])
    # the broker keeps serving others
    assert TOPIC in AdminClient(_client_conf(broker, pki, "sasl_ssl-scram512")).list_topics(timeout=10).topics


def test_unsupported_mechanism_and_requests_before_login_are_refused(broker):
    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    with WireClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"]) as wire:
        answer = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == 33 and set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    with WireClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"]) as wire:
        with pytest.raises((ConnectionError, OSError, EOFError)):
            wire.request(ApiKey.METADATA, 9, {"topics": None})
    with WireClient("127.0.0.1", broker.ports["PLAINTEXT"]) as wire:
        assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 34


def test_plaintext_client_on_a_tls_port_and_tls_client_on_a_plaintext_port_fail(broker, pki):
    error = _metadata_error({"bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}"})
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)
    error = _metadata_error(_conf(broker, "SSL", pki, **{"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                            KafkaError._ALL_BROKERS_DOWN)
    # a raw TLS handshake against the plaintext port fails too, and the broker still answers
    context = ssl.create_default_context(cafile=pki["ca"].ca_file)
    with socket.create_connection(("127.0.0.1", broker.ports["PLAINTEXT"]), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost").do_handshake()
    assert TOPIC in AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics


def test_mtls_needs_a_trusted_client_certificate(broker, pki):
    # no certificate
    error = _metadata_error(_conf(broker, "MTLS", pki))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                            KafkaError._TIMED_OUT)
    # one from another CA
    untrusted = pki["other_ca"].issue("intruder")
    error = _metadata_error(_conf(broker, "MTLS", pki, **{"ssl.certificate.location": untrusted.cert_file,
                                                         "ssl.key.location": untrusted.key_file}))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                            KafkaError._TIMED_OUT)


def test_describe_user_scram_credentials(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_user_scram_credentials(["alice"]).result(30) \
        if hasattr(admin.describe_user_scram_credentials(["alice"]), "result") else None
    if described is None:
        futures = admin.describe_user_scram_credentials(["alice"])
        described = {user: f.result(30) for user, f in futures.items()}
    infos = described["alice"].scram_credential_infos
    assert sorted((i.mechanism, i.iterations) for i in infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)]


@pytest.mark.parametrize("case", ["ssl", "sasl_ssl-plain", "sasl_plaintext-scram256", "sasl_ssl-scram512"])
def test_kafka_python(broker, pki, case):
    from kafka import KafkaConsumer, KafkaProducer

    listener, settings = CASES[case]
    kw = {"bootstrap_servers": f"127.0.0.1:{broker.ports[listener]}", "security_protocol": listener}
    if listener.endswith("SSL"):
        kw.update(ssl_cafile=pki["ca"].ca_file)
    if listener.startswith("SASL"):
        kw.update(sasl_mechanism=settings["sasl.mechanism"], sasl_plain_username=settings["sasl.username"],
                  sasl_plain_password=settings["sasl.password"])
    value = f"kp-{case}-{uuid.uuid4()}".encode()
    producer = KafkaProducer(**kw)
    producer.send(TOPIC, value).get(30)
    producer.close()
    from kafka import TopicPartition as KpTopicPartition

    consumer = KafkaConsumer(auto_offset_reset="earliest", **kw)
    seen = set()
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 60
        while value not in seen and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                seen.update(r.value for r in records)
    finally:
        consumer.close()
    assert value in seen


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by tools/install-peers.sh")
@pytest.mark.parametrize("case", ["mtls", "sasl_ssl-scram512"])
def test_kcat(broker, pki, case):
    conf = _client_conf(broker, pki, case)
    args = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    value = f"kcat-{case}-{uuid.uuid4()}"
    produced = subprocess.run(args + ["-P", "-t", TOPIC], input=value, text=True, capture_output=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    out = subprocess.run(args + ["-C", "-t", TOPIC, "-o", "beginning", "-e", "-q"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    assert value in out


@pytest.mark.parametrize("case", ["ssl", "mtls", "sasl_plaintext-plain", "sasl_ssl-plain", "sasl_plaintext-scram256",
                                  "sasl_ssl-scram512"])
def test_klog_client_produces_and_consumes(broker, pki, case):
    import klog

    conf = _client_conf(broker, pki, case)
    bootstrap = conf.pop("bootstrap.servers")
    conf.pop("socket.timeout.ms")
    value = f"klog-{case}-{uuid.uuid4()}".encode()
    with klog.Producer(bootstrap, **conf) as producer:
        producer.send(TOPIC, value).result(30)
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **conf) as consumer:
        consumer.assign([(TOPIC, 0)])
        got = []
        deadline = time.monotonic() + 30
        while value not in got and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout=1.0)]
    assert value in got


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_klog_client_wrong_password_is_an_authentication_error(broker, pki, mechanism):
    import klog
    from klog.protocol.errors import ErrorCode, KafkaError as KlogError

    conf = _conf(broker, "SASL_SSL", pki, **{"sasl.mechanism": mechanism, "sasl.username": "alice",
                                              "sasl.password": "not-it"})
    bootstrap = conf.pop("bootstrap.servers")
    conf.pop("socket.timeout.ms")
    with pytest.raises(KlogError) as info:
        with klog.AdminClient(bootstrap, **conf) as admin:
            admin.list_topics()
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert _refusal(mechanism) in str(info.value)


def test_klog_cli_with_a_command_config_for_sasl_ssl(broker, pki, tmp_path):
    import sys

    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     "username=\"bob\" password=\"bob-scram\";\n"
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca'].ca_file}\n")
    cmd = [sys.executable, "-m", "klog.cli", "topics", "list", "--bootstrap-server",
           f"127.0.0.1:{broker.ports['SASL_SSL']}", "--command-config", str(props)]
    listed = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and TOPIC in listed.stdout, listed.stderr
    props.write_text(props.read_text().replace("bob-scram", "wrong"))
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "invalid credentials" in refused.stderr


def test_spark_connector_client_takes_kafka_prefixed_security_options(broker, pki):
    """Spark's Kafka source options (kafka.security.protocol, kafka.sasl.jaas.config, kafka.ssl.truststore.*) as
    klog.spark passes them to each task's client."""
    from klog.client import TopicPartition
    from klog.spark.brokers import connect
    from klog.spark.options import parse_sink_options, security_settings

    opts = parse_sink_options({
        "kafka.bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}", "topic": TOPIC,
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="alice" password="alice-scram";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": pki["ca"].ca_file})
    with connect(opts.bootstrap_servers, client_id="spark-test", request_timeout_ms=10000,
                 security=security_settings(opts.kafka_params)) as client:
        offsets = client.list_offsets({TopicPartition(TOPIC, 0): -1})
    assert offsets[TopicPartition(TOPIC, 0)].offset >= 0   # answered over the SCRAM login


def _login(wire, user="alice", password="alice-secret"):
    from klog.protocol import ApiKey
    from klog.security.sasl import plain_token

    assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
    return wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token(user, password)})


def test_reauthentication_kip_368(broker):
    """connections.max.reauth.ms: SaslAuthenticate tells the session lifetime; a connection re-authenticates on
    the open connection (as the same user) and goes on; one that does not is closed at its next request."""
    from klog.protocol import ApiKey
    from klog.testing.wire import WireClient

    port = broker.ports["REAUTH"]
    with WireClient("127.0.0.1", port) as wire:
        answer = _login(wire)
        assert answer.error_code == 0 and answer.session_lifetime_ms == 1000
        assert wire.request(ApiKey.METADATA, 9, {"topics": None}).brokers
        time.sleep(1.2)
        again = _login(wire)   # re-authentication
        assert again.error_code == 0 and again.session_lifetime_ms == 1000
        assert wire.request(ApiKey.METADATA, 9, {"topics": None}).brokers
        time.sleep(1.2)
        other = _login(wire, "admin", "admin-secret")   # another principal: refused
        assert other.error_code == 58 and "Cannot change principals" in other.error_message
    with WireClient("127.0.0.1", port) as wire:
        assert _login(wire).error_code == 0
        time.sleep(1.2)
        with pytest.raises((ConnectionError, OSError, EOFError)):
            wire.request(ApiKey.METADATA, 9, {"topics": None})
    # librdkafka re-authenticates by itself: a producer outlives several sessions on one connection
    mark = len(broker.lines)
    producer = Producer({"client.id": "reauth-producer", "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"})
    failed = []
    for n in range(8):
        producer.produce(TOPIC, b"reauth-%d" % n, on_delivery=lambda err, msg: err and failed.append(err))
        producer.flush(10)
        time.sleep(0.4)
    assert not failed and producer.flush(10) == 0
    assert not [ln for ln in broker.lines[mark:] if "reauth-producer" in ln and "expired" in ln]


def test_aiokafka_over_sasl_ssl_scram(broker, pki):
    import asyncio
    import ssl as ssl_module

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    context = ssl_module.create_default_context(cafile=pki["ca"].ca_file)
    kw = {"bootstrap_servers": f"127.0.0.1:{broker.ports['SASL_SSL']}", "security_protocol": "SASL_SSL",
          "ssl_context": context, "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
          "sasl_plain_password": "alice-scram"}
    value = f"aio-{uuid.uuid4()}".encode()

    async def roundtrip() -> bool:
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, auto_offset_reset="earliest", **kw)
        await consumer.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                if any(r.value == value for records in batches.values() for r in records):
                    return True
            return False
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip())

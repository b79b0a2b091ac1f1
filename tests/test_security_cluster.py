"""A 3-node cluster whose client and inter-broker listener is SASL_SSL and whose controller listener is SSL with
client certificates required (mTLS): every node formatted with
``klog-broker format --add-scram`` (the brokers' own SCRAM-SHA-512 user, as ``kafka-storage format --add-scram``),
the replica fetchers log in to their leaders with ``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512`` and the
listener's JAAS username/password over TLS (host names checked), and so does the transaction coordinator when it
reaches other brokers; clients log in with PLAIN, run transactions over partitions led by different brokers,
produce with acks=all and read back everything after the partition leader is SIGKILLed."""

from __future__ import annotations

import base64
import re
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.controller_quorum import FAST_QUORUM_TIMING  # noqa: E402
from klog.testing.ports import free_port  # noqa: E402
from klog.controller.applier import new_cluster_id  # noqa: E402
from klog.protocol import decode_response, encode_request  # noqa: E402
from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.testing.process import BrokerProcess, broker_command, start_together  # noqa: E402

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_app="app-secret";'
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl-ssl-cluster")
    ca = CertificateAuthority(root / "pki")
    ids = (1, 2, 3)
    client_ports = {i: free_port() for i in ids}
    controller_ports = {i: free_port() for i in ids}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller_ports.items())
    nodes = {}
    cluster_id = new_cluster_id()
    for i in ids:
        cert = ca.issue(f"broker{i}")
        listeners = f"SASL_SSL://127.0.0.1:{client_ports[i]},CONTROLLER://127.0.0.1:{controller_ports[i]}"
        props = {"process.roles": "broker,controller", "node.id": i, "controller.quorum.voters": voters,
                 "controller.listener.names": "CONTROLLER",
                 "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
                 # the controller listener: TLS, every node authenticated by its certificate (mTLS)
                 "listener.name.controller.ssl.client.auth": "required",
                 "listeners": listeners, "log.dirs": str(root / f"node-{i}"),
                 "ssl.keystore.type": "PEM", "ssl.keystore.location": cert.keystore_file,
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": ca.ca_file,
                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                 "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                 "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                 "delegation.token.secret.key": "cluster-token-secret",
                 "offsets.topic.replication.factor": 3, "default.replication.factor": 3,
                 "min.insync.replicas": 2, **FAST_QUORUM_TIMING}
        path = root / f"node-{i}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        formatted = subprocess.run(
            broker_command() + ["format", "-t", cluster_id, "-c", str(path),
                                "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]"],
            capture_output=True, text=True, timeout=60)
        assert formatted.returncode == 0, formatted.stderr
        nodes[i] = BrokerProcess(root / f"node-{i}", {"listeners": listeners}, properties_file=path,
                                 ready_re=re.compile(r"klog-broker started"))
    try:
        start_together(nodes.values())
        yield nodes, client_ports, ca, controller_ports
    finally:
        for node in nodes.values():
            node.terminate()
        for node in nodes.values():
            node.stop()


def _conf(ports, ca, nodes_up):
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{ports[i]}" for i in nodes_up),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "app",
            "sasl.password": "app-secret", "ssl.ca.location": ca.ca_file}


def _leader(admin, topic):
    md = admin.list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader, md.topics[topic].partitions[0].isrs


def _api_versions(port, context):
    """ApiVersions on a controller listener (TLS with ``context``, else plain TCP): the answer's error code, or
    None when the connection was refused or closed without an answer."""
    request = encode_request(18, 0, 7, "probe", {})
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context is not None else raw
            sock.sendall(request)
            head = sock.recv(4)
            if len(head) < 4:
                return None
            (size,) = struct.unpack(">i", head)
            frame = b""
            while len(frame) < size:
                chunk = sock.recv(size - len(frame))
                if not chunk:
                    return None
                frame += chunk
            return decode_response(18, 0, frame)[1].error_code
    except (OSError, ssl.SSLError):
        return None


def test_controller_listener_takes_only_tls_with_a_trusted_client_certificate(cluster):
    """The controller listener (Raft between the voters, the brokers' registrations, heartbeats, AlterPartition,
    forwarding) is TLS with ssl.client.auth=required: the quorum runs on it, a plaintext or certificate-less
    client gets no answer, a client with a certificate of the cluster's CA does."""
    nodes, ports, ca, controller_ports = cluster
    port = controller_ports[1]
    assert _api_versions(port, None) is None
    anonymous = ssl.create_default_context(cafile=ca.ca_file)
    assert _api_versions(port, anonymous) is None
    member = ssl.create_default_context(cafile=ca.ca_file)
    cert = ca.issue("probe")
    member.load_cert_chain(cert.cert_file, cert.key_file)
    assert _api_versions(port, member) == 0


def test_transactions_across_brokers_over_sasl_ssl(cluster):
    """The transaction coordinator reaches the other partitions' leaders (verify-only AddPartitionsToTxn,
    WriteTxnMarkers) over the SASL_SSL inter-broker listener: a read_committed consumer sees exactly the committed
    records of partitions led by different brokers."""
    nodes, ports, ca, _ = cluster
    conf = _conf(ports, ca, nodes)
    admin = AdminClient(conf)
    topic = f"secure-txn-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    deadline = time.monotonic() + 30
    leaders: set[int] = set()
    while time.monotonic() < deadline:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        leaders = {p.leader for p in parts.values()}
        if len(parts) == 3 and -1 not in leaders and all(len(p.isrs) == 3 for p in parts.values()):
            break
        time.sleep(0.2)
    assert len(leaders) > 1 and -1 not in leaders, f"partition leaders {leaders}: not spread over the brokers"

    producer = Producer({**conf, "transactional.id": f"tx-{topic}", "acks": "all"})
    producer.init_transactions(30)
    committed = []
    for txn, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for partition in range(3):
            for n in range(10):
                value = f"t{txn}-p{partition}-{n}".encode()
                producer.produce(topic, value, partition=partition)
                if commit:
                    committed.append(value)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)

    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(committed) and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        # anything after the committed records (an aborted one leaking) would arrive now
        end = time.monotonic() + 2
        while time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(committed)


class _SaslConnection:
    """A raw SASL_SSL connection to one node's client listener, logged in with PLAIN or with a delegation
    token (SCRAM-SHA-512, tokenauth=true)."""

    def __init__(self, port, ca):
        context = ssl.create_default_context(cafile=ca.ca_file)
        self.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15),
                                        server_hostname="127.0.0.1")
        self.correlation = 0

    def call(self, api_key, version, body):
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "token-test", body))
        (size,) = struct.unpack(">i", self._read(4))
        return decode_response(api_key, version, self._read(size))[1]

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def login_plain(self, user, password):
        from klog.security.sasl import plain_token

        assert self.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        return self.call(36, 2, {"auth_bytes": plain_token(user, password)}).error_code

    def login_token(self, token_id, hmac):
        from klog.security.scram import ScramClient

        client = ScramClient("SCRAM-SHA-512", token_id, base64.b64encode(hmac).decode(),
                             extensions={"tokenauth": "true"})
        assert self.call(17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
        first = self.call(36, 2, {"auth_bytes": client.first()})
        if first.error_code:
            return first.error_code
        final = self.call(36, 2, {"auth_bytes": client.final(first.auth_bytes)})
        if final.error_code == 0:
            client.verify(final.auth_bytes)
        return final.error_code

    def close(self):
        self.sock.close()


def _as_app(ports, ca, node):
    conn = _SaslConnection(ports[node], ca)
    assert conn.login_plain("app", "app-secret") == 0
    return conn


def test_delegation_tokens_are_decided_by_the_controller_and_work_on_every_node(cluster):
    """Each node's broker forwards CreateDelegationToken/Renew/Expire to the active controller with the client's
    principal; every node derives the same HMAC from delegation.token.secret.key and accepts the token's SCRAM
    login; an expired token stops logging in everywhere."""
    nodes, ports, ca, _ = cluster
    create = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    tokens = {}
    for node in (1, 2, 3):   # two of them forward to the active controller
        conn = _as_app(ports, ca, node)
        created = conn.call(38, 3, create)
        conn.close()
        assert (created.error_code, created.principal_name, created.token_requester_principal_name) == \
            (0, "app", "app"), created
        tokens[created.token_id] = created.hmac
    conn = _as_app(ports, ca, 1)
    deadline = time.monotonic() + 20
    while True:   # every node applies the records; node 1 answers from its image
        described = conn.call(41, 3, {"owners": [{"principal_type": "User", "principal_name": "app"}]})
        if {t.token_id: t.hmac for t in described.tokens} == tokens or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {t.token_id: t.hmac for t in described.tokens} == tokens
    renewed = conn.call(39, 2, {"hmac": next(iter(tokens.values())), "renew_period_ms": 60_000})
    assert renewed.error_code == 0 and renewed.expiry_timestamp_ms > 0
    conn.close()

    token_id, hmac = next(iter(tokens.items()))
    for node in (1, 2, 3):
        login = _SaslConnection(ports[node], ca)
        assert login.login_token(token_id, hmac) == 0
        # logged in as the token's owner, token-authenticated: it may not make tokens
        assert login.call(38, 3, create).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        login.close()

    conn = _as_app(ports, ca, 2)
    assert conn.call(40, 2, {"hmac": hmac, "expiry_time_period_ms": -1}).error_code == 0
    conn.close()
    deadline = time.monotonic() + 20
    while True:
        login = _SaslConnection(ports[3], ca)
        code = login.login_token(token_id, hmac)
        login.close()
        if code != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_replication_over_sasl_ssl_survives_a_leader_sigkill(cluster):
    nodes, ports, ca, _ = cluster
    conf = _conf(ports, ca, nodes)
    admin = AdminClient(conf)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:   # the followers caught up over SASL_SSL
        leader, isr = _leader(admin, topic)
        if leader >= 0 and len(isr) == 3:
            break
        time.sleep(0.2)
    assert len(isr) == 3, f"ISR {isr}: the followers did not fetch over SASL_SSL"
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    sent = [f"before-{n}".encode() for n in range(200)]
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(30) == 0

    nodes[leader].kill()
    survivors = [i for i in nodes if i != leader]
    conf = _conf(ports, ca, survivors)
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    after = [f"after-{n}".encode() for n in range(200)]
    failed = []
    for value in after:
        producer.produce(topic, value, on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed

    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(sent) + len(after) and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == sent + after

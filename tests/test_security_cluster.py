"""A 3-node cluster with SASL_SSL on every listener, the controller listener included, from properties Apache Kafka
4.3 runs unchanged (each test runs on a klog cluster and on a Kafka cluster started from the same files):

- the client and inter-broker listener ``SASL_SSL``: every node formatted with the brokers' own SCRAM-SHA-512 user
  (``klog-broker format --add-scram`` / ``kafka-storage format --add-scram``), the replica fetchers and the
  transaction coordinator log in to the other brokers with ``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512``
  over TLS (host names checked); clients log in with PLAIN;
- the controller listener ``SASL_SSL`` too: the Raft transport between the voters, the brokers' registrations,
  heartbeats, AlterPartition and forwarded requests log in with ``sasl.mechanism.controller.protocol=PLAIN`` (the
  ``controller`` user of the listener's PlainLoginModule), and with the StandardAuthorizer every controller request
  needs ClusterAction (the nodes' principals are super users);

then transactions over partitions led by different brokers, delegation tokens, and a SIGKILL of the active
controller, which leads partitions too, with nothing acknowledged lost. A node with a wrong controller password
stays out of the cluster, and says why."""

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
from klog.testing.kafka import answers_api_versions, read_properties  # noqa: E402
from klog.testing.process import BrokerProcess, broker_command, start_together  # noqa: E402

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_app="app-secret";'
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')
#: the controller listener's PLAIN users: the nodes' own ("controller"), and one that may log in but is no node
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="{password}" user_controller="controller-secret" user_intruder="intruder-secret";')
ADD_SCRAM = ["--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]"]


def node_properties(i, root, ca, cert, client_port, controller_ports, *, roles="broker,controller",
                    controller_password="controller-secret"):
    """Node ``i``'s server.properties, Kafka's names only."""
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller_ports.items())
    listeners = [f"SASL_SSL://127.0.0.1:{client_port}"]
    if "controller" in roles:
        listeners.append(f"CONTROLLER://127.0.0.1:{controller_ports[i]}")
    return {"process.roles": roles, "node.id": i, "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
            "listeners": ",".join(listeners), "log.dirs": str(root / f"node-{i}"),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": cert.keystore_file,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": ca.ca_file,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            # the controller listener: SASL_SSL, the nodes log in with PLAIN
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS.format(password=controller_password),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:controller;User:app",
            "delegation.token.secret.key": "cluster-token-secret",
            "offsets.topic.replication.factor": 3, "default.replication.factor": 3,
            "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
            "min.insync.replicas": 2, **FAST_QUORUM_TIMING}


def write_properties(path, props):
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class _Cluster:
    """The nodes of either kind behind one face: ``kill(i)``, ``alive``, the ports."""

    def __init__(self, kind, root, ca, client_ports, controller_ports, files):
        self.kind, self.root, self.ca = kind, root, ca
        self.client_ports, self.controller_ports, self.files = client_ports, controller_ports, files
        self.alive = set(files)
        self.klog_nodes = {}
        self.kafka = None

    def start(self):
        if self.kind == "klog":
            cluster_id = new_cluster_id()
            for i, path in self.files.items():
                formatted = subprocess.run(broker_command() + ["format", "-t", cluster_id, "-c", str(path), *ADD_SCRAM],
                                           capture_output=True, text=True, timeout=60)
                assert formatted.returncode == 0, formatted.stderr
                listeners = read_properties(path)["listeners"]
                self.klog_nodes[i] = BrokerProcess(self.root / f"node-{i}", {"listeners": listeners},
                                                   properties_file=path, ready_re=re.compile(r"klog-broker started"))
            start_together(self.klog_nodes.values())
        else:
            from klog.testing.kafka import KafkaCluster, find_kafka_libs

            try:
                find_kafka_libs()
            except Exception as exc:  # noqa: BLE001 - any reason the jars cannot be found
                pytest.skip(f"Apache Kafka jars not available: {exc}")
            self.kafka = KafkaCluster.from_properties_files(self.root / "kafka", self.files, format_args=ADD_SCRAM,
                                                            probe_tls=ssl.create_default_context(cafile=self.ca.ca_file))
            self.kafka.start()
        return self

    def kill(self, i):
        self.alive.discard(i)
        if self.kind == "klog":
            self.klog_nodes[i].kill()
        else:
            self.kafka.kill(i)

    def close(self):
        if self.kafka is not None:
            self.kafka.close()
        for node in self.klog_nodes.values():
            node.terminate()
        for node in self.klog_nodes.values():
            node.stop()


# Apache Kafka's side runs in make test-long: three JVMs take about two minutes to start on the 2-core machine
@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"sasl-ssl-cluster-{request.param}")
    ca = CertificateAuthority(root / "pki")
    ids = (1, 2, 3)
    client_ports = {i: free_port() for i in ids}
    controller_ports = {i: free_port() for i in ids}
    files = {i: write_properties(root / f"node-{i}.properties",
                                 node_properties(i, root, ca, ca.issue(f"broker{i}"), client_ports[i],
                                                 controller_ports))
             for i in ids}
    nodes = _Cluster(request.param, root, ca, client_ports, controller_ports, files)
    try:
        yield nodes.start()
    finally:
        nodes.close()


def _conf(ports, ca, nodes_up):
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{ports[i]}" for i in nodes_up),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "app",
            "sasl.password": "app-secret", "ssl.ca.location": ca.ca_file}


def _leader(admin, topic):
    md = admin.list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader, md.topics[topic].partitions[0].isrs


def test_controller_listener_needs_a_login_and_cluster_action(cluster):
    """The controller listener is SASL_SSL: a plaintext client gets no answer; over TLS ApiVersions is answered
    before the login; a wrong password is refused SASL_AUTHENTICATION_FAILED and the connection closed; a user who
    logs in but is not a node (no ClusterAction) is refused CLUSTER_AUTHORIZATION_FAILED on the controller's
    requests; the nodes' own user is served."""
    port, ca = cluster.controller_ports[1], cluster.ca
    assert not answers_api_versions(port, timeout=5.0)
    assert answers_api_versions(port, tls=ssl.create_default_context(cafile=ca.ca_file), timeout=5.0)

    wrong = _SaslConnection(port, ca)
    assert wrong.login_plain("controller", "not-the-password") == ErrorCode.SASL_AUTHENTICATION_FAILED
    with pytest.raises((ConnectionError, OSError)):
        wrong.call(18, 0, {})
    wrong.close()

    intruder = _SaslConnection(port, ca)
    assert intruder.login_plain("intruder", "intruder-secret") == 0
    described = intruder.call(55, 2, DESCRIBE_QUORUM)
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, described
    heartbeat = intruder.call(63, 1, {"broker_id": 9, "broker_epoch": 1, "current_metadata_offset": 0,
                                      "want_fence": False, "want_shut_down": False})
    assert heartbeat.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, heartbeat
    intruder.close()

    member = _SaslConnection(cluster.controller_ports[_quorum_leader(cluster)], ca)   # only the leader describes
    assert member.login_plain("controller", "controller-secret") == 0
    described = member.call(55, 2, DESCRIBE_QUORUM)
    assert described.error_code == 0
    voters = described.topics[0].partitions[0].current_voters
    assert sorted(v.replica_id for v in voters) == [1, 2, 3]
    member.close()


def test_transactions_across_brokers_over_sasl_ssl(cluster):
    """The transaction coordinator reaches the other partitions' leaders (verify-only AddPartitionsToTxn,
    WriteTxnMarkers) over the SASL_SSL inter-broker listener: a read_committed consumer sees exactly the committed
    records of partitions led by different brokers."""
    ports, ca = cluster.client_ports, cluster.ca
    conf = _conf(ports, ca, cluster.alive)
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
    """A raw SASL_SSL connection to one node's listener, logged in with PLAIN or with a delegation token
    (SCRAM-SHA-512, tokenauth=true)."""

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
    ports, ca = cluster.client_ports, cluster.ca
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


DESCRIBE_QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def _quorum_leader(cluster):
    """The active controller, as DescribeQuorum on a live controller listener says (logged in as the nodes)."""
    deadline = time.monotonic() + 30
    while True:
        for i in sorted(cluster.alive):
            try:
                conn = _SaslConnection(cluster.controller_ports[i], cluster.ca)
                try:
                    if conn.login_plain("controller", "controller-secret") == 0:
                        part = conn.call(55, 2, DESCRIBE_QUORUM).topics[0].partitions[0]
                        if part.error_code == 0 and part.leader_id in cluster.alive:
                            return part.leader_id
                finally:
                    conn.close()
            except (OSError, ConnectionError, IndexError):
                pass
        assert time.monotonic() < deadline, "no active controller"
        time.sleep(0.5)


def test_sigkill_of_the_active_controller_loses_nothing_acknowledged(cluster):
    """SIGKILL the active controller, which also leads one of the topic's three partitions: the quorum elects
    another over the SASL_SSL controller listener, the partitions it led move to followers that fetched over the
    SASL_SSL inter-broker listener, and every record acknowledged with acks=all, before and after, is read back."""
    ports, ca = cluster.client_ports, cluster.ca
    conf = _conf(ports, ca, cluster.alive)
    admin = AdminClient(conf)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:   # the followers caught up over SASL_SSL
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(parts) == 3 and all(p.leader >= 0 and len(p.isrs) == 3 for p in parts.values()):
            break
        time.sleep(0.2)
    assert all(len(p.isrs) == 3 for p in parts.values()), "the followers did not fetch over SASL_SSL"
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    sent = [f"before-{n}".encode() for n in range(300)]
    for n, value in enumerate(sent):
        producer.produce(topic, value, partition=n % 3)
    assert producer.flush(30) == 0

    victim = _quorum_leader(cluster)
    led = [p.id for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values() if p.leader == victim]
    cluster.kill(victim)
    assert _quorum_leader(cluster) != victim
    conf = _conf(ports, ca, cluster.alive)
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    after = [f"after-{n}".encode() for n in range(300)]
    failed = []
    for n, value in enumerate(after):
        producer.produce(topic, value, partition=n % 3, on_delivery=lambda err, msg: err and failed.append(err))
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
    assert sorted(got) == sorted(sent + after), f"partitions led by the killed node: {led}"


def test_a_node_with_a_wrong_controller_password_stays_out_and_says_why(cluster, tmp_path):
    """A broker-only node whose controller JAAS config has a wrong password cannot log in to the controller
    listener: it never registers (the cluster's brokers stay 1-3), the controllers log the failed login naming the
    user and never the password, and the node logs that the controller refused its login. (klog's log lines; Kafka
    keeps such a node out too, with its own wording.)"""
    if cluster.kind != "klog":
        pytest.skip("the log lines checked are klog's")
    ca = cluster.ca
    port = free_port()
    path = write_properties(tmp_path / "node-4.properties",
                            node_properties(4, tmp_path, ca, ca.issue("broker4"), port, cluster.controller_ports,
                                            roles="broker", controller_password="wrong-secret"))
    node = BrokerProcess(tmp_path / "node-4", {"listeners": f"SASL_SSL://127.0.0.1:{port}"}, properties_file=path,
                         ready_re=re.compile(r"klog-broker started"))
    node.spawn()
    try:
        deadline = time.monotonic() + 30
        refused = re.compile(r"refused this node's login: SASL_AUTHENTICATION_FAILED \(PLAIN as 'controller'\)")
        while not refused.search(node.log_text()) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert refused.search(node.log_text()), node.log_text()[-3000:]
        assert "wrong-secret" not in node.log_text()
        logged = [cluster.klog_nodes[i].log_text() for i in cluster.alive]
        failed = re.compile(r"failed authentication from 127\.0\.0\.1:\d+ on controller listener CONTROLLER "
                            r"\(PLAIN\): user 'controller': wrong password")
        assert any(failed.search(text) for text in logged)
        assert not any("wrong-secret" in text for text in logged)
        admin = AdminClient(_conf(cluster.client_ports, ca, cluster.alive))
        assert sorted(admin.list_topics(timeout=10).brokers) == sorted(cluster.alive)
        assert "klog-broker started" not in node.log_text()
    finally:
        node.terminate()
        node.stop()


def test_ssl_controller_listener_takes_only_a_trusted_client_certificate(tmp_path):
    """An SSL controller listener with ssl.client.auth=required (mTLS instead of SASL): the node's broker registers
    with its own controller over it, a plaintext or certificate-less client gets no answer, a client with a
    certificate of the cluster's CA does."""
    ca = CertificateAuthority(tmp_path / "pki")
    cert = ca.issue("broker1")
    client_port, controller_port = free_port(), free_port()
    listeners = f"SASL_SSL://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}"
    props = {**node_properties(1, tmp_path, ca, cert, client_port, {1: controller_port}),
             "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
             "listener.name.controller.ssl.client.auth": "required",
             # the controller listener authorizes the certificate's principal: the node's is a super user
             "listener.name.controller.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/",
             "super.users": "User:broker;User:controller;User:app;User:broker1",
             "offsets.topic.replication.factor": 1, "default.replication.factor": 1,
             "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
             "min.insync.replicas": 1}
    path = write_properties(tmp_path / "node-1.properties", props)
    formatted = subprocess.run(broker_command() + ["format", "-t", new_cluster_id(), "-c", str(path), *ADD_SCRAM],
                               capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 0, formatted.stderr
    with BrokerProcess(tmp_path / "node-1", {"listeners": listeners}, properties_file=path,
                       ready_re=re.compile(r"klog-broker started")):   # started: registered over the listener
        assert not answers_api_versions(controller_port, timeout=5.0)
        assert not answers_api_versions(controller_port, tls=ssl.create_default_context(cafile=ca.ca_file),
                                        timeout=5.0)
        member = ssl.create_default_context(cafile=ca.ca_file)
        probe = ca.issue("probe")
        member.load_cert_chain(probe.cert_file, probe.key_file)
        assert answers_api_versions(controller_port, tls=member, timeout=5.0)

"""ACL management against a real klog-broker process with Kafka's StandardAuthorizer configured: Kafka's own
``kafka-acls`` (AclCommand from the jars), confluent-kafka's AdminClient, klog's client and ``klog acls`` all
create, list and delete the same ACLs (CreateAcls, DescribeAcls, DeleteAcls); without an authorizer the APIs
answer SECURITY_DISABLED as Kafka's do; denials are counted in the metrics."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter as CkAclBindingFilter
from confluent_kafka.admin import AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType

from klog.client import AclBinding, AclBindingFilter
from klog.client import AdminClient as KlogAdmin
from klog.client.errors import KafkaError
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool
from klog.testing.ports import free_port
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

ADMIN = CkAclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_ACL = AclBinding("cluster", "kafka-cluster", "User:ANONYMOUS", "all")
EVERY = CkAclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, metrics_port):
    # every client is User:ANONYMOUS until SASL: it may manage ACLs while the cluster has none (allow everyone),
    # then through its own ALL on the cluster (the ``clean`` fixture)
    props = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin",
             "allow.everyone.if.no.acl.found": "true", "klog.metrics.listener": f"127.0.0.1:{metrics_port}"}
    with BrokerProcess(tmp_path_factory.mktemp("acls"), props) as proc:
        yield proc


@pytest.fixture()
def clean(broker):
    """Every test starts with one ACL (ANONYMOUS may do ALL on the cluster) and ends without any."""
    admin = KlogAdmin(broker.bootstrap_servers)
    try:
        admin.delete_acls([AclBindingFilter()])
        admin.create_acls([ADMIN_ACL])
        yield admin
        admin.delete_acls([AclBindingFilter()])
    finally:
        admin.close()


def test_confluent_admin_creates_describes_and_deletes(broker, clean):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    acls = [CkAclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW),
            CkAclBinding(ResourceType.TOPIC, "pay", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1",
                         AclOperation.ALL, AclPermissionType.DENY),
            CkAclBinding(ResourceType.GROUP, "app", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        assert future.result(15) is None
    assert sorted(map(str, admin.describe_acls(EVERY).result(15))) == sorted(map(str, acls + [ADMIN]))
    # MATCH: the ACLs that apply to topic "payments" (the prefixed one), not the literal "orders"
    match = CkAclBindingFilter(ResourceType.TOPIC, "payments", ResourcePatternType.MATCH, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match).result(15) == [acls[1]]
    deleted = admin.delete_acls([CkAclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                    None, AclOperation.ANY, AclPermissionType.ANY)])
    assert sorted(map(str, list(deleted.values())[0].result(15))) == sorted(map(str, [acls[0], acls[2]]))
    assert sorted(map(str, admin.describe_acls(EVERY).result(15))) == sorted(map(str, [acls[1], ADMIN]))
    bad = CkAclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="The only valid name for the CLUSTER resource is kafka-cluster"):
        admin.create_acls([bad])[bad].result(15)


@pytest.mark.skipif(not java_available() or kafka_libs_dir() is None, reason="needs java and the Kafka jars")
def test_kafka_acls_cli_works_unchanged(broker, clean):
    servers = broker.bootstrap_servers

    def acls(*args: str) -> str:
        done = run_kafka_tool(ACL_COMMAND, "--bootstrap-server", servers, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
         "--topic", "orders")
    acls("--add", "--allow-principal", "User:app", "--consumer", "--topic", "events", "--group", "app")
    acls("--add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "pay",
         "--resource-pattern-type", "prefixed")
    acls("--add", "--allow-principal", "User:app", "--producer", "--topic", "out", "--transactional-id", "tx")
    listed = acls("--list", "--topic", "orders")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    got = {(str(b.resource_type), b.resource_name, str(b.pattern_type), b.principal, str(b.operation),
            str(b.permission_type)) for b in clean.describe_acls()}
    assert {("topic", "orders", "literal", "User:alice", "read", "allow"),
            ("topic", "orders", "literal", "User:alice", "describe", "allow"),
            ("topic", "events", "literal", "User:app", "read", "allow"),
            ("group", "app", "literal", "User:app", "read", "allow"),
            ("topic", "pay", "prefixed", "User:bob", "all", "deny"),
            ("transactional_id", "tx", "literal", "User:app", "write", "allow"),
            ("topic", "out", "literal", "User:app", "create", "allow")} <= got
    acls("--remove", "--force", "--topic", "orders")
    assert not [b for b in clean.describe_acls() if b.resource_name == "orders"]
    assert "User:bob" in acls("--list", "--principal", "User:bob")


def klog_cli(broker, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "klog.cli", "acls", *args, "--bootstrap-server",
                           broker.bootstrap_servers], capture_output=True, text=True, timeout=90,
                          env={**os.environ})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_klog_acls_command(broker, clean):
    out = klog_cli(broker, "add", "--allow-principal", "User:alice", "--operation", "read", "--operation",
                   "describe-configs", "--topic", "orders", "--allow-host", "10.1.1.1")
    assert "added 2 ACL(s)" in out
    klog_cli(broker, "add", "--allow-principal", "User:app", "--consumer", "--topic", "events", "--group", "app")
    klog_cli(broker, "add", "--deny-principal", "User:bob", "--operation", "all", "--topic", "pay",
             "--resource-pattern-type", "prefixed")
    listed = klog_cli(broker, "list", "--topic", "orders")
    assert "User:alice" in listed and "10.1.1.1" in listed and "DESCRIBE_CONFIGS" in listed
    assert "User:app" not in listed
    everything = klog_cli(broker, "list")
    for word in ("User:app", "GROUP", "PREFIXED", "DENY"):
        assert word in everything
    assert "removed 1 ACL(s)" in klog_cli(broker, "remove", "--allow-principal", "User:alice", "--operation",
                                          "read", "--allow-host", "10.1.1.1", "--topic", "orders")
    assert [b.operation for b in clean.describe_acls(AclBindingFilter("topic", "orders"))] == ["describe_configs"]
    assert "removed 3 ACL(s)" in klog_cli(broker, "remove", "--topic", "events", "--group", "app")


def test_klog_client_errors_name_the_refused_acl(broker, clean):
    with pytest.raises(KafkaError, match="Invalid empty resource name"):
        clean.create_acls([AclBinding("topic", "", "User:alice", "read")])
    with pytest.raises(ValueError, match="operation 'jump' is not one of"):
        clean.create_acls([AclBinding("topic", "t", "User:alice", "jump")])


def test_without_an_authorizer_acl_apis_answer_security_disabled(tmp_path):
    with BrokerProcess(tmp_path, {}) as plain:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        binding = CkAclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
                               AclOperation.READ, AclPermissionType.ALLOW)
        with pytest.raises(KafkaException, match="No Authorizer is configured"):
            admin.create_acls([binding])[binding].result(15)
        with WireClient(plain.host, plain.port) as wire:
            # (librdkafka's describe_acls returns [] for this answer: the wire shows it)
            answer = wire.request(ApiKey.DESCRIBE_ACLS, 2, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            assert (answer.error_code, answer.error_message) == (ErrorCode.SECURITY_DISABLED,
                                                                 "No Authorizer is configured on the broker")
            # and everything else is allowed, as before ACLs existed
            answer = wire.request(ApiKey.METADATA, 12, {"topics": None, "include_cluster_authorized_operations": True})
            assert answer.cluster_authorized_operations != 0


def test_denials_are_counted_in_the_metrics(broker, clean, metrics_port):
    """A topic with only a DENY READ for ANONYMOUS: describing it is refused (no ALLOW, and the topic has ACLs,
    so allow.everyone.if.no.acl.found does not apply) and counted; a DENY READ implies no denied DESCRIBE."""
    clean.create_acls([AclBinding("topic", "secret", "User:ANONYMOUS", "read", "deny")])
    with WireClient(broker.host, broker.port) as wire:
        answer = wire.request(ApiKey.METADATA, 12, {"topics": [{"name": "secret"}], "allow_auto_topic_creation": False})
        assert answer.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        answer = wire.request(ApiKey.METADATA, 12, {"topics": [{"name": "open"}], "allow_auto_topic_creation": False})
        assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION   # no ACL: everyone may
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    counted = [line for line in text.splitlines()
               if line.startswith("klog_authorizer_denied_total{") and 'resource_type="TOPIC"' in line
               and 'operation="DESCRIBE"' in line]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 1, text


# ---- real users (SASL/PLAIN): the same ACLs, told apart by principal ------------------------------------------

SASL_USERS = 'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret"'
SASL_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
             f'password="admin-secret" {SASL_USERS};')


def test_sasl_users_are_authorized_by_their_own_acls(tmp_path):
    """admin (a super user) grants alice Write and Read on a topic and Read on a group; alice produces and
    consumes with confluent-kafka; bob, with no ACL, is refused and sees no topic; ANONYMOUS on the PLAINTEXT
    listener neither."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import NewTopic

    node = BrokerProcess(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": SASL_JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin", "num.partitions": 1,
        "offsets.topic.num.partitions": 1})
    with node:
        line = next(ln for ln in node.lines if "listening on" in ln)
        port = dict(re.findall(r"(\w+)://[^:,\s]+:(\d+)", line))["SASL_PLAINTEXT"]

        def conf(user: str, **extra: object) -> dict[str, object]:
            return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
                    "socket.timeout.ms": 10000, **extra}

        admin = AdminClient(conf("admin"))
        admin.create_topics([NewTopic("alice-topic", 1, 1)])["alice-topic"].result(30)
        grants = [CkAclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                               AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
        grants.append(CkAclBinding(ResourceType.GROUP, "alice-group", ResourcePatternType.LITERAL, "User:alice",
                                   "*", AclOperation.READ, AclPermissionType.ALLOW))
        for future in admin.create_acls(grants).values():
            future.result(15)

        producer = Producer(conf("alice", **{"enable.idempotence": True}))   # Write on a topic suffices
        for i in range(5):
            producer.produce("alice-topic", value=b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer(conf("alice", **{"group.id": "alice-group", "auto.offset.reset": "earliest"}))
        consumer.subscribe(["alice-topic"])
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append(message.value())
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        assert got == [b"%d" % i for i in range(5)]

        assert "alice-topic" in AdminClient(conf("alice")).list_topics(timeout=10).topics
        assert "alice-topic" not in AdminClient(conf("bob")).list_topics(timeout=10).topics
        errors: list[object] = []
        bob = Producer(conf("bob", **{"message.timeout.ms": 5000, "enable.idempotence": False}))
        bob.produce("alice-topic", value=b"x", on_delivery=lambda err, msg: errors.append(err))
        bob.flush(15)
        assert errors and errors[0] is not None and "TOPIC_AUTHORIZATION_FAILED" in str(errors[0].name()), errors
        with WireClient("127.0.0.1", node.port) as anonymous:   # the PLAINTEXT listener: User:ANONYMOUS
            answer = anonymous.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            assert [t.name for t in answer.topics] == []


# ---- a 3-node cluster: ACLs forwarded to the controller, applied by every broker --------------------------------

def test_acls_reach_every_broker_of_a_cluster(tmp_path):
    """CreateAcls sent to a node that is not the active controller is forwarded; every broker then enforces and
    lists the ACLs (they are metadata records); a restarted node has them from its metadata log."""
    from klog.testing.cluster import KlogCluster

    def acl(op: int, perm: int, host: str) -> dict[str, object]:
        return {"resource_type": 2, "resource_name": "locked", "resource_pattern_type": 3,
                "principal": "User:ANONYMOUS", "host": host, "operation": op, "permission_type": perm}

    def code(cluster: KlogCluster, node: int, source: str) -> int:
        with WireClient("127.0.0.1", cluster.client_ports[node], source_host=source) as wire:
            return wire.request(ApiKey.METADATA, 12, {"topics": [{"name": "locked"}],
                                                      "allow_auto_topic_creation": False}).topics[0].error_code

    def until(check) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, "not reached in time"
            time.sleep(0.2)

    props = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    with KlogCluster(tmp_path, 3, properties=props) as cluster:
        cluster.wait_for_brokers()
        controller = cluster.wait_for_controller()
        other = next(n for n in cluster.node_ids if n != controller)
        assert cluster.create_topic("locked", 1, 3, via=other)[0] == ErrorCode.NONE
        with cluster.wire(other) as wire:   # from 127.0.0.1: Write (and so Describe) there; Read denied elsewhere
            answer = wire.request(ApiKey.CREATE_ACLS, 2, {"creations": [acl(4, 3, "127.0.0.1"),
                                                                        acl(3, 2, "127.0.0.2")]})
            assert [r.error_code for r in answer.results] == [0, 0]
        for node in cluster.node_ids:
            until(lambda: code(cluster, node, "127.0.0.2") == ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            assert code(cluster, node, "127.0.0.1") == ErrorCode.NONE
        cluster.restart(other)
        cluster.wait_for_brokers()
        until(lambda: code(cluster, other, "127.0.0.2") == ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        with cluster.wire(other) as wire:
            listed = wire.request(ApiKey.DESCRIBE_ACLS, 2, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        assert [(r.resource_name, len(r.acls)) for r in listed.resources] == [("locked", 2)]

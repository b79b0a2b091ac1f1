"""The controller listener authorizes as Kafka 4.3's ``ControllerApis`` on every security protocol, checked on klog
and on Apache Kafka 4.3.1 from the same properties.

PLAINTEXT: every connection is ``User:ANONYMOUS``, so the test tells clients apart by host (ACLs name hosts): a
controller-only node with the StandardAuthorizer, no super user and ``allow.everyone.if.no.acl.found=true``; the
first ACL (made while the Cluster has none, so anyone may) gives ANONYMOUS from 127.0.0.2 everything on the Cluster,
and from then on ANONYMOUS from 127.0.0.1 may do only what its own ACLs allow: BrokerHeartbeat, Envelope and
AddRaftVoter are refused CLUSTER_AUTHORIZATION_FAILED, DescribeQuorum too until it has Describe,
``kafka-metadata-quorum --bootstrap-controller`` fails until it has Alter (DescribeCluster on a controller needs
Alter). SSL with client certificates: the principal is the certificate's after ``ssl.principal.mapping.rules``, an
ACL for ``User:alice`` lets a certificate ``CN=alice`` in. And a cluster with an authorizer and a PLAINTEXT
controller listener forms and serves with ``super.users=User:ANONYMOUS``, as Kafka's documentation says it must.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import decode_response, encode_request
from klog.protocol.errors import ErrorCode
from klog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from klog.security.principal import KafkaPrincipal, serialize_principal
from klog.testing.cluster import CONTROLLER_ID_BASE, cluster_of

pytestmark = pytest.mark.timeout(300)

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CONTROLLER = CONTROLLER_ID_BASE + 1
CLIENT_HOST, ADMIN_HOST = "127.0.0.1", "127.0.0.2"
CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
#: how long an ACL change may take to reach the controller's authorizer (it applies it from its metadata log)
PROPAGATION_S = 20.0
QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
_SIZE = struct.Struct(">i")


def call(port: int, api_key: int, version: int, body: dict[str, Any], *, source: str = CLIENT_HOST,
         tls: ssl.SSLContext | None = None) -> Any:
    """One request to 127.0.0.1:``port`` from ``source``: its decoded answer, None when the connection closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as raw:
        sock = tls.wrap_socket(raw, server_hostname="localhost") if tls is not None else raw
        sock.sendall(encode_request(api_key, version, 7, "authz-test", body))
        head = _read(sock, _SIZE.size)
        if head is None:
            return None
        frame = _read(sock, _SIZE.unpack(head)[0])
        if frame is None:
            return None
        correlation, answer = decode_response(api_key, version, frame)
        assert correlation == 7
        return answer


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except (ConnectionResetError, ssl.SSLError):
            return None
        if not chunk:
            return None
        data += chunk
    return data


def heartbeat() -> tuple[int, int, dict[str, Any]]:
    return 63, 1, {"broker_id": 1, "broker_epoch": 5, "current_metadata_offset": 0, "want_fence": True,
                   "want_shut_down": False, "offline_log_dirs": []}


def envelope() -> tuple[int, int, dict[str, Any]]:
    inner = encode_request(19, 5, 11, "someone", {"topics": [{"name": "enveloped", "num_partitions": 1,
                                                              "replication_factor": 1, "assignments": [],
                                                              "configs": []}],
                                                  "timeout_ms": 5000, "validate_only": False})[_SIZE.size:]
    return 58, 0, {"request_data": inner, "request_principal": serialize_principal(KafkaPrincipal("User", "admin")),
                   "client_host_address": bytes([127, 0, 0, 1])}


def add_raft_voter() -> tuple[int, int, dict[str, Any]]:
    return 80, 0, {"cluster_id": None, "timeout_ms": 5000, "voter_id": 150, "voter_directory_id": uuid.uuid4(),
                   "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}]}


def describe_quorum() -> tuple[int, int, dict[str, Any]]:
    return 55, 1, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def create_acl(principal: str, host: str, operation: int) -> tuple[int, int, dict[str, Any]]:
    return 30, 1, {"creations": [{"resource_type": ResourceType.CLUSTER, "resource_name": "kafka-cluster",
                                  "resource_pattern_type": PatternType.LITERAL, "principal": principal,
                                  "host": host, "operation": operation,
                                  "permission_type": AclPermissionType.ALLOW}]}


def grant(port: int, principal: str, host: str, operation: int, **kw: Any) -> None:
    # a controller serves the admin requests once its quorum has a cluster id, soon after it starts
    answer = eventually(lambda: call(port, *create_acl(principal, host, operation), **kw), lambda a: a is not None)
    assert answer is not None and [r.error_code for r in answer.results] == [0], answer


def eventually(ask: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    """Ask until the answer is ``done`` (an ACL change reached the authorizer), at most PROPAGATION_S."""
    deadline = time.monotonic() + PROPAGATION_S
    while True:
        answer = ask()
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.3)


def error_code(answer: Any) -> int | None:
    """The top-level error code, None for a closed connection."""
    return None if answer is None else int(answer.error_code)


def quorum_tool(port: int, tmp_path: Path) -> Any:
    from klog.testing.kafka_tools import run_kafka_tool

    config = tmp_path / "tool.properties"
    config.write_text("request.timeout.ms=10000\ndefault.api.timeout.ms=20000\n")
    return run_kafka_tool(QUORUM_COMMAND, "--bootstrap-controller", f"127.0.0.1:{port}", "--command-config",
                          str(config), "describe", "--status", timeout=120)


def raft_hello(port: int) -> None:
    """Open klog's Raft transport (Kafka's Vote, BeginQuorumEpoch, Fetch) as a peer 150 from 127.0.0.1; the member
    closes it, for want of ClusterAction or, once that is allowed, because no voter 150 exists."""
    from klog.controller.quorum import RAFT_PREAMBLE

    with socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(CLIENT_HOST, 0)) as sock:
        sock.sendall(RAFT_PREAMBLE + struct.pack(">i", 150))
        assert sock.recv(1) == b""


@pytest.fixture(params=["klog", "kafka"])
def plaintext_controller(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A controller-only node with the StandardAuthorizer and no super user."""
    props = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    with cluster_of(request.param, tmp_path / "nodes", 0, controllers=1, properties=props) as started:
        yield started


def _log_count(cluster: Any, text: str) -> int:
    """How many of the controller's log lines so far hold ``text``, once one does (its log is read as it comes)."""
    return int(eventually(lambda: sum(text in line for line in cluster.log_lines(CONTROLLER)), lambda n: n > 0))


#: the controller's log lines of a Raft hello refused for want of ClusterAction, and of one let past it
REFUSED_HELLO = "refused node 150's raft connection"
UNKNOWN_PEER = "bad preamble or node id 150"


def test_a_plaintext_controller_listener_authorizes_anonymous_per_api(plaintext_controller: Any,
                                                                      tmp_path: Path) -> None:
    cluster = plaintext_controller
    port = cluster.controller_ports[CONTROLLER]
    # no ACL on the Cluster yet: anyone may create one (allow.everyone.if.no.acl.found); this one makes 127.0.0.2
    # the admin host, and leaves ANONYMOUS from 127.0.0.1 with nothing
    grant(port, "User:ANONYMOUS", ADMIN_HOST, AclOperation.ALL)
    assert error_code(eventually(lambda: call(port, *describe_quorum()), lambda a: error_code(a) == CAF)) == CAF
    # no ClusterAction: the nodes' requests and envelopes are refused; no Alter: voter changes too
    assert error_code(call(port, *heartbeat())) == CAF
    assert error_code(call(port, *envelope())) == CAF
    assert error_code(call(port, *add_raft_voter())) == CAF
    assert error_code(call(port, *describe_quorum())) == CAF
    refused = quorum_tool(port, tmp_path)
    assert refused.returncode != 0, refused.stdout
    if cluster.kind == "klog":   # the Raft transport too
        raft_hello(port)
        assert _log_count(cluster, REFUSED_HELLO) == 1
    # Describe on the Cluster: DescribeQuorum is answered, the rest still refused
    grant(port, "User:ANONYMOUS", CLIENT_HOST, AclOperation.DESCRIBE, source=ADMIN_HOST)
    described = eventually(lambda: call(port, *describe_quorum()), lambda a: error_code(a) != CAF)
    assert error_code(described) == 0 and described.topics[0].partitions[0].leader_id == CONTROLLER
    assert error_code(call(port, *heartbeat())) == CAF
    assert error_code(call(port, *add_raft_voter())) == CAF
    # Alter: kafka-metadata-quorum --bootstrap-controller works (DescribeCluster, then DescribeQuorum)
    grant(port, "User:ANONYMOUS", CLIENT_HOST, AclOperation.ALTER, source=ADMIN_HOST)
    eventually(lambda: call(port, *add_raft_voter()), lambda a: error_code(a) != CAF)
    status = quorum_tool(port, tmp_path)
    assert status.returncode == 0, status.stderr
    assert "LeaderId:" in status.stdout and str(CONTROLLER) in status.stdout
    assert error_code(call(port, *add_raft_voter())) != CAF
    assert error_code(call(port, *heartbeat())) == CAF
    # ClusterAction: heartbeats and envelopes get past the authorization (answered for what they say)
    grant(port, "User:ANONYMOUS", CLIENT_HOST, AclOperation.CLUSTER_ACTION, source=ADMIN_HOST)
    assert error_code(eventually(lambda: call(port, *heartbeat()), lambda a: error_code(a) != CAF)) != CAF
    assert error_code(call(port, *envelope())) not in (CAF, None)
    if cluster.kind == "klog":
        raft_hello(port)
        assert _log_count(cluster, UNKNOWN_PEER) == 1 and _log_count(cluster, REFUSED_HELLO) == 1


@pytest.fixture(params=["klog", "kafka"])
def ssl_controller(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Any]]:
    """(port, CA) of a controller-only node whose controller listener is SSL with client certificates; the node's
    own certificate (CN=controller) maps to the super user User:controller."""
    from klog.testing.certs import CertificateAuthority

    ca = CertificateAuthority(tmp_path / "pki")
    node_cert = ca.issue("controller")
    props = {"authorizer.class.name": AUTHORIZER, "super.users": "User:controller",
             "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT",
             "listener.name.controller.ssl.client.auth": "required",
             "listener.name.controller.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": node_cert.keystore_file,
             "ssl.truststore.type": "PEM", "ssl.truststore.location": ca.ca_file}
    probe = _client_tls(ca, "controller")
    with cluster_of(request.param, tmp_path / "nodes", 0, controllers=1, properties=props,
                    **({"controller_probe_tls": probe} if request.param == "kafka" else {})) as started:
        yield started.controller_ports[CONTROLLER], ca


def _client_tls(ca: Any, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.ca_file)
    cert = ca.issue(name)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    return context


def test_an_ssl_controller_listener_authorizes_the_certificates_principal(ssl_controller: tuple[int, Any]) -> None:
    port, ca = ssl_controller
    alice, node = _client_tls(ca, "alice"), _client_tls(ca, "controller")
    # CN=alice maps to User:alice, who has no ACL: refused; the node's certificate is a super user's
    assert error_code(call(port, *describe_quorum(), tls=alice)) == CAF
    assert error_code(call(port, *heartbeat(), tls=alice)) == CAF
    assert error_code(call(port, *describe_quorum(), tls=node)) == 0
    # an ACL for User:alice (the mapped name, not the certificate's DN) lets her describe the quorum
    grant(port, "User:alice", "*", AclOperation.DESCRIBE, tls=node)
    assert error_code(eventually(lambda: call(port, *describe_quorum(), tls=alice),
                                 lambda a: error_code(a) != CAF)) == 0
    assert error_code(call(port, *heartbeat(), tls=alice)) == CAF


@pytest.fixture(params=["klog", "kafka"])
def anonymous_super_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    props = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS",
             "offsets.topic.replication.factor": 1, "default.replication.factor": 1}
    with cluster_of(request.param, tmp_path / "nodes", 1, controllers=1, properties=props) as started:
        yield started


def test_a_cluster_with_an_authorizer_forms_on_a_plaintext_controller_listener_with_anonymous_super(
        anonymous_super_cluster: Any) -> None:
    """The broker registered over the PLAINTEXT controller listener (it started) and its controller requests are
    decided: a topic is created through it and written."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{anonymous_super_cluster.client_ports[1]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("formed", 1, 1)])["formed"].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("formed", b"one")
    assert producer.flush(30) == 0


def describe_controller_configs() -> tuple[int, int, dict[str, Any]]:
    return 32, 4, {"resources": [{"resource_type": 4, "resource_name": str(CONTROLLER),
                                  "configuration_keys": ["node.id"]}],
                   "include_synonyms": False, "include_documentation": False}


def resource_error(answer: Any) -> int | None:
    """The error code of DescribeConfigs' one resource, None for a closed connection."""
    return None if answer is None else int(answer.results[0].error_code)


def test_a_controllers_describe_configs_needs_describe_configs_on_the_cluster(plaintext_controller: Any) -> None:
    port = plaintext_controller.controller_ports[CONTROLLER]
    grant(port, "User:ANONYMOUS", ADMIN_HOST, AclOperation.ALL)
    # ANONYMOUS from 127.0.0.1 has no ACL: its resource is refused (Kafka's ConfigHelper), the admin host's answered
    refused = eventually(lambda: call(port, *describe_controller_configs()), lambda a: resource_error(a) == CAF)
    assert resource_error(refused) == CAF
    assert resource_error(call(port, *describe_controller_configs(), source=ADMIN_HOST)) == 0
    grant(port, "User:ANONYMOUS", CLIENT_HOST, AclOperation.DESCRIBE_CONFIGS, source=ADMIN_HOST)
    described = eventually(lambda: call(port, *describe_controller_configs()), lambda a: resource_error(a) == 0)
    assert resource_error(described) == 0
    assert [(c.name, c.value) for c in described.results[0].configs] == [("node.id", str(CONTROLLER))]

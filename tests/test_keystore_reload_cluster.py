"""A keystore reloaded on one node of a 3-node cluster: IncrementalAlterConfigs of broker 2's
``listener.name.ssl.ssl.keystore.location`` goes to broker 2 (the admin client sends a broker's resource to that
broker), which checks the new keystore before the request reaches the active controller (forwarded when another
node leads): one of another subject is refused with INVALID_REQUEST, a renewed one is written and then served
by node 2's SSL listener only. The same test runs on a klog cluster and on an Apache Kafka 4.x cluster started from
the same server.properties files (the Kafka side under ``long``)."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import time

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402
from cryptography import x509  # noqa: E402

from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.controller_quorum import FAST_QUORUM_TIMING  # noqa: E402
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs, read_properties  # noqa: E402
from klog.testing.ports import free_port  # noqa: E402
from klog.testing.process import BrokerProcess, start_together  # noqa: E402

KEY = "listener.name.ssl.ssl.keystore.location"
IDS = (1, 2, 3)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"keystore-cluster-{request.param}")
    ca = CertificateAuthority(root / "pki")
    stores = {}
    for i in IDS:
        stores[i] = str(root / f"broker{i}-first.pem")
        shutil.copy(ca.issue(f"broker{i}").keystore_file, stores[i])
    stores["renewed"] = str(root / "broker2-renewed.pem")
    shutil.copy(ca.issue("broker2").keystore_file, stores["renewed"])
    stores["other"] = str(root / "impostor.pem")
    shutil.copy(ca.issue("impostor").keystore_file, stores["other"])
    ports = {i: (free_port(), free_port(), free_port()) for i in IDS}   # PLAINTEXT, SSL, CONTROLLER
    voters = ",".join(f"{i}@127.0.0.1:{p[2]}" for i, p in ports.items())
    files = {}
    for i, (plain, tls, controller) in ports.items():
        # PLAINTEXT the last client listener: where KafkaCluster probes that a node is up
        listeners = f"SSL://127.0.0.1:{tls},PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller}"
        props = {"process.roles": "broker,controller", "node.id": i, "controller.quorum.voters": voters,
                 "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
                 "listeners": listeners, "log.dirs": str(root / f"node-{i}"), "ssl.keystore.type": "PEM",
                 KEY: stores[i], **FAST_QUORUM_TIMING}
        files[i] = root / f"node-{i}.properties"
        files[i].write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    if request.param == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        with KafkaCluster.from_properties_files(root / "kafka", files, heap="384m"):
            yield ports, ca, stores
        return
    nodes = {i: BrokerProcess(root / f"node-{i}", {"listeners": read_properties(path)["listeners"]},
                              properties_file=path, ready_re=re.compile(r"klog-broker started"))
             for i, path in files.items()}
    try:
        start_together(nodes.values())
        yield ports, ca, stores
    finally:
        for node in nodes.values():
            node.terminate()
        for node in nodes.values():
            node.stop()


def _served_serial(port: int, ca: CertificateAuthority) -> int:
    context = ssl.create_default_context(cafile=ca.ca_file)
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="127.0.0.1") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def _serial(path: str) -> int:
    return x509.load_pem_x509_certificate(open(path, "rb").read()).serial_number


def _alter(bootstrap: str, broker: int, value: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker), incremental_configs=[
        ConfigEntry(KEY, value, incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([resource])[resource].result(60)
    except Exception as exc:   # KafkaException carrying the KafkaError
        return exc.args[0].code(), exc.args[0].str()
    return 0, ""


def test_one_nodes_keystore_is_checked_by_that_node_and_then_served_by_it_alone(cluster):
    ports, ca, stores = cluster
    bootstrap = ",".join(f"127.0.0.1:{p[0]}" for p in ports.values())
    code, message = _alter(bootstrap, 2, stores["other"])
    assert code == ErrorCode.INVALID_REQUEST and "DistinguishedName does not match" in message, message
    assert _alter(bootstrap, 2, stores["renewed"]) == (0, "")
    deadline = time.monotonic() + 30
    while _served_serial(ports[2][1], ca) != _serial(stores["renewed"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _served_serial(ports[2][1], ca) == _serial(stores["renewed"])
    for i in (1, 3):
        assert _served_serial(ports[i][1], ca) == _serial(stores[i])

"""A certificate authority rotated on a running 3-node cluster, through dynamic configs only, as Kafka's operators
do it: every listener is TLS, the inter-broker (INTERNAL) and controller listeners with client certificates
required, and each node's listeners move, by IncrementalAlterConfigs of its own broker resource
(``listener.name.<l>.ssl.truststore.location`` / ``ssl.keystore.location``), from certificates of the old CA to
certificates of a new one:

1. every listener trusts both CAs;
2. every listener's keystore holds a certificate of the new CA (same subject and names);
3. every listener trusts the new CA only: the old CA is removed.

Each step is observed on the listeners themselves (a client certificate of the new CA admitted, the new CA's
server certificate served, the old CA's client certificate refused), the controller listener included. Then the
nodes' own outgoing connections must present the new certificates: a node restarted with the new files (trusting
the new CA only) rejoins the quorum (the other voters' Raft connections reach it), registers, and leads a
partition whose followers, the other two nodes, fetch from it (acks=all with three in-sync replicas), while
nothing written before is lost."""

from __future__ import annotations

import re
import ssl
import time
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.controller_quorum import FAST_QUORUM_TIMING  # noqa: E402
from klog.testing.kafka import answers_api_versions  # noqa: E402
from klog.testing.ports import free_port  # noqa: E402
from klog.testing.process import BrokerProcess, start_together  # noqa: E402

IDS = (1, 2, 3)
LISTENERS = ("internal", "external", "controller")


def _properties(i, root, ports, keystore, truststore):
    voters = ",".join(f"{n}@127.0.0.1:{ports[n]['controller']}" for n in IDS)
    return {"process.roles": "broker,controller", "node.id": i, "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "INTERNAL",
            "listeners": ",".join(f"{name.upper()}://127.0.0.1:{ports[i][name]}" for name in LISTENERS),
            "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL,CONTROLLER:SSL",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": truststore,
            "log.dirs": str(root / f"node-{i}"), "offsets.topic.replication.factor": 3,
            "default.replication.factor": 3, "min.insync.replicas": 2, **FAST_QUORUM_TIMING}


def _write(path, props):
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls-rotation")
    old, new = CertificateAuthority(root / "old-ca", "old CA"), CertificateAuthority(root / "new-ca", "new CA")
    both = root / "both-cas.pem"
    both.write_text(old.pem + new.pem)
    ports = {i: {name: free_port() for name in LISTENERS} for i in IDS}
    files = {i: _write(root / f"node-{i}.properties",
                       _properties(i, root, ports, old.issue(f"broker{i}").keystore_file, old.ca_file))
             for i in IDS}
    nodes = {i: BrokerProcess(root / f"node-{i}", {"listeners": _properties(i, root, ports, "", "")["listeners"]},
                              properties_file=files[i], ready_re=re.compile(r"klog-broker started"))
             for i in IDS}
    try:
        start_together(nodes.values())
        yield {"root": root, "old": old, "new": new, "both": str(both), "ports": ports, "nodes": nodes,
               "files": files}
    finally:
        for node in nodes.values():
            node.terminate()
        for node in nodes.values():
            node.stop()


def _answers(port, trusted, cert=None):
    """True when a TLS client trusting ``trusted`` (a CA file), presenting ``cert`` (an Issued), gets an answer to
    ApiVersions on ``port``; False when the handshake or the answer fails."""
    context = ssl.create_default_context(cafile=trusted)
    if cert is not None:
        context.load_cert_chain(cert.cert_file, cert.key_file)
    return answers_api_versions(port, tls=context, timeout=5.0)


def _eventually(check, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _client(c, nodes=IDS):
    return {"bootstrap.servers": ",".join(f"127.0.0.1:{c['ports'][i]['external']}" for i in nodes),
            "security.protocol": "SSL", "ssl.ca.location": c["both"]}


def _alter(c, node, settings):
    """IncrementalAlterConfigs of broker ``node``'s resource (the admin client sends it to that broker)."""
    admin = AdminClient(_client(c))
    resource = ConfigResource("broker", str(node), incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in settings.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


def _each_listener(key, value):
    return {f"listener.name.{name}.{key}": value for name in LISTENERS}


@pytest.mark.long
def test_a_ca_rotation_through_dynamic_configs_keeps_every_connection_working(cluster):
    c = cluster
    old, new, ports = c["old"], c["new"], c["ports"]
    topic = f"before-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_client(c))
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = Producer({**_client(c), "acks": "all", "enable.idempotence": True})
    before = [f"before-{n}".encode() for n in range(300)]
    for n, value in enumerate(before):
        producer.produce(topic, value, partition=n % 3)
    assert producer.flush(30) == 0

    old_client, new_client = old.issue("probe-old"), new.issue("probe-new")
    mtls = ("internal", "controller")
    for i in IDS:   # at the start: only the old CA's certificates
        for name in mtls:
            assert _answers(ports[i][name], old.ca_file, old_client)
            assert not _answers(ports[i][name], old.ca_file, new_client)

    # 1. every listener trusts both CAs
    for i in IDS:
        _alter(c, i, _each_listener("ssl.truststore.location", c["both"]))
    for i in IDS:
        for name in mtls:
            _eventually(lambda: _answers(ports[i][name], old.ca_file, new_client),
                        f"node {i}'s {name} listener does not admit a certificate of the new CA")

    # 2. every listener serves a certificate of the new CA (same subject and names as the old one)
    for i in IDS:
        _alter(c, i, _each_listener("ssl.keystore.location", new.issue(f"broker{i}").keystore_file))
    for i in IDS:
        for name in LISTENERS:
            _eventually(lambda: _answers(ports[i][name], new.ca_file, new_client),
                        f"node {i}'s {name} listener does not serve the new CA's certificate")

    # 3. the old CA is removed
    for i in IDS:
        _alter(c, i, _each_listener("ssl.truststore.location", new.ca_file))
    for i in IDS:
        for name in mtls:
            _eventually(lambda: not _answers(ports[i][name], new.ca_file, old_client),
                        f"node {i}'s {name} listener still admits a certificate of the removed CA")
            assert _answers(ports[i][name], new.ca_file, new_client)

    # The nodes' own connections: node 3 restarts from files of the new CA only (as an operator writes the
    # rotation into server.properties); every connection to it is new and must present a certificate of the new CA
    nodes = c["nodes"]
    nodes[3].kill()
    props = _properties(3, c["root"], ports, new.issue("broker3").keystore_file, new.ca_file)
    _write(c["files"][3], props)
    nodes[3].start()   # ready once it caught up with the quorum over the controller listener and registered

    led = f"led-by-3-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_client(c))
    admin.create_topics([NewTopic(led, 1, replica_assignment=[[3, 1, 2]],
                                  config={"min.insync.replicas": "3"})])[led].result(30)

    def three_in_sync():
        part = admin.list_topics(led, timeout=10).topics[led].partitions[0]
        return part.leader == 3 and sorted(part.isrs) == [1, 2, 3]

    _eventually(three_in_sync, "nodes 1 and 2 do not fetch from node 3", timeout=30)
    producer = Producer({**_client(c), "acks": "all", "enable.idempotence": True})
    led_values = [f"led-{n}".encode() for n in range(100)]
    for value in led_values:
        producer.produce(led, value)
    assert producer.flush(30) == 0

    for name, expected in ((topic, before), (led, led_values)):
        consumer = Consumer({**_client(c), "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
        consumer.subscribe([name])
        got = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < len(expected) and time.monotonic() < deadline:
                msg = consumer.poll(1)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert sorted(got) == sorted(expected), name

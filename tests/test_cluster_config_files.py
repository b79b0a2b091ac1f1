"""The three properties files in ``config/cluster/`` (shown in the README) start a 3-node klog cluster in KRaft
combined mode, unchanged but for their ports and data directories (moved to free ports and the test's directory):
every node lists the three brokers, a topic created from any node's bootstrap gets three replicas, records written
with acks=all survive the SIGKILL of a node and come back once each, the killed node rejoins, Kafka's own ``kafka-topics --describe``, ``kafka-cluster cluster-id`` and ``kafka-metadata-quorum`` read the
cluster, and SIGTERM stops each node cleanly."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.kafka import free_port
from klog.testing.kafka_tools import TOPIC_COMMAND, run_kafka_tool
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(240)

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config" / "cluster"
QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def relocated(files: list[Path], root: Path) -> tuple[list[Path], dict[int, int]]:
    """The files with every 127.0.0.1 port moved to a free one and ``log.dirs`` under ``root`` (nothing else
    changed); also the port map (documented port -> port used)."""
    texts = [f.read_text() for f in files]
    documented = sorted({int(p) for t in texts for p in re.findall(r"127\.0\.0\.1:(\d+)", t)})
    ports = {p: free_port() for p in documented}
    out = []
    for f, text in zip(files, texts):
        text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{ports[int(m.group(1))]}", text)
        node = read_properties(f)["node.id"]
        text = re.sub(r"(?m)^log\.dirs=.*$", f"log.dirs={root / f'node-{node}'}", text)
        target = root / f.name
        target.write_text(text)
        out.append(target)
    return out, ports


def test_the_documented_files_start_a_three_node_cluster_that_keeps_acknowledged_records_when_a_node_dies(tmp_path: Path) -> None:
    files = sorted(CONFIG_DIR.glob("server-*.properties"))
    assert len(files) == 3
    for f in files:
        props = read_properties(f)
        assert props["process.roles"] == "broker,controller" and len(props["controller.quorum.voters"].split(",")) == 3
    local, ports = relocated(files, tmp_path)
    nodes = []
    for f in local:
        props = read_properties(f)
        # BrokerProcess passes listeners and log.dirs as overrides: here the same values as the file
        nodes.append(BrokerProcess(props["log.dirs"], {"listeners": props["listeners"]}, properties_file=f))
    try:
        for n in nodes:
            n.spawn()
        for n in nodes:
            n.wait_started()
        bootstrap = ",".join(n.bootstrap_servers for n in nodes)
        assert {n.port for n in nodes} == {ports[9092], ports[9094], ports[9096]}

        # every node lists all three brokers once they registered
        deadline = time.monotonic() + 60
        for n in nodes:
            admin = AdminClient({"bootstrap.servers": n.bootstrap_servers})
            while len(admin.list_topics(timeout=10).brokers) != 3:
                assert time.monotonic() < deadline, n.lines[-10:]
                time.sleep(0.2)

        topic = f"orders-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": nodes[0].bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3)])[topic].result(60)   # default.replication.factor=3
        deadline = time.monotonic() + 30
        while True:
            md = admin.list_topics(topic, timeout=10).topics[topic]
            if md.error is None and len(md.partitions) == 3 and all(p.leader >= 0 for p in md.partitions.values()):
                break
            assert time.monotonic() < deadline, md
            time.sleep(0.2)

        assert {len(p.replicas) for p in md.partitions.values()} == {3}
        # acks=all (min.insync.replicas=2): every acknowledged record is on at least two nodes
        producer = Producer({"bootstrap.servers": nodes[2].bootstrap_servers, "acks": "all",
                             "enable.idempotence": True})
        values = {b"v%03d" % i for i in range(60)}
        for i, v in enumerate(sorted(values)):
            producer.produce(topic, value=v, partition=i % 3)
        assert producer.flush(60) == 0
        # losing a machine loses nothing acknowledged: SIGKILL node 1, write more, read everything back
        nodes[0].kill()
        more = {b"w%03d" % i for i in range(60)}
        for i, v in enumerate(sorted(more)):
            producer.produce(topic, value=v, partition=i % 3)
        assert producer.flush(90) == 0
        values |= more
        consumer = Consumer({"bootstrap.servers": nodes[1].bootstrap_servers, "group.id": "unused",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while set(got) != values and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg.value())
            assert set(got) == values and len(got) == len(values)   # each once
        finally:
            consumer.close()
        bootstrap = ",".join(n.bootstrap_servers for n in nodes[1:])
        nodes[0].start()   # it rejoins (a new broker epoch once its old session expired)

        described = run_kafka_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
        assert described.returncode == 0, described.stderr
        assert described.stdout.count(f"Topic: {topic}\tPartition:") == 3, described.stdout
        cluster_id = run_kafka_tool(CLUSTER_TOOL, "cluster-id", "--bootstrap-server", bootstrap)
        assert cluster_id.returncode == 0, cluster_id.stderr
        assert cluster_id.stdout.strip() == f"Cluster ID: {admin.list_topics(timeout=10).cluster_id}"
        status = run_kafka_tool(QUORUM_COMMAND, "--bootstrap-controller", f"127.0.0.1:{ports[9095]}",
                                "describe", "--status")
        assert status.returncode == 0, status.stderr
        assert re.search(r"CurrentVoters:\s*\[.*\b1\b.*\b2\b.*\b3\b", status.stdout.replace("\n", " ")), status.stdout
    finally:
        codes = [n.stop() for n in nodes]
        for n in nodes:   # shown by pytest when the test fails
            print(f"--- node on port {n.port} exited {n.proc.returncode if n.proc else None}:", *n.lines[-40:],
                  sep="\n")
    assert codes == [0, 0, 0], [n.lines[-15:] for n in nodes]
    for n in nodes:
        assert not [line for line in n.lines if "Traceback" in line], "\n".join(n.lines[-30:])

"""The three properties files in ``config/cluster/`` (shown in the README) start a 3-node klog cluster in KRaft
combined mode, unchanged but for their ports and data directories (moved to free ports and the test's directory):
every node lists the three brokers, a topic created from any node's bootstrap gets three replicas, records written
with acks=all survive the SIGKILL of a node and come back once each, the killed node rejoins, Kafka's own
``kafka-topics --describe``, ``kafka-cluster cluster-id`` and ``kafka-metadata-quorum`` read the cluster, and SIGTERM
stops each node cleanly. The same files start a 3-node Apache Kafka 4.x cluster after ``kafka-storage format`` (the
one step klog does not need), and the same script passes there: the files mean what they say in Kafka."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from klog.testing.kafka import KafkaCluster, free_port, read_properties
from klog.testing.kafka_tools import TOPIC_COMMAND, run_kafka_tool
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(240)

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config" / "cluster"
QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"


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


class KlogNodes:
    """``klog-broker <file>`` per file."""

    kind = "klog"
    clean_exit = 0

    def __init__(self, files: list[Path]) -> None:
        self.nodes: dict[int, BrokerProcess] = {}
        for f in files:
            props = read_properties(f)
            # BrokerProcess passes listeners and log.dirs as overrides: here the same values as the file
            self.nodes[int(props["node.id"])] = BrokerProcess(props["log.dirs"], {"listeners": props["listeners"]},
                                                              properties_file=f)

    def start(self) -> None:
        for n in self.nodes.values():
            n.spawn()
        for n in self.nodes.values():
            n.wait_started()

    def bootstrap(self, node: int) -> str:
        return self.nodes[node].bootstrap_servers

    def kill(self, node: int) -> None:
        self.nodes[node].kill()

    def restart(self, node: int) -> None:
        self.nodes[node].start()

    def stop_all(self) -> list[int]:
        codes = [n.stop() for n in self.nodes.values()]
        for i, n in self.nodes.items():   # shown by pytest when the test fails
            print(f"--- node {i} exited {n.proc.returncode if n.proc else None}:", *n.lines[-40:], sep="\n")
        return codes

    def check_clean(self) -> None:
        for n in self.nodes.values():
            assert not [line for line in n.lines if "Traceback" in line], "\n".join(n.lines[-30:])


class KafkaNodes:
    """Apache Kafka nodes on the same files, formatted with one cluster id first."""

    kind = "kafka"
    clean_exit = 143   # the JVM's exit after a SIGTERM ran its shutdown hooks

    def __init__(self, files: list[Path], root: Path) -> None:
        self.cluster = KafkaCluster.from_properties_files(root, {int(read_properties(f)["node.id"]): f for f in files})

    def start(self) -> None:
        self.cluster.start()

    def bootstrap(self, node: int) -> str:
        return self.cluster.node_bootstrap(node)

    def kill(self, node: int) -> None:
        self.cluster.kill(node)

    def restart(self, node: int) -> None:
        self.cluster.restart(node)

    def stop_all(self) -> list[int]:
        self.cluster.close()   # SIGTERM to all, then waits (killed after a timeout: -9)
        return [self.cluster.procs[i].returncode for i in self.cluster.node_ids]

    def check_clean(self) -> None:
        pass


@pytest.mark.parametrize("kind", ["klog", "kafka"])
@pytest.mark.long
def test_the_documented_files_start_a_three_node_cluster_that_keeps_acknowledged_records_when_a_node_dies(
        tmp_path: Path, kind: str) -> None:
    files = sorted(CONFIG_DIR.glob("server-*.properties"))
    assert len(files) == 3
    for f in files:
        props = read_properties(f)
        assert props["process.roles"] == "broker,controller" and len(props["controller.quorum.voters"].split(",")) == 3
    local, ports = relocated(files, tmp_path)
    nodes = KlogNodes(local) if kind == "klog" else KafkaNodes(local, tmp_path / "kafka")
    try:
        nodes.start()
        bootstrap = ",".join(nodes.bootstrap(i) for i in (1, 2, 3))
        assert bootstrap == ",".join(f"127.0.0.1:{ports[p]}" for p in (9092, 9094, 9096))

        # every node lists all three brokers once they registered
        deadline = time.monotonic() + 60
        for i in (1, 2, 3):
            admin = AdminClient({"bootstrap.servers": nodes.bootstrap(i)})
            while len(admin.list_topics(timeout=10).brokers) != 3:
                assert time.monotonic() < deadline, f"node {i} does not list 3 brokers"
                time.sleep(0.2)

        topic = f"orders-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": nodes.bootstrap(1)})
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
        producer = Producer({"bootstrap.servers": nodes.bootstrap(3), "acks": "all",
                             "enable.idempotence": True})
        values = {b"v%03d" % i for i in range(60)}
        for i, v in enumerate(sorted(values)):
            producer.produce(topic, value=v, partition=i % 3)
        assert producer.flush(60) == 0
        # losing a machine loses nothing acknowledged: SIGKILL node 1, write more, read everything back
        nodes.kill(1)
        more = {b"w%03d" % i for i in range(60)}
        for i, v in enumerate(sorted(more)):
            producer.produce(topic, value=v, partition=i % 3)
        assert producer.flush(90) == 0
        values |= more
        consumer = Consumer({"bootstrap.servers": nodes.bootstrap(2), "group.id": "unused",
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
        bootstrap = ",".join(nodes.bootstrap(i) for i in (2, 3))
        nodes.restart(1)   # it rejoins (a new broker epoch once its old session expired)

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
        codes = nodes.stop_all()
    assert codes == [nodes.clean_exit] * 3, codes
    nodes.check_clean()

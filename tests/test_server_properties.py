"""``config/server.properties`` (docs/operations.md: ``klog-broker config/server.properties``) starts a single
KRaft combined node, unchanged but for its ports and data directory: a topic is created, records written with
acks=all are read back, and SIGTERM stops the node cleanly. The same file starts Apache Kafka 4.x after
``kafka-storage format``, and the same script passes there."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster_config_files import KafkaNodes, KlogNodes, relocated

pytestmark = pytest.mark.timeout(180)

SERVER_PROPERTIES = Path(__file__).resolve().parent.parent / "config" / "server.properties"


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_the_documented_single_node_file_starts_a_node_that_keeps_what_it_acknowledged(
        tmp_path: Path, kind: str) -> None:
    (local,), ports = relocated([SERVER_PROPERTIES], tmp_path)
    nodes = KlogNodes([local]) if kind == "klog" else KafkaNodes([local], tmp_path / "kafka")
    try:
        nodes.start()
        bootstrap = nodes.bootstrap(1)
        assert bootstrap == f"127.0.0.1:{ports[9092]}"
        topic = f"orders-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        values = [f"order-{i}".encode() for i in range(200)]
        for v in values:
            producer.produce(topic, v)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen: list[bytes] = []
        for _ in range(300):
            if len(seen) >= len(values):
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        consumer.close()
        assert sorted(seen) == sorted(values)
    finally:
        codes = nodes.stop_all()
    assert codes == [nodes.clean_exit]
    nodes.check_clean()

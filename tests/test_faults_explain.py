"""klog.testing.faults.explain: a transactional finding of the fault checker carries what Apache Kafka's
kafka-dump-log reads in each replica's files: the batches of the transaction's producer from the first holding one
of its values (producer id and epoch, leader epoch, the values), the COMMIT/ABORT markers after them, and that
producer's entries in the partition's .txnindex; a node without the partition says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import klog
from klog.testing.faults.explain import explain_transactions
from klog.testing.kafka_tools import java_available, kafka_libs_dir

pytestmark = [pytest.mark.java, pytest.mark.timeout(120)]


def test_a_transactional_finding_carries_each_replicas_batches_markers_and_aborted_transactions(tmp_path: Path
                                                                                                ) -> None:
    if not java_available() or kafka_libs_dir(Path(__file__).parent) is None:
        pytest.fail("needs java and the Kafka jars: run tools/install-peers.sh")
    data = tmp_path / "node-1"
    with klog.Broker(str(data)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("explained", 1, 1)])["explained"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "explain",
                             "linger.ms": 0})
        producer.init_transactions(30)
        for name, commit in (("x", False), ("y", True)):
            producer.begin_transaction()
            for i in range(2):
                producer.produce("explained", value=f"{name}-{i}".encode(), partition=0)
            assert producer.flush(30) == 0
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    events = [{"f": "txn", "type": "invoke", "process": "t0", "txn": name, "intent": "commit",
               "values": [[0, f"{name}-0"], [0, f"{name}-1"]]} for name in ("x", "y")]
    details: dict[str, list[dict[str, object]]] = {
        "aborted_read": [{"process": "t0", "txn": "x", "source": "final read", "values": ["x-1"]}],
        "torn_transaction": [], "lost_committed": [], "lost": [{"value": "not a transaction's"}]}
    explain_transactions({1: data, 2: tmp_path / "node-2"}, "explained", events, details)
    replicas = details["aborted_read"][0]["replicas"]
    assert isinstance(replicas, dict), replicas
    assert replicas["node 2 explained-0"] == ["no log of this partition here"]
    lines = replicas["node 1 explained-0"]
    assert lines[0].startswith("offsets 0-1 producer ") and lines[0].endswith(" transactional: x-0, x-1"), lines
    producer_id = lines[0].split()[3]
    assert lines[1].startswith(f"offsets 2-2 producer {producer_id} epoch 0 ") and "control: marker ABORT" in lines[1]
    assert lines[2].startswith("offsets 3-4 ") and lines[2].endswith("transactional: 2 other records"), lines
    assert "control: marker COMMIT" in lines[3], lines
    assert lines[4:] == [f"txnindex: producer {producer_id} aborted offsets 0-2 (last stable offset 3)"], lines
    assert "replicas" not in details["lost"][0]

"""What the JBOD cluster tests share (tests/test_cluster_jbod.py, tests/test_cluster_log_dir_moves.py): a cluster whose
node 1 has several log dirs, on klog or on Apache Kafka from the same properties, and a producer running in the
background (what it got acknowledged, the errors it saw)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from klog.testing.cluster import KlogCluster
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs


def open_cluster(kind: str, root: Any, size: int, properties: Mapping[str, Any], log_dirs: str, *,
                 node: int = 1, node_properties: Mapping[str, Any] | None = None) -> Any:
    """``size`` nodes, ``node`` with ``log.dirs=<log_dirs>`` (the others one dir each) and ``node_properties``, the
    same properties on both systems; Kafka's side is skipped, saying so, without its jars."""
    mine = {"log.dirs": log_dirs, **(node_properties or {})}
    if kind == "kafka":
        try:
            find_kafka_libs()
        except KafkaStartError as exc:
            pytest.skip(f"needs the Kafka jars: {exc}")
        return KafkaCluster(root, size, properties=properties, node_properties={node: mine},
                            startup_timeout=300)
    cluster = KlogCluster(root, size, properties=properties)
    cluster.nodes[node].config.update(mine)
    return cluster


def placed(dirs: list[str], topic: str, count: int, timeout: float = 30.0) -> dict[int, str]:
    """partition -> the log dir holding its log on disk, once ``count`` partitions of ``topic`` have one (Kafka
    makes the logs a little after CreateTopics answers)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {int(name.rpartition("-")[2]): d for d in dirs for name in os.listdir(d)
                 if name.rpartition("-")[0] == topic and name.rpartition("-")[2].isdigit()}
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


class Producing:
    """A confluent-kafka producer (acks=all, idempotent) writing to every one of ``partitions`` partitions of
    ``topic`` until the ``with`` block ends; ``acked``: the (partition, value) pairs acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, timeout_ms: int = 60000) -> None:
        from confluent_kafka import Producer

        self.topic, self.partitions, self.timeout_s = topic, partitions, timeout_ms / 1000
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": timeout_ms, "linger.ms": 5})
        self.acked: set[tuple[int, bytes]] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add((msg.partition(), msg.value()))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=f"v-{p}-{i}".encode(), partition=p,
                                      on_delivery=self._delivered)
            i += 1
            self.producer.poll(0.02)
        self.producer.flush(self.timeout_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(self.timeout_s + 30)
        if not self._thread.is_alive():
            del self.producer   # no reconnection attempts logged while the test restarts brokers

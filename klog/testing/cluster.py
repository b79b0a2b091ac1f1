"""A real multi-node klog cluster for tests, yours included: ``KlogCluster`` and the ``klog_cluster`` pytest fixture.

    from klog.testing.cluster import KlogCluster

    with KlogCluster(tmp_path, 3) as cluster:
        cluster.wait_for_brokers()
        cluster.create_topic("orders", 6)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        ...
        cluster.kill(cluster.wait_for_controller())   # SIGKILL the active controller
        cluster.wait_for_controller(exclude=...)

N ``klog-broker`` processes, each a combined ``broker,controller`` node started from a properties file with
Kafka's KRaft names (``process.roles``, ``node.id``, ``controller.quorum.voters``, ``listeners``...), on free
127.0.0.1 ports that stay the node's across restarts. :meth:`kill` (SIGKILL), :meth:`stop_node` (SIGTERM, a
controlled shutdown), :meth:`pause` / :meth:`resume` (SIGSTOP / SIGCONT), :meth:`restart`, and waits for brokers,
the active controller, partition leaders and ISRs (:class:`klog.testing.cluster_api.Cluster`). The same script runs
against Apache Kafka with :class:`klog.testing.kafka.KafkaCluster`. Every process is stopped by :meth:`close`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from klog.testing.cluster_api import Cluster
from klog.testing.controller_quorum import FAST_QUORUM_TIMING, ControllerQuorum

__all__ = ["CLUSTER_TIMING", "KlogCluster"]

#: Raft and broker-session timing for test clusters (Kafka's keys; Apache Kafka takes the same): a controller
#: failover within about 1-2 s, a dead broker fenced after 3 s.
CLUSTER_TIMING: dict[str, Any] = {
    **FAST_QUORUM_TIMING,
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
}


class KlogCluster(Cluster):
    kind = "klog"

    def __init__(self, root: str | os.PathLike[str], size: int = 3, *,
                 properties: Mapping[str, Any] | None = None) -> None:
        super().__init__(size)
        self.quorum = ControllerQuorum(root, size, roles="broker,controller",
                                       properties={**CLUSTER_TIMING, **(properties or {})}, fixed_client_ports=True)
        self.client_ports = dict(self.quorum.client_ports)
        self.controller_ports = dict(self.quorum.controller_ports)
        #: each node's properties file (what ``klog-broker <file>`` is started with)
        self.properties_files = self.quorum.properties_files

    def start(self) -> KlogCluster:
        self.spawned_at = time.monotonic()
        self.quorum.start()
        return self

    def close(self) -> None:
        self.paused.clear()
        self.quorum.close()   # BrokerProcess.stop resumes a paused node before SIGTERM

    def pid(self, node: int) -> int | None:
        proc = self.quorum.nodes[node].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill(self, node: int) -> None:
        self.paused.discard(node)
        self.quorum.kill(node)

    def stop_node(self, node: int) -> int:
        self.paused.discard(node)
        return self.quorum.nodes[node].stop()

    def restart(self, node: int) -> None:
        if self.pid(node) is not None:
            self.stop_node(node)
        self.quorum.start_node(node)

    def log_lines(self, node: int) -> list[str]:
        """The node's stderr log so far (for assertion messages)."""
        return list(self.quorum.nodes[node].lines)

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
127.0.0.1 ports that stay the node's across restarts. With ``controllers=K`` the layout is Kafka's dedicated one
instead: K ``process.roles=controller`` nodes (ids :data:`CONTROLLER_ID_BASE` + 1...) form the quorum and the N
brokers (ids 1..N) are ``process.roles=broker`` nodes that follow it as observers; ``kill``, ``restart`` etc.
take a controller's id too (:attr:`controller_ids`). :meth:`kill` (SIGKILL), :meth:`stop_node` (SIGTERM, a
controlled shutdown), :meth:`pause` / :meth:`resume` (SIGSTOP / SIGCONT), :meth:`restart`, and waits for brokers,
the active controller, partition leaders and ISRs (:class:`klog.testing.cluster_api.Cluster`). The same script runs
against Apache Kafka with :class:`klog.testing.kafka.KafkaCluster`. Every process is stopped by :meth:`close`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from klog.testing.cluster_api import Cluster
from klog.testing.controller_quorum import FAST_QUORUM_TIMING, ControllerQuorum
from klog.testing.kafka import KafkaCluster, KafkaStartError, find_kafka_libs, free_port
from klog.testing.process import BrokerProcess, start_together

__all__ = ["CLUSTER_TIMING", "CONTROLLER_ID_BASE", "KlogCluster", "cluster_of"]

#: Controller-only nodes of a dedicated layout have ids above this (brokers are 1..N).
CONTROLLER_ID_BASE = 100

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
                 properties: Mapping[str, Any] | None = None, controllers: int = 0,
                 bootstrap_servers: bool = False, node_properties: Mapping[int, Mapping[str, Any]] | None = None
                 ) -> None:
        """``bootstrap_servers`` (dedicated layout only): every node finds the quorum through
        ``controller.quorum.bootstrap.servers`` (KIP-853); the controllers are formatted with
        ``--initial-controllers`` first. ``node_properties``: per node id, settings on top of ``properties``."""
        super().__init__(size)
        assert controllers or not bootstrap_servers, "bootstrap_servers needs the dedicated layout"
        props = {**CLUSTER_TIMING, **(properties or {})}
        if controllers:
            self.quorum = ControllerQuorum(Path(root) / "controllers", controllers, roles="controller",
                                           properties=props, first_id=CONTROLLER_ID_BASE + 1,
                                           bootstrap_servers=bootstrap_servers, node_properties=node_properties)
        else:
            self.quorum = ControllerQuorum(root, size, roles="broker,controller", properties=props,
                                           fixed_client_ports=True, node_properties=node_properties)
        self.controller_ports = dict(self.quorum.controller_ports)
        #: the quorum's nodes: every node when combined, the controller-only ones in the dedicated layout
        self.controller_ids = sorted(self.controller_ports)
        self.formatted = False
        #: every process, by node id (brokers and controllers)
        self.nodes: dict[int, BrokerProcess] = dict(self.quorum.nodes)
        #: each node's properties file (what ``klog-broker <file>`` is started with)
        self.properties_files: dict[int, Path] = dict(self.quorum.properties_files)
        if controllers:
            self.client_ports = {i: free_port() for i in self.node_ids}
            for i in self.node_ids:
                self._add_broker(Path(root), i, {**props, **(node_properties or {}).get(i, {})})
        else:
            self.client_ports = dict(self.quorum.client_ports)

    def _add_broker(self, root: Path, node: int, props: Mapping[str, Any]) -> None:
        """A ``process.roles=broker`` node following the controller quorum."""
        listeners = f"PLAINTEXT://127.0.0.1:{self.client_ports[node]}"
        data = root / f"broker-{node}"
        quorum = ({"controller.quorum.bootstrap.servers": self.quorum.bootstrap_servers}
                  if self.quorum.uses_bootstrap_servers else {"controller.quorum.voters": self.quorum.voters})
        conf = {"process.roles": "broker", "node.id": node, **quorum,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "listeners": listeners, "log.dirs": str(data), **props}
        path = root / f"broker-{node}.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.properties_files[node] = path
        self.nodes[node] = BrokerProcess(data, {"listeners": listeners}, properties_file=path)

    def start(self) -> KlogCluster:
        self.spawned_at = time.monotonic()
        try:
            if self.quorum.uses_bootstrap_servers and not self.formatted:
                from klog.controller.applier import new_cluster_id

                self.quorum.format(new_cluster_id())
                self.formatted = True
            start_together(self.nodes.values())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.paused.clear()
        # broker-only nodes first (their controlled shutdown needs the controllers), then the quorum; within a group
        # SIGTERM all (a paused node is resumed first) so they stop together rather than each after the last
        brokers_only = [i for i in self.nodes if i not in self.controller_ids]
        for group in (brokers_only, [i for i in self.nodes if i in self.controller_ids]):
            for i in group:
                self.nodes[i].terminate()
            for i in group:
                self.nodes[i].stop()

    def pid(self, node: int) -> int | None:
        proc = self.nodes[node].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill(self, node: int) -> None:
        self.paused.discard(node)
        self.nodes[node].kill()

    def stop_node(self, node: int) -> int:
        self.paused.discard(node)
        return self.nodes[node].stop()

    def restart(self, node: int) -> None:
        if self.pid(node) is not None:
            self.stop_node(node)
        self.nodes[node].start()

    def log_dir(self, node: int) -> Path:
        return Path(self.nodes[node].data_dir)   # a broker-only node's is not under the quorum's root

    def log_lines(self, node: int) -> list[str]:
        """The node's stderr log so far (for assertion messages)."""
        return list(self.nodes[node].lines)


@contextlib.contextmanager
def cluster_of(kind: str, root: str | os.PathLike[str], size: int, *, heap: str = "384m", **kw: Any
               ) -> Iterator[Cluster]:
    """A started cluster of ``kind`` (``"klog"``: :class:`KlogCluster`, ``"kafka"``:
    :class:`klog.testing.kafka.KafkaCluster` with ``heap``) from the same arguments (``properties``,
    ``node_properties``, ``controllers``); the Kafka side is skipped without Kafka's jars."""
    if kind == "klog":
        with KlogCluster(root, size, **kw) as klog:
            yield klog
        return
    assert kind == "kafka", kind
    try:
        find_kafka_libs()
    except KafkaStartError as exc:
        import pytest

        pytest.skip(f"needs the Kafka jars: {exc}")
    with KafkaCluster(root, size, heap=heap, **kw) as kafka:
        yield kafka

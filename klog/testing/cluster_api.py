"""What a multi-node test cluster offers, whatever runs it: klog (:class:`klog.testing.cluster.KlogCluster`) or
Apache Kafka (:class:`klog.testing.kafka.KafkaCluster`), so one test script runs against both.

Every wait here asks the nodes over Kafka's wire protocol (Metadata, DescribeQuorum), as a client would, never
a log line or a file of one implementation: what passes against Kafka checks Kafka's behaviour.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.testing.wire import WireClient

__all__ = ["Cluster"]

_C = TypeVar("_C", bound="Cluster")
#: How often the waits below ask the nodes again.
POLL_INTERVAL_S = 0.2
METADATA_TOPIC = "__cluster_metadata"
#: a node's answers for a partition it does not lead, or does not know yet
_NOT_LEADING = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID})


class Cluster:
    """N nodes on 127.0.0.1, each a combined ``broker,controller``, on ports fixed for the cluster's life (a
    restarted node listens where it did). Subclasses start the processes; node ids are 1..N."""

    #: "klog" or "kafka"
    kind = ""

    def __init__(self, size: int) -> None:
        """``size``: the broker nodes (0: only the controller-only nodes of a dedicated layout)."""
        if size < 0:
            raise ValueError(f"a cluster cannot have {size} nodes")
        self.size = size
        self.client_ports: dict[int, int] = {}
        #: node -> its controller listener port (where the Raft quorum and controller requests are served)
        self.controller_ports: dict[int, int] = {}
        self.paused: set[int] = set()
        #: time.monotonic() when the node processes were spawned (after any format step), for startup figures
        self.spawned_at = 0.0

    # -- processes (subclasses) ------------------------------------------------------------------
    def start(self) -> Cluster:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def pid(self, node: int) -> int | None:
        """The node's process id while it runs (None: stopped or killed)."""
        raise NotImplementedError

    def kill(self, node: int) -> None:
        """SIGKILL: no controlled shutdown, no flush."""
        raise NotImplementedError

    def stop_node(self, node: int) -> int:
        """SIGTERM (a controlled shutdown) and wait; the exit code."""
        raise NotImplementedError

    def restart(self, node: int) -> None:
        """Start a stopped or killed node again on its data and ports (stopping it first if it runs)."""
        raise NotImplementedError

    def log_dir(self, node: int) -> Path:
        """The node's log directory (partition directories ``<topic>-<partition>`` with Kafka's segment files)."""
        raise NotImplementedError

    def pause(self, node: int) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a hung or partitioned node)."""
        pid = self.pid(node)
        assert pid is not None, f"node {node} is not running"
        os.kill(pid, signal.SIGSTOP)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        """SIGCONT after :meth:`pause`."""
        pid = self.pid(node)
        assert pid is not None, f"node {node} is not running"
        os.kill(pid, signal.SIGCONT)
        self.paused.discard(node)

    def __enter__(self: _C) -> _C:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rss_bytes(self, node: int) -> int:
        """The node process's resident memory now (Linux ``VmRSS``)."""
        pid = self.pid(node)
        assert pid is not None, f"node {node} is not running"
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    # -- addresses -------------------------------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.size + 1))

    def live_nodes(self) -> list[int]:
        """Nodes whose process runs and is not paused."""
        return [i for i in self.node_ids if self.pid(i) is not None and i not in self.paused]

    def node_bootstrap(self, node: int) -> str:
        return f"127.0.0.1:{self.client_ports[node]}"

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client address (clients pick any one that answers)."""
        return ",".join(self.node_bootstrap(i) for i in self.node_ids)

    def wire(self, node: int, timeout: float = 15.0) -> WireClient:
        return WireClient("127.0.0.1", self.client_ports[node], timeout=timeout)

    # -- what the nodes say ----------------------------------------------------------------------
    def metadata(self, node: int, topics: Iterable[str] | None = ()) -> Any:
        """Node ``node``'s Metadata v12 answer for ``topics`` (None: every topic; empty: brokers only)."""
        with self.wire(node) as wire:
            return wire.request(ApiKey.METADATA, 12, {
                "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})

    def live_brokers(self, node: int) -> set[int]:
        return {b.node_id for b in self.metadata(node).brokers}

    def active_controller(self, node: int | None = None) -> int | None:
        """The quorum leader as ``node`` (default: the first live node) reports it through DescribeQuorum on its
        client listener (Kafka's brokers forward it to the controllers); None when it cannot tell."""
        node = node if node is not None else self.live_nodes()[0]
        try:
            with self.wire(node, timeout=5.0) as wire:
                answer = wire.request(ApiKey.DESCRIBE_QUORUM, 0, {"topics": [
                    {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
        except (OSError, ConnectionError):
            return None
        if answer.error_code or not answer.topics or not answer.topics[0].partitions:
            return None
        partition = answer.topics[0].partitions[0]
        return partition.leader_id if partition.error_code == ErrorCode.NONE and partition.leader_id >= 0 else None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1, *, via: int | None = None,
                     configs: dict[str, str] | None = None, timeout_ms: int = 30_000) -> tuple[int, str | None]:
        """CreateTopics v7 sent to node ``via`` (default: the first live node): (error code, message)."""
        via = via if via is not None else self.live_nodes()[0]
        with self.wire(via, timeout=timeout_ms / 1000 + 15) as wire:
            answer = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                 "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                "timeout_ms": timeout_ms, "validate_only": False}).topics[0]
        return answer.error_code, answer.error_message

    # -- waits -----------------------------------------------------------------------------------
    def wait_for_brokers(self, expected: Iterable[int] | None = None, timeout: float = 60.0) -> None:
        """Until every live node lists exactly ``expected`` (default: the live nodes) as its live brokers."""
        want = set(self.live_nodes() if expected is None else expected)
        self._wait(lambda: all(self._quietly(lambda i=i: self.live_brokers(i)) == want for i in self.live_nodes()),
                   timeout, lambda: f"live brokers {want} on every node: "
                                    f"{ {i: self._quietly(lambda i=i: self.live_brokers(i)) for i in self.live_nodes()} }")

    def wait_for_controller(self, exclude: int | None = None, timeout: float = 60.0) -> int:
        """The active controller every live node names (not ``exclude``, e.g. the one just killed)."""
        found: list[int] = []

        def agreed() -> bool:
            seen = {self.active_controller(i) for i in self.live_nodes()}
            if len(seen) == 1 and (leader := seen.pop()) is not None and leader != exclude:
                found.append(leader)
                return True
            return False

        self._wait(agreed, timeout, lambda: f"an active controller other than {exclude}")
        return found[-1]

    def leaders(self, node: int, topic: str) -> dict[int, int] | None:
        """partition -> leader (-1: none) in node ``node``'s Metadata (None: it does not know the topic)."""
        answer = self.metadata(node, [topic]).topics[0]
        if answer.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):   # it still lists the partitions
            return None
        return {p.partition_index: p.leader_id for p in answer.partitions}

    def wait_for_topic(self, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
        """Until every live node lists ``topic`` with ``partitions`` partitions and the same leaders; those."""
        found: list[dict[int, int]] = []

        def agreed() -> bool:
            views = [self._quietly(lambda i=i: self.leaders(i, topic)) for i in self.live_nodes()]
            if all(v is not None and len(v) == partitions and v == views[0] for v in views):
                found.append(views[0])
                return True
            return False

        self._wait(agreed, timeout, lambda: f"topic {topic} with {partitions} partitions on every live node")
        return found[-1]

    def wait_for_leader(self, topic: str, partition: int, *, exclude: int | None = None,
                        timeout: float = 60.0) -> int:
        """The live leader of ``topic``-``partition`` every live node names (not ``exclude``), once it serves the
        partition as its leader. A node's Metadata may name it leader a moment before its replica manager acts on
        that (Kafka's broker publishes the image to its metadata cache before applying it to its partitions; klog's
        makes the new partition's files first): a request sent to it then is refused NOT_LEADER_OR_FOLLOWER."""
        found: list[int] = []

        def agreed() -> bool:
            seen = set()
            for i in self.live_nodes():
                view = self._quietly(lambda i=i: self.leaders(i, topic))
                seen.add(None if not view else view.get(partition))
            if len(seen) == 1 and (leader := seen.pop()) is not None and leader >= 0 and leader != exclude \
                    and leader in self.live_nodes() and self._quietly(lambda: self._serves(leader, topic, partition)):
                found.append(leader)
                return True
            return False

        self._wait(agreed, timeout, lambda: f"a live leader of {topic}-{partition} other than {exclude}")
        return found[-1]

    def _serves(self, node: int, topic: str, partition: int) -> bool:
        """Whether ``node`` answers a consumer's ListOffsets for the partition as its leader: any answer but the
        ones of a node that does not lead it (yet), OFFSET_NOT_AVAILABLE of a leader whose high watermark is behind
        its epoch's start included."""
        with self.wire(node) as wire:
            answer = wire.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
        return answer.topics[0].partitions[0].error_code not in _NOT_LEADING

    def wait_for_isr(self, topic: str, partition: int, expected: Iterable[int], timeout: float = 60.0) -> None:
        """Until every live node lists exactly ``expected`` as the ISR of ``topic``-``partition``."""
        want = sorted(expected)

        def isr(node: int) -> list[int] | None:
            for p in self.metadata(node, [topic]).topics[0].partitions:
                if p.partition_index == partition:
                    return sorted(p.isr_nodes)
            return None

        self._wait(lambda: all(self._quietly(lambda i=i: isr(i)) == want for i in self.live_nodes()), timeout,
                   lambda: f"ISR {want} of {topic}-{partition}")

    # -- records (confluent-kafka, imported here: the waits above need no client library) -------------------------
    def produce(self, topic: str, partitions: Iterable[int], count: int, *, via: int | None = None,
                tag: str = "") -> set[tuple[int, bytes]]:
        """``count`` distinct records to each of ``partitions`` with acks=all and idempotence, through node ``via``
        (default: every node's bootstrap); returns the acknowledged (partition, value) pairs (all of them, or an
        AssertionError naming the first failures)."""
        from confluent_kafka import Producer

        bootstrap = self.bootstrap_servers if via is None else self.node_bootstrap(via)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                             "message.timeout.ms": 30000})
        sent = {(p, f"{topic}-{tag}-{p}-{i}".encode()) for p in partitions for i in range(count)}
        failed: list[str] = []
        for p, value in sorted(sent):
            producer.produce(topic, value=value, partition=p,
                             on_delivery=lambda err, msg: failed.append(str(err)) if err else None)
        assert producer.flush(40) == 0 and not failed, failed[:3]
        return sent

    def consume(self, topic: str, partitions: Iterable[int], expected: int, *, via: int | None = None,
                timeout: float = 40.0) -> set[tuple[int, bytes]]:
        """The (partition, value) pairs read from the start of ``partitions`` until ``expected`` distinct ones came
        or ``timeout`` passed."""
        return set(self.read(topic, partitions, expected, via=via, timeout=timeout, distinct=True))

    def read(self, topic: str, partitions: Iterable[int], expected: int, *, via: int | None = None,
             timeout: float = 40.0, distinct: bool = False) -> list[tuple[int, bytes]]:
        """The (partition, value) pairs read from the start of ``partitions``, in the order they came (duplicates
        kept), until ``expected`` came (``distinct``: distinct ones) or ``timeout`` passed."""
        from confluent_kafka import Consumer, TopicPartition

        bootstrap = self.bootstrap_servers if via is None else self.node_bootstrap(via)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        got: list[tuple[int, bytes]] = []
        seen: set[tuple[int, bytes]] = set()
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            deadline = time.monotonic() + timeout
            while len(seen if distinct else got) < expected and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    pair = (int(msg.partition() or 0), bytes(msg.value() or b""))
                    got.append(pair)
                    seen.add(pair)
        finally:
            consumer.close()
        return got

    @staticmethod
    def _quietly(ask: Any) -> Any:
        try:
            return ask()
        except (OSError, ConnectionError):   # a node starting, stopping or overloaded: ask again
            return None

    @staticmethod
    def _wait(done: Any, timeout: float, what: Any) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what()}")
            time.sleep(POLL_INTERVAL_S)

"""N real ``klog-broker`` processes forming a controller quorum on 127.0.0.1, each started from a properties
file with Kafka's KRaft property names (for tests and benchmarks).

    with ControllerQuorum(tmp_path, 3) as quorum:
        leader = quorum.wait_for_leader()
        quorum.wait_applied(min_end_offset=10)

What a test observes is what Kafka keeps on disk: each member's ``quorum-state`` (leader and epoch),
``meta.properties`` (cluster id) and its snapshots of the applied metadata image (``.checkpoint`` files, written
every ``metadata.log.max.snapshot.interval.ms`` from the image, so a snapshot proves the member applied the
log). Every process started here is stopped by ``close()``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klog.metadata import MetadataImage, MetadataLoader
from klog.metadata.storage import METADATA_TOPIC, QuorumState, SnapshotId, read_quorum_state, read_snapshot
from klog.testing.kafka import free_port
from klog.testing.process import BrokerProcess, start_together

__all__ = ["FAST_QUORUM_TIMING", "ControllerQuorum", "MemberImage"]

#: Raft timing for tests: a follower stands for election after 1-1.5 s without a leader.
FAST_QUORUM_TIMING = {
    "controller.quorum.election.timeout.ms": 500,
    "controller.quorum.fetch.timeout.ms": 1000,
    "controller.quorum.election.backoff.max.ms": 500,
    "metadata.max.idle.interval.ms": 200,
    "metadata.log.max.snapshot.interval.ms": 500,
}
#: The log line of a controller-only node that is up (it has no client listener to announce).
QUORUM_READY = re.compile(r"controller \d+: quorum member on ")


@dataclass(frozen=True)
class MemberImage:
    """A member's latest snapshot of its applied image."""

    snapshot: SnapshotId
    image: MetadataImage


class ControllerQuorum:
    def __init__(self, root: str | os.PathLike[str], size: int, *, roles: str = "controller",
                 properties: Mapping[str, Any] | None = None, fixed_client_ports: bool = False,
                 first_id: int = 1, bootstrap_servers: bool = False,
                 node_properties: Mapping[int, Mapping[str, Any]] | None = None) -> None:
        """``first_id``: the node id of the first member (the others follow it). ``bootstrap_servers``: the members
        find each other through ``controller.quorum.bootstrap.servers`` (KIP-853) instead of
        ``controller.quorum.voters``, from the initial voter set :meth:`format` writes before :meth:`start`.
        ``node_properties``: per node id, settings on top of ``properties``."""
        self.root = Path(root)
        self.roles = roles
        self.controller_ports = {i: free_port() for i in range(first_id, first_id + size)}
        #: node -> its client (PLAINTEXT) port when ``fixed_client_ports`` (a restarted node listens there again);
        #: else each start binds a port the kernel picks
        self.client_ports = {i: free_port() for i in self.controller_ports} if fixed_client_ports else {}
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        #: ``controller.quorum.bootstrap.servers`` naming every member's controller listener
        self.bootstrap_servers = ",".join(f"127.0.0.1:{p}" for p in self.controller_ports.values())
        self.uses_bootstrap_servers = bootstrap_servers
        self.nodes: dict[int, BrokerProcess] = {}
        self.properties_files: dict[int, Path] = {}
        for i, port in self.controller_ports.items():
            props: dict[str, Any] = {
                "process.roles": roles, "node.id": i,
                **({"controller.quorum.bootstrap.servers": self.bootstrap_servers} if bootstrap_servers
                   else {"controller.quorum.voters": self.voters}),
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": str(self.log_dir(i)), **FAST_QUORUM_TIMING, **(properties or {}),
                **(node_properties or {}).get(i, {})}
            listeners = f"CONTROLLER://127.0.0.1:{port}"
            if "broker" in roles:
                listeners = f"PLAINTEXT://127.0.0.1:{self.client_ports.get(i, 0)},{listeners}"
            props["listeners"] = listeners
            path = self.root / f"node-{i}.properties"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            self.properties_files[i] = path
            # BrokerProcess passes listeners and log.dirs as overrides: the same values as the file.
            self.nodes[i] = BrokerProcess(self.log_dir(i), {"listeners": listeners}, properties_file=path,
                                          ready_re=None if "broker" in roles else QUORUM_READY)

    def log_dir(self, node: int) -> Path:
        return self.root / f"node-{node}"

    def metadata_dir(self, node: int) -> Path:
        return self.log_dir(node) / f"{METADATA_TOPIC}-0"

    # -- lifecycle -------------------------------------------------------------------------------
    def format(self, cluster_id: str, extra_args: tuple[str, ...] = ()) -> None:
        """``klog-broker format -t <cluster_id> --initial-controllers <every member>`` on every member (KIP-853), as
        ``kafka-storage format`` prepares a dynamic quorum (``extra_args``: more options, e.g. ``--add-records``)."""
        import subprocess
        from klog.metadata.storage import kafka_uuid, random_kafka_uuid
        from klog.testing.process import broker_command

        initial = ",".join(f"{i}@127.0.0.1:{p}:{kafka_uuid(random_kafka_uuid())}" for i, p in self.controller_ports.items())
        for i, path in self.properties_files.items():
            out = subprocess.run([*broker_command(), "format", "-t", cluster_id, "-c", str(path),
                                  "--initial-controllers", initial, *extra_args], capture_output=True, text=True,
                                 timeout=120)
            if out.returncode != 0:
                raise RuntimeError(f"klog-broker format of node {i} failed: {out.stderr}")

    def start(self) -> ControllerQuorum:
        try:
            start_together(self.nodes.values())
        except BaseException:
            self.close()
            raise
        return self

    def start_node(self, node: int) -> None:
        self.nodes[node].start()

    def kill(self, node: int) -> None:
        self.nodes[node].kill()

    def close(self) -> None:
        for n in self.nodes.values():
            n.stop()

    def __enter__(self) -> ControllerQuorum:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def live(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None]

    # -- what the members keep on disk -----------------------------------------------------------
    def quorum_state(self, node: int) -> QuorumState | None:
        return read_quorum_state(str(self.metadata_dir(node) / "quorum-state"))

    def cluster_id(self, node: int) -> str | None:
        from klog.controller.node import read_meta_properties

        props = read_meta_properties(str(self.log_dir(node)))
        return None if props is None else props.get("cluster.id")

    def member_image(self, node: int) -> MemberImage | None:
        """The latest snapshot ``node`` wrote of its applied image (None: none yet)."""
        d = self.metadata_dir(node)
        for _ in range(5):  # a snapshot may be replaced (the older one deleted) between listing and reading
            try:
                ids = sorted(i for i in (SnapshotId.parse(n) for n in os.listdir(d)) if i is not None)
                if not ids:
                    return None
                snap = read_snapshot(str(d / ids[-1].filename))
            except (FileNotFoundError, ValueError):
                time.sleep(0.05)
                continue
            loader = MetadataLoader()
            loader.load_snapshot(snap.batches, end_offset=ids[-1].end_offset, epoch=ids[-1].epoch,
                                 last_contained_log_time_ms=snap.last_contained_log_time_ms)
            return MemberImage(ids[-1], loader.image)
        return None

    def wait_for_leader(self, timeout: float = 30.0, exclude: int | None = None,
                        nodes: list[int] | None = None) -> int:
        """The leader every live member's (or every one of ``nodes``') quorum-state names, in one epoch."""
        deadline = time.monotonic() + timeout
        states: dict[int, QuorumState | None] = {}
        while time.monotonic() < deadline:
            states = {i: self.quorum_state(i) for i in (nodes or self.live())}
            seen = {(s.leader_id, s.leader_epoch) for s in states.values() if s is not None}
            if len(seen) == 1 and None not in states.values():
                leader, _ = seen.pop()
                if leader > 0 and leader != exclude and leader in states:
                    return leader
            time.sleep(0.1)
        raise TimeoutError(f"no leader agreed on within {timeout}s: {states}")

    def wait_applied(self, min_end_offset: int, nodes: list[int] | None = None,
                     timeout: float = 30.0) -> dict[int, MemberImage]:
        """Wait until each of ``nodes`` (default: the live ones) snapshotted an image of the log up to at
        least ``min_end_offset``; returns those images."""
        deadline = time.monotonic() + timeout
        got: dict[int, MemberImage | None] = {}
        while time.monotonic() < deadline:
            got = {i: self.member_image(i) for i in (nodes or self.live())}
            if all(m is not None and m.snapshot.end_offset >= min_end_offset for m in got.values()):
                return {i: m for i, m in got.items() if m is not None}
            time.sleep(0.1)
        raise TimeoutError(f"not every member applied the log up to offset {min_end_offset} within {timeout}s: "
                           + ", ".join(f"{i}: {None if m is None else m.snapshot}" for i, m in got.items()))

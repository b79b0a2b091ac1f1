"""A 3-5 node cluster of Apache Kafka 4.x or klog-broker processes, started from Kafka properties, that applies
fault steps.

    with FaultCluster(tmp, system="kafka", nodes=3, network=True) as cluster:
        cluster.bootstrap                 # "10.a.b.1:9092,10.a.b.2:9092,..." (or 127.0.0.1 ports on loopback)
        cluster.apply(step, history)      # start a fault step (kill, pause, isolate, split, netem, ...)
        cluster.heal(step, history)       # undo it (restart, SIGCONT, drop the rules, free the disk)

``network=True`` puts each node in its own network namespace (:mod:`~klog.testing.faults.netns`, root) with its
log dir on a filesystem of its own (a ``DISK_MIB`` tmpfs, so a full-disk fault hits one node); with
``network=False`` every node listens on 127.0.0.1 and only process faults (kill, pause) are possible, no root
needed. Nodes are combined (``process.roles=broker,controller``, all voters) unless ``dedicated_controller``
adds one controller-only node (id 100, never a fault target): then a fault can hit two brokers without taking
the metadata quorum with them (the unclean-election schedule needs that).

Every process is stopped and every namespace deleted by ``close()``, which runs on every exit path.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klog.controller.applier import new_cluster_id
from klog.records import decode_batches
from klog.testing.faults.history import HistoryWriter
from klog.testing.faults.netns import Network, fill_disk, free_disk
from klog.testing.faults.schedule import NETWORK_KINDS, FaultStep
from klog.testing.kafka import _LOG4J2, answers_api_versions, find_kafka_libs, free_port
from klog.testing.process import broker_command, stop_process

__all__ = ["FaultCluster", "FAULT_PROPERTIES", "SESSION_TIMEOUT_S", "SYSTEMS", "CONTROLLER_ID"]

SYSTEMS = ("kafka", "klog")
CONTROLLER_ID = 100
#: Kafka properties of a fault run: short timeouts so a fault is noticed within seconds, durable settings
FAULT_PROPERTIES: dict[str, Any] = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "auto.create.topics.enable": "false",
    "num.partitions": 3,
}
#: broker.session.timeout.ms of a fault run, in seconds: a pause step lasts longer than this
SESSION_TIMEOUT_S = FAULT_PROPERTIES["broker.session.timeout.ms"] / 1000
#: how long a (re)started node may take to answer ApiVersions on a loaded 2-core machine
NODE_START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
CLIENT_PORT = 9092
CONTROLLER_PORT = 9093


#: where Debian's libfaketime puts its preloadable library. Not the MT variant (libfaketimeMT, for "start at"
#: times that advance): its locks made 2M clock reads in a JVM 6x slower than this one, and Kafka's start under
#: it took over 2 minutes on this machine
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1")
#: each node's own filesystem in network mode (a tmpfs; a run writes tens of MiB a node in an hour)
DISK_MIB = 512


def faketime_env(offset_s: int) -> dict[str, str]:
    """Environment that shifts one process's wall clock (``CLOCK_REALTIME``, ``gettimeofday``, ``time``) by
    ``offset_s``; its monotonic clock stays true, as on a machine whose clock is merely set wrong. Works for
    the JVM as for Python and Rust (both read the clock through libc)."""
    lib = next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)
    if lib is None:
        raise RuntimeError("libfaketime not found (bash tools/install-peers.sh installs faketime and libfaketime)")
    return {"LD_PRELOAD": lib, "FAKETIME": f"{offset_s:+d}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


class Node:
    def __init__(self, node_id: int, roles: str, host: str, port: int, controller_port: int, directory: Path,
                 prefix: list[str]) -> None:
        self.id = node_id
        self.roles = roles
        self.host, self.port, self.controller_port = host, port, controller_port
        self.dir = directory
        self.prefix = prefix
        self.props_file = directory / "server.properties"
        self.data_dir = directory / "data"
        self.command: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, clock_offset_s: int = 0) -> None:
        """Start the node's process; ``clock_offset_s`` runs it with its wall clock that far off (libfaketime)."""
        env = None
        if clock_offset_s:
            env = {**os.environ, **faketime_env(clock_offset_s)}
        log = open(self.dir / "node.log", "ab")  # noqa: SIM115 - handed to the child
        clock = f" (wall clock {clock_offset_s:+d} s)" if clock_offset_s else ""
        log.write(f"\n==== start {time.strftime('%H:%M:%S')}{clock}\n".encode())
        log.flush()
        self.proc = subprocess.Popen([*self.prefix, *self.command], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        log.close()
        self.paused = False

    def ready(self) -> bool:
        if not self.is_broker:
            return self.alive
        return self.alive and answers_api_versions(self.port, host=self.host)

    def wait_ready(self, timeout: float = NODE_START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"node {self.id} exited with {self.proc and self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {self.id} not ready within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)
        self.paused = False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.paused:
            self.signal(signal.SIGCONT)
        stop_process(self.proc, STOP_TIMEOUT_S)
        self.paused = False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.dir / "node.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class FaultCluster:
    def __init__(self, root: str | os.PathLike[str], *, system: str = "kafka", nodes: int = 3, network: bool = False,
                 dedicated_controller: bool = False, properties: Mapping[str, Any] | None = None,
                 heap: str = "384m") -> None:
        assert system in SYSTEMS, system
        assert 1 <= nodes <= 5, nodes
        self.root = Path(root)
        self.system = system
        self.heap = heap
        self.properties = {**FAULT_PROPERTIES, **(properties or {})}
        self.dropped_properties: list[str] = []
        self.net = Network(nodes + (1 if dedicated_controller else 0)) if network else None
        self.broker_ids = list(range(1, nodes + 1))
        self.nodes: dict[int, Node] = {}
        ids = [*self.broker_ids, *([CONTROLLER_ID] if dedicated_controller else [])]
        for slot, node_id in enumerate(ids, 1):
            roles = "controller" if node_id == CONTROLLER_ID else ("broker" if dedicated_controller else
                                                                   "broker,controller")
            if self.net is not None:
                host, port, cport, prefix = self.net.ip(slot), CLIENT_PORT, CONTROLLER_PORT, self.net.exec_prefix(slot)
            else:
                host, port, cport, prefix = "127.0.0.1", free_port(), free_port(), []
            self.nodes[node_id] = Node(node_id, roles, host, port, cport, self.root / f"node-{node_id}", prefix)
        self.slot = {node_id: slot for slot, node_id in enumerate(ids, 1)}
        voters = [n for n in self.nodes.values() if "controller" in n.roles]
        self.voters = ",".join(f"{n.id}@{n.host}:{n.controller_port}" for n in voters)
        self._closed = True

    # -- configuration ---------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes.values() if n.is_broker)

    def _node_properties(self, node: Node) -> dict[str, Any]:
        listeners = [f"CONTROLLER://{node.host}:{node.controller_port}"] if "controller" in node.roles else []
        if node.is_broker:
            listeners.insert(0, f"PLAINTEXT://{node.host}:{node.port}")
        props: dict[str, Any] = {
            "process.roles": node.roles, "node.id": node.id, "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "listeners": ",".join(listeners), "log.dirs": str(node.data_dir), **self.properties}
        if node.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.port}"
        if self.system == "klog":
            from klog.metadata.config import BROKER_KEYS

            self.dropped_properties = sorted(k for k in props if k not in BROKER_KEYS)
            props = {k: v for k, v in props.items() if k in BROKER_KEYS}
        return props

    def _prepare(self) -> None:
        cluster_id = new_cluster_id()
        formats = []
        for node in self.nodes.values():
            node.dir.mkdir(parents=True, exist_ok=True)
            node.props_file.write_text("".join(f"{k}={v}\n" for k, v in self._node_properties(node).items()))
            if self.system == "kafka":
                libs = find_kafka_libs()
                log4j = node.dir / "log4j2.properties"
                log4j.write_text(_LOG4J2.format(log=node.dir / "kafka.log"))
                java = shutil.which("java")
                if java is None:
                    raise RuntimeError("java not found on PATH (Apache Kafka 4.x needs Java 17+)")
                jvm = [java, f"-Dlog4j2.configurationFile={log4j}", "-Djava.awt.headless=true", "-cp", f"{libs}/*"]
                node.command = [java, f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC", *jvm[1:], "kafka.Kafka",
                                str(node.props_file)]
                formats.append(subprocess.Popen(
                    [*jvm, "-Xmx256m", "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                     str(node.props_file)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            else:
                node.command = [*broker_command(), str(node.props_file)]
        for proc in formats:
            out, _ = proc.communicate(timeout=180)
            if proc.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed: {out.decode(errors='replace')}")

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> FaultCluster:
        self._closed = False
        try:
            if self.net is not None:
                self.net.open()
                for node_id, node in self.nodes.items():
                    self.net.mount_disk(self.slot[node_id], node.data_dir, DISK_MIB)
            self._prepare()
            for node in self.nodes.values():
                node.spawn()
            for node in self.nodes.values():
                node.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for node in self.nodes.values():
                try:
                    node.stop()
                except Exception:  # noqa: BLE001 - keep stopping the others, then delete the namespaces
                    node.kill()
        finally:
            if self.net is not None:
                self.net.close()

    def __enter__(self) -> FaultCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- observing -------------------------------------------------------------------------------------------
    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000})

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int | None:
        try:
            md = self.admin().list_topics(topic, timeout=timeout)
        except Exception:  # noqa: BLE001 - a cluster under faults may not answer; the caller decides
            return None
        t = md.topics.get(topic)
        if t is None or t.error is not None or partition not in t.partitions:
            return None
        leader = t.partitions[partition].leader
        return leader if leader >= 0 else None

    def wait_in_sync(self, topic: str, partitions: int, timeout: float = 60.0) -> bool:
        """Wait until every partition of ``topic`` has a leader and its full replica set in sync."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                md = self.admin().list_topics(topic, timeout=5)
                parts = md.topics[topic].partitions
                if len(parts) == partitions and all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas)
                                                    for p in parts.values()):
                    return True
            except Exception:  # noqa: BLE001 - retry until the deadline
                pass
            time.sleep(0.5)
        return False

    def replica_logs(self, topic: str, partition: int) -> dict[int, list[tuple[int, Any]]]:
        """Each broker's records of one partition, read from its own segment files (Kafka's on-disk format)."""
        logs: dict[int, list[tuple[int, Any]]] = {}
        for node_id in self.broker_ids:
            pdir = self.nodes[node_id].data_dir / f"{topic}-{partition}"
            if not pdir.is_dir():
                continue
            records: list[tuple[int, Any]] = []
            for seg in sorted(pdir.glob("*.log")):
                for batch in decode_batches(seg.read_bytes(), allow_partial_trailing=True):
                    if batch.is_control:
                        continue
                    records += [(r.offset, None if r.value is None else bytes(r.value).decode()) for r in batch.records]
            logs[node_id] = records
        return logs

    # -- faults ----------------------------------------------------------------------------------------------
    def resolve_target(self, step: FaultStep, topic: str) -> int | None:
        if step.target == "leader":
            return self.leader_of(topic)
        return step.target if isinstance(step.target, int) else None

    def apply(self, step: FaultStep, history: HistoryWriter, topic: str) -> dict[str, Any]:
        """Start ``step``; returns what was done (logged as the fault's start event)."""
        if step.kind in NETWORK_KINDS and self.net is None:
            raise ValueError(f"fault {step.kind!r} needs the network-namespace mode (network=True, root)")
        target = self.resolve_target(step, topic)
        done: dict[str, Any] = {"fault": step.kind, "nodes": [target] if target is not None else []}
        if step.kind in ("kill", "pause", "isolate", "isolate-leader", "netem", "corrupt", "disk-full", "clock") \
                and target is None:
            done["detail"] = "no target (no leader known): skipped"
        elif step.kind == "kill":
            self.nodes[target].kill()  # type: ignore[index]
        elif step.kind == "corrupt":
            sole = self.sole_in_sync(topic, target)  # type: ignore[arg-type]
            self.nodes[target].kill()  # type: ignore[index]
            done["detail"] = self.corrupt_tail(target, topic, step.params, spare=sole)  # type: ignore[arg-type]
        elif step.kind == "disk-full":
            filled = fill_disk(self.nodes[target].data_dir)  # type: ignore[index]
            done["detail"] = f"filled with {filled >> 20} MiB"
        elif step.kind == "clock":
            offset = int(step.params["offset_s"])
            self.nodes[target].kill()  # type: ignore[index]
            self.nodes[target].spawn(clock_offset_s=offset)  # type: ignore[index]
            done["detail"] = f"wall clock {offset:+d} s"
            try:
                self.nodes[target].wait_ready()  # type: ignore[index]
            except (TimeoutError, RuntimeError) as e:
                done["detail"] += f"; start failed: {str(e).splitlines()[0]}"
        elif step.kind == "pause":
            self.nodes[target].signal(signal.SIGSTOP)  # type: ignore[index]
            self.nodes[target].paused = True  # type: ignore[index]
        elif step.kind in ("isolate", "isolate-leader"):
            assert self.net is not None and target is not None
            self.net.isolate(self.slot[target])
        elif step.kind == "split":
            assert self.net is not None
            self.net.partition([[self.slot[n] for n in g] for g in step.groups])
            done["nodes"] = [list(g) for g in step.groups]
        elif step.kind == "ring":
            assert self.net is not None
            self.net.cut([(self.slot[a], self.slot[b]) for a, b in step.groups])
            done["nodes"] = [list(g) for g in step.groups]
        elif step.kind == "netem":
            assert self.net is not None and target is not None
            if "loss_percent" in step.params:
                self.net.loss(self.slot[target], int(step.params["loss_percent"]))
                done["detail"] = f"loss {step.params['loss_percent']}%"
            elif "duplicate_percent" in step.params:
                self.net.duplicate(self.slot[target], int(step.params["duplicate_percent"]))
                done["detail"] = f"duplicate {step.params['duplicate_percent']}%"
            else:
                try:
                    self.net.delay(self.slot[target], int(step.params["delay_ms"]))
                    done["detail"] = f"delay {step.params['delay_ms']} ms"
                except NotImplementedError as e:
                    done["detail"] = f"unsupported: {e}"
        history.fault(step.kind, "start", nodes=done["nodes"], detail=done.get("detail"), at_s=step.at_s)
        return done

    def heal(self, step: FaultStep, done: dict[str, Any], history: HistoryWriter) -> None:
        nodes = [n for n in done["nodes"] if isinstance(n, int)]
        detail = None
        if step.kind in ("kill", "corrupt", "disk-full", "clock"):
            for n in nodes:
                if step.kind == "disk-full":  # space back, then a restart takes the log dir online again
                    free_disk(self.nodes[n].data_dir)
                    if self.nodes[n].alive:
                        self.nodes[n].stop()
                elif step.kind == "clock":
                    self.nodes[n].kill()
                self.nodes[n].spawn()
                try:
                    self.nodes[n].wait_ready()
                except (TimeoutError, RuntimeError) as e:
                    detail = f"restart of node {n} failed: {str(e).splitlines()[0]}"
        elif step.kind == "pause":
            for n in nodes:
                self.nodes[n].signal(signal.SIGCONT)
                self.nodes[n].paused = False
        elif self.net is not None:
            self.net.heal()
        history.fault(step.kind, "end", nodes=done["nodes"], detail=detail)

    def sole_in_sync(self, topic: str, node: int) -> set[int] | None:
        """The partitions of ``topic`` whose only in-sync replica is ``node`` (None: metadata unavailable)."""
        try:
            parts = self.admin().list_topics(topic, timeout=5).topics[topic].partitions
        except Exception:  # noqa: BLE001 - a cluster under faults may not answer
            return None
        return {p for p, md in parts.items() if list(md.isrs) == [node]}

    def corrupt_tail(self, node: int, topic: str, params: Mapping[str, Any], spare: set[int] | None = None) -> str:
        """Damage the end of the active (last) segment of one of ``topic``'s partitions on ``node`` (stopped):
        cut ``bytes`` off, or flip one bit ``bytes`` from the end. Returns what was done. Partitions in
        ``spare`` (those whose only in-sync copy is this node's: damaging it destroys acknowledged writes, which
        no ISR survives) are left alone; with ``spare`` None (unknown) nothing is damaged."""
        if spare is None:
            return "ISR unknown (no metadata): nothing corrupted"
        dirs = sorted(d for d in self.nodes[node].data_dir.glob(f"{topic}-*")
                      if d.is_dir() and int(d.name.rsplit("-", 1)[1]) not in spare)
        if not dirs:
            return "no partition of the topic on this node with another in-sync replica: nothing corrupted"
        pdir = dirs[int(params["partition_pick"]) % len(dirs)]
        segments = sorted(pdir.glob("*.log"))
        if not segments or segments[-1].stat().st_size == 0:
            return f"{pdir.name}: empty active segment, nothing corrupted"
        seg, size = segments[-1], segments[-1].stat().st_size
        back = min(int(params["bytes"]), size)
        if params["mode"] == "truncate":
            os.truncate(seg, size - back)
            return f"{pdir.name}/{seg.name}: cut {back} of {size} bytes"
        with open(seg, "r+b") as f:
            f.seek(size - back)
            byte = f.read(1)[0]
            f.seek(size - back)
            f.write(bytes([byte ^ (1 << (back % 8))]))
        return f"{pdir.name}/{seg.name}: flipped bit {back % 8} of byte {size - back} of {size}"

    def heal_all(self) -> None:
        """Undo everything (before the final read): SIGCONT, restart the dead, drop every network rule."""
        if self.net is not None:
            self.net.heal()
        for node in self.nodes.values():
            free_disk(node.data_dir)
            if node.paused:
                node.signal(signal.SIGCONT)
                node.paused = False
            if not node.alive:
                node.spawn()
        for node in self.nodes.values():
            node.wait_ready()

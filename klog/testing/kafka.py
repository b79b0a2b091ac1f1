"""Run a real Apache Kafka 4.x broker (KRaft, single combined node) for tests and benchmarks.

The jars come from Maven Central via ``tools/install-peers.sh`` (``.cache/kafka/libs``). Usage::

    with apache_kafka(tmp_path) as bootstrap:
        producer = klog.Producer(bootstrap_servers=bootstrap)

The broker listens on 127.0.0.1 only, keeps its data and logs in ``tmp_dir`` and is stopped (then
killed if it does not stop in time) when the context exits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import struct
import subprocess
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from klog.protocol.errors import ErrorCode
from klog.testing.cluster_api import Cluster
from klog.testing.ports import free_port
from klog.testing.process import stop_process

if TYPE_CHECKING:
    from klog.testing.process import BrokerProcess

__all__ = ["apache_kafka", "apache_kafka_again", "answers_api_versions", "Bootstrap", "find_kafka_libs", "free_port",
           "kafka_server_properties", "KafkaCluster", "KafkaStartError", "log4j2_file_properties", "one_broker",
           "INTERNAL_TOPIC_PROPERTIES", "one_broker_node", "read_properties", "sasl_plain_authorizer_properties"]

#: How long a freshly formatted single-node broker may take to answer ApiVersions on a loaded 2-core machine.
STARTUP_TIMEOUT_S = 120.0
DEFAULT_STARTUP_TIMEOUT_S = STARTUP_TIMEOUT_S
#: How long a clean shutdown may take before the process is killed.
SHUTDOWN_TIMEOUT_S = 30.0


class Bootstrap(str):
    """The bootstrap address ("127.0.0.1:<port>"), also carrying the broker process's ``pid``."""

    pid: int


class KafkaStartError(RuntimeError):
    """The Apache Kafka broker could not be started; the message carries the tail of its log."""


def find_kafka_libs(start: str | os.PathLike[str] | None = None) -> Path:
    """Locate the directory of Kafka jars.

    ``$KLOG_KAFKA_LIBS`` wins; otherwise ``.cache/kafka/libs`` is searched upwards from ``start``
    (default: the current directory) and from this source file's location.
    """
    env = os.environ.get("KLOG_KAFKA_LIBS")
    if env:
        path = Path(env)
        if not any(path.glob("kafka_2.13-*.jar")):
            raise KafkaStartError(f"KLOG_KAFKA_LIBS={env} holds no kafka_2.13-*.jar")
        return path
    roots = [Path(start) if start is not None else Path.cwd(), Path(__file__).resolve().parent]
    for root in roots:
        for d in [root.resolve(), *root.resolve().parents]:
            candidate = d / ".cache" / "kafka" / "libs"
            if any(candidate.glob("kafka_2.13-*.jar")):
                return candidate
    raise KafkaStartError(
        "Apache Kafka jars not found (.cache/kafka/libs); run `bash tools/install-peers.sh` "
        "or set KLOG_KAFKA_LIBS"
    )


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def log4j2_file_properties(log: Path) -> str:
    """A Log4j 2 properties file sending a Kafka JVM's (broker, Connect worker, MirrorMaker) INFO log to ``log``."""
    return _LOG4J2.format(log=log)


#: the internal topics' settings every test broker starts with, Kafka's and klog's alike (:func:`one_broker`), so
#: their internal topics are made the same
INTERNAL_TOPIC_PROPERTIES: dict[str, object] = {
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 4,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
}


def _server_properties(data_dir: Path, port: int, controller_port: int, extra: Mapping[str, object], *,
                       node_id: int = 1, voters: str | None = None, roles: str = "broker,controller") -> str:
    """A node's server.properties: a combined node of a quorum of its own (``controller.quorum.bootstrap.servers``,
    formatted ``--standalone``), or a node (``roles``) of the static quorum ``voters`` (``controller.quorum.voters``;
    a controller-only node has no client listener, a broker-only node no controller listener)."""
    quorum = {"controller.quorum.voters": voters} if voters else \
        {"controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}"}
    listeners = [f"PLAINTEXT://127.0.0.1:{port}"] if "broker" in roles else []
    if "controller" in roles:
        listeners.append(f"CONTROLLER://127.0.0.1:{controller_port}")
    broker_only_keys: dict[str, object] = {"inter.broker.listener.name": "PLAINTEXT"} if "broker" in roles else {}
    props: dict[str, object] = {
        "process.roles": roles,
        "node.id": node_id,
        **quorum,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(listeners),
        **broker_only_keys,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": 1,
        **INTERNAL_TOPIC_PROPERTIES,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
    }
    props.update(extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def kafka_server_properties(data_dir: Path, port: int, controller_port: int,
                            extra: Mapping[str, object] | None = None) -> str:
    """The server.properties :func:`apache_kafka` runs a node with (a combined node, a quorum of its own on
    ``controller_port``, formatted ``--standalone``): for a test that formats and starts it otherwise."""
    return _server_properties(data_dir, port, controller_port, extra or {})


def read_properties(path: Path) -> dict[str, str]:
    """A .properties file's ``key=value`` lines (comments and blank lines skipped)."""
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _log_tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def answers_api_versions(port: int, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None, *,
                         timeout: float = 1.0) -> bool:
    """True once the broker answers an ApiVersions v0 request without error (over TLS with ``tls``: a SASL_SSL
    listener answers ApiVersions before the login).

    A KRaft broker enables request processing only after it is unfenced, so an answer means ready: a
    signal that does not depend on the wording of its log lines.
    """
    client_id = b"klog-probe"
    request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            s = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
            s.sendall(struct.pack(">i", len(request)) + request)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            body = _recv_exact(s, size)
            correlation_id, error_code = struct.unpack_from(">ih", body)
            return correlation_id == 1 and error_code == ErrorCode.NONE
    except (OSError, struct.error):
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def _spawn_kafka(jvm: list[str], heap: str, props_file: Path, stdout: Any) -> subprocess.Popen[bytes]:
    """``kafka.Kafka props_file`` with ``kafka-server-start.sh``'s heap flags (``-Xmx`` = ``-Xms``, G1); ``jvm`` is
    the java command with its log4j and classpath options."""
    return subprocess.Popen([jvm[0], f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", *jvm[1:], "kafka.Kafka",
                             str(props_file)], stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _await_serving(proc: subprocess.Popen[bytes], port: int, timeout: float, base: Path, who: str,
                   tls: ssl.SSLContext | None = None) -> None:
    """Until the process answers ApiVersions on ``port`` (over TLS with ``tls``); KafkaStartError with its log tails
    if it exits or ``timeout`` passes first (its logs are ``base``/kafka.log and kafka.stdout)."""
    deadline = time.monotonic() + timeout
    while not answers_api_versions(port, tls=tls):
        if proc.poll() is not None:
            raise KafkaStartError(f"{who} exited with {proc.returncode} during startup:\n"
                                  f"{_log_tail(base / 'kafka.log')}\n{_log_tail(base / 'kafka.stdout')}")
        if time.monotonic() > deadline:
            raise KafkaStartError(f"{who} did not start within {timeout:.0f} s:\n{_log_tail(base / 'kafka.log')}\n"
                                  f"{_log_tail(base / 'kafka.stdout')}")
        time.sleep(0.2)


@contextlib.contextmanager
def apache_kafka(
    tmp_dir: str | os.PathLike[str],
    port: int | None = None,
    *,
    config: Mapping[str, object] | None = None,
    libs: str | os.PathLike[str] | None = None,
    heap: str = "1G",
    startup_timeout: float = STARTUP_TIMEOUT_S,
    format_args: Sequence[str] = (),
    jvm_options: Sequence[str] = (),
) -> Iterator[Bootstrap]:
    """Start a single-node KRaft Apache Kafka broker and yield its bootstrap string ``127.0.0.1:PORT``
    (a :class:`Bootstrap`, whose ``pid`` is the broker process).

    The heap flags are those of ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1) unless ``heap`` says otherwise.

    ``config`` overrides/extends server.properties (Kafka names). The broker's data, config and log
    live under ``tmp_dir``; the process is stopped when the context exits. ``format_args``: added to
    ``kafka-storage format`` (``--release-version 4.0``, ``--feature share.version=0``); ``jvm_options``: added to
    the broker's java command (system properties such as ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...``).
    """
    java = shutil.which("java")
    if java is None:
        raise KafkaStartError("java not found on PATH (Apache Kafka 4.x needs Java 17+)")
    libs_dir = Path(libs) if libs is not None else find_kafka_libs()
    base = Path(tmp_dir)
    base.mkdir(parents=True, exist_ok=True)
    data_dir = base / "kafka-data"
    port = port or free_port()
    controller_port = free_port()
    while controller_port == port:
        controller_port = free_port()

    props_file = base / "server.properties"
    props_file.write_text(_server_properties(data_dir, port, controller_port, config or {}))
    log_file = base / "kafka.log"
    log4j_file = base / "log4j2.properties"
    log4j_file.write_text(log4j2_file_properties(log_file))
    classpath = f"{libs_dir}/*"
    jvm = [java, f"-Dlog4j2.configurationFile={log4j_file}", "-Djava.awt.headless=true", *jvm_options, "-cp",
           classpath]

    from klog.controller.applier import new_cluster_id

    cluster_id = new_cluster_id()   # kafka-storage random-uuid's format, without a JVM start
    fmt = subprocess.run(
        [*jvm, "kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id, "-c", str(props_file),
         *format_args],
        capture_output=True, text=True, timeout=120,
    )
    if fmt.returncode != 0:
        raise KafkaStartError(f"kafka-storage format failed: {fmt.stdout}\n{fmt.stderr}")

    with _serving(jvm, heap, props_file, port, startup_timeout) as bootstrap:
        yield bootstrap


@contextlib.contextmanager
def _serving(jvm: list[str], heap: str, props_file: Path, port: int, startup_timeout: float) -> Iterator[Bootstrap]:
    """A Kafka process on ``props_file`` (its logs beside it), serving on ``port`` until the context exits."""
    base = props_file.parent
    stdout = open(base / "kafka.stdout", "ab")
    proc = _spawn_kafka(jvm, heap, props_file, stdout)
    try:
        _await_serving(proc, port, startup_timeout, base, "Apache Kafka")
        bootstrap = Bootstrap(f"127.0.0.1:{port}")
        bootstrap.pid = proc.pid
        yield bootstrap
    finally:
        stop_process(proc, SHUTDOWN_TIMEOUT_S)
        stdout.close()


@contextlib.contextmanager
def apache_kafka_again(tmp_dir: str | os.PathLike[str], *, libs: str | os.PathLike[str] | None = None,
                       heap: str = "1G", startup_timeout: float = STARTUP_TIMEOUT_S) -> Iterator[Bootstrap]:
    """Start Apache Kafka, unformatted, on the server.properties and data in ``tmp_dir`` (those an
    :func:`apache_kafka` context left, whatever ran on them meanwhile, or :func:`kafka_server_properties`' and a
    klog node's): its bootstrap string, as :func:`apache_kafka`'s."""
    java = shutil.which("java")
    if java is None:
        raise KafkaStartError("java not found on PATH (Apache Kafka 4.x needs Java 17+)")
    base = Path(tmp_dir)
    props_file = base / "server.properties"
    listeners = read_properties(props_file)["listeners"]
    port = int(listeners.split(",")[0].rsplit(":", 1)[1])
    libs_dir = Path(libs) if libs is not None else find_kafka_libs()
    log4j_file = base / "log4j2.properties"
    if not log4j_file.exists():
        log4j_file.write_text(log4j2_file_properties(base / "kafka.log"))
    jvm = [java, f"-Dlog4j2.configurationFile={log4j_file}", "-Djava.awt.headless=true", "-cp", f"{libs_dir}/*"]
    with _serving(jvm, heap, props_file, port, startup_timeout) as bootstrap:
        yield bootstrap


@contextlib.contextmanager
def one_broker(kind: str, root: str | os.PathLike[str], properties: Mapping[str, object] | None = None,
               *, heap: str = "512m", extra_listeners: Sequence[str] = (),
               jvm_options: Sequence[str] = ()) -> Iterator[str]:
    """One broker, ``kind`` ``"klog"`` (a ``klog-broker`` process, data in ``root/data``) or ``"kafka"`` (Apache
    Kafka, data in ``root/kafka-data``), started from the same ``properties`` (Kafka's names): its bootstrap
    servers (the PLAINTEXT listener). The same test then runs on both, which is how a test checks Kafka's
    semantics, not a guess of them. Without Kafka's jars (tools/install-peers.sh fetches them) the Kafka side is
    skipped. ``extra_listeners``: listeners beside PLAINTEXT on fixed ports, e.g.
    ``"SASL_PLAINTEXT://127.0.0.1:PORT"`` (their protocols in ``properties``' listener.security.protocol.map
    when the name is not one); ``jvm_options``: the Kafka side's extra java options."""
    with one_broker_node(kind, root, properties, heap=heap, extra_listeners=extra_listeners,
                         jvm_options=jvm_options) as (bootstrap, _node):
        yield bootstrap


def sasl_plain_authorizer_properties(users: Mapping[str, str]) -> dict[str, object]:
    """Properties (Kafka's names) of a broker with a SASL_PLAINTEXT listener taking PLAIN logins of ``users``
    (name -> password; ``admin`` among them), Kafka's StandardAuthorizer and the super users ``User:admin`` and
    ``User:ANONYMOUS`` (the brokers' own PLAINTEXT listeners, inter-broker and controller): for
    :func:`one_broker` with ``extra_listeners=["SASL_PLAINTEXT://127.0.0.1:PORT"]``."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
            f'password="{users["admin"]}" ' + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";")
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
    }


@contextlib.contextmanager
def one_broker_node(kind: str, root: str | os.PathLike[str], properties: Mapping[str, object] | None = None,
                    *, heap: str = "512m", extra_listeners: Sequence[str] = (),
                    jvm_options: Sequence[str] = ()) -> Iterator[tuple[str, BrokerProcess | None]]:
    """:func:`one_broker`, with the klog process beside the bootstrap servers (its log lines, its pid; None for
    Kafka)."""
    base = Path(root)
    props = dict(properties or {})
    extra = "".join("," + listener for listener in extra_listeners)
    if kind == "klog":
        from klog.testing.process import BrokerProcess

        with BrokerProcess(base / "data", {**INTERNAL_TOPIC_PROPERTIES, **props,
                                           "listeners": "PLAINTEXT://127.0.0.1:0" + extra}) as node:
            yield node.bootstrap_servers, node
        return
    assert kind == "kafka", kind
    try:
        find_kafka_libs()
    except Exception as exc:  # noqa: BLE001 - any reason the jars cannot be found
        import pytest

        pytest.skip(f"Apache Kafka jars not available: {exc}")
    port = free_port()
    if extra:
        controller = free_port()
        props.update({"listeners": f"PLAINTEXT://127.0.0.1:{port}{extra},CONTROLLER://127.0.0.1:{controller}",
                      "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}{extra}",
                      "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}"})
    with apache_kafka(base, port, heap=heap, config=props, jvm_options=jvm_options) as bootstrap:
        yield str(bootstrap), None


class KafkaCluster(Cluster):
    """N Apache Kafka 4.x combined ``broker,controller`` nodes with a static quorum (``controller.quorum.voters``)
    on 127.0.0.1, formatted with one cluster id: :class:`klog.testing.cluster.KlogCluster`'s interface, so one test
    script checks Kafka's behaviour and klog's. ``properties`` are added to every node's server.properties,
    ``node_properties[i]`` to node i's."""

    kind = "kafka"

    def __init__(self, root: str | os.PathLike[str], size: int = 3, *, properties: Mapping[str, object] | None = None,
                 node_properties: Mapping[int, Mapping[str, object]] | None = None,
                 libs: str | os.PathLike[str] | None = None, heap: str = "512m",
                 startup_timeout: float = STARTUP_TIMEOUT_S, controllers: int = 0, format_args: Sequence[str] = (),
                 probe_tls: ssl.SSLContext | None = None, controller_probe_tls: ssl.SSLContext | None = None) -> None:
        """``controllers=K``: Kafka's dedicated layout, as :class:`klog.testing.cluster.KlogCluster`'s: K
        ``process.roles=controller`` nodes (ids 101...) and ``size`` ``process.roles=broker`` nodes (ids 1..N).
        ``format_args``: added to every node's ``kafka-storage format`` (``--add-scram ...``); ``probe_tls``: the
        nodes' client listeners are TLS (SSL, SASL_SSL), the start-up probe connects with this context;
        ``controller_probe_tls``: likewise for the controller listener of controller-only nodes (SSL)."""
        super().__init__(size)
        java = shutil.which("java")
        if java is None:
            raise KafkaStartError("java not found on PATH (Apache Kafka 4.x needs Java 17+)")
        self.java = java
        self.libs = Path(libs) if libs is not None else find_kafka_libs()
        self.root = Path(root)
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.format_args = list(format_args)
        self.probe_tls = probe_tls
        self.controller_probe_tls = controller_probe_tls
        self.properties = dict(properties or {})
        self.node_properties = {i: dict(p) for i, p in (node_properties or {}).items()}
        ports: set[int] = set()
        while len(ports) < 2 * size + controllers:
            ports.add(free_port())
        chosen = sorted(ports)
        self.client_ports = {i: chosen[2 * (i - 1)] for i in self.node_ids}
        if controllers:   # ids as KlogCluster's (klog.testing.cluster.CONTROLLER_ID_BASE)
            self.controller_ports = {100 + k: chosen[2 * size + k - 1] for k in range(1, controllers + 1)}
        else:
            self.controller_ports = {i: chosen[2 * (i - 1) + 1] for i in self.node_ids}
        #: the quorum's nodes (every node when combined)
        self.controller_ids = sorted(self.controller_ports)
        self.roles = {i: "broker,controller" for i in self.node_ids}
        if controllers:
            self.roles = {**{i: "broker" for i in self.node_ids}, **{i: "controller" for i in self.controller_ids}}
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._outputs: dict[int, Any] = {}
        #: node -> the server.properties it runs unchanged (:meth:`from_properties_files`); else generated
        self.properties_files: dict[int, Path] = {}

    @classmethod
    def from_properties_files(cls, root: str | os.PathLike[str], files: Mapping[int, Path], **kw: Any
                              ) -> KafkaCluster:
        """Nodes started from existing server.properties files (node id -> file, ids 1..N), unchanged but for the
        ``kafka-storage format`` step klog does not need; the ports are read from their ``listeners``."""
        cluster = cls(root, len(files), **kw)
        assert sorted(files) == cluster.node_ids, sorted(files)
        for node, path in files.items():
            props = read_properties(Path(path))
            controllers = set(props.get("controller.listener.names", "CONTROLLER").split(","))
            for listener in props["listeners"].split(","):
                name, _, address = listener.partition("://")
                port = int(address.rsplit(":", 1)[1])
                if name in controllers:
                    cluster.controller_ports[node] = port
                else:
                    cluster.client_ports[node] = port
            cluster.properties_files[node] = Path(path)
        return cluster

    def _dir(self, node: int) -> Path:
        return self.root / f"kafka-{node}"

    def log_dir(self, node: int) -> Path:
        if node in self.properties_files:
            return Path(read_properties(self.properties_files[node])["log.dirs"].split(",")[0])
        return self._dir(node) / "kafka-data"

    def _jvm(self, node: int) -> list[str]:
        return [self.java, f"-Dlog4j2.configurationFile={self._dir(node) / 'log4j2.properties'}",
                "-Djava.awt.headless=true", "-cp", f"{self.libs}/*"]

    def start(self) -> KafkaCluster:
        from klog.controller.applier import new_cluster_id

        try:
            # kafka-storage random-uuid's format, without a JVM start (a few seconds each on a loaded machine)
            cluster_id = new_cluster_id()
            formatting: dict[int, subprocess.Popen[str]] = {}
            for i in self.roles:
                base = self._dir(i)
                base.mkdir(parents=True, exist_ok=True)
                if i in self.properties_files:
                    (base / "server.properties").write_text(self.properties_files[i].read_text())
                else:
                    (base / "server.properties").write_text(_server_properties(
                        base / "kafka-data", self.client_ports.get(i, 0), self.controller_ports.get(i, 0),
                        {**self.properties, **self.node_properties.get(i, {})}, node_id=i, voters=self.voters,
                        roles=self.roles[i]))
                (base / "log4j2.properties").write_text(log4j2_file_properties(base / "kafka.log"))
                # the nodes' kafka-storage format steps run together (one JVM each)
                formatting[i] = subprocess.Popen([*self._jvm(i), "kafka.tools.StorageTool", "format", "-t", cluster_id,
                                                  "-c", str(base / "server.properties"), *self.format_args],
                                                 stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
            failed = []
            for i, fmt in formatting.items():
                try:
                    output, _ = fmt.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    fmt.kill()
                    output, _ = fmt.communicate()
                if fmt.returncode != 0:
                    failed.append(f"kafka-storage format of node {i} failed ({fmt.returncode}): {output}")
            if failed:
                raise KafkaStartError("\n".join(failed))
            self.spawned_at = time.monotonic()
            for i in self.roles:
                self._spawn(i)
            for i in self.roles:
                self._wait_started(i)
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(self, node: int) -> None:
        base = self._dir(node)
        self._outputs[node] = open(base / "kafka.stdout", "ab")
        self.procs[node] = _spawn_kafka(self._jvm(node), self.heap, base / "server.properties", self._outputs[node])

    def _wait_started(self, node: int) -> None:
        # a controller-only node answers ApiVersions on its controller listener
        port = self.client_ports[node] if node in self.client_ports else self.controller_ports[node]
        _await_serving(self.procs[node], port, self.startup_timeout, self._dir(node), f"Apache Kafka node {node}",
                       tls=self.probe_tls if node in self.client_ports else self.controller_probe_tls)

    def pid(self, node: int) -> int | None:
        proc = self.procs.get(node)
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill(self, node: int) -> None:
        self.paused.discard(node)
        proc = self.procs.get(node)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop_node(self, node: int) -> int:
        proc = self.procs.get(node)
        if proc is None:
            return 0
        if proc.poll() is None and node in self.paused:
            self.resume(node)
        return stop_process(proc, SHUTDOWN_TIMEOUT_S)

    def restart(self, node: int) -> None:
        if self.pid(node) is not None:
            self.stop_node(node)
        self._spawn(node)
        self._wait_started(node)

    def close(self) -> None:
        for i in list(self.paused):
            self.resume(i)
        # broker-only nodes first (an operator's order: their controlled shutdown needs the controllers, without
        # them each waits out its shutdown timeout), then the quorum; within a group SIGTERM all, so they stop together
        brokers_only = [i for i in self.procs if self.roles.get(i) == "broker"]
        for group in (brokers_only, [i for i in self.procs if i not in brokers_only]):
            for i in group:
                proc = self.procs[i]
                if proc.poll() is None:
                    proc.terminate()
            for i in group:
                self.stop_node(i)
        for out in self._outputs.values():
            out.close()

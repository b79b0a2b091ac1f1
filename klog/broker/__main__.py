"""``klog-broker [server.properties] [--override key=value ...] [--log-level LEVEL]``.

With no arguments: one node, data in ./klog-data, listener PLAINTEXT://127.0.0.1:9092, topics auto-created.
With a properties file: Kafka's own property names (``kafka-server-start.sh``'s invocation also works).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from klog.metadata.config import BrokerConfig, ConfigError, load_properties, parse_overrides

log = logging.getLogger("klog.broker")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="klog-broker",
        description="Run a Kafka-compatible klog broker. Without a properties file it serves "
                    "PLAINTEXT://127.0.0.1:9092 with data in ./klog-data.")
    parser.add_argument("config", nargs="?", help="a Kafka server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a config property (repeatable), as with kafka-server-start.sh")
    parser.add_argument("--log-level", default="INFO", type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                        help="stderr log level, any case (default INFO)")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    return parser


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, with the version looked up only when asked for (importlib.metadata is not
    loaded by a broker's start-up)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"klog-broker {_version()}")
        parser.exit()


def _version() -> str:
    import klog

    return klog.__version__


def load_config(path: str | None, overrides: list[str]) -> BrokerConfig:
    props: dict[str, str] = load_properties(path) if path else {}
    props.update(parse_overrides(overrides))
    return BrokerConfig(props)


def configure_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def quorum_config(config: BrokerConfig, image_of: Callable[[], Any] | None = None) -> Any:
    """The controller-quorum settings (an observer's on a ``process.roles=broker`` node); a misconfiguration is a
    ConfigError naming the key. ``image_of()``: the node's metadata image once it has one (else None): connections
    to and from the controller listener follow its dynamic ``listener.name.<controller>.ssl.*`` configs of this
    node, as the broker's listeners do."""
    from klog.controller.observer import ObserverConfig
    from klog.controller.quorum import QuorumConfig, QuorumConfigError

    dynamic_ssl = None
    if image_of is not None and config["controller.listener.names"]:
        from klog.metadata.config_security import dynamic_ssl_settings
        from klog.metadata.image import ConfigResourceType

        resource = (ConfigResourceType.BROKER, str(config.node_id))
        name = str(config["controller.listener.names"][0]).strip().upper()

        def dynamic_ssl() -> Mapping[str, str]:
            image = image_of()
            return {} if image is None else dynamic_ssl_settings(image.configs.get(resource, {}), name)
    try:
        if "controller" not in config.roles:
            return ObserverConfig.from_broker_config(config, dynamic_ssl=dynamic_ssl)
        return QuorumConfig.from_broker_config(config, dynamic_ssl=dynamic_ssl)
    except QuorumConfigError as exc:
        key, _, message = str(exc).partition(": ")
        raise ConfigError(key.split(" ")[0], message or str(exc)) from None


def controller_node(config: BrokerConfig, port: Any = None, meta: Any = None) -> Any:
    """The controller role of a node of a multi-node quorum (``controller.quorum.voters`` set), else None.
    ``port``: the controller port's non-Raft connections (a klog.controller.listener_port.ListenerPort, shared with
    the node's controller listener; None: one of its own). ``meta``: the node's
    klog.controller.meta_properties.node_meta_properties (read here when not given)."""
    if not config.quorum_mode or "controller" not in config.roles:
        return None
    from klog.controller.applier import SnapshotPolicy
    from klog.controller.node import ControllerNode

    node: Any = None   # the image the controller listener's dynamic TLS settings are read from, once it exists
    quorum = quorum_config(config, lambda: node.image if node is not None else None)
    from klog.controller.meta_properties import node_meta_properties

    meta = meta or node_meta_properties(config)
    node = ControllerNode(
        quorum, meta.metadata_log_dir, meta.usable_dirs,   # a failed log dir's meta.properties is left alone
        noop_interval_ms=config["metadata.max.idle.interval.ms"],
        snapshot_policy=SnapshotPolicy.from_config(config), port=port,
        min_insync_replicas=config["min.insync.replicas"])
    from klog.controller.listener_access import ControllerAccess

    # every connection's principal (ANONYMOUS on PLAINTEXT, the certificate's on SSL, the login's on SASL) is
    # authorized against this member's image, as Kafka's ControllerApis does
    listener = config.controller_listeners[0]
    node.driver.port.authorize_with(ControllerAccess.from_config(config, listener.name, listener.security_protocol,
                                                                 lambda: node.image))
    if quorum.server_login is not None:
        # a SASL controller listener: every connection logs in, against this member's image (SCRAM credentials)
        # and the listener's PLAIN users
        from klog.controller.describe_quorum import CONTROLLER_APIS
        from klog.controller.listener_login import ControllerLogin

        node.driver.port.authenticate_with(ControllerLogin(quorum.server_login, lambda: node.image,
                                                           apis=CONTROLLER_APIS))
    return node


def observer_node(config: BrokerConfig, meta: Any = None) -> Any:
    """A ``process.roles=broker`` node of a multi-node cluster follows the controller quorum as an observer.
    ``meta``: the node's klog.controller.meta_properties.node_meta_properties (read here when not given)."""
    if not config.quorum_mode or "controller" in config.roles:
        return None
    from klog.controller.meta_properties import node_meta_properties
    from klog.controller.observer import MetadataObserver

    meta = meta or node_meta_properties(config)
    observer: Any = None
    observer = MetadataObserver(quorum_config(config, lambda: observer.image if observer is not None else None),
                                meta.usable_dirs)
    return observer


def controller_listener(config: BrokerConfig, node: Any, broker_lifecycle: Any = None) -> Any:
    """Kafka clients on the controller listener (``kafka-metadata-quorum --bootstrap-controller``, forwarding
    brokers; ``broker_lifecycle``: the BrokerLifecycleService answering the brokers' lifecycle requests). The Raft
    driver, which accepts the listener's connections, hands it those that speak Kafka through the port both are
    given (the node's ``driver.port``)."""
    from klog.controller.describe_quorum import ControllerListener
    from klog.controller.features import described_features, kraft_version
    from klog.controller.voter_changes import VoterChanges

    name = config.controller_listeners[0].name
    kraft = kraft_version(config)
    return ControllerListener(node.driver, name, lambda: node.cluster_id, port=node.driver.port,
                              broker_lifecycle=broker_lifecycle, voter_changes=VoterChanges(node, name),
                              features=lambda api_version: described_features(node.image, kraft, api_version))


def broker_lifecycle_service(config: BrokerConfig, node: Any) -> Any:
    """The active controller's side of the brokers' lifecycle (registrations, heartbeats, fencing, ISR changes,
    producer-id blocks), with the node's settings."""
    from klog.controller.broker_service import BrokerLifecycleService

    return BrokerLifecycleService(
        node, session_timeout_ms=config["broker.session.timeout.ms"],
        unclean_leader_election=config["unclean.leader.election.enable"],
        min_insync_replicas=config["min.insync.replicas"],
        leader_imbalance_check_interval_ms=config["leader.imbalance.check.interval.seconds"] * 1000
        if config["auto.leader.rebalance.enable"] else None)


@dataclasses.dataclass(frozen=True)
class NodeParts:
    """What one ``klog-broker`` process runs, built by :func:`assemble` in dependency order."""

    #: the Raft member of a controller (``process.roles`` with ``controller`` on a quorum), else None
    controller: Any
    #: a ``process.roles=broker`` node's follower of the quorum, else None
    observer: Any
    #: the controller listener's Kafka side (a controller), else None
    listener: Any
    #: the active controller's broker lifecycle service (a controller), else None
    brokers: Any
    #: the broker (``serves_clients``), else None: a controller-only node loads no broker code
    server: Any
    #: a controller-only node's ControllerApis, deciding the requests brokers forward (a combined node's is its
    #: broker's, made when the broker starts: it commits through the broker's metadata), else None
    controller_apis: Any = None

    def __post_init__(self) -> None:
        assert (self.controller is None) == (self.listener is None) == (self.brokers is None), self
        assert self.controller is None or self.observer is None, "a node is a quorum member or an observer"
        assert (self.controller_apis is not None) == (self.controller is not None and self.server is None), self


def assemble(config: BrokerConfig) -> NodeParts:
    """The node's composition root: every part made here, each given what it depends on at construction. Two
    dependencies are start-up steps of :func:`serve`, as they exist (or may be used) only once the node runs: the
    controller listener serves forwarded requests (``ControllerListener.accept_forwarded``) once the quorum has a
    cluster id, with a combined node's ControllerApis made when its broker starts; and a broker's bound ports (the
    server binds, then makes its state with them)."""
    port = None
    if config.quorum_mode and "controller" in config.roles:
        from klog.controller.listener_port import ListenerPort

        port = ListenerPort()   # the Raft driver's non-Raft connections: made before the driver and its servers
    from klog.controller.meta_properties import node_meta_properties

    # read once: a log dir whose meta.properties cannot be read starts offline (the start is refused when that is
    # the metadata log dir or every dir)
    meta = node_meta_properties(config)
    controller = controller_node(config, port, meta)
    observer = observer_node(config, meta)
    brokers = listener = None
    if controller is not None:
        brokers = broker_lifecycle_service(config, controller)
        listener = controller_listener(config, controller, brokers)
    server = controller_apis = None
    if config.serves_clients:   # a controller-only node loads no broker code
        from klog.broker.server import BrokerServer

        server = BrokerServer(config, controller or observer, controller_listener=listener,
                              failed_log_dirs=meta.failed)
    elif controller is not None:   # decides on its Raft member's image, one lock with its lifecycle service
        from klog.controller.apis import ControllerApis, RaftQuorumWriter

        controller_apis = ControllerApis(RaftQuorumWriter(controller, config.node_id), config,
                                         decisions=controller.decisions)
    return NodeParts(controller, observer, listener, brokers, server, controller_apis)


async def serve(config: BrokerConfig) -> None:
    parts = assemble(config)
    controller, observer, listener, brokers, server = (parts.controller, parts.observer, parts.listener,
                                                       parts.brokers, parts.server)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # not on this platform
            pass
    watch_stack_dumps(loop)
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
    #: a controller-only node's periodic work (delegation.token.expiry.check.interval.ms), cancelled at the stop
    background: list[asyncio.Future[Any]] = []

    #: a broker of a cluster's PartitionManager.all_dirs_failed (also resolved when offline from the start)
    log_dirs_failed: asyncio.Future[dict[str, str]] | None = None

    def watch_log_dirs(partitions: Any) -> None:
        """A broker of a cluster halts once all its log dirs are offline (Kafka: "Shutdown broker because all log
        dirs in ... have failed"): its heartbeats would keep it registered while it can write nothing it leads."""
        nonlocal log_dirs_failed
        log_dirs_failed = partitions.all_dirs_failed
        assert log_dirs_failed is not None, "the broker's partitions were made with its event loop"
        waits.append(log_dirs_failed)

    async def start() -> None:
        if observer is not None:
            await observer.start()
            waits.append(observer.failed)
            cluster_id = await observer.wait_cluster_id()
            log.info("process.roles=broker: node %d follows controller quorum %s as an observer", config.node_id,
                     cluster_id)
        if controller is not None:
            await controller.start()
            assert brokers is not None
            await brokers.start()
            waits.append(controller.failed)
            if server is not None:
                # The broker's meta.properties must carry the quorum's cluster id: wait for it (a new quorum
                # establishes it once a leader is elected).
                cluster_id = await controller.wait_cluster_id()
                log.info("process.roles=broker,controller: node %d is a member of controller quorum %s; its "
                         "broker role serves the quorum's committed metadata image", config.node_id, cluster_id)
            else:
                # A controller-only node decides the requests brokers forward once the quorum has a cluster id.
                from klog.controller.apis import CONTROLLER_API_VERSIONS, CONTROLLER_ONLY_API_VERSIONS

                await controller.wait_cluster_id()
                assert listener is not None and parts.controller_apis is not None
                listener.accept_forwarded(CONTROLLER_API_VERSIONS, parts.controller_apis.handle,
                                          parts.controller_apis.handle_enveloped,
                                          answered_here=CONTROLLER_ONLY_API_VERSIONS,
                                          decide_direct=parts.controller_apis.handle_direct)
                # the active controller removes expired delegation tokens (a broker's server runs the same check)
                background.append(asyncio.ensure_future(parts.controller_apis.expire_tokens_forever()))
        if server is not None:
            await server.start()
            if controller is not None or observer is not None:
                watch_log_dirs(server.state.partitions)
            if controller is not None:
                # A combined node's controller listener decides the controller requests other brokers forward
                # (its broker answers DescribeQuorum from the same listener).
                from klog.controller.apis import CONTROLLER_API_VERSIONS, CONTROLLER_ONLY_API_VERSIONS

                assert listener is not None
                listener.accept_forwarded(CONTROLLER_API_VERSIONS, server.state.controller_apis.handle,
                                          server.state.controller_apis.handle_enveloped,
                                          answered_here=CONTROLLER_ONLY_API_VERSIONS,
                                          decide_direct=server.state.controller_apis.handle_direct)

    try:
        # A quorum member may wait long to start (for a leader, to be unfenced): SIGTERM stops that wait too.
        starting = asyncio.ensure_future(start())
        await asyncio.wait([starting, waits[0]], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            log.info("shutting down before the start finished")
            return
        starting.result()
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if controller is not None and controller.failed.done():
            raise Halted(f"controller: {controller.failed.result()}")
        if observer is not None and observer.failed.done():
            raise Halted(f"observer: {observer.failed.result()}")
        if log_dirs_failed is not None and log_dirs_failed.done():
            raise Halted("all log dirs are offline ("
                         + "; ".join(f"{d}: {e}" for d, e in log_dirs_failed.result().items())
                         + "): the broker stops so that the controller moves its partitions to other brokers")
        log.info("shutting down")
    finally:
        for w in (*waits, *background):
            if not w.done():
                w.cancel()
        if server is not None:
            await server.stop()
        if observer is not None:
            await observer.stop()
        if brokers is not None:
            await brokers.stop()
        if controller is not None:
            await controller.stop()


def watch_stack_dumps(loop: asyncio.AbstractEventLoop) -> None:
    """SIGQUIT (``kill -3``, as a JVM's thread dump) writes every thread's stack to stderr, from the signal
    handler itself so it works even when the loop is stuck, then every asyncio task's stack from the loop: what a
    node that does not stop or answer is waiting for."""
    def awaited_frames(task: asyncio.Task[Any]) -> list[Any]:
        """The task's coroutine and every coroutine it awaits, outermost first (``Task.get_stack`` gives only the
        outermost one of a suspended task)."""
        frames = []
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None:
                frames.append(frame)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        return frames

    def dump_tasks() -> None:
        for task in asyncio.all_tasks(loop):
            where = " -> ".join(f"{f.f_code.co_name} ({os.path.basename(f.f_code.co_filename)}:{f.f_lineno})"
                                for f in awaited_frames(task)) or "(not started)"
            log.warning("stack dump: task %s: %s", task.get_name(), where)

    try:
        loop.add_signal_handler(signal.SIGQUIT, dump_tasks)
    except (NotImplementedError, RuntimeError, AttributeError):  # no SIGQUIT on this platform
        return
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=True)


class Halted(RuntimeError):
    """The node stopped for good after it had started: its metadata quorum member failed (e.g. the metadata log
    dir is full), as Kafka halts when its metadata log dir fails."""


def run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def scram_record(text: str) -> Any:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (``iterations=N`` optional) -> its
    UserScramCredentialRecord; a ValueError says what is wrong (never quoting the password)."""
    from klog.metadata.records import record
    from klog.security.scram import make_credential, mechanism_type

    mechanism, sep, rest = text.partition("=")
    rest = rest.strip()
    if not sep or not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError("--add-scram expects MECHANISM=[name=...,password=...]")
    fields: dict[str, str] = {}
    for part in rest[1:-1].split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"--add-scram: {key.strip()!r} is not key=value")
        fields[key.strip().lower()] = value.strip().strip('"')
    code = mechanism_type(mechanism.strip())
    if not fields.get("name") or "password" not in fields:
        raise ValueError("--add-scram needs name= and password=")
    try:
        iterations = int(fields.get("iterations", "4096"))
    except ValueError:
        raise ValueError("--add-scram: iterations must be an integer") from None
    credential = make_credential(mechanism.strip(), fields["password"], iterations)
    return record("UserScramCredentialRecord", name=fields["name"], mechanism=code, salt=credential.salt,
                  stored_key=credential.stored_key, server_key=credential.server_key, iterations=iterations)


def format_feature_records(release: str | None, overrides: list[str]) -> list[Any]:
    """The FeatureLevelRecords ``format --release-version / --feature`` chose: every feature's level (0 too), so a
    new cluster starts at exactly these. Raises ValueError naming a bad level, as kafka-storage format refuses it."""
    from klog.controller.features import FeatureUpdate, update_features
    from klog.metadata import MetadataImage, record
    from klog.metadata.features import (
        KRAFT_VERSION,
        LATEST_METADATA_VERSION,
        METADATA_VERSION,
        metadata_version_level,
        release_features,
    )

    mv = LATEST_METADATA_VERSION if release is None else metadata_version_level(release)
    if mv is None:
        raise ValueError(f"Unknown release version '{release}'. Supported versions are: 3.3-IV3 to "
                         f"4.2-IV1")
    levels = release_features(mv)
    for text in overrides:
        name, sep, value = text.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--feature {text!r} is not NAME=LEVEL")
        levels[name.strip()] = int(value)
    if release is None and METADATA_VERSION in levels and levels[METADATA_VERSION] != mv:
        # a chosen metadata.version sets the other features' defaults, as kafka-storage format does
        levels = {**release_features(levels[METADATA_VERSION]), **levels}
    levels.pop(KRAFT_VERSION, None)   # the quorum's format decides it (--standalone / --initial-controllers)
    # the levels are checked as UpdateFeatures would upgrade an empty cluster to them
    empty = MetadataImage(features={METADATA_VERSION: levels.get(METADATA_VERSION, 0)})
    updates = [FeatureUpdate(name, level, 1) for name, level in levels.items()]
    refusal = update_features(updates, empty, node_id=-1, kraft_version=0, validate_only=True).response
    if refusal is not None:
        raise ValueError(refusal.message.split(": ", 1)[-1].replace("Local controller -1", "klog"))
    return [record("FeatureLevelRecord", name=name, feature_level=level) for name, level in levels.items()]


def _read_records_file(path: str) -> list[Any]:
    """The metadata records of a file of record batches (``klog-broker migrate -o``); ValueError names the file."""
    from klog.metadata.records import MetadataRecord, MetadataRecordError, decode_batches

    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return [r for b in decode_batches(data) for r in b.records if isinstance(r, MetadataRecord)]
    except MetadataRecordError as exc:
        raise ValueError(f"--add-records {path}: not metadata record batches ({exc})") from None


def format_storage(argv: list[str]) -> int:
    """``klog-broker format -t <cluster id> -c server.properties``: Kafka's ``kafka-storage format``; writes
    ``meta.properties`` into the metadata log dir and every log dir. Optional: a new quorum establishes
    its cluster id on first start."""
    from klog.controller.applier import new_cluster_id
    from klog.controller.node import stored_cluster_id, write_meta_properties
    from klog.controller.quorum import QuorumConfigError, write_initial_voters

    parser = argparse.ArgumentParser(prog="klog-broker format", description=format_storage.__doc__)
    parser.add_argument("-t", "--cluster-id", required=True, help="the cluster id (klog-broker random-uuid)")
    parser.add_argument("-c", "--config", required=True, help="the node's server.properties")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("-g", "--ignore-formatted", action="store_true",
                        help="succeed if the directories are already formatted with this cluster id")
    initial = parser.add_mutually_exclusive_group()
    initial.add_argument("-s", "--standalone", action="store_true",
                         help="KIP-853: this controller is the quorum's only initial voter")
    initial.add_argument("-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRECTORY_ID,...",
                         help="KIP-853: the quorum's initial voters (controller.quorum.bootstrap.servers nodes)")
    initial.add_argument("-N", "--no-initial-controllers", action="store_true",
                         help="KIP-853: write no voter set (a broker-only node, or a controller that joins a running "
                             "quorum through kafka-metadata-quorum add-controller)")
    parser.add_argument("-S", "--add-scram", action="append", default=[], metavar="MECHANISM=[name=U,password=P]",
                        help="a SCRAM credential in the new cluster's first records (Kafka's kafka-storage format "
                             "--add-scram: SCRAM-SHA-256=[name=alice,password=alice-secret], optionally "
                             "iterations=N)")
    parser.add_argument("--add-records", metavar="FILE",
                        help="metadata records for the new cluster's first records (klog-broker migrate writes them: "
                             "a single node's topics, configs and credentials moved into this quorum); give the same "
                             "file to every controller")
    parser.add_argument("-r", "--release-version", metavar="RELEASE",
                        help="the release whose feature levels the new cluster starts at (3.3-IV3 ... 4.2-IV1, or "
                             "a release as 4.0; default: the latest klog implements), as kafka-storage format")
    parser.add_argument("-f", "--feature", action="append", default=[], metavar="NAME=LEVEL",
                        help="a feature level for the new cluster (share.version=0, metadata.version=25...), "
                             "overriding the release's, as kafka-storage format --feature")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.override)
        scram_records = [scram_record(text) for text in args.add_scram]
        feature_records = format_feature_records(args.release_version, args.feature) \
            if args.release_version or args.feature else []
        added = _read_records_file(args.add_records) if args.add_records else []
    except (ConfigError, ValueError, OSError) as exc:
        print(f"klog-broker format: {exc}", file=sys.stderr)
        return 2
    cid = args.cluster_id.strip()
    if len(cid) != len(new_cluster_id()):
        print(f"klog-broker format: --cluster-id {cid!r} is not a Kafka cluster id (22 characters of URL-safe "
              "base64; klog-broker random-uuid makes one)", file=sys.stderr)
        return 2
    dirs = list(dict.fromkeys([os.path.abspath(config["metadata.log.dir"] or config.log_dirs[0]), *config.log_dirs]))
    try:
        existing = stored_cluster_id(dirs, config.node_id)
    except RuntimeError as exc:
        print(f"klog-broker format: {exc}", file=sys.stderr)
        return 1
    if existing is not None and (existing != cid or not args.ignore_formatted):
        print(f"klog-broker format: already formatted with cluster.id {existing} ({', '.join(dirs)})",
              file=sys.stderr)
        return 1
    try:
        voters, directory_id = initial_voters(config, args)
    except QuorumConfigError as exc:
        print(f"klog-broker format: {exc}", file=sys.stderr)
        return 2
    for d in dirs:
        write_meta_properties(d, config.node_id, cid, directory_id if d == dirs[0] else None)
    if scram_records or feature_records or added:
        from klog.controller.applier import write_bootstrap_records

        write_bootstrap_records(dirs[0], [*feature_records, *scram_records, *added])
        if added:
            print(f"Added {len(added)} record(s) from {args.add_records} to the bootstrap records")
        if scram_records:
            print(f"Added {len(scram_records)} SCRAM credential(s) to the bootstrap records")
        if feature_records:
            print("Bootstrap features: " + ", ".join(f"{r.data.name}={r.data.feature_level}"
                                                       for r in feature_records))
    if voters:
        path = write_initial_voters(dirs[0], voters, config.controller_listeners[0].name)
        print(f"Wrote the initial voter set {', '.join(f'{v.node_id}@{v.host}:{v.port}' for v in voters)} to {path}")
    print(f"Formatted {', '.join(dirs)} with cluster.id {cid} for node.id {config.node_id}")
    return 0


#: what ``klog-broker migrate`` renames the single node's metadata log and meta.properties to (kept, not deleted)
SINGLE_NODE_SUFFIX = ".single-node"


def migrate_storage(argv: list[str]) -> int:
    """``klog-broker migrate -c node.properties -o migration.records``: turn a stopped single-node klog's data
    directory into the data of node ``node.id`` of a new multi-node quorum. ``node.properties`` is that node's
    quorum configuration, its ``log.dirs`` the single node's. Writes the single node's topics (ids, partitions,
    configs), configs, quotas, ACLs, SCRAM credentials, delegation tokens and producer-id block to ``-o`` as
    metadata records, every partition on this node, and moves the single node's metadata log and meta.properties
    aside (``*.single-node``); the topics' data and committed offsets stay where they are. Then format every
    controller of the new quorum with ``klog-broker format ... --add-records migration.records``."""
    from klog.controller.meta_properties import META_PROPERTIES, read_meta_properties
    from klog.metadata.migration import TOPICS_FILE, quorum_migration_records, topic_store_records
    from klog.metadata.records import encode_batch
    from klog.metadata.storage import INITIAL_VOTERS_COPY, METADATA_PARTITION, METADATA_TOPIC, MetadataLog

    parser = argparse.ArgumentParser(prog="klog-broker migrate", description=migrate_storage.__doc__)
    parser.add_argument("-c", "--config", required=True, help="the new quorum node's server.properties (its "
                                                                 "log.dirs: the single node's data directories)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("-o", "--output", required=True, help="where to write the migration records (give them to "
                                                                "klog-broker format --add-records on every controller)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
        print(f"klog-broker migrate: {exc}", file=sys.stderr)
        return 2
    if not config.quorum_mode:
        print("klog-broker migrate: the configuration is not a multi-node quorum's (set controller.quorum.voters or "
              "controller.quorum.bootstrap.servers): a single node keeps its data directory as it is",
              file=sys.stderr)
        return 2
    first = os.path.abspath(config.log_dirs[0])
    partition_dir = os.path.join(first, f"{METADATA_TOPIC}-{METADATA_PARTITION}")
    props = read_meta_properties(first)
    if os.path.exists(os.path.join(first, INITIAL_VOTERS_COPY)) or os.path.exists(partition_dir + SINGLE_NODE_SUFFIX):
        print(f"klog-broker migrate: {first} already belongs to a quorum (formatted, or migrated before)",
              file=sys.stderr)
        return 1
    old_node_id = int(props["node.id"]) if props and props.get("node.id", "").lstrip("-").isdigit() else \
        config.node_id
    try:
        if os.path.isdir(partition_dir):
            with MetadataLog(first) as mlog:
                state = mlog.read_quorum_state()
                if state is not None and (state.leader_id not in (-1, old_node_id)
                                          or len(state.current_voters or ()) > 1):
                    print(f"klog-broker migrate: {partition_dir} was led by node {state.leader_id}, not by the single "
                          f"node {old_node_id}: not a single node's metadata log", file=sys.stderr)
                    return 1
                image = mlog.load().image
            records = quorum_migration_records(image, old_node_id, config.node_id)
        elif os.path.exists(os.path.join(first, TOPICS_FILE)):   # an older single node's topic store
            records = topic_store_records(config.log_dirs, config.node_id)
        else:
            print(f"klog-broker migrate: {first} holds no single-node metadata ({METADATA_TOPIC}-{METADATA_PARTITION} "
                  f"or {TOPICS_FILE})", file=sys.stderr)
            return 1
    except (OSError, ValueError) as exc:
        print(f"klog-broker migrate: cannot read the single node's metadata in {first}: {exc}", file=sys.stderr)
        return 1
    batch_size = config["klog.controller.max.records.per.batch"]
    with open(args.output, "wb") as handle:
        for i in range(0, len(records), batch_size):
            handle.write(encode_batch(records[i:i + batch_size]))
    os.chmod(args.output, 0o600)   # SCRAM credentials and tokens
    if os.path.isdir(partition_dir):
        os.replace(partition_dir, partition_dir + SINGLE_NODE_SUFFIX)
    for d in dict.fromkeys([first, *map(os.path.abspath, config.log_dirs)]):
        path = os.path.join(d, META_PROPERTIES)
        if os.path.exists(path):
            os.replace(path, path + SINGLE_NODE_SUFFIX)
    topics = sum(1 for r in records if r.name == "TopicRecord")
    print(f"Wrote {len(records)} records ({topics} topics, "
          f"{sum(1 for r in records if r.name == 'PartitionRecord')} partitions on node {config.node_id}) to "
          f"{args.output}; moved the single node's metadata log and meta.properties aside ({SINGLE_NODE_SUFFIX}). "
          f"Next: klog-broker format -t <cluster id> -c <properties> --add-records {args.output} on every "
          f"controller, then start the quorum.")
    return 0


def initial_voters(config: BrokerConfig, args: argparse.Namespace) -> tuple[list[Any], Any]:
    """The initial voter set ``format`` writes (KIP-853, as ``kafka-storage format``) and this node's directory id
    in it; ([], None) when there is none to write. A misconfiguration names the option or key."""
    from klog.controller.quorum import InitialVoter, QuorumConfigError, parse_initial_controllers
    from klog.metadata.storage import random_kafka_uuid

    is_controller = "controller" in config.roles
    wants = args.standalone or args.initial_controllers is not None
    if config["controller.quorum.voters"]:
        if wants:
            raise QuorumConfigError("--standalone / --initial-controllers: controller.quorum.voters is set (a static "
                                    "quorum); they go with controller.quorum.bootstrap.servers")
        return [], None
    if not is_controller or not config["controller.quorum.bootstrap.servers"]:
        if wants:
            raise QuorumConfigError("--standalone / --initial-controllers: only a controller with "
                                    "controller.quorum.bootstrap.servers has an initial voter set")
        return [], None
    if not wants and not args.no_initial_controllers:
        raise QuorumConfigError("controller.quorum.voters is not set on this controller: give one of --standalone, "
                                "--initial-controllers or --no-initial-controllers")
    if args.no_initial_controllers:   # KIP-853: joins a running quorum (kafka-metadata-quorum add-controller)
        return [], None
    if not config.controller_listeners:
        raise QuorumConfigError("controller.listener.names: a controller needs a listener named there")
    listener = config.controller_listeners[0]
    if args.standalone:
        me = InitialVoter(config.node_id, random_kafka_uuid(), listener.host or "localhost", listener.port)
        return [me], me.directory_id
    voters = parse_initial_controllers(args.initial_controllers)
    mine = [v for v in voters if v.node_id == config.node_id]
    if not mine:
        raise QuorumConfigError(f"--initial-controllers: node.id {config.node_id} is not among them")
    return voters, mine[0].directory_id


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["format"]:
        return format_storage(argv[1:])
    if argv[:1] == ["migrate"]:
        return migrate_storage(argv[1:])
    if argv[:1] == ["random-uuid"]:
        from klog.controller.applier import new_cluster_id

        print(new_cluster_id())
        return 0
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, args.override)
        if config.quorum_mode:
            quorum_config(config)
        from klog.broker.security import listener_securities

        listener_securities(config)   # TLS keystores, SASL users: a setting that cannot be used stops here
    except ConfigError as exc:
        print(f"klog-broker: {exc}", file=sys.stderr)
        return 2
    if config.unused:
        # as Kafka 4 warns of the keys it no longer knows; these encrypted dynamic passwords in ZooKeeper
        log.warning("These configurations '%s' were supplied but are not used: Kafka 4 removed them with ZooKeeper; "
                    "dynamic password configs are stored unencrypted in the metadata log's ConfigRecords (keep the "
                    "log's directory private, or use PEM files without passwords)", sorted(config.unused))
    try:
        run(serve(config))
    except Halted as exc:
        print(f"klog-broker: halted: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"klog-broker: cannot start: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"klog-broker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

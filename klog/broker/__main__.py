"""``klog-broker [server.properties] [--override key=value ...] [--log-level LEVEL]``.

With no arguments: one node, data in ./klog-data, listener PLAINTEXT://127.0.0.1:9092, topics auto-created.
With a properties file: Kafka's own property names (``kafka-server-start.sh``'s invocation also works).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any

from klog.broker.config import BrokerConfig, ConfigError, load_properties, parse_overrides

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
    parser.add_argument("--version", action="version", version=f"klog-broker {_version()}")
    return parser


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


def quorum_config(config: BrokerConfig) -> Any:
    """The controller-quorum settings; a misconfiguration is a ConfigError naming the key."""
    from klog.controller.quorum import QuorumConfig, QuorumConfigError

    try:
        return QuorumConfig.from_broker_config(config)
    except QuorumConfigError as exc:
        key, _, message = str(exc).partition(": ")
        raise ConfigError(key.split(" ")[0], message or str(exc)) from None


def controller_node(config: BrokerConfig) -> Any:
    """The controller role of a node of a multi-node quorum (``controller.quorum.voters`` set), else None."""
    if not config.quorum_mode:
        return None
    from klog.controller.applier import SnapshotPolicy
    from klog.controller.node import ControllerNode
    quorum = quorum_config(config)
    metadata_dir = os.path.abspath(config["metadata.log.dir"] or config.log_dirs[0])
    return ControllerNode(
        quorum, metadata_dir, config.log_dirs if config.serves_clients else [],
        noop_interval_ms=config["metadata.max.idle.interval.ms"],
        snapshot_policy=SnapshotPolicy.from_config(config))


def controller_apis(config: BrokerConfig, node: Any) -> Any:
    """Kafka clients on the controller listener (``kafka-metadata-quorum --bootstrap-controller``)."""
    from klog.controller.describe_quorum import ControllerApis

    apis = ControllerApis(node.driver, config.controller_listeners[0].name, lambda: node.cluster_id)
    node.driver.kafka_connections = apis.serve
    return apis


async def serve(config: BrokerConfig) -> None:
    from klog.broker.server import BrokerServer

    controller = controller_node(config)
    apis = controller_apis(config, controller) if controller is not None else None
    server = BrokerServer(config, controller) if config.serves_clients else None
    brokers = None
    if controller is not None:   # the active controller serves BrokerRegistration / BrokerHeartbeat
        from klog.controller.broker_service import BrokerLifecycleService

        assert apis is not None

        brokers = BrokerLifecycleService(
            controller, session_timeout_ms=config["broker.session.timeout.ms"],
            unclean_leader_election=config["unclean.leader.election.enable"],
            leader_imbalance_check_interval_ms=config["leader.imbalance.check.interval.seconds"] * 1000
            if config["auto.leader.rebalance.enable"] else None)
        apis.broker_lifecycle = brokers
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # not on this platform
            pass
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]

    async def start() -> None:
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
        if server is not None:
            await server.start()
            if controller is not None:
                # A combined node answers DescribeQuorum on its broker listeners too (Kafka's brokers do).
                server.state.controller_apis = apis

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
            raise RuntimeError(f"controller: {controller.failed.result()}")
        log.info("shutting down")
    finally:
        for w in waits:
            if not w.done():
                w.cancel()
        if server is not None:
            await server.stop()
        if brokers is not None:
            await brokers.stop()
        if controller is not None:
            await controller.stop()


def run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def format_storage(argv: list[str]) -> int:
    """``klog-broker format -t <cluster id> -c server.properties``: Kafka's ``kafka-storage format``; writes
    ``meta.properties`` into the metadata log dir and every log dir. Optional: a new quorum establishes
    its cluster id on first start."""
    from klog.controller.applier import new_cluster_id
    from klog.controller.node import stored_cluster_id, write_meta_properties

    parser = argparse.ArgumentParser(prog="klog-broker format", description=format_storage.__doc__)
    parser.add_argument("-t", "--cluster-id", required=True, help="the cluster id (klog-broker random-uuid)")
    parser.add_argument("-c", "--config", required=True, help="the node's server.properties")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("-g", "--ignore-formatted", action="store_true",
                        help="succeed if the directories are already formatted with this cluster id")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
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
    for d in dirs:
        write_meta_properties(d, config.node_id, cid)
    print(f"Formatted {', '.join(dirs)} with cluster.id {cid} for node.id {config.node_id}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["format"]:
        return format_storage(argv[1:])
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
    except ConfigError as exc:
        print(f"klog-broker: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(config))
    except OSError as exc:
        print(f"klog-broker: cannot start: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"klog-broker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``klog-broker [server.properties] [--override key=value ...] [--log-level LEVEL]``.

With no arguments: one node, data in ./klog-data, listener PLAINTEXT://127.0.0.1:9092, topics auto-created.
With a properties file: Kafka's own property names (``kafka-server-start.sh``'s invocation also works).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

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


async def serve(config: BrokerConfig) -> None:
    from klog.broker.server import BrokerServer

    server = BrokerServer(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # not on this platform
            pass
    try:
        await server.start()
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()


def run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, args.override)
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

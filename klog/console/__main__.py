"""``python -m klog.console --bootstrap-server HOST:PORT [--host H] [--port P] [--metrics-url URL ...]``."""

from __future__ import annotations

import argparse
import logging
import sys

from klog.console import main as serve
from klog.console.server import SAMPLE_INTERVAL_S


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="klog console",
                                     description="Web console for a Kafka-compatible cluster (klog, Apache Kafka, ...)")
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the cluster")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve the console on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to serve the console on (default 8080; 0: any)")
    parser.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                        help="a klog broker's Prometheus endpoint, e.g. http://127.0.0.1:9644/metrics (repeatable): "
                             "rate sparklines and partition sizes")
    parser.add_argument("--sample-interval", type=float, default=SAMPLE_INTERVAL_S, metavar="SECONDS",
                        help=f"seconds between lag/metrics samples for the charts (default {SAMPLE_INTERVAL_S:g})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties file (Kafka's --command-config), e.g. client.id or security settings")
    parser.add_argument("--log-level", default="INFO", type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level (default INFO)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client_config = None
    if args.command_config:
        from klog.broker.config import ConfigError, load_properties

        try:
            client_config = load_properties(args.command_config)
        except ConfigError as exc:
            print(f"klog console: --command-config: {exc}", file=sys.stderr)
            return 2
    if args.sample_interval <= 0:
        print("klog console: --sample-interval must be positive", file=sys.stderr)
        return 2
    return serve(args.bootstrap_server, args.host, args.port, metrics_urls=args.metrics_url or None,
                 sample_interval_s=args.sample_interval, client_config=client_config)


if __name__ == "__main__":
    sys.exit(main())

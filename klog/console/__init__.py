"""The klog web console: a separate process that shows any Kafka-compatible cluster in a browser.

    python -m klog.console --bootstrap-server 127.0.0.1:9092 [--metrics-url http://127.0.0.1:9644/metrics]

Pages: the cluster (brokers, controller, partition health), topics (partitions with leader, replicas and ISR,
offsets, configs, rate sparklines from a klog broker's metrics), a message browser (by partition and offset
or time; text, JSON or hex; headers; live tail) and consumer groups (members, assignments, lag per partition
with a chart over time). It reads the cluster with klog's own client; its templates and assets are in the
package (no CDN). See docs/console.md.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from klog.console.server import SAMPLE_INTERVAL_S, Console

__all__ = ["Console", "main"]

log = logging.getLogger("klog.console")


def main(bootstrap_servers: str, host: str = "127.0.0.1", port: int = 8080, *,
         metrics_urls: list[str] | None = None, sample_interval_s: float = SAMPLE_INTERVAL_S,
         client_config: dict[str, Any] | None = None) -> int:
    """Serve the console until SIGINT/SIGTERM; returns the process exit code."""
    from klog.client.errors import KafkaError

    try:
        console = Console(bootstrap_servers, host=host, port=port, metrics_urls=metrics_urls,
                          sample_interval_s=sample_interval_s, client_config=client_config)
    except OSError as exc:
        log.error("cannot serve the console on %s:%d: %s", host, port, exc.strerror or exc)
        return 1
    except ValueError as exc:   # a bad client setting
        log.error("%s", exc)
        return 2
    except KafkaError as exc:   # the cluster cannot be reached
        log.error("cannot reach the cluster at %s: %s", bootstrap_servers, exc)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    console.start()
    log.info("klog console for %s on %s (Ctrl-C to stop)", bootstrap_servers, console.url)
    try:
        stop.wait()
    finally:
        console.stop()
        log.info("klog console stopped")
    return 0

"""The klog web console: a separate process that shows any Kafka-compatible cluster in a browser.

    python -m klog.console --bootstrap-server 127.0.0.1:9092 [--metrics-url http://127.0.0.1:9644/metrics]

Pages: the cluster (brokers, controller, partition health), topics (partitions with leader, replicas and ISR,
offsets, configs, rate sparklines from a klog broker's metrics), a message browser (by partition and offset
or time; text, JSON or hex; headers; live tail) and consumer groups (members, assignments, lag per partition
with a chart over time), and the cluster's ACLs, SCRAM users and client quotas. It reads the cluster with klog's
own client; its templates and assets are in the package (no CDN). Against a SASL cluster it logs users in with
their own credentials (klog.console.sessions) and acts as them. See docs/console.md.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from klog.console.server import SAMPLE_INTERVAL_S, Console
from klog.console.sessions import IDLE_TIMEOUT_S, MAX_AGE_S, MAX_SESSIONS, Sessions

__all__ = ["Console", "main"]

log = logging.getLogger("klog.console")


def main(bootstrap_servers: str, host: str = "127.0.0.1", port: int = 8080, *,
         metrics_urls: list[str] | None = None, sample_interval_s: float = SAMPLE_INTERVAL_S,
         client_config: dict[str, Any] | None = None, login: bool = False,
         session_idle_timeout_s: float = IDLE_TIMEOUT_S, session_max_age_s: float = MAX_AGE_S,
         max_sessions: int = MAX_SESSIONS, https_cert: str | None = None, https_key: str | None = None) -> int:
    """Serve the console until SIGINT/SIGTERM; returns the process exit code."""
    from klog.client.errors import KafkaError

    try:
        sessions = Sessions(idle_timeout_s=session_idle_timeout_s, max_age_s=session_max_age_s,
                            max_sessions=max_sessions)
        console = Console(bootstrap_servers, host=host, port=port, metrics_urls=metrics_urls,
                          sample_interval_s=sample_interval_s, client_config=client_config, login=login,
                          sessions=sessions, https_cert=https_cert, https_key=https_key)
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
    if console.login is not None:
        sessions = console.login.sessions
        log.info("login mode: users log in with %s; sessions end after %g s idle or %g s, at most %d open; the "
                 "lag sampler %s", ", ".join(console.login.mechanisms), sessions.idle_timeout_s, sessions.max_age_s,
                 sessions.max_sessions, "runs with --command-config's credentials" if console.view is not None
                 else "is off (no credentials in --command-config)")
    log.info("klog console for %s on %s (Ctrl-C to stop)", bootstrap_servers, console.url)
    try:
        stop.wait()
    finally:
        console.stop()
        log.info("klog console stopped")
    return 0

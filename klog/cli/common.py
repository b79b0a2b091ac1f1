"""What every ``klog`` command shares: connection options, client factories, output and errors.

Connection flags mirror Kafka's tools: ``--bootstrap-server host:port`` (or ``$KLOG_BOOTSTRAP_SERVER``) and
``--command-config FILE``, a Java properties file of client settings (``client.id``, timeouts, later security
settings) given to every client the command creates. Clients are klog's own (:mod:`klog.client`), so the CLI
works against any Kafka-compatible cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
#: Width used for tables when stdout is not a terminal (pipes, tests): wide enough that rows are not wrapped.
PIPE_WIDTH = 240

BootstrapOption = Annotated[str, typer.Option(
    "--bootstrap-server", "-b", envvar="KLOG_BOOTSTRAP_SERVER", show_envvar=True,
    help="host:port of one or more brokers (comma-separated), as with Kafka's tools")]
CommandConfigOption = Annotated[Optional[Path], typer.Option(
    "--command-config", exists=True, dir_okay=False, readable=True,
    help="a properties file of client settings (Kafka's --command-config)")]
TimeoutOption = Annotated[float, typer.Option("--timeout", help="seconds to wait for the cluster")]


class CliError(Exception):
    """A user-facing failure: printed as ``klog: error: <message>`` with exit code 1, no traceback."""


def stdout_console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_table(table: Table) -> None:
    stdout_console().print(table)


def parse_key_values(pairs: list[str] | None, what: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; a pair without ``=`` is an error naming the flag."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


@dataclasses.dataclass
class Connection:
    """Where to connect and with which extra client settings (from ``--command-config``)."""

    bootstrap_server: str
    command_config: Path | None = None
    timeout: float = 30.0

    def _settings(self, kind: str) -> dict[str, Any]:
        from klog.client.config import ADMIN_CONFIG, CONSUMER_CONFIG, PRODUCER_CONFIG

        defs = {"admin": ADMIN_CONFIG, "producer": PRODUCER_CONFIG, "consumer": CONSUMER_CONFIG}
        if self.command_config is None:
            return {}
        from klog.metadata.config import ConfigError, load_properties

        try:
            props = load_properties(str(self.command_config))
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        known_any = {d.name for defs_ in defs.values() for d in defs_}
        for key in props:
            if key not in known_any:
                close = difflib.get_close_matches(key, known_any, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise CliError(f"{self.command_config}: unknown client config {key!r}{hint}")
        mine = {d.name for d in defs[kind]}
        # A properties file serves every tool, as in Kafka: keys of other client kinds are skipped.
        return {k: v for k, v in props.items() if k in mine and k != "bootstrap.servers"}

    def admin(self) -> Any:
        from klog.client import AdminClient

        return AdminClient(self.bootstrap_server, default_api_timeout_ms=int(self.timeout * 1000),
                           **self._settings("admin"))

    def producer(self, **config: Any) -> Any:
        from klog.client import Producer

        return Producer(self.bootstrap_server, **{**self._settings("producer"), **config})

    def consumer(self, *topics: str, group_id: str | None = None, **config: Any) -> Any:
        from klog.client import Consumer

        return Consumer(*topics, bootstrap_servers=self.bootstrap_server, group_id=group_id,
                        **{**self._settings("consumer"), **config})


@contextlib.contextmanager
def admin_client(conn: Connection) -> Iterator[Any]:
    admin = conn.admin()
    try:
        yield admin
    finally:
        admin.close()


def topic_partitions(admin: Any, topic: str, partitions: list[int] | None = None) -> list[Any]:
    """The partitions of ``topic`` (all, or the ``partitions`` given, checked to exist)."""
    from klog.client import TopicPartition

    described = admin.describe_topics([topic])[topic]
    existing = [p.partition for p in described.partitions]
    if partitions:
        missing = sorted(set(partitions) - set(existing))
        if missing:
            raise CliError(f"topic {topic!r} has no partition {missing[0]} (it has {len(existing)})")
        existing = sorted(partitions)
    return [TopicPartition(topic, p) for p in existing]


def counted(n: int, noun: str) -> str:
    """``1 record``, ``2 records``: the summary lines a person reads."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 date-time (UTC unless it says otherwise)."""
    import datetime

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"timestamp {text!r} is neither milliseconds since the epoch nor ISO-8601 "
                       "(e.g. 2026-11-24T15:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)

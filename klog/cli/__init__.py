"""``klog``: the command-line tool for klog and any Kafka-compatible cluster.

One Typer app; each command group lives in its own module of this package and adds itself to the app
through ``register(app)``. To add a command group, write ``klog/cli/<name>.py`` with a
``register(app: typer.Typer)`` function and add ``"<name>"`` to :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Optional

import typer

from klog.cli.common import CliError

#: The command modules, in the order their commands appear in ``klog --help``.
COMMAND_MODULES = ("topics", "produce", "consume", "groups", "configs", "acls", "users", "quotas", "cluster",
                   "dump_log", "bench", "console")

app = typer.Typer(
    name="klog",
    help="Work with klog and any Kafka-compatible cluster: topics, produce, consume, consumer groups, configs, ACLs, "
         "SCRAM users, client quotas, cluster health, log files and quick benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        import klog

        typer.echo(f"klog {klog.__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[Optional[bool], typer.Option(
        "--version", callback=_version, is_eager=True, help="print klog's version and exit")] = None) -> None:
    """klog's command-line tool."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"klog.cli.{_name}").register(app)


def main(argv: list[str] | None = None) -> int:
    """The ``klog`` console script: clear one-line errors (exit 1) instead of tracebacks."""
    from klog.metadata.config import ConfigError as BrokerConfigError
    from klog.client.errors import ConfigError as ClientConfigError
    from klog.client.errors import KafkaError

    try:
        app(args=argv, prog_name="klog")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except (CliError, KafkaError, ClientConfigError, BrokerConfigError, OSError, ValueError) as exc:
        name = getattr(exc, "name", None)
        prefix = f"{name}: " if isinstance(exc, KafkaError) and name and name not in str(exc) else ""
        print(f"klog: error: {prefix}{exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0

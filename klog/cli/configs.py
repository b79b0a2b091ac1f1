"""``klog configs describe|alter`` for topics and brokers (kafka-configs.sh)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from klog.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CliError,
    CommandConfigOption,
    Connection,
    TimeoutOption,
    admin_client,
    parse_key_values,
    print_table,
)

configs_app = typer.Typer(help="Describe and change topic and broker configs.", no_args_is_help=True)

TopicOption = Annotated[Optional[str], typer.Option("--topic", "-t", help="a topic's configs")]
BrokerOption = Annotated[Optional[int], typer.Option("--broker", help="a broker's configs (its node id)")]


def register(app: typer.Typer) -> None:
    app.add_typer(configs_app, name="configs")


def _resource(topic: str | None, broker: int | None):  # type: ignore[no-untyped-def]
    from klog.client import ConfigResource

    if (topic is None) == (broker is None):
        raise CliError("give exactly one of --topic NAME or --broker ID")
    return ConfigResource("topic", topic) if topic is not None else ConfigResource("broker", str(broker))


@configs_app.command("describe")
def describe(
    topic: TopicOption = None,
    broker: BrokerOption = None,
    all_: Annotated[bool, typer.Option("--all", help="include defaults (default: only values set)")] = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Config values with their source (set on the topic/broker, static, default)."""
    resource = _resource(topic, broker)
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        entries = admin.describe_configs([resource])[resource]
    typer.echo(f"{resource.type} {resource.name}")
    table = Table("name", "value", "source", "read-only")
    for name, e in sorted(entries.items()):
        if not all_ and e.is_default:
            continue
        value = "(sensitive)" if e.is_sensitive else ("" if e.value is None else e.value)
        table.add_row(name, value, e.source, "yes" if e.read_only else "")
    print_table(table)


@configs_app.command("alter")
def alter(
    topic: TopicOption = None,
    broker: BrokerOption = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="key=value to set (repeatable)")] = None,
    delete: Annotated[Optional[list[str]], typer.Option(
        "--delete", "-d", help="key to return to its default (repeatable)")] = None,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Set or delete configs (IncrementalAlterConfigs)."""
    resource = _resource(topic, broker)
    changes: dict[str, str | None] = {**parse_key_values(set_, "--set"), **{k: None for k in delete or []}}
    if not changes:
        raise CliError("nothing to change: give --set key=value and/or --delete key")
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.alter_configs({resource: changes})
    typer.echo(f"Updated {resource.type} {resource.name}: " + ", ".join(
        f"{k}={v}" if v is not None else f"{k} (default)" for k, v in changes.items()))

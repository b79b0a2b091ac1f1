"""``klog topics list|create|describe|alter-config|add-partitions|delete`` (Kafka's kafka-topics.sh)."""

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

topics_app = typer.Typer(help="List, create, describe, change and delete topics.", no_args_is_help=True)

ConfigOption = Annotated[Optional[list[str]], typer.Option(
    "--config", "-c", help="topic config key=value (repeatable), e.g. retention.ms=3600000")]


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")


@topics_app.command("list")
def list_topics(
    internal: Annotated[bool, typer.Option("--internal", help="include internal topics (__consumer_offsets)")]
    = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Print topic names, one a line."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        for name in admin.list_topics(internal=internal):
            typer.echo(name)


@topics_app.command("create")
def create(
    topics: Annotated[list[str], typer.Argument(help="names of the topics to create")],
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="partitions (-1: the broker's default)")]
    = -1,
    replication_factor: Annotated[int, typer.Option(
        "--replication-factor", "-r", help="replicas of each partition (-1: the broker's default)")] = -1,
    config: ConfigOption = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists", help="no error if a topic exists")] = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Create topics."""
    from klog.client import NewTopic
    from klog.client.errors import ErrorCode, KafkaError

    configs = parse_key_values(config, "--config")
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        wanted = list(topics)
        if if_not_exists:
            existing = set(admin.list_topics(internal=True))
            wanted = [t for t in topics if t not in existing]
        try:
            admin.create_topics([NewTopic(t, partitions, replication_factor, configs) for t in wanted])
        except KafkaError as exc:
            if not (if_not_exists and getattr(exc, "code", None) == ErrorCode.TOPIC_ALREADY_EXISTS):  # a race
                raise
    for t in topics:
        typer.echo(f"Created topic {t}." if t in wanted else f"Topic {t} exists.")


@topics_app.command("describe")
def describe(
    topics: Annotated[Optional[list[str]], typer.Argument(help="topics to describe (default: all)")] = None,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Partitions (leader, replicas, in-sync replicas) and the configs set on each topic."""
    from klog.client import ConfigResource

    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        names = list(topics) if topics else admin.list_topics()
        described = admin.describe_topics(names)
        configs = admin.describe_configs([ConfigResource("topic", n) for n in names]) if names else {}
    for name in names:
        d = described[name]
        overrides = {k: e.value for k, e in configs.get(ConfigResource("topic", name), {}).items()
                     if e.source == "dynamic_topic"}
        typer.echo(f"topic {name}: id {d.topic_id}, {len(d.partitions)} partitions"
                   f"{', internal' if d.is_internal else ''}")
        table = Table()
        for column in ("partition", "leader", "epoch", "replicas", "isr"):
            table.add_column(column, justify="right" if column in ("partition", "leader", "epoch") else "left")
        for p in d.partitions:
            table.add_row(str(p.partition), str(p.leader), str(p.leader_epoch), ",".join(map(str, p.replicas)),
                          ",".join(map(str, p.isr)))
        print_table(table)
        typer.echo("configs: " + (", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "(defaults)"))


@topics_app.command("alter-config")
def alter_config(
    topic: Annotated[str, typer.Argument(help="the topic to change")],
    set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="key=value to set (repeatable)")] = None,
    delete: Annotated[Optional[list[str]], typer.Option(
        "--delete", "-d", help="key to reset to the broker's default (repeatable)")] = None,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Set or delete topic configs (IncrementalAlterConfigs)."""
    from klog.client import ConfigResource

    changes: dict[str, str | None] = {**parse_key_values(set_, "--set"), **{k: None for k in delete or []}}
    if not changes:
        raise CliError("nothing to change: give --set key=value and/or --delete key")
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.alter_configs({ConfigResource("topic", topic): changes})
    typer.echo(f"Updated configs of topic {topic}: " + ", ".join(
        f"{k}={v}" if v is not None else f"{k} (default)" for k, v in changes.items()))


@topics_app.command("add-partitions")
def add_partitions(
    topic: Annotated[str, typer.Argument(help="the topic to grow")],
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="the new total number of partitions")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Grow a topic to --partitions partitions in total (CreatePartitions)."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.create_partitions({topic: partitions})
    typer.echo(f"Topic {topic} now has {partitions} partitions.")


@topics_app.command("delete")
def delete(
    topics: Annotated[list[str], typer.Argument(help="names of the topics to delete")],
    if_exists: Annotated[bool, typer.Option("--if-exists", help="no error if a topic does not exist")] = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Delete topics and their data."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        wanted = list(topics)
        if if_exists:
            existing = set(admin.list_topics(internal=True))
            wanted = [t for t in topics if t in existing]
        if wanted:
            admin.delete_topics(wanted)
    for t in topics:
        typer.echo(f"Deleted topic {t}." if t in wanted else f"Topic {t} does not exist.")

"""``klog groups list|describe|lag|reset-offsets|delete-offsets|delete`` (kafka-consumer-groups.sh)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

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
    parse_timestamp,
    print_table,
    topic_partitions,
)

groups_app = typer.Typer(help="Consumer groups: list, members, lag, offset resets, deletion.",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(groups_app, name="groups")


def describe_group(admin: Any, group: str) -> Any:
    """DescribeGroups for one group. A group the cluster does not know (GROUP_ID_NOT_FOUND, or state Dead from
    brokers before DescribeGroups v6) is one clear line, as kafka-consumer-groups.sh says it."""
    from klog.client.errors import KafkaError

    try:
        described = admin.describe_groups([group])[group]
    except KafkaError as exc:
        if getattr(exc, "name", None) == "GROUP_ID_NOT_FOUND":
            raise CliError(f"consumer group {group!r} does not exist") from None
        raise
    if described.state == "Dead":
        raise CliError(f"consumer group {group!r} does not exist")
    return described


@groups_app.command("list")
def list_groups(
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Every group the cluster's brokers coordinate."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        groups = admin.list_groups()
    table = Table("group", "protocol type", "state", "type")
    for g in groups:
        table.add_row(g.group_id, g.protocol_type or "", g.state or "", g.type or "")
    print_table(table)


@groups_app.command("describe")
def describe(
    group: Annotated[str, typer.Argument(help="the group")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """State, protocol and members with their assigned partitions."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        d = describe_group(admin, group)
    typer.echo(f"group {d.group_id}: state {d.state}, protocol type {d.protocol_type or '-'}, "
               f"assignor {d.protocol or '-'}, {len(d.members)} members")
    table = Table("member id", "instance id", "client id", "host", "assignment")
    for m in d.members:
        table.add_row(m.member_id, m.group_instance_id or "", m.client_id, m.client_host,
                      ", ".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment))
    print_table(table)


def group_lag(admin: Any, group: str) -> list[tuple[Any, int, int, str]]:
    """``(partition, committed offset, log end offset, member)`` for each partition the group committed or
    is assigned, sorted (lag = end - committed)."""
    committed = admin.list_group_offsets(group)
    owners: dict[Any, str] = {}
    for m in describe_group(admin, group).members:
        for tp in m.assignment:
            owners[tp] = f"{m.client_id} ({m.member_id[:12]})"
    tps = sorted(set(committed) | set(owners))
    ends = admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    return [(tp, committed[tp].offset if tp in committed else -1, ends[tp].offset if tp in ends else -1,
             owners.get(tp, "")) for tp in tps]


@groups_app.command("lag")
def lag(
    group: Annotated[str, typer.Argument(help="the group")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Committed offset, log end offset and lag of each partition, with its consumer."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        rows = group_lag(admin, group)
    typer.echo(f"group {group}")
    table = Table("topic", "partition", "committed", "log end", "lag", "consumer")
    total = 0
    for tp, committed, end, owner in rows:
        behind = end - committed if committed >= 0 and end >= 0 else None
        total += behind or 0
        table.add_row(tp.topic, str(tp.partition), str(committed) if committed >= 0 else "-",
                      str(end) if end >= 0 else "-", "-" if behind is None else str(behind), owner)
    print_table(table)
    typer.echo(f"total lag: {total}")


def _parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``orders`` or ``orders:0,2``."""
    topic, sep, parts = spec.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise CliError(f"--topic {spec!r}: partitions must be integers (topic:0,1,2)") from None


@groups_app.command("reset-offsets")
def reset_offsets(
    group: Annotated[str, typer.Argument(help="the group (must have no active members)")],
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="topic or topic:0,1 (repeatable)")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="to the log start")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="to the log end")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="to this offset")] = None,
    to_datetime: Annotated[Optional[str], typer.Option(
        "--to-datetime", help="to the first record at or after this time (ms or ISO-8601)")] = None,
    shift_by: Annotated[Optional[int], typer.Option("--shift-by", help="move the committed offsets by N")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="apply the plan (default: only print it)")] = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Move a group's committed offsets; prints the plan, and applies it with --execute (as Kafka's tool)."""
    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None, shift_by is not None]
    if sum(chosen) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        tps = [tp for spec in topic for tp in topic_partitions(admin, *_parse_topic_spec(spec))]
        lows = admin.list_offsets({tp: "earliest" for tp in tps})
        highs = admin.list_offsets({tp: "latest" for tp in tps})
        current = admin.list_group_offsets(group, tps)
        if to_earliest:
            target = {tp: lows[tp].offset for tp in tps}
        elif to_latest:
            target = {tp: highs[tp].offset for tp in tps}
        elif to_offset is not None:
            target = {tp: to_offset for tp in tps}
        elif to_datetime is not None:
            found = admin.list_offsets({tp: parse_timestamp(to_datetime) for tp in tps})
            target = {tp: found[tp].offset if tp in found else highs[tp].offset for tp in tps}
        else:
            assert shift_by is not None
            target = {tp: (current[tp].offset if tp in current else lows[tp].offset) + shift_by for tp in tps}
        # Like Kafka's tool: a target outside [log start, log end] is clamped to it.
        target = {tp: min(max(o, lows[tp].offset), highs[tp].offset) for tp, o in target.items()}
        if execute:
            admin.alter_group_offsets(group, target)
    typer.echo(f"group {group}: " + ("offsets reset" if execute else "dry run (add --execute to apply)"))
    table = Table("topic", "partition", "current", "new")
    for tp in tps:
        table.add_row(tp.topic, str(tp.partition), str(current[tp].offset) if tp in current else "-",
                      str(target[tp]))
    print_table(table)


@groups_app.command("delete-offsets")
def delete_offsets(
    group: Annotated[str, typer.Argument(help="the group")],
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="topic or topic:0,1 (repeatable)")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Delete a group's committed offsets of topics it no longer consumes (OffsetDelete)."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        tps = [tp for spec in topic for tp in topic_partitions(admin, *_parse_topic_spec(spec))]
        admin.delete_group_offsets(group, tps)
    typer.echo(f"Deleted the offsets of group {group} for {len(tps)} partitions.")


@groups_app.command("delete")
def delete(
    groups: Annotated[list[str], typer.Argument(help="groups to delete (they must have no members)")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Delete groups and their committed offsets."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.delete_groups(groups)
    for g in groups:
        typer.echo(f"Deleted group {g}.")

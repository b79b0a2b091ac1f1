"""``klog groups list|describe|lag|reset-offsets|delete-offsets|delete`` (kafka-consumer-groups.sh)."""

from __future__ import annotations

import dataclasses
import enum
import json
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
    """DescribeGroups (ConsumerGroupDescribe for a consumer-protocol group) for one group. A group the cluster
    does not know (GROUP_ID_NOT_FOUND, or state Dead from brokers before DescribeGroups v6) is one clear line, as
    kafka-consumer-groups.sh says it."""
    from klog.client.errors import KafkaError

    try:
        described = admin.describe_groups([group])[group]
    except KafkaError as exc:
        if getattr(exc, "name", None) != "GROUP_ID_NOT_FOUND":
            raise
        # Kafka 4 (KIP-1043) answers DescribeGroups so for a consumer-protocol group: ConsumerGroupDescribe knows it
        try:
            described = admin.describe_consumer_groups([group])[group]
        except KafkaError as again:
            if getattr(again, "name", None) not in ("GROUP_ID_NOT_FOUND", "UNSUPPORTED_VERSION"):
                raise
            try:   # a share group (KIP-932)
                described = admin.describe_share_groups([group])[group]
            except KafkaError as last:
                if getattr(last, "name", None) not in ("GROUP_ID_NOT_FOUND", "UNSUPPORTED_VERSION"):
                    raise
                try:   # a streams group (KIP-1071)
                    described = admin.describe_streams_groups([group])[group]
                except KafkaError as streams:
                    if getattr(streams, "name", None) in ("GROUP_ID_NOT_FOUND", "UNSUPPORTED_VERSION"):
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


class DescribeFormat(str, enum.Enum):
    table = "table"
    json = "json"


FormatOption = Annotated[DescribeFormat, typer.Option("--format", "-f", help="table, or json (one object)")]


@dataclasses.dataclass(frozen=True)
class PartitionOffsets:
    """One row of ``kafka-consumer-groups --describe``: a partition the group committed or is assigned."""

    topic: str
    partition: int
    #: committed offset, None when the group has none for this partition
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None
    #: a share group's lag as its share coordinator reports it (records not yet delivered to completion)
    share_lag: int | None = None

    @property
    def lag(self) -> int | None:
        if self.share_lag is not None:
            return self.share_lag
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def share_group_offsets(admin: Any, described: Any) -> list[PartitionOffsets]:
    """A share group's share-partitions (as kafka-share-groups --describe): the start offset as the current
    offset, the lag the share coordinator reports; several members may read one partition (no single owner)."""
    starts = admin.list_share_group_offsets(described.group_id)
    live = [tp for tp in sorted(starts) if tp.topic in set(admin.list_topics(internal=True))]
    ends = admin.list_offsets({tp: "latest" for tp in live}) if live else {}
    return [PartitionOffsets(tp.topic, tp.partition, start if start >= 0 else None,
                             ends[tp].offset if tp in ends else None, None, None, None,
                             share_lag=lag if lag >= 0 else None)
            for tp, (start, lag) in sorted(starts.items())]


def group_offsets(admin: Any, described: Any) -> list[PartitionOffsets]:
    """Each partition the group committed or is assigned, sorted, with its log end and its owner (if any)."""
    if described.protocol_type == "share":
        return share_group_offsets(admin, described)
    committed = admin.list_group_offsets(described.group_id)
    owners = {tp: m for m in described.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owners))
    # commits can outlive their topic (klog keeps them), and ListOffsets of a deleted topic waits for its timeout
    existing = set(admin.list_topics(internal=True)) if tps else set()
    live = [tp for tp in tps if tp.topic in existing]
    ends = admin.list_offsets({tp: "latest" for tp in live}) if live else {}
    rows = []
    for tp in tps:
        owner = owners.get(tp)
        rows.append(PartitionOffsets(
            tp.topic, tp.partition, committed[tp].offset if tp in committed else None,
            ends[tp].offset if tp in ends else None, owner.member_id if owner else None,
            owner.client_host if owner else None, owner.client_id if owner else None))
    return rows


def _cell(value: int | str | None) -> str:
    return "-" if value is None or value == "" else str(value)


def print_group_offsets(described: Any, rows: list[PartitionOffsets], fmt: DescribeFormat) -> None:
    total = sum(r.lag or 0 for r in rows)
    if fmt is DescribeFormat.json:
        typer.echo(json.dumps({"group": described.group_id, "state": described.state, "total_lag": total,
                               "partitions": [{**{k: v for k, v in dataclasses.asdict(r).items() if k != "share_lag"},
                                               "lag": r.lag} for r in rows]}))
        return
    typer.echo(f"group {described.group_id}: state {described.state}, {len(described.members)} members")
    table = Table("topic", "partition", "current offset", "log end offset", "lag", "consumer id", "host",
                  "client id")
    for r in rows:
        table.add_row(r.topic, str(r.partition), _cell(r.current_offset), _cell(r.log_end_offset), _cell(r.lag),
                      _cell(r.consumer_id), _cell(r.host), _cell(r.client_id))
    print_table(table)
    typer.echo(f"total lag: {total}")


def print_group_members(d: Any, fmt: DescribeFormat) -> None:
    if fmt is DescribeFormat.json:
        typer.echo(json.dumps({
            "group": d.group_id, "state": d.state, "protocol_type": d.protocol_type, "assignor": d.protocol,
            "members": [{"consumer_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                         "host": m.client_host,
                         "assignment": [[tp.topic, tp.partition] for tp in sorted(m.assignment)]}
                        for m in d.members]}))
        return
    typer.echo(f"group {d.group_id}: state {d.state}, protocol type {d.protocol_type or '-'}, "
               f"assignor {d.protocol or '-'}, {len(d.members)} members")
    table = Table("member id", "instance id", "client id", "host", "assignment")
    for m in d.members:
        table.add_row(m.member_id, m.group_instance_id or "", m.client_id, m.client_host,
                      ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(m.assignment)))
    print_table(table)


@groups_app.command("describe")
def describe(
    group: Annotated[str, typer.Argument(help="the group")],
    members: Annotated[bool, typer.Option("--members", help="the members and their assignments instead")] = False,
    fmt: FormatOption = DescribeFormat.table,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Each partition's committed offset, log end offset and lag, with the consumer owning it (as
    kafka-consumer-groups --describe); --members lists the members instead."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        described = describe_group(admin, group)
        rows = None if members else group_offsets(admin, described)
    if rows is None:
        print_group_members(described, fmt)
    else:
        print_group_offsets(described, rows, fmt)


@groups_app.command("lag")
def lag(
    group: Annotated[str, typer.Argument(help="the group")],
    fmt: FormatOption = DescribeFormat.table,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Committed offset, log end offset and lag of each partition, with its consumer (same as describe)."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        described = describe_group(admin, group)
        rows = group_offsets(admin, described)
    print_group_offsets(described, rows, fmt)


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

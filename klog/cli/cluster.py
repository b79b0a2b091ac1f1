"""``klog cluster info``: brokers, controller and partition health computed from Metadata.

A partition is offline when it has no leader, under-replicated when its in-sync replicas are fewer than its
replicas (Kafka's UnderReplicatedPartitions / OfflinePartitionsCount), so the figures mean something on any
replicated cluster, Apache Kafka's included.
"""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.table import Table

from klog.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    Connection,
    TimeoutOption,
    admin_client,
    print_table,
)
from klog.protocol.errors import KafkaError

cluster_app = typer.Typer(help="The cluster: brokers, controller, partition health.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")


def partition_health(topics: dict[str, Any]) -> tuple[int, list[str], list[str]]:
    """(partitions, under-replicated ``topic-p``, offline ``topic-p``) of described topics."""
    total, under, offline = 0, [], []
    for name, d in sorted(topics.items()):
        for p in d.partitions:
            total += 1
            if p.leader < 0:
                offline.append(f"{name}-{p.partition}")
            elif len(p.isr) < len(p.replicas):
                under.append(f"{name}-{p.partition}")
    return total, under, offline


@cluster_app.command("info")
def info(
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Cluster id, brokers, controller, topic and partition counts, under-replicated and offline partitions."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        cluster = admin.describe_cluster()
        names = admin.list_topics(internal=True)
        topics = admin.describe_topics(names) if names else {}
        quorum_error = ""
        try:
            quorum: dict[str, Any] | None = admin.describe_metadata_quorum()
        except KafkaError as exc:  # an old broker, or one without a quorum to describe
            quorum, quorum_error = None, exc.name
    controller = cluster["controller_id"]
    typer.echo(f"cluster id: {cluster['cluster_id']}")
    typer.echo(f"controller: {controller if controller >= 0 else 'unknown'}")
    table = Table("node", "host", "port", "rack", "controller")
    for node, host, port, rack in sorted(cluster["brokers"]):
        table.add_row(str(node), host, str(port), rack or "", "yes" if node == controller else "")
    print_table(table)
    total, under, offline = partition_health(topics)
    typer.echo(f"topics: {len(names)}, partitions: {total}")
    typer.echo(f"under-replicated partitions: {len(under)}" + (f" ({', '.join(under[:20])})" if under else ""))
    typer.echo(f"offline partitions: {len(offline)}" + (f" ({', '.join(offline[:20])})" if offline else ""))
    if quorum is None:
        typer.echo(f"controller quorum: not described ({quorum_error})")
        return
    typer.echo(f"controller quorum: leader {quorum['leader_id']}, epoch {quorum['leader_epoch']}, "
               f"high watermark {quorum['high_watermark']}")
    quorum_table = Table("voter", "log end offset", "lag", "last fetch (ms ago)", "last caught up (ms ago)")
    for row in quorum_lag(quorum, int(time.time() * 1000)):
        quorum_table.add_row(*row)
    print_table(quorum_table)


def quorum_lag(quorum: dict[str, Any], now_ms: int) -> list[tuple[str, ...]]:
    """One row per voter: id (``*`` marks the leader), log end offset, lag behind the high watermark (as
    ``kafka-metadata-quorum describe --replication``), and how long ago it last fetched / was caught up."""
    def ago(ts: int) -> str:
        return str(max(0, now_ms - ts)) if ts >= 0 else "unknown"

    rows: list[tuple[str, ...]] = []
    for v in quorum["voters"]:
        leo = v["log_end_offset"]
        lag = str(max(0, quorum["high_watermark"] - leo)) if leo >= 0 else "unknown"
        mark = "*" if v["replica_id"] == quorum["leader_id"] else ""
        rows.append((f"{v['replica_id']}{mark}", str(leo), lag, ago(v["last_fetch_timestamp"]),
                     ago(v["last_caught_up_timestamp"])))
    return rows

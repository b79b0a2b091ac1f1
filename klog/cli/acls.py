"""``klog acls list|add|remove``: ACLs as ``kafka-acls.sh`` manages them (CreateAcls, DescribeAcls, DeleteAcls).

    klog acls add --allow-principal User:alice --operation Read --topic orders
    klog acls add --allow-principal User:app --consumer --topic orders --group app   # Read+Describe, group Read
    klog acls list --topic orders
    klog acls remove --allow-principal User:alice --topic orders

Resources: ``--topic``, ``--group``, ``--transactional-id``, ``--cluster`` (each may repeat),
``--resource-pattern-type literal|prefixed`` (``any``/``match`` too for list and remove). Hosts: ``--allow-host``,
``--deny-host`` (default ``*``).
"""

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
    print_table,
)

acls_app = typer.Typer(help="List, add and remove ACLs (kafka-acls).", no_args_is_help=True)

TopicsOption = Annotated[Optional[list[str]], typer.Option("--topic", "-t", help="a topic (repeatable)")]
GroupsOption = Annotated[Optional[list[str]], typer.Option("--group", "-g", help="a consumer group (repeatable)")]
TxnOption = Annotated[Optional[list[str]], typer.Option("--transactional-id", help="a transactional id")]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="the cluster resource")]
PatternOption = Annotated[str, typer.Option("--resource-pattern-type",
                                            help="literal or prefixed (list/remove: also any, match)")]
AllowPrincipals = Annotated[Optional[list[str]], typer.Option("--allow-principal", help="User:NAME allowed")]
DenyPrincipals = Annotated[Optional[list[str]], typer.Option("--deny-principal", help="User:NAME denied")]
AllowHosts = Annotated[Optional[list[str]], typer.Option("--allow-host", help="host of the allow ACLs (default *)")]
DenyHosts = Annotated[Optional[list[str]], typer.Option("--deny-host", help="host of the deny ACLs (default *)")]
OperationsOption = Annotated[Optional[list[str]], typer.Option(
    "--operation", help="read, write, create, delete, alter, describe, cluster-action, describe-configs, "
                        "alter-configs, idempotent-write, all (repeatable)")]


def register(app: typer.Typer) -> None:
    app.add_typer(acls_app, name="acls")


def _resources(topic: list[str] | None, group: list[str] | None, txn: list[str] | None,
               cluster: bool) -> list[tuple[str, str]]:
    out = [("topic", t) for t in topic or []] + [("group", g) for g in group or []]
    out += [("transactional_id", t) for t in txn or []]
    if cluster:
        out.append(("cluster", "kafka-cluster"))
    return out


def _entries(allow_principal: list[str] | None, deny_principal: list[str] | None, allow_host: list[str] | None,
             deny_host: list[str] | None) -> list[tuple[str, str, str]]:
    """(principal, host, permission) of the ACLs to add or remove."""
    out = [(p, h, "allow") for p in allow_principal or [] for h in (allow_host or ["*"])]
    out += [(p, h, "deny") for p in deny_principal or [] for h in (deny_host or ["*"])]
    return out


def _bindings(resources: list[tuple[str, str]], entries: list[tuple[str, str, str]], operations: list[str],
              pattern: str, producer: bool = False, consumer: bool = False, idempotent: bool = False
              ) -> list[Any]:
    """The ACLs kafka-acls would add: each operation on each resource, or the --producer/--consumer sets."""
    from klog.client import AclBinding

    wanted: list[tuple[str, str, str]] = []
    for rtype, name in resources:
        ops = list(operations)
        if producer:
            ops += {"topic": ["write", "describe", "create"], "transactional_id": ["write", "describe"]}.get(rtype, [])
        if consumer:
            ops += {"topic": ["read", "describe"], "group": ["read"]}.get(rtype, [])
        wanted += [(rtype, name, op) for op in ops]
    if idempotent or (producer and any(r == "transactional_id" for r, _ in resources)):
        wanted.append(("cluster", "kafka-cluster", "idempotent_write"))
    if not wanted:
        raise CliError("name at least one --operation (or --producer / --consumer) and one resource")
    out = []
    for rtype, name, op in dict.fromkeys(wanted):
        for principal, host, permission in entries:
            out.append(AclBinding(rtype, name, principal, op.replace("-", "_"), permission, host,
                                  "literal" if rtype == "cluster" else pattern))
    return out


def _print(bindings: list[Any]) -> None:
    table = Table("resource", "name", "pattern", "principal", "host", "operation", "permission")
    for b in sorted(bindings, key=lambda b: (str(b.resource_type), b.resource_name, str(b.pattern_type),
                                             b.principal, b.host, str(b.operation), str(b.permission_type))):
        table.add_row(str(b.resource_type).upper(), b.resource_name, str(b.pattern_type).upper(), b.principal,
                      b.host, str(b.operation).upper(), str(b.permission_type).upper())
    print_table(table)


@acls_app.command("list")
def list_(
    topic: TopicsOption = None,
    group: GroupsOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    principal: Annotated[Optional[str], typer.Option("--principal", help="only this principal's ACLs")] = None,
    resource_pattern_type: PatternOption = "any",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """ACLs, of the resources named (all without any)."""
    from klog.client import AclBindingFilter

    resources = _resources(topic, group, transactional_id, cluster)
    filters = [AclBindingFilter(r, n, principal=principal, pattern_type=resource_pattern_type)
               for r, n in resources] or [AclBindingFilter(principal=principal, pattern_type=resource_pattern_type)]
    found = []
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        for f in filters:
            found += [b for b in admin.describe_acls(f) if b not in found]
    _print(found)


@acls_app.command("add")
def add(
    topic: TopicsOption = None,
    group: GroupsOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: OperationsOption = None,
    producer: Annotated[bool, typer.Option("--producer", help="what a producer needs (Write, Describe, Create)")]
    = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="what a consumer needs (topic Read and Describe, "
                                                               "group Read)")] = False,
    idempotent: Annotated[bool, typer.Option("--idempotent", help="with --producer: IdempotentWrite")] = False,
    resource_pattern_type: PatternOption = "literal",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Add ACLs: each operation for each principal and host on each resource."""
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not entries:
        raise CliError("name a principal: --allow-principal User:NAME or --deny-principal User:NAME")
    if resource_pattern_type.lower() not in ("literal", "prefixed"):
        raise CliError("--resource-pattern-type for add is literal or prefixed")
    bindings = _bindings(_resources(topic, group, transactional_id, cluster), entries, operation or [],
                         resource_pattern_type, producer, consumer, idempotent)
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.create_acls(bindings)
    typer.echo(f"added {len(bindings)} ACL(s)")
    _print(bindings)


@acls_app.command("remove")
def remove(
    topic: TopicsOption = None,
    group: GroupsOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: OperationsOption = None,
    resource_pattern_type: PatternOption = "literal",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Remove the ACLs of the resources named: those of the principals, hosts and operations given, all of
    them without."""
    from klog.client import AclBindingFilter

    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        raise CliError("name the resources whose ACLs to remove (--topic, --group, --transactional-id, --cluster)")
    entries: list[tuple[str | None, str | None, str]] = list(
        _entries(allow_principal, deny_principal, allow_host, deny_host)) or [(None, None, "any")]
    ops = [o.replace("-", "_") for o in operation or []] or ["any"]
    filters = [AclBindingFilter(r, n, principal=p, operation=op, permission_type=perm, host=h,
                                pattern_type="literal" if r == "cluster" else resource_pattern_type)
               for r, n in resources for p, h, perm in entries for op in ops]
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        deleted = admin.delete_acls(filters)
    typer.echo(f"removed {len(deleted)} ACL(s)")
    _print(deleted)

"""``klog quotas list|alter``: client quotas as ``kafka-configs.sh --entity-type users|clients`` manages them
(DescribeClientQuotas, AlterClientQuotas).

    klog quotas alter --user alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    klog quotas alter --default-user --client-id app --add-config request_percentage=50
    klog quotas alter --user alice --delete-config producer_byte_rate
    klog quotas list                  # every entity with a quota
    klog quotas list --user alice     # alice's (with any client id)

Entities: ``--user NAME`` or ``--default-user``, ``--client-id NAME`` or ``--default-client-id``, alone or
together; keys: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``.
"""

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
    print_table,
)

quotas_app = typer.Typer(help="List and alter client quotas (kafka-configs --entity-type users|clients).",
                         no_args_is_help=True)

UserOption = Annotated[Optional[str], typer.Option("--user", help="a user (the principal's name)")]
DefaultUserOption = Annotated[bool, typer.Option("--default-user", help="the default user entity")]
ClientOption = Annotated[Optional[str], typer.Option("--client-id", help="a client id")]
DefaultClientOption = Annotated[bool, typer.Option("--default-client-id", help="the default client-id entity")]


def register(app: typer.Typer) -> None:
    app.add_typer(quotas_app, name="quotas")


def _entity(user: str | None, default_user: bool, client_id: str | None, default_client: bool
            ) -> dict[str, str | None]:
    if user is not None and default_user:
        raise CliError("--user and --default-user name different entities: give one")
    if client_id is not None and default_client:
        raise CliError("--client-id and --default-client-id name different entities: give one")
    entity: dict[str, str | None] = {}
    if user is not None or default_user:
        entity["user"] = user
    if client_id is not None or default_client:
        entity["client-id"] = client_id
    return entity


def _changes(add_config: str | None, delete_config: list[str] | None) -> dict[str, float | None]:
    """kafka-configs' ``--add-config k=v,k=v`` and ``--delete-config k``."""
    changes: dict[str, float | None] = {}
    for item in (add_config or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--add-config takes key=value pairs, not {item!r}")
        try:
            changes[key.strip()] = float(value)
        except ValueError:
            raise CliError(f"the value of {key.strip()} must be a number, not {value!r}") from None
    for key in delete_config or []:
        for k in key.split(","):
            if k.strip():
                changes[k.strip()] = None
    if not changes:
        raise CliError("name what to change: --add-config key=value,... and/or --delete-config key")
    return changes


def _name(entity: tuple[tuple[str, str | None], ...]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def _print(quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]]) -> None:
    table = Table("entity", "key", "value")
    for entity, values in sorted(quotas.items(), key=lambda kv: _name(kv[0])):
        for key, value in sorted(values.items()):
            table.add_row(_name(entity), key, f"{value:g}")
    print_table(table)


@quotas_app.command("list")
def list_(
    user: UserOption = None,
    default_user: DefaultUserOption = False,
    client_id: ClientOption = None,
    default_client_id: DefaultClientOption = False,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Client quotas: of the entities whose parts match those given (all without any)."""
    match = _entity(user, default_user, client_id, default_client_id)
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        _print(admin.describe_client_quotas(match))


@quotas_app.command("alter")
def alter(
    user: UserOption = None,
    default_user: DefaultUserOption = False,
    client_id: ClientOption = None,
    default_client_id: DefaultClientOption = False,
    add_config: Annotated[Optional[str], typer.Option("--add-config", help="key=value,... to set")] = None,
    delete_config: Annotated[Optional[list[str]], typer.Option("--delete-config", help="a key to remove "
                                                                                       "(repeatable)")] = None,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Set or remove an entity's quotas."""
    entity = _entity(user, default_user, client_id, default_client_id)
    if not entity:
        raise CliError("name the entity: --user NAME/--default-user and/or --client-id NAME/--default-client-id")
    changes = _changes(add_config, delete_config)
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.alter_client_quotas([(entity, changes)])
    # (what was changed: a broker's answer to a describe may lag the controller's decision by a moment)
    name = _name(tuple(sorted(entity.items(), key=lambda kv: kv[0])))
    typer.echo(f"altered the quotas of {name}")
    table = Table("entity", "key", "value")
    for key, value in sorted(changes.items()):
        table.add_row(name, key, "(removed)" if value is None else f"{value:g}")
    print_table(table)

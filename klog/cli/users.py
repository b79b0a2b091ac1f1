"""``klog users list|describe|set-password|delete``: SCRAM users as ``kafka-configs.sh --entity-type users``
manages them (DescribeUserScramCredentials, AlterUserScramCredentials).

    klog users set-password alice --mechanism SCRAM-SHA-512 --password s3cret --iterations 8192
    printf '%s' "$PW" | klog users set-password alice --password-stdin     # keeps it out of shell history
    klog users list                      # every user with a credential: mechanism and iterations
    klog users describe alice
    klog users delete alice --mechanism SCRAM-SHA-256

The password is salted on this side (a random salt, PBKDF2-HMAC over the iterations, 4096 to 16384), as Kafka's
admin client does: only the salt and the salted password are sent, and nothing shows a password or a salt.
"""

from __future__ import annotations

import sys
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

users_app = typer.Typer(help="List, describe, set and delete SCRAM users' credentials (kafka-configs "
                             "--entity-type users).", no_args_is_help=True)

UserArgument = Annotated[str, typer.Argument(help="the user's name (the principal User:NAME)")]
MechanismOption = Annotated[str, typer.Option("--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512")]


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")


def _print(found: dict[str, Any]) -> None:
    table = Table("user", "mechanism", "iterations")
    for user in sorted(found):
        for info in sorted(found[user], key=lambda i: i.mechanism):
            table.add_row(user, info.mechanism, str(info.iterations))
    print_table(table)


@users_app.command("list")
def list_(
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Every user with a SCRAM credential: its mechanisms and iterations (never a password or salt)."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        _print(admin.describe_user_scram_credentials())


@users_app.command("describe")
def describe(
    users: Annotated[list[str], typer.Argument(help="the users (one or more)")],
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """The named users' SCRAM credentials; a user without any fails with RESOURCE_NOT_FOUND."""
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        _print(admin.describe_user_scram_credentials(users))


@users_app.command("set-password")
def set_password(
    user: UserArgument,
    mechanism: MechanismOption = "SCRAM-SHA-512",
    password: Annotated[Optional[str], typer.Option("--password", help="the new password")] = None,
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="read the password from standard input (one line), out of shell history")] = False,
    iterations: Annotated[int, typer.Option("--iterations", help="PBKDF2 iterations, 4096 to 16384")] = 4096,
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Create the user's SCRAM credential for the mechanism, or change its password."""
    from klog.client.admin import UserScramCredentialUpsertion

    if (password is None) == (not password_stdin):
        raise CliError("give the password with exactly one of --password or --password-stdin")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("the password is empty")
    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, mechanism, password, iterations)])
    typer.echo(f"set the {mechanism.upper()} password of user {user!r} ({iterations} iterations)")


@users_app.command("delete")
def delete(
    user: UserArgument,
    mechanism: MechanismOption = "SCRAM-SHA-512",
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Delete the user's SCRAM credential for the mechanism (its logins with it then fail)."""
    from klog.client.admin import UserScramCredentialDeletion

    with admin_client(Connection(bootstrap_server, command_config, timeout)) as admin:
        admin.alter_user_scram_credentials(deletions=[UserScramCredentialDeletion(user, mechanism)])
    typer.echo(f"deleted the {mechanism.upper()} credential of user {user!r}")

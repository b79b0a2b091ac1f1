"""``klog console``: the web console (:mod:`klog.console`) for the cluster at ``--bootstrap-server``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from klog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOption, CommandConfigOption


def register(app: typer.Typer) -> None:
    app.command("console", help="Serve a web console for the cluster (topics, messages, consumer groups, lag); "
                                "see docs/console.md.")(console)


def console(
    bootstrap_server: BootstrapOption = DEFAULT_BOOTSTRAP,
    host: Annotated[str, typer.Option(help="address the console listens on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port the console listens on (0: any free port)", min=0,
                                      max=65535)] = 8080,
    metrics_url: Annotated[Optional[list[str]], typer.Option(
        "--metrics-url", help="a klog broker's Prometheus endpoint, e.g. http://127.0.0.1:9644/metrics "
                              "(repeatable): rate sparklines and partition sizes")] = None,
    sample_interval: Annotated[float, typer.Option(
        help="seconds between the samples of lag and metrics behind the charts", min=0.1)] = 5.0,
    command_config: CommandConfigOption = None,
    login: Annotated[bool, typer.Option(
        "--login", help="ask users to log in with their SASL credentials (the default when --command-config names "
                        "SASL_PLAINTEXT or SASL_SSL without a user); --command-config's own credentials then only "
                        "serve the lag sampler")] = False,
    session_idle_timeout: Annotated[float, typer.Option(
        help="login mode: seconds without a request after which a session ends", min=1)] = 1800.0,
    session_max_age: Annotated[float, typer.Option(
        help="login mode: seconds after the login at which a session ends however used", min=1)] = 28800.0,
    max_sessions: Annotated[int, typer.Option(
        help="login mode: sessions open at once (a login beyond is refused)", min=1)] = 32,
    https_cert: Annotated[Optional[str], typer.Option(
        help="serve over HTTPS with this PEM certificate (chain); the session cookie is then Secure")] = None,
    https_key: Annotated[Optional[str], typer.Option(help="the PEM private key of --https-cert")] = None,
) -> None:
    import logging
    import sys

    from klog.metadata.config import load_properties
    from klog.console import main

    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client_config = load_properties(str(command_config)) if command_config is not None else None
    code = main(bootstrap_server, host, port, metrics_urls=metrics_url or None, sample_interval_s=sample_interval,
                client_config=client_config, login=login, session_idle_timeout_s=session_idle_timeout,
                session_max_age_s=session_max_age, max_sessions=max_sessions, https_cert=https_cert,
                https_key=https_key)
    if code:
        raise typer.Exit(code)


__all__ = ["console", "register"]

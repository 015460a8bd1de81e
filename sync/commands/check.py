"""`ccsync check`: validate the configuration file and the secrets it needs, optionally logging
in upstream once; `ok: <summary>` or the one line naming the problem."""

from __future__ import annotations

from pathlib import Path

import click

from sync.commands.wiring import config_file, config_option, fail_cleanly, run_async, settings_from
from sync.jobs.check import log_in, summary


@click.command("check")
@config_option
@click.option(
    "--upstream",
    is_flag=True,
    help="Also log every account in once (POST /accounts/login); nothing else is asked.",
)
@fail_cleanly
def check_command(config_path: Path | None, upstream: bool) -> None:
    """Check the configuration file and the secrets `ccsync run` needs (the password, the
    webhook secret while [webhooks] enabled, the management tokens), without contacting the
    upstream unless --upstream is given. Prints `ok: <summary>`, or one line naming the problem
    and its fix (exit 2; with --upstream, 1 for a refused login, 3 for an upstream that cannot
    be reached)."""
    settings = settings_from(config_path, secrets="receiver")
    line = summary(settings, config_file(config_path))
    if upstream:
        logged_in = run_async(log_in(settings))
        line += f"; upstream login ok ({logged_in} of {logged_in})"
    click.echo(f"ok: {line}")

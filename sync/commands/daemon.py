"""`ccsync run`, `ccsync reconcile` and `ccsync webhooks ...`: the daemon and its one-shot companions."""

from __future__ import annotations

from pathlib import Path

import click

from sync.commands.wiring import config_option, fail_cleanly, run_async, settings_from
from sync.core import logs
from sync.core.errors import SyncError
from sync.daemon.demo import run_demo
from sync.daemon.service import Daemon
from sync.ingest.subscriptions import manage
from sync.jobs.proving.proof import run_proof_cycle
from sync.jobs.proving.verify import run_verify


@click.command("run")
@config_option
@fail_cleanly
def run_command(config_path: Path | None) -> None:
    """Run the daemon: backfill the types never copied (all, in an empty mirror), then follow webhooks and polls, with the rolling proof and verify."""
    # The one command that serves the receiver: the webhook secret is resolved and required.
    settings = settings_from(config_path, secrets="receiver")
    if settings.management is not None:  # the press release job needs a user token: up front
        settings.management.require_user_token("the press release list the daemon mirrors")
    run_async(Daemon(settings).run())


@click.command("reconcile")
@config_option
@click.option(
    "--force",
    is_flag=True,
    help="Delete what filter[id] does not find even without a canary's proof, and more than "
    "reconcile_max_delete_share.",
)
@click.option(
    "--full",
    is_flag=True,
    help="First refetch every row whole and repair whatever differs, even under an unchanged "
    "updated_at (rows, links, sideloaded images, tags and groups; mall membership).",
)
@fail_cleanly
def reconcile_command(config_path: Path | None, force: bool, full: bool) -> None:
    """Apply the deletions feed, then run one whole cycle of the rolling proof: list every id
    and stamp upstream once; fetch what is missing or stale, delete what filter[id] confirms is
    gone (with canaries). A type whose absent rows could not be confirmed gone is reported at
    the end (exit 1); every other type is reconciled. With --full, a verify runs first: every row is
    refetched whole and repaired where its content differs, and the repairs are summed up."""
    settings = settings_from(config_path)
    if full:
        report = run_async(run_verify(settings))
        click.echo(f"verify: {report.rows:,} rows refetched in {report.requests:,} requests")
        for name in sorted({*report.repairs, *report.removed}):
            click.echo(
                f"{name:<15} repaired {report.repairs.get(name, 0):>7,}  "
                f"removed {report.removed.get(name, 0):>7,}"
            )
        click.echo(f"verify: {report.repaired:,} rows repaired")
    result, refusals = run_async(run_proof_cycle(settings, force=force))
    for name, (fetched, removed) in result.items():
        click.echo(f"{name:<15} fetched {fetched:>7,}  removed {removed:>7,}")
    if refusals:
        for line in refusals:
            click.echo(f"refused: {line}", err=True)
        raise SyncError(
            f"{len(refusals)} type(s) left rows absent from the listing that could not be "
            "confirmed gone (nothing of them was deleted); everything else was reconciled",
            hint="check the upstream, then rerun with --force",
        )


@click.group("webhooks")
def webhooks_group() -> None:
    """List, create or remove the upstream's webhook subscriptions for this receiver."""


@webhooks_group.command("list")
@config_option
@fail_cleanly
def webhooks_list(config_path: Path | None) -> None:
    """Topics this receiver is subscribed to upstream."""
    topics = run_async(manage(settings_from(config_path, secrets="receiver"), "list"))
    click.echo("\n".join(topics) if topics else "no subscriptions for this receiver")


@webhooks_group.command("subscribe")
@config_option
@fail_cleanly
def webhooks_subscribe(config_path: Path | None) -> None:
    """Subscribe every configured topic that is not subscribed yet."""
    topics = run_async(manage(settings_from(config_path, secrets="receiver"), "subscribe"))
    click.echo(f"subscribed: {', '.join(topics)}")


@webhooks_group.command("unsubscribe")
@config_option
@fail_cleanly
def webhooks_unsubscribe(config_path: Path | None) -> None:
    """Remove this receiver's subscriptions (polling keeps the mirror converging)."""
    topics = run_async(manage(settings_from(config_path, secrets="receiver"), "unsubscribe"))
    click.echo("unsubscribed" if not topics else f"still subscribed: {', '.join(topics)}")


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo"),
    show_default=True,
    help="Where the mirror and its sync.toml are left.",
)
@click.option(
    "--resources",
    type=click.IntRange(100, 2_000_000),
    default=5000,
    show_default=True,
    help="Resources the emulator serves (all types together).",
)
@click.option(
    "--mutations-per-second",
    type=click.FloatRange(0.1, 1000),
    default=5.0,
    show_default=True,
    help="Random creates, updates and deletes applied upstream each second.",
)
@click.option(
    "--duration", type=click.FloatRange(1), default=None, help="Stop after this many seconds."
)
@fail_cleanly
def demo_command(
    directory: Path, resources: int, mutations_per_second: float, duration: float | None
) -> None:
    """Run the bundled emulator with a stream of changes and the daemon following it (Ctrl-C stops)."""
    logs.configure("warning", "console")
    run_async(
        run_demo(
            directory,
            resources=resources,
            mutations_per_second=mutations_per_second,
            duration=duration,
        )
    )

"""`ccsync backfill`, `status`, `changes` and `datasette-metadata`: fill the mirror once, and show
what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sync.cli import config_option, fail_cleanly, run_async, settings_from
from sync.jobs.backfill import run_backfill
from sync.readers.changes import change_line, changes
from sync.readers.status import status_data, status_lines
from sync.store import Mirror


@click.command("backfill")
@config_option
@click.option("--restart", is_flag=True, help="Start over instead of resuming an interrupted run.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or progress log lines.")
@fail_cleanly
def backfill_command(config_path: Path | None, restart: bool, quiet: bool) -> None:
    """Copy every configured type into the mirror; resumes where an interrupted run stopped."""
    settings = settings_from(config_path)
    report = run_async(run_backfill(settings, restart=restart, quiet=quiet))
    for name, t in report.types.items():
        line = f"{name:<15} {t.rows:>9,} rows  {t.pages:>6,} pages"
        if t.repaired or t.removed:
            line += f"  repaired {t.repaired}, removed {t.removed}"
        if t.error:
            line += f"  SKIPPED: {t.error}"
        click.echo(line)
    click.echo(f"backfill: {report.rows:,} rows in {report.seconds:.1f}s -> {settings.mirror.path}")


@click.command("status")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@fail_cleanly
def status_command(config_path: Path | None, as_json: bool) -> None:
    """Show what the mirror holds and how the daemon is doing: the mirror file, the queue depth,
    the webhook subscriptions, the request budget, how the mall-scoped types are polled
    (`GET /malls?include=` or per mall, and why), `degraded:` problems, each daemon job's last
    run, outcome and next run, the rolling verify's position, and per type: rows, last sync,
    lag (seconds), poll cursor and the last error, and the values refused (their rows keep their
    last good copy) or coerced because they did not fit their declared type. --json prints all
    of it for scripts."""
    settings = settings_from(config_path)
    data = status_data(settings)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    for line in status_lines(data):
        click.echo(line)


@click.command("datasette-metadata")
@config_option
@fail_cleanly
def datasette_metadata_command(config_path: Path | None) -> None:
    """Print Datasette metadata for the mirror (JSON): every table described, the
    bookkeeping hidden. Use: `ccsync datasette-metadata > metadata.json`, then
    `datasette mirror.db --metadata metadata.json`."""
    from sync.readers.datasette import datasette_metadata

    settings = settings_from(config_path)
    click.echo(json.dumps(datasette_metadata(settings.mirror.path), indent=2, sort_keys=True))


@click.command("changes")
@config_option
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Print entries after this sequence number.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new entries as they come.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between looks for new entries with --follow.",
)
@fail_cleanly
def changes_command(
    config_path: Path | None, since: int, follow: bool, as_json: bool, interval: float
) -> None:
    """Print the mirror's change feed: SEQ TYPE ID OP UPDATED_AT, one line per change (op
    upsert, delete, or backfill for every row of a type). A website invalidates its caches
    from it; a downstream system follows the mirror with --since (the last SEQ it saw)
    --follow."""
    settings = settings_from(config_path)
    mirror = Mirror.open(settings.mirror.path, readonly=True)
    try:
        for entry in changes(mirror, since, follow=follow, interval=interval):
            click.echo(change_line(entry, as_json=as_json))
    except KeyboardInterrupt:
        return
    finally:
        mirror.close()

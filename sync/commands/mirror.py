"""`ccsync backfill`, `status`, `changes` and `datasette-metadata`: fill the mirror once, and show
what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sync.commands.wiring import (
    config_option,
    fail_cleanly,
    mirror_option,
    reader_from,
    run_async,
    settings_from,
)
from sync.jobs.backfilling.backfill import run_backfill
from sync.model import catalogue
from sync.readers.changes import changes
from sync.readers.roles import role_lines, roles
from sync.readers.status import status_data, status_lines
from sync.store.opening import open_mirror


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
        if t.resumed:
            line += f" (+{t.resumed:,} pages copied before the interruption)"
        if t.repaired or t.removed:
            line += f"  repaired {t.repaired}, removed {t.removed}"
        if t.error:
            line += f"  SKIPPED: {t.error}"
        if t.unsettled:
            line += f"  UNSETTLED: malls {', '.join(map(str, sorted(t.unsettled)))}"
        click.echo(line)
    click.echo(
        f"backfill: {report.rows:,} rows in {report.seconds:.1f}s -> {settings.mirror.target.describe()}"
    )
    unsettled = sorted(n for n, t in report.types.items() if t.unsettled)
    if unsettled:
        raise click.ClickException(
            f"the mall listings of {', '.join(unsettled)} kept changing while the backfill "
            "read them: rows may be missing; run `ccsync reconcile` once the upstream holds still"
        )


@click.command("status")
@config_option
@mirror_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@fail_cleanly
def status_command(
    config_path: Path | None, mirror_path: str | None, schema: str | None, as_json: bool
) -> None:
    """Show how the mirror and its daemon are doing, the verdict first: `healthy`, `starting
    (first backfill)`, `degraded: <problem>`, `stopped since <time>` or `not running (never
    ran)`; then every problem `/healthz` would list (an unreachable upstream, a failed job, an
    unresolved proof, a mirror not taking writes; `left by the last run:` when no daemon runs);
    then per type: rows, last sync, lag (seconds), poll cursor and the last error. After them
    the details: the mirror file, who holds it, the last backfill, the queue depth (and its
    filter[id] requests and time to drain at the request budget), the webhook subscriptions, the request budget, how the mall-scoped types are polled (`GET
    /malls?include=` or per mall, and why), the values refused (their rows keep their last good
    copy) or coerced because they did not fit their declared type, each daemon job's last run,
    outcome and next run, the rolling verify's position and the rolling proof (per type when it
    was last proven complete beside the staleness bound, the repairs by kind, the change lag's
    p50/p99). --json prints all of it for scripts. It reads only the mirror: no secret is
    needed, and --mirror PATH|URL works without a configuration file."""
    target, settings = reader_from(config_path, mirror_path, schema)
    budget = settings.upstream.max_requests_per_second if settings else None
    data = status_data(target, max_per_second=budget)
    if target.url is not None:  # who is active and who stands by (`sync.readers.roles`)
        data["daemons"] = roles(target)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    for line in status_lines(data):
        click.echo(line)
    if "daemons" in data:
        for line in role_lines(data["daemons"]):
            click.echo(line)


@click.command("datasette-metadata")
@config_option
@mirror_option
@fail_cleanly
def datasette_metadata_command(
    config_path: Path | None, mirror_path: str | None, schema: str | None
) -> None:
    """Print Datasette metadata for the mirror (JSON): every table described, the
    bookkeeping hidden. Use: `ccsync datasette-metadata > metadata.json`, then
    `datasette mirror.db --metadata metadata.json`. Datasette reads SQLite files only: a
    PostgreSQL mirror is refused."""
    from sync.readers.datasette import datasette_metadata

    target, _ = reader_from(config_path, mirror_path, schema)
    click.echo(json.dumps(datasette_metadata(target), indent=2, sort_keys=True))


@click.command("changes")
@config_option
@mirror_option
@click.option(
    "--since",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Print entries after this sequence number.",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    metavar="TYPE",
    help="Only entries of this type (repeat for several), e.g. --type deals --type stores.",
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
    config_path: Path | None,
    mirror_path: str | None,
    schema: str | None,
    since: int,
    types: tuple[str, ...],
    follow: bool,
    as_json: bool,
    interval: float,
) -> None:
    """Print the mirror's change feed: SEQ TYPE ID OP UPDATED_AT, one line per change. OP is
    upsert (a new copy), delete, repair (content corrected under an unchanged updated_at: the
    verify, a reconcile), links (relationships or mall membership changed alone) or backfill
    (every row of the type). Entries older than changes_retention_days are pruned: a --since
    from before them gets a first line `SEQ * - pruned` (SEQ the last one pruned) and a
    warning, so a reader re-reads the mirror instead of missing changes. A website invalidates
    its caches from it; a downstream system follows the mirror with --since (the last SEQ it
    saw) --follow. It reads only the mirror: no secret is needed."""
    unknown = sorted(set(types) - set(catalogue.TYPES))
    if unknown:
        raise click.BadParameter(
            f"unknown type(s) {', '.join(unknown)}; choose from {', '.join(catalogue.TYPES)}",
            param_hint="--type",
        )
    target, _ = reader_from(config_path, mirror_path, schema)
    mirror = open_mirror(target, readonly=True)
    try:
        for entry in changes(mirror, since, types, follow=follow, interval=interval):
            if entry.op == "pruned":
                click.echo(
                    f"ccsync: entries up to {entry.seq} were pruned (older than "
                    "changes_retention_days): re-read the mirror for what they held",
                    err=True,
                )
            click.echo(entry.line(as_json=as_json))
    except KeyboardInterrupt:
        return
    finally:
        mirror.close()

"""`ccsync backfill` and `ccsync status`: fill the mirror once, and show what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sync.channel.client import ChannelClient
from sync.cli import (
    config_option,
    fail_cleanly,
    mirror_option,
    reader_from,
    run_async,
    settings_from,
)
from sync.core.config import Settings
from sync.jobs.backfill import Backfill, BackfillReport
from sync.jobs.progress import for_terminal
from sync.model import catalogue
from sync.readers.status import status_data
from sync.store import Mirror

#: Pages per transaction in a one-shot backfill (at most 2 s apart): fewer commits, each of which
#: rewrites the B-tree pages it touched; same resume guarantees.
GROUP_PAGES = 256


async def backfill(
    settings: Settings, *, restart: bool = False, quiet: bool = False
) -> BackfillReport:
    """Run one backfill with the given settings (library entry point of `ccsync backfill`)."""
    mirror = Mirror.open(settings.mirror.path, checkpoints=settings.mirror.checkpoints)
    try:
        async with ChannelClient(settings.upstream) as client:
            runner = Backfill(
                client, mirror, settings, progress=for_terminal(quiet), group_commit=GROUP_PAGES
            )
            return await runner.run(restart=restart)
    finally:
        mirror.close()


@click.command("backfill")
@config_option
@click.option("--restart", is_flag=True, help="Start over instead of resuming an interrupted run.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or progress log lines.")
@fail_cleanly
def backfill_command(config_path: Path | None, restart: bool, quiet: bool) -> None:
    """Copy every configured type into the mirror; resumes where an interrupted run stopped."""
    settings = settings_from(config_path)
    if settings.management is not None:  # it mirrors the press release list: up front
        settings.management.require_user_token("the press release list backfill mirrors")
    report = run_async(backfill(settings, restart=restart, quiet=quiet))
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
@mirror_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@fail_cleanly
def status_command(config_path: Path | None, mirror_path: Path | None, as_json: bool) -> None:
    """Show what the mirror holds and how the daemon is doing: the mirror file, the queue depth,
    the webhook subscriptions, the request budget, how the mall-scoped types are polled
    (`GET /malls?include=` or per mall, and why), `degraded:` problems, each daemon job's last
    run, outcome and next run, the rolling verify's position, and per type: rows, last sync,
    lag (seconds), poll cursor and the last error, and the values refused (their rows keep their
    last good copy) or coerced because they did not fit their declared type. --json prints all
    of it for scripts. It reads only the mirror: no secret is needed (--mirror PATH without a
    configuration file works too)."""
    path, settings = reader_from(config_path, mirror_path)
    data = status_data(
        path, max_per_second=settings.upstream.max_requests_per_second if settings else None
    )
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"mirror: {data['mirror']}")
    click.echo(f"queue: {data['queue_depth']} notices waiting")
    subs = ", ".join(data["subscriptions"]) or "none recorded"
    click.echo(
        f"webhook subscriptions: {subs} (checked {data['subscriptions_checked_at'] or 'never'})"
    )
    budget = data["request_budget"]
    if budget.get("max_per_second"):
        now = f", now {budget['rate']}/s" if "rate" in budget else ""
        hit = f", {budget['throttled']} answers 429" if budget.get("throttled") else ""
        click.echo(f"request budget: {budget['max_per_second']:g}/s{now}{hit}")
    else:
        click.echo("request budget: none ([upstream] max_requests_per_second = 0)")
    members = data["mall_members"]
    if members and members.get("types"):
        click.echo(f"mall-scoped types (detected {members.get('detected_at') or '?'}):")
        for name, d in sorted(members["types"].items()):
            how = "GET /malls?include=" if d.get("mode") == "include" else "per-mall listings"
            click.echo(f"  {name:<15} {how}: {d.get('reason', '')}")
    for name, source in sorted((data.get("mall_routes") or {}).items()):
        how = {
            "include": "the malls' include= linkage",
            "derived": "derived by a rule the mall routes agreed with",
            "unchecked": "derived by a rule not yet checked against the mall routes",
            "route": "listed from GET /malls/{id}/" + name,
        }.get(source, source)
        click.echo(f"malls_{name}: {how}")
    profile = data.get("upstream_profile") or {}
    if profile.get("routes"):
        click.echo(f"upstream profile (probed {profile.get('probed_at') or 'at run time'}):")
        for key, r in sorted(profile["routes"].items()):
            refused = sorted(p for p, v in (r.get("includes") or {}).items() if v == "refused")
            bare = sorted(p for p, v in (r.get("includes") or {}).items() if v == "no linkage")
            how = (
                "walked by updated_at"
                if r.get("sort") in ("honoured", "unknown")
                else ("polled unsorted (sort not honoured)")
            )
            line = f"  {key:<28} {how}; etag {r.get('etag', 'unknown')}"
            if refused:
                sources = r.get("linkage_from") or {}
                line += "; include refused: " + ", ".join(
                    f"{p} (linkage {_source(sources.get(p.split('.')[0]))})" for p in refused
                )
            if bare:
                line += f"; include serves no linkage: {', '.join(bare)}"
            click.echo(line)
    if data.get("page_size"):
        asked, _, served = str(data["page_size"]).partition(":")
        click.echo(f"page size: asked {asked}, upstream serves {served or 'what is asked'}")
    for problem in data["problems"]:
        click.echo(f"degraded: {problem}")
    for name, v in sorted(data["values"].items()):
        line = f"values of {name}: {v['refused']} refused, {v['coerced']} coerced"
        last = v.get("last_refused")
        if last:
            line += (
                f" (rows kept at their last good copy; last: id {last['id']} "
                f"{last['attribute']} = {last['value']}: {last['problem']})"
            )
        click.echo(line)
    if data["jobs"]:
        click.echo(f"{'job':<15} {'last run':<24} {'outcome':<11} {'next run':<24}  error")
        for j in data["jobs"]:
            click.echo(
                f"{j['name']:<15} {j['started_at'] or 'never':<24} {j['outcome'] or '-':<11} "
                f"{j['next_run_at'] or '-':<24}  {j['error'] or ''}"
            )
    if data["verify_position"] or data["verify_cycle_finished_at"]:
        click.echo(
            f"verify: position {data['verify_position'] or 'start of a cycle'}; last whole "
            f"cycle finished {data['verify_cycle_finished_at'] or 'never'}"
        )
    click.echo(f"{'type':<15} {'rows':>9}  {'last sync':<24} {'lag s':>8}  {'cursor':<24}  error")
    for t in data["types"]:
        lag = "-" if t["lag_s"] is None else f"{t['lag_s']:.0f}"
        click.echo(
            f"{t['type']:<15} {t['rows']:>9,}  {t['last_sync_at'] or '-':<24} {lag:>8}  "
            f"{t['cursor'] or '-':<24}  {t['last_error'] or ''}"
        )


@click.command("datasette-metadata")
@config_option
@mirror_option
@fail_cleanly
def datasette_metadata_command(config_path: Path | None, mirror_path: Path | None) -> None:
    """Print Datasette metadata for the mirror (JSON): every table described, the
    bookkeeping hidden. Use: `ccsync datasette-metadata > metadata.json`, then
    `datasette mirror.db --metadata metadata.json`."""
    from sync.readers.datasette import datasette_metadata

    path, _ = reader_from(config_path, mirror_path)
    click.echo(json.dumps(datasette_metadata(path), indent=2, sort_keys=True))


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
    mirror_path: Path | None,
    since: int,
    types: tuple[str, ...],
    follow: bool,
    as_json: bool,
    interval: float,
) -> None:
    """Print the mirror's change feed: SEQ TYPE ID OP UPDATED_AT, one line per change. OP is
    upsert (a new copy), delete, repair (content corrected under an unchanged updated_at, by
    the verify or a reconcile), links (relationships or mall membership changed alone) or
    backfill (every row of the type). Entries older than changes_retention_days are pruned: a
    --since older than that gets a first line `SEQ * - pruned` (SEQ the last pruned) and a
    warning, so a reader re-reads the mirror instead of missing changes. A website invalidates
    its caches from it; a downstream system follows the mirror with --since (the last SEQ it
    saw) --follow. It reads only the mirror: no secret is needed."""
    from sync.readers.changes import follow_changes

    unknown = sorted(set(types) - set(catalogue.TYPES))
    if unknown:
        raise click.BadParameter(
            f"unknown type(s) {', '.join(unknown)}; choose from {', '.join(catalogue.TYPES)}",
            param_hint="--type",
        )
    path, _ = reader_from(config_path, mirror_path)
    try:
        for entry in follow_changes(path, since, types, follow=follow, interval=interval):
            if entry.op == "pruned":
                click.echo(
                    f"ccsync: entries up to {entry.seq} were pruned (older than "
                    "changes_retention_days): re-read the mirror for what they held",
                    err=True,
                )
            if as_json:
                click.echo(json.dumps(entry.as_dict()))
            else:
                click.echo(entry.line())
    except KeyboardInterrupt:
        return


def _source(route: str | None) -> str:
    """Where a refused include path's linkage comes from, for `ccsync status`."""
    return "not mirrored" if route in (None, "not mirrored") else f"from {route}"

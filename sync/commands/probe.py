"""`ccsync probe`: what the upstream answers where the spec is silent, printed, no row written."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from sync.channel.profile import DELETIONS_NOTE, DELETIONS_ROUTE
from sync.commands.wiring import config_option, fail_cleanly, run_async, settings_from
from sync.jobs.probe import api_version, probe, unusable


@click.command("probe")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@fail_cleanly
def probe_command(config_path: Path | None, as_json: bool) -> None:
    """Ask the upstream, a few rows a request, what the spec leaves open, per route: is `sort`
    (and `-sort`) on updated_at honoured, does `filter[updated_at][gte]` filter, which include
    paths serve linkage, is the ETag stable and does `If-None-Match` answer 304; and the page
    size served, the clock offset and the API version. Writes nothing: for an operator pointing
    sync at a new upstream (the daemon keeps its own profile in the mirror, `ccsync status`)."""
    profile = run_async(probe(settings_from(config_path)))
    if as_json:
        click.echo(json.dumps(asdict(profile), indent=2, sort_keys=True))
        return
    served = profile.page_size_served or profile.page_size_asked
    click.echo(
        f"api version: {api_version(profile)}; page size asked {profile.page_size_asked}, "
        f"served {served}; clock offset {profile.clock_offset:+.1f} s; signing window "
        f"{profile.window()}"
    )
    head = ("route", "sort", "-sort", "filter[updated_at]", "compares", "etag", "include paths")
    rows = [head, *profile.rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    if DELETIONS_ROUTE in profile.routes:
        click.echo(f"note: {DELETIONS_NOTE}")
    lines = unusable(profile)
    if lines:
        click.echo("could not use:")
        for line in lines:
            click.echo(f"  {line}")

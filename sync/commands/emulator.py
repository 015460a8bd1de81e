"""`ccsync emulator`: serve the bundled emulator of the Channel Content API on 127.0.0.1."""

from __future__ import annotations

import click

from sync.commands.wiring import fail_cleanly, run_async
from sync.emulator import Emulator
from sync.emulator.hard import PROFILES, Hard
from sync.emulator.server import (
    BYTES_PER_RESOURCE,
    available_memory,
    footprint,
    max_resources,
    serve_forever,
)


@click.command("emulator")
@click.option(
    "--resources",
    type=click.IntRange(50, 5_000_000),
    default=5000,
    show_default=True,
    help="Size of the generated data set (refused when it would not fit in the memory "
    "available: ~1.5 KB a resource, see docs/emulator.md).",
)
@click.option(
    "--malls",
    type=click.IntRange(1, 1_000_000),
    default=None,
    help="Number of malls, independent of --resources (default: resources // 1000, at least 3).",
)
@click.option(
    "--seed", type=int, default=1, show_default=True, help="Seed of the data set and of the faults."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option(
    "--email", default="demo@example.com", show_default=True, help="The demo account's e-mail."
)
@click.option(
    "--password", default="demo-password", show_default=True, help="The demo account's password."
)
@click.option(
    "--mutations-per-second",
    type=click.FloatRange(0),
    default=0.0,
    help="Random creates/updates/deletes per second.",
)
@click.option(
    "--error-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of data requests answered 500/502/503.",
)
@click.option(
    "--rate-429",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share answered 429 with Retry-After.",
)
@click.option(
    "--latency", type=click.FloatRange(0), default=0.0, help="Seconds added to every data request."
)
@click.option(
    "--stall-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of data requests held back --stall-seconds before the answer (client timeouts).",
)
@click.option(
    "--stall-seconds", type=click.FloatRange(0), default=5.0, help="How long a stall lasts."
)
@click.option(
    "--drop-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of connections dropped without an answer.",
)
@click.option(
    "--webhook-loss-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of webhook notices lost.",
)
@click.option(
    "--webhook-duplicate-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of webhook notices sent twice.",
)
@click.option("--webhook-reorder", is_flag=True, help="Shuffle the notices of each delivery.")
@click.option(
    "--clock-offset", type=float, default=0.0, help="Seconds added to the emulator's clock."
)
@click.option(
    "--page-cache-mb",
    type=click.IntRange(0, 1_000_000),
    default=0,
    help="Keep up to this many MB of collection page bodies, reused until the data changes "
    "(the benchmarks use it so the emulator takes little CPU; 0: off).",
)
@click.option(
    "--encoding-cache-mb",
    type=click.IntRange(0, 1_000_000),
    default=256,
    show_default=True,
    help="Memory for encoded resource variants other than the plain one (sparse fieldsets, "
    "included linkage, --stamp-forms), least recently used dropped first.",
)
@click.option(
    "--touch-owners",
    is_flag=True,
    help="Editing or deleting an image, tag or group also bumps its owners' updated_at "
    "(off by default: the spec does not promise it, and sync must not depend on it).",
)
@click.option(
    "--mall-includes",
    is_flag=True,
    help="Serve a mall's members (stores, products, programs, social_feeds, press_releases, "
    "...) in `GET /malls?include=` (off by default: the spec does not show valid include names, "
    "so sync detects them at run time and falls back to per-mall listings).",
)
@click.option(
    "--stamp-forms",
    is_flag=True,
    help="Serve absolute timestamps in several ISO 8601 forms of the same instant "
    "(+00:00, +01:00, microseconds, no fraction) besides the spec's .sssZ.",
)
@click.option(
    "--stale-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of listing pages served by a lagging replica: changed rows as they were "
    "before their last change.",
)
@click.option(
    "--silent-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of random updates that change content without touching updated_at and "
    "without a notice (a legacy bulk SQL update): only `ccsync reconcile --full` repairs them.",
)
@click.option(
    "--null-first",
    is_flag=True,
    help="Serve null for every nullable attribute on the first 100 rows of each type.",
)
@click.option(
    "--changing-scripts",
    is_flag=True,
    help="Serve meta.scripts that differ per type (each its own list and order), changed at "
    "run time through PUT /_emulator/scripts/{type} (off: one list for every response).",
)
@click.option(
    "--lenient-content-type",
    is_flag=True,
    help="Accept JSON:API request bodies sent as application/json (strict by default: 415).",
)
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default=None,
    help="strict: every hard reading of the spec on (see --hard and docs/emulator.md).",
)
@click.option(
    "--hard",
    "hard_switches",
    multiple=True,
    metavar="NAME[=VALUE]",
    help=f"Turn one hard reading on (repeatable; NAME=false turns one of the profile off; "
    f"page_bound=N sets the bound, signing_window=S the seconds, includes_allowed=images,tags "
    f"the include names accepted): {', '.join(Hard.names())}.",
)
@click.option(
    "--management-refuse-sort",
    is_flag=True,
    help="Answer 400 to a press release list carrying sort_by[] or sort_directions[] (the "
    "management spec does not show their values; sync then lists in the upstream's order).",
)
@fail_cleanly
def emulator_command(
    resources: int,
    malls: int | None,
    seed: int,
    port: int,
    email: str,
    password: str,
    mutations_per_second: float,
    error_rate: float,
    rate_429: float,
    latency: float,
    stall_rate: float,
    stall_seconds: float,
    drop_rate: float,
    webhook_loss_rate: float,
    webhook_duplicate_rate: float,
    webhook_reorder: bool,
    clock_offset: float,
    page_cache_mb: int,
    encoding_cache_mb: int,
    touch_owners: bool,
    stamp_forms: bool,
    mall_includes: bool,
    stale_rate: float,
    silent_rate: float,
    null_first: bool,
    lenient_content_type: bool,
    profile: str | None,
    hard_switches: tuple[str, ...],
    management_refuse_sort: bool,
    changing_scripts: bool,
) -> None:
    """Serve the bundled emulator of the Channel Content API until Ctrl-C or SIGTERM."""
    need = footprint(resources, encoding_cache_mb + page_cache_mb)
    have = available_memory()
    if have is not None and need > have:
        raise click.UsageError(
            f"--resources {resources:,} needs about {need / 1e9:.1f} GB of memory "
            f"(~{BYTES_PER_RESOURCE:,} bytes a resource, plus the caches), and this machine has "
            f"{have / 1e9:.1f} GB available: serve at most "
            f"{max_resources(have, encoding_cache_mb + page_cache_mb):,} resources, or free memory."
        )
    hard = Hard.profile(profile)
    for spec in hard_switches:
        try:
            hard.switch_on(spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--hard") from None
    emu = Emulator(
        hard=hard,
        resources=resources,
        seed=seed,
        email=email,
        password=password,
        page_cache_mb=page_cache_mb,
        malls=malls,
        encoding_cache_mb=encoding_cache_mb,
    )
    emu.data.touch_owners, emu.data.stamp_forms = touch_owners, stamp_forms
    emu.faults.stale_rate = stale_rate
    emu.data.silent_rate = silent_rate
    emu.app.strict_content_type = not lenient_content_type
    emu.app.mall_includes = mall_includes
    emu.management.refuse_sort = management_refuse_sort
    emu.app.changing_scripts = changing_scripts
    if null_first:
        emu.data.null_first()
    f = emu.faults
    f.error_rate, f.rate_429, f.latency, f.drop_rate = error_rate, rate_429, latency, drop_rate
    f.webhook_loss_rate, f.webhook_duplicate_rate = webhook_loss_rate, webhook_duplicate_rate
    f.webhook_reorder, f.clock_offset = webhook_reorder, clock_offset
    f.stall_rate, f.stall_seconds = stall_rate, stall_seconds

    def announce(e: Emulator) -> None:
        click.echo(f"emulator serving {resources:,} resources at {e.base_url}", err=False)
        if e.hard.on():
            click.echo(f"hard readings on: {', '.join(e.hard.on())}")
        click.echo(f"demo account: email={e.email} password={e.password}")
        click.echo(
            f"management API: bearer (user) token {e.management.token}, client token "
            f"{e.management.client_token}, product loyalty, club demo-club"
        )
        click.echo("Ctrl-C or SIGTERM stops it.", err=False)

    run_async(serve_forever(emu, port, mutations_per_second, announce))
    cache = emu.app.pages
    if cache.enabled:
        click.echo(
            f"page cache: {len(cache):,} pages, {cache.used / 1e6:,.0f} MB, "
            f"{cache.hits:,} hits, {cache.misses:,} misses"
        )

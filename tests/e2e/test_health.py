"""What the running daemon reports about itself: `/healthz` (degraded on a proof the guard
holds or an overdue job), the Prometheus gauges read when scraped, and the poll cycle logged at start
(`sync.daemon.health`, `sync.daemon.http`, `sync.daemon.schedule`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from sync.emulator import Emulator
from tests.support.daemon import running
from tests.support.settings import daemon_settings as settings_for


async def test_health_is_degraded_when_the_proof_is_unresolved_or_a_job_overdue(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True, reconcile_max_delete_share=0.2)
    async with running(settings) as daemon:
        assert daemon.health()["status"] == "ok"
        # A live article the mirror refuses (a tombstone dated after every copy of it): the
        # proof meets it and cannot write it, which health says (never "repaired").
        rid = int(emulator.ids("articles")[1])
        mirror = daemon.running.mirror
        # A feed entry dated after every copy: the row deleted, its tombstone refuses them.
        mirror.table("articles").apply_feed({rid: "2999-01-01T00:00:00.000Z"})
        # The rolling proof meets it (a whole cycle's credit at once).
        daemon.bodies.proof_credit = 100_000.0
        await daemon.running.runs.wrap("proof", daemon.bodies.proof_step, 3600.0)()
        health = daemon.health()
        assert health["status"] == "degraded"
        assert any(p.startswith("proof of articles") for p in health["problems"]), health
        assert daemon.healthy()  # the watchdog does not restart it for that
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{daemon.bound_port}/healthz"
            async with http.get(url) as resp:
                assert resp.status == 503
                assert (await resp.json())["status"] == "degraded"
        # A job that should have run long ago and is not running: overdue.
        daemon.running.mirror.jobs.scheduled("hours", "2000-01-01T00:00:00.000Z")
        assert any(p.startswith("hours overdue") for p in daemon.health()["problems"])


async def test_metrics_are_live_from_the_first_request(emulator: Emulator, tmp_path: Path) -> None:
    """Right after the first backfill, before any poll: the backfill's requests are counted,
    rows are there, lag grows while nothing syncs, and the process metrics are exported."""
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True, poll_interval=3600.0)
    async with running(settings) as daemon:
        url = f"http://127.0.0.1:{daemon.bound_port}/metrics"
        for _ in range(100):  # the catch-up poll (0.5 s after start) resets the lag: after it
            if daemon.running.mirror.jobs.all().get("poll", {}).get("outcome") == "ok":
                break
            await asyncio.sleep(0.1)
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                first = await r.text()
            await asyncio.sleep(1.2)
            async with http.get(url) as r:
                later = await r.text()
    assert 'sync_upstream_requests_total{status="200"}' in first
    assert 'sync_rows{type="deals"}' in first and "process_resident_memory_bytes" in first

    def lag(text: str) -> float:
        (line,) = [x for x in text.splitlines() if x.startswith('sync_lag_seconds{type="deals"}')]
        return float(line.split()[-1])

    assert lag(later) > lag(first)  # computed when scraped, not when a job last ran


async def test_the_poll_cycle_and_its_staleness_bound_are_logged_at_start(
    emulator: Emulator, tmp_path: Path
) -> None:
    """One request per scope plus the deletions feed, the time it takes at the budget, and
    the bound `poll_interval` + that time; a warning when it cannot fit its interval."""
    from structlog.testing import capture_logs

    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False, poll_interval=0.5)
    with capture_logs() as logs:
        async with running(settings) as daemon:
            cycle = daemon.bodies.poll_cycle()
    malls = len(emulator.ids("malls"))
    mall_scoped = sum(1 for t in daemon.types if t.level == "mall")
    top = sum(len(t.scope_params) for t in daemon.types if t.level == "top")
    assert cycle["requests"] == 1 + top + mall_scoped * malls
    rate = settings.upstream.max_requests_per_second
    assert cycle["staleness_bound_s"] == round(0.5 + cycle["requests"] / rate, 1)
    (logged,) = [e for e in logs if e["event"] in ("poll.cycle", "poll.cycle_overruns")]
    assert logged["requests"] == cycle["requests"]
    if cycle["seconds_at_budget"] > 0.5:
        assert (
            logged["event"] == "poll.cycle_overruns" and "max_requests_per_second" in logged["hint"]
        )

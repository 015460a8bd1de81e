"""sync.daemon.service: what is backfilled first, stopping a step, the jobs scheduled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.core.config import Settings, parse_config
from sync.daemon.schedule import BACKFILL_RETRY_S, backfill_retry_delay, parse_stamp
from sync.daemon.service import Daemon
from sync.store import Mirror


def _settings(db: Path, *, webhooks: bool = False) -> Settings:
    config: dict[str, Any] = {
        "upstream": {
            "base_url": "http://127.0.0.1:9",
            "email": "a@b.c",
            "password": "pw",
            "types": ["deals", "stores"],
        },
        "mirror": {"path": str(db)},
        "webhooks": {"enabled": False},
    }
    if webhooks:
        config["webhooks"] = {"enabled": True, "listen": "127.0.0.1:0", "secret": "s" * 32}
    return parse_config(config)


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Daemon:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    return Daemon(_settings(tmp_path / "m.db"))


def test_before_its_parts_are_open_the_daemon_is_starting_and_healthy(daemon: Daemon) -> None:
    assert daemon.health() == {"status": "starting", "ready": False, "problems": []}
    assert daemon.healthy() and not daemon.is_ready
    assert [t.name for t in daemon.types] == ["deals", "stores"]


def _meta(mirror: Mirror, key: str, value: str) -> None:
    mirror.conn.execute(
        "INSERT OR REPLACE INTO _sync_meta (key, value) VALUES (?, ?)", (key, value)
    )


def test_it_backfills_first_only_the_types_no_backfill_completed(
    daemon: Daemon, mirror: Mirror
) -> None:
    assert daemon._never_completed(mirror) == ["deals", "stores"]  # never filled: no feed cursor
    mirror.conn.execute(
        "INSERT INTO _sync_cursors (type, scope, cursor) VALUES ('deletions', '', '5')"
    )
    assert daemon._never_completed(mirror) is None  # filled, nothing left unfinished
    _meta(mirror, "backfill_started_at", "2026-01-01T00:00:00.000Z")
    _meta(mirror, "backfill_completed", '{"deals": "2026-01-01T00:00:00.000Z"}')
    assert daemon._never_completed(mirror) == ["stores"]
    _meta(mirror, "backfill_completed", '{"deals": "x", "stores": "y"}')
    assert daemon._never_completed(mirror) is None  # unfinished, but each type was completed


async def test_a_step_stopped_midway_is_cancelled_and_its_errors_are_raised(daemon: Daemon) -> None:
    done: list[str] = []

    async def quick() -> None:
        done.append("quick")

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            done.append("cancelled")

    async def broken() -> None:
        raise LookupError("no such mall")

    assert await daemon._unless_stopped(quick(), "quick") is True
    with pytest.raises(LookupError, match="no such mall"):
        await daemon._unless_stopped(broken(), "broken")
    waiting = asyncio.create_task(daemon._unless_stopped(forever(), "forever"))
    await asyncio.sleep(0)
    daemon.request_stop()
    assert await waiting is False and done == ["quick", "cancelled"]


class FakeRuns:
    def wrap(
        self, name: str, fn: Callable[[], Awaitable[object]], every: float = 0.0
    ) -> Callable[[], Awaitable[object]]:
        return fn


def _bodies(seconds_at_budget: float) -> Any:
    async def job() -> None:
        return None

    cycle = {"requests": 9, "seconds_at_budget": seconds_at_budget, "staleness_bound_s": 70.0}
    return SimpleNamespace(
        poll_all=job,
        poll_deletions=job,
        proof_step=job,
        refresh_hours=job,
        prune_changes=job,
        verify_step=job,
        mirror_press=job,
        check_subscriptions=job,
        poll_cycle=lambda: cycle,
    )


async def test_the_jobs_are_scheduled_and_recorded_and_the_reconcile_retired(
    tmp_path: Path, mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    daemon = Daemon(_settings(tmp_path / "m.db", webhooks=True))
    mirror.conn.execute("INSERT INTO _sync_jobs (name, outcome) VALUES ('reconcile', 'ok')")
    running: Any = SimpleNamespace(mirror=mirror, runs=FakeRuns())
    scheduler = daemon._scheduler(_bodies(1.0), running)
    names = sorted(job.id for job in scheduler.get_jobs())
    assert names == ["changes", "deletions", "hours", "poll", "proof", "subscriptions", "verify"]
    jobs = dict(mirror.conn.execute("SELECT name, next_run_at FROM _sync_jobs"))
    assert "reconcile" not in jobs and sorted(jobs) == names
    assert all(parse_stamp(at) is not None for at in jobs.values())
    # Without webhooks, no subscription check.
    plain = Daemon(_settings(tmp_path / "m.db"))._scheduler(_bodies(1.0), running)
    assert "subscriptions" not in {job.id for job in plain.get_jobs()}


def test_a_poll_cycle_longer_than_its_interval_is_warned_with_the_fix(
    daemon: Daemon, mirror: Mirror
) -> None:
    running: Any = SimpleNamespace(mirror=mirror, runs=FakeRuns())
    interval = daemon.settings.schedule.poll_interval
    with capture_logs() as logs:
        daemon._scheduler(_bodies(interval + 1.0), running)
        daemon._scheduler(_bodies(interval), running)
    events = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("poll.cycle")]
    assert events == [("poll.cycle_overruns", "warning"), ("poll.cycle", "info")]
    assert "raise [upstream] max_requests_per_second or poll_interval" in logs[0]["hint"]


def test_a_failed_first_backfill_is_asked_again_after_a_wait_that_doubles_to_five_minutes() -> None:
    waits = [backfill_retry_delay(n) for n in range(1, 12)]
    assert waits[:5] == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert waits[-3:] == [300.0, 300.0, 300.0] and max(waits) == BACKFILL_RETRY_S[1]
    assert backfill_retry_delay(10_000) == 300.0  # no overflow after days of outage

"""Run records that tell the truth (#40): a run whose process is gone is `interrupted` as of its
last sign of life, a run stopped by a signal is `stopped` with no error, and each run's error is
its own."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from sync.core.errors import AuthError
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.daemon import running
from tests.support.processes import spawn
from tests.support.settings import daemon_settings, settings_for, upstream_keys, write_config
from tests.support.waiting import eventually


def _runs(db: Path) -> list[dict[str, object]]:
    mirror = Mirror.open(db, readonly=True)
    try:
        return mirror.runs.recent()
    finally:
        mirror.close()


def test_a_run_left_running_is_interrupted_on_the_next_open(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    mirror = Mirror.open(db)
    mirror.runs.start("backfill")
    mirror.conn.execute("UPDATE _sync_runs SET seen_at = '2026-01-01T00:00:05.000Z'")
    mirror.close()  # the lock is released with no end recorded: as after SIGKILL
    assert _runs(db)[-1]["status"] == "running"  # a reader changes nothing
    Mirror.open(db).close()
    (run,) = _runs(db)
    assert run["status"] == "interrupted" and run["error"] is None
    assert run["seen_at"] == "2026-01-01T00:00:05.000Z" and run["pid"] == os.getpid()


async def test_a_backfill_killed_with_sigkill_is_interrupted(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    emulator.faults.latency = 0.2  # a backfill long enough to be killed in
    cfg = write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(emulator, "T_PW", types=["malls", "deals"], page_size=5),
        mirror={"path": db},
    )
    proc = await spawn("backfill", "--quiet", "--config", str(cfg), env={"T_PW": emulator.password})
    try:
        await eventually(lambda: db.exists() and _has_run(db), timeout=30)
        # `ccsync status` meanwhile: no daemon, and the backfill named as the mirror's holder.
        daemon = status_data(db)["daemon"]
        assert not daemon["running"] and daemon["writer"]["pid"] == proc.pid
        assert "backfill" in daemon["writer"]["command"]
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    Mirror.open(db).close()
    run = _runs(db)[-1]
    assert run["kind"] == "backfill" and run["status"] == "interrupted"
    assert run["pid"] == proc.pid and run["seen_at"]


def _has_run(db: Path) -> bool:
    try:
        return bool(_runs(db))
    except Exception:
        return False


async def test_a_daemon_stopped_while_backfilling_records_stopped_runs_without_errors(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A failed backfill first ("login refused"), then a daemon stopped mid-backfill: its
    backfill and itself are `stopped`, and neither carries the earlier run's error."""
    db = tmp_path / "m.db"
    with pytest.raises(AuthError):
        await run_backfill(settings_for(emulator, db, password="wrong", types=["malls"]))
    emulator.faults.error_rate = 1.0  # the daemon's backfill retries until stopped
    daemon = Daemon(daemon_settings(emulator, db, webhooks=False))
    task = asyncio.create_task(daemon.run())
    await eventually(lambda: daemon.running is not None and len(_runs(db)) >= 3, timeout=30)
    daemon.request_stop()
    await asyncio.wait_for(task, timeout=15)
    failed, backfill, run = [(r["kind"], r["status"], r["error"]) for r in _runs(db)][-3:]
    assert failed[:2] == ("backfill", "failed") and "login refused" in str(failed[2])
    assert {backfill, run} == {("backfill", "stopped", None), ("daemon", "stopped", None)}


async def test_a_daemon_stopped_cleanly_is_stopped(emulator: Emulator, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with running(daemon_settings(emulator, db, webhooks=False)):
        pass
    statuses = [(r["kind"], r["status"], r["error"]) for r in _runs(db)]
    assert statuses == [("daemon", "stopped", None), ("backfill", "ok", None)]

"""`ccsync status` says who is running (#40): whether a daemon holds the mirror (pid, since,
last heartbeat); with none, its jobs are "waiting for it", not `degraded`; the page size and the
verify's position whenever known; numbers agree with their nouns."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sync.emulator import Emulator
from sync.model.notices import WebhookNotice
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from sync.store.queue import ChangeQueue
from tests.support.daemon import running
from tests.support.processes import run
from tests.support.settings import daemon_settings


async def test_status_names_the_running_daemon_then_says_it_stopped(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    async with running(daemon_settings(emulator, db, webhooks=False)) as daemon:
        daemon.running.mirror.runs.heartbeat()
        data = status_data(db)
        assert data["daemon"]["running"] and data["daemon"]["pid"] == os.getpid()
        assert data["daemon"]["since"] and data["daemon"]["last_heartbeat"]
        lines = status_lines(data)
        assert any(line.startswith(f"daemon: running, pid {os.getpid()} since ") for line in lines)
        # The verdict first, then (no problems) the per-type table (#48).
        assert lines[0] == "healthy" and data["verdict"] == "healthy"
        assert lines[1].split()[:3] == ["type", "rows", "last"]
    # Stopped; its jobs fall due while no daemon runs.
    mirror = Mirror.open(db)
    mirror.conn.execute("UPDATE _sync_jobs SET next_run_at = '2026-01-01T00:00:00.000Z'")
    ChangeQueue(mirror.conn).enqueue([WebhookNotice("update", "deals", "deals", 4)])
    mirror.close()
    code, out, err = await run("status", "--mirror", str(db))
    assert code == 0, err
    assert "degraded" not in out, out
    assert out.splitlines()[0].startswith("stopped since 20")
    (line,) = [x for x in out.splitlines() if x.startswith("daemon: ")]
    assert line.startswith("daemon: not running since 20") and "jobs waiting for it: " in line
    assert "poll" in line and "deletions" in line
    assert "queue: 1 notice waiting" in out
    code, out, err = await run("status", "--json", "--mirror", str(db))
    daemon = json.loads(out)["daemon"]
    assert daemon["running"] is False and daemon["pid"] is None and daemon["stopped_at"]
    assert "poll" in daemon["overdue"]


def test_status_shows_the_page_size_probed_and_the_verify_at_a_cycle_start(
    tmp_path: Path,
) -> None:
    """No bound learned, but the daemon's probe recorded the page size; the verify ran and
    stands at the start of a cycle (its position null)."""
    db = tmp_path / "m.db"
    mirror = Mirror.open(db)
    mirror.meta.set("upstream_profile", json.dumps({"page_size_asked": 100}))
    mirror.jobs.started("verify", "2026-01-01T00:00:00.000Z")
    mirror.close()
    data = status_data(db)
    assert data["page_size"] == {"asked": 100, "served": None}  # numbers for scripts (#48)
    lines = status_lines(data)
    assert "page size: asked 100, upstream serves what is asked (no smaller bound seen)" in lines
    assert any(x.startswith("verify: position start of a cycle;") for x in lines), lines
    assert "daemon: not running (never ran)" in lines


def test_a_heartbeat_moves_the_last_sign_of_life(tmp_path: Path) -> None:
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        run_id = mirror.runs.start("daemon")
        mirror.conn.execute("UPDATE _sync_runs SET seen_at = 'then'")
        mirror.runs.heartbeat()
        (row,) = [r for r in mirror.runs.recent() if r["id"] == run_id]
        assert row["seen_at"] != "then" and row["seen_at"].startswith("20")
    finally:
        mirror.close()

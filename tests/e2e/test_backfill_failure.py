"""A failed backfill changes nothing it did not finish (#40): one refused at login leaves the
mirror's checkpoints and completion as they were, one that fails midway keeps every type it or
an earlier backfill completed complete, and the daemon then copies no type again."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.core.errors import AuthError, UnreachableError
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import run_backfill as backfill_command
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.daemon import running
from tests.support.settings import DAEMON_TYPES, daemon_settings, settings_for

TYPES = {"types": DAEMON_TYPES, "max_backoff": 0.05, "retry_budget": 5.0}


def _bookkeeping(db: Path) -> dict[str, Any]:
    """What decides a re-copy: the checkpoints, the backfill's meta keys and the cursors."""
    conn = sqlite3.connect(db)
    try:
        return {
            "backfill": conn.execute("SELECT * FROM _sync_backfill ORDER BY 1, 2").fetchall(),
            "pages": conn.execute("SELECT count(*) FROM _sync_backfill_pages").fetchone(),
            "meta": conn.execute(
                "SELECT * FROM _sync_meta WHERE key LIKE 'backfill%' ORDER BY key"
            ).fetchall(),
            "cursors": conn.execute("SELECT type, scope, cursor FROM _sync_cursors").fetchall(),
        }
    finally:
        conn.close()


async def _daemon_copies_nothing(emu: Emulator, db: Path) -> None:
    """The daemon started on `db` backfills no type (no `daemon.backfill_first`, no
    `backfill.done`, no page listed by the backfill's walk)."""
    settings = daemon_settings(emu, db, webhooks=False)
    with capture_logs() as logs:
        async with running(settings):
            pass
    events = {e["event"] for e in logs}
    assert "daemon.backfill_first" not in events and "backfill.done" not in events, events


async def test_a_backfill_refused_at_login_changes_nothing(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    await run_backfill(settings_for(emulator, db, **TYPES))
    before = _bookkeeping(db)
    assert before["backfill"] and all(row[5] for row in before["backfill"])  # all finished
    with pytest.raises(AuthError):
        await run_backfill(settings_for(emulator, db, password="wrong", **TYPES))
    assert _bookkeeping(db) == before
    mirror = Mirror.open(db)
    try:
        (run,) = mirror.runs.recent()[-1:]
        assert run["status"] == "failed" and "login refused" in (run["error"] or "")
    finally:
        mirror.close()
    backfill = status_data(db)["backfill"]
    assert backfill["last_run"]["status"] == "failed" and not backfill["unfinished_since"]
    assert backfill["never_completed"] == []
    await _daemon_copies_nothing(emulator, db)


async def test_a_backfill_that_cannot_reach_the_upstream_changes_nothing(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    await run_backfill(settings_for(emulator, db, **TYPES))
    before = _bookkeeping(db)
    unreachable = settings_for(
        emulator, db, base_url="http://127.0.0.1:9", **{**TYPES, "retry_budget": 0.2}
    )
    with pytest.raises(UnreachableError):
        await run_backfill(unreachable)
    assert _bookkeeping(db) == before


async def test_a_first_backfill_that_never_logged_in_leaves_no_file(
    emulator: Emulator, tmp_path: Path
) -> None:
    """`ccsync backfill` refused at login or unable to reach the upstream removes the mirror
    it created (and its -wal, -shm and .lock); a mirror that existed stays, whatever it holds."""
    db = tmp_path / "new" / "m.db"
    db.parent.mkdir()
    with pytest.raises(AuthError):
        await backfill_command(settings_for(emulator, db, password="wrong", **TYPES), quiet=True)
    assert list(db.parent.iterdir()) == []
    unreachable = {**TYPES, "base_url": "http://127.0.0.1:9", "retry_budget": 0.2}
    with pytest.raises(UnreachableError):
        await backfill_command(settings_for(emulator, db, **unreachable), quiet=True)
    assert list(db.parent.iterdir()) == []
    # An existing mirror, even one without a row, is never removed.
    Mirror.open(db).close()
    with pytest.raises(AuthError):
        await backfill_command(settings_for(emulator, db, password="wrong", **TYPES), quiet=True)
    assert db.exists()


async def test_a_backfill_failing_midway_keeps_every_completed_type_complete(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A new backfill of a complete mirror fails on its articles: deals, malls and stores stay
    complete (whether this run reached them or not) and the daemon copies none of them."""
    db = tmp_path / "m.db"
    await run_backfill(settings_for(emulator, db, **TYPES))

    def wrap(client: ChannelClient) -> None:
        real = client.list_response

        async def list_response(rtype: Any, number: int, **kw: Any) -> Any:
            if rtype.rtype.name == "articles":
                raise UnreachableError("the upstream went away", url="x")
            return await real(rtype, number, **kw)

        client.list_response = list_response  # type: ignore[method-assign]

    with pytest.raises(UnreachableError):
        await run_backfill(settings_for(emulator, db, **TYPES), wrap=wrap, restart=True)
    mirror = Mirror.open(db)
    try:
        assert set(DAEMON_TYPES) <= set(mirror.backfills.completed_types())
        assert mirror.meta.get("backfill_started_at")  # the interrupted run, for `ccsync backfill`
    finally:
        mirror.close()
    lines = status_lines(status_data(db))
    assert any("every type was completed by an earlier backfill" in line for line in lines)
    await _daemon_copies_nothing(emulator, db)


async def test_the_daemon_backfills_only_the_types_never_completed(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A mirror whose backfill completed malls and deals only: the daemon copies the rest."""
    db = tmp_path / "m.db"
    await run_backfill(settings_for(emulator, db, types=["malls", "deals"]))
    mirror = Mirror.open(db)
    mirror.meta.set("backfill_started_at", "2026-01-01T00:00:00.000Z")  # left unfinished
    mirror.close()
    settings = daemon_settings(emulator, db, webhooks=False)
    with capture_logs() as logs:
        async with running(settings):
            pass
    (first,) = [e for e in logs if e["event"] == "daemon.backfill_first"]
    assert first["types"] == ["articles", "stores"]
    mirror = Mirror.open(db, readonly=True)
    try:
        assert set(DAEMON_TYPES) <= set(mirror.backfills.completed_types())
        assert mirror.table("articles").count() > 0
    finally:
        mirror.close()


async def test_a_mirror_an_older_sync_reset_is_not_copied_again(
    emulator: Emulator, tmp_path: Path
) -> None:
    """The state the bug left (#40): a complete mirror whose checkpoints a failed backfill of
    an older sync forgot. Its types' poll cursors prove them completed: no re-copy."""
    db = tmp_path / "m.db"
    await run_backfill(settings_for(emulator, db, **TYPES))
    conn = sqlite3.connect(db)
    conn.executescript(
        "DELETE FROM _sync_backfill; DELETE FROM _sync_backfill_pages;"
        "DELETE FROM _sync_meta WHERE key = 'backfill_completed';"
        "INSERT OR REPLACE INTO _sync_meta VALUES ('backfill_started_at', "
        "'2026-01-01T00:00:00.000Z');"
    )
    conn.close()
    await _daemon_copies_nothing(emulator, db)

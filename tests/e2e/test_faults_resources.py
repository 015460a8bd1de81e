"""Resource faults are named, reported and survived (#31): a full disk, a read-only mirror, a
mirror locked by another program for too long.

One-shot commands print one line `ccsync: <file>: <cause>; <fix>` and exit 4, and the next run
converges with nothing lost. The daemon keeps running: degraded in `/healthz` (503 with the
reason), `ccsync status` and `sync_degraded{reason}`, webhook deliveries answered 503 (so the
upstream retries them instead of counting them done), writing jobs paused, no traceback in any
log; once writes succeed again it is healthy by itself, subscribes again what the upstream
dropped, catches up, and the mirror converges with the emulator.

How the faults are made, without root: SQLite's `PRAGMA max_page_count` on the mirror's own
connection makes every write that needs a new page fail with SQLITE_FULL, "database or disk is
full", the path a full disk takes; `PRAGMA query_only` makes every write fail with
SQLITE_READONLY, "attempt to write a readonly database" (tests run as root, whom chmod does
not stop); a write transaction held from another connection locks it. A one-shot command gets
its fault through this module run as its entry point (`python -m tests.e2e.test_faults_resources
<command> ...` with `SYNC_TEST_FAULT` set), which applies it to the mirror's connection once
opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sync.core.config import Settings
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.daemon import running
from tests.support.mirror_rows import row
from tests.support.processes import CLI_PASSWORD_ENV, run
from tests.support.settings import SECRET, upstream_keys, write_config
from tests.support.settings import cli_config as config
from tests.support.settings import daemon_settings as settings_for
from tests.support.waiting import eventually

TYPES = ["malls", "deals", "articles"]  # what `tests.e2e.test_cli.config` mirrors
EXIT_STORAGE = 4


# -- the faults ----------------------------------------------------------------------------------


def cap_growth(conn: sqlite3.Connection, pages: int = 0) -> int:
    """Let the mirror grow by `pages` pages at most from now on (a full disk); with 0, also use
    up its free pages, so that every write needing a page fails. Returns the old limit."""
    before = int(conn.execute("PRAGMA max_page_count").fetchone()[0])
    if not pages:
        conn.execute("CREATE TABLE IF NOT EXISTS test_ballast (b BLOB)")
    size = int(conn.execute("PRAGMA page_count").fetchone()[0])
    conn.execute(f"PRAGMA max_page_count = {size + pages}")
    if not pages:
        with pytest.raises(sqlite3.OperationalError, match="full"):
            while True:  # the free pages (a write check's, a deletion's) are room too: fill them
                conn.execute("INSERT INTO test_ballast VALUES (zeroblob(1000))")
    return before


def uncap(conn: sqlite3.Connection, limit: int) -> None:
    """Space is back."""
    conn.execute(f"PRAGMA max_page_count = {limit}")
    conn.execute("DROP TABLE IF EXISTS test_ballast")


def _inject_on_open() -> None:
    """Apply `SYNC_TEST_FAULT` (`disk_full:<pages>` or `read_only`) to every mirror this
    process opens for writing, once it is open (see the module docstring)."""
    fault = os.environ.get("SYNC_TEST_FAULT", "")
    prepare = Mirror._prepare

    def faulty_prepare(self: Mirror, readonly: bool) -> None:
        prepare(self, readonly)
        if readonly:
            return
        if fault.startswith("disk_full:"):
            cap_growth(self.conn, int(fault.partition(":")[2]))
        elif fault == "read_only":
            self.conn.execute("PRAGMA query_only = 1")

    Mirror._prepare = faulty_prepare  # type: ignore[method-assign]


async def ccsync(*args: str, emu: Emulator, fault: str | None = None) -> tuple[int, str, str]:
    """Run a `ccsync` command as a process (with `fault` on its mirror): rc, stdout, stderr."""
    env = {CLI_PASSWORD_ENV: emu.password, "SYNC_TEST_FAULT": fault or ""}
    return await run(*args, env=env, module="tests.e2e.test_faults_resources" if fault else "sync")


def one_line(rc: int, err: str) -> str:
    """The whole of stderr: one `ccsync:` line, no traceback, exit code 4."""
    lines = err.strip().splitlines()
    assert rc == EXIT_STORAGE and len(lines) == 1 and lines[0].startswith("ccsync: "), (rc, err)
    return lines[0]


# -- one-shot commands ---------------------------------------------------------------------------


async def test_a_backfill_on_a_full_disk_says_one_line_and_the_next_run_converges(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = str(config(tmp_path, emulator))
    db = tmp_path / "m.db"
    rc, _, err = await ccsync(
        "backfill", "--quiet", "--config", cfg, emu=emulator, fault="disk_full:60"
    )
    line = one_line(rc, err)
    assert line.startswith(f"ccsync: {db}: database or disk is full: the file may not grow (")
    assert "free on its file system); free space there, or move [mirror] path" in line
    assert line.endswith("then run the command again (nothing committed is lost)")

    rc, out, err = await ccsync("backfill", "--quiet", "--config", cfg, emu=emulator)
    assert rc == 0 and "Traceback" not in err, err
    result = compare(db, emulator, TYPES)
    assert result.differences == 0, result.summary()


@pytest.mark.parametrize("command", [("reconcile",), ("reconcile", "--full")])
async def test_a_reconcile_on_a_read_only_mirror_says_one_line_and_the_next_run_converges(
    emulator: Emulator, tmp_path: Path, command: tuple[str, ...]
) -> None:
    cfg = str(config(tmp_path, emulator))
    db = tmp_path / "m.db"
    rc, _, err = await ccsync("backfill", "--quiet", "--config", cfg, emu=emulator)
    assert rc == 0, err
    emulator.update("deals", emulator.ids("deals")[0], {"title": "changed upstream"})
    emulator.delete("articles", emulator.ids("articles")[0])

    rc, _, err = await ccsync(*command, "--config", cfg, emu=emulator, fault="read_only")
    line = one_line(rc, err)
    assert line == (
        f"ccsync: {db}: attempt to write a readonly database: the file, its directory or its "
        "file system does not take writes; give the sync user write access to the file and its "
        "directory (or remount the file system read-write), then run the command again "
        "(nothing committed is lost)"
    )
    rc, _, err = await ccsync(*command, "--config", cfg, emu=emulator)
    assert rc == 0, err
    result = compare(db, emulator, TYPES)
    assert result.differences == 0, result.summary()


# -- the daemon ----------------------------------------------------------------------------------


def following(settings: Settings) -> contextlib.AbstractAsyncContextManager[Daemon]:
    """The daemon, backfilled and ready, probing its mirror every 0.1 s."""
    return running(settings, check_every=0.1)


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        body = await r.read()
        return r.status, orjson.loads(body) if r.content_type == "application/json" else body


async def deliver(daemon: Daemon, type_name: str, rid: str) -> tuple[int, Any]:
    """A webhook delivery of one update, as the upstream makes it."""
    body = {
        "data": [
            {"type": "updates", "attributes": {"resource_type": type_name, "resource_id": int(rid)}}
        ]
    }
    url = f"http://127.0.0.1:{daemon.bound_port}/webhooks/{SECRET}"
    async with aiohttp.ClientSession() as s, s.post(url, json=body) as r:
        return r.status, (await r.json()) if r.status != 202 else None


def topics(emu: Emulator) -> set[str]:
    return {w["attributes"]["topic"] for w in emu.webhooks()}


def tracebacks(caplog: pytest.LogCaptureFixture, events: list[dict[str, Any]]) -> list[str]:
    """Every log record or event that carries a traceback (stdlib: APScheduler, aiohttp,
    asyncio; structlog: ours)."""
    found = [r.getMessage() for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    found += [str(e) for e in events if "exc_info" in e or "exception" in e]
    return found


async def ccsync_status(tmp_path: Path, emu: Emulator, db: Path) -> str:
    cfg = write_config(
        tmp_path / "status.toml",
        upstream=upstream_keys(emu, CLI_PASSWORD_ENV),
        mirror={"path": db},
        webhooks={"enabled": False},
    )
    rc, out, err = await ccsync("status", "--config", str(cfg), emu=emu)
    assert rc == 0, err
    return out


async def test_a_daemon_whose_disk_fills_degrades_refuses_deliveries_and_recovers(
    emulator: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True, poll_interval=0.3)
    caplog.set_level(logging.WARNING)
    with capture_logs() as events:
        async with following(settings) as daemon:
            health_url = f"http://127.0.0.1:{daemon.bound_port}/healthz"
            assert (await get(health_url))[0] == 200
            deal, article = emulator.ids("deals")[0], emulator.ids("articles")[0]
            limit = cap_growth(daemon.running.mirror.conn)

            await eventually(lambda: daemon.storage.degraded)
            status, health = await get(health_url)
            assert status == 503 and health["status"] == "degraded"
            assert health["reason"] == "disk_full" and health["storage"]["file"] == str(db)
            assert health["problems"][0].startswith("storage disk_full since ")
            metrics = (await get(f"http://127.0.0.1:{daemon.bound_port}/metrics"))[1].decode()
            assert 'sync_degraded{reason="disk_full"} 1.0' in metrics
            assert 'sync_degraded{reason="read_only"} 0.0' in metrics
            out = await ccsync_status(tmp_path, emulator, db)
            assert "degraded: storage disk_full since " in out
            assert f"{db}: database or disk is full" in out

            # Deliveries are refused, not counted done: the upstream retries, then drops the
            # subscription (its 5-failure rule), which the daemon must notice on its own.
            status, answer = await deliver(daemon, "deals", deal)
            assert status == 503 and answer["reason"] == "disk_full"
            emulator.update("deals", deal, {"title": "changed while the disk was full"})
            emulator.update("articles", article, {"title": "changed while the disk was full"})
            await eventually(lambda: "deals" not in topics(emulator))
            await eventually(
                lambda: (
                    'sync_job_runs_total{job="poll",outcome="paused"}'
                    in daemon.metrics.render()[0].decode()
                )
            )

            uncap(daemon.running.mirror.conn, limit)  # space is back
            await eventually(lambda: not daemon.storage.degraded)
            await eventually(lambda: {"deals", "articles"} <= topics(emulator))  # subscribed again
            await eventually(
                lambda: (
                    (row(db, "deals", deal) or {}).get("title") == "changed while the disk was full"
                )
            )
            assert (await deliver(daemon, "deals", deal))[0] == 202
            await eventually(lambda: compare(db, emulator, TYPES).differences == 0)
            await eventually(lambda: daemon.health()["status"] == "ok")
            status, health = await get(health_url)
            assert status == 200 and health["reason"] is None and health["storage"] is None
            metrics = (await get(f"http://127.0.0.1:{daemon.bound_port}/metrics"))[1].decode()
            assert 'sync_degraded{reason="disk_full"} 0.0' in metrics
            assert "degraded:" not in await ccsync_status(tmp_path, emulator, db)
    named = [e for e in events if e["event"] == "storage.degraded"]
    assert len(named) == 1 and named[0]["reason"] == "disk_full", named
    assert [e["event"] for e in events].count("storage.recovered") == 1
    assert not tracebacks(caplog, events)
    assert not (tmp_path / "m.db.health").exists()  # removed at a clean stop


async def test_a_daemon_whose_disk_fills_during_its_first_backfill_waits_and_then_finishes(
    emulator: Emulator,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "m.db"
    limits: list[int] = []
    prepare = Mirror._prepare

    def capped(self: Mirror, readonly: bool) -> None:
        prepare(self, readonly)
        if not readonly:
            limits.append(cap_growth(self.conn, 60))  # full part of the way through

    monkeypatch.setattr(Mirror, "_prepare", capped)
    caplog.set_level(logging.WARNING)
    daemon = Daemon(settings_for(emulator, db, webhooks=True))
    daemon.storage.interval = daemon.storage.healthy_interval = 0.1
    with capture_logs() as events:
        task = asyncio.create_task(daemon.run())
        try:
            await eventually(lambda: daemon.storage.degraded or task.done())
            assert not task.done() and not daemon.is_ready  # waiting, not gone
            health = daemon.health()
            assert health["status"] == "degraded" and health["reason"] == "disk_full"
            uncap(daemon.running.mirror.conn, limits[0])
            await eventually(lambda: daemon.is_ready or task.done(), timeout=60)
            assert daemon.is_ready and daemon.health()["reason"] is None
            result = compare(db, emulator, TYPES)
            assert result.differences == 0, result.summary()
        finally:
            daemon.request_stop()
            await asyncio.wait_for(task, timeout=15)
    assert not tracebacks(caplog, events)


@pytest.mark.parametrize("fault", ["read_only", "locked"])
async def test_a_daemon_whose_mirror_takes_no_writes_degrades_and_recovers(
    emulator: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True)
    caplog.set_level(logging.WARNING)
    with capture_logs() as events:
        async with following(settings) as daemon:
            deal = emulator.ids("deals")[1]
            conn = daemon.running.mirror.conn
            other = sqlite3.connect(db, isolation_level=None)
            if fault == "read_only":
                conn.execute("PRAGMA query_only = 1")
            else:
                conn.execute("PRAGMA busy_timeout = 100")  # "too long", shortened for the test
                other.execute("BEGIN IMMEDIATE")  # another program holds the write lock
            await eventually(lambda: daemon.storage.degraded)
            health = daemon.health()
            assert health["status"] == "degraded" and health["reason"] == fault
            status, answer = await deliver(daemon, "deals", deal)
            assert status == 503 and answer["reason"] == fault
            metrics = daemon.metrics.render()[0].decode()
            assert f'sync_degraded{{reason="{fault}"}} 1.0' in metrics

            if fault == "read_only":
                conn.execute("PRAGMA query_only = 0")
            else:
                other.execute("ROLLBACK")
            other.close()
            await eventually(lambda: not daemon.storage.degraded)
            emulator.update("deals", deal, {"title": "after the fault"})
            await eventually(
                lambda: (row(db, "deals", deal) or {}).get("title") == "after the fault"
            )
            assert (await deliver(daemon, "deals", deal))[0] == 202
    named = [e for e in events if e["event"] == "storage.degraded"]
    assert len(named) == 1 and named[0]["reason"] == fault, named
    assert not tracebacks(caplog, events)


if __name__ == "__main__":  # the entry point of a one-shot command with a fault (see above)
    from sync.cli import main

    _inject_on_open()
    main(prog_name="ccsync")

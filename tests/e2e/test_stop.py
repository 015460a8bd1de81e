"""Stop means stop: SIGTERM or SIGINT in any phase (a request retried with backoff, a stalled
upstream, a reconcile) ends the process within seconds with the documented exit code (the
daemon 0, a one-shot command 143 or 130), and the mirror keeps everything it had.
The first backfill's case is in `test_daemon.py`."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from sync.emulator import Emulator
from sync.jobs.proving.reconcile import run_reconcile
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.mirror_rows import query
from tests.support.ports import free_port
from tests.support.processes import DEVNULL, spawn, stop
from tests.support.settings import DAEMON_TYPES as TYPES
from tests.support.settings import SECRET, upstream_keys, write_config
from tests.support.settings import daemon_settings as settings_for
from tests.support.waiting import eventually


def _config(
    tmp_path: Path, emu: Emulator, db: Path, *, webhooks: bool, staleness_bound: float = 3600.0
) -> Path:
    """Long waits between retries (max_backoff 20 s) and the default 300 s budget: a process
    that does not cancel its waits is still waiting when the test gives up on it."""
    return write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(emu, "T_PW", types=TYPES, max_backoff=20.0, page_size=10),
        mirror={"path": db},
        webhooks={
            "enabled": webhooks,
            "listen": f"127.0.0.1:{free_port()}",
            "secret_env": "T_SECRET",
        },
        schedule={
            "poll_interval": 3600.0,
            "deletions_interval": 3600.0,
            "staleness_bound": staleness_bound,
        },
        logging={"format": "json", "level": "warning"},
    )


async def _spawn(cfg: Path, emu: Emulator, *command: str) -> asyncio.subprocess.Process:
    env = {"T_PW": emu.password, "T_SECRET": SECRET}
    return await spawn(*command, "--config", str(cfg), env=env, stdout=DEVNULL)


async def _backfilled(emu: Emulator, db: Path) -> None:
    await run_backfill(settings_for(emu, db, webhooks=False))


def _ids(db: Path, table: str) -> set[str]:
    return {str(r[0]) for r in query(db, f"select id from [{table}]")}


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db, timeout=5)
    try:
        return str(conn.execute("pragma integrity_check").fetchone()[0])
    finally:
        conn.close()


async def test_sigterm_while_the_daemon_retries_a_failing_upstream_exits_promptly(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A backfilled mirror, webhooks on, every answer a 5xx: the daemon's first subscribe and
    its catch-up poll retry with long backoffs. Before the fix the subscribe was awaited
    outside the stop signal: SIGTERM waited for the whole retry budget."""
    db = tmp_path / "m.db"
    await _backfilled(emulator, db)
    emulator.faults.error_rate = 1.0
    proc = await _spawn(_config(tmp_path, emulator, db, webhooks=True), emulator, "run")
    try:
        await eventually(lambda: emulator.faults.injected.get("http_5xx", 0) >= 3, timeout=30)
        assert proc.returncode is None
    finally:
        code, err = await stop(proc)
    assert code == 0, err[-2000:]
    emulator.faults.off()
    assert compare(db, emulator, TYPES).differences == 0


async def test_sigterm_while_a_one_shot_backfill_retries_exits_143_and_resumes(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    emulator.faults.error_rate = 0.6  # some pages land, the others retry with long waits
    proc = await _spawn(_config(tmp_path, emulator, db, webhooks=False), emulator, "backfill")
    try:
        await eventually(lambda: emulator.faults.injected.get("http_5xx", 0) >= 5, timeout=30)
    finally:
        # Before the fix SIGTERM killed the process where it stood (no exit code, no cleanup).
        code, err = await stop(proc)
    assert code == 143 and "interrupted by SIGTERM" in err, err[-2000:]
    assert "Traceback" not in err
    assert _integrity(db) == "ok"
    emulator.faults.off()
    await _backfilled(emulator, db)  # resumes from its checkpoints
    assert compare(db, emulator, TYPES).differences == 0


@pytest.mark.parametrize(("sig", "expected"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
async def test_a_signal_during_sync_reconcile_exits_promptly_and_the_mirror_is_intact(
    emulator: Emulator, tmp_path: Path, sig: int, expected: int
) -> None:
    db = tmp_path / "m.db"
    await _backfilled(emulator, db)
    before = {t: _ids(db, t) for t in TYPES}
    # Work for the reconcile: rows changed and deleted upstream without notices.
    for deal in emulator.ids("deals")[:10]:
        emulator.update("deals", deal, {"title": "changed behind the mirror's back"})
    gone = emulator.ids("articles")[:3]
    for article in gone:
        emulator.delete("articles", article)
    emulator.faults.latency = 0.5  # a reconcile far longer than the test waits
    served = emulator.app.requests
    proc = await _spawn(_config(tmp_path, emulator, db, webhooks=False), emulator, "reconcile")
    try:
        await eventually(lambda: emulator.app.requests >= served + 4, timeout=30)
        await asyncio.sleep(0.5)
        assert proc.returncode is None
    finally:
        code, err = await stop(proc, sig)
    assert code == expected, err[-2000:]
    assert "Traceback" not in err
    # Intact: nothing torn, and no row the upstream still has went missing.
    assert _integrity(db) == "ok"
    for t in TYPES:
        still_upstream = {str(i) for i in emulator.ids(t)}
        assert before[t] & still_upstream <= _ids(db, t), t
    emulator.faults.off()
    await run_reconcile(settings_for(emulator, db, webhooks=False))
    assert compare(db, emulator, TYPES).differences == 0


def _job(db: Path, name: str) -> dict[str, object]:
    try:
        rows = query(db, "select * from _sync_jobs where name = ?", name)
    except sqlite3.Error:
        return {}
    return dict(rows[0]) if rows else {}


async def test_sigterm_during_the_daemons_proof_exits_promptly_and_loses_nothing(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    await _backfilled(emulator, db)
    before = {t: _ids(db, t) for t in TYPES}
    for deal in emulator.ids("deals")[:10]:
        emulator.update("deals", deal, {"title": "changed behind the mirror's back"})
    emulator.delete("articles", emulator.ids("articles")[0])
    emulator.faults.latency = 0.5
    # The rolling proof (the daily reconcile's successor, #39): a cycle every 2 s, so each
    # tick lists several pages at 0.5 s a request.
    cfg = _config(tmp_path, emulator, db, webhooks=False, staleness_bound=2.0)
    proc = await _spawn(cfg, emulator, "run")
    try:
        await eventually(lambda: bool(_job(db, "proof").get("started_at")), timeout=30)
        await asyncio.sleep(1.0)  # inside the proof, listing pages
        assert proc.returncode is None
    finally:
        code, err = await stop(proc)
    assert code == 0, err[-2000:]
    assert _job(db, "proof")["outcome"] == "interrupted"  # stopped mid-run
    assert _integrity(db) == "ok"
    for t in TYPES:
        assert before[t] & {str(i) for i in emulator.ids(t)} <= _ids(db, t), t

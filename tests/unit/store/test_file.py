"""`sync.store.file`: opening checks before it writes, a writer's pragmas, and refusals that name the fix."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sync.core.errors import MirrorError, StorageFault
from sync.store import file


def _newer(p: Path, *, wal: bool) -> None:
    conn = sqlite3.connect(p)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE _sync_meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO _sync_meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()


def _open(p: Path, *, readonly: bool = False) -> bool:
    conn, lock = file.connect(p, readonly=readonly)
    try:
        return file.prepare(conn, p, readonly=readonly, autocheckpoint=1000)
    finally:
        file.close(conn, lock)


def test_a_file_of_a_newer_sync_is_refused_with_the_fix(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    _newer(p, wal=True)
    with pytest.raises(MirrorError) as caught:
        _open(p)
    assert (
        caught.value.message
        == f"mirror {p} was written by a newer sync (schema 99); nothing was changed"
    )
    assert caught.value.hint == "upgrade sync, or point [mirror] path at another file"


@pytest.mark.parametrize(
    ("wal", "readonly"), [(False, False), (True, True)], ids=["writer-journal", "reader-wal"]
)
def test_a_newer_file_is_refused_and_left_byte_for_byte(
    tmp_path: Path, wal: bool, readonly: bool
) -> None:
    p = tmp_path / "m.db"
    _newer(p, wal=wal)
    before = p.read_bytes()
    with pytest.raises(MirrorError, match="newer sync"):
        _open(p, readonly=readonly)
    assert p.read_bytes() == before


def test_a_writer_gets_the_pragmas_of_short_wal_transactions(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    conn, lock = file.connect(p, readonly=False)
    try:
        assert file.prepare(conn, p, readonly=False, autocheckpoint=0) is True
        got = [
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in (
                "journal_mode",
                "synchronous",
                "busy_timeout",
                "wal_autocheckpoint",
                "cache_size",
            )
        ]
        assert got == ["wal", 1, 10000, 0, -file.CACHE_KIB]
        conn.execute("CREATE TABLE t (x)")
    finally:
        file.close(conn, lock)
    assert _open(p) is False  # no longer empty: checked, not fresh


def test_an_open_that_fails_is_named_a_storage_fault_or_damage(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    locked = file.refusal(sqlite3.OperationalError("database is locked"), p)
    assert isinstance(locked, StorageFault) and locked.reason == "locked"
    assert locked.fix.endswith("then retry; nothing was changed")
    damaged = file.refusal(sqlite3.DatabaseError("file is not a database"), p)
    assert not isinstance(damaged, StorageFault)
    assert damaged.message == f"mirror {p} is damaged (file is not a database); nothing was changed"


def test_a_missing_directory_is_made_but_a_missing_file_is_not_read(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "m.db"
    with pytest.raises(MirrorError, match="does not exist yet"):
        file.connect(p, readonly=True)
    assert not (tmp_path / "a").exists()
    assert _open(p) is True
    assert p.is_file()


def test_discard_removes_only_the_file_it_was_given_and_never_a_held_one(tmp_path: Path) -> None:
    """`discard` takes the (device, inode) of the file this process created: another file at
    the path, or one another writer holds, is left as it is."""
    p = tmp_path / "m.db"
    assert file.identity(p) is None
    _open(p)
    made = file.identity(p)
    assert made is not None and (tmp_path / "m.db.lock").exists()
    conn, lock = file.connect(p, readonly=False)  # another writer holds it
    try:
        assert not file.discard(p, made) and p.exists()
    finally:
        file.close(conn, lock)
    assert not file.discard(p, (made[0], made[1] + 1)) and p.exists()
    assert file.discard(p, made)
    assert list(tmp_path.iterdir()) == []
    assert not file.discard(p, made)

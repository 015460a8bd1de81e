"""`sync.store.faults`: storage faults told apart from bugs, named with cause and fix; the write check."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from sync.core.errors import StorageFault
from sync.store import Mirror, faults


class Coded(sqlite3.OperationalError):
    def __init__(self, text: str, code: int) -> None:
        super().__init__(text)
        self.sqlite_errorcode = code


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (Coded("whatever", 13), "disk_full"),
        (Coded("x", 8 | (2 << 8)), "read_only"),  # an extended code: its low byte counts
        (Coded("x", 6), "locked"),
        (sqlite3.OperationalError("database or disk is full"), "disk_full"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "read_only"),
        (sqlite3.OperationalError("database table is locked"), "locked"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "disk_full"),
        (OSError(errno.EROFS, "Read-only file system"), "read_only"),
        (OSError(errno.EACCES, "Permission denied"), None),
        (sqlite3.DatabaseError("database disk image is malformed"), None),
        (ValueError("database is locked"), None),  # not SQLite's: a bug, seen as one
    ],
)
def test_what_is_a_storage_fault(exc: BaseException, reason: str | None) -> None:
    assert faults.classify(exc) == reason


def test_a_fault_names_the_file_the_cause_and_the_fix(tmp_path: Path) -> None:
    mirror = tmp_path / "m.db"
    beside = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "m.db.lock"))
    fault = faults.storage_fault(beside, mirror, then="then run it again")
    assert fault is not None and fault.reason == "disk_full"
    assert fault.path == str(tmp_path / "m.db.lock")  # the file that failed, not the mirror
    assert fault.cause.startswith("No space left on device: the file may not grow (")
    assert fault.cause.endswith(" free on its file system)")
    assert (
        fault.fix
        == "free space there, or move [mirror] path to a larger file system, then run it again"
    )
    assert faults.storage_fault(fault, mirror, then="x") is fault
    assert faults.storage_fault(RuntimeError("boom"), mirror, then="x") is None


def test_the_write_check_commits_nothing_and_fails_as_a_write_would(
    mirror: Mirror, tmp_path: Path
) -> None:
    conn, path = mirror.conn, tmp_path / "m.db"
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages + 10}")  # a file that may not grow 1 MiB
    with pytest.raises(sqlite3.Error) as full:
        faults.write_check(conn, path)
    assert faults.classify(full.value) == "disk_full"
    assert not conn.in_transaction
    conn.execute("PRAGMA max_page_count=1073741823")
    faults.write_check(conn, path, busy_ms=50)
    assert conn.execute("SELECT count(*) FROM _sync_meta WHERE key = 'write_check'").fetchone() == (
        0,
    )
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (10000,)  # given back
    conn.execute("PRAGMA query_only=1")
    with pytest.raises(sqlite3.Error) as readonly:
        faults.write_check(conn, path)
    assert faults.classify(readonly.value) == "read_only"


def test_a_full_disk_is_over_only_with_room_to_spare(
    mirror: Mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "free_bytes", lambda path: faults.MIN_FREE - 1)
    faults.write_check(mirror.conn, tmp_path / "m.db")  # without `room`: the write is enough
    with pytest.raises(StorageFault) as caught:
        faults.write_check(mirror.conn, tmp_path / "m.db", room=True)
    assert caught.value.reason == "disk_full"
    assert caught.value.cause.startswith("under 4.2 MB free: the file may not grow (4.2 MB free")
    assert caught.value.fix.endswith(", retrying")

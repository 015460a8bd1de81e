"""Storage faults named: what SQLite, PostgreSQL (or the OS) say when the mirror cannot take writes.

These failures are nobody's bug and pass once someone acts (or the server is back), so they are
named rather than shown as a traceback:

- `disk_full`: SQLITE_FULL, "database or disk is full" (also what `PRAGMA max_page_count` makes
  SQLite say when the file may not grow), or ENOSPC/EDQUOT from a file beside the mirror;
- `read_only`: SQLITE_READONLY, "attempt to write a readonly database" (the file, its directory
  or its file system does not take writes; also `PRAGMA query_only`), or EROFS;
- `locked`: SQLITE_BUSY/SQLITE_LOCKED, "database is locked": another program held the write lock
  past the connection's `busy_timeout` (10 s);
- `unreachable` (PostgreSQL only): the server is gone or refuses connections now (a connection
  exception, SQLSTATE class 08; an administrator's or a crash's shutdown, 57P01-57P03; too many
  connections, 53300; or a connection lost with no SQLSTATE at all).

A PostgreSQL mirror's faults are decided here too, by SQLSTATE (`PG_STATES`): 53100 (disk full)
is `disk_full`, 25006 (a read-only transaction: a replica, `default_transaction_read_only`) is
`read_only`, 55P03 (lock not available) is `locked`. This module never imports psycopg (an SQLite
user has none): `storage_errors` and `classify` look for it in `sys.modules`, where it is once
the PostgreSQL store is loaded, and nothing can raise its errors before that.

`storage_fault` turns such an exception into a `StorageFault` naming the file, the cause and the
fix; any other exception is left alone (a damaged file or a bug must still be seen as one).
`write_check` is the daemon's cheap write check (`sync.store.watch`).
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import sys
from pathlib import Path

from sync.core.errors import StorageFault
from sync.store.transaction import write_transaction

DISK_FULL, READ_ONLY, LOCKED = "disk_full", "read_only", "locked"
UNREACHABLE = "unreachable"
#: Every reason, in the order `sync_degraded{reason}` lists them.
REASONS = (DISK_FULL, READ_ONLY, LOCKED, UNREACHABLE)

#: PostgreSQL's SQLSTATEs that are storage faults (exact codes; then whole classes below).
PG_STATES = {
    "53100": DISK_FULL,
    "25006": READ_ONLY,
    "55P03": LOCKED,
    "53300": UNREACHABLE,
    "57P01": UNREACHABLE,
    "57P02": UNREACHABLE,
    "57P03": UNREACHABLE,
}
#: SQLSTATE classes (the first two characters) that are faults whatever the code: 08, a
#: connection exception.
PG_CLASSES = {"08": UNREACHABLE}

#: SQLite's primary result codes (the low byte of an extended code).
_CODES = {13: DISK_FULL, 8: READ_ONLY, 5: LOCKED, 6: LOCKED}
#: The same, by message, for an error raised without a code.
_TEXTS = (
    ("database or disk is full", DISK_FULL),
    ("readonly database", READ_ONLY),
    ("database is locked", LOCKED),
    ("database table is locked", LOCKED),
)
_ERRNOS = {errno.ENOSPC: DISK_FULL, errno.EDQUOT: DISK_FULL, errno.EROFS: READ_ONLY}

_CAUSES = {
    DISK_FULL: "the file may not grow ({free} free on its file system)",
    READ_ONLY: "the file, its directory or its file system does not take writes",
    LOCKED: "another program held its write lock past the 10 s wait",
}
#: A PostgreSQL mirror's: the server's, not a file's.
_PG_CAUSES = {
    DISK_FULL: "the server's file system is full",
    READ_ONLY: "the server takes no writes (a replica, or default_transaction_read_only)",
    LOCKED: "another session held a lock the write needs",
    UNREACHABLE: "the server is gone or refuses connections",
}
_PG_FIXES = {
    DISK_FULL: "free space on the database server",
    READ_ONLY: "point [mirror] url at the primary server",
    LOCKED: "end the session holding the lock (pg_stat_activity names it)",
    UNREACHABLE: "start the server, or fix the host and port in [mirror] url",
}
_FIXES = {
    DISK_FULL: "free space there, or move [mirror] path to a larger file system",
    READ_ONLY: "give the sync user write access to the file and its directory (or remount the "
    "file system read-write)",
    LOCKED: "close whatever holds it open for writing (a sqlite3 shell, a backup tool)",
}

#: Bytes the write check allocates and frees again in the same transaction: the pages of a
#: file that cannot grow by that much (a few pages' writes, not a page of listings) fail it.
#: Cheap: SQLite writes no page freed in the transaction that allocated it, and the file keeps
#: them as free pages, which the next writes reuse.
CHECK_BYTES = 1024 * 1024
#: A full disk is over only when at least this much is free again: the check's pages fit in
#: a file system that the next page write would fill at once.
MIN_FREE = 4 * 1024 * 1024


def database_errors() -> tuple[type[Exception], ...]:
    """The exception classes the stores' databases raise: `sqlite3.Error`, and `psycopg.Error`
    once psycopg is loaded (by the PostgreSQL store: nothing raises it before). Never imports
    psycopg itself, so the core can catch either store's errors without depending on it."""
    psycopg = sys.modules.get("psycopg")
    pg: tuple[type[Exception], ...] = (psycopg.Error,) if psycopg is not None else ()
    return (sqlite3.Error, *pg)


def storage_errors() -> tuple[type[Exception], ...]:
    """`database_errors` and `OSError` (a file beside an SQLite mirror): what a caller catches
    to ask `storage_fault` whether it is a storage fault."""
    return (*database_errors(), OSError)


def is_postgres_error(exc: BaseException) -> bool:
    """Whether `exc` is a psycopg error (False while psycopg is not loaded)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


def classify_postgres(exc: BaseException) -> str | None:
    """The storage fault a psycopg error is: by its SQLSTATE (`PG_STATES`, `PG_CLASSES`), or
    `unreachable` for an `OperationalError` without one (the connection was lost: libpq's own
    errors carry no SQLSTATE); None for anything else (a bug, a constraint: seen as such)."""
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str) and state:
        return PG_STATES.get(state) or PG_CLASSES.get(state[:2])
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        return UNREACHABLE
    return None


def classify(exc: BaseException) -> str | None:
    """The storage fault `exc` is (`disk_full`, `read_only`, `locked`, `unreachable`), or None."""
    if isinstance(exc, StorageFault):
        return exc.reason
    if is_postgres_error(exc):
        return classify_postgres(exc)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int) and (code & 0xFF) in _CODES:
            return _CODES[code & 0xFF]
        text = str(exc).lower()
        return next((reason for needle, reason in _TEXTS if needle in text), None)
    if isinstance(exc, OSError) and exc.errno is not None:
        return _ERRNOS.get(exc.errno)
    return None


def storage_fault(exc: BaseException, path: Path | str, *, then: str) -> StorageFault | None:
    """`exc` as a `StorageFault` on `path` whose fix ends with `then` ("then run the command
    again"); None when `exc` is no storage fault."""
    if isinstance(exc, StorageFault):
        return exc
    reason = classify(exc)
    if reason is None:
        return None
    if is_postgres_error(exc):
        return server_fault(reason, str(path), str(exc), then=then)
    if isinstance(exc, OSError):
        detail = exc.strerror or str(exc)
        path = exc.filename or path  # a file beside the mirror (the lock, the FTS scratch)
    else:
        detail = str(exc)
    return fault(reason, Path(path), detail, then=then)


def server_fault(reason: str, where: str, detail: str, *, then: str) -> StorageFault:
    """A `StorageFault` of `reason` on the PostgreSQL mirror `where` (its description, with no
    password: `MirrorTarget.describe`): what the server or libpq said, on one line, and the
    fix. `SyncError` redacts the text again."""
    said = " ".join(detail.split()) or "(no message)"
    return StorageFault(
        reason, where, f"{said}: {_PG_CAUSES[reason]}", f"{_PG_FIXES[reason]}, {then}"
    )


def fault(reason: str, path: Path, detail: str, *, then: str) -> StorageFault:
    """A `StorageFault` of `reason` on `path`: `detail` (what SQLite said) and why, and the fix."""
    why = _CAUSES[reason].format(free=_size(free_bytes(path)))
    return StorageFault(reason, str(path), f"{detail}: {why}", f"{_FIXES[reason]}, {then}")


def free_bytes(path: Path) -> int | None:
    """Bytes free (for this user) on the file system holding `path`; None when unknown."""
    try:
        return shutil.disk_usage(path.parent if not path.is_dir() else path).free
    except OSError:
        return None


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def write_check(
    conn: sqlite3.Connection, path: Path, *, busy_ms: int | None = None, room: bool = False
) -> None:
    """Commit a write that needs new pages (`CHECK_BYTES` in `_sync_meta`, removed again in
    the same transaction), or raise what the mirror raises. With `room` (a full disk is to be
    over), also a `disk_full` fault while under `MIN_FREE` is free. `busy_ms` waits that long
    for another writer's lock instead of the connection's `busy_timeout` (a degraded daemon
    checks often, on its event loop: it must not stall)."""
    free = free_bytes(path) if room else None
    if free is not None and free < MIN_FREE:
        raise fault(DISK_FULL, path, f"under {_size(MIN_FREE)} free", then="retrying")
    before = None
    if busy_ms is not None:
        before = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    try:
        with write_transaction(conn):
            conn.execute(
                "INSERT OR REPLACE INTO _sync_meta (key, value) VALUES ('write_check', zeroblob(?))",
                (CHECK_BYTES,),
            )
            conn.execute("DELETE FROM _sync_meta WHERE key = 'write_check'")
    finally:
        if before is not None:
            conn.execute(f"PRAGMA busy_timeout={before}")


class StorageCheck:
    """The storage watch's write check on one mirror file (`Mirror.storage`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    def lost(self) -> bool:
        """Never: an SQLite file has no connection a server can end."""
        return False

    def check_writes(self, *, busy_ms: int | None = None, room: bool = False) -> None:
        """`write_check` on this mirror's connection and file."""
        write_check(self._conn, self._path, busy_ms=busy_ms, room=room)

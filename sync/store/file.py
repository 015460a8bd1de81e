"""The mirror's file: opening it (checks, writer lock, connection), its pragmas, closing it.

Opening refuses, with the problem and its fix (`MirrorError`), a directory, a file that is not
SQLite, a missing file opened read-only, a file that fails its integrity check and one written
by a newer sync; it never changes such a file. A reader opens a mirror where it may not write
(a read-only mount, the daemon's directory as a group reader) read-only (`_open_readonly`). A writer takes the file's lock first
(`sync.store.lock`), so two writers by any name cannot interleave, and sets the pragmas of a
WAL database written in short transactions. The schema steps that follow (bookkeeping tables,
migrations) are `Mirror.open`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from pathlib import Path

from sync.core.errors import MirrorError
from sync.core.logs import get_logger
from sync.store.faults import storage_fault
from sync.store.lock import WriterLock, holder_file, open_database, take
from sync.store.schema import SCHEMA_VERSION

_SQLITE_HEADER = b"SQLite format 3\x00"
_log = get_logger("sync.store")

#: The writer's page cache in KiB: 8 MiB, and 16 MiB during a bulk load (group commit).
CACHE_KIB = 8192
BULK_CACHE_KIB = 16384

#: `PRAGMA wal_autocheckpoint` (WAL frames after which a commit runs a PASSIVE checkpoint) per
#: `[mirror] checkpoints` mode: (normally, during a bulk load). SQLite's default, and ~64 MiB
#: during a bulk load, which rewrites the same B-tree pages over and over (each checkpoint
#: copies and syncs them). With Litestream replicating the file, 0: sync never checkpoints, so
#: no checkpoint of ours races Litestream's copy of the WAL (litestream.io/tips, "Disable
#: autocheckpoints"); Litestream checkpoints once it has copied the frames. No mode ever runs
#: a RESTART or TRUNCATE checkpoint.
AUTOCHECKPOINT: dict[str, tuple[int, int]] = {"sqlite": (1000, 16384), "litestream": (0, 0)}

#: SQLite's primary result codes a reader meets where it cannot create the file's `-shm`.
_CANTOPEN, _READONLY = 14, 8

_DAMAGED_HINT = "restore it from a backup, or move it away and run `ccsync backfill`"


def connect(p: Path, *, readonly: bool) -> tuple[sqlite3.Connection, WriterLock | None]:
    """The connection to the mirror at `p` (created, with its directory, unless `readonly`),
    and the writer lock a writer holds."""
    if p.is_dir():
        raise MirrorError(
            f"mirror {p} is a directory",
            hint=f"[mirror] path names the database file, e.g. {p / 'mirror.db'}",
        )
    if readonly and p.exists():
        _check_header(p)
    elif readonly:
        raise MirrorError(
            f"mirror {p} does not exist yet",
            hint="run `ccsync backfill` first, or check [mirror] path",
        )
    else:
        parent = p.parent if str(p.parent) else Path(".")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MirrorError(
                f"cannot create the directory of mirror {p}: {exc.strerror}",
                hint="create it, or point [mirror] path somewhere writable",
            ) from None
    lock = None if readonly else _take_lock(p)
    try:
        conn = _open_readonly(p) if readonly else _sqlite(p, "mode=rwc")
    except sqlite3.Error as exc:
        release(lock)
        raise MirrorError(
            f"cannot open mirror {p}: {exc}", hint="check the path and its permissions"
        ) from None
    return conn, lock


def _sqlite(p: Path, query: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{p}?{query}", uri=True, isolation_level=None, timeout=10.0)


def _open_readonly(p: Path) -> sqlite3.Connection:
    """A reader's connection, also where it may not write beside the file.

    A WAL file is read through its `-shm` index, which SQLite creates beside the file when no
    writer has it open; in a directory this reader cannot write (a read-only mount, a snapshot,
    a group reader of the daemon's directory) it cannot, and `mode=ro` fails ("unable to open
    database file"). No `-shm` and no `-wal` with frames means no writer holds the file and
    every commit is in the file itself: it is then opened `immutable=1`, which needs neither.
    A `-wal` with frames but no `-shm` (a writer killed, then its index removed) holds commits
    only a writer can apply: refused, with that fix, never called damaged."""
    conn = _sqlite(p, "mode=ro")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        shm, wal = (p.with_name(p.name + end) for end in ("-shm", "-wal"))
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in (_CANTOPEN, _READONLY) or shm.exists():
            raise refusal(exc, p) from None
        if wal.exists() and wal.stat().st_size > 0:
            raise MirrorError(
                f"mirror {p} has commits in {wal.name} that only a writer can apply (its "
                f"{shm.name} is missing and {p.parent} takes no writes from this user)",
                hint="start the daemon (or run `ccsync status` once as the mirror's owner), "
                "then read it again",
            ) from None
    return _sqlite(p, "mode=ro&immutable=1")


def refusal(exc: sqlite3.DatabaseError, p: Path) -> MirrorError:
    """The error an open that failed on `exc` raises: locked past the wait, read-only or full
    are named with their fix (exit 4, `sync.store.faults`); anything else is damage."""
    fault = storage_fault(exc, p, then="then retry; nothing was changed")
    if fault is not None:
        return fault
    return MirrorError(f"mirror {p} is damaged ({exc}); nothing was changed", hint=_DAMAGED_HINT)


def prepare(conn: sqlite3.Connection, p: Path, *, readonly: bool, autocheckpoint: int) -> bool:
    """Check an existing file (integrity, schema version) and set a writer's pragmas; returns
    whether the file was empty (a new mirror, nothing to check or migrate)."""
    fresh: bool = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    if not fresh:
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            check = " ".join(str(check).split())[:200]  # one line, however long the report
            raise MirrorError(
                f"mirror {p} failed its integrity check ({check}); nothing was changed",
                hint=_DAMAGED_HINT,
            )
    # Before any pragma: a newer sync's file is refused unchanged (a writer's WAL switch would
    # already rewrite its header), and by a reader too (its tables may mean something else).
    newer = None if fresh else _written_by_newer(conn)
    if newer is not None:
        raise MirrorError(
            f"mirror {p} was written by a newer sync (schema {newer}); nothing was changed",
            hint="upgrade sync, or point [mirror] path at another file",
        )
    if readonly:
        return fresh
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    return fresh


def _written_by_newer(conn: sqlite3.Connection) -> str | None:
    """The schema version of a file a newer sync wrote (None: ours or older)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_sync_meta'").fetchone():
        return None
    row = conn.execute("SELECT value FROM _sync_meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        return str(row[0])
    return None


def close(conn: sqlite3.Connection, lock: WriterLock | None) -> None:
    """Close the connection (whatever state it is in) and release the writer lock."""
    with contextlib.suppress(sqlite3.Error):
        conn.close()
    release(lock)


def release(lock: WriterLock | None) -> None:
    if lock is not None:
        lock.release()


def identity(p: Path) -> tuple[int, int] | None:
    """The file's (device, inode), or None when there is no file at `p` (nor can be: a parent
    that is a file, a directory it may not search; opening it names that problem)."""
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    return st.st_dev, st.st_ino


def discard(p: Path, created: tuple[int, int]) -> bool:
    """Remove the mirror file `created` (its `identity` when this process made it) with its
    `-wal`, `-shm` and `.lock`, once closed: a one-shot command that never got past the
    upstream's login leaves nothing behind. Only that very file (same inode), and only while
    no other process holds its writer lock; a mirror that existed before is never passed here.
    Whether it was removed."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return False
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != created:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # another writer opened it meanwhile: it is theirs now
        for path in (Path(f"{p}-wal"), Path(f"{p}-shm"), holder_file(p), p):
            path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _check_header(p: Path) -> None:
    try:
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise MirrorError(
            f"mirror {p} cannot be read: {exc.strerror}", hint="check its owner and permissions"
        ) from None
    _refuse_other(p, head)


def _refuse_other(p: Path, head: bytes) -> None:
    """A file that is not SQLite is never opened, let alone written."""
    if head and head != _SQLITE_HEADER:
        raise MirrorError(
            f"{p} is not a SQLite database; nothing was changed",
            hint="point [mirror] path at another file, or move this one away",
        )


def _take_lock(p: Path) -> WriterLock:
    """One writer per mirror file, whatever path names it (`sync.store.lock`): the header is
    checked through the locked descriptor, so the file is opened once."""
    fd = open_database(p)
    try:
        _refuse_other(p, os.pread(fd, 16, 0))
        lock = take(p, fd)
    except BaseException:
        os.close(fd)
        raise
    links = os.fstat(fd).st_nlink
    if links > 1:
        # The lock keeps out a second writer by any name, but SQLite names the WAL after the
        # path: a reader through another name would not see this writer's pages.
        _log.warning(
            "mirror.hard_links",
            path=str(p),
            links=links,
            hint="open the mirror by one name only (SQLite keys its WAL on the path)",
        )
    return lock

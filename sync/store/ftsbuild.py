"""Full-text indexes of a bulk load, built beside the mirror on the second core, then copied in.

A backfill into empty tables defers every secondary index to its end (`Mirror.indexes.defer`).
That end phase is serial: SQLite lets one connection write a database at a time, so the B-tree
indexes (mall_id, updated_at, seo_slug, the link tables' reverse indexes) and then the FTS5
indexes were built one after the other on one core while the other idled; at 1,000,000
resources, 2.0 s and then 2.4 s, about a tenth of the whole run.

`SideBuild` takes the FTS5 half off that path. A thread of its own opens the mirror read-only,
attaches a scratch database file beside it (`<mirror>-fts-build`) and builds each FTS5 table
there, largest first, while the mirror's connection builds the B-tree indexes (SQLite releases
the GIL while a statement runs, so the two really run at once); the mirror's connection then
builds whatever tables the thread has not started (`steal`), in place. Then one transaction on a connection of its own
creates each FTS5 table in the mirror with sqlite-utils' `enable_fts` SQL (the same text, so
sqlite-utils and Datasette see the table they would have made) and fills its shadow tables from
the copy: `_data`, `_idx`, `_docsize` and `_config` are all the state an FTS5 table keeps (the
text itself stays in the content table), so copied whole they make the same index, as restoring
a `sqlite3 .dump` does. Copying costs about a fifth of building (0.5 s at 1M).

Anything that goes wrong on the side (no room for the scratch file, a read error) is logged and
the caller builds those indexes the usual way; the mirror's rows are never touched by it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

import sqlite_utils

from sync.core.logs import get_logger

_log = get_logger("sync.store")

#: The shadow tables of an FTS5 table with external content (`content=<table>`).
SHADOWS = ("data", "idx", "docsize", "config")

#: Page cache of the side build's scratch database (KiB): room for FTS5's segment merges.
SIDE_CACHE_KIB = 16384


def fts_sql(table: str, columns: list[str]) -> list[str]:
    """sqlite-utils' SQL for an FTS5 index over `columns` of `table` kept in step by triggers:
    the CREATE VIRTUAL TABLE first, then its triggers (taken from an in-memory database, so the
    text is exactly what `Table.enable_fts` writes and later compares)."""
    db = sqlite_utils.Database(memory=True)
    db.table(table).create({c: str for c in columns})
    db.table(table).enable_fts(columns, fts_version="FTS5", create_triggers=True)
    fts = f"{table}_fts"
    create = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (fts,)).fetchone()[0]
    triggers = [
        r[0]
        for r in db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? ORDER BY name",
            (table,),
        )
    ]
    db.close()
    return [create, *triggers]


class SideBuild:
    """FTS5 indexes of `plan` (table -> columns) built in a thread into a scratch file beside
    the mirror at `path`; `finish()` waits for it and copies them in. See the module docstring."""

    def __init__(
        self, path: Path, plan: dict[str, list[str]], *, autocheckpoint: int = 1000
    ) -> None:
        self.path = path
        self.plan = plan
        #: The mirror's `wal_autocheckpoint`, kept by the copying connection (0 with
        #: `checkpoints = "litestream"`: sync runs no checkpoint of its own).
        self.autocheckpoint = autocheckpoint
        self.side = path.with_name(path.name + "-fts-build")
        self.error: BaseException | None = None
        self.seconds = 0.0
        #: Tables not started yet, in the order given (largest first is best: the mirror's
        #: connection takes what is left from the end once its own work is done, `steal`).
        self._todo = list(plan)
        self._lock = threading.Lock()
        #: Tables built in the scratch file, to copy in, with their `fts_sql`.
        self.built: list[str] = []
        self._sql: dict[str, list[str]] = {}
        self._thread = threading.Thread(target=self._build, name="sync-fts-build", daemon=True)

    def start(self) -> SideBuild:
        self._remove()  # a leftover of a run killed mid-build
        self._thread.start()
        return self

    def _build(self) -> None:
        t0 = time.monotonic()
        try:
            uri = f"file:{urllib.request.pathname2url(str(self.path.resolve()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("ATTACH DATABASE ? AS side", (str(self.side),))
                conn.execute("PRAGMA side.journal_mode=OFF")  # scratch: removed after use
                conn.execute("PRAGMA side.synchronous=OFF")
                conn.execute(f"PRAGMA side.cache_size=-{SIDE_CACHE_KIB}")
                conn.execute("BEGIN")  # one snapshot of the mirror for every table
                while table := self._next():
                    columns = self.plan[table]
                    self._sql[table] = fts_sql(table, columns)
                    create = self._sql[table][0]
                    conn.execute(
                        create.replace("CREATE VIRTUAL TABLE ", "CREATE VIRTUAL TABLE side.", 1)
                    )
                    cols = ", ".join(f"[{c}]" for c in columns)
                    conn.execute(
                        f"INSERT INTO side.[{table}_fts] (rowid, {cols}) "
                        f"SELECT rowid, {cols} FROM main.[{table}]"
                    )
                    self.built.append(table)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            self.error = exc
        self.seconds = time.monotonic() - t0

    def _next(self) -> str | None:
        with self._lock:
            return self._todo.pop(0) if self._todo else None

    def steal(self) -> list[str]:
        """The tables the thread has not started: the caller builds them itself (in the
        mirror, while the thread finishes the one it holds), and they are not copied."""
        with self._lock:
            taken, self._todo = self._todo, []
        return taken

    def finish(self, *, copy: bool = True) -> list[str]:
        """Wait for the build; with `copy`, bring its indexes into the mirror in one transaction.
        Returns the tables now indexed (none after a failure, which is logged); the scratch file
        is removed either way."""
        self._thread.join()
        try:
            if not copy:
                return []
            if self.error is not None:
                _log.warning(
                    "mirror.fts_side_build_failed",
                    error=str(self.error),
                    hint="the full-text indexes are built in the mirror instead (slower)",
                )
                return []
            t0 = time.monotonic()
            try:
                self._copy()
            except sqlite3.Error as exc:
                _log.warning(
                    "mirror.fts_copy_failed",
                    error=str(exc),
                    hint="the full-text indexes are built in the mirror instead (slower)",
                )
                return []
            _log.debug(
                "mirror.fts_side_build",
                tables=len(self.built),
                build_seconds=round(self.seconds, 3),
                copy_seconds=round(time.monotonic() - t0, 3),
            )
            return list(self.built)
        finally:
            self._remove()

    def _copy(self) -> None:
        # A connection of its own: the mirror's connection then loads the new tables fresh
        # (FTS5 caches an index's structure per connection), never a copy created empty.
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        try:
            conn.execute(f"PRAGMA wal_autocheckpoint={int(self.autocheckpoint)}")
            conn.execute("ATTACH DATABASE ? AS side", (str(self.side),))
            conn.execute("BEGIN IMMEDIATE")
            try:
                for table in self.built:
                    create, *triggers = self._sql[table]
                    conn.execute(create)
                    for shadow in SHADOWS:
                        name = f"[{table}_fts_{shadow}]"
                        conn.execute(f"DELETE FROM main.{name}")
                        conn.execute(f"INSERT INTO main.{name} SELECT * FROM side.{name}")
                    for trigger in triggers:
                        conn.execute(trigger)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def _remove(self) -> None:
        remove_scratch(self.path)


def remove_scratch(path: Path) -> None:
    """Remove the scratch files of a side build beside the mirror at `path` (a process killed
    mid-build leaves them: ~80 MB at 1M resources)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(OSError):  # a directory there fails the build, logged
            Path(f"{path}-fts-build{suffix}").unlink()

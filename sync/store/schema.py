"""The mirror's schema: bookkeeping tables, content tables created and widened with sqlite-utils.

Content tables are named as their JSON:API type and keyed by the integer `id`; a new attribute
upstream adds a column (never a failure). Bookkeeping tables all start with `_sync_`, so a user
can tell at a glance what is upstream data and what is ours. The schema version lives in
`_sync_meta`; a file written by a newer `sync` is refused rather than misread.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlite_utils

SCHEMA_VERSION = 1

BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS _sync_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS _sync_cursors (
    type TEXT NOT NULL, scope TEXT NOT NULL, cursor TEXT NOT NULL, updated_at TEXT,
    PRIMARY KEY (type, scope));
CREATE TABLE IF NOT EXISTS _sync_backfill (
    type TEXT NOT NULL, scope TEXT NOT NULL, page_size INTEGER, last INTEGER,
    started_at TEXT, finished_at TEXT, PRIMARY KEY (type, scope));
CREATE TABLE IF NOT EXISTS _sync_backfill_pages (
    type TEXT NOT NULL, scope TEXT NOT NULL, page INTEGER NOT NULL,
    PRIMARY KEY (type, scope, page)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT, started_at TEXT, finished_at TEXT,
    status TEXT, rows INTEGER, error TEXT);
CREATE TABLE IF NOT EXISTS _sync_types (
    type TEXT PRIMARY KEY, last_sync_at TEXT, last_error TEXT, error_at TEXT);
CREATE TABLE IF NOT EXISTS _sync_tombstones (
    type TEXT NOT NULL, id INTEGER NOT NULL, deleted_at TEXT,
    PRIMARY KEY (type, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_jobs (
    name TEXT PRIMARY KEY, started_at TEXT, finished_at TEXT, outcome TEXT, error TEXT,
    seconds REAL, next_run_at TEXT);
CREATE TABLE IF NOT EXISTS meta_scripts (
    id TEXT PRIMARY KEY, type TEXT, content TEXT, first_seen_at TEXT, last_seen_at TEXT);
CREATE TABLE IF NOT EXISTS current_hours (
    mall_id INTEGER PRIMARY KEY, body TEXT, fetched_at TEXT);
"""

#: Columns that get an index wherever a content table has them.
INDEXED = ("mall_id", "updated_at", "seo_slug")


def column_type(value: Any) -> type:
    """The SQLite affinity for a value as the mirror stores it."""
    if isinstance(value, bool | int):
        return int
    if isinstance(value, float):
        return float
    return str


class Schema:
    """Knows the columns of every table (cached) and creates or widens tables on demand.

    Runs *outside* the per-page transaction: sqlite-utils commits on its own, and a table or
    column created for a page that then fails is harmless.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self._columns: dict[str, set[str]] = {}
        # A bulk load into empty tables defers the secondary indexes: rows arrive in id order,
        # but updated_at/seo_slug/mall_id do not, and each page's commit would rewrite pages
        # all over those indexes. `create_indexes` builds them once, sorted, at the end.
        self.defer_indexes = False

    def columns(self, table: str) -> set[str]:
        """Current columns of `table` (empty when it does not exist)."""
        cols = self._columns.get(table)
        if cols is None:
            cols = {r[1] for r in self.conn.execute(f"PRAGMA table_info([{table}])")}
            if cols:
                self._columns[table] = cols
        return cols

    def ensure_content(self, table: str, sample: dict[str, Any]) -> None:
        """Create `table` keyed by id, or add the columns of `sample` it lacks, plus indexes."""
        have = self.columns(table)
        if not have:
            self.db.table(table).create(
                {k: column_type(v) for k, v in sample.items()}, pk="id", if_not_exists=True
            )
        else:
            folded = {c.lower() for c in have}  # SQLite column names are case-insensitive
            for key, value in sample.items():
                if key.lower() not in folded:
                    self.db.table(table).add_column(key, column_type(value))
        self._columns.pop(table, None)
        if not self.defer_indexes:
            self.create_indexes([table])

    def create_indexes(self, tables: list[str]) -> None:
        """Indexes on mall_id, updated_at and seo_slug wherever those tables have them."""
        for table in tables:
            cols = self.columns(table)
            for col in INDEXED:
                if col in cols:
                    self.conn.execute(
                        f"CREATE INDEX IF NOT EXISTS [idx_{table}_{col}] ON [{table}] ([{col}])"
                    )

    def ensure_link(self, table: str, owner_col: str, related_col: str) -> None:
        """A link table of one to-many relationship, indexed both ways (the reverse index
        deferred like the others during a bulk load: related ids arrive in no order)."""
        if self.columns(table):
            return
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS [{table}] ([{owner_col}] INTEGER NOT NULL, "
            f"[{related_col}] INTEGER NOT NULL, position INTEGER, "
            f"PRIMARY KEY ([{owner_col}], [{related_col}])) WITHOUT ROWID"
        )
        self._columns.pop(table, None)
        if not self.defer_indexes:
            self.create_link_index(table, related_col)

    def create_link_index(self, table: str, related_col: str) -> None:
        """The reverse index of a link table (which rows link to a given related id)."""
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS [idx_{table}_{related_col}] ON [{table}] ([{related_col}])"
        )

    def ensure_hours(self, sample: dict[str, Any]) -> None:
        """The `hours` table, keyed by (mall_id, date), widened like content tables."""
        have = self.columns("hours")
        if not have:
            cols = {"mall_id": int, "date": str, "fetched_at": str}
            cols.update({k: column_type(v) for k, v in sample.items() if k not in cols})
            self.db.table("hours").create(cols, pk=("mall_id", "date"), if_not_exists=True)
        else:
            for key, value in sample.items():
                if key not in have:
                    self.db.table("hours").add_column(key, column_type(value))
        self._columns.pop("hours", None)

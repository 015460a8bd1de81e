"""The mirror's schema: bookkeeping tables, content tables created and widened with sqlite-utils.

Content tables are named as their JSON:API type and keyed by the integer `id`; a new attribute
upstream adds a column (never a failure). Bookkeeping tables all start with `_sync_`, so a user
can tell at a glance what is upstream data and what is ours. The schema version lives in
`_sync_meta`; a file written by a newer `sync` is refused rather than misread (`sync.store.file`).
This module creates and widens; bringing a file an older sync wrote up to date is
`sync.store.migrations`'s, and the full-text indexes and the change feed's triggers it asks for
are `sync.store.fts`'s and `sync.store.changes`'s.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol

import sqlite_utils

from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.columns import COLUMN_TYPES, KEY_COLUMNS, Affinity
from sync.store import changes, fts
from sync.store.fts import FTS_COLUMNS as FTS_COLUMNS

_log = get_logger("sync.store")
PYTYPE_NAME = {int: "INTEGER", float: "REAL", str: "TEXT"}

#: 2: `meta_scripts` per resource type and position (`sync.store.scripts`); a sync of schema 1
#: would write it in the old shape, so it refuses the file instead.
SCHEMA_VERSION = 2

#: `meta.scripts` as the last response of each type served them (`sync.store.scripts`): `type`
#: is the resource type, `script_type` the script's own `type`.
META_SCRIPTS = """CREATE TABLE IF NOT EXISTS meta_scripts (
    type TEXT NOT NULL, channel TEXT, position INTEGER NOT NULL, script_type TEXT, content TEXT,
    first_seen_at TEXT, last_seen_at TEXT, PRIMARY KEY (type, position))"""

BOOKKEEPING = f"""
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
    status TEXT, rows INTEGER, error TEXT, pid INTEGER, seen_at TEXT);
CREATE TABLE IF NOT EXISTS _sync_types (
    type TEXT PRIMARY KEY, last_sync_at TEXT, last_error TEXT, error_at TEXT);
CREATE TABLE IF NOT EXISTS _sync_tombstones (
    type TEXT NOT NULL, id INTEGER NOT NULL, deleted_at TEXT, source TEXT,
    PRIMARY KEY (type, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_jobs (
    name TEXT PRIMARY KEY, started_at TEXT, finished_at TEXT, outcome TEXT, error TEXT,
    seconds REAL, next_run_at TEXT);
CREATE TABLE IF NOT EXISTS _sync_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, id INTEGER, op TEXT NOT NULL,
    updated_at TEXT, at TEXT NOT NULL);
{META_SCRIPTS};
CREATE TABLE IF NOT EXISTS _sync_refusals (
    type TEXT NOT NULL, id INTEGER NOT NULL, attribute TEXT NOT NULL, value TEXT, problem TEXT,
    first_at TEXT, last_at TEXT, times INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (type, id, attribute)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_coercions (
    type TEXT NOT NULL, attribute TEXT NOT NULL, count INTEGER NOT NULL, last_id INTEGER,
    last_value TEXT, last_at TEXT, PRIMARY KEY (type, attribute)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS current_hours (
    mall_id INTEGER PRIMARY KEY REFERENCES malls(id), body TEXT, fetched_at TEXT);
"""

#: Views: the inverse side of an association the mirror keeps once, on the side that owns its
#: linkage (see README "The mirror's schema"), and the mall <-> deal association. Each names
#: the (table, columns) it reads; it is created once they all exist.
VIEWS: dict[str, tuple[tuple[tuple[str, tuple[str, ...]], ...], str]] = {
    "stores_products": (
        (("products_stores", ("products_id", "stores_id")),),
        "SELECT stores_id, products_id, position FROM products_stores",
    ),
    "stores_deals": (
        (("deals_stores", ("deals_id", "stores_id")),),
        "SELECT stores_id, deals_id, position FROM deals_stores",
    ),
    "stores_job_listings": (
        (("job_listings", ("id", "store_id")),),
        "SELECT store_id AS stores_id, id AS job_listings_id FROM job_listings"
        " WHERE store_id IS NOT NULL",
    ),
    "products_articles": (
        (("articles_products", ("articles_id", "products_id")),),
        "SELECT products_id, articles_id, position FROM articles_products",
    ),
    "malls_articles": (
        (("articles_malls", ("articles_id", "malls_id")),),
        "SELECT malls_id, articles_id, position FROM articles_malls",
    ),
    # `GET /malls/{id}/deals`: the mall's local deals (a linked store is in the mall) and the
    # national ones (`is_local` false) unless the mall sets `exclude_national_deals`, Public
    # (the route's default visibility). Derived rather than listed per mall: national deals x
    # malls rows would dwarf the mirror. The spec states no such rule: `sync.jobs.malls.mallroutes` checks
    # it against a few malls' routes and replaces the view by a table filled from every mall's
    # route when they disagree. A store's malls are its memberships (`sync.store.memberships`).
    "malls_deals": (
        (
            ("deals_stores", ("deals_id", "stores_id")),
            ("malls_stores", ("malls_id", "stores_id")),
            ("deals", ("id", "is_local", "visibility")),
            ("malls", ("id", "exclude_national_deals")),
        ),
        "SELECT DISTINCT ms.malls_id AS malls_id, ds.deals_id AS deals_id"
        " FROM deals_stores ds JOIN malls_stores ms ON ms.stores_id = ds.stores_id"
        " JOIN deals d ON d.id = ds.deals_id WHERE d.is_local = 1 AND d.visibility = 'Public'"
        " UNION ALL SELECT m.id AS malls_id, d.id AS deals_id FROM malls m JOIN deals d"
        " ON d.is_local = 0 AND d.visibility = 'Public'"
        " WHERE coalesce(m.exclude_national_deals, 0) = 0",
    ),
}


def declared_type(table: str, column: str) -> Affinity | None:
    """The type the spec declares for `column` of `table` (`sync.model.columns.COLUMN_TYPES`),
    or None: inferred from its values."""
    return COLUMN_TYPES.get(table, KEY_COLUMNS).get(column)


def foreign_keys(table: str) -> list[tuple[str, str, str]]:
    """(column, other table, other column) a content table declares: its to-one columns and
    `mall_id`, pointing at their targets (declared for readers such as Datasette; SQLite does
    not enforce them here, since a link may name a row the mirror does not hold)."""
    out: dict[str, tuple[str, str, str]] = {}
    rtype = catalogue.TYPES.get(table)
    if rtype is not None:
        if rtype.level == "mall":
            out["mall_id"] = ("mall_id", "malls", "id")
        for rel in rtype.relationships:
            if rel.to_one:
                out[rel.column] = (rel.column, rel.target, "id")
    elif table in (catalogue.HOURS_TABLE, catalogue.CURRENT_HOURS_TABLE):
        out["mall_id"] = ("mall_id", "malls", "id")
    return list(out.values())


def link_sql(table: str, owner_col: str, related_col: str, owner: str, target: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS [{table}] ("
        f"[{owner_col}] INTEGER NOT NULL REFERENCES [{owner}](id), "
        f"[{related_col}] INTEGER NOT NULL REFERENCES [{target}](id), position INTEGER, "
        f"PRIMARY KEY ([{owner_col}], [{related_col}])) WITHOUT ROWID"
    )


#: Columns that get an index wherever a content table has them.
INDEXED = ("mall_id", "updated_at", "seo_slug")


def column_type(value: Any) -> type:
    """The SQLite affinity for a value as the mirror stores it."""
    if isinstance(value, bool | int):
        return int
    if isinstance(value, float):
        return float
    return str


#: Python types sqlite-utils takes for each affinity.
PYTYPE: dict[str, type] = {"INTEGER": int, "REAL": float, "TEXT": str}
#: Inferred affinities in widening order: a column only ever moves right.
WIDER = ("", "INTEGER", "REAL", "TEXT")


def affinity(declared_type: str) -> str:
    """SQLite's affinity of a declared column type (its own rules, section 3.1 of the docs);
    '' for an untyped column."""
    t = declared_type.upper()
    if not t:
        return ""
    if "INT" in t:
        return "INTEGER"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "TEXT"
    if "BLOB" in t:
        return ""
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "REAL"
    return "NUMERIC"


def value_affinity(value: Any) -> str:
    """The affinity an inferred column needs for `value` as stored ('' for None)."""
    if value is None:
        return ""
    if isinstance(value, bool | int):
        return "INTEGER"
    if isinstance(value, float):
        return "REAL"
    return "TEXT"


class HasColumns(Protocol):
    """What knows the columns of the mirror's tables: `Schema`, and the PostgreSQL mirror's
    (`sync.store.pg.schema.Schema`); the rules written once for both stores take it."""

    def columns(self, table: str) -> set[str]:
        """Current columns of `table` (empty when it does not exist)."""
        ...


class Schema:
    """Knows the columns of every table (cached) and creates or widens tables on demand.

    Runs *outside* the per-page transaction: sqlite-utils commits on its own, and a table or
    column created for a page that then fails is harmless.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self._columns: dict[str, set[str]] = {}
        self._types: dict[str, dict[str, str]] = {}
        # A bulk load into empty tables defers the secondary indexes: rows arrive in id order,
        # but updated_at/seo_slug/mall_id do not, and each page's commit would rewrite pages
        # all over those indexes. `create_indexes` builds them once, sorted, at the end.
        self.defer_indexes = False
        self._views_done = False

    def columns(self, table: str) -> set[str]:
        """Current columns of `table` (empty when it does not exist)."""
        cols = self._columns.get(table)
        if cols is None:
            cols = {r[1] for r in self.conn.execute(f"PRAGMA table_info([{table}])")}
            if cols:
                self._columns[table] = cols
        return cols

    def names(self) -> set[str]:
        """The mirror's tables and views, by name."""
        rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        return {str(row[0]) for row in rows}

    def has_table(self, table: str) -> bool:
        """Whether `table` exists (a view counts: it has columns too)."""
        return bool(self.columns(table))

    def has_view(self, name: str) -> bool:
        """Whether a view `name` exists (`malls_deals` is a view until the mall routes list it)."""
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)
            ).fetchone()
        )

    def types(self, table: str) -> dict[str, str]:
        """Affinity of each column of `table` ('' for untyped), cached like `columns`."""
        found = self._types.get(table)
        if found is None:
            found = {
                r[1]: affinity(r[2]) for r in self.conn.execute(f"PRAGMA table_info([{table}])")
            }
            if found:
                self._types[table] = found
        return found

    def forget(self, table: str) -> None:
        """Drop the cached columns of `table` (after a change made outside this class)."""
        self._columns.pop(table, None)
        self._types.pop(table, None)

    def ensure_content(self, table: str, sample: dict[str, Any]) -> None:
        """Create `table` keyed by id, or add the columns of `sample` it lacks, plus indexes.

        A column's type is the one the spec declares (`sync.model.columns`); an attribute the
        spec does not list takes its type from its first non-null value, and is created
        untyped while every value seen is null (`widen` types it later).
        """
        have = self.columns(table)
        wanted = {k: declared_type(table, k) or value_affinity(v) for k, v in sample.items()}
        wanted["id"] = "INTEGER"
        if not have:
            # Our own CREATE TABLE: sqlite-utils refuses a foreign key to a table not created
            # yet (a deal page may arrive before any store), and SQLite does not mind.
            refs = {c: (t, oc) for c, t, oc in foreign_keys(table)}
            cols = ["[id] INTEGER PRIMARY KEY"]
            for k, a in wanted.items():
                if k == "id" or not a:
                    continue
                ref = f" REFERENCES [{refs[k][0]}]({refs[k][1]})" if k in refs else ""
                cols.append(f"[{k}] {PYTYPE_NAME[PYTYPE[a]]}{ref}")
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS [{table}] ({', '.join(cols)})")
            for k, a in wanted.items():
                if not a:
                    self.conn.execute(f"ALTER TABLE [{table}] ADD COLUMN [{k}]")
        else:
            folded = {c.lower() for c in have}  # SQLite column names are case-insensitive
            for key, a in wanted.items():
                if key.lower() in folded:
                    continue
                if a:
                    self.db.table(table).add_column(key, PYTYPE[a])
                else:
                    self.conn.execute(f"ALTER TABLE [{table}] ADD COLUMN [{key}]")
        self.forget(table)
        if not self.defer_indexes:
            self.create_indexes([table])
            self.ensure_fts([table])
            self.ensure_change_triggers([table])
            if not have:
                self.ensure_views()  # a new table may complete a view's sources

    def widen(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Widen inferred columns whose values in `rows` do not fit their type (INTEGER, then
        REAL, then TEXT; an untyped column takes its first value's type), with sqlite-utils'
        `transform` and a log line. Declared columns are never changed here. `rows` are the
        page's bound tuples (`id` first, then `columns`)."""
        have = self.types(table)
        change: dict[str, type] = {}
        for pos, col in enumerate(columns, start=1):
            if declared_type(table, col) is not None:
                continue
            current = have.get(col)
            if current is None or current == "NUMERIC":
                continue
            widest = current
            for row in rows:
                a = value_affinity(row[pos])
                if WIDER.index(a) > WIDER.index(widest):
                    widest = a
            if widest != current:
                change[col] = PYTYPE[widest]
        if change:
            self.transform(table, change, "widened: a value did not fit the inferred type")

    def ensure_views(self) -> None:
        """Create each of `VIEWS` whose tables and columns exist (cheap once all exist)."""
        if self._views_done:
            return
        have = {
            r[0]: r[1]
            for r in self.conn.execute("SELECT name, sql FROM sqlite_master WHERE type='view'")
        }
        missing = 0
        tables = {
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        for name, (needs, select) in VIEWS.items():
            if name in tables:
                continue  # listed from the routes instead (`materialize_mall_deals`)
            if name in have:
                if have[name].endswith(select):
                    continue
                # Written by an older sync (`malls_deals` read one `mall_id` per store).
                self.conn.execute(f"DROP VIEW [{name}]")
            if all(set(cols) <= self.columns(table) for table, cols in needs):
                self.conn.execute(f"CREATE VIEW IF NOT EXISTS [{name}] AS {select}")
            else:
                missing += 1
        self._views_done = missing == 0

    def mall_deals_is_table(self) -> bool:
        """Whether `malls_deals` is listed from the mall routes (a table), not derived."""
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'malls_deals'"
            ).fetchone()
        )

    def materialize_mall_deals(self) -> None:
        """Replace the derived `malls_deals` view by a link table the mall routes fill."""
        if self.mall_deals_is_table():
            return
        self.conn.execute("DROP VIEW IF EXISTS malls_deals")
        self.ensure_link("malls_deals", "malls_id", "deals_id", "malls", "deals")
        self.create_link_index("malls_deals", "deals_id")

    def drop_views(self) -> None:
        """Drop our views (a table rebuilt under them would break SQLite's rename checks). A
        name that is a table (`malls_deals` listed from the mall routes) is left: it is data,
        and `DROP VIEW` on it fails (a widened column or a rebuild must not stop at it)."""
        views = {
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")
        }
        for name in VIEWS:
            if name in views:
                self.conn.execute(f"DROP VIEW [{name}]")
        self._views_done = False

    def transform(self, table: str, change: dict[str, type], why: str) -> None:
        """Change column types with sqlite-utils' `transform` (a rebuilt table), keeping its
        full-text index, feed triggers and views, and logging `why`."""
        rows = self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]
        self.drop_views()
        searched = self.fts_table(table)
        self.db.table(table).transform(types=change)
        self.forget(table)
        if searched:  # the rebuilt table lost the triggers that keep its FTS index in step
            self.ensure_fts([table], replace=True)
        if not self.defer_indexes:
            self.ensure_change_triggers([table])
        self.ensure_views()
        after = self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]
        if after != rows:  # never expected: transform copies every row in one transaction
            raise RuntimeError(f"{table}: {rows} rows before a column type change, {after} after")
        self.forget(table)
        _log.warning(
            "mirror.column_types_changed",
            table=table,
            columns={c: PYTYPE_NAME[t] for c, t in change.items()},
            rows=rows,
            why=why,
        )

    def create_indexes(self, tables: list[str]) -> None:
        """Indexes on mall_id, updated_at and seo_slug wherever those tables have them."""
        for table in tables:
            cols = self.columns(table)
            for col in INDEXED:
                if col in cols:
                    self.conn.execute(
                        f"CREATE INDEX IF NOT EXISTS [idx_{table}_{col}] ON [{table}] ([{col}])"
                    )

    def ensure_link(
        self, table: str, owner_col: str, related_col: str, owner: str, target: str
    ) -> None:
        """A link table of one to-many relationship of `owner` to `target`, indexed both ways
        (the reverse index deferred like the others during a bulk load: related ids arrive in
        no order), with both columns declared as foreign keys."""
        if self.columns(table):
            return
        self.conn.execute(link_sql(table, owner_col, related_col, owner, target))
        self._columns.pop(table, None)
        if not self.defer_indexes:
            self.ensure_views()
        if not self.defer_indexes:
            self.create_link_index(table, related_col)

    def fts_table(self, table: str) -> str | None:
        """The full-text index of `table`, as sqlite-utils detects it (None: none)."""
        return self.db.table(table).detect_fts() if self.columns(table) else None

    def fts_missing(self, tables: list[str], *, replace: bool = False) -> dict[str, list[str]]:
        """The full-text indexes `ensure_fts` builds: table -> its `FTS_COLUMNS` present (with
        `replace`, also those of tables that already have one)."""
        plan = {}
        for table in tables:
            cols = self.columns(table)
            wanted = fts.wanted(table, cols)
            if wanted and (replace or not self.fts_table(table)):
                plan[table] = wanted
        return plan

    def ensure_fts(self, tables: list[str], *, replace: bool = False) -> None:
        """FTS5 over the `FTS_COLUMNS` of each table, kept in step by triggers (built once,
        at the end of a bulk load like the deferred indexes)."""
        for table, wanted in self.fts_missing(tables, replace=replace).items():
            fts.build(self.conn, table, wanted)

    def ensure_change_triggers(self, tables: list[str]) -> None:
        """The change feed's triggers on each of `tables` that exists (`sync.store.changes`)."""
        for table in tables:
            changes.create_triggers(self.conn, table, self.columns(table))

    def create_link_index(self, table: str, related_col: str) -> None:
        """The reverse index of a link table (which rows link to a given related id)."""
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS [idx_{table}_{related_col}] ON [{table}] ([{related_col}])"
        )

"""Full-text indexes in the mirror: which columns are searched, and building one in place.

Each searchable table gets an FTS5 index (`<table>_fts`) with the triggers sqlite-utils'
`enable_fts` writes to keep it in step, so Datasette's `?_search=` works on the mirror as it
would on a file sqlite-utils made. This module builds one inside the mirror's connection, in one
savepoint, and repairs one an interrupted process left half made; a bulk load's end phase builds
most of them beside the file instead (`sync.store.ftsbuild`), with the same SQL (`fts_sql`).
"""

from __future__ import annotations

import sqlite3

from sync.core.logs import get_logger
from sync.store.ftsbuild import fts_sql

_log = get_logger("sync.store")

#: Text people search, per table: an FTS5 index (`<table>_fts`, sqlite-utils' `enable_fts` with
#: triggers) over those of the columns the table has, so Datasette's `?_search=` works.
FTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "articles": ("title", "subtitle", "teaser", "content"),
    "contacts": ("name", "title"),
    "deals": ("title", "retailer_name", "description"),
    "events": ("title", "short_text", "description"),
    "ifeatures": ("headline", "sub_heading", "description"),
    "job_listings": ("title", "store_name", "description"),
    "mall_messages": ("description",),
    "malls": ("name", "city", "description"),
    "press_releases": ("name", "headline", "content"),
    "products": ("name", "description"),
    "programs": ("name",),
    "stores": ("name", "description"),
    "images": ("alt_text",),
    "tags": ("name",),
    "groups": ("name",),
}

#: The triggers sqlite-utils' `enable_fts` names `<table><suffix>` to keep an index in step.
FTS_TRIGGERS = ("_ai", "_ad", "_au")


def wanted(table: str, columns: set[str]) -> list[str]:
    """The `FTS_COLUMNS` of `table` among `columns` (the table's own), in index order."""
    return [c for c in FTS_COLUMNS.get(table, ()) if c in columns]


def build(conn: sqlite3.Connection, table: str, columns: list[str]) -> None:
    """(Re)build the FTS5 index of `table` over `columns`, with its triggers, in one savepoint.

    sqlite-utils' `enable_fts` (whose SQL this runs, `fts_sql`) commits its steps one by one: a
    process killed between them left an index without triggers (stale from then on, and never
    rebuilt: the index exists) or, replacing one, triggers without their index (every write to
    the table failing)."""
    create, *triggers = fts_sql(table, columns)
    cols = ", ".join(f"[{c}]" for c in columns)
    conn.execute("SAVEPOINT sync_fts")
    try:
        conn.execute(f"DROP TABLE IF EXISTS [{table}_fts]")
        for suffix in FTS_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS [{table}{suffix}]")
        conn.execute(create)
        conn.execute(
            f"INSERT INTO [{table}_fts] (rowid, {cols}) SELECT rowid, {cols} FROM [{table}]"
        )
        for trigger in triggers:
            conn.execute(trigger)
        conn.execute("RELEASE sync_fts")
    except BaseException:
        conn.execute("ROLLBACK TO sync_fts")
        conn.execute("RELEASE sync_fts")
        raise


def incomplete(conn: sqlite3.Connection, table: str, names: set[str], *, check: bool) -> str | None:
    """Why the index of `table` needs rebuilding (None: it is whole, or there is none to
    repair). `names` are the file's tables and triggers; with `check`, the index must also
    pass FTS5's integrity-check against its table (rank 1: match the rows, not only itself)."""
    fts = f"{table}_fts"
    triggers = [f"{table}{suffix}" in names for suffix in FTS_TRIGGERS]
    if fts not in names:
        return "its triggers were left without their index" if any(triggers) else None
    if not all(triggers):
        return "its triggers are missing"
    if check:
        try:
            conn.execute(f"INSERT INTO [{fts}]([{fts}], rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as exc:
            return f"its integrity-check failed ({exc})"
    return None


def repair(conn: sqlite3.Connection, columns: dict[str, set[str]], *, check: bool) -> list[str]:
    """Rebuild the indexes an interrupted process left incomplete (`incomplete`), each logged;
    `columns` maps each content table to its columns. Returns the tables rebuilt. A missing
    index is not this function's: `Schema.ensure_fts` builds it."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type != 'index'")}
    rebuilt = []
    for table, cols in columns.items():
        searched = wanted(table, cols)
        why = incomplete(conn, table, names, check=check) if searched else None
        if why is not None:
            build(conn, table, searched)
            rebuilt.append(table)
            _log.warning(
                "mirror.fts_rebuilt",
                table=f"{table}_fts",
                why=why,
                hint="an interrupted run left it incomplete; rebuilt from the table",
            )
    return rebuilt

"""What the PostgreSQL mirror's schema holds: its tables and views, and the columns of each.

Issue #49: the introspection half of `sync.store.schema.Schema` (`columns`, `names`,
`has_table`, `forget`, and `types`, the columns' types, which the hours ask), which the reads
(`sync.store.pg.reads`), the listing diff (`sync.store.pg.listing`) and the store's callers ask
before they touch a table. Creating and widening tables is the page write's
(`sync.store.pg.pagewrite.PageWriter.ensure`), not this class's. Not wired into `Mirror` yet.

Everything is asked of the catalogue (`pg_class`, `pg_attribute`), never learnt from a failed
statement: in PostgreSQL a failed statement aborts the caller's transaction, where SQLite's
`PRAGMA table_info` of a missing table answers nothing and leaves it as it was. A table is one
of the mirror's schema (`SCHEMA` unless told), never one found through `search_path`; the
session's temporary tables (a listing's) are not the mirror's, as SQLite's `temp` schema is not
in `sqlite_master` (SQLite's `PRAGMA table_info` of a bare name does find a temporary table, so
its `has_table` answers yes for a listing's name; no caller asks that, and here it is no). Names are compared exactly: PostgreSQL's quoted identifiers are
case-sensitive, where SQLite folds the case of table and column names.

**The cache.** `columns` and `types` keep what they read of a table that exists (one read
fills both), as SQLite's `Schema` does: whoever adds or widens a column through another object
(the page writer, `sync.store.pg.hours.ensure_table`) calls `forget` for that table, and so does
whoever rolls back a transaction in which one was (`PgMirror`'s group, for `hours`). A table
that does not exist is never cached, so one made later is seen at once.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.store.pg.bookkeeping import READABLE, SCHEMA
from sync.store.pg.links import ensure_link
from sync.store.schema import VIEWS as SQLITE_VIEWS

#: The mirror's views (`sync.store.schema.VIEWS`: the inverse sides of associations and the
#: mall <-> deal derivation), each the (table, columns) it reads and its select, with table
#: names resolved in the mirror's schema when made. SQLite's selects serve as they are but
#: `malls_deals`, whose flags are `boolean` here (SQLite compares them with 1 and 0).
VIEWS: dict[str, tuple[tuple[tuple[str, tuple[str, ...]], ...], str]] = {
    **SQLITE_VIEWS,
    "malls_deals": (
        SQLITE_VIEWS["malls_deals"][0],
        "SELECT DISTINCT ms.malls_id AS malls_id, ds.deals_id AS deals_id"
        " FROM deals_stores ds JOIN malls_stores ms ON ms.stores_id = ds.stores_id"
        " JOIN deals d ON d.id = ds.deals_id WHERE d.is_local AND d.visibility = 'Public'"
        " UNION ALL SELECT m.id AS malls_id, d.id AS deals_id FROM malls m JOIN deals d"
        " ON NOT d.is_local AND d.visibility = 'Public'"
        " WHERE NOT coalesce(m.exclude_national_deals, false)",
    ),
}


def table_types(conn: psycopg.Connection[Any], schema: str, table: str) -> dict[str, str]:
    """The columns of `schema.table` (a table or a view) in their order, each with its type as
    `format_type` names it (`bigint`, `text`: no collation), read now (no cache); {} when it
    does not exist."""
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a"
            " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind = ANY(%s)"
            " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (schema, table, list(READABLE)),
        )
        .fetchall()
    )
    return {str(name): str(kind) for name, kind in rows}


def table_columns(conn: psycopg.Connection[Any], schema: str, table: str) -> list[str]:
    """The columns of `schema.table` (a table or a view) in their order, read now (no cache);
    [] when it does not exist."""
    return list(table_types(conn, schema, table))


class Schema:
    """The tables of one PostgreSQL schema of the mirror, over one connection: the counterpart
    of `sync.store.schema.Schema`'s reads (`conn` as there, `name` the schema's)."""

    def __init__(self, conn: psycopg.Connection[Any], name: str = SCHEMA) -> None:
        self.conn = conn
        self.name = name
        #: What `types` read of each table that exists: its columns' types, and their names.
        self._types: dict[str, dict[str, str]] = {}
        self._columns: dict[str, set[str]] = {}

    def __repr__(self) -> str:
        return f"<pg Schema {self.name!r}>"

    def columns(self, table: str) -> set[str]:
        """Current columns of `table` (empty when it does not exist)."""
        cols = self._columns.get(table)
        return set(self.types(table)) if cols is None else cols

    def types(self, table: str) -> dict[str, str]:
        """Current columns of `table` in their order, each with its type (`table_types`; empty
        when it does not exist): read once and kept with `columns` (one read fills both, one
        `forget` drops both). Not to be changed by the caller."""
        found = self._types.get(table)
        if found is None:
            found = table_types(self.conn, self.name, table)
            if found:
                self._types[table] = found
                self._columns[table] = set(found)
        return found

    def names(self) -> set[str]:
        """The mirror's tables and views, by name (those of this schema only)."""
        rows = (
            self.conn.cursor(row_factory=tuple_row)
            .execute(
                "SELECT c.relname FROM pg_catalog.pg_class c"
                " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = ANY(%s)",
                (self.name, list(READABLE)),
            )
            .fetchall()
        )
        return {str(r[0]) for r in rows}

    def has_table(self, table: str) -> bool:
        """Whether `table` exists (a view counts: it has columns too)."""
        return bool(self.columns(table))

    def _kinds(self) -> dict[str, str]:
        """The relations of this schema that have columns, by name: their `relkind`."""
        rows = self.conn.execute(
            "SELECT c.relname, c.relkind::text FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = ANY(%s)",
            (self.name, list(READABLE)),
        ).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def has_view(self, name: str) -> bool:
        """Whether a view `name` exists (`malls_deals` is a view until the mall routes list it)."""
        return self._kinds().get(name) == "v"

    def ensure_views(self) -> None:
        """Create each of `VIEWS` whose tables and columns exist and that is not a table
        (`malls_deals` listed from the mall routes), in a transaction of its own; cheap once
        all exist. Names in a select resolve in the mirror's schema (`SET LOCAL search_path`,
        the view keeps what they resolved to)."""
        kinds = self._kinds()
        wanted = [
            (name, select)
            for name, (needs, select) in VIEWS.items()
            if name not in kinds and all(set(cols) <= self.columns(table) for table, cols in needs)
        ]
        if not wanted:
            return
        with self.conn.transaction():
            self.conn.execute(
                sql.SQL("SET LOCAL search_path TO {}, pg_catalog").format(
                    sql.Identifier(self.name)
                ),
                prepare=False,
            )
            for name, select in wanted:
                self.conn.execute(
                    sql.SQL("CREATE OR REPLACE VIEW {} AS {}").format(
                        sql.Identifier(self.name, name), sql.SQL(select)
                    ),
                    prepare=False,
                )
        for name, _ in wanted:
            self.forget(name)

    def mall_deals_is_table(self) -> bool:
        """Whether `malls_deals` is listed from the mall routes (a table), not derived."""
        return self._kinds().get("malls_deals") in ("r", "p")

    def materialize_mall_deals(self) -> None:
        """Replace the derived `malls_deals` view by a link table the mall routes fill."""
        if self.mall_deals_is_table():
            return
        with self.conn.transaction():
            self.conn.execute(
                sql.SQL("DROP VIEW IF EXISTS {}").format(sql.Identifier(self.name, "malls_deals")),
                prepare=False,
            )
            ensure_link(self.conn, self.name, "malls_deals", "malls_id", "deals_id")
        self.forget("malls_deals")

    def forget(self, table: str) -> None:
        """Drop the cached columns of `table` (after a change made outside this class)."""
        self._columns.pop(table, None)
        self._types.pop(table, None)

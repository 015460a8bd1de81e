"""The statements of the PostgreSQL page write: the guarded upsert, and the plain insert of
rows known absent.

Issue #49; read `sync.store.pg.pagewrite`'s docstring first (the guard, and why one array per
column). `upsert_sql` is the page write's one statement for a batch: `INSERT INTO t SELECT ...
FROM (SELECT unnest(%s) AS id, ...) AS s ORDER BY id ON CONFLICT (id) DO UPDATE SET ... WHERE
<guard>`. `insert_sql` is its head alone, for a batch whose every id the writer knows absent
(`sync.store.fresh.FreshIds`: a table it created, ids it never wrote there; a first backfill's
rows): no arbiter, so no speculative insertion and its confirmation (a probe and a WAL record
less a row); a row held after all fails the page instead of being overwritten.
"""

from __future__ import annotations

from psycopg import sql

from sync.store.pg import memberships
from sync.store.pg.columns import UPDATED_AT


def insert_sql(schema: str, table: str, cols: tuple[str, ...]) -> sql.Composed:
    """`INSERT INTO t (id, cols) SELECT ... FROM (SELECT unnest(%s) AS id, ...) AS s ORDER BY
    id`: one array parameter per column, id first."""
    names = sql.SQL(", ").join(sql.Identifier(c) for c in ("id", *cols))
    # One array per column, unnested side by side in the select list (a set-returning
    # function there is evaluated a row at a time; in FROM, each would be materialised).
    arrays = sql.SQL(", ").join(
        sql.SQL("unnest(%s) AS {}").format(sql.Identifier(c)) for c in ("id", *cols)
    )
    return sql.SQL("INSERT INTO {} AS t ({}) SELECT {} FROM (SELECT {}) AS s ORDER BY id").format(
        sql.Identifier(schema, table), names, names, arrays
    )


def upsert_sql(schema: str, table: str, cols: tuple[str, ...]) -> sql.Composed:
    """`insert_sql` with `ON CONFLICT (id) DO UPDATE SET ... WHERE <guard>` (see the module
    docstring and `sync.store.pg.pagewrite`'s)."""
    t = sql.Identifier("t")
    # A mall-scoped row's `mall_id` is the lowest mall that lists it (`sync.store.memberships`);
    # elsewhere (events) it is a to-one relationship, replaced like any column.
    scoped = table in memberships.MEMBER_TYPES

    def new(c: str) -> sql.Composable:
        excluded = sql.SQL("EXCLUDED.{}").format(sql.Identifier(c))
        if c == "mall_id" and scoped:
            return sql.SQL("LEAST({}.{}, {})").format(t, sql.Identifier(c), excluded)
        return excluded

    head = insert_sql(schema, table, cols)
    if not cols:
        return sql.SQL("{} ON CONFLICT (id) DO NOTHING").format(head)
    sets = sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), new(c)) for c in cols)
    changed = sql.SQL("ROW({}) IS DISTINCT FROM ROW({})").format(
        sql.SQL(", ").join(sql.SQL("{}.{}").format(t, sql.Identifier(c)) for c in cols),
        sql.SQL(", ").join(new(c) for c in cols),
    )
    if UPDATED_AT in cols:
        at = sql.Identifier(UPDATED_AT)
        guard = sql.SQL(
            "EXCLUDED.{at} > {t}.{at} OR (({t}.{at} IS NULL OR EXCLUDED.{at} = {t}.{at})"
            " AND {changed})"
        ).format(at=at, t=t, changed=changed)
    else:
        guard = changed
    return sql.SQL("{} ON CONFLICT (id) DO UPDATE SET {} WHERE {}").format(head, sets, guard)

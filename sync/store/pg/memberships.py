"""Mall memberships in PostgreSQL: which malls list a mall-scoped row (`malls_<type>`).

Issue #49, the PostgreSQL side of `sync.store.memberships` (read it first: the rules are its
own, and this module keeps them): its writes, with the same meaning, tables and results, taking
the connection and the schema's name where SQLite's take the connection (or its `Schema`), held
to them by contract tests (`tests/unit/store/pg/test_memberships.py`). Its reads by mall
(`count_in_mall`, `ids_in_mall`, `malls_of`, `busiest`, `orphans`, and `TypeTable.by_mall`) are
`sync.store.pg.reads`'. Not wired into `Mirror` yet: the page write
(`sync.store.pg.pagewrite.PageWriter.write_page`) adds the listing mall's pairs through `add`.

**The table** is shaped as the malls' link table of that name (`sync.store.pg.links.ensure_link`:
`malls_id`, `<type>_id`, `position`, keyed by the pair, indexed by the row), so
`sync.store.pg.changes.create_membership_triggers` finds the columns it names. `ensure` gives a
table it makes the feed's triggers, as SQLite's does, when the schema has the feed and no bulk
load is under way. A row's `mall_id` stays the lowest mall that lists it (NULL for none), kept
in step here without rewriting a row whose `mall_id` is already right (a dead tuple each), and
a pair held already is not written again.

Like SQLite's, no function opens a transaction of its own (`ensure` aside). `drop_mall` answers
each type's rows in id order (SQLite's in its key's order, the same). `migrate` has no
counterpart: it fills the memberships of a SQLite mirror written before they existed, and no
PostgreSQL mirror is that old.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from sync.model import catalogue
from sync.store.memberships import MEMBER_TYPES, ROUTED_TABLES, columns, table
from sync.store.pg import changes
from sync.store.pg.bookkeeping import exists
from sync.store.pg.links import ensure_link

__all__ = [
    "MEMBER_TYPES",
    "ROUTED_TABLES",
    "add",
    "columns",
    "drop_mall",
    "drop_rows",
    "ensure",
    "malls_referenced",
    "refresh_mall_id",
    "remove",
    "table",
]


def _has_column(conn: psycopg.Connection[Any], schema: str, name: str, column: str) -> bool:
    """Whether table `schema.name` exists with `column`."""
    return (
        conn.execute(
            "SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
            " AND c.relname = %s AND c.relkind IN ('r', 'p') AND a.attname = %s"
            " AND a.attnum > 0 AND NOT a.attisdropped",
            (schema, name, column),
        ).fetchone()
        is not None
    )


def _names(schema: str, type_name: str) -> tuple[sql.Identifier, sql.Identifier, sql.Identifier]:
    """The membership table of `type_name` (schema-qualified), its mall column and row column."""
    mall, row = columns(type_name)
    return sql.Identifier(schema, table(type_name)), sql.Identifier(mall), sql.Identifier(row)


def ensure(
    conn: psycopg.Connection[Any], schema: str, type_name: str, *, bulk: bool = False
) -> None:
    """The membership table of a mall-scoped type, shaped as the malls' link table, and the
    feed's triggers and its reverse index when it is made here (not during a bulk load, whose
    feed is one `backfill` entry per type and whose end makes the index; no triggers in a
    schema without the feed)."""
    made = ensure_link(conn, schema, table(type_name), *columns(type_name), index=not bulk)
    if made and not bulk and exists(conn, schema, changes.FEED):
        changes.create_membership_triggers(conn, schema, type_name)


def add(
    conn: psycopg.Connection[Any], schema: str, type_name: str, pairs: Iterable[tuple[int, int]]
) -> None:
    """Record (mall, row id) pairs (inside the caller's transaction); a pair held already is
    left as it is."""
    listed = sorted(set(pairs))
    if not listed:
        return
    t, mall, row = _names(schema, type_name)
    conn.execute(
        sql.SQL(
            "INSERT INTO {t} ({m}, {r}, position) SELECT u.m, u.r, 0 FROM"
            " unnest(%s::bigint[], %s::bigint[]) AS u(m, r) ORDER BY u.m, u.r"
            " ON CONFLICT DO NOTHING"
        ).format(t=t, m=mall, r=row),
        ([p[0] for p in listed], [p[1] for p in listed]),
    )


def remove(
    conn: psycopg.Connection[Any], schema: str, type_name: str, mall_id: int, ids: Sequence[int]
) -> int:
    """Remove the pairs of `ids` in `mall_id`; re-point their `mall_id`. Returns pairs removed."""
    if not ids or not exists(conn, schema, table(type_name)):
        return 0
    t, mall, row = _names(schema, type_name)
    n = conn.execute(
        sql.SQL("DELETE FROM {} WHERE {} = %s AND {} = ANY(%s)").format(t, mall, row),
        (mall_id, sorted(set(ids))),
    ).rowcount
    refresh_mall_id(conn, schema, type_name, ids)
    return n


def refresh_mall_id(
    conn: psycopg.Connection[Any], schema: str, type_name: str, ids: Sequence[int]
) -> None:
    """Set `mall_id` of `ids` to the lowest mall the table holds for each (NULL for none),
    leaving the rows where it is so already."""
    if not ids or not _has_column(conn, schema, type_name, "mall_id"):
        return
    t, mall, row = _names(schema, type_name)
    conn.execute(
        sql.SQL(
            "UPDATE {rows} AS t SET mall_id = s.low FROM (SELECT u.id, (SELECT min(m.{mall})"
            " FROM {t} m WHERE m.{row} = u.id) AS low FROM unnest(%s::bigint[]) AS u(id)) s"
            " WHERE t.id = s.id AND t.mall_id IS DISTINCT FROM s.low"
        ).format(rows=sql.Identifier(schema, type_name), t=t, mall=mall, row=row),
        (sorted(set(ids)),),
    )


def drop_mall(conn: psycopg.Connection[Any], schema: str, mall_id: int) -> dict[str, list[int]]:
    """A mall is gone: remove its pairs in every membership table, its hours and current hours.
    Returns, per type, the rows that lost a mall (candidates for `orphans`), ascending."""
    out: dict[str, list[int]] = {}
    for name in MEMBER_TYPES:
        if not exists(conn, schema, table(name)):
            continue
        t, mall, row = _names(schema, name)
        ids = sorted(
            int(r[0])
            for r in conn.execute(
                sql.SQL("DELETE FROM {} WHERE {} = %s RETURNING {}").format(t, mall, row),
                (mall_id,),
            )
        )
        if ids:
            refresh_mall_id(conn, schema, name, ids)
            out[name] = ids
    for routed in ROUTED_TABLES:  # contacts and deals known from the mall routes
        if exists(conn, schema, routed):
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE malls_id = %s").format(
                    sql.Identifier(schema, routed)
                ),
                (mall_id,),
            )
    for hours in (catalogue.HOURS_TABLE, catalogue.CURRENT_HOURS_TABLE):
        if _has_column(conn, schema, hours, "mall_id"):
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE mall_id = %s").format(sql.Identifier(schema, hours)),
                (mall_id,),
            )
    return out


def drop_rows(
    conn: psycopg.Connection[Any], schema: str, type_name: str, ids: Sequence[int]
) -> None:
    """Rows deleted: their pairs go."""
    if ids and exists(conn, schema, table(type_name)):
        t, _, row = _names(schema, type_name)
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(t, row), (sorted(set(ids)),)
        )


def malls_referenced(conn: psycopg.Connection[Any], schema: str) -> set[int]:
    """Every mall some membership table still names (a mall deleted upstream stays here until
    a reconcile visits it and finds it gone)."""
    out: set[int] = set()
    for name in MEMBER_TYPES:
        if exists(conn, schema, table(name)):
            t, mall, _ = _names(schema, name)
            out.update(
                int(r[0])
                for r in conn.execute(sql.SQL("SELECT DISTINCT {} FROM {}").format(mall, t))
            )
    return out

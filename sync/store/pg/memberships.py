"""Mall memberships in PostgreSQL: which malls list a mall-scoped row (`malls_<type>`).

Issue #49, the PostgreSQL side of `sync.store.memberships` (read it first: the rules are its
own, and this module keeps them): the same functions with the same meaning, tables and results,
taking the connection and the schema's name where the SQLite ones take the connection (or its
`Schema`). Held to SQLite's by contract tests that run one test body against both
(`tests/unit/store/pg/test_memberships.py`). Not wired into `Mirror` yet: the page write
(`sync.store.pg.pagewrite.PageWriter.write_page`) adds the listing mall's pairs through `add`.

**The table** is shaped as the malls' link table of that name (`sync.store.pg.links.ensure_link`:
`malls_id`, `<type>_id`, `position`, keyed by the pair, indexed by the row), so
`sync.store.pg.changes.create_membership_triggers` finds the columns it names. `ensure` gives a
table it makes the feed's triggers, as SQLite's does, when the schema has the feed and no bulk
load is under way. A row's `mall_id` stays the lowest mall that lists it (NULL for none), kept
in step here without rewriting a row whose `mall_id` is already right (a dead tuple each).

**Differences.** `busiest` sorts a mall whose rows have no stamp last, as SQLite does (says
`NULLS LAST`: PostgreSQL would put them first), and malls whose newest stamps tie by id (SQLite
leaves ties in no stated order); without an `updated_at` column it answers none rather than
failing (`TypeTable.busiest_malls` asks SQLite's schema first). `by_mall` is `TypeTable.by_mall` in one
query (one per row would be a round trip each). `migrate` has no counterpart: it fills the
memberships of a SQLite mirror written before they existed, and no PostgreSQL mirror is that
old. Like SQLite's, no function opens a transaction of its own (`ensure` aside).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
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
    "busiest",
    "by_mall",
    "columns",
    "count_in_mall",
    "drop_mall",
    "drop_rows",
    "ensure",
    "ids_in_mall",
    "malls_of",
    "malls_referenced",
    "orphans",
    "refresh_mall_id",
    "remove",
    "table",
]

#: The smallest id: where a walk in id order starts.
FIRST = -(1 << 63)


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
    feed's triggers on it when it is made here (not during a bulk load, whose feed is one
    `backfill` entry per type; not in a schema without the feed)."""
    made = ensure_link(conn, schema, table(type_name), *columns(type_name))
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


def _keyset(
    conn: psycopg.Connection[Any],
    query: sql.Composed,
    params: tuple[int, ...],
    start: int,
    batch: int,
) -> Iterator[list[int]]:
    """Batches of the ids `query` selects after the last one yielded (`query` takes `params`,
    then the last id, then the batch size), each read whole before it is yielded."""
    last = start
    while True:
        ids = [int(r[0]) for r in conn.execute(query, (*params, last, batch))]
        if ids:
            yield ids
        if len(ids) < batch:
            return
        last = ids[-1]


def orphans(
    conn: psycopg.Connection[Any], schema: str, type_name: str, batch: int = 100
) -> Iterator[list[int]]:
    """Batches of rows of `type_name` that no mall lists (each batch read whole first)."""
    if not exists(conn, schema, type_name) or not exists(conn, schema, table(type_name)):
        return
    t, _, row = _names(schema, type_name)
    query = sql.SQL(
        "SELECT id FROM {rows} t WHERE NOT EXISTS (SELECT 1 FROM {t} m WHERE m.{row} = t.id)"
        " AND id > %s ORDER BY id LIMIT %s"
    ).format(rows=sql.Identifier(schema, type_name), t=t, row=row)
    yield from _keyset(conn, query, (), FIRST, batch)


def ids_in_mall(
    conn: psycopg.Connection[Any],
    schema: str,
    type_name: str,
    mall_id: int,
    after: int | None = None,
) -> Iterator[int]:
    """Ids the table holds for `mall_id`, in order (those greater than `after`), streamed."""
    if not exists(conn, schema, table(type_name)):
        return
    t, mall, row = _names(schema, type_name)
    query = sql.SQL(
        "SELECT {row} FROM {t} WHERE {mall} = %s AND {row} > %s ORDER BY {row} LIMIT %s"
    ).format(t=t, mall=mall, row=row)
    for chunk in _keyset(conn, query, (mall_id,), FIRST if after is None else after, 1000):
        yield from chunk


def malls_of(conn: psycopg.Connection[Any], schema: str, type_name: str, rid: int) -> list[int]:
    """The malls the table holds for one row, ascending."""
    if not exists(conn, schema, table(type_name)):
        return []
    t, mall, row = _names(schema, type_name)
    query = sql.SQL("SELECT {} FROM {} WHERE {} = %s ORDER BY 1").format(mall, t, row)
    return [int(r[0]) for r in conn.execute(query, (rid,))]


def by_mall(
    conn: psycopg.Connection[Any], schema: str, type_name: str, ids: Iterable[int]
) -> dict[int, list[int]]:
    """`ids` grouped by each mall that lists them (a row in several malls is in each), malls
    ascending, each mall's rows in the order of `ids` (`TypeTable.by_mall`)."""
    wanted = list(ids)
    if not wanted or not exists(conn, schema, table(type_name)):
        return {}
    t, mall, row = _names(schema, type_name)
    out: dict[int, list[int]] = {}
    for m, rid in conn.execute(
        sql.SQL(
            "SELECT m.{mall}, u.id FROM unnest(%s::bigint[]) WITH ORDINALITY AS u(id, n)"
            " JOIN {t} m ON m.{row} = u.id ORDER BY m.{mall}, u.n"
        ).format(t=t, mall=mall, row=row),
        (wanted,),
    ):
        out.setdefault(int(m), []).append(int(rid))
    return out


def count_in_mall(conn: psycopg.Connection[Any], schema: str, type_name: str, mall_id: int) -> int:
    """How many rows the table holds for `mall_id` (0 without the table)."""
    if not exists(conn, schema, table(type_name)):
        return 0
    t, mall, _ = _names(schema, type_name)
    found = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(t, mall), (mall_id,)
    ).fetchone()
    return int(found[0]) if found else 0


def busiest(conn: psycopg.Connection[Any], schema: str, type_name: str, n: int) -> list[int]:
    """The `n` malls whose rows of `type_name` changed last (the newest `updated_at` of a row
    they list first): where a new row of the type most likely is."""
    if (
        n <= 0
        or not exists(conn, schema, table(type_name))
        or not _has_column(conn, schema, type_name, "updated_at")
    ):
        return []
    t, mall, row = _names(schema, type_name)
    query = sql.SQL(
        "SELECT m.{mall} FROM {t} m JOIN {rows} r ON r.id = m.{row} GROUP BY m.{mall}"
        " ORDER BY max(r.updated_at) DESC NULLS LAST, m.{mall} LIMIT %s"
    ).format(t=t, mall=mall, row=row, rows=sql.Identifier(schema, type_name))
    return [int(r[0]) for r in conn.execute(query, (n,))]

"""Sideloads in the PostgreSQL mirror: owners at the listed stamp, their to-one linkage, and
included rows nothing references any more, pruned.

Issue #49: the counterpart of `sync.store.sideloads` (read that module's docstring first): the
functions `same_stamp`, `write_to_one` and `prune_unreferenced`, with the same arguments
(`sync.store.pg.schema.Schema` for the schema) and answers. Which rows reference a sideload is
that module's `references`, written once for both stores; this module renders it as
PostgreSQL's statements. What concerns the link tables alone is the links part's
(`sync.store.pg.links`: `owned`, and `write_to_one`, which SQLite keeps here). Held to its
contract by the tests of `tests/unit/store/pg/test_sideloads.py`. Not wired into `Mirror` yet.

**Tables** are the mirror's, by SQLite's names and columns: the content tables of the page
write (`sync.store.pg.pagewrite`), whose `updated_at` is the normalised stamp as text (so a
stamp compares equal as in SQLite), and the link tables of the links part (`<owner>_<rel>`,
owner and related columns `NOT NULL`, as SQLite's `link_sql` makes them). A table that does not
exist is passed over, asked of the catalogue (`Schema.columns`).

**Prune.** SQLite deletes `WHERE id NOT IN (<references> UNION ...)`. PostgreSQL cannot plan
`NOT IN` as an anti-join: past `work_mem` it probes the whole list once per row. Here the same
set is an anti-join, `NOT EXISTS`, with what `NOT IN` does beside it made explicit: a NULL among
the references (a to-one column left empty) makes `NOT IN` unknown for every row, so nothing is
deleted, and the delete here is guarded by that too (`NOT EXISTS (... IS NULL)`, over the
references whose column may hold NULL). The link rows whose owner is gone follow, as in SQLite.

**Transactions.** As in SQLite: `prune_unreferenced` runs each type's deletes in
`conn.transaction()` (a savepoint inside a caller's transaction), `write_to_one` its update
likewise, and `same_stamp` only reads.

**A difference.** `write_to_one` is the links part's single statement: an owner listed twice
ends with its last value, as in SQLite, but counts as one row changed when that value differs
from the one held, and as none when it does not (SQLite updates it once per listing and counts
each update that changed it). A reconcile page lists each owner once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store.pg import links as pg_links
from sync.store.pg.schema import Schema
from sync.store.sideloads import Reference, references

#: Owners asked per query of `same_stamp` (SQLite's chunk).
CHUNK = 500


def same_stamp(
    conn: psycopg.Connection[Any],
    schema: Schema,
    rtype: ResourceType,
    owners: Sequence[int],
    stamps: dict[int, Any],
) -> set[int]:
    """Those of `owners` whose mirrored `updated_at` equals the listed one (`stamps`)."""
    cols = schema.columns(rtype.table)
    if not owners or not cols:
        return set()
    col = sql.Identifier("updated_at") if "updated_at" in cols else sql.SQL("NULL")
    query = sql.SQL("SELECT id, {} FROM {} WHERE id = ANY(%s::bigint[])").format(
        col, sql.Identifier(schema.name, rtype.table)
    )
    cur = conn.cursor(row_factory=tuple_row)
    same: set[int] = set()
    for start in range(0, len(owners), CHUNK):
        for rid, stored in cur.execute(query, (list(owners[start : start + CHUNK]),)):
            if stored == stamps.get(rid):
                same.add(rid)
    return same


def write_to_one(
    conn: psycopg.Connection[Any],
    schema: Schema,
    rtype: ResourceType,
    column: str,
    values: Sequence[tuple[int, Any]],
    stamps: dict[int, Any],
) -> int:
    """`column` of the listed owners whose mirrored `updated_at` equals the listed one (the
    linkage changed under an unchanged stamp); returns the rows changed. The statement is the
    links part's (`sync.store.pg.links.write_to_one`, one `UPDATE ... FROM unnest`), given
    here under SQLite's name and arguments."""
    return pg_links.write_to_one(conn, schema.name, rtype, column, values, stamps)


def _select(schema: Schema, ref: Reference) -> sql.Composed:
    """`ref` as PostgreSQL's SELECT of one column named `id`."""
    head = sql.SQL("SELECT {} AS id FROM {}").format(
        sql.Identifier(ref.column), sql.Identifier(schema.name, ref.table)
    )
    if ref.owner is None:
        return head
    return sql.SQL("{} WHERE {} IN ({})").format(
        head, sql.Identifier(ref.owner), _union(schema, ref.of)
    )


def _union(schema: Schema, refs: Sequence[Reference]) -> sql.Composed:
    """The ids `refs` select, all of them (duplicates are no matter to `IN` and `EXISTS`)."""
    return sql.SQL(" UNION ALL ").join(_select(schema, r) for r in refs)


def _nullable(conn: psycopg.Connection[Any], schema: Schema, ref: Reference) -> bool:
    """Whether the column `ref` selects may hold NULL (a to-one column; a link table's are
    `NOT NULL`)."""
    row = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT a.attnotnull FROM pg_catalog.pg_attribute a"
            " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s AND NOT a.attisdropped",
            (schema.name, ref.table, ref.column),
        )
        .fetchone()
    )
    return row is None or not row[0]


def _unreferenced(
    conn: psycopg.Connection[Any], schema: Schema, target: str, refs: Sequence[Reference]
) -> sql.Composed:
    """The delete of the rows of `target` that none of `refs` selects, as SQLite's `id NOT IN
    (...)` decides it (see the module's docstring); all of them when nothing can reference
    one."""
    table = sql.Identifier(schema.name, target)
    if not refs:
        return sql.SQL("DELETE FROM {}").format(table)
    where = [
        sql.SQL("NOT EXISTS (SELECT 1 FROM ({}) AS r WHERE r.id = d.id)").format(
            _union(schema, refs)
        )
    ]
    # A NULL can only come from a column that may hold one, selected without an owner filter
    # or under one (the filter's own NULLs only ever narrow what is selected).
    nullable = [r for r in refs if _nullable(conn, schema, r)]
    if nullable:
        where.append(
            sql.SQL("NOT EXISTS (SELECT 1 FROM ({}) AS n WHERE n.id IS NULL)").format(
                _union(schema, nullable)
            )
        )
    return sql.SQL("DELETE FROM {} AS d WHERE {}").format(table, sql.SQL(" AND ").join(where))


def prune_unreferenced(
    conn: psycopg.Connection[Any], schema: Schema, types: Sequence[str]
) -> dict[str, int]:
    """Delete rows of `types` that no link table or to-one column references, then the links
    those rows owned. In `types` order: an image pruned first frees its tags."""
    removed: dict[str, int] = {}
    for target in types:
        if not schema.columns(target):
            continue
        delete = _unreferenced(conn, schema, target, references(schema, target, types))
        table = sql.Identifier(schema.name, target)
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(delete)
            n = cur.rowcount
            for link, owner in pg_links.owned(conn, schema.name, catalogue.TYPES[target]):
                # SQLite's `owner NOT IN (SELECT id FROM target)` as an anti-join: ids are
                # never NULL, and a NULL owner (none in a `NOT NULL` column) goes only when
                # the table is empty, as `NOT IN` decides.
                cur.execute(
                    sql.SQL(
                        "DELETE FROM {l} AS l WHERE NOT EXISTS (SELECT 1 FROM {t} AS x"
                        " WHERE x.id = l.{o}) AND (l.{o} IS NOT NULL OR NOT EXISTS"
                        " (SELECT 1 FROM {t}))"
                    ).format(l=sql.Identifier(schema.name, link), t=table, o=sql.Identifier(owner))
                )
        if n:
            removed[target] = n
    return removed

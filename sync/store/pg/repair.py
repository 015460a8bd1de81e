"""Compare-and-repair in PostgreSQL: the verify's compare (`sync.store.repair`, read it first),
as one statement per batch.

The batch is bound as the page write binds it (`PageWriter.statement`: one array per column,
converted as the columns take them) and joined with its table; each column is compared with
`IS DISTINCT FROM`, exactly what the page write's guard compares, so a repair is reported for
what the write then changes and nothing else. What a compare makes a repair is decided once, for
both stores, by `sync.store.repair.Judging`: a missing row; under an equal stamp (or on rows
without one), each differing column and to-many link list; never a copy whose stamp differs
(lag, or older) or one its tombstone refuses; never a mall-scoped row's `mall_id`.
"""

from __future__ import annotations

from psycopg import sql

from sync.pipeline.batches import Staged
from sync.store.deletions import Deletions
from sync.store.pg import linkwrite
from sync.store.pg.columns import UPDATED_AT
from sync.store.pg.pagewrite import PageWriter
from sync.store.repair import Found, HeldLists, Judging, Repair, stored_links


def differences(writer: PageWriter, deletions: Deletions, b: Staged) -> list[Repair]:
    """The rows of `b` whose stored copy differs under the same stamp, or is missing (its
    table made first: `PageWriter.ensure_page`)."""
    bound = writer.statement(b)
    if bound is None:
        return []
    _, arrays = bound
    have = writer.columns(b.type)
    cols = tuple(c for c in b.columns if c in have)
    stamp = UPDATED_AT in cols
    t, s = sql.Identifier("t"), sql.Identifier("s")
    names = ("id", *cols)
    unnest = sql.SQL(", ").join(
        sql.SQL("unnest(%s) AS {}").format(sql.Identifier(c)) for c in names
    )
    checks = [
        sql.SQL("{}.id IS NULL").format(t),
        sql.SQL("{}.{}").format(t, sql.Identifier(UPDATED_AT)) if stamp else sql.SQL("NULL"),
        sql.SQL("{}.{}").format(s, sql.Identifier(UPDATED_AT)) if stamp else sql.SQL("NULL"),
        *(
            sql.SQL("{}.{} IS DISTINCT FROM {}.{}").format(
                t, sql.Identifier(c), s, sql.Identifier(c)
            )
            for c in cols
        ),
    ]
    query = sql.SQL(
        "SELECT {s}.id, {checks} FROM (SELECT {unnest}) AS {s}"
        " LEFT JOIN {table} AS {t} ON {t}.id = {s}.id ORDER BY {s}.id"
    ).format(
        s=s,
        t=t,
        checks=sql.SQL(", ").join(checks),
        unnest=unnest,
        table=sql.Identifier(writer.schema, b.type),
    )
    judging = Judging(
        deletions, b, stored_links(b, lambda t: bool(writer.columns(t)), _held(writer))
    )
    rows = writer.conn.execute(query, arrays)
    return judging.repairs(
        (rid, served_at, Found(missing=True) if missing else Found.row(held_at, cols, diff))
        for rid, missing, held_at, served_at, *diff in rows
    )


def _held(writer: PageWriter) -> HeldLists:
    """PostgreSQL's read of held link lists (`sync.store.repair.stored_links`)."""

    def read(table: str, columns: tuple[str, str], owners: list[int]) -> dict[int, list[int]]:
        held = linkwrite.held_lists(writer.conn, writer.schema, table, columns, owners)
        return {owner: list(related) for owner, related in held.items()}

    return read

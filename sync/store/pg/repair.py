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
from sync.store.pg import links
from sync.store.pg.columns import UPDATED_AT
from sync.store.pg.pagewrite import PageWriter
from sync.store.repair import Found, Judging, Repair


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
    judging = Judging(deletions, b, _stored_links(writer, b))
    out: list[Repair] = []
    for rid, missing, held_at, served_at, *differs in writer.conn.execute(query, arrays):
        if rid in judging.refused:
            continue  # the write refuses it too: deleted upstream after this copy was made
        found = Found(missing, held_at, tuple(c for c, d in zip(cols, differs, strict=True) if d))
        repair = judging.repair(rid, served_at, found)
        if repair is not None:
            out.append(repair)
    return out


def _stored_links(writer: PageWriter, b: Staged) -> dict[str, dict[int, list[int]]]:
    """The batch owners' stored to-many links, per relationship, in position order."""
    out: dict[str, dict[int, list[int]]] = {}
    for rel in b.rtype.relationships:
        pairs = b.links.get(rel.name)
        if rel.to_one or not pairs:
            continue
        table = rel.link_table(b.type)
        per = out.setdefault(rel.name, {})
        if not writer.columns(table):
            continue
        owners = sorted({o for o, _ in pairs})
        held = links.held_lists(writer.conn, writer.schema, table, rel.link_columns(b.type), owners)
        per.update({owner: list(related) for owner, related in held.items()})
    return out

"""Compare-and-repair in PostgreSQL: the verify's compare (`sync.store.repair`, read it first),
as one statement per batch.

The batch is bound as the page write binds it (`PageWriter.statement`: one array per column,
converted as the columns take them) and joined with its table; each column is compared with
`IS DISTINCT FROM`, exactly what the page write's guard compares, so a repair is reported for
what the write then changes and nothing else. The rules are SQLite's: a missing row is a
repair (`missing`); under an equal stamp (or on rows without one), each differing column and
each differing to-many link list is named; a copy whose stamp differs is lag or older, never a
repair; a copy its tombstone refuses is left out, as the write leaves it out; a mall-scoped
row's `mall_id` is its lowest mall, no difference.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from sync.pipeline.batches import Staged
from sync.store.deletions import Deletions, Judge, tombstone_verdict
from sync.store.memberships import MEMBER_TYPES
from sync.store.pg import links
from sync.store.pg.columns import UPDATED_AT
from sync.store.pg.pagewrite import PageWriter
from sync.store.repair import Repair


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
    served_stamps = _served_stamps(b)
    dead = deletions.held(b.type, b.ids)
    judge = Judge.now(deletions.window)
    stored = _stored_links(writer, b)
    served_links = {name: dict(pairs) for name, pairs in b.links.items() if name in stored}
    out: list[Repair] = []
    for rid, missing, held_at, served_at, *differs in writer.conn.execute(query, arrays):
        if rid in dead and (
            tombstone_verdict(dead[rid], served_stamps.get(rid), judge) != "lifted"
        ):
            continue  # the write refuses it too: deleted upstream after this copy was made
        if missing:
            out.append(Repair(b.type, rid, ("missing",)))
            continue
        if stamp and held_at is not None and held_at != served_at:
            continue  # newer: ordinary lag, not a repair; older: the write refuses it
        what = [
            c
            for c, differ in zip(cols, differs, strict=True)
            if differ and not (c == "mall_id" and b.type in MEMBER_TYPES)
        ]
        for name, served in served_links.items():
            if rid in served and list(dict.fromkeys(served[rid])) != stored[name].get(rid, []):
                what.append(f"links.{name}")
        if what:
            out.append(Repair(b.type, rid, tuple(what)))
    return out


def _served_stamps(b: Staged) -> dict[int, Any]:
    """The batch's `updated_at` per id (the last copy of an id listed twice)."""
    if UPDATED_AT not in b.columns:
        return {}
    pos = b.columns.index(UPDATED_AT) + 1
    return {row[0]: row[pos] for row in b.rows}


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

"""Link tables in PostgreSQL: one per to-many relationship, an owner's linkage in order.

Issue #49, the PostgreSQL side of `sync.store.links` (read it first): the same functions and
results, taking the schema's name where SQLite's take its `Schema`, held to them by contract
tests (`tests/unit/store/pg/test_links.py`); the page write writes a batch's links by `write`.

**Tables.** `<owner>_<rel>` with SQLite's columns (`bigint NOT NULL` ids, `position bigint`),
key (owner, related) and reverse index `idx_<table>_<related>`, made with the table. No foreign
key: SQLite declares them but never enforces them (a link may name a row not held yet).

**Only what differs is written.** An owner's list is compared with the one held, as in SQLite
(members and order; an id listed twice counts once, where it first stands); an unchanged list
gets no statement. Where SQLite deletes a changed owner's rows and inserts its list again, here
only the difference is written (a row rewritten leaves a dead tuple): pairs no longer named
deleted, new ones inserted, moved ones given their `position` (`ON CONFLICT ... DO UPDATE ...
WHERE` it differs); positions are SQLite's (an id's index as served: a repeat leaves a gap).
Keys in (owner, related) order, after the upsert has locked the owners' rows in id order.

**Transactions**, as in SQLite: `replace`, `replace_mall_links`, `set_to_one` and
`write_to_one` (SQLite's is in `sync.store.sideloads`) run in `conn.transaction()` (a savepoint
inside a caller's), the others as the connection is. Tables are asked of the catalogue first:
a statement failing on a missing one would abort the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.batches import Staged
from sync.store.links import Links as Links
from sync.store.links import link_tables as link_tables
from sync.store.pg import changes
from sync.store.pg.bookkeeping import READABLE, create_schema, exists
from sync.store.pg.changes import FEED, LinkNotes

#: The stamp the page write's guard compares.
UPDATED_AT = "updated_at"


def relations(conn: psycopg.Connection[Any], schema: str) -> dict[str, set[str]]:
    """The columns of every table and view of `schema`, by name, in one query (what
    `sync.store.pg.schema.Schema.columns` reads table by table)."""
    out: dict[str, set[str]] = {}
    for name, column in conn.execute(
        "SELECT c.relname, a.attname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE n.nspname = %s AND c.relkind = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped",
        (schema, list(READABLE)),
    ):
        out.setdefault(name, set()).add(column)
    return out


def owned(conn: psycopg.Connection[Any], schema: str, rtype: ResourceType) -> list[tuple[str, str]]:
    """(link table, owner column) of each existing link table whose rows `rtype` owns."""
    have = relations(conn, schema)
    return [(lt.table, lt.owner_column) for lt in rtype.link_tables if lt.table in have]


def pointing_at(
    conn: psycopg.Connection[Any], schema: str, target: str, have: dict[str, set[str]] | None = None
) -> list[tuple[str, str, str, str]]:
    """(link table, owner type, owner column, related column) of each existing link table whose
    rows name `target` (`have`: `relations`, when already read)."""
    have = relations(conn, schema) if have is None else have
    out = []
    for name, rtype in catalogue.TYPES.items():
        for rel in rtype.relationships:
            if rel.target == target and not rel.to_one:
                table = rel.link_table(name)
                if table in have:
                    out.append((table, name, *rel.link_columns(name)))
    return out


def owners_of(
    conn: psycopg.Connection[Any], schema: str, target: str, ids: Sequence[int]
) -> dict[str, set[int]]:
    """The rows whose linkage names one of `ids` of type `target`, per owner type: through
    their link tables and their to-one columns."""
    out: dict[str, set[int]] = {}
    if not ids:
        return out
    wanted = list(ids)
    have = relations(conn, schema)
    for table, owner_type, owner, other in pointing_at(conn, schema, target, have):
        rows = conn.execute(
            sql.SQL("SELECT DISTINCT {} FROM {} WHERE {} = ANY(%s)").format(
                sql.Identifier(owner), sql.Identifier(schema, table), sql.Identifier(other)
            ),
            (wanted,),
        )
        out.setdefault(owner_type, set()).update(int(r[0]) for r in rows)
    for name, rtype in catalogue.TYPES.items():
        for rel in rtype.relationships:
            if rel.to_one and rel.target == target and rel.column in have.get(name, ()):
                rows = conn.execute(
                    sql.SQL("SELECT id FROM {} WHERE {} = ANY(%s)").format(
                        sql.Identifier(schema, name), sql.Identifier(rel.column)
                    ),
                    (wanted,),
                )
                out.setdefault(name, set()).update(int(r[0]) for r in rows)
    return {name: owners for name, owners in out.items() if owners}


def unlink(
    conn: psycopg.Connection[Any], schema: str, owner_type: str, target: str, ids: Sequence[int]
) -> int:
    """Remove `owner_type`'s links naming `ids` of `target` (its link tables), a feed entry
    for each owner changed; the rows gone."""
    removed = 0
    if not ids:
        return removed
    notes = feed_notes(conn, schema)
    for table, owner, owner_col, other in pointing_at(conn, schema, target):
        if owner != owner_type:
            continue
        owners = conn.execute(
            sql.SQL("DELETE FROM {} WHERE {} = ANY(%s) RETURNING {}").format(
                sql.Identifier(schema, table), sql.Identifier(other), sql.Identifier(owner_col)
            ),
            (list(ids),),
        ).fetchall()
        removed += len(owners)
        if notes is not None and owners:
            notes.note(owner, (int(r[0]) for r in owners))
    return removed


def ensure_link(
    conn: psycopg.Connection[Any], schema: str, table: str, owner_col: str, related_col: str
) -> bool:
    """A link table and its reverse index, when missing (`Schema.ensure_link`): whether made."""
    if exists(conn, schema, table):
        return False
    owner, other = sql.Identifier(owner_col), sql.Identifier(related_col)
    with conn.transaction():
        create_schema(conn, schema)
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ({} bigint NOT NULL, {} bigint NOT NULL,"
                " position bigint, PRIMARY KEY ({}, {}))"
            ).format(sql.Identifier(schema, table), owner, other, owner, other),
            prepare=False,
        )
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(f"idx_{table}_{related_col}"), sql.Identifier(schema, table), other
            ),
            prepare=False,
        )
    return True


def ensure(
    conn: psycopg.Connection[Any], schema: str, rtype: ResourceType, names: Sequence[str] | Links
) -> None:
    """The link tables of the to-many relationships of `rtype` named in `names`."""
    for lt in rtype.link_tables:
        if lt.relationship.name in names:
            ensure_link(conn, schema, lt.table, lt.owner_column, lt.related_column)


def none_held(conn: psycopg.Connection[Any], schema: str, rtype: ResourceType) -> bool:
    """Whether no link table of `rtype` holds a row (each is absent or empty)."""
    return not any(
        conn.execute(
            sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(schema, table))
        ).fetchone()
        for table, _ in owned(conn, schema, rtype)
    )


def guarded(
    conn: psycopg.Connection[Any],
    schema: str,
    b: Staged,
    new: set[int] | frozenset[int] = frozenset(),
) -> Links:
    """The batch's links, less those of rows the upsert's guard will refuse: an owner stored
    newer than its copy, or whose copy has no `updated_at` (SQLite's `link_guard`: an older copy
    changes neither a row nor its links). Read before the upsert, in its transaction, locking
    the owners' rows in id order as the upsert would; table and batch must have `updated_at`.
    Owners in `new` (known rowless) are not asked."""
    if not b.links or not b.ids:
        return b.links
    pos = b.columns.index(UPDATED_AT) + 1
    incoming = {row[0]: row[pos] for row in b.rows}
    owners = sorted({rid for pairs in b.links.values() for rid, _ in pairs} - new)
    if not owners:
        return b.links
    older = {
        int(rid)
        for rid, refused in conn.execute(
            sql.SQL(
                'SELECT t.id, t.{at} IS NOT NULL AND (c.at IS NULL OR c.at COLLATE "C" < t.{at})'
                " FROM {} t JOIN unnest(%s::bigint[], %s::text[]) AS c(id, at) ON t.id = c.id"
                " ORDER BY t.id FOR NO KEY UPDATE OF t"
            ).format(sql.Identifier(schema, b.type), at=sql.Identifier(UPDATED_AT)),
            (owners, [incoming.get(rid) for rid in owners]),
        )
        if refused
    }
    if not older:
        return b.links
    return {n: [(o, r) for o, r in pairs if o not in older] for n, pairs in b.links.items()}


def _once(ids: Sequence[int]) -> dict[int, int]:
    """`ids` as the link table holds them: each once, at the position where it first stands."""
    out: dict[int, int] = {}
    for pos, rid in enumerate(ids):
        out.setdefault(rid, pos)
    return out


def held_lists(
    conn: psycopg.Connection[Any], schema: str, table: str, cols: tuple[str, str], owners: list[int]
) -> dict[int, dict[int, int | None]]:
    """The link lists the mirror holds for `owners`: related id -> position, in order (SQLite's
    order: a NULL position first, ties by related id)."""
    out: dict[int, dict[int, int | None]] = {}
    for rid, rel_id, pos in conn.execute(
        sql.SQL(
            "SELECT {o}, {r}, position FROM {t} WHERE {o} = ANY(%s)"
            " ORDER BY {o}, position NULLS FIRST, {r}"
        ).format(
            o=sql.Identifier(cols[0]), r=sql.Identifier(cols[1]), t=sql.Identifier(schema, table)
        ),
        (owners,),
    ):
        out.setdefault(int(rid), {})[int(rel_id)] = pos
    return out


def _apply(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: tuple[str, str],
    gone: list[tuple[int, int]],
    put: list[tuple[int, int, int]],
    *,
    fresh: bool = False,
) -> None:
    """Delete the pairs `gone`; insert `put` (owner, related, position), moving a held pair
    where its position differs, or (`fresh`: owners known rowless) by a plain INSERT: no
    speculative insertion, a probe and a WAL record less a row (a pair held fails the page)."""
    t, o, r = sql.Identifier(schema, table), *(sql.Identifier(c) for c in columns)
    if gone:
        gone.sort()
        conn.execute(
            sql.SQL(
                "DELETE FROM {t} AS l USING unnest(%s::bigint[], %s::bigint[]) AS d(o, r)"
                " WHERE l.{o} = d.o AND l.{r} = d.r"
            ).format(t=t, o=o, r=r),
            ([g[0] for g in gone], [g[1] for g in gone]),
        )
    if put:
        conn.execute(
            sql.SQL(
                "INSERT INTO {t} AS l ({o}, {r}, position) SELECT u.o, u.r, u.p FROM"
                " unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS u(o, r, p) ORDER BY u.o, u.r"
                + ("" if fresh else _MOVE)
            ).format(t=t, o=o, r=r),
            ([p[0] for p in put], [p[1] for p in put], [p[2] for p in put]),
        )


_MOVE = " ON CONFLICT ({o}, {r}) DO UPDATE SET position = EXCLUDED.position WHERE l.position IS DISTINCT FROM EXCLUDED.position"


def _diff(
    wanted: dict[int, int], held: dict[int, int | None], rid: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The pairs to delete, and those to insert or move, turning `held` into `wanted`."""
    return [(rid, rel) for rel in held if rel not in wanted], [
        (rid, rel, p) for rel, p in wanted.items() if rel not in held or held[rel] != p
    ]


def write(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    links: Links,
    new: set[int] | frozenset[int] = frozenset(),
    notes: LinkNotes | None = None,
) -> None:
    """The link rows of the owners in `links` become what `links` says. Owners in `new` had no
    row before this write, hence no links: theirs are inserted without a look or an arbiter.
    The others' are compared first and written only where they differ (members or order), and
    get a `links` entry in the feed through `notes` (None: none). An owner listed twice gets its
    last list."""
    for rel in rtype.relationships:
        pairs = links.get(rel.name)
        if not pairs:
            continue
        table = rel.link_table(rtype.name)
        owner, other = rel.link_columns(rtype.name)
        lists = dict(pairs)
        known = sorted(rid for rid in lists if rid not in new)
        held = held_lists(conn, schema, table, (owner, other), known) if known else {}
        gone: list[tuple[int, int]] = []
        put: list[tuple[int, int, int]] = []
        fresh: list[tuple[int, int, int]] = []
        changed: list[int] = []
        for rid in sorted(lists):
            wanted, have = _once(lists[rid]), held.get(rid, {})
            if rid in new or list(have) != list(wanted):
                changed += [] if rid in new else [rid]
                less, more = _diff(wanted, have, rid)
                gone += less
                (fresh if rid in new else put).extend(more)
        _apply(conn, schema, table, (owner, other), gone, [])
        if notes is not None and changed:
            notes.note(rtype.name, changed)
        _apply(conn, schema, table, (owner, other), [], put)
        _apply(conn, schema, table, (owner, other), [], fresh, fresh=True)


def replace(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    rel: catalogue.Relationship,
    owner: int,
    targets: Sequence[int],
) -> None:
    """One owner's links of one to-many relationship become `targets`, in order."""
    ensure(conn, schema, rtype, [rel.name])
    with conn.transaction():
        write(
            conn,
            schema,
            rtype,
            {rel.name: [(owner, list(targets))]},
            notes=feed_notes(conn, schema),
        )


def replace_mall_links(
    conn: psycopg.Connection[Any], schema: str, type_name: str, mall_id: int, ids: Sequence[int]
) -> int:
    """`malls_<type_name>` of one mall becomes `ids`, in order; returns how many. Written only
    where it differs; the rows that joined or left the mall get a `links` entry (and the mall
    too, where the table is one of its relationships: `malls_contacts`)."""
    table, row = f"malls_{type_name}", f"{type_name}_id"
    ensure_link(conn, schema, table, "malls_id", row)
    # Each once, numbered as listed without the repeats (SQLite's `dict.fromkeys`).
    wanted = {rid: pos for pos, rid in enumerate(dict.fromkeys(ids))}
    with conn.transaction():
        held = held_lists(conn, schema, table, ("malls_id", row), [mall_id]).get(mall_id, {})
        if list(held) == list(wanted):
            return len(ids)
        gone, put = _diff(wanted, held, mall_id)
        _apply(conn, schema, table, ("malls_id", row), gone, put)
        notes = feed_notes(conn, schema)
        if notes is not None:
            notes.note(type_name, set(held) ^ set(wanted))
            if any(r.name == type_name for r in catalogue.TYPES["malls"].relationships):
                notes.note("malls", [mall_id])
    return len(ids)


def mall_link_count(
    conn: psycopg.Connection[Any], schema: str, type_name: str, mall_id: int
) -> int:
    """How many rows `malls_<type_name>` gives one mall (0 where no such table is held)."""
    table = f"malls_{type_name}"
    if not exists(conn, schema, table):
        return 0
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE malls_id = %s").format(
            sql.Identifier(schema, table)
        ),
        (mall_id,),
    ).fetchone()
    return int(row[0]) if row else 0


def settle_mall_links(
    conn: psycopg.Connection[Any],
    schema: str,
    type_name: str,
    mall_id: int,
    asked: Sequence[int],
    listed: Sequence[int],
) -> int:
    """Of the rows `asked` of one mall's route by `filter[id]`, those `listed` are in
    `malls_<type_name>` of that mall and the others not; the mall's other rows stay. Returns
    how many memberships changed (the list kept ascending, as a walk of the route writes it)."""
    table, row = f"malls_{type_name}", f"{type_name}_id"
    ensure_link(conn, schema, table, "malls_id", row)
    held = held_lists(conn, schema, table, ("malls_id", row), [mall_id]).get(mall_id, {})
    wanted = sorted((set(held) - set(asked)) | set(listed))
    changed = len(set(held) ^ set(wanted))
    if changed:
        replace_mall_links(conn, schema, type_name, mall_id, wanted)
    return changed


def feed_notes(
    conn: psycopg.Connection[Any], schema: str, *, bulk: bool = False
) -> LinkNotes | None:
    """Where link changes are entered in the change feed: nowhere during a bulk load (its feed
    is one `backfill` entry per type) nor in a schema without the feed."""
    return None if bulk or not exists(conn, schema, FEED) else LinkNotes(conn, schema)


def set_to_one(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    column: str,
    rid: int,
    target: int | None,
    *,
    bulk: bool = False,
) -> None:
    """One owner's to-one column, from its relationship's own route. A missing table or column
    is made (`bigint`: it holds an id, as the page write declares it), and the feed's triggers
    made anew to watch it, as SQLite's schema does (not during a bulk load)."""
    table = sql.Identifier(schema, rtype.table)
    with conn.transaction():
        if column not in relations(conn, schema).get(rtype.table, ()):
            conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY)").format(table),
                prepare=False,
            )
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigint").format(
                    table, sql.Identifier(column)
                ),
                prepare=False,
            )
            if not bulk and exists(conn, schema, FEED):
                have = relations(conn, schema)[rtype.table]
                changes.create_triggers(conn, schema, rtype.table, have)
        conn.execute(
            sql.SQL("UPDATE {} SET {c} = %s WHERE id = %s AND {c} IS DISTINCT FROM %s").format(
                table, c=sql.Identifier(column)
            ),
            (target, rid, target),
        )


def write_to_one(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    column: str,
    values: Sequence[tuple[int, Any]],
    stamps: dict[int, Any],
) -> int:
    """`column` of the listed owners whose mirrored `updated_at` equals the listed one (the
    linkage changed under an unchanged stamp); returns the rows changed. An owner listed twice
    gets its last value."""
    cols = relations(conn, schema).get(rtype.table, set())
    if column not in cols or UPDATED_AT not in cols or not values:
        return 0
    last = dict(values)
    ids = sorted(last)
    with conn.transaction():
        cur = conn.execute(
            sql.SQL(
                "UPDATE {t} AS t SET {c} = u.v FROM unnest(%s::bigint[], %s::bigint[], %s::text[])"
                " AS u(id, v, at) WHERE t.id = u.id AND t.{at} IS NOT DISTINCT FROM u.at"
                " AND t.{c} IS DISTINCT FROM u.v"
            ).format(
                t=sql.Identifier(schema, rtype.table),
                c=sql.Identifier(column),
                at=sql.Identifier(UPDATED_AT),
            ),
            (ids, [last[i] for i in ids], [stamps.get(i) for i in ids]),
        )
        return cur.rowcount


def mall_deals(conn: psycopg.Connection[Any], schema: str, mall_id: int) -> list[int]:
    """The deals `malls_deals` (a table the routes fill, or a view) gives a mall; none where it
    is neither."""
    if "malls_deals" not in relations(conn, schema):
        return []
    return [
        int(r[0])
        for r in conn.execute(
            sql.SQL("SELECT DISTINCT deals_id FROM {} WHERE malls_id = %s ORDER BY 1").format(
                sql.Identifier(schema, "malls_deals")
            ),
            (mall_id,),
        )
    ]

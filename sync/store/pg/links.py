"""Link tables in PostgreSQL: one per to-many relationship, an owner's linkage in order.

Issue #49, the PostgreSQL side of `sync.store.links` (read it first): the same functions and
results, taking the schema's name where SQLite's take its `Schema`, held to them by contract
tests (`tests/unit/store/pg/test_links.py`); the page write writes a batch's links by `write`
(`sync.store.pg.linkwrite`, read there how).

**Tables.** `<owner>_<rel>` with SQLite's columns (`bigint NOT NULL` ids, `position bigint`),
key (owner, related) and reverse index `idx_<table>_<related>`, made with the table (by a bulk
load at its end: `reverse_indexes`). No foreign key: SQLite declares them but never enforces
them (a link may name a row not held yet).

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
from sync.store.links import Links as Links
from sync.store.links import link_tables as link_tables
from sync.store.pg import changes
from sync.store.pg.bookkeeping import READABLE, create_schema, exists
from sync.store.pg.changes import FEED, LinkNotes
from sync.store.pg.linkwrite import apply, diff, held_lists, write

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
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    owner_col: str,
    related_col: str,
    *,
    index: bool = True,
) -> bool:
    """A link table and (`index`) its reverse index, when missing (`Schema.ensure_link`):
    whether made. A bulk load makes the table alone: `reverse_indexes` makes the index at its
    end (one sort instead of an index entry per insert: a link insert costs ~30 % less)."""
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
        if index:
            _reverse_index(conn, schema, table, related_col)
    return True


def _reverse_index(conn: psycopg.Connection[Any], schema: str, table: str, related: str) -> None:
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
            sql.Identifier(f"idx_{table}_{related}"),
            sql.Identifier(schema, table),
            sql.Identifier(related),
        ),
        prepare=False,
    )


def reverse_indexes(conn: psycopg.Connection[Any], schema: str) -> int:
    """The reverse index of every link and membership table of `schema` that lacks it (a bulk
    load made them without, `ensure_link`; a writer killed before its end phase left them so):
    how many were made. One catalogue read when none is missing."""
    tables: dict[str, set[str]] = {}
    indexes: set[str] = set()
    for name, kind, column in conn.execute(
        "SELECT c.relname, c.relkind::text, a.attname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'i')",
        (schema,),
    ):
        if kind == "i":
            indexes.add(name)
        else:
            tables.setdefault(name, set()).add(column)
    wanted = {
        (lt.table, lt.related_column) for t in catalogue.TYPES.values() for lt in t.link_tables
    }
    wanted |= {(f"malls_{name}", f"{name}_id") for name in catalogue.TYPES}
    made = 0
    for table, related in sorted(wanted):
        # PostgreSQL cuts a name at 63 bytes, as it did when the index was made.
        if related in tables.get(table, ()) and f"idx_{table}_{related}"[:63] not in indexes:
            _reverse_index(conn, schema, table, related)
            made += 1
    return made


def ensure(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    names: Sequence[str] | Links,
    *,
    index: bool = True,
) -> None:
    """The link tables of the to-many relationships of `rtype` named in `names` (`index`:
    with their reverse indexes, `ensure_link`)."""
    for lt in rtype.link_tables:
        if lt.relationship.name in names:
            ensure_link(conn, schema, lt.table, lt.owner_column, lt.related_column, index=index)


def none_held(conn: psycopg.Connection[Any], schema: str, rtype: ResourceType) -> bool:
    """Whether no link table of `rtype` holds a row (each is absent or empty)."""
    return not any(
        conn.execute(
            sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(schema, table))
        ).fetchone()
        for table, _ in owned(conn, schema, rtype)
    )


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
        gone, put = diff(wanted, held, mall_id)
        apply(conn, schema, table, ("malls_id", row), gone, put)
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

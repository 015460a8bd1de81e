"""Link tables: one per to-many relationship, the rows of an owner's linkage in order.

A to-many relationship of `<owner>` named `<rel>` is the table `<owner>_<rel>` (owner column,
related column, `position`), declared by `sync.model.catalogue`; a to-one relationship is a
column of the owner's own table. An owner's links are replaced as a whole whenever a copy of
the owner is written with that relationship's linkage (its members and their order are what
the copy says), and go with the owner when it is deleted. Routes that list one relationship or
one mall's related rows (`sync.jobs.relroutes`, `sync.jobs.mallroutes`) replace just that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store.schema import Schema
from sync.store.transaction import write_transaction

#: A page's linkage of one type: relationship name -> (owner id, related ids in order).
Links = dict[str, list[tuple[int, list[int]]]]


def link_tables() -> list[tuple[str, str, str, str, str]]:
    """(table, owner column, related column, owner, target) of every link table."""
    return [
        (rel.link_table(name), *rel.link_columns(name), name, rel.target)
        for name, rtype in catalogue.TYPES.items()
        for rel in rtype.relationships
        if not rel.to_one
    ]


def owned(schema: Schema, rtype: ResourceType) -> list[tuple[str, str]]:
    """(link table, owner column) of each existing link table whose rows `rtype` owns."""
    out = []
    for rel in rtype.relationships:
        table = rel.link_table(rtype.name)
        if not rel.to_one and schema.columns(table):
            out.append((table, rel.link_columns(rtype.name)[0]))
    return out


def pointing_at(schema: Schema, target: str) -> list[tuple[str, str]]:
    """(link table, related column) of each existing link table whose rows name `target`."""
    out = []
    for name, rtype in catalogue.TYPES.items():
        for rel in rtype.relationships:
            if rel.target == target and not rel.to_one:
                table = rel.link_table(name)
                if schema.columns(table):
                    out.append((table, rel.link_columns(name)[1]))
    return out


def ensure(schema: Schema, rtype: ResourceType, names: Sequence[str] | Links) -> None:
    """The link tables of the to-many relationships of `rtype` named in `names`.

    Schema changes come before the write's transaction: sqlite-utils commits on its own."""
    for rel in rtype.relationships:
        if not rel.to_one and rel.name in names:
            schema.ensure_link(
                rel.link_table(rtype.name), *rel.link_columns(rtype.name), rtype.name, rel.target
            )


def none_held(conn: sqlite3.Connection, schema: Schema, rtype: ResourceType) -> bool:
    """Whether no link table of `rtype` holds a row (each is absent or empty): a link table
    left over from a content table dropped by hand must not be taken for empty."""
    return not any(
        conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone()
        for table, _ in owned(schema, rtype)
    )


def write(
    conn: sqlite3.Connection,
    rtype: ResourceType,
    links: Links,
    new: set[int] | frozenset[int] = frozenset(),
) -> None:
    """Replace the link rows of the owners in `links`; owners in `new` had no row before this
    write, hence no links, and their DELETE is skipped (`sync.store.pagewrite`)."""
    for rel in rtype.relationships:
        pairs = links.get(rel.name)
        if not pairs:
            continue
        table = rel.link_table(rtype.name)
        owner, other = rel.link_columns(rtype.name)
        owners = [rid for rid, _ in pairs if rid not in new] if new else [r for r, _ in pairs]
        if owners:
            conn.execute(
                f"DELETE FROM [{table}] WHERE [{owner}] IN ({','.join('?' * len(owners))})",
                owners,
            )
        conn.executemany(
            f"INSERT OR IGNORE INTO [{table}] ([{owner}], [{other}], position) VALUES (?, ?, ?)",
            [(rid, rel_id, pos) for rid, related in pairs for pos, rel_id in enumerate(related)],
        )


def replace(
    conn: sqlite3.Connection,
    schema: Schema,
    rtype: ResourceType,
    rel: catalogue.Relationship,
    owner: int,
    targets: Sequence[int],
) -> None:
    """One owner's links of one to-many relationship become `targets`, in order."""
    ensure(schema, rtype, [rel.name])
    with write_transaction(conn):
        write(conn, rtype, {rel.name: [(owner, list(targets))]})


def replace_mall_links(
    conn: sqlite3.Connection, schema: Schema, type_name: str, mall_id: int, ids: Sequence[int]
) -> int:
    """`malls_<type_name>` of one mall becomes `ids`, in order; returns how many."""
    table = f"malls_{type_name}"
    schema.ensure_link(table, "malls_id", f"{type_name}_id", "malls", type_name)
    with write_transaction(conn):
        conn.execute(f"DELETE FROM [{table}] WHERE malls_id = ?", (mall_id,))
        conn.executemany(
            f"INSERT OR IGNORE INTO [{table}] (malls_id, [{type_name}_id], position) "
            "VALUES (?, ?, ?)",
            [(mall_id, rid, pos) for pos, rid in enumerate(ids)],
        )
    return len(ids)


def set_to_one(
    conn: sqlite3.Connection,
    schema: Schema,
    rtype: ResourceType,
    column: str,
    rid: int,
    target: int | None,
) -> None:
    """One owner's to-one column, from its relationship's own route."""
    if column not in schema.columns(rtype.table):
        schema.ensure_content(rtype.table, {"id": rid, column: target or 0})
    with write_transaction(conn):
        conn.execute(f"UPDATE [{rtype.table}] SET [{column}] = ? WHERE id = ?", (target, rid))


def mall_deals(conn: sqlite3.Connection, mall_id: int) -> list[int]:
    """The deals `malls_deals` (the derived view, or the table the routes fill) gives a mall."""
    return sorted(
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT deals_id FROM malls_deals WHERE malls_id = ?", (mall_id,)
        )
    )

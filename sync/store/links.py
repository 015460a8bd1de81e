"""Link tables: one per to-many relationship, the rows of an owner's linkage in order.

A to-many relationship of `<owner>` named `<rel>` is the table `<owner>_<rel>` (owner column,
related column, `position`), declared by `sync.model.catalogue`; a to-one relationship is a
column of the owner's own table. An owner's links are replaced as a whole whenever a copy of
the owner is written with that relationship's linkage (its members and their order are what
the copy says), and go with the owner when it is deleted. Routes that list one relationship or
one mall's related rows (`sync.jobs.malls.relroutes`, `sync.jobs.malls.mallroutes`) replace just that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store.changes import LinkNotes
from sync.store.schema import Schema
from sync.store.transaction import write_transaction

#: A page's linkage of one type: relationship name -> (owner id, related ids in order).
Links = dict[str, list[tuple[int, list[int]]]]


def link_tables() -> list[tuple[str, str, str, str, str]]:
    """(table, owner column, related column, owner, target) of every link table."""
    return [
        (lt.table, lt.owner_column, lt.related_column, lt.owner, lt.target)
        for rtype in catalogue.TYPES.values()
        for lt in rtype.link_tables
    ]


def owned(schema: Schema, rtype: ResourceType) -> list[tuple[str, str]]:
    """(link table, owner column) of each existing link table whose rows `rtype` owns."""
    return [(lt.table, lt.owner_column) for lt in rtype.link_tables if schema.columns(lt.table)]


def pointing_at(schema: Schema, target: str) -> list[tuple[str, str, str, str]]:
    """(link table, owner type, owner column, related column) of each existing link table whose
    rows name `target`."""
    out = []
    for name, rtype in catalogue.TYPES.items():
        for rel in rtype.relationships:
            if rel.target == target and not rel.to_one:
                table = rel.link_table(name)
                if schema.columns(table):
                    out.append((table, name, *rel.link_columns(name)))
    return out


def owners_of(
    conn: sqlite3.Connection, schema: Schema, target: str, ids: Sequence[int]
) -> dict[str, set[int]]:
    """The rows whose linkage names one of `ids` of type `target`, per owner type: through
    their link tables and their to-one columns."""
    out: dict[str, set[int]] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for table, owner_type, owner, other in pointing_at(schema, target):
            rows = conn.execute(
                f"SELECT DISTINCT [{owner}] FROM [{table}] WHERE [{other}] IN ({marks})", chunk
            )
            out.setdefault(owner_type, set()).update(int(r[0]) for r in rows)
        for name, rtype in catalogue.TYPES.items():
            for rel in rtype.relationships:
                if rel.to_one and rel.target == target and rel.column in schema.columns(name):
                    rows = conn.execute(
                        f"SELECT id FROM [{name}] WHERE [{rel.column}] IN ({marks})", chunk
                    )
                    out.setdefault(name, set()).update(int(r[0]) for r in rows)
    return {name: owners for name, owners in out.items() if owners}


def unlink(
    conn: sqlite3.Connection, schema: Schema, owner_type: str, target: str, ids: Sequence[int]
) -> int:
    """Remove `owner_type`'s links naming `ids` of `target` (its link tables only), with a
    `links` entry in the change feed for each owner whose list changed; the link rows gone."""
    removed = 0
    notes = feed_notes(conn, schema)
    for table, owner, owner_col, other in pointing_at(schema, target):
        if owner != owner_type:
            continue
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            owners = conn.execute(
                f"DELETE FROM [{table}] WHERE [{other}] IN ({marks}) RETURNING [{owner_col}]",
                chunk,
            ).fetchall()
            removed += len(owners)
            if notes is not None and owners:
                notes.note(owner, (int(r[0]) for r in owners))
    return removed


def ensure(schema: Schema, rtype: ResourceType, names: Sequence[str] | Links) -> None:
    """The link tables of the to-many relationships of `rtype` named in `names`.

    Schema changes come before the write's transaction: sqlite-utils commits on its own."""
    for lt in rtype.link_tables:
        if lt.relationship.name in names:
            schema.ensure_link(lt.table, lt.owner_column, lt.related_column, lt.owner, lt.target)


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
    notes: LinkNotes | None = None,
) -> None:
    """The link rows of the owners in `links` become what `links` says. Owners in `new` had no
    row before this write, hence no links: theirs are inserted without a look. The others' are
    compared first and rewritten only where they differ (members or order), and those owners
    get a `links` entry in the change feed through `notes` (None during a bulk load, whose feed
    is one entry per type)."""
    for rel in rtype.relationships:
        pairs = links.get(rel.name)
        if not pairs:
            continue
        table = rel.link_table(rtype.name)
        owner, other = rel.link_columns(rtype.name)
        # A first backfill's owners are all new: written without a look (nothing built to
        # compare), duplicates left to INSERT OR IGNORE.
        known = [(rid, related) for rid, related in pairs if rid not in new] if new else pairs
        written = pairs
        if known:
            held = _held(conn, table, owner, other, [rid for rid, _ in known])
            changed = [(r, rel_ids) for r, rel_ids in known if held.get(r, []) != _once(rel_ids)]
            written = [(rid, rel_ids) for rid, rel_ids in pairs if rid in new] + changed
            if changed:
                ids = [rid for rid, _ in changed]
                conn.execute(
                    f"DELETE FROM [{table}] WHERE [{owner}] IN ({','.join('?' * len(ids))})", ids
                )
                if notes is not None:
                    notes.note(rtype.name, ids)
        conn.executemany(
            f"INSERT OR IGNORE INTO [{table}] ([{owner}], [{other}], position) VALUES (?, ?, ?)",
            [(rid, rel_id, pos) for rid, related in written for pos, rel_id in enumerate(related)],
        )


def _once(ids: list[int]) -> list[int]:
    """`ids` as the link table holds them: each once, where it first stands."""
    return list(dict.fromkeys(ids))


def _held(
    conn: sqlite3.Connection, table: str, owner: str, other: str, owners: list[int]
) -> dict[int, list[int]]:
    """The link lists the mirror holds for `owners`, each in its order."""
    out: dict[int, list[int]] = {}
    for start in range(0, len(owners), 500):
        chunk = owners[start : start + 500]
        for rid, rel_id in conn.execute(
            f"SELECT [{owner}], [{other}] FROM [{table}] WHERE [{owner}] IN "
            f"({','.join('?' * len(chunk))}) ORDER BY [{owner}], position",
            chunk,
        ):
            out.setdefault(int(rid), []).append(int(rel_id))
    return out


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
        write(conn, rtype, {rel.name: [(owner, list(targets))]}, notes=feed_notes(conn, schema))


def replace_mall_links(
    conn: sqlite3.Connection, schema: Schema, type_name: str, mall_id: int, ids: Sequence[int]
) -> int:
    """`malls_<type_name>` of one mall becomes `ids`, in order; returns how many. Rewritten
    only when it differs; the rows that joined or left the mall get a `links` entry (and the
    mall too, where the table is one of its relationships: `malls_contacts`)."""
    table = f"malls_{type_name}"
    schema.ensure_link(table, "malls_id", f"{type_name}_id", "malls", type_name)
    wanted = list(dict.fromkeys(ids))
    with write_transaction(conn):
        held = _held(conn, table, "malls_id", f"{type_name}_id", [mall_id]).get(mall_id, [])
        if held == wanted:
            return len(ids)
        conn.execute(f"DELETE FROM [{table}] WHERE malls_id = ?", (mall_id,))
        conn.executemany(
            f"INSERT OR IGNORE INTO [{table}] (malls_id, [{type_name}_id], position) "
            "VALUES (?, ?, ?)",
            [(mall_id, rid, pos) for pos, rid in enumerate(wanted)],
        )
        notes = feed_notes(conn, schema)
        if notes is not None:
            notes.note(type_name, set(held) ^ set(wanted))
            if any(r.name == type_name for r in catalogue.TYPES["malls"].relationships):
                notes.note("malls", [mall_id])
    return len(ids)


def mall_link_count(conn: sqlite3.Connection, schema: Schema, type_name: str, mall_id: int) -> int:
    """How many rows `malls_<type_name>` gives one mall (0 where no such table is held)."""
    table = f"malls_{type_name}"
    if not schema.columns(table):
        return 0
    row = conn.execute(f"SELECT COUNT(*) FROM [{table}] WHERE malls_id = ?", (mall_id,)).fetchone()
    return int(row[0])


def settle_mall_links(
    conn: sqlite3.Connection,
    schema: Schema,
    type_name: str,
    mall_id: int,
    asked: Sequence[int],
    listed: Sequence[int],
) -> int:
    """Of the rows `asked` of one mall's route by `filter[id]`, those `listed` are in
    `malls_<type_name>` of that mall and the others not; the mall's other rows stay. Returns
    how many memberships changed (the list kept ascending, as a walk of the route writes it)."""
    table = f"malls_{type_name}"
    schema.ensure_link(table, "malls_id", f"{type_name}_id", "malls", type_name)
    held = _held(conn, table, "malls_id", f"{type_name}_id", [mall_id]).get(mall_id, [])
    wanted = sorted((set(held) - set(asked)) | set(listed))
    changed = len(set(held) ^ set(wanted))
    if changed:
        replace_mall_links(conn, schema, type_name, mall_id, wanted)
    return changed


def feed_notes(conn: sqlite3.Connection, schema: Schema) -> LinkNotes | None:
    """Where link changes are entered in the change feed: nowhere during a bulk load (its feed
    is one `backfill` entry per type, `sync.store.indexes`)."""
    return None if schema.defer_indexes else LinkNotes(conn)


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

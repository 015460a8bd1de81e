"""The link rows of a batch's owners written into PostgreSQL: only the pairs that differ.

Issue #49: the write half of `sync.store.pg.links` (read its docstring first), apart so the
page write's hot path stays one short module. `write` turns the link rows of the owners a batch
names into their lists as served; `held_lists` reads what the mirror holds. The same results as
SQLite's `sync.store.links.write` (the contract tests of `tests/unit/store/pg/test_links.py`
run one body over both stores), by one of three ways, chosen per owner:

- **New owners** (`new`: no row before this write, hence no links): a plain `INSERT`, with no
  look and no arbiter (a probe and a WAL record less a pair).
- **Known owners, changes entered in the feed** (`notes`: the daemon): one read for the batch
  (`_held`: which owners the guard let through, and their lists in each link table), the
  lists compared, and only the owners whose lists differ written and noted.
- **Known owners, no feed entry wanted** (`notes` None: a bulk load, whose feed is one
  `backfill` entry per type): the compare is the server's, with nothing read. In a bulk load's
  pipelined group a read makes the client wait until the server has run every statement sent
  before it (`sync.store.pg.bulk`), which stalls the event loop: a page of included rows seen on
  an earlier page (images, tags) cost one such wait per link table. Two statements instead: a
  `DELETE` of the held pairs the lists no longer name, and an `INSERT` of the pairs not held at
  their position (`NOT EXISTS`), moving a held pair whose position differs (`ON CONFLICT ...
  DO UPDATE ... WHERE`): an unchanged pair is neither locked nor rewritten, so an unchanged
  page leaves no dead tuple, as the read path does.

**The guard.** A row's links are part of the row: a copy the page write's guard refuses (older
than the one held, or without a stamp over a held one: `sync.store.pg.pagewrite`) changes
neither its row nor its links. `write` runs after the batch's upsert, in its transaction, and
asks the one fact that rule leaves behind: an owner's links are written only where the mirror
now holds the copy's own stamp (`stamps`; a refused copy leaves the held, other, stamp). So no
read before the upsert, and none at all on the unread path, where the stamps join the
statement.

Arrays of ids go as text literals (`{1,2,3}`, cast by the statement), built at C speed by
`str.join`: psycopg's list dumper walks a list in Python (1.7 s of a 200k backfill's 20 s under
the profiler). Statements are rendered once per table and kind (`_statement`), where composing
them anew cost as much again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from sync.model.catalogue import Relationship, ResourceType
from sync.store.links import Links
from sync.store.pg.changes import LinkNotes

#: (schema, link table, owner column, related column, kind, owners' table) -> the statement.
_STATEMENTS: dict[tuple[str, str, str, str, str, str], bytes] = {}

#: (schema, owners' table, its link tables and columns, stamped) -> `_held`'s read.
_READS: dict[tuple[str, str, tuple[tuple[str, str, str], ...], bool], bytes] = {}

#: The owners (`x(o, at)`: id, the copy's stamp) whose copy the mirror holds after the batch's
#: upsert: it holds the copy's own stamp (see the module docstring).
_HELD = " JOIN {s} AS s ON s.id = x.o AND s.updated_at IS NOT DISTINCT FROM x.at"

_TEMPLATES = {
    # The pairs `gone` (owner, related).
    "delete": "DELETE FROM {t} AS l USING unnest(%s::bigint[], %s::bigint[]) AS d(o, r)"
    " WHERE l.{o} = d.o AND l.{r} = d.r",
    # Owners known rowless: a plain insert (a pair held fails the page).
    "insert": "INSERT INTO {t} ({o}, {r}, position) SELECT u.o, u.r, u.p FROM"
    " unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS u(o, r, p) ORDER BY u.o, u.r",
    # Pairs read as missing or moved.
    "put": "INSERT INTO {t} AS l ({o}, {r}, position) SELECT u.o, u.r, u.p FROM"
    " unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS u(o, r, p) ORDER BY u.o, u.r"
    " ON CONFLICT ({o}, {r}) DO UPDATE SET position = EXCLUDED.position"
    " WHERE l.position IS DISTINCT FROM EXCLUDED.position",
    # Unread: the owners (the fourth and fifth arrays: id, copy's stamp) held at their copy's
    # stamp whose held list differs from the one served (the related ids in order: SQLite's
    # compare, a NULL position first); their held pairs the list no longer names deleted, its
    # pairs not held at their position inserted or moved. One statement, so the compare sees
    # the lists as held before either change.
    "merge": "WITH w(o, r, p) AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[])),"
    " c(o) AS (SELECT x.o FROM unnest(%s::bigint[], %s::text[]) AS x(o, at){held} WHERE"
    " ARRAY(SELECT h.{r} FROM {t} h WHERE h.{o} = x.o ORDER BY h.position NULLS FIRST, h.{r})"
    " IS DISTINCT FROM ARRAY(SELECT w.r FROM w WHERE w.o = x.o ORDER BY w.p)),"
    " gone AS (DELETE FROM {t} AS l USING c WHERE l.{o} = c.o AND NOT EXISTS"
    " (SELECT 1 FROM w WHERE w.o = l.{o} AND w.r = l.{r}))"
    " INSERT INTO {t} AS l ({o}, {r}, position) SELECT w.o, w.r, w.p FROM w JOIN c ON c.o = w.o"
    " WHERE NOT EXISTS (SELECT 1 FROM {t} h WHERE h.{o} = w.o AND h.{r} = w.r"
    " AND h.position = w.p) ORDER BY w.o, w.r ON CONFLICT ({o}, {r}) DO UPDATE"
    " SET position = EXCLUDED.position WHERE l.position IS DISTINCT FROM EXCLUDED.position",
}


def _statement(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    cols: tuple[str, str],
    kind: str,
    owners: str = "",
) -> bytes:
    """The `kind` statement (`_TEMPLATES`) of one link table, rendered once; `owners`: the
    owners' table whose stamps `merge` and `accepted` compare ("": every owner is taken)."""
    key = (schema, table, *cols, kind, owners)
    found = _STATEMENTS.get(key)
    if found is None:
        held = sql.SQL(_HELD).format(s=sql.Identifier(schema, owners)) if owners else sql.SQL("")
        found = _STATEMENTS[key] = (
            sql.SQL(_TEMPLATES[kind])
            .format(
                t=sql.Identifier(schema, table),
                o=sql.Identifier(cols[0]),
                r=sql.Identifier(cols[1]),
                held=held,
            )
            .as_bytes(conn)
        )
    return found


def int_array(values: Iterable[int]) -> str:
    """`values` as the text of a `bigint[]` (`{1,2,3}`): bound as text, cast by the statement."""
    return "{" + ",".join(map(str, values)) + "}"


def _once(ids: Sequence[int]) -> dict[int, int]:
    """`ids` as the link table holds them: each once, at the position where it first stands."""
    if len(set(ids)) == len(ids):  # no repeat (nearly always): at C speed
        return dict(zip(ids, range(len(ids)), strict=True))
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


def diff(
    wanted: dict[int, int], held: dict[int, int | None], rid: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The pairs to delete, and those to insert or move, turning `held` into `wanted`."""
    return [(rid, rel) for rel in held if rel not in wanted], [
        (rid, rel, p) for rel, p in wanted.items() if rel not in held or held[rel] != p
    ]


def apply(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: tuple[str, str],
    gone: list[tuple[int, int]],
    put: list[tuple[int, int, int]],
) -> None:
    """Delete the pairs `gone`; insert `put` (owner, related, position), moving a held pair
    where its position differs."""
    if gone:
        gone.sort()
        conn.execute(
            _statement(conn, schema, table, columns, "delete"),
            (int_array(g[0] for g in gone), int_array(g[1] for g in gone)),
        )
    if put:
        conn.execute(
            _statement(conn, schema, table, columns, "put"),
            tuple(int_array(col) for col in zip(*put, strict=True)),
        )


def write(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    links: Links,
    new: set[int] | frozenset[int] = frozenset(),
    notes: LinkNotes | None = None,
    stamps: Mapping[int, Any] | None = None,
) -> None:
    """The link rows of the owners in `links` become what `links` says. Owners in `new` had no
    row before this write, hence no links: theirs are inserted without a look or an arbiter.
    The others' are compared and written only where they differ (members or order): read
    first and given a `links` entry in the feed through `notes`, or (`notes` None) compared by
    the server, unread (see the module docstring). With `stamps` (each owner's copy's
    `updated_at`, when its batch and table have the column; called after the batch's upsert,
    in its transaction), only the owners the mirror holds at their copy's stamp: the guard
    let the copy through. An owner listed twice gets its last list."""
    rels = [(rel, dict(pairs)) for rel in rtype.relationships if (pairs := links.get(rel.name))]
    known_all = sorted({rid for _, lists in rels for rid in lists if rid not in new})
    # The compared path reads, in one statement, which owners the guard let through and what
    # each of their link tables holds for them.
    let: set[int] = set()
    held: dict[str, dict[int, dict[int, int | None]]] = {}
    if notes is not None and known_all:
        let, held = _held(conn, schema, rtype, [rel for rel, _ in rels], known_all, stamps)
    for rel, lists in rels:
        table = rel.link_table(rtype.name)
        cols = rel.link_columns(rtype.name)
        fresh: tuple[list[int], list[int], list[int]] = ([], [], [])
        known: list[int] = []
        for rid in sorted(lists):
            if rid in new:
                once = _once(lists[rid])
                fresh[0].extend([rid] * len(once))
                fresh[1].extend(once)
                fresh[2].extend(once.values())
            else:
                known.append(rid)
        if known and notes is not None:
            owners = [rid for rid in known if rid in let]
            if owners:
                _compare(
                    conn,
                    schema,
                    (table, cols),
                    (owners, held.get(table, {})),
                    lists,
                    (rtype.name, notes),
                )
        elif known:
            _merge(conn, schema, (table, rtype.table), cols, known, (lists, stamps))
        if fresh[0]:
            conn.execute(
                _statement(conn, schema, table, cols, "insert"), tuple(map(int_array, fresh))
            )


def _merge(
    conn: psycopg.Connection[Any],
    schema: str,
    tables: tuple[str, str],
    cols: tuple[str, str],
    owners: list[int],
    served: tuple[dict[int, list[int]], Mapping[int, Any] | None],
) -> None:
    """The lists of known `owners` written unread, in one statement: the server compares
    each owner's held list with its list as served (those held at their copy's stamp, with
    `stamps`), and for those that differ deletes the pairs no longer named and inserts or
    moves those not held at their position. `tables`: the link table, the owners'."""
    lists, stamps = served
    triples = [(rid, rel_id, p) for rid in owners for rel_id, p in _once(lists[rid]).items()]
    conn.execute(
        _statement(conn, schema, tables[0], cols, "merge", tables[1] if stamps else ""),
        (
            int_array(t[0] for t in triples),
            int_array(t[1] for t in triples),
            int_array(t[2] for t in triples),
            int_array(owners),
            [stamps.get(rid) for rid in owners] if stamps else [None] * len(owners),
        ),
    )


def _held(
    conn: psycopg.Connection[Any],
    schema: str,
    rtype: ResourceType,
    rels: list[Relationship],
    owners: list[int],
    stamps: Mapping[int, Any] | None,
) -> tuple[set[int], dict[str, dict[int, dict[int, int | None]]]]:
    """Of `owners` (of `rtype`), those the mirror holds at their copy's stamp (all, without
    `stamps`), and per link table of `rels` their lists as `held_lists` reads them: one read."""
    tables = tuple((rel.link_table(rtype.name), *rel.link_columns(rtype.name)) for rel in rels)
    key = (schema, rtype.table, tables, bool(stamps))
    statement = _READS.get(key)
    if statement is None:
        among: sql.Composable = sql.SQL(
            "SELECT x.o FROM unnest(%s::bigint[], %s::text[]) AS x(o, at)"
        )
        if stamps:
            among = sql.SQL("{}{}").format(
                among, sql.SQL(_HELD).format(s=sql.Identifier(schema, rtype.table))
            )
        parts = [sql.SQL("SELECT -1 AS k, a.o, NULL::bigint, NULL::bigint FROM a")] + [
            sql.SQL(
                "SELECT {k}, l.{o}, l.{r}, l.position FROM {t} AS l JOIN a ON a.o = l.{o}"
            ).format(
                k=sql.Literal(k),
                t=sql.Identifier(schema, t),
                o=sql.Identifier(o),
                r=sql.Identifier(r),
            )
            for k, (t, o, r) in enumerate(tables)
        ]
        statement = _READS[key] = (
            sql.SQL("WITH a(o) AS ({}) {} ORDER BY 1, 2, 4 NULLS FIRST, 3")
            .format(among, sql.SQL(" UNION ALL ").join(parts))
            .as_bytes(conn)
        )
    let: set[int] = set()
    held: dict[str, dict[int, dict[int, int | None]]] = {t[0]: {} for t in tables}
    ats = [stamps.get(rid) for rid in owners] if stamps else [None] * len(owners)
    for k, rid, rel_id, pos in conn.execute(statement, (int_array(owners), ats)):
        if k < 0:
            let.add(int(rid))
        else:
            held[tables[k][0]].setdefault(int(rid), {})[int(rel_id)] = pos
    return let, held


def _compare(
    conn: psycopg.Connection[Any],
    schema: str,
    link: tuple[str, tuple[str, str]],
    read: tuple[list[int], dict[int, dict[int, int | None]]],
    lists: dict[int, list[int]],
    noted: tuple[str, LinkNotes],
) -> None:
    """The lists of known `owners` compared with those `held` (read by `_held`), and written
    where they differ (members or order); the owners changed noted in the feed before their
    pairs are inserted, as SQLite. `link`: the link table and its columns."""
    (table, cols), (owners, held) = link, read
    gone: list[tuple[int, int]] = []
    put: list[tuple[int, int, int]] = []
    changed: list[int] = []
    for rid in owners:
        wanted, have = _once(lists[rid]), held.get(rid, {})
        if list(have) != list(wanted):
            changed.append(rid)
            less, more = diff(wanted, have, rid)
            gone += less
            put += more
    apply(conn, schema, table, cols, gone, [])
    if changed:
        noted[1].note(noted[0], changed)
    apply(conn, schema, table, cols, [], put)

"""Deletions and tombstones in PostgreSQL: `_sync_tombstones`, and rows deleted with their links
and memberships.

Issue #49, the PostgreSQL side of `sync.store.deletions` (read that module's docstring first: the
rules are there, written once in `DeletionRules`, and this module gives them PostgreSQL's
statements only). Not wired into `Mirror` yet: the store around it calls `ensure` once, builds
one `Deletions` per connection, and in each page's transaction calls `drop_tombstoned` on every
batch before `sync.store.pg.pagewrite.PageWriter.upsert` writes it (the staged rows a tombstone
refuses are left out of the batch, `Staged.dropped` counts them, and the tombstones a newer or
vouched copy outlives are lifted in that same transaction).

**The table** has SQLite's columns: `type` and `deleted_at` text `COLLATE "C"` (stamps in the
normalised form, so byte order is time order and `GREATEST` keeps the later moment as SQLite's
`max` does), `id` bigint, `source` text, keyed by (type, id). The window learned is kept in
`_sync_meta` under `tie_window_seconds` (`sync.store.pg.bookkeeping.Meta`).

**Deleting a row** deletes, in this order and in one transaction as SQLite does: the rows, the
link rows they own (`<type>_<rel>`), the link rows naming them in other types' tables (each
owner whose list changed gets a `links` entry in the change feed, `sync.store.pg.changes
.LinkNotes`, unless `bulk`), and their memberships (`malls_<type>`). A mall takes its members'
pairs (their `mall_id` re-pointed to their lowest mall left), its rows of the mall-route tables,
its hours and its current hours. The tables are SQLite's, by the same names and columns; one
that does not exist (or is a view) is passed over. The rows go before their links and
memberships, as in SQLite, so that the membership triggers of the feed see the row gone: the
link and membership tables must not hold immediate foreign keys onto the rows.

**Transactions**: each write runs in `conn.transaction()` (its own, or a savepoint inside the
caller's page transaction). A missing table is looked up in the catalogue rather than caught,
since a failed statement would abort the caller's transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model import catalogue
from sync.store import memberships
from sync.store.deletions import (
    FEED,
    WINDOW_KEY,
    DeletionRules,
    around,
    restored_window,
)
from sync.store.pg.bookkeeping import KEY, SCHEMA, Meta, ensure_bookkeeping, exists, no_nul
from sync.store.pg.changes import LinkNotes
from sync.store.pg.pagewrite import STAMP

TOMBSTONES = "_sync_tombstones"
META = "_sync_meta"
#: The change feed's table (`sync.store.pg.changes`): links entries are noted only where it is.
CHANGES = "_sync_changes"
#: Ids per statement where SQLite deletes in chunks: the same chunks give the change feed the
#: same `links` entries (each chunk's `LinkNotes` starts after the one before).
CHUNK = 500

_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS {t} (type {key} NOT NULL, id bigint NOT NULL,"
    " deleted_at {stamp}, source text, PRIMARY KEY (type, id))"
)


def ensure(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """The schema, the bookkeeping tables (`_sync_meta` among them) and `_sync_tombstones` when
    missing, in a transaction of their own (a savepoint inside the caller's), serialised with
    any other process ensuring the schema by the bookkeeping's lock."""
    with conn.transaction():
        ensure_bookkeeping(conn, schema)
        conn.execute(
            sql.SQL(_TABLE_SQL).format(
                t=sql.Identifier(schema, TOMBSTONES), key=sql.SQL(KEY), stamp=sql.SQL(STAMP)
            ),
            prepare=False,
        )


def tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    """The tables of `schema` (views left out, as SQLite's `memberships` checks `type =
    'table'`)."""
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT c.relname FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (schema,),
        )
        .fetchall()
    )
    return {str(r[0]) for r in rows}


def columns(conn: psycopg.Connection[Any], schema: str, table: str) -> set[str]:
    """The columns of `schema.table` (empty when it does not exist), asked of the catalogue
    each time: another part of the store adds columns."""
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT a.attname FROM pg_catalog.pg_attribute a"
            " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')"
            " AND a.attnum > 0 AND NOT a.attisdropped",
            (schema, table),
        )
        .fetchall()
    )
    return {str(r[0]) for r in rows}


def pointing_at(held: set[str], target: str) -> list[tuple[str, str, str, str]]:
    """(link table, owner type, owner column, related column) of each link table in `held`
    whose rows name `target`, in the catalogue's order (`sync.store.links.pointing_at`)."""
    out = []
    for name, rtype in catalogue.TYPES.items():
        for rel in rtype.relationships:
            if rel.target == target and not rel.to_one:
                table = rel.link_table(name)
                if table in held:
                    out.append((table, name, *rel.link_columns(name)))
    return out


class Deletions(DeletionRules):
    """Deletes rows with their links and memberships, and keeps their tombstones, in one
    PostgreSQL schema over one connection (`DeletionRules`: the rules). `ensure` first."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        super().__init__()
        self.conn = conn
        self.schema = schema
        #: A bulk load is under way (SQLite's `Schema.defer_indexes`): its change feed is one
        #: `backfill` entry per type, so a deletion notes no `links` entries.
        self.bulk = False
        self._t = sql.Identifier(schema, TOMBSTONES)
        if exists(conn, schema, META):
            with contextlib.suppress(TypeError, ValueError):
                value = Meta(conn, schema).get(WINDOW_KEY)
                if value is not None:
                    self.window = restored_window(value)

    def _execute(self, query: sql.Composed, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """`query` run on a cursor of plain tuples, whatever the connection's row factory."""
        return self.conn.cursor(row_factory=tuple_row).execute(query, params)

    def _any_tombstone(self) -> bool:
        found = self._execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(self._t)).fetchone()
        return found is not None

    def _tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        rows = self._execute(
            sql.SQL(
                "SELECT id, deleted_at FROM {} WHERE type = %s AND id = ANY(%s::bigint[])"
            ).format(self._t),
            (type_name, list(ids)),
        )
        return {int(rid): at for rid, at in rows}

    def _lift(self, type_name: str, ids: list[int]) -> None:
        self._execute(
            sql.SQL("DELETE FROM {} WHERE type = %s AND id = ANY(%s::bigint[])").format(self._t),
            (type_name, ids),
        )

    def _keep_window(self, value: str) -> None:
        with self.conn.transaction():
            Meta(self.conn, self.schema).set(WINDOW_KEY, value)

    def _transaction(self) -> contextlib.AbstractContextManager[object]:
        return self.conn.transaction()

    def _stamped(self, type_name: str) -> bool:
        return "updated_at" in columns(self.conn, self.schema, type_name)

    def _tombstone(self, type_name: str, tombs: list[tuple[int, str]]) -> None:
        """In id order (keys taken in one order by every writer); `GREATEST` as SQLite's
        `max`, under collation C as the column is."""
        ordered = sorted(tombs)
        self._execute(
            sql.SQL(
                "INSERT INTO {} AS t (type, id, deleted_at, source) SELECT %s, u.id, u.at, %s"
                " FROM unnest(%s::bigint[], %s::text[]) AS u(id, at) ORDER BY u.id"
                " ON CONFLICT (type, id) DO UPDATE SET deleted_at = GREATEST("
                "coalesce(t.deleted_at, '') COLLATE \"C\", EXCLUDED.deleted_at),"
                " source = EXCLUDED.source"
            ).format(self._t),
            (type_name, FEED, [i for i, _ in ordered], [no_nul(at) for _, at in ordered]),
        )

    def _compared(self, type_name: str, dated: Mapping[int, str]) -> tuple[set[int], set[int]]:
        """One statement over arrays (SQLite's VALUES in chunks of 300), the stamps compared
        byte by byte (collation C), as SQLite compares text."""
        newer: set[int] = set()
        tied: set[int] = set()
        if not dated:
            return newer, tied
        ms = round(self.window * 1000)
        ids, lows, highs = [], [], []
        for rid, at in dated.items():
            lo, hi = around(no_nul(at), ms)
            ids.append(rid)
            lows.append(lo)
            highs.append(hi)
        for rid, after in self._execute(
            sql.SQL(
                'SELECT t.id, t.updated_at > e.hi COLLATE "C" FROM {} t'
                " JOIN unnest(%s::bigint[], %s::text[], %s::text[]) AS e(id, lo, hi)"
                ' ON t.id = e.id WHERE t.updated_at >= e.lo COLLATE "C"'
            ).format(sql.Identifier(self.schema, type_name)),
            (ids, lows, highs),
        ):
            (newer if after else tied).add(int(rid))
        return newer, tied

    def _delete(self, type_name: str, ids: list[int]) -> int:
        held = tables(self.conn, self.schema)
        removed = 0
        if type_name in held:
            for start in range(0, len(ids), CHUNK):
                removed += self._delete_rows(type_name, ids[start : start + CHUNK], held)
        if type_name == "malls":
            # A mall's members lose it (their rows stay until no mall lists them), and its
            # hours and current hours go with it.
            for mall in ids:
                self._drop_mall(mall, held)
        return removed

    def _delete_rows(self, type_name: str, chunk: list[int], held: set[str]) -> int:
        """The rows of `chunk`, the links they own, the links naming them and their
        memberships (`sync.store.deletions.Deletions._delete_rows`)."""
        n = self._execute(
            sql.SQL("DELETE FROM {} WHERE id = ANY(%s::bigint[])").format(self._id(type_name)),
            (chunk,),
        ).rowcount
        rtype = catalogue.TYPES.get(type_name)
        for lt in rtype.link_tables if rtype else ():
            if lt.table in held:
                self._delete_where(lt.table, lt.owner_column, chunk)
        # Other rows' links to the deleted rows go with them (a join row upstream): their
        # owners' link lists changed, which the change feed says.
        notes = None if self.bulk or CHANGES not in held else LinkNotes(self.conn, self.schema)
        for table, owner_type, owner, other in pointing_at(held, type_name):
            owners = self._execute(
                sql.SQL("DELETE FROM {} WHERE {} = ANY(%s::bigint[]) RETURNING {}").format(
                    self._id(table), sql.Identifier(other), sql.Identifier(owner)
                ),
                (chunk,),
            ).fetchall()
            if notes is not None and owners and owner_type in held:
                notes.note(owner_type, (int(r[0]) for r in owners))
        if memberships.table(type_name) in held:
            _, row = memberships.columns(type_name)
            self._delete_where(memberships.table(type_name), row, chunk)
        return int(n)

    def _drop_mall(self, mall_id: int, held: set[str]) -> None:
        """A mall is gone: its pairs in every membership table (each member's `mall_id`
        re-pointed), its rows of the mall-route tables, its hours and current hours
        (`sync.store.memberships.drop_mall`)."""
        for name in memberships.MEMBER_TYPES:
            pairs = memberships.table(name)
            if pairs not in held:
                continue
            mall, row = memberships.columns(name)
            lost = self._execute(
                sql.SQL("DELETE FROM {} WHERE {} = %s RETURNING {}").format(
                    self._id(pairs), sql.Identifier(mall), sql.Identifier(row)
                ),
                (mall_id,),
            ).fetchall()
            if lost and name in held:
                self._refresh_mall_id(name, sorted({int(r[0]) for r in lost}))
        for routed in memberships.ROUTED_TABLES:  # contacts and deals known from the mall routes
            if routed in held:
                self._delete_where(routed, "malls_id", [mall_id])
        for hours in (catalogue.HOURS_TABLE, catalogue.CURRENT_HOURS_TABLE):
            if hours in held:
                self._delete_where(hours, "mall_id", [mall_id])

    def _refresh_mall_id(self, type_name: str, ids: list[int]) -> None:
        """`mall_id` of `ids` becomes the lowest mall the membership table holds for each (NULL
        for none), where the table has the column; a row whose value stays is not rewritten
        (no dead tuple)."""
        if "mall_id" not in columns(self.conn, self.schema, type_name):
            return
        mall, row = memberships.columns(type_name)
        lowest = sql.SQL("(SELECT min(m.{}) FROM {} m WHERE m.{} = t.id)").format(
            sql.Identifier(mall), self._id(memberships.table(type_name)), sql.Identifier(row)
        )
        self._execute(
            sql.SQL(
                "UPDATE {} t SET mall_id = {} WHERE t.id = ANY(%s::bigint[])"
                " AND t.mall_id IS DISTINCT FROM {}"
            ).format(self._id(type_name), lowest, lowest),
            (ids,),
        )

    def _delete_where(self, table: str, column: str, ids: Iterable[int]) -> None:
        self._execute(
            sql.SQL("DELETE FROM {} WHERE {} = ANY(%s::bigint[])").format(
                self._id(table), sql.Identifier(column)
            ),
            (list(ids),),
        )

    def _id(self, table: str) -> sql.Identifier:
        return sql.Identifier(self.schema, table)

"""Deletions and tombstones in PostgreSQL: `_sync_tombstones`, and rows deleted with their links
and memberships.

Issue #49, the PostgreSQL side of `sync.store.deletions` (read that module's docstring first: the
rules are there, written once in `Deletions`, and this module gives them PostgreSQL's
statements only: `PgTombstones`, the `TombstoneBook` a `Deletions` holds). Not wired into
`Mirror` yet: the store around it calls `ensure` once, keeps one `Deletions(PgTombstones(...))`
per connection, and in each page's transaction calls `drop_tombstoned` on every
batch before `sync.store.pg.pagewrite.PageWriter.write_page` writes them: the staged rows a
tombstone refuses leave the batch (their links with them; `Staged.dropped` counts them), and
the tombstones a newer or vouched copy outlives are lifted in that same transaction, so a page
rolled back keeps them.

**The table** has SQLite's columns: `type` and `deleted_at` text `COLLATE "C"` (stamps in the
normalised form, so byte order is time order and `GREATEST` keeps the later moment as SQLite's
`max` does), `id` bigint, `source` text, keyed by (type, id). The window learned is kept in
`_sync_meta` under `tie_window_seconds` (`sync.store.pg.bookkeeping.Meta`). A feed entry's
moment is compared with the row's `updated_at` byte by byte, as SQLite compares text.

**Deleting a row** takes, in SQLite's order, in one transaction and in SQLite's chunks of 500
ids (so the change feed gets the same entries): the rows, the link rows they own, the link rows
naming them in other types' tables (each owner whose list changed gets a `links` entry, unless
`bulk`: `sync.store.pg.links.feed_notes`), and their memberships; a mall takes its pairs (each
member's `mall_id` re-pointed), its rows of the mall-route tables, its hours and current hours
(`sync.store.pg.memberships.drop_mall`). The link and membership tables, and which of them
exist, are `sync.store.pg.links`' and `sync.store.pg.memberships`'. The rows go before their
links and memberships, as in SQLite, so the feed's membership triggers see the row gone (those
tables declare no foreign keys, `sync.store.pg.links`).

**Transactions**: each write runs in `conn.transaction()` (its own, or a savepoint inside the
caller's). Tables are asked of the catalogue first, never learnt from a failed statement, which
would abort the caller's transaction: reading the window where `_sync_meta` does not exist
keeps the least window, as SQLite's does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model import catalogue
from sync.store.deletions import (
    FEED,
    WINDOW_KEY,
    around,
)
from sync.store.pg import links, memberships
from sync.store.pg.bookkeeping import KEY, SCHEMA, Meta, ensure_bookkeeping, exists, no_nul
from sync.store.pg.schema import table_columns

TOMBSTONES = "_sync_tombstones"
META = "_sync_meta"
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
                t=sql.Identifier(schema, TOMBSTONES), key=sql.SQL(KEY), stamp=sql.SQL(KEY)
            ),
            prepare=False,
        )


class PgTombstones:
    """The PostgreSQL mirror's `TombstoneBook` (the rules are `sync.store.deletions.Deletions`,
    which holds one): rows deleted with their links and memberships, tombstones kept, in one
    schema over one connection. `ensure` first."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        #: A bulk load is under way (SQLite's `Schema.defer_indexes`): its change feed is one
        #: `backfill` entry per type, so a deletion notes no `links` entries.
        self.bulk = False
        self._t = sql.Identifier(schema, TOMBSTONES)

    def saved_window(self) -> Any:
        if not exists(self.conn, self.schema, META):
            return None
        return Meta(self.conn, self.schema).get(WINDOW_KEY)

    def _execute(self, query: sql.Composed, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """`query` run on a cursor of plain tuples, whatever the connection's row factory."""
        return self.conn.cursor(row_factory=tuple_row).execute(query, params)

    def any_tombstone(self) -> bool:
        found = self._execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(self._t)).fetchone()
        return found is not None

    def tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        rows = self._execute(
            sql.SQL(
                "SELECT id, deleted_at FROM {} WHERE type = %s AND id = ANY(%s::bigint[])"
            ).format(self._t),
            (type_name, list(ids)),
        )
        return {int(rid): at for rid, at in rows}

    def lift(self, type_name: str, ids: list[int]) -> None:
        self._execute(
            sql.SQL("DELETE FROM {} WHERE type = %s AND id = ANY(%s::bigint[])").format(self._t),
            (type_name, ids),
        )

    def keep_window(self, value: str) -> None:
        with self.conn.transaction():
            Meta(self.conn, self.schema).set(WINDOW_KEY, value)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        return self.conn.transaction()

    def stamped(self, type_name: str) -> bool:
        return "updated_at" in table_columns(self.conn, self.schema, type_name)

    def tombstone(self, type_name: str, tombs: list[tuple[int, str]]) -> None:
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

    def compared(
        self, type_name: str, dated: Mapping[int, str], window: float
    ) -> tuple[set[int], set[int]]:
        """One statement over arrays (SQLite's VALUES in chunks of 300), the stamps compared
        byte by byte (collation C), as SQLite compares text."""
        newer: set[int] = set()
        tied: set[int] = set()
        if not dated:
            return newer, tied
        ms = round(window * 1000)
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

    def delete(self, type_name: str, ids: list[int]) -> int:
        removed = 0
        if table_columns(self.conn, self.schema, type_name):
            for start in range(0, len(ids), CHUNK):
                removed += self._delete_rows(type_name, ids[start : start + CHUNK])
        if type_name == "malls":
            # A mall's members lose it (their rows stay until no mall lists them), and its
            # hours and current hours go with it.
            for mall in ids:
                memberships.drop_mall(self.conn, self.schema, mall)
        return removed

    def _delete_rows(self, type_name: str, chunk: list[int]) -> int:
        """The rows of `chunk`, the links they own, the links naming them and their
        memberships (`sync.store.deletions.Deletions._delete_rows`)."""
        n = self._execute(
            sql.SQL("DELETE FROM {} WHERE id = ANY(%s::bigint[])").format(
                sql.Identifier(self.schema, type_name)
            ),
            (chunk,),
        ).rowcount
        rtype = catalogue.TYPES.get(type_name)
        for table, owner in links.owned(self.conn, self.schema, rtype) if rtype else ():
            self._execute(
                sql.SQL("DELETE FROM {} WHERE {} = ANY(%s::bigint[])").format(
                    sql.Identifier(self.schema, table), sql.Identifier(owner)
                ),
                (chunk,),
            )
        # Other rows' links to the deleted rows go with them (a join row upstream): their
        # owners' link lists changed, which the change feed says.
        notes = links.feed_notes(self.conn, self.schema, bulk=self.bulk)
        for table, owner_type, owner, other in links.pointing_at(self.conn, self.schema, type_name):
            owners = self._execute(
                sql.SQL("DELETE FROM {} WHERE {} = ANY(%s::bigint[]) RETURNING {}").format(
                    sql.Identifier(self.schema, table), sql.Identifier(other), sql.Identifier(owner)
                ),
                (chunk,),
            ).fetchall()
            if notes is not None and owners:
                notes.note(owner_type, (int(r[0]) for r in owners))
        memberships.drop_rows(self.conn, self.schema, type_name, chunk)
        return int(n)

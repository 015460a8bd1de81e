"""The listing diff in PostgreSQL: a full upstream id listing against a mirror table, held in a
temporary table of the session.

Issue #49, the counterpart of `sync.store.listing.Listing` (read it first): the same methods,
arguments, batches and answers, held to them by the contract tests of
`tests/unit/store/pg/test_listing.py`. The backfill's missed-row pass and the reconcile list a
type, `add` each listing page, then ask what is `missing_or_stale` (to fetch), what is
`absent` (candidates for deletion) and, in a mall, `claim_mall`. Not wired into `Mirror` yet.

**The temporary table.** `CREATE TEMP TABLE <name> (id bigint PRIMARY KEY, updated_at text
COLLATE "C") ON COMMIT PRESERVE ROWS` on entry, `DROP TABLE` on exit: a listing outlives the
page transactions written meanwhile, and is the session's own (another connection never sees
it, as SQLite's `temp` schema is the connection's). It is always named `pg_temp.<name>`, so a
mirror table of the same name is never taken for it. Memory stays independent of the data: the
ids live in the server, and every diff walks them by keyset, `BATCH` ids a query, each batch
fetched whole before it is yielded, so the caller may write on the same connection between
batches.

**Stamps** are compared as text, exactly as SQLite compares them: `add` normalises each listed
stamp (`sync.model.stamps.normalize_or_none`, as the page write normalises the stored ones,
`sync.store.pg.pagewrite`), and every comparison is written `COLLATE "C"`: byte order, which is
time order for the normalised form, whatever the database's locale or the column's collation.

**Mall scope.** `counts` and `absent` of a mall's listing see the rows of the mall's memberships
(`malls_<type>`, named and shaped as SQLite's, `sync.store.memberships`); `missing_or_stale`
sees the whole table, as in SQLite. `claim_mall` writes memberships as SQLite's does (`INSERT
... ON CONFLICT DO NOTHING`, position 0) and lowers the rows' `mall_id`. Making the membership
table is the memberships part's (as `TypeTable.listing` makes it in SQLite); without one a
mall's listing has no members, and `claim_mall` claims nothing.

**Transactions.** As the other PostgreSQL parts, no method commits: each runs its statements on
the connection as given (autocommit, or the caller's transaction). A table that does not exist
is asked of the catalogue, never found by a failed statement (that would abort the caller's
transaction): every diff of a missing table answers as SQLite's does. On exit from a block
whose transaction has already failed, the table is not dropped (PostgreSQL would refuse the
statement and hide the error that failed it): the caller's rollback takes a table made in that
transaction with it, and one made before goes with the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model.stamps import normalize_or_none
from sync.store import memberships
from sync.store.pg.bookkeeping import SCHEMA, exists
from sync.store.pg.schema import table_columns

BATCH = 100
#: Where keysets start: below every id.
FIRST = -(1 << 63)


class Listing:
    """Ids (and `updated_at`) listed upstream for one (type, mall); diffed against the table of
    `schema`. `name` is the temporary table's (unique among the session's open listings)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        table: str,
        mall_id: int | None,
        name: str,
        schema: str = SCHEMA,
    ) -> None:
        self.conn = conn
        self.table = table
        self.mall_id = mall_id
        self.name = name
        self.schema = schema
        self._temp = sql.Identifier("pg_temp", name)
        self._target = sql.Identifier(schema, table)

    def __repr__(self) -> str:
        return f"<pg Listing {self.schema}.{self.table} mall={self.mall_id} as {self.name}>"

    def __enter__(self) -> Listing:
        self.conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY,"
                ' updated_at text COLLATE "C") ON COMMIT PRESERVE ROWS'
            ).format(sql.Identifier(self.name)),
            prepare=False,
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.conn.closed or self.conn.info.transaction_status in (
            psycopg.pq.TransactionStatus.INERROR,
            psycopg.pq.TransactionStatus.UNKNOWN,
        ):
            return
        self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._temp), prepare=False)

    def _rows(self, query: sql.Composed, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()

    def _table_exists(self) -> bool:
        return exists(self.conn, self.schema, self.table)

    def _has_column(self, column: str) -> bool:
        return column in table_columns(self.conn, self.schema, self.table)

    def _members(self) -> tuple[sql.Identifier, sql.Identifier, sql.Identifier] | None:
        """The membership table of this listing's type and its (mall, row) columns, when it
        exists."""
        members = memberships.table(self.table)
        if not exists(self.conn, self.schema, members):
            return None
        mall, row = memberships.columns(self.table)
        return sql.Identifier(self.schema, members), sql.Identifier(mall), sql.Identifier(row)

    def add(self, items: Iterable[tuple[int, str | None]]) -> None:
        """Record one listing page's (id, updated_at) pairs (stamps normalised as the mirror's
        are, so they compare as text; an unreadable one counts as none). An id listed again
        takes the later stamp, as SQLite's `INSERT OR REPLACE` does."""
        pairs = {int(i): normalize_or_none(u) for i, u in items}
        if not pairs:
            return
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {} (id, updated_at) SELECT * FROM unnest(%s::bigint[], %s::text[])"
                " ON CONFLICT (id) DO UPDATE SET updated_at = EXCLUDED.updated_at"
            ).format(self._temp),
            (list(pairs), list(pairs.values())),
        )

    def counts(self) -> tuple[int, int]:
        """(ids listed, local rows in scope)."""
        listed = int(self._rows(sql.SQL("SELECT count(*) FROM {}").format(self._temp))[0][0])
        if not self._table_exists():
            return listed, 0
        scope = self._scope()
        if scope is None:
            return listed, 0
        where, params = scope
        local = self._rows(
            sql.SQL("SELECT count(*) FROM {} t WHERE TRUE{}").format(self._target, where), params
        )
        return listed, int(local[0][0])

    def _scope(self) -> tuple[sql.Composable, tuple[int, ...]] | None:
        """The local rows of this listing's scope: every row, or the mall's members (None: a
        mall's listing without a membership table, which has none)."""
        if self.mall_id is None:
            return sql.SQL(""), ()
        found = self._members()
        if found is None:
            return None
        members, mall, row = found
        return (
            sql.SQL(" AND EXISTS (SELECT 1 FROM {} m WHERE m.{} = %s AND m.{} = t.id)").format(
                members, mall, row
            ),
            (self.mall_id,),
        )

    def missing_or_stale(self, unsettled_since: str | None = None) -> Iterator[list[int]]:
        """Batches of listed ids that are absent locally or older locally than upstream; with
        `unsettled_since` (`sync.jobs.evidence.Settling`), also those held under the very stamp
        listed when that stamp is at or after it: an equal stamp is not yet evidence of the
        same version there (two versions of a row may share a stamp of whole seconds, and the
        second may commit late)."""
        if not self._table_exists():
            query = sql.SQL("SELECT l.id FROM {} l WHERE l.id > %s ORDER BY l.id LIMIT {}").format(
                self._temp, sql.Literal(BATCH)
            )
            yield from self._keyset(query, ())
            return
        params: tuple[str, ...] = ()
        stale = ""
        if self._has_column("updated_at"):
            newer = 't.updated_at IS NULL OR l.updated_at > t.updated_at COLLATE "C"'
            stale = f" OR (l.updated_at IS NOT NULL AND ({newer}))"
            if unsettled_since is not None:
                stale += (
                    ' OR (l.updated_at = t.updated_at COLLATE "C"'
                    ' AND l.updated_at >= %s::text COLLATE "C")'
                )
                params = (unsettled_since,)
        query = sql.SQL(
            "SELECT l.id FROM {} l LEFT JOIN {} t ON t.id = l.id"
            " WHERE l.id > %s AND (t.id IS NULL" + stale + ") ORDER BY l.id LIMIT {}"
        ).format(self._temp, self._target, sql.Literal(BATCH))
        yield from self._keyset(query, params)

    def claim_mall(self) -> int:
        """Record this listing's mall as a mall of every listed row the table holds: the route
        that lists a row is the proof (a row first written as another type's included copy has
        no mall yet, one moved upstream without a new stamp has the old one), so this needs no
        `updated_at` guard. Returns how many memberships were added (0 without a membership
        table: see the module's docstring)."""
        if self.mall_id is None or not self._table_exists():
            return 0
        found = self._members()
        if found is None:
            return 0
        members, mall, row = found
        cur = self.conn.execute(
            sql.SQL(
                "INSERT INTO {} ({}, {}, position) SELECT %s, l.id, 0 FROM {} l"
                " JOIN {} t ON t.id = l.id ORDER BY l.id ON CONFLICT DO NOTHING"
            ).format(members, mall, row, self._temp, self._target),
            (self.mall_id,),
        )
        added = max(cur.rowcount, 0)
        if added and self._has_column("mall_id"):
            self.conn.execute(
                sql.SQL(
                    "UPDATE {} SET mall_id = %s WHERE id IN (SELECT id FROM {})"
                    " AND (mall_id IS NULL OR mall_id > %s)"
                ).format(self._target, self._temp),
                (self.mall_id, self.mall_id),
            )
        return added

    def absent(self) -> Iterator[list[int]]:
        """Batches of local ids (in scope) that the listing lacks."""
        if not self._table_exists():
            return
        scope = self._scope()
        if scope is None:
            return
        where, params = scope
        query = sql.SQL(
            "SELECT t.id FROM {} t WHERE t.id > %s{} AND NOT EXISTS"
            " (SELECT 1 FROM {} l WHERE l.id = t.id) ORDER BY t.id LIMIT {}"
        ).format(self._target, where, self._temp, sql.Literal(BATCH))
        yield from self._keyset(query, params)

    def _keyset(self, query: sql.Composed, params: tuple[int | str, ...]) -> Iterator[list[int]]:
        """Batches of the ids `query` selects after the last one yielded (it takes the last id,
        then `params`), each fetched whole before it is handed out, until one comes back empty
        (as SQLite's: a row written meanwhile past the last id is still seen)."""
        last = FIRST
        while True:
            batch = [int(r[0]) for r in self._rows(query, (last, *params))]
            if not batch:
                return
            yield batch
            last = batch[-1]

"""The PostgreSQL mirror's backfill checkpoints: `_sync_backfill` and `_sync_backfill_pages`.

Issue #49: the counterpart of `sync.store.backfills.Backfills` (read that module's docstring
first), with the same methods, arguments, answers and rules; the rules that are not SQL
(`resumes`, `completed`, `completed_record`) are that module's, imported here, and the dataclasses
(`PageCheckpoint`, `BackfillState`) are its too. Held to it by the contract tests of
`tests/unit/store/pg/test_backfills.py`. Not wired into `Mirror` yet.

**Tables.** SQLite's names and columns (`sync.store.schema.BOOKKEEPING`), in the schema of the
`Meta` given (`sync.store.pg.bookkeeping.Meta`: the types ever completed are kept in its
`_sync_meta`, as in SQLite), made by `ensure_backfills` with the bookkeeping tables the class
reads beside its own (`_sync_meta`, `_sync_cursors`, `_sync_runs`). Types, scopes and stamps
are text `COLLATE "C"` (compared and grouped byte by byte, as SQLite's BINARY does), page
numbers `bigint`.

**Transactions.** As in SQLite: `checkpoint` and `finish` run on the connection as given, so a
checkpoint made inside a page's transaction commits or rolls back with the page's rows;
`start` (and `begin`) and `reset` are atomic on their own: `reset` in `conn.transaction()` (a
savepoint inside the caller's transaction, where SQLite's `write_transaction` takes one too);
`start` in one outside a transaction, and inside one (a bulk load's group) as a part of it, since
in the group's pipeline a savepoint waits for the server (`_afresh`). A read of a table that
does not exist (`started_types`) is asked of the catalogue first, since a failed statement
would abort the caller's transaction; `completed_types` expects the tables, as SQLite's does.

**Differences.** Only those of the bookkeeping (`sync.store.pg.bookkeeping`): a NUL character in
a type, scope or stamp is kept as U+FFFD. Where SQLite leaves the order of a `GROUP BY` to its
plan (types ascending), the queries here say so (`ORDER BY type`), so `completed_types` lists
the types it derives in the same order.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.rows import tuple_row

from sync.store.backfills import (
    COMPLETED_KEY,
    STARTED_KEY,
    BackfillState,
    PageCheckpoint,
    begin_walk,
    completed,
    completed_record,
    resumes,
)
from sync.store.pg import bookkeeping
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Meta,
    Runs,
    Tables,
    create_tables,
    exists,
    no_nul,
    statement,
)
from sync.store.pg.readmemo import ReadMemo

__all__ = ["BackfillState", "Backfills", "PageCheckpoint", "ensure_backfills"]

BACKFILL = "_sync_backfill"
PAGES = "_sync_backfill_pages"

#: The tables of this part, as `sync.store.pg.bookkeeping.TABLES` describes its own.
TABLES: Tables = {
    BACKFILL: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("scope", f"{KEY} NOT NULL"),
            ("page_size", "bigint"),
            ("last", "bigint"),
            ("started_at", KEY),
            ("finished_at", KEY),
        ),
        ("type", "scope"),
    ),
    PAGES: (
        (("type", f"{KEY} NOT NULL"), ("scope", f"{KEY} NOT NULL"), ("page", "bigint NOT NULL")),
        ("type", "scope", "page"),
    ),
}


def ensure_backfills(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema`, the bookkeeping tables and the checkpoints' tables it lacks, in one
    transaction (`sync.store.pg.bookkeeping.create_tables`); existing tables are kept."""
    create_tables(conn, schema, {**bookkeeping.TABLES, **TABLES})


class Backfills:
    """The backfill checkpoints of one PostgreSQL mirror, in the schema of `meta`: the
    counterpart of `sync.store.backfills.Backfills`."""

    def __init__(self, conn: psycopg.Connection[Any], meta: Meta) -> None:
        self.conn = conn
        self.meta = meta
        self.schema = meta.schema
        self._runs = Runs(conn, self.schema)

        def q(table: str, template: str) -> sql.Composed:
            return statement(self.schema, table, template, TABLES)

        # A row and its pages in one read (in a bulk load's pipelined group every read waits
        # for the statements sent before it, `sync.store.pg.bulk`): one (type, scope)'s, and
        # every row with its key for the memo of `state` (`sync.store.pg.readmemo`).
        def rows(keyed: bool, where: str) -> sql.Composed:
            return sql.SQL(
                ("SELECT b.{type}, b.{scope}, " if keyed else "SELECT ")
                + "b.{page_size}, b.{last}, b.{started_at}, b.{finished_at},"
                " ARRAY(SELECT p.{page} FROM {pages} p WHERE p.{type} = b.{type}"
                " AND p.{scope} = b.{scope}) FROM {t} b" + where
            ).format(
                t=sql.Identifier(self.schema, BACKFILL),
                pages=sql.Identifier(self.schema, PAGES),
                **{c: sql.Identifier(c) for c in ("page_size", "last", "started_at")},
                **{c: sql.Identifier(c) for c in ("finished_at", "page", "type", "scope")},
            )

        self._state = rows(False, " WHERE b.{type} = %s AND b.{scope} = %s")
        self._every = rows(True, "")
        #: `state`'s answers, from memory in a bulk load's pipelined group.
        self.states: ReadMemo[tuple[str, str], BackfillState] = ReadMemo(
            conn, self._all_states, self._read_state
        )
        self._drop_pages = q(PAGES, "DELETE FROM {t} WHERE {type} = %s AND {scope} = %s")
        self._begin = q(
            BACKFILL,
            "INSERT INTO {t} ({type}, {scope}, {page_size}, {last}, {started_at}, {finished_at}) "
            "VALUES (%s, %s, %s, NULL, %s, NULL) ON CONFLICT ({type}, {scope}) DO UPDATE SET "
            "{page_size} = EXCLUDED.{page_size}, {last} = NULL, "
            "{started_at} = EXCLUDED.{started_at}, {finished_at} = NULL",
        )
        self._finish = q(
            BACKFILL, "UPDATE {t} SET {finished_at} = %s WHERE {type} = %s AND {scope} = %s"
        )
        self._page_done = q(
            PAGES,
            "INSERT INTO {t} ({type}, {scope}, {page}) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        )
        # Only when it grows: every page of a listing says the same `last`, and an UPDATE that
        # changes nothing still leaves a dead tuple.
        self._last = q(
            BACKFILL,
            "UPDATE {t} SET {last} = GREATEST(coalesce({last}, 0), %(last)s) "
            "WHERE {type} = %(type)s AND {scope} = %(scope)s "
            "AND {last} IS DISTINCT FROM GREATEST(coalesce({last}, 0), %(last)s)",
        )
        self._types = q(BACKFILL, "SELECT DISTINCT {type} FROM {t}")
        self._finished = q(
            BACKFILL,
            "SELECT {type}, count(*), count({finished_at}), max({finished_at}) FROM {t} "
            "GROUP BY {type} ORDER BY {type}",
        )
        self._polled = statement(
            self.schema,
            "_sync_cursors",
            "SELECT {type}, min({updated_at}) FROM {t} WHERE {type} != 'deletions' "
            "GROUP BY {type} ORDER BY {type}",
        )
        self._clear = [q(BACKFILL, "DELETE FROM {t}"), q(PAGES, "DELETE FROM {t}")]

    def _rows(self, query: sql.Composed, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Every row of `query` as tuples, whatever the connection's row factory."""
        return self.conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()

    def state(self, type_name: str, scope: str) -> BackfillState | None:
        """Where the backfill of (type, scope) stands; None: never started (or reset). In a
        bulk load's group, from memory after one read of them all (`states`)."""
        return self.states.get((no_nul(type_name), no_nul(scope)))

    def _read_state(self, key: tuple[str, str]) -> BackfillState | None:
        found = self._rows(self._state, key)
        return _state(*found[0]) if found else None

    def _all_states(self) -> dict[tuple[str, str], BackfillState]:
        return {(t, s): _state(*rest) for t, s, *rest in self._rows(self._every)}

    def start(self, type_name: str, scope: str, *, page_size: int, started_at: str) -> None:
        """Begin (type, scope) afresh, or resume it: an unfinished one of the same page size
        keeps the pages already committed (`sync.store.backfills.resumes`)."""
        if resumes(self.state(type_name, scope), page_size):
            return  # resume: keep the pages already committed
        self._afresh(type_name, scope, page_size, started_at)

    def begin(
        self, type_name: str, scope: str, *, page_size: int, started_at: str
    ) -> BackfillState | None:
        """A backfill's walk of (type, scope) begins (as SQLite's `begin`): None when it
        finished already, else `start` and the state it leaves; one read."""
        return begin_walk(
            self.state(type_name, scope),
            page_size,
            started_at,
            lambda: self._afresh(type_name, scope, page_size, started_at),
        )

    def _afresh(self, type_name: str, scope: str, page_size: int, started_at: str) -> None:
        """(type, scope) from its first page: its pages forgotten and its row begun, atomic.
        Inside a caller's transaction (a bulk load's group) its two statements are a part of
        it, with no savepoint: in the group's pipeline a savepoint waits for the server twice,
        and a failure rolls the whole group back anyway."""
        key = (no_nul(type_name), no_nul(scope))
        begin = (*key, page_size, no_nul(started_at))
        self.states.touch(key)
        conn = self.conn
        if (
            conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
            or conn.info.transaction_status != pq.TransactionStatus.IDLE
        ):
            self.conn.execute(self._drop_pages, key)
            self.conn.execute(self._begin, begin)
            return
        with self.conn.transaction():
            self.conn.execute(self._drop_pages, key)
            self.conn.execute(self._begin, begin)

    def finish(self, type_name: str, scope: str, *, finished_at: str) -> None:
        self.states.touch((no_nul(type_name), no_nul(scope)))
        self.conn.execute(self._finish, (no_nul(finished_at), no_nul(type_name), no_nul(scope)))

    def checkpoint(self, cp: PageCheckpoint) -> None:
        """Inside the page's transaction: the page is done, and how many pages there are."""
        key = (no_nul(cp.type_name), no_nul(cp.scope))
        self.states.touch(key)
        self.conn.execute(self._page_done, (*key, cp.page))
        self.conn.execute(self._last, {"last": cp.last, "type": key[0], "scope": key[1]})

    def started_types(self) -> list[str]:
        """The types any backfill started, sorted ([] when the table does not exist)."""
        if not exists(self.conn, self.schema, BACKFILL):
            return []
        return sorted(str(t) for (t,) in self._rows(self._types))

    def completed_types(self) -> dict[str, str]:
        """The types some backfill finished, with when (`sync.store.backfills.completed`)."""
        return completed(
            self.meta.get(COMPLETED_KEY), self._rows(self._polled), self._rows(self._finished)
        )

    def type_completed(self, type_name: str, at: str) -> None:
        """A backfill finished every scope of `type_name` (`completed_types`); its run is seen
        alive (`sync.store.pg.bookkeeping.Runs.heartbeat`)."""
        done = self.completed_types()
        done[type_name] = at
        self.meta.set(COMPLETED_KEY, completed_record(done))
        self._runs.heartbeat()

    def reset(self) -> None:
        """Forget the checkpoints to start a new backfill; which types were ever completed is
        kept (`completed_types`), in the same transaction."""
        self.states.forget()
        with self.conn.transaction():
            self.meta.set(COMPLETED_KEY, completed_record(self.completed_types()))
            for query in self._clear:
                self.conn.execute(query)
            self.meta.set(STARTED_KEY, None)


def _state(
    page_size: int | None,
    last: int | None,
    started_at: str | None,
    finished_at: str | None,
    pages: list[int],
) -> BackfillState:
    """A row of `_sync_backfill` with its pages' numbers, as read."""
    return BackfillState(frozenset(int(p) for p in pages), last, page_size, started_at, finished_at)

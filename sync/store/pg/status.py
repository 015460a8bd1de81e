"""The PostgreSQL mirror's per-type status: `_sync_types`, and the lines of `ccsync status`.

Issue #49: the counterpart of `sync.store.status.TypeStatuses` (read that module's docstring
first), with the same methods, arguments and answers (`sync.store.status.TypeStatus`); which
types get a line and what it says (`status_lines`, `tracked_of`) and how an error is kept
(`stored_error`: redacted) are that module's, imported here. Held to it by the contract tests of
`tests/unit/store/pg/test_status.py`. Not wired into `Mirror` yet.

**Table.** `_sync_types` with SQLite's columns, in the schema of the `Schema` given
(`sync.store.pg.schema.Schema`), made by `ensure_status` with the bookkeeping tables `lines`
reads beside it (`_sync_cursors`). The type and the stamps are text `COLLATE "C"`: a change
taken moves the last sync forward only, `GREATEST` comparing stamps byte by byte as SQLite's
`max` does. A line's newest cursor is the greatest of the type's cursors in byte order too
(`max(cursor COLLATE "C")`: `_sync_cursors.cursor` is not a key, so it keeps the database's
collation, which need not be bytewise). Rows are counted by `sync.store.pg.reads.count`.

**Transactions.** None of its own: each method runs its statement on the connection as given
(inside a caller's transaction, the write stays in it), as in SQLite.

**Differences.** Only the bookkeeping's: a NUL character in a type, stamp or error is kept as
U+FFFD (`sync.store.pg.bookkeeping`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.store.pg import bookkeeping, reads
from sync.store.pg.bookkeeping import KEY, SCHEMA, Tables, create_tables, no_nul, statement
from sync.store.pg.schema import Schema
from sync.store.status import TypeStatus, status_lines, stored_error, tracked_of

__all__ = ["TypeStatus", "TypeStatuses", "ensure_status"]

TYPES = "_sync_types"

#: The table of this part, as `sync.store.pg.bookkeeping.TABLES` describes its own.
TABLES: Tables = {
    TYPES: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("last_sync_at", KEY),
            ("last_error", "text"),
            ("error_at", KEY),
        ),
        ("type",),
    ),
}


def ensure_status(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema`, the bookkeeping tables and `_sync_types` where missing, in one
    transaction (`sync.store.pg.bookkeeping.create_tables`); existing tables are kept."""
    create_tables(conn, schema, {**bookkeeping.TABLES, **TABLES})


class TypeStatuses:
    """`_sync_types` of one PostgreSQL mirror, in `schema`'s schema: the counterpart of
    `sync.store.status.TypeStatuses`."""

    def __init__(self, conn: psycopg.Connection[Any], schema: Schema) -> None:
        self.conn = conn
        self.schema = schema

        def q(template: str) -> sql.Composed:
            return statement(schema.name, TYPES, template, TABLES)

        self._ok = q(
            "INSERT INTO {t} ({type}, {last_sync_at}, {last_error}) VALUES (%s, %s, NULL) "
            "ON CONFLICT ({type}) DO UPDATE SET {last_sync_at} = EXCLUDED.{last_sync_at}, "
            "{last_error} = NULL"
        )
        self._failed = q(
            "INSERT INTO {t} ({type}, {last_error}, {error_at}) VALUES (%s, %s, %s) "
            "ON CONFLICT ({type}) DO UPDATE SET {last_error} = EXCLUDED.{last_error}, "
            "{error_at} = EXCLUDED.{error_at}"
        )
        self._took = q(
            "INSERT INTO {t} AS s ({type}, {last_sync_at}) VALUES (%s, %s) "
            "ON CONFLICT ({type}) DO UPDATE SET {last_sync_at} = "
            "GREATEST(coalesce(s.{last_sync_at}, ''), EXCLUDED.{last_sync_at})"
        )
        self._lines = q("SELECT {type}, {last_sync_at}, {last_error} FROM {t}")
        self._cursors = statement(
            schema.name,
            "_sync_cursors",
            'SELECT {type}, max({cursor} COLLATE "C") FROM {t} GROUP BY {type}',
        )

    def record(self, type_name: str, *, ok: bool, error: str | None = None, at: str) -> None:
        """`type_name` synced at `at` (its error cleared), or failed then with `error`."""
        if ok:
            self.conn.execute(self._ok, (no_nul(type_name), no_nul(at)))
        else:
            kept = stored_error(error)
            self.conn.execute(
                self._failed,
                (no_nul(type_name), None if kept is None else no_nul(kept), no_nul(at)),
            )

    def took_change(self, type_name: str, *, at: str) -> None:
        """Notices of `type_name` were applied at `at` (the queue worker): its last sync moves
        to `at` unless a poll synced it later; its last error stays."""
        self.conn.execute(self._took, (no_nul(type_name), no_nul(at)))

    def lines(self) -> list[TypeStatus]:
        """One line of `ccsync status` per listable type with a table or bookkeeping."""
        return status_lines(
            self._tracked(),
            lambda name: bool(self.schema.columns(name)),
            lambda name: reads.count(self.schema, name, None),
        )

    def _tracked(self) -> dict[str, dict[str, Any]]:
        """Each type's `_sync_types` line and newest cursor."""
        cur = self.conn.cursor(row_factory=tuple_row)
        types = cur.execute(self._lines).fetchall()
        return tracked_of(types, cur.execute(self._cursors).fetchall())

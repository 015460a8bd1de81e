"""The storage watch's write check on a PostgreSQL mirror (`PgMirror.storage`).

Issue #49, item 7: the server gone mid-run degrades the daemon as a full disk does
(`sync.store.watch`): the faults are named in one place, `sync.store.faults` (by SQLSTATE; a
lost connection is `unreachable`), and this check is what the watch runs every few seconds until
a write commits again. It is the counterpart of `sync.store.faults.StorageCheck` (the
`StoragePart` protocol of `sync.store.seamparts`).

**The write.** One transaction on the mirror's connection: a row of `CHECK_BYTES` upserted into
`_sync_meta` and deleted again (WAL is written, so a server whose disk is full, or one that takes
no writes, refuses it; a table no row is left in). With `busy_ms` the transaction waits that long
at most for a lock another session holds (`SET LOCAL lock_timeout`), as SQLite's check waits
for another writer's; a lock still held is SQLSTATE 55P03, `locked`.

**A lost connection.** The check asks `connection()` for the mirror's connection each time: the
mirror hands out its live one, made again when the last was lost (a server restarted, a socket
cut), so the check that commits proves the connection the mirror's parts write on works too. An
unreachable server raises what libpq raises (`psycopg.OperationalError`), which the watch names
`unreachable`. A connection left in a failed transaction (its server went away mid-statement) is
rolled back first.

**`room`** (a full disk must have room again) cannot be asked of a remote server's file system:
the write itself is the test, as the server refuses it while its disk is full.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from sync.store.pg.bookkeeping import SCHEMA

#: Bytes the check writes (and deletes in the same transaction): a little WAL, not a page's.
CHECK_BYTES = 8 * 1024
#: The `_sync_meta` key the check writes; never left behind.
CHECK_KEY = "write_check"


class PgStorageCheck:
    """The write check on the mirror in `schema`, on the connection `connection()` returns
    (the mirror's live connection, in autocommit, made again after one was lost); see the
    module docstring."""

    def __init__(
        self, connection: Callable[[], psycopg.Connection[Any]], schema: str = SCHEMA
    ) -> None:
        self._connection = connection
        self.schema = schema
        table = sql.Identifier(schema, "_sync_meta")
        self._upsert = sql.SQL(
            "INSERT INTO {t} (key, value) VALUES (%s, repeat('x', %s)) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ).format(t=table)
        self._delete = sql.SQL("DELETE FROM {t} WHERE key = %s").format(t=table)

    def check_writes(self, *, busy_ms: int | None = None, room: bool = False) -> None:
        """Commit the check's write, or raise what the server (or libpq) raises. `busy_ms`:
        the most to wait for another session's lock; `room` is the SQLite check's and needs
        nothing here (module docstring)."""
        del room  # the write is the test of a full disk on a server
        conn = self._connection()
        if conn.info.transaction_status == TransactionStatus.INERROR:
            conn.rollback()
        with conn.transaction():
            if busy_ms is not None:
                conn.execute(
                    sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{int(busy_ms)}ms"))
                )
            conn.execute(self._upsert, (CHECK_KEY, CHECK_BYTES))
            conn.execute(self._delete, (CHECK_KEY,))

    def lost(self) -> bool:
        """Whether the mirror's connection is gone for good (closed, or broken by a server
        that ended its session): no check can succeed on it, and the daemon reopens the
        mirror (`sync.daemon.standby.Standby.keep`). One made again is not lost."""
        conn = self._connection()
        return bool(conn.closed or conn.broken)


class LiveConnection:
    """A connection made by `connect`, and made again when the last one is closed or broken:
    what a `PgStorageCheck` (and a store's parts) can ask for on every use. `connect` raises
    what libpq raises when the server cannot be reached. Not safe for several threads."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None

    def __call__(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self.close()
            conn = self._conn = self._connect()
        return conn

    def close(self) -> None:
        """Close the connection, if any (safe on one already lost)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

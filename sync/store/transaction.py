"""Write transactions on the mirror: each takes SQLite's write lock as it begins.

A deferred transaction (`BEGIN`, or a `SAVEPOINT` outside one) starts as a reader and asks for
the write lock at its first write. If another connection holds that lock then, SQLite answers
SQLITE_BUSY ("database is locked") at once, without waiting out `busy_timeout`: waiting while
holding a read snapshot could deadlock. sync is the mirror's only writing application (its
lock file sees to that), but Litestream, replicating the file, takes the write lock briefly
around each of its checkpoints; a page write that read before it wrote failed on the spot. A
transaction begun with `BEGIN IMMEDIATE` asks for the lock first, and waits for it like any
other statement (busy_timeout), so it never meets that answer.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the block atomically: in a new `BEGIN IMMEDIATE` transaction, or in a savepoint of
    the transaction already open (a page inside a bulk load's group commit). An exception
    undoes the block's writes and propagates."""
    nested = conn.in_transaction
    if nested:
        conn.execute("SAVEPOINT sync_tx")
        try:
            yield
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled it back already (disk full)
                conn.execute("ROLLBACK TO sync_tx")
                conn.execute("RELEASE sync_tx")
            raise
        conn.execute("RELEASE sync_tx")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")

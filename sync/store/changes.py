"""The change feed: `_sync_changes`, the triggers that fill it, and its reads and pruning.

Every change of a content table is appended by a trigger in the writing statement's own
transaction, so the feed can never disagree with the rows: `upsert` when a row is inserted or
takes another `updated_at` (a re-write of the same copy is no change), `delete` when it goes.
A bulk load drops the triggers and logs one `backfill` entry per type loaded instead of one per
row (`note_backfill`). Readers follow the feed by sequence number (`read`); old entries are
pruned by age, and the sequence numbers go on (AUTOINCREMENT).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

from sync.model.stamps import iso_ms, now_iso

#: One entry of the feed: (seq, type, id, op, updated_at, at).
Change = tuple[int, str, int | None, str, str | None, str]

#: The triggers' clock: the same millisecond ISO form as `sync.model.stamps.iso_ms`.
_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


def create_triggers(conn: sqlite3.Connection, table: str, columns: set[str]) -> None:
    """The three triggers of one content table (`columns`: its own). Tables without
    `updated_at` (tags, groups) log an update whose columns differ."""
    if not columns:
        return
    stamped = "updated_at" in columns
    new_stamp = "new.updated_at" if stamped else "NULL"
    old_stamp = "old.updated_at" if stamped else "NULL"
    changed = (
        "old.updated_at IS NOT new.updated_at"
        if stamped
        else " OR ".join(f"old.[{c}] IS NOT new.[{c}]" for c in sorted(columns) if c != "id") or "0"
    )
    ins = f"INSERT INTO _sync_changes (type, id, op, updated_at, at) VALUES ('{table}', "
    conn.executescript(
        f"CREATE TRIGGER IF NOT EXISTS [_sync_changes_{table}_insert] AFTER INSERT ON "
        f"[{table}] BEGIN {ins}new.id, 'upsert', {new_stamp}, {_NOW}); END;\n"
        f"CREATE TRIGGER IF NOT EXISTS [_sync_changes_{table}_update] AFTER UPDATE ON "
        f"[{table}] WHEN {changed} BEGIN {ins}new.id, 'upsert', {new_stamp}, {_NOW}); END;\n"
        f"CREATE TRIGGER IF NOT EXISTS [_sync_changes_{table}_delete] AFTER DELETE ON "
        f"[{table}] BEGIN {ins}old.id, 'delete', {old_stamp}, {_NOW}); END;"
    )


def drop_triggers(conn: sqlite3.Connection) -> None:
    """Drop every table's feed triggers (a bulk load into empty tables)."""
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
        "'\\_sync\\_changes\\_%' ESCAPE '\\'"
    ).fetchall():
        conn.execute(f"DROP TRIGGER IF EXISTS [{name}]")


def note_backfill(conn: sqlite3.Connection, types: Iterable[str]) -> None:
    """One `backfill` entry per type a bulk load filled: every row of it may have changed."""
    conn.executemany(
        "INSERT INTO _sync_changes (type, id, op, updated_at, at) "
        "VALUES (?, NULL, 'backfill', NULL, ?)",
        [(t, now_iso()) for t in types],
    )


def read(conn: sqlite3.Connection, since: int, limit: int) -> list[Change]:
    """Entries after sequence number `since`, oldest first, at most `limit`."""
    return [
        (int(seq), str(type_), rid, str(op), stamp, str(at))
        for seq, type_, rid, op, stamp, at in conn.execute(
            "SELECT seq, type, id, op, updated_at, at FROM _sync_changes WHERE seq > ? "
            "ORDER BY seq LIMIT ?",
            (since, limit),
        )
    ]


def prune(conn: sqlite3.Connection, keep_days: float) -> int:
    """Drop entries older than `keep_days`; returns how many went."""
    cutoff = iso_ms(time.time() - keep_days * 86400)
    return conn.execute("DELETE FROM _sync_changes WHERE at < ?", (cutoff,)).rowcount

"""The durable change queue: webhook notices committed to SQLite before they are acknowledged.

The receiver answers 2xx only after `enqueue` commits, so a notice the upstream considers
delivered survives a crash. The worker claims items coalesced by (kind, type, id), does the
fetches and writes they call for, and only then `ack`s them: at-least-once, and harmless to
replay because every write is an idempotent upsert or a confirmed delete.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from sync.model.notices import WebhookNotice
from sync.model.stamps import now_iso
from sync.store.transaction import write_transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS _sync_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, type_name TEXT NOT NULL,
    resource_id INTEGER NOT NULL, received_at TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT);
CREATE INDEX IF NOT EXISTS idx__sync_queue_kind_type ON _sync_queue (kind, type_name, id);
"""


def waiting(conn: sqlite3.Connection) -> int:
    """Webhook notices waiting in `_sync_queue` (0 before the daemon ever ran: no table; a
    read-only open cannot make it, so `ChangeQueue` is not for readers)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sync_queue'"
    ).fetchone()
    if not exists:
        return 0
    return int(conn.execute("SELECT count(*) FROM _sync_queue").fetchone()[0])


@dataclass(frozen=True)
class QueueItem:
    """One logical change: every queued row for the same (kind, type, id)."""

    kind: str
    type_name: str
    resource_id: int
    row_ids: tuple[int, ...]


class ChangeQueue:
    """The `_sync_queue` table on the mirror's connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.conn.executescript(SCHEMA)

    def enqueue(self, notices: Sequence[WebhookNotice]) -> int:
        """Commit the notices of known types in one transaction; returns how many were queued."""
        stamp = now_iso()
        rows = [(n.kind, n.type_name, n.resource_id, stamp) for n in notices if n.type_name]
        if rows:
            with write_transaction(self.conn):
                self.conn.executemany(
                    "INSERT INTO _sync_queue (kind, type_name, resource_id, received_at) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
        return len(rows)

    def depth(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM _sync_queue").fetchone()[0])

    def types_pending(self, kind: str) -> list[str]:
        return [
            str(r[0])
            for r in self.conn.execute(
                "SELECT DISTINCT type_name FROM _sync_queue WHERE kind = ? ORDER BY type_name",
                (kind,),
            )
        ]

    def claim(self, kind: str, type_name: str, limit: int = 100) -> list[QueueItem]:
        """The oldest `limit` distinct ids of (kind, type), each with all its queued rows."""
        ids = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT resource_id FROM _sync_queue WHERE kind = ? AND type_name = ? "
                "GROUP BY resource_id ORDER BY min(id) LIMIT ?",
                (kind, type_name, limit),
            )
        ]
        if not ids:
            return []
        rows: dict[int, list[int]] = {}
        marks = ",".join("?" * len(ids))
        for row_id, rid in self.conn.execute(
            f"SELECT id, resource_id FROM _sync_queue WHERE kind = ? AND type_name = ? "
            f"AND resource_id IN ({marks})",
            (kind, type_name, *ids),
        ):
            rows.setdefault(int(rid), []).append(int(row_id))
        return [QueueItem(kind, type_name, rid, tuple(rows[rid])) for rid in ids]

    def ack(self, items: Sequence[QueueItem]) -> None:
        """Remove items whose writes have committed."""
        row_ids = [(i,) for item in items for i in item.row_ids]
        with write_transaction(self.conn):
            self.conn.executemany("DELETE FROM _sync_queue WHERE id = ?", row_ids)

    def fail(self, items: Sequence[QueueItem], error: str) -> None:
        """Keep items for a later attempt and record why this one failed."""
        row_ids = [(error[:500], i) for item in items for i in item.row_ids]
        with write_transaction(self.conn):
            self.conn.executemany(
                "UPDATE _sync_queue SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                row_ids,
            )

"""The durable change queue: webhook notices committed to SQLite before they are acknowledged.

The receiver answers 2xx only after `enqueue` commits, so a notice the upstream considers
delivered survives a crash. The worker takes items coalesced by (kind, type, id), does the
fetches and writes they call for, and only then `ack`s them: at-least-once, and harmless to
replay because every write is an idempotent upsert or a confirmed delete.

An id already waiting costs nothing when it is notified again: the row it has moves to the
newer delivery and takes the newer `received_at` (what a poll page answers is judged by it,
`answered`), and no row is added. Only a row the worker has taken (`taken`, its fetch under
way) is not matched, so a change notified while its id is being fetched is kept for another
fetch, never lost to the older one's `ack`. Nothing is taken when a queue is opened (a process
opens one for its worker), nor when a type's lane starts (`release`): rows a crash or a fault
left taken are waiting again.

Each delivery is a lane (`delivery`, one number per body the receiver takes): `take` serves a
type's lanes in turn, a batch of ids from each, so a small delivery is fetched within a few
requests while a batch of 100,000 drains beside it at its share of the budget. Within a lane
the newest notices go first: a poll walks stamps upwards from its cursor, so it reads the
oldest changes of a burst first and its pages answer their notices
(`sync.jobs.incremental.answered`); taken oldest first, the worker would walk the same rows as
the poll, just ahead of it, and each would spend a request on every version.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sync.model.notices import WebhookNotice
from sync.model.stamps import now_iso
from sync.store.transaction import write_transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS _sync_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, type_name TEXT NOT NULL,
    resource_id INTEGER NOT NULL, received_at TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT);
"""
#: Columns added since the table's first shape (an older mirror's queue gains them on open).
ADDED = {
    "delivery": "INTEGER NOT NULL DEFAULT 0",
    "taken": "INTEGER NOT NULL DEFAULT 0",
}
#: Ids the worker takes from a lane at once: one `filter[id]` request's worth (page[size]'s
#: bound in the spec).
TAKE_IDS = 100
#: Characters of a failed attempt's message kept in `last_error`.
ERROR_CHARS = 500
INDEXES = """
DROP INDEX IF EXISTS idx__sync_queue_kind_type;
CREATE INDEX IF NOT EXISTS idx__sync_queue_key ON _sync_queue (kind, type_name, resource_id);
CREATE INDEX IF NOT EXISTS idx__sync_queue_lane
    ON _sync_queue (type_name, taken, delivery, kind, id);
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


def lanes(conn: sqlite3.Connection) -> list[int]:
    """The notices waiting in each lane (type, kind, delivery), for readers (`ccsync status`):
    the worker asks for each lane's ids apart. A queue an older sync wrote has no lanes: one
    per type and kind."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(_sync_queue)")}
    if not columns:
        return []
    lane = "type_name, kind" + (", delivery" if "delivery" in columns else "")
    return [int(r[0]) for r in conn.execute(f"SELECT count(*) FROM _sync_queue GROUP BY {lane}")]


class QueueTable:
    """`_sync_queue` as the mirror holds it (`Mirror.queue`): what it holds, counted
    (`waiting`, `lanes`: reading makes nothing, so readers count on a read-only open), and
    the queue itself (`open`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def open(self) -> ChangeQueue:
        """The queue (`ChangeQueue`), its table made or upgraded and taken notices released:
        the daemon's, once per run; never on a read-only open."""
        return ChangeQueue(self._conn)

    def waiting(self) -> int:
        return waiting(self._conn)

    def lanes(self) -> list[int]:
        return lanes(self._conn)


@dataclass(frozen=True)
class QueueItem:
    """One logical change: every queued row for the same (kind, type, id)."""

    kind: str
    type_name: str
    resource_id: int
    row_ids: tuple[int, ...]


def items_of(
    kind: str, type_name: str, ids: Sequence[int], rows: Iterable[tuple[int, int]]
) -> list[QueueItem]:
    """The items of `ids` of (kind, type), in the order of `ids`, each with the queue rows
    taken for it (`rows`: (row id, resource id) pairs; a queue written before the dedupe may
    hold several rows for one id), ascending. An id no row was taken for is left out (it was
    not waiting any more by the time it was marked: another taker's, on a shared queue)."""
    found: dict[int, list[int]] = {}
    for row_id, rid in rows:
        found.setdefault(int(rid), []).append(int(row_id))
    return [
        QueueItem(kind, type_name, rid, tuple(sorted(found[rid]))) for rid in ids if rid in found
    ]


class ChangeQueue:
    """The `_sync_queue` table on the mirror's connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.conn.executescript(SCHEMA)
        have = {str(r[1]) for r in conn.execute("PRAGMA table_info(_sync_queue)")}
        with write_transaction(conn):
            for column, decl in ADDED.items():
                if column not in have:
                    conn.execute(f"ALTER TABLE _sync_queue ADD COLUMN {column} {decl}")
            conn.execute("UPDATE _sync_queue SET taken = 0 WHERE taken != 0")
        conn.executescript(INDEXES)
        last = conn.execute("SELECT max(delivery) FROM _sync_queue").fetchone()[0]
        self._delivery = int(last or 0)
        self._turn: dict[str, tuple[int, str]] = {}  # per type: the lane served last

    def open_delivery(self) -> int:
        """A new lane: the number the notices of one delivery are enqueued under."""
        self._delivery += 1
        return self._delivery

    def enqueue(self, notices: Sequence[WebhookNotice], delivery: int | None = None) -> int:
        """Commit the notices of known types in one transaction, in `delivery`'s lane (a new
        one when None); returns how many were taken in (an id already waiting among them adds
        no row: its row moves to this lane)."""
        lane = self.open_delivery() if delivery is None else delivery
        stamp = now_iso()
        rows = [(n.kind, n.type_name, n.resource_id, stamp, lane) for n in notices if n.type_name]
        if rows:
            with write_transaction(self.conn):
                self.conn.executemany(
                    "UPDATE _sync_queue SET delivery = ?5, received_at = ?4 WHERE kind = ?1 "
                    "AND type_name = ?2 AND resource_id = ?3 AND taken = 0",
                    rows,
                )
                self.conn.executemany(
                    "INSERT INTO _sync_queue (kind, type_name, resource_id, received_at, delivery) "
                    "SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS (SELECT 1 FROM _sync_queue "
                    "WHERE kind = ?1 AND type_name = ?2 AND resource_id = ?3 AND taken = 0)",
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

    def take(self, type_name: str, limit: int = 100) -> list[QueueItem]:
        """The next lane's newest `limit` waiting ids of one kind, taken (see the module
        docstring): after the lane served last, in (delivery, kind) order, round again."""
        after = self._turn.get(type_name, (-1, ""))
        lane = "SELECT delivery, kind FROM _sync_queue WHERE type_name = ? AND taken = 0"
        order = " ORDER BY delivery, kind LIMIT 1"
        found = (
            self.conn.execute(
                f"{lane} AND (delivery, kind) > (?, ?){order}", (type_name, *after)
            ).fetchone()
            or self.conn.execute(lane + order, (type_name,)).fetchone()
        )
        if found is None:
            return []
        delivery, kind = int(found[0]), str(found[1])
        self._turn[type_name] = (delivery, kind)
        ids = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT resource_id FROM _sync_queue WHERE type_name = ? AND taken = 0 "
                "AND delivery = ? AND kind = ? ORDER BY id DESC LIMIT ?",
                (type_name, delivery, kind, limit),
            )
        ]
        return self._taken(kind, type_name, ids)

    def claim(self, kind: str, type_name: str, limit: int = 100) -> list[QueueItem]:
        """The oldest `limit` waiting ids of (kind, type) in any lane, taken."""
        ids = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT resource_id FROM _sync_queue WHERE kind = ? AND type_name = ? "
                "AND taken = 0 GROUP BY resource_id ORDER BY min(id) LIMIT ?",
                (kind, type_name, limit),
            )
        ]
        return self._taken(kind, type_name, ids)

    def _taken(self, kind: str, type_name: str, ids: list[int]) -> list[QueueItem]:
        """`ids` of (kind, type) with every waiting row of each (a queue written before the
        dedupe may hold several), marked taken."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = [
            (int(row_id), int(rid))
            for row_id, rid in self.conn.execute(
                f"SELECT id, resource_id FROM _sync_queue WHERE kind = ? AND type_name = ? "
                f"AND resource_id IN ({marks}) AND taken = 0",
                (kind, type_name, *ids),
            )
        ]
        with write_transaction(self.conn):
            self.conn.executemany(
                "UPDATE _sync_queue SET taken = 1 WHERE id = ?", [(row_id,) for row_id, _ in rows]
            )
        return items_of(kind, type_name, ids, rows)

    def release(self, type_name: str) -> None:
        """Every taken row of `type_name` waiting again: called as a type's only lane starts,
        so what an earlier lane left taken (ended by a fault) is not held until a restart."""
        with write_transaction(self.conn):
            self.conn.execute(
                "UPDATE _sync_queue SET taken = 0 WHERE type_name = ? AND taken != 0", (type_name,)
            )

    def ack(self, items: Sequence[QueueItem]) -> None:
        """Remove items whose writes have committed."""
        row_ids = [(i,) for item in items for i in item.row_ids]
        with write_transaction(self.conn):
            self.conn.executemany("DELETE FROM _sync_queue WHERE id = ?", row_ids)

    def answered(self, type_name: str, ids: Sequence[int], asked_at: str) -> int:
        """Remove the waiting update notices of `ids` received before `asked_at`: a request
        asked after them served those rows, and the mirror holds what it served (the caller
        says so, `sync.jobs.incremental.answered`). Taken rows are the worker's, its fetch under
        way; a notice received at `asked_at` or after is kept. Returns how many went."""
        wanted = sorted(set(ids))
        gone = 0
        with write_transaction(self.conn):
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                gone += self.conn.execute(
                    "DELETE FROM _sync_queue WHERE kind = 'update' AND type_name = ? AND taken = 0 "
                    f"AND received_at < ? AND resource_id IN ({','.join('?' * len(chunk))})",
                    (type_name, asked_at, *chunk),
                ).rowcount
        return gone

    def fail(self, items: Sequence[QueueItem], error: str) -> None:
        """Keep items for a later attempt, waiting again, and record why this one failed."""
        row_ids = [(error[:ERROR_CHARS], i) for item in items for i in item.row_ids]
        with write_transaction(self.conn):
            self.conn.executemany(
                "UPDATE _sync_queue SET attempts = attempts + 1, last_error = ?, taken = 0 "
                "WHERE id = ?",
                row_ids,
            )

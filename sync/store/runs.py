"""Run records in `_sync_runs`: what each backfill and each daemon did, told truthfully.

A run is recorded `running` when it starts, with the process's pid, and `seen_at` (its last sign
of life: a daemon's heartbeat, `HEARTBEAT_S`) moves while it runs. It ends `ok`, `partial`,
`failed` (with its own error), or `stopped` (SIGTERM, Ctrl-C: no error). A process killed with
SIGKILL, or that lost power, records no end: the next writer to open the mirror holds the writer
lock (`sync.store.lock`), so no run still `running` then has a live process behind it, and it is
marked `interrupted`, `seen_at` saying when it was last seen (`close_orphans`).

`Runs` is these functions on one mirror's connection (`Mirror.runs`).

`ccsync status` reads the daemon's run (`last_run`) to say whether a daemon holds the mirror
now, since when, and when it was last seen.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from sync.core.logs import get_logger
from sync.core.redact import redact_text
from sync.model.stamps import now_iso

#: Seconds between a daemon's heartbeats (`seen_at` of its runs): one small UPDATE.
HEARTBEAT_S = 15.0

#: Columns an older sync's `_sync_runs` lacks (`sync.store.migrations`).
NEW_COLUMNS = {"pid": "INTEGER", "seen_at": "TEXT"}

_log = get_logger("sync.store")


def add_columns(conn: sqlite3.Connection) -> None:
    """Give an older mirror's `_sync_runs` the columns this module writes."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(_sync_runs)")}
    for name, kind in NEW_COLUMNS.items():
        if name not in have:
            conn.execute(f"ALTER TABLE _sync_runs ADD COLUMN {name} {kind}")


def start(conn: sqlite3.Connection, kind: str) -> int:
    """A run of `kind` begins in this process; its id."""
    now = now_iso()
    cur = conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, status, pid, seen_at) "
        "VALUES (?, ?, 'running', ?, ?)",
        (kind, now, os.getpid(), now),
    )
    return int(cur.lastrowid or 0)


def finish(
    conn: sqlite3.Connection, run_id: int, *, status: str, rows: int | None, error: str | None
) -> None:
    """Run `run_id` ended with `status` (ok, partial, failed, stopped) and its own `error`."""
    now = now_iso()
    conn.execute(
        "UPDATE _sync_runs SET finished_at = ?, seen_at = ?, status = ?, rows = ?, error = ? "
        "WHERE id = ?",
        (now, now, status, rows, None if error is None else redact_text(error), run_id),
    )


def heartbeat(conn: sqlite3.Connection) -> None:
    """This process's running runs are alive now."""
    conn.execute(
        "UPDATE _sync_runs SET seen_at = ? WHERE status = 'running' AND pid = ?",
        (now_iso(), os.getpid()),
    )


def close_orphans(conn: sqlite3.Connection) -> int:
    """Mark `interrupted` every run still `running`: called by a writer that has just taken
    the lock, so their processes are gone. How many there were."""
    orphans = conn.execute(
        "SELECT id, kind, pid, coalesce(seen_at, started_at) FROM _sync_runs "
        "WHERE status = 'running'"
    ).fetchall()
    for run_id, kind, pid, seen in orphans:
        conn.execute(
            "UPDATE _sync_runs SET status = 'interrupted', seen_at = ? WHERE id = ?",
            (seen, run_id),
        )
        _log.warning(
            "run.interrupted",
            run=run_id,
            kind=kind,
            pid=pid,
            last_seen=seen,
            hint="its process ended without recording its end (killed, or the host stopped)",
        )
    return len(orphans)


def recent(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    """The last `limit` runs, oldest first."""
    cur = conn.execute(
        "SELECT * FROM (SELECT * FROM _sync_runs ORDER BY id DESC LIMIT ?) ORDER BY id", (limit,)
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur]


def last_run(conn: sqlite3.Connection, kind: str) -> dict[str, Any] | None:
    """The last run of `kind` ("daemon", "backfill", ...; running or not), however many runs
    of other kinds came after it, or None when none ever ran here."""
    try:
        cur = conn.execute(
            "SELECT * FROM _sync_runs WHERE kind = ? ORDER BY id DESC LIMIT 1", (kind,)
        )
    except sqlite3.OperationalError:  # a read-only open of a mirror without the table
        return None
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))


class Runs:
    """The run records of one open mirror (`Mirror.runs`): each call one short statement."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def start(self, kind: str) -> int:
        """A run of `kind` begins in this process; its id."""
        return start(self.conn, kind)

    def finish(self, run_id: int, *, status: str, rows: int | None, error: str | None) -> None:
        """Run `run_id` ended with `status` (ok, partial, failed, stopped) and its own `error`."""
        finish(self.conn, run_id, status=status, rows=rows, error=error)

    def heartbeat(self) -> None:
        """This process's running runs are alive now."""
        heartbeat(self.conn)

    def close_orphans(self) -> int:
        """Mark `interrupted` every run still `running` (`close_orphans`); how many there were."""
        return close_orphans(self.conn)

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        """The last `limit` run records, oldest first."""
        return recent(self.conn, limit)

    def last(self, kind: str) -> dict[str, Any] | None:
        """The last run of `kind` (running or not), or None when none ever ran here."""
        return last_run(self.conn, kind)

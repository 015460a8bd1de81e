"""The daemon's scheduled jobs in `_sync_jobs`: last start, end, outcome and next run, by name.

The schedule survives restarts: a starting daemon reads when each job was due (`JobRecords.all`)
and `ccsync status` says which is overdue. Errors are stored redacted (`sync.core.redact`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sync.core.redact import redact_text


class JobRecords:
    """`_sync_jobs` of one mirror (`Mirror.jobs`); each call one short statement."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def started(self, name: str, at: str) -> None:
        """A daemon job began (its outcome stays that of the previous run until it ends)."""
        self.conn.execute(
            "INSERT INTO _sync_jobs (name, started_at) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET started_at = excluded.started_at",
            (name, at),
        )

    def finished(
        self, name: str, *, at: str, outcome: str, error: str | None, seconds: float
    ) -> None:
        """A daemon job ended: `outcome` is ok, error or refused."""
        self.conn.execute(
            "INSERT INTO _sync_jobs (name, finished_at, outcome, error, seconds) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "finished_at = excluded.finished_at, outcome = excluded.outcome, "
            "error = excluded.error, seconds = excluded.seconds",
            (name, at, outcome, None if error is None else redact_text(error), seconds),
        )

    def scheduled(self, name: str, next_run_at: str) -> None:
        """When the daemon will next run job `name` (read back by the next start and status)."""
        self.conn.execute(
            "INSERT INTO _sync_jobs (name, next_run_at) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET next_run_at = excluded.next_run_at",
            (name, next_run_at),
        )

    def retired(self, name: str) -> None:
        """A job the daemon no longer runs (the daily reconcile, replaced by the rolling
        proof): its record goes, so it is never reported overdue."""
        self.conn.execute("DELETE FROM _sync_jobs WHERE name = ?", (name,))

    def all(self) -> dict[str, dict[str, Any]]:
        """Every job's last start, end, outcome, error, duration and next run, by name."""
        try:
            cur = self.conn.execute("SELECT * FROM _sync_jobs ORDER BY name")
        except sqlite3.OperationalError:  # a mirror written before this table existed
            return {}
        cols = [d[0] for d in cur.description]
        return {row[0]: dict(zip(cols, row, strict=True)) for row in cur}

"""Bookkeeping in `_sync_*` tables: cursors, backfill checkpoints, runs, per-type status, meta.

A mixin of `Mirror` (it needs only `self.conn`), so callers keep one object per database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sync.core.redact import redact_text
from sync.model.stamps import now_iso
from sync.store import runs
from sync.store.transaction import write_transaction

#: `_sync_meta` key: the types a backfill has finished, each with when (JSON). A later backfill
#: that fails, or is stopped, never takes a type out: the daemon copies again only the types
#: no backfill ever finished (`Mirror.completed_types`).
COMPLETED_KEY = "backfill_completed"


@dataclass(frozen=True)
class PageCheckpoint:
    """A backfill page committed together with its rows."""

    type_name: str
    scope: str
    page: int
    last: int


@dataclass(frozen=True)
class BackfillState:
    """Where the backfill of one (type, scope) stands."""

    pages_done: frozenset[int]
    last: int | None
    page_size: int | None
    started_at: str | None
    finished_at: str | None


@dataclass(frozen=True)
class TypeStatus:
    """One line of `ccsync status`."""

    type_name: str
    rows: int
    last_sync_at: str | None
    cursor: str | None
    last_error: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "rows": self.rows,
            "last_sync_at": self.last_sync_at,
            "cursor": self.cursor,
            "last_error": self.last_error,
        }


def _redacted(error: str | None) -> str | None:
    """An error as stored: `ccsync status` and `/healthz` show it (`sync.core.redact`)."""
    return None if error is None else redact_text(error)


class BookkeepingMixin:
    """Cursors, checkpoints, runs, status and meta; every statement is a short transaction."""

    conn: sqlite3.Connection

    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    # meta
    def get_meta(self, key: str) -> str | None:
        row = self._exec("SELECT value FROM _sync_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self._exec("DELETE FROM _sync_meta WHERE key = ?", (key,))
        else:
            self._exec(
                "INSERT INTO _sync_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # scheduled jobs (their schedule survives restarts)
    def job_started(self, name: str, at: str) -> None:
        """A daemon job began (its outcome stays that of the previous run until it ends)."""
        self._exec(
            "INSERT INTO _sync_jobs (name, started_at) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET started_at = excluded.started_at",
            (name, at),
        )

    def job_finished(
        self, name: str, *, at: str, outcome: str, error: str | None, seconds: float
    ) -> None:
        """A daemon job ended: `outcome` is ok, error or refused."""
        self._exec(
            "INSERT INTO _sync_jobs (name, finished_at, outcome, error, seconds) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "finished_at = excluded.finished_at, outcome = excluded.outcome, "
            "error = excluded.error, seconds = excluded.seconds",
            (name, at, outcome, _redacted(error), seconds),
        )

    def job_scheduled(self, name: str, next_run_at: str) -> None:
        """When the daemon will next run job `name` (read back by the next start and status)."""
        self._exec(
            "INSERT INTO _sync_jobs (name, next_run_at) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET next_run_at = excluded.next_run_at",
            (name, next_run_at),
        )

    def job_retired(self, name: str) -> None:
        """A job the daemon no longer runs (the daily reconcile, replaced by the rolling
        proof): its record goes, so it is never reported overdue."""
        self._exec("DELETE FROM _sync_jobs WHERE name = ?", (name,))

    def jobs(self) -> dict[str, dict[str, Any]]:
        """Every job's last start, end, outcome, error, duration and next run, by name."""
        try:
            cur = self._exec("SELECT * FROM _sync_jobs ORDER BY name")
        except sqlite3.OperationalError:  # a mirror written before this table existed
            return {}
        cols = [d[0] for d in cur.description]
        return {row[0]: dict(zip(cols, row, strict=True)) for row in cur}

    # cursors
    def get_cursor(self, type_name: str, scope: str) -> str | None:
        row = self._exec(
            "SELECT cursor FROM _sync_cursors WHERE type = ? AND scope = ?", (type_name, scope)
        ).fetchone()
        return None if row is None else str(row[0])

    def set_cursor(self, type_name: str, scope: str, value: str) -> None:
        self._exec(
            "INSERT INTO _sync_cursors (type, scope, cursor, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(type, scope) DO UPDATE SET cursor = excluded.cursor, "
            "updated_at = excluded.updated_at",
            (type_name, scope, value, now_iso()),
        )

    # backfill checkpoints
    def backfill_state(self, type_name: str, scope: str) -> BackfillState | None:
        row = self._exec(
            "SELECT page_size, last, started_at, finished_at FROM _sync_backfill "
            "WHERE type = ? AND scope = ?",
            (type_name, scope),
        ).fetchone()
        if row is None:
            return None
        pages = frozenset(
            int(r[0])
            for r in self._exec(
                "SELECT page FROM _sync_backfill_pages WHERE type = ? AND scope = ?",
                (type_name, scope),
            )
        )
        return BackfillState(pages, row[1], row[0], row[2], row[3])

    def start_backfill(
        self, type_name: str, scope: str, *, page_size: int, started_at: str
    ) -> None:
        state = self.backfill_state(type_name, scope)
        if state is not None and state.finished_at is None and state.page_size == page_size:
            return  # resume: keep the pages already committed
        with write_transaction(self.conn):
            self._exec(
                "DELETE FROM _sync_backfill_pages WHERE type = ? AND scope = ?",
                (type_name, scope),
            )
            self._exec(
                "INSERT OR REPLACE INTO _sync_backfill (type, scope, page_size, last, "
                "started_at, finished_at) VALUES (?, ?, ?, NULL, ?, NULL)",
                (type_name, scope, page_size, started_at),
            )

    def finish_backfill(self, type_name: str, scope: str, *, finished_at: str) -> None:
        self._exec(
            "UPDATE _sync_backfill SET finished_at = ? WHERE type = ? AND scope = ?",
            (finished_at, type_name, scope),
        )

    def completed_types(self) -> dict[str, str]:
        """The types some backfill finished, with when: recorded as each type finishes, and
        for a mirror written before that record, a type whose every checkpoint is finished or
        that has a poll cursor (a backfill sets a type's cursors once all its pages are in)."""
        try:
            done: dict[str, str] = dict(json.loads(self.get_meta(COMPLETED_KEY) or "{}"))
        except (ValueError, TypeError):
            done = {}
        for t, at in self._exec(
            "SELECT type, min(updated_at) FROM _sync_cursors WHERE type != 'deletions' "
            "GROUP BY type"
        ):
            done.setdefault(str(t), str(at))
        for t, scopes, finished, at in self._exec(
            "SELECT type, count(*), count(finished_at), max(finished_at) FROM _sync_backfill "
            "GROUP BY type"
        ):
            if scopes and scopes == finished:
                done.setdefault(str(t), str(at))
        return done

    def type_completed(self, type_name: str, at: str) -> None:
        """A backfill finished every scope of `type_name` (`completed_types`); its run is seen
        alive (`sync.store.runs.heartbeat`)."""
        done = self.completed_types()
        done[type_name] = at
        self.set_meta(COMPLETED_KEY, json.dumps(done, sort_keys=True))
        runs.heartbeat(self.conn)

    def reset_backfill(self) -> None:
        """Forget the checkpoints to start a new backfill; which types were ever completed is
        kept (`completed_types`), in the same transaction."""
        with write_transaction(self.conn):
            self.set_meta(COMPLETED_KEY, json.dumps(self.completed_types(), sort_keys=True))
            self._exec("DELETE FROM _sync_backfill")
            self._exec("DELETE FROM _sync_backfill_pages")
            self._exec("DELETE FROM _sync_meta WHERE key = 'backfill_started_at'")

    def _record_checkpoint(self, cp: PageCheckpoint) -> None:
        """Inside the page's transaction: the page is done, and how many pages there are."""
        self._exec(
            "INSERT OR IGNORE INTO _sync_backfill_pages (type, scope, page) VALUES (?, ?, ?)",
            (cp.type_name, cp.scope, cp.page),
        )
        self._exec(
            "UPDATE _sync_backfill SET last = max(coalesce(last, 0), ?) WHERE type = ? AND scope = ?",
            (cp.last, cp.type_name, cp.scope),
        )

    # runs (`sync.store.runs`) and status
    def start_run(self, kind: str) -> int:
        return runs.start(self.conn, kind)

    def finish_run(self, run_id: int, *, status: str, rows: int | None, error: str | None) -> None:
        runs.finish(self.conn, run_id, status=status, rows=rows, error=error)

    def heartbeat(self) -> None:
        """This process's running runs are alive now (`sync.store.runs.heartbeat`)."""
        runs.heartbeat(self.conn)

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The last `limit` run records, oldest first (`sync.store.runs`)."""
        return runs.recent(self.conn, limit)

    def record_type_status(
        self, type_name: str, *, ok: bool, error: str | None = None, at: str
    ) -> None:
        if ok:
            self._exec(
                "INSERT INTO _sync_types (type, last_sync_at, last_error) VALUES (?, ?, NULL) "
                "ON CONFLICT(type) DO UPDATE SET last_sync_at = excluded.last_sync_at, "
                "last_error = NULL",
                (type_name, at),
            )
        else:
            self._exec(
                "INSERT INTO _sync_types (type, last_error, error_at) VALUES (?, ?, ?) "
                "ON CONFLICT(type) DO UPDATE SET last_error = excluded.last_error, "
                "error_at = excluded.error_at",
                (type_name, _redacted(error), at),
            )

    # values that did not fit their declared type (`sync.pipeline.staging.coerce`)
    def record_values(
        self,
        type_name: str,
        refused: Sequence[tuple[int, str, str, str]],
        coerced: Sequence[tuple[int, str, str]],
    ) -> None:
        """Keep each refused value (one row per type, id and attribute, until a copy of the
        row is written: `forget_refusals`) and count the coerced ones per attribute."""
        now = now_iso()
        self.conn.executemany(
            "INSERT INTO _sync_refusals (type, id, attribute, value, problem, first_at, last_at, "
            "times) VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT(type, id, attribute) DO UPDATE "
            "SET value = excluded.value, problem = excluded.problem, last_at = excluded.last_at, "
            "times = times + 1",
            [(type_name, rid, a, redact_text(v), p, now, now) for rid, a, v, p in refused],
        )
        per: dict[str, list[tuple[int, str]]] = {}
        for rid, attribute, value in coerced:
            per.setdefault(attribute, []).append((rid, value))
        self.conn.executemany(
            "INSERT INTO _sync_coercions (type, attribute, count, last_id, last_value, last_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(type, attribute) DO UPDATE SET "
            "count = count + excluded.count, last_id = excluded.last_id, "
            "last_value = excluded.last_value, last_at = excluded.last_at",
            [
                (type_name, a, len(items), items[-1][0], redact_text(items[-1][1]), now)
                for a, items in per.items()
            ],
        )

    def refused_ids(self) -> dict[str, set[int]]:
        """The ids of rows `_sync_refusals` holds, per type (few: rows with a misfit value)."""
        out: dict[str, set[int]] = {}
        for t, rid in self._exec("SELECT DISTINCT type, id FROM _sync_refusals"):
            out.setdefault(t, set()).add(int(rid))
        return out

    def forget_refusals(self, type_name: str, ids: Sequence[int]) -> None:
        """Rows of `ids` are being written: their earlier refusals are history."""
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            self._exec(
                f"DELETE FROM _sync_refusals WHERE type = ? AND id IN ({','.join('?' * len(chunk))})",
                (type_name, *chunk),
            )

    def value_faults(self) -> dict[str, dict[str, Any]]:
        """Per type: values refused (rows held at their last good copy) and the last one, and
        values coerced; for `ccsync status`. Empty for a mirror written before these existed."""
        out: dict[str, dict[str, Any]] = {}
        try:
            refused = self._exec(
                "SELECT type, count(*), max(last_at) FROM _sync_refusals GROUP BY type"
            ).fetchall()
            coerced = self._exec(
                "SELECT type, sum(count) FROM _sync_coercions GROUP BY type"
            ).fetchall()
        except sqlite3.OperationalError:  # read-only open of a mirror without the tables
            return out
        for t, n, last_at in refused:
            last = self._exec(
                "SELECT id, attribute, value, problem FROM _sync_refusals WHERE type = ? "
                "ORDER BY last_at DESC, id DESC LIMIT 1",
                (t,),
            ).fetchone()
            out.setdefault(t, {"refused": 0, "coerced": 0})
            out[t]["refused"] = int(n)
            out[t]["last_refused"] = dict(
                zip(("id", "attribute", "value", "problem"), last, strict=True), at=last_at
            )
        for t, n in coerced:
            out.setdefault(t, {"refused": 0, "coerced": 0})["coerced"] = int(n)
        return out

    def queue_depth(self) -> int:
        """Webhook notices waiting in `_sync_queue` (0 before the daemon ever ran)."""
        exists = self._exec(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sync_queue'"
        ).fetchone()
        if not exists:
            return 0
        return int(self._exec("SELECT count(*) FROM _sync_queue").fetchone()[0])

    def _status_rows(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for t, last, err in self._exec("SELECT type, last_sync_at, last_error FROM _sync_types"):
            out.setdefault(t, {})["last_sync_at"] = last
            out[t]["last_error"] = err
        for t, cursor in self._exec("SELECT type, max(cursor) FROM _sync_cursors GROUP BY type"):
            out.setdefault(t, {})["cursor"] = cursor
        return out

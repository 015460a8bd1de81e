"""Per-type sync status in `_sync_types`: when each type last synced, and its last error.

The jobs record each type's outcome (`TypeStatuses.record`, errors stored redacted), and the
queue worker the notices it applied (`TypeStatuses.took_change`): a type's last sync is the
later of its last successful poll and the last change it took. `ccsync status` and `/healthz`
read one line per listable type (`TypeStatuses.lines`): its row count, last sync, newest
cursor and last error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sync.core.redact import redact_text
from sync.model import catalogue
from sync.store import reads
from sync.store.schema import Schema


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


def stored_error(error: str | None) -> str | None:
    """A type's error as `_sync_types` keeps it: redacted (`sync.core.redact`)."""
    return None if error is None else redact_text(error)


def tracked_of(
    types: Iterable[tuple[str, str | None, str | None]], cursors: Iterable[tuple[str, str | None]]
) -> dict[str, dict[str, Any]]:
    """Each type's bookkeeping by name: its `_sync_types` line (`types`: type, last sync, last
    error) and its newest cursor (`cursors`: type, the greatest of its cursors)."""
    out: dict[str, dict[str, Any]] = {}
    for t, last, err in types:
        out.setdefault(t, {})["last_sync_at"] = last
        out[t]["last_error"] = err
    for t, cursor in cursors:
        out.setdefault(t, {})["cursor"] = cursor
    return out


def status_lines(
    tracked: dict[str, dict[str, Any]],
    has_table: Callable[[str], bool],
    count: Callable[[str], int],
) -> list[TypeStatus]:
    """One line per listable type, in the catalogue's order, that has a table (`has_table`) or
    bookkeeping (`tracked`, `tracked_of`): its rows (`count`), last sync, newest cursor and last
    error."""
    names = [n for n in catalogue.LISTABLE if has_table(n) or n in tracked]
    return [
        TypeStatus(
            name,
            count(name),
            tracked.get(name, {}).get("last_sync_at"),
            tracked.get(name, {}).get("cursor"),
            tracked.get(name, {}).get("last_error"),
        )
        for name in names
    ]


class TypeStatuses:
    """`_sync_types` of one mirror (`Mirror.types`)."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        self.conn = conn
        self.schema = schema

    def record(self, type_name: str, *, ok: bool, error: str | None = None, at: str) -> None:
        """`type_name` synced at `at` (its error cleared), or failed then with `error`."""
        if ok:
            self.conn.execute(
                "INSERT INTO _sync_types (type, last_sync_at, last_error) VALUES (?, ?, NULL) "
                "ON CONFLICT(type) DO UPDATE SET last_sync_at = excluded.last_sync_at, "
                "last_error = NULL",
                (type_name, at),
            )
        else:
            self.conn.execute(
                "INSERT INTO _sync_types (type, last_error, error_at) VALUES (?, ?, ?) "
                "ON CONFLICT(type) DO UPDATE SET last_error = excluded.last_error, "
                "error_at = excluded.error_at",
                (type_name, stored_error(error), at),
            )

    def took_change(self, type_name: str, *, at: str) -> None:
        """Notices of `type_name` were applied at `at` (the queue worker): its last sync, and
        so the lag `ccsync status` shows, counts from then unless a poll synced it later. Its
        last error stays: a poll's success clears that."""
        self.conn.execute(
            "INSERT INTO _sync_types (type, last_sync_at) VALUES (?, ?) "
            "ON CONFLICT(type) DO UPDATE SET "
            "last_sync_at = max(coalesce(last_sync_at, ''), excluded.last_sync_at)",
            (type_name, at),
        )

    def lines(self) -> list[TypeStatus]:
        """One line of `ccsync status` per listable type with a table or bookkeeping."""
        return status_lines(
            self._tracked(),
            lambda name: bool(self.schema.columns(name)),
            lambda name: reads.count(self.schema, name, None),
        )

    def _tracked(self) -> dict[str, dict[str, Any]]:
        """Each type's `_sync_types` line and newest cursor."""
        return tracked_of(
            self.conn.execute("SELECT type, last_sync_at, last_error FROM _sync_types"),
            self.conn.execute("SELECT type, max(cursor) FROM _sync_cursors GROUP BY type"),
        )

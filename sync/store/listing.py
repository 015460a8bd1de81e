"""The listing diff: a full upstream id listing against a mirror table, in a temporary table.

Used by the backfill's missed-row pass and by the reconcile. The listing lives in SQLite (TEMP),
not in a Python set, so memory does not grow with the data; each batch the diff yields is read
completely before it is handed out, so the caller may write to the same connection meanwhile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from types import TracebackType

from sync.model.stamps import normalize_or_none
from sync.store import memberships

BATCH = 100


class Listing:
    """Ids (and `updated_at`) listed upstream for one (type, mall); diffed against the table."""

    def __init__(
        self, conn: sqlite3.Connection, table: str, mall_id: int | None, name: str
    ) -> None:
        self.conn = conn
        self.table = table
        self.mall_id = mall_id
        self.name = name

    def __enter__(self) -> Listing:
        self.conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS [{self.name}] (id INTEGER PRIMARY KEY, updated_at TEXT)"
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS temp.[{self.name}]")

    def _table_exists(self) -> bool:
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table,)
            ).fetchone()
        )

    def _has_column(self, column: str) -> bool:
        return any(r[1] == column for r in self.conn.execute(f"PRAGMA table_info([{self.table}])"))

    def add(self, items: Iterable[tuple[int, str | None]]) -> None:
        """Record one listing page's (id, updated_at) pairs (stamps normalised as the mirror's
        are, so they compare as text; an unreadable one counts as none)."""
        self.conn.executemany(
            f"INSERT OR REPLACE INTO temp.[{self.name}] (id, updated_at) VALUES (?, ?)",
            ((i, normalize_or_none(u)) for i, u in items),
        )

    def counts(self) -> tuple[int, int]:
        """(ids listed, local rows in scope)."""
        listed = int(self.conn.execute(f"SELECT count(*) FROM temp.[{self.name}]").fetchone()[0])
        if not self._table_exists():
            return listed, 0
        where, params = self._scope()
        local = int(
            self.conn.execute(
                f"SELECT count(*) FROM [{self.table}] t WHERE 1{where}", params
            ).fetchone()[0]
        )
        return listed, local

    def _scope(self) -> tuple[str, tuple[int, ...]]:
        """The local rows of this listing's scope: every row, or the mall's members."""
        if self.mall_id is None:
            return "", ()
        mall, row = memberships.columns(self.table)
        return (
            f" AND EXISTS (SELECT 1 FROM [{memberships.table(self.table)}] m "
            f"WHERE m.[{mall}] = ? AND m.[{row}] = t.id)",
            (self.mall_id,),
        )

    def missing_or_stale(self, unsettled_since: str | None = None) -> Iterator[list[int]]:
        """Batches of listed ids that are absent locally or older locally than upstream; with
        `unsettled_since` (`sync.jobs.evidence.Settling`), also those held under the very stamp
        listed when that stamp is at or after it: an equal stamp is not yet evidence of the
        same version there (two versions of a row may share a stamp of whole seconds, and the
        second may commit late)."""
        if not self._table_exists():
            sql = (
                f"SELECT l.id FROM temp.[{self.name}] l WHERE l.id > ? ORDER BY l.id LIMIT {BATCH}"
            )
            yield from self._keyset(sql, ())
            return
        params: tuple[str, ...] = ()
        stale = ""
        if self._has_column("updated_at"):
            newer = "t.updated_at IS NULL OR l.updated_at > t.updated_at"
            stale = f" OR (l.updated_at IS NOT NULL AND ({newer}))"
            if unsettled_since is not None:
                stale += " OR (l.updated_at = t.updated_at AND l.updated_at >= ?)"
                params = (unsettled_since,)
        sql = (
            f"SELECT l.id FROM temp.[{self.name}] l LEFT JOIN [{self.table}] t ON t.id = l.id "
            f"WHERE l.id > ? AND (t.id IS NULL{stale}) ORDER BY l.id LIMIT {BATCH}"
        )
        yield from self._keyset(sql, params)

    def claim_mall(self) -> int:
        """Record this listing's mall as a mall of every listed row the table holds: the route
        that lists a row is the proof (a row first written as another type's included copy has
        no mall yet, one moved upstream without a new stamp has the old one), so this needs no
        `updated_at` guard. Returns how many memberships were added."""
        if self.mall_id is None or not self._table_exists():
            return 0
        members = memberships.table(self.table)
        mall, row = memberships.columns(self.table)
        added = self.conn.execute(
            f"INSERT OR IGNORE INTO [{members}] ([{mall}], [{row}], position) "
            f"SELECT ?, l.id, 0 FROM temp.[{self.name}] l JOIN [{self.table}] t ON t.id = l.id",
            (self.mall_id,),
        ).rowcount
        if added and self._has_column("mall_id"):
            self.conn.execute(
                f"UPDATE [{self.table}] SET mall_id = ? WHERE id IN "
                f"(SELECT id FROM temp.[{self.name}]) AND (mall_id IS NULL OR mall_id > ?)",
                (self.mall_id, self.mall_id),
            )
        return added

    def absent(self) -> Iterator[list[int]]:
        """Batches of local ids (in scope) that the listing lacks."""
        if not self._table_exists():
            return
        where, params = self._scope()
        sql = (
            f"SELECT t.id FROM [{self.table}] t WHERE t.id > ?{where} AND NOT EXISTS "
            f"(SELECT 1 FROM temp.[{self.name}] l WHERE l.id = t.id) ORDER BY t.id LIMIT {BATCH}"
        )
        yield from self._keyset(sql, params)

    def _keyset(self, sql: str, params: tuple[int | str, ...]) -> Iterator[list[int]]:
        last = -(1 << 63)
        while True:
            batch = [int(r[0]) for r in self.conn.execute(sql, (last, *params))]
            if not batch:
                return
            yield batch
            last = batch[-1]

"""The storage watch's write check on a PostgreSQL mirror (a first form)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sync.model.stamps import now_iso

if TYPE_CHECKING:
    from sync.store.pg.mirror import PgMirror


class PgStorageCheck:
    """`StoragePart`: a small write committed on the mirror's connection."""

    def __init__(self, mirror: PgMirror) -> None:
        self.mirror = mirror

    def check_writes(self, *, busy_ms: int | None = None, room: bool = False) -> None:
        with self.mirror.conn.transaction():
            self.mirror.meta.set("storage_checked_at", now_iso())

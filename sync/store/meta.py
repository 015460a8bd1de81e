"""Small records kept by key: `_sync_meta` (key -> value) and the polls' cursors (`_sync_cursors`).

Two parts the mirror holds (`Mirror.meta`, `Mirror.cursors`), each a short statement on its
table; neither opens a transaction of its own, so a caller inside one (a page's write, a reset)
keeps them in it.
"""

from __future__ import annotations

import sqlite3

import orjson

from sync.model.stamps import now_iso


def read_numbers(raw: str | None) -> dict[str, int]:
    """The record of names to whole numbers in `raw` (`Meta.numbers`): {} when absent, not JSON
    or not an object; a value that is not a whole number (a bool, a string) is left out. Shared
    with the PostgreSQL mirror's `Meta` (`sync.store.pg.bookkeeping`), so both read alike."""
    try:
        out = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(out, dict):
        return {}
    return {k: v for k, v in out.items() if isinstance(v, int) and not isinstance(v, bool)}


class Meta:
    """`_sync_meta`: the schema version, markers of unfinished phases, small JSON records; also
    the channel's `MetaStore`, where the client keeps what it learns of the upstream
    (`ChannelClient(store=mirror.meta)`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM _sync_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str | None) -> None:
        """Set `key` to `value`; None removes it."""
        if value is None:
            self.conn.execute("DELETE FROM _sync_meta WHERE key = ?", (key,))
        else:
            self.conn.execute(
                "INSERT INTO _sync_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def numbers(self, key: str) -> dict[str, int]:
        """A record of names to whole numbers kept under `key` (a change feed position per
        type, ...); {} when absent or damaged."""
        return read_numbers(self.get(key))

    def set_number(self, key: str, name: str, value: int) -> None:
        """Set `name` to `value` in the record of numbers kept under `key` (`numbers`)."""
        now = self.numbers(key)
        now[name] = value
        self.set(key, orjson.dumps(now).decode())


class Cursors:
    """`_sync_cursors`: each (type, scope)'s poll cursor, with when it was last moved."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, type_name: str, scope: str) -> str | None:
        row = self.conn.execute(
            "SELECT cursor FROM _sync_cursors WHERE type = ? AND scope = ?", (type_name, scope)
        ).fetchone()
        return None if row is None else str(row[0])

    def set(self, type_name: str, scope: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO _sync_cursors (type, scope, cursor, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(type, scope) DO UPDATE SET cursor = excluded.cursor, "
            "updated_at = excluded.updated_at",
            (type_name, scope, value, now_iso()),
        )

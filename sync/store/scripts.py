"""`meta.scripts`, mirrored exactly: per resource type, in order, what is no longer served gone.

Every response of the Channel Content API carries in `meta.scripts` the scripts each page showing
its content must load. `meta_scripts` holds, for each resource type (the type of the listing or
fetch whose response carried them, and its channel from the catalogue), the list the last such
response served, one row per position. A response with another list replaces the type's rows
(a script the upstream dropped is removed); one without the key leaves them; an empty list
removes them all. Items that are not objects are skipped with a log line, never a failed page.

A website reads a type's scripts as `SELECT script_type, content FROM meta_scripts WHERE type =
'deals' ORDER BY position`.

When a list is written and how is written once, in `Scripts`, which holds a store's statements
(`ScriptBook`): `SqliteScripts` here, `sync.store.pg.scripts.PgScripts` in the PostgreSQL
mirror.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Protocol

from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.stamps import now_iso
from sync.pipeline.encoding import dumps
from sync.store.schema import META_SCRIPTS
from sync.store.transaction import write_transaction

_log = get_logger("sync.store")

#: Seconds a type's list, once written, is taken as still stored when the same bytes come again:
#: every page of a listing carries the same list, and one write a minute (which refreshes
#: `last_seen_at`) is enough for them.
SAME_FOR = 60.0


def _text(value: Any) -> str | None:
    """A field of an item as stored: a string as served, null as NULL, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return dumps(value).decode()


#: A script as a type's list holds it: its own `type` and its `content` (`_text`).
Item = tuple[str | None, str | None]
#: A script as `meta_scripts` holds it: its `Item` and when it was first seen.
Held = tuple[str | None, str | None, str | None]


class ScriptBook(Protocol):
    """What a store gives the writer (`Scripts`): its statements on `meta_scripts`.
    `SqliteScripts` below, `sync.store.pg.scripts.PgScripts` in the PostgreSQL mirror: the
    writer holds one of them (composition), so one rule holds in both."""

    def kept(self, value: str | None) -> str | None:
        """A script's field as the store keeps it (what `held` will give back)."""
        ...

    def held(self, type_name: str) -> list[Held]:
        """The type's scripts as held, by position."""
        ...

    def touch(self, type_name: str, stamp: str) -> None:
        """The type's list was served again at `stamp` (its `last_seen_at`)."""
        ...

    def replace(self, type_name: str, rows: list[tuple[Any, ...]]) -> None:
        """The type's rows become `rows` (type, channel, position, script_type, content,
        first_seen_at, last_seen_at): the old ones deleted, these inserted."""
        ...


class Scripts:
    """The writer of `meta_scripts`, remembering the bytes each type's list last came as; the
    statements are the `book`'s (`ScriptBook`)."""

    def __init__(self, book: ScriptBook) -> None:
        self.book = book
        self._seen: dict[str, tuple[bytes, float]] = {}

    def forget(self) -> None:
        """Writes were rolled back: what `_seen` remembers may no longer be stored."""
        self._seen.clear()

    def due(self, rtype: ResourceType, scripts: Any) -> bool:
        """Whether `write` would write: `scripts` is not None (the key was there), and not the
        bytes that came for the type a moment ago."""
        if scripts is None:
            return False
        seen = self._seen.get(rtype.name)
        return seen is None or seen[0] != dumps(scripts) or time.monotonic() - seen[1] >= SAME_FOR

    def write(self, rtype: ResourceType, scripts: Any) -> None:
        """Store `scripts` (a response's `meta.scripts` as served; None: the key was absent) as
        `rtype`'s list. Runs inside the caller's transaction."""
        if scripts is None:
            return
        blob = dumps(scripts)
        now = time.monotonic()
        seen = self._seen.get(rtype.name)
        if seen is not None and seen[0] == blob and now - seen[1] < SAME_FOR:
            return  # the same list as a moment ago (every page of a listing carries it)
        self._seen[rtype.name] = (blob, now)
        if not isinstance(scripts, list):
            _log.warning(
                "scripts.refused",
                type=rtype.name,
                problem=f"meta.scripts is not a list: {blob[:100].decode(errors='replace')}",
                fix="the mirror keeps the type's scripts as they were; report it to the upstream",
            )
            return
        kept = self.book.kept
        items: list[Item] = []
        for pos, item in enumerate(scripts):
            if isinstance(item, dict):
                items.append((kept(_text(item.get("type"))), kept(_text(item.get("content")))))
                continue
            _log.warning(
                "scripts.item_skipped",
                type=rtype.name,
                position=pos,
                problem=f"not an object: {dumps(item)[:100].decode(errors='replace')}",
                fix="the other scripts are kept; report the item to the upstream",
            )
        self._store(rtype, items)

    def _store(self, rtype: ResourceType, items: list[Item]) -> None:
        """`rtype`'s list becomes `items`: the same list as held is only seen again
        (`last_seen_at`); another replaces the type's rows, a script still served keeping the
        moment it was first seen, wherever it moved."""
        stamp = now_iso()
        held = self.book.held(rtype.name)
        if [(k, c) for k, c, _ in held] == items:
            self.book.touch(rtype.name, stamp)
            return
        first = {(k, c): f for k, c, f in held}
        self.book.replace(
            rtype.name,
            [
                (rtype.name, rtype.channel, pos, k, c, first.get((k, c), stamp), stamp)
                for pos, (k, c) in enumerate(items)
            ],
        )
        if held:
            _log.info(
                "scripts.changed",
                type=rtype.name,
                scripts=len(items),
                removed=len({(k, c) for k, c, _ in held} - set(items)),
            )


class SqliteScripts:
    """`ScriptBook` in the SQLite mirror."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def kept(self, value: str | None) -> str | None:
        return value

    def held(self, type_name: str) -> list[Held]:
        return self.conn.execute(
            "SELECT script_type, content, first_seen_at FROM meta_scripts WHERE type = ? "
            "ORDER BY position",
            (type_name,),
        ).fetchall()

    def touch(self, type_name: str, stamp: str) -> None:
        self.conn.execute(
            "UPDATE meta_scripts SET last_seen_at = ? WHERE type = ?", (stamp, type_name)
        )

    def replace(self, type_name: str, rows: list[tuple[Any, ...]]) -> None:
        self.conn.execute("DELETE FROM meta_scripts WHERE type = ?", (type_name,))
        self.conn.executemany(
            "INSERT INTO meta_scripts (type, channel, position, script_type, content, "
            "first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def migrate_scripts(conn: sqlite3.Connection) -> None:
    """A mirror written before scripts were kept per type: its `meta_scripts` (id, type (the
    script's), content, first_seen_at, last_seen_at) had every type's scripts merged, in no
    order. Rebuilt in today's shape, each old script given to every type the mirror lists (a
    backfill or a poll cursor recorded) in the order first stored, so a site keeps loading them
    until the next response of each type replaces that type's list with what it serves."""
    cols = {row[1] for row in conn.execute("PRAGMA table_info(meta_scripts)")}
    if "id" not in cols or "position" in cols:
        return
    names = {
        row[0]
        for row in conn.execute(
            "SELECT type FROM _sync_backfill UNION SELECT type FROM _sync_cursors"
        )
    }
    listed = [t for name, t in catalogue.TYPES.items() if name in names and t.listable]
    with write_transaction(conn):
        conn.execute("ALTER TABLE meta_scripts RENAME TO _sync_old_meta_scripts")
        conn.execute(META_SCRIPTS)
        old = conn.execute(
            "SELECT type, content, first_seen_at, last_seen_at FROM _sync_old_meta_scripts "
            "ORDER BY rowid"
        ).fetchall()
        conn.executemany(
            "INSERT INTO meta_scripts (type, channel, position, script_type, content, "
            "first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(t.name, t.channel, pos, *row) for t in listed for pos, row in enumerate(old)],
        )
        conn.execute("DROP TABLE _sync_old_meta_scripts")
    _log.info("scripts.migrated", scripts=len(old), types=[t.name for t in listed])

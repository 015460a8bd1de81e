"""The change feed: `_sync_changes`, what fills it, and its reads and pruning.

Every change of a row is appended in the writing statement's own transaction, so the feed can
never disagree with the rows, and `op` says what changed:

- `upsert`: the row was inserted or took another `updated_at` (a re-write of the same copy is
  no change); tables without `updated_at` (tags, groups) log any update whose columns differ;
- `delete`: the row went;
- `repair`: its content changed under an unchanged `updated_at` (the verify's repairs, a
  reconcile's refetch): the very changes a cache keyed on the stamp would miss;
- `links`: only its linkage changed: a to-one column under the same stamp (triggers), a
  to-many link list (`note_links`, from the store's link writers, which compare before they
  write), a mall membership (triggers on `malls_<type>`), or links lost because the row they
  named was deleted;
- `backfill`: a bulk load drops the triggers and logs one entry per type loaded instead of one
  per row (`note_backfill`).

Readers follow the feed by sequence number (`read`, or `ChangeFeed.since` on an open mirror:
`Mirror.changes`); old entries are pruned by age, the
sequence numbers go on (AUTOINCREMENT), and the last one pruned is kept (`pruned_through`) so
that a reader asking from before it is told, instead of missing changes without a word.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sync.model import catalogue
from sync.model.stamps import iso_ms, now_iso
from sync.store.transaction import write_transaction


class Change(NamedTuple):
    """One entry of the feed: `op` is upsert, delete, repair, links or backfill; or `pruned`
    (entries up to `seq` were dropped by retention before its reader saw them; `type` is `*`,
    `at` None). A tuple, `(seq, type, id, op, updated_at, at)`, with names."""

    seq: int
    type: str
    id: int | None
    op: str
    updated_at: str | None
    at: str | None

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()

    def line(self, *, as_json: bool = False) -> str:
        """As `ccsync changes` prints it: tab-separated `SEQ TYPE ID OP UPDATED_AT`, or one
        JSON object."""
        if as_json:
            return json.dumps(self.as_dict())
        rid = "" if self.id is None else str(self.id)
        return f"{self.seq}\t{self.type}\t{rid}\t{self.op}\t{self.updated_at or ''}"


#: `_sync_meta` key: the sequence number of the last entry retention dropped.
PRUNED_KEY = "changes_pruned_through"

#: The triggers' clock: the same millisecond ISO form as `sync.model.stamps.iso_ms`.
_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
_PREFIX = "_sync_changes_"
_INSERT = "INSERT INTO _sync_changes (type, id, op, updated_at, at) VALUES "


def link_columns(table: str) -> set[str]:
    """The columns of a content table that hold linkage, not content: its to-one relationships'
    and, for a mall-scoped type, `mall_id` (its lowest mall)."""
    rtype = catalogue.TYPES.get(table)
    if rtype is None:
        return set()
    return {r.column for r in rtype.relationships if r.to_one} | {"mall_id"}


def _differ(columns: Iterable[str]) -> str:
    return " OR ".join(f"old.[{c}] IS NOT new.[{c}]" for c in sorted(columns)) or "0"


def _not_just_noted(type_name: str, rid: str) -> str:
    """The row's `links` entry is not the newest one already: a change of links often touches
    one row through several statements in a row (a membership and its `mall_id`)."""
    return (
        f"NOT EXISTS (SELECT 1 FROM _sync_changes WHERE seq = (SELECT max(seq) FROM "
        f"_sync_changes) AND type = '{type_name}' AND id = {rid} AND op = 'links')"
    )


def _content_triggers(table: str, columns: set[str]) -> dict[str, str]:
    """The triggers of one content table, by name."""
    if "updated_at" not in columns:
        own = _differ(c for c in columns if c != "id")
        ins = f"{_INSERT}('{table}', "
        return {
            f"{_PREFIX}{table}_insert": f"AFTER INSERT ON [{table}] BEGIN "
            f"{ins}new.id, 'upsert', NULL, {_NOW}); END",
            f"{_PREFIX}{table}_update": f"AFTER UPDATE ON [{table}] WHEN {own} BEGIN "
            f"{ins}new.id, 'upsert', NULL, {_NOW}); END",
            f"{_PREFIX}{table}_delete": f"AFTER DELETE ON [{table}] BEGIN "
            f"{ins}old.id, 'delete', NULL, {_NOW}); END",
        }
    linked = link_columns(table) & columns
    content = columns - linked - {"id", "updated_at"}
    same = "old.updated_at IS new.updated_at"
    ins = f"{_INSERT}('{table}', "
    return {
        f"{_PREFIX}{table}_insert": f"AFTER INSERT ON [{table}] BEGIN "
        f"{ins}new.id, 'upsert', new.updated_at, {_NOW}); END",
        f"{_PREFIX}{table}_update": f"AFTER UPDATE ON [{table}] WHEN old.updated_at IS NOT "
        f"new.updated_at BEGIN {ins}new.id, 'upsert', new.updated_at, {_NOW}); END",
        f"{_PREFIX}{table}_repair": f"AFTER UPDATE ON [{table}] WHEN {same} AND "
        f"({_differ(content)}) BEGIN {ins}new.id, 'repair', new.updated_at, {_NOW}); END",
        f"{_PREFIX}{table}_links": f"AFTER UPDATE ON [{table}] WHEN {same} AND NOT "
        f"({_differ(content)}) AND ({_differ(linked)}) AND {_not_just_noted(table, 'new.id')} "
        f"BEGIN {ins}new.id, 'links', new.updated_at, {_NOW}); END",
        f"{_PREFIX}{table}_delete": f"AFTER DELETE ON [{table}] BEGIN "
        f"{ins}old.id, 'delete', old.updated_at, {_NOW}); END",
    }


def _membership_triggers(type_name: str) -> dict[str, str]:
    """The triggers of a mall-scoped type's membership table `malls_<type>`: a row that joins
    a mall while it is in another, or leaves one while it stays, changed its links (a new row
    joining its first mall is an `upsert` already; a row deleted takes its pairs silently)."""
    table, row = f"malls_{type_name}", f"{type_name}_id"
    ins = f"{_INSERT}('{type_name}', "
    return {
        f"{_PREFIX}{table}_insert": f"AFTER INSERT ON [{table}] WHEN (SELECT count(*) FROM "
        f"[{table}] WHERE [{row}] = new.[{row}]) > 1 AND {_not_just_noted(type_name, f'new.[{row}]')} "
        f"BEGIN {ins}new.[{row}], 'links', NULL, {_NOW}); END",
        f"{_PREFIX}{table}_delete": f"AFTER DELETE ON [{table}] WHEN EXISTS (SELECT 1 FROM "
        f"[{type_name}] WHERE id = old.[{row}]) AND {_not_just_noted(type_name, f'old.[{row}]')} "
        f"BEGIN {ins}old.[{row}], 'links', NULL, {_NOW}); END",
    }


def _install(conn: sqlite3.Connection, triggers: dict[str, str]) -> None:
    """Create each trigger, or make it anew where its text changed (a column added since)."""
    have = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN "
            f"({','.join('?' * len(triggers))})",
            list(triggers),
        ).fetchall()
    )
    for name, body in triggers.items():
        sql = f"CREATE TRIGGER [{name}] {body}"
        if have.get(name) == sql:
            continue
        if name in have:
            conn.execute(f"DROP TRIGGER [{name}]")
        conn.execute(sql)


def create_triggers(conn: sqlite3.Connection, table: str, columns: set[str]) -> None:
    """The feed's triggers of one content table (`columns`: its own) and, for a mall-scoped
    type, of its membership table when it exists."""
    if not columns:
        return
    _install(conn, _content_triggers(table, columns))
    rtype = catalogue.TYPES.get(table)
    if rtype is not None and rtype.level == "mall" and _exists(conn, f"malls_{table}"):
        _install(conn, _membership_triggers(table))


def create_membership_triggers(conn: sqlite3.Connection, type_name: str) -> None:
    """The membership table's triggers, once it is made (`sync.store.memberships.ensure`)."""
    _install(conn, _membership_triggers(type_name))


def _exists(conn: sqlite3.Connection, table: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    )


def drop_triggers(conn: sqlite3.Connection) -> None:
    """Drop every table's feed triggers (a bulk load into empty tables)."""
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
        "'\\_sync\\_changes\\_%' ESCAPE '\\'"
    ).fetchall():
        conn.execute(f"DROP TRIGGER IF EXISTS [{name}]")


def note_backfill(conn: sqlite3.Connection, types: Iterable[str]) -> None:
    """One `backfill` entry per type a bulk load filled: every row of it may have changed."""
    conn.executemany(
        f"{_INSERT}(?, NULL, 'backfill', NULL, ?)",
        [(t, now_iso()) for t in types],
    )


class LinkNotes:
    """`links` entries for rows whose link lists changed, within one write (one transaction):
    made before the write, it leaves out the rows the write already entered (an `upsert` or a
    `repair` says enough) and rows that do not exist (their links went with them)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.mark = last_seq(conn)

    def note(self, type_name: str, ids: Iterable[int]) -> None:
        wanted = sorted(set(ids))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            held = {
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM [{type_name}] WHERE id IN ({marks})", chunk
                )
            }
            entered = {
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM _sync_changes WHERE seq > ? AND type = ? AND id IN ({marks})",
                    (self.mark, type_name, *chunk),
                )
            }
            self.conn.executemany(
                f"{_INSERT}(?, ?, 'links', NULL, {_NOW})",
                [(type_name, rid) for rid in chunk if rid in held and rid not in entered],
            )


def last_seq(conn: sqlite3.Connection) -> int:
    """The newest entry's sequence number (0 for an empty feed)."""
    row = conn.execute("SELECT max(seq) FROM _sync_changes").fetchone()
    return int(row[0] or 0)


def read(
    conn: sqlite3.Connection,
    since: int,
    limit: int,
    types: Sequence[str] = (),
    upto: int | None = None,
) -> list[Change]:
    """Entries after sequence number `since` (and at most `upto`), of `types` or all, oldest
    first, at most `limit`."""
    where = "seq > ?" + (" AND seq <= ?" if upto is not None else "")
    args: list[Any] = [since] if upto is None else [since, upto]
    if types:
        where += f" AND type IN ({','.join('?' * len(types))})"
        args += types
    return [
        Change(int(seq), str(type_), rid, str(op), stamp, str(at))
        for seq, type_, rid, op, stamp, at in conn.execute(
            f"SELECT seq, type, id, op, updated_at, at FROM _sync_changes WHERE {where} "
            "ORDER BY seq LIMIT ?",
            (*args, limit),
        )
    ]


def pruned_through(conn: sqlite3.Connection) -> int:
    """The last sequence number retention dropped (0: none)."""
    row = conn.execute("SELECT value FROM _sync_meta WHERE key = ?", (PRUNED_KEY,)).fetchone()
    return int(row[0]) if row and row[0] else 0


def prune(conn: sqlite3.Connection, keep_days: float) -> int:
    """Drop entries older than `keep_days` (a prefix of the feed: entries are appended in time
    order), remember the last one dropped, and return how many went."""
    cutoff = iso_ms(time.time() - keep_days * 86400)
    top = conn.execute("SELECT max(seq) FROM _sync_changes WHERE at < ?", (cutoff,)).fetchone()[0]
    if top is None:
        return 0
    n = conn.execute("DELETE FROM _sync_changes WHERE seq <= ?", (top,)).rowcount
    conn.execute(
        "INSERT INTO _sync_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
        "value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
        (PRUNED_KEY, str(int(top))),
    )
    return int(n)


class ChangeFeed:
    """The change feed of one open mirror (`Mirror.changes`). A mirror written before the feed
    existed reads as an empty feed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def since(
        self,
        since: int = 0,
        limit: int = 1000,
        *,
        types: Sequence[str] = (),
        upto: int | None = None,
    ) -> list[Change]:
        """Entries after sequence number `since` (at most `upto`), of `types` or all, oldest
        first, at most `limit`."""
        if not _exists(self.conn, "_sync_changes"):
            return []
        return read(self.conn, since, limit, types, upto)

    def new_versions(self, type_name: str, since: int, upto: int) -> list[int]:
        """The rows of `type_name` given a version the mirror did not hold (`upsert`, `repair`:
        never a `links` entry) after `since`, through `upto`, ascending."""
        if not _exists(self.conn, "_sync_changes"):
            return []
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT DISTINCT id FROM _sync_changes WHERE seq > ? AND seq <= ? AND type = ? "
                "AND op IN ('upsert', 'repair') AND id IS NOT NULL ORDER BY id",
                (since, upto, type_name),
            )
        ]

    def last(self) -> int:
        """The newest entry's sequence number, or the last one pruned when the feed is empty."""
        if not _exists(self.conn, "_sync_changes"):
            return 0
        return max(last_seq(self.conn), pruned_through(self.conn))

    def pruned_through(self) -> int:
        """The last sequence number retention dropped (0: none): a reader asking from before
        it has missed entries and is told so (`sync.readers.changes`)."""
        return pruned_through(self.conn)

    def prune(self, keep_days: float) -> int:
        """Drop entries older than `keep_days`, in one transaction; the sequence numbers go
        on, and the last one dropped is remembered (`pruned_through`)."""
        with write_transaction(self.conn):
            return prune(self.conn, keep_days)

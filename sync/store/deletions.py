"""Deletions and their tombstones: rows removed with their links, and kept from coming back.

Deleting a row takes its links, the links that name it and its memberships with it, in one
transaction; a mall takes its memberships and hours too.

Two kinds of deletion, and only one keeps anything from coming back:

- **The deletions feed** (`Deletions.apply_feed`) is dated evidence. An entry deletes a mirrored
  row only if the row is older than the entry (`updated_at < created_at`, both normalised;
  a row without a stamp yields to the entry): a newer row is the id created again, and stays;
  one stamped the entry's very moment is left for `filter[id]` (`FeedApplied.tied`).
  Each entry writes a tombstone (`_sync_tombstones`: type, id, `deleted_at` = the entry's
  `created_at`, `source` = 'feed') that refuses copies stamped before it: a page fetched
  before the deletion and written after it must not bring the row back. A copy stamped after
  it wins and lifts it (the spec never says ids are not reused). A copy stamped its very moment
  is no evidence either way (stamps of whole seconds: the row deleted and created again within
  one second, or the old row changed in the second it was deleted): it is left out and noted
  (`Deletions.ties`), and `filter[id]` decides (`sync.jobs.tombstoneties`): served after the
  tombstone was written, it is written under `Deletions.vouched` and lifts it. Rows without
  `updated_at` (tags, groups) carry no stamp to compare: their tombstone refuses copies for
  `STAMPLESS_TOMBSTONE_SECONDS`. An entry without a readable `created_at` removes only rows
  without a stamp; a stamped row is left to the reconcile's `filter[id]`.
- **Inference** (`Deletions.delete`: `filter[id]` confirmed a row gone, a row absent from every
  listing, a gone mall's rows) removes the row and leaves nothing behind: as soon as the
  upstream lists or serves the row again, whatever its stamp, it is written again. An
  inference is not proof of a deletion (a "current" list drops items that still exist).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.stamps import now_iso, shift
from sync.pipeline.batches import Staged
from sync.store import links, memberships
from sync.store.schema import Schema
from sync.store.transaction import write_transaction

_log = get_logger("sync.store")

#: `_sync_tombstones.source` of the only tombstones written: the deletions feed's.
FEED = "feed"

#: How long a tombstone of a row without `updated_at` (tags, groups) refuses copies: those
#: carry no stamp to compare with the deletion's, so a copy is taken for a page fetched before
#: the deletion only within this window, and for a re-created row after it.
STAMPLESS_TOMBSTONE_SECONDS = 600.0


@dataclass
class FeedApplied:
    """What applying one type's feed entries did: rows removed, ids kept because the mirrored
    row is newer than its entry (created again under the same id), and entries without a
    readable `created_at`."""

    removed: int = 0
    kept: list[int] = field(default_factory=list)
    unstamped: int = 0
    #: Rows stamped the very moment of their entry: no evidence either way (an upstream whose
    #: stamps count whole seconds creates a row again in the second it was deleted), left
    #: untouched and untombstoned for `filter[id]` to decide (`sync.jobs.feed`).
    tied: list[int] = field(default_factory=list)


def stampless_horizon(now: str) -> str:
    """The moment (normalised, as tombstones are dated) after which a tombstone of a row
    without `updated_at` still refuses copies at local time `now`."""
    return shift(now, -STAMPLESS_TOMBSTONE_SECONDS)


def tombstone_holds(deleted_at: str | None, stamp: Any, horizon: str) -> bool:
    """Whether a tombstone of `deleted_at` refuses a copy stamped `stamp` (normalised
    `updated_at`, or None for a type without one); `horizon`: `stampless_horizon` of now, one
    per page, so no row asks the clock. A copy stamped its very moment is refused here too: the
    page write notes it for `filter[id]` to decide (`Deletions.drop_tombstoned`)."""
    if deleted_at is None:
        return True  # a tombstone from before versions: as before, it holds
    if isinstance(stamp, str):
        return stamp <= deleted_at
    return deleted_at > horizon


class Deletions:
    """Deletes rows with their links and memberships, and keeps their tombstones.

    Whether any tombstone exists is looked up once and then kept: on a mirror that never
    deleted anything, a page write asks nothing of `_sync_tombstones`.
    """

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        self.conn = conn
        self.schema = schema
        self._any: bool | None = None  # whether any tombstone exists; None until looked up
        #: Per type, rows a copy stamped their tombstone's very moment reached, with the malls
        #: whose listings served it (None: a top-level scope): for `filter[id]` to decide.
        #: Kept in this process only: a row left out is missing, so the proof meets it again.
        self.ties: dict[str, dict[int, set[int | None]]] = {}
        self._vouched: dict[str, set[int]] = {}

    def held(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` that have one: id -> deleted_at."""
        if self._any is None:
            self._any = bool(self.conn.execute("SELECT 1 FROM _sync_tombstones LIMIT 1").fetchone())
        if not self._any or not ids:
            return {}
        out: dict[int, str | None] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            for rid, at in self.conn.execute(
                f"SELECT id, deleted_at FROM _sync_tombstones WHERE type = ? AND id IN "
                f"({','.join('?' * len(chunk))})",
                (type_name, *chunk),
            ):
                out[int(rid)] = at
        return out

    def drop_tombstoned(self, b: Staged) -> None:
        """Leave out of `b` the rows a tombstone refuses; lift those a newer copy outlives."""
        if not b.ids:
            return
        dead = self.held(b.rtype.name, b.ids)
        if not dead:
            return
        pos = b.columns.index("updated_at") + 1 if "updated_at" in b.columns else None
        scoped = b.rtype.level == "mall" and "mall_id" in b.columns
        mall_pos = b.columns.index("mall_id") + 1 if scoped else None
        vouched = self._vouched.get(b.type, set())
        horizon = stampless_horizon(now_iso())
        keep: list[bool] = []
        lifted: list[int] = []
        for row in b.rows:
            rid = row[0]
            stamp = row[pos] if pos is not None else None
            if rid not in dead:
                keep.append(True)
            elif stamp is not None and stamp == dead[rid] and rid not in vouched:
                keep.append(False)  # tied with its tombstone: `filter[id]` decides
                mall = row[mall_pos] if mall_pos is not None else None
                self.ties.setdefault(b.type, {}).setdefault(rid, set()).add(mall)
            elif (stamp is not None and stamp == dead[rid]) or not tombstone_holds(
                dead[rid], stamp, horizon
            ):
                keep.append(True)
                lifted.append(rid)
            else:
                keep.append(False)
        if lifted:
            # Created again (an id re-used) or changed after its deletion: the copy wins.
            self.conn.execute(
                f"DELETE FROM _sync_tombstones WHERE type = ? AND id IN "
                f"({','.join('?' * len(lifted))})",
                (b.rtype.name, *lifted),
            )
            _log.info("tombstone.lifted", type=b.rtype.name, ids=lifted[:20], count=len(lifted))
        if not all(keep):
            b.keep(keep)
            b.dropped = keep.count(False)

    def take_ties(self, type_name: str) -> dict[int, set[int | None]]:
        """The rows of `type_name` tied with their tombstone since the last call, each with
        the malls whose listings served it (None: a top-level scope); forgotten here."""
        return self.ties.pop(type_name, {})

    def note_ties(self, type_name: str, ties: Mapping[int, set[int | None]]) -> None:
        """Note `ties` of `type_name` again (taken, not settled: a failure)."""
        held = self.ties.setdefault(type_name, {})
        for rid, malls in ties.items():
            held.setdefault(rid, set()).update(malls)

    @contextlib.contextmanager
    def vouched(self, type_name: str, ids: Iterable[int]) -> Iterator[None]:
        """While the block runs, a copy of `ids` stamped its tombstone's very moment is written
        and lifts it: `filter[id]` served it after the tombstone was written."""
        ids = set(ids)
        held = self._vouched.setdefault(type_name, set())
        held |= ids
        try:
            yield
        finally:
            held -= ids

    def delete(self, type_name: str, ids: list[int]) -> int:
        """Delete rows (`ids`, distinct) inferred gone, with their links, memberships and the
        links naming them, in one transaction; no tombstone (see the module docstring)."""
        if not ids:
            return 0
        with write_transaction(self.conn):
            return self._delete(type_name, ids)

    def apply_feed(self, type_name: str, entries: Mapping[int, str | None]) -> FeedApplied:
        """Apply deletions feed entries (id -> the entry's normalised `created_at`, or None):
        delete each row not newer than its entry and tombstone it at the entry's moment, in
        one transaction (no other write between the comparison and the deletion)."""
        out = FeedApplied()
        if not entries:
            return out
        stamped = "updated_at" in self.schema.columns(type_name)
        now = now_iso()
        with write_transaction(self.conn):
            dated = {i: at for i, at in entries.items() if at is not None}
            out.unstamped = len(entries) - len(dated)
            newer, tied = self._compared(type_name, dated) if stamped else (set(), set())
            kept = newer | tied
            if stamped:
                # An entry without a moment is no evidence against a stamped row.
                kept |= {i for i, at in entries.items() if at is None}
            out.kept = sorted(newer)
            out.tied = sorted(tied)
            tombs = [
                (type_name, i, at or now, FEED)
                for i, at in entries.items()
                if (at is not None or not stamped) and i not in tied
            ]
            if tombs:
                self._any = True
                self.conn.executemany(
                    "INSERT INTO _sync_tombstones (type, id, deleted_at, source) VALUES "
                    "(?, ?, ?, ?) ON CONFLICT (type, id) DO UPDATE SET deleted_at = max("
                    "coalesce(_sync_tombstones.deleted_at, ''), excluded.deleted_at), "
                    "source = excluded.source",
                    tombs,
                )
            out.removed = self._delete(type_name, [i for i in entries if i not in kept])
        return out

    def _compared(self, type_name: str, dated: Mapping[int, str]) -> tuple[set[int], set[int]]:
        """The ids of `dated` whose mirrored row is stamped after the entry's moment, and those
        stamped at exactly that moment."""
        newer: set[int] = set()
        tied: set[int] = set()
        items = list(dated.items())
        for start in range(0, len(items), 400):
            chunk = items[start : start + 400]
            values = ",".join("(?, ?)" for _ in chunk)
            for rid, after in self.conn.execute(
                f"WITH e(id, at) AS (VALUES {values}) SELECT t.id, t.updated_at > e.at "
                f"FROM [{type_name}] t JOIN e ON t.id = e.id WHERE t.updated_at >= e.at",
                [v for pair in chunk for v in pair],
            ):
                (newer if after else tied).add(int(rid))
        return newer, tied

    def _delete(self, type_name: str, ids: list[int]) -> int:
        """Inside a write transaction: the rows, their links and memberships; a mall's too."""
        removed = 0
        if self.schema.columns(type_name):
            for start in range(0, len(ids), 500):
                removed += self._delete_rows(type_name, ids[start : start + 500])
        if type_name == "malls":
            # A mall's members lose it (their rows stay until no mall lists them), and its
            # hours and current hours go with it.
            for mall in ids:
                memberships.drop_mall(self.conn, mall)
        return removed

    def _delete_rows(self, type_name: str, chunk: list[int]) -> int:
        marks = ",".join("?" * len(chunk))
        n = self.conn.execute(f"DELETE FROM [{type_name}] WHERE id IN ({marks})", chunk).rowcount
        rtype = catalogue.TYPES.get(type_name)
        for table, owner in links.owned(self.schema, rtype) if rtype else ():
            self.conn.execute(f"DELETE FROM [{table}] WHERE [{owner}] IN ({marks})", chunk)
        # Other rows' links to the deleted rows go with them (a join row upstream): their
        # owners' link lists changed, which the change feed says.
        notes = links.feed_notes(self.conn, self.schema)
        for table, owner_type, owner, other in links.pointing_at(self.schema, type_name):
            owners = self.conn.execute(
                f"DELETE FROM [{table}] WHERE [{other}] IN ({marks}) RETURNING [{owner}]", chunk
            ).fetchall()
            if notes is not None and owners:
                notes.note(owner_type, (int(r[0]) for r in owners))
        memberships.drop_rows(self.conn, type_name, chunk)
        return int(n)

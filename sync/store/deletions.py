"""Deletions and their tombstones: rows removed with their links, and kept from coming back.

Deleting a row takes its links, the links that name it and its memberships with it, in one
transaction; a mall takes its memberships and hours too.

Two kinds of deletion, and only one keeps anything from coming back:

- **The deletions feed** (`Deletions.apply_feed`) is dated evidence. An entry deletes a mirrored
  row only if the row is older than the entry by more than the *window* (a row without a stamp
  yields to the entry): a row newer by more than the window is the id created again, and
  stays; one within the window either side is left for `filter[id]` (`FeedApplied.tied`).
  Each entry writes a tombstone (`_sync_tombstones`: type, id, `deleted_at` = the entry's
  `created_at`, `source` = 'feed') that refuses copies stamped before it: a page fetched
  before the deletion and written after it must not bring the row back. A copy stamped after
  it wins and lifts it (the spec never says ids are not reused).
- **The window** (`Deletions.window`, at least `TIE_WINDOW_SECONDS`): how far apart the
  upstream's clocks and precisions can put a row and its feed entry. The spec fixes neither one
  clock nor one precision: stamps of whole seconds give a row deleted and created again within
  one second a stamp up to a second *before* its entry, and so does an app server whose clock
  is behind the feed's. Within the window a stamp is no evidence either way: the copy is left
  out and noted (`Deletions.ties`), and `filter[id]` decides (`sync.jobs.incremental.tombstoneties`,
  `sync.jobs.evidence`): served after the tombstone was written, it is written under
  `Deletions.vouched` and lifts it. A row found live that way further from its entry than the
  window widens it (`Deletions.widen`, kept in `_sync_meta`).
- **A tombstone contradicted**: a copy it refused, served again `CONTRADICTED_AFTER_SECONDS`
  later (a proof cycle: no lagging replica lags that long), is doubted the same way: noted for
  `filter[id]`, never refused for good (`Deletions.drop_tombstoned`; the first refusal of each
  row is remembered in this process, `REFUSALS_KEPT` at most).
  Rows without `updated_at` (tags, groups) carry no stamp to compare: their tombstone refuses
  copies for `STAMPLESS_TOMBSTONE_SECONDS`. An entry without a readable `created_at` removes
  only rows without a stamp; a stamped row is left to the reconcile's `filter[id]`.
- **Inference** (`Deletions.delete`: `filter[id]` confirmed a row gone, a row absent from every
  listing, a gone mall's rows) removes the row and leaves nothing behind: as soon as the
  upstream lists or serves the row again, whatever its stamp, it is written again. An
  inference is not proof of a deletion (a "current" list drops items that still exist).

These rules are written once, in `Deletions`, which holds a store's statements (`TombstoneBook`):
`SqliteTombstones` here, `sync.store.pg.deletions.PgTombstones` in the PostgreSQL mirror.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.stamps import now_iso, shift, shift_ms
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
#: The least window (module docstring): stamps of whole seconds put a row up to a second from
#: its entry.
TIE_WINDOW_SECONDS = 1.0
#: The widest the window grows to from what `filter[id]` found (`Deletions.widen`).
TIE_WINDOW_MAX_SECONDS = 60.0
#: A copy a tombstone refused, served again this long after (the default staleness bound: a
#: proof cycle), makes the tombstone doubted, not believed (`Deletions.drop_tombstoned`).
CONTRADICTED_AFTER_SECONDS = 3600.0
#: Rows whose first refusal is remembered (oldest forgotten first).
REFUSALS_KEPT = 100_000
#: `_sync_meta` key of the window learned (seconds).
WINDOW_KEY = "tie_window_seconds"

#: What a tombstone makes of a copy: refused (a copy made before the deletion), tied (no
#: evidence either way: `filter[id]` decides), lifted (the copy is newer: it wins).
TombVerdict = Literal["refused", "tied", "lifted"]


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
    #: untouched and untombstoned for `filter[id]` to decide (`sync.jobs.incremental.feed`).
    tied: list[int] = field(default_factory=list)


def stampless_horizon(now: str) -> str:
    """The moment (normalised, as tombstones are dated) after which a tombstone of a row
    without `updated_at` still refuses copies at local time `now`."""
    return shift(now, -STAMPLESS_TOMBSTONE_SECONDS)


@dataclass(frozen=True)
class Judge:
    """What `tombstone_verdict` compares with, fixed once per page so no row asks the clock:
    the stampless horizon (`stampless_horizon` of now) and the window in milliseconds."""

    horizon: str
    window_ms: int = int(TIE_WINDOW_SECONDS * 1000)

    @classmethod
    def now(cls, window_s: float) -> Judge:
        return cls(stampless_horizon(now_iso()), round(window_s * 1000))


def tombstone_verdict(deleted_at: str | None, stamp: Any, judge: Judge) -> TombVerdict:
    """The one rule for a copy (normalised `updated_at` `stamp`, or None for a type without
    one) meeting a tombstone of `deleted_at` (module docstring): newer than the window, lifted;
    within it either side, tied; older, refused."""
    if deleted_at is None:
        return "refused"  # a tombstone from before versions: as before, it holds
    if not isinstance(stamp, str):
        return "refused" if deleted_at > judge.horizon else "lifted"
    try:
        low = shift_ms(deleted_at, -judge.window_ms)
        high = shift_ms(deleted_at, judge.window_ms)
    except ValueError:  # not the normalised form: compared as it is
        low = high = deleted_at
    if stamp > high:
        return "lifted"
    if stamp >= low:
        return "tied"
    return "refused"


class TombstoneBook(Protocol):
    """What a store gives the rules (`Deletions`): its statements on the rows and
    `_sync_tombstones`. `SqliteTombstones` below, `sync.store.pg.deletions.PgTombstones` in the
    PostgreSQL mirror: the rules hold one of them (composition), so one rule holds in both."""

    def saved_window(self) -> Any:
        """The window kept in `_sync_meta` under `WINDOW_KEY` (None: none, or no table)."""
        ...

    def any_tombstone(self) -> bool:
        """Whether `_sync_tombstones` holds any row."""
        ...

    def tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` (not empty) that have one: id -> deleted_at."""
        ...

    def lift(self, type_name: str, ids: list[int]) -> None:
        """Delete the tombstones of `ids` (inside the page's transaction)."""
        ...

    def keep_window(self, value: str) -> None:
        """Keep the window (seconds, as text) in `_sync_meta` under `WINDOW_KEY`, committed."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """A write transaction: its own, or a savepoint of the caller's."""
        ...

    def stamped(self, type_name: str) -> bool:
        """Whether the table of `type_name` has an `updated_at` column."""
        ...

    def compared(
        self, type_name: str, dated: Mapping[int, str], window: float
    ) -> tuple[set[int], set[int]]:
        """The ids of `dated` whose mirrored row is stamped after the entry's moment by more
        than `window` seconds, and those within it either side (module docstring)."""
        ...

    def tombstone(self, type_name: str, tombs: list[tuple[int, str]]) -> None:
        """Write feed tombstones (id, deleted_at); one already there keeps the later moment."""
        ...

    def delete(self, type_name: str, ids: list[int]) -> int:
        """Inside a write transaction: the rows, their links and memberships; a mall's too."""
        ...


class Deletions:
    """What the mirror decides of deletions, whatever store keeps the rows and the tombstones:
    the rules of the module docstring (the window, what a tombstone makes of each copy, ties,
    vouched ids, contradicted tombstones, which feed entries delete and which tombstone), and
    what this process remembers for them; the statements are the `book`'s (`TombstoneBook`).

    Whether any tombstone exists is looked up once and then kept: on a mirror that never
    deleted anything, a page write asks nothing of `_sync_tombstones`.
    """

    def __init__(self, book: TombstoneBook) -> None:
        self.book = book
        self._any: bool | None = None  # whether any tombstone exists; None until looked up
        #: Per type, rows a copy stamped their tombstone's very moment reached, with the malls
        #: whose listings served it (None: a top-level scope): for `filter[id]` to decide.
        #: Kept in this process only: a row left out is missing, so the proof meets it again.
        self.ties: dict[str, dict[int, set[int | None]]] = {}
        self._vouched: dict[str, set[int]] = {}
        #: When each row a tombstone refused was first refused (monotonic seconds).
        self._refused: OrderedDict[tuple[str, int], float] = OrderedDict()
        self.clock = time.monotonic
        #: The window in seconds (module docstring), restored from `_sync_meta`.
        self.window = TIE_WINDOW_SECONDS
        with contextlib.suppress(TypeError, ValueError):
            saved = book.saved_window()
            if saved is not None:
                self.window = restored_window(saved)

    # -- the rules ----------------------------------------------------------------------------

    def widen(self, gap_s: float) -> bool:
        """`filter[id]` found a row live `gap_s` seconds from the entry that dated it (a row
        written after its deletion, stamped before it): the window covers that gap from now on,
        with a margin, kept in `_sync_meta`. Whether it widened."""
        wanted = min(TIE_WINDOW_MAX_SECONDS, gap_s * 1.5)
        if wanted <= self.window:
            return False
        self.window = wanted
        self.book.keep_window(str(round(wanted, 3)))
        _log.warning(
            "tombstone.window_widened",
            seconds=round(wanted, 3),
            hint="a row created again was stamped this far before its deletion entry: copies "
            "within it of a tombstone are asked by filter[id], not refused",
        )
        return True

    def held(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` that have one: id -> deleted_at."""
        if self._any is None:
            self._any = self.book.any_tombstone()
        if not self._any or not ids:
            return {}
        return self.book.tombstones(type_name, ids)

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
        judge = Judge.now(self.window)
        keep: list[bool] = []
        lifted: list[int] = []
        for row in b.rows:
            rid = row[0]
            stamp = row[pos] if pos is not None else None
            if rid not in dead:
                keep.append(True)
                continue
            verdict = tombstone_verdict(dead[rid], stamp, judge)
            if verdict == "lifted" or rid in vouched:
                keep.append(True)
                lifted.append(rid)
            elif verdict == "tied" or self._contradicted(b.type, rid):
                keep.append(False)  # no evidence either way: `filter[id]` decides
                mall = row[mall_pos] if mall_pos is not None else None
                self.ties.setdefault(b.type, {}).setdefault(rid, set()).add(mall)
            else:
                keep.append(False)
        if lifted:
            # Created again (an id re-used) or changed after its deletion: the copy wins.
            self.book.lift(b.rtype.name, lifted)
            _log.info("tombstone.lifted", type=b.rtype.name, ids=lifted[:20], count=len(lifted))
        if not all(keep):
            b.keep(keep)
            b.dropped = keep.count(False)

    def _contradicted(self, type_name: str, rid: int) -> bool:
        """A copy of `rid` refused: whether one was refused `CONTRADICTED_AFTER_SECONDS` ago
        already (the tombstone is doubted, and the memory of it starts again)."""
        key, now = (type_name, rid), self.clock()
        first = self._refused.get(key)
        if first is None:
            self._refused[key] = now
            if len(self._refused) > REFUSALS_KEPT:
                self._refused.popitem(last=False)
            return False
        if now - first < CONTRADICTED_AFTER_SECONDS:
            return False
        del self._refused[key]
        return True

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
        """While the block runs, a copy of `ids` (rows held for `filter[id]`: tied with their
        tombstone, or contradicting it) is written and lifts it: `filter[id]` served it after
        the tombstone was written."""
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
        with self.book.transaction():
            return self.book.delete(type_name, ids)

    def apply_feed(self, type_name: str, entries: Mapping[int, str | None]) -> FeedApplied:
        """Apply deletions feed entries (id -> the entry's normalised `created_at`, or None):
        delete each row not newer than its entry and tombstone it at the entry's moment, in
        one transaction (no other write between the comparison and the deletion)."""
        out = FeedApplied()
        if not entries:
            return out
        stamped = self.book.stamped(type_name)
        now = now_iso()
        with self.book.transaction():
            dated = {i: at for i, at in entries.items() if at is not None}
            out.unstamped = len(entries) - len(dated)
            newer, tied = (
                self.book.compared(type_name, dated, self.window) if stamped else (set(), set())
            )
            kept = newer | tied
            if stamped:
                # An entry without a moment is no evidence against a stamped row.
                kept |= {i for i, at in entries.items() if at is None}
            out.kept = sorted(newer)
            out.tied = sorted(tied)
            tombs = [
                (i, at or now)
                for i, at in entries.items()
                if (at is not None or not stamped) and i not in tied
            ]
            if tombs:
                self._any = True
                self.book.tombstone(type_name, tombs)
            out.removed = self.book.delete(type_name, [i for i in entries if i not in kept])
        return out


class SqliteTombstones:
    """The SQLite mirror's `TombstoneBook`: rows deleted with their links and memberships,
    tombstones kept in `_sync_tombstones`."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        self.conn = conn
        self.schema = schema

    def saved_window(self) -> Any:
        try:
            got = self.conn.execute(
                "SELECT value FROM _sync_meta WHERE key = ?", (WINDOW_KEY,)
            ).fetchone()
        except sqlite3.Error:
            return None
        return None if got is None else got[0]

    def any_tombstone(self) -> bool:
        return bool(self.conn.execute("SELECT 1 FROM _sync_tombstones LIMIT 1").fetchone())

    def tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
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

    def lift(self, type_name: str, ids: list[int]) -> None:
        self.conn.execute(
            f"DELETE FROM _sync_tombstones WHERE type = ? AND id IN ({','.join('?' * len(ids))})",
            (type_name, *ids),
        )

    def keep_window(self, value: str) -> None:
        with write_transaction(self.conn):
            self.conn.execute(
                "INSERT INTO _sync_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value",
                (WINDOW_KEY, value),
            )

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return write_transaction(self.conn)

    def stamped(self, type_name: str) -> bool:
        return "updated_at" in self.schema.columns(type_name)

    def tombstone(self, type_name: str, tombs: list[tuple[int, str]]) -> None:
        self.conn.executemany(
            "INSERT INTO _sync_tombstones (type, id, deleted_at, source) VALUES "
            "(?, ?, ?, ?) ON CONFLICT (type, id) DO UPDATE SET deleted_at = max("
            "coalesce(_sync_tombstones.deleted_at, ''), excluded.deleted_at), "
            "source = excluded.source",
            [(type_name, i, at, FEED) for i, at in tombs],
        )

    def compared(
        self, type_name: str, dated: Mapping[int, str], window: float
    ) -> tuple[set[int], set[int]]:
        newer: set[int] = set()
        tied: set[int] = set()
        ms = round(window * 1000)
        items = [(rid, *around(at, ms)) for rid, at in dated.items()]
        for start in range(0, len(items), 300):
            chunk = items[start : start + 300]
            values = ",".join("(?, ?, ?)" for _ in chunk)
            for rid, after in self.conn.execute(
                f"WITH e(id, lo, hi) AS (VALUES {values}) SELECT t.id, t.updated_at > e.hi "
                f"FROM [{type_name}] t JOIN e ON t.id = e.id WHERE t.updated_at >= e.lo",
                [v for row in chunk for v in row],
            ):
                (newer if after else tied).add(int(rid))
        return newer, tied

    def delete(self, type_name: str, ids: list[int]) -> int:
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


def restored_window(value: Any) -> float:
    """The window kept in `_sync_meta` as read back, within its bounds; TypeError or ValueError
    for a value that is no number (the least window stays)."""
    return min(TIE_WINDOW_MAX_SECONDS, max(TIE_WINDOW_SECONDS, float(value)))


def around(at: str, ms: int) -> tuple[str, str]:
    """The window of `ms` milliseconds either side of a normalised stamp (the stamp itself
    when it is not in the normalised form)."""
    try:
        return shift_ms(at, -ms), shift_ms(at, ms)
    except ValueError:
        return at, at

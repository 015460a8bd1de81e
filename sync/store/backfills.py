"""Backfill checkpoints: which pages of each (type, scope) are in, and which types ever finished.

`_sync_backfill` holds one row per (type, scope) a backfill started (page size, the last page
number, start and end); `_sync_backfill_pages` the pages committed, each in the transaction of
its own rows (`Backfills.checkpoint`, called by `Mirror.write_staged`), so a resumed backfill
asks again exactly the pages it lacks. Which types a backfill ever finished is kept apart, in
`_sync_meta` (`COMPLETED_KEY`): a reset or a failed later backfill never takes a type out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sync.store import runs
from sync.store.meta import Meta
from sync.store.transaction import write_transaction

#: `_sync_meta` key: the types a backfill has finished, each with when (JSON). A later backfill
#: that fails, or is stopped, never takes a type out: the daemon copies again only the types
#: no backfill ever finished (`Backfills.completed_types`).
COMPLETED_KEY = "backfill_completed"
#: `_sync_meta` key a backfill run keeps its start under (`sync.jobs.backfilling.backfillrun`);
#: a reset removes it.
STARTED_KEY = "backfill_started_at"


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


def resumes(state: BackfillState | None, page_size: int) -> bool:
    """Whether `Backfills.start` resumes where `state` stands, keeping the pages already
    committed: an unfinished backfill of the same page size. Any other starts afresh."""
    return state is not None and state.finished_at is None and state.page_size == page_size


def begun(page_size: int, started_at: str) -> BackfillState:
    """The state `Backfills.start` leaves when it starts afresh: no page in, no `last` yet."""
    return BackfillState(frozenset(), None, page_size, started_at, None)


def begin_walk(
    state: BackfillState | None,
    page_size: int,
    started_at: str,
    afresh: Callable[[], None],
) -> BackfillState | None:
    """`Backfills.begin`'s rule, for either store (`afresh`: its statements starting the scope
    from its first page): None when the walk finished already (nothing to walk); the state when
    it resumes (`resumes`); else `afresh()` and the state it leaves (`begun`)."""
    if state is not None and state.finished_at is not None:
        return None
    if resumes(state, page_size):
        return state
    afresh()
    return begun(page_size, started_at)


def completed(
    recorded: str | None,
    polled: Iterable[tuple[str, str | None]],
    scopes: Iterable[tuple[str, int, int, str | None]],
) -> dict[str, str]:
    """The types some backfill finished, with when (`Backfills.completed_types`): those of the
    record kept under `COMPLETED_KEY` (`recorded`, its JSON; damaged counts as none), then for
    a mirror written before that record, each type with a poll cursor (`polled`: type, its
    first cursor's `updated_at`) and each type whose every checkpoint is finished (`scopes`:
    type, scopes, scopes finished, the last finish)."""
    try:
        done: dict[str, str] = dict(json.loads(recorded or "{}"))
    except (ValueError, TypeError):
        done = {}
    for t, at in polled:
        done.setdefault(str(t), str(at))
    for t, count, finished, at in scopes:
        if count and count == finished:
            done.setdefault(str(t), str(at))
    return done


def completed_record(done: dict[str, str]) -> str:
    """The JSON kept under `COMPLETED_KEY` for `done`, keys sorted."""
    return json.dumps(done, sort_keys=True)


class Backfills:
    """The backfill checkpoints of one mirror (`Mirror.backfills`)."""

    def __init__(self, conn: sqlite3.Connection, meta: Meta) -> None:
        self.conn = conn
        self.meta = meta

    def state(self, type_name: str, scope: str) -> BackfillState | None:
        """Where the backfill of (type, scope) stands; None: never started (or reset)."""
        row = self.conn.execute(
            "SELECT page_size, last, started_at, finished_at FROM _sync_backfill "
            "WHERE type = ? AND scope = ?",
            (type_name, scope),
        ).fetchone()
        if row is None:
            return None
        pages = frozenset(
            int(r[0])
            for r in self.conn.execute(
                "SELECT page FROM _sync_backfill_pages WHERE type = ? AND scope = ?",
                (type_name, scope),
            )
        )
        return BackfillState(pages, row[1], row[0], row[2], row[3])

    def start(self, type_name: str, scope: str, *, page_size: int, started_at: str) -> None:
        """Begin (type, scope) afresh, or resume it: an unfinished one of the same page size
        keeps the pages already committed."""
        if resumes(self.state(type_name, scope), page_size):
            return  # resume: keep the pages already committed
        self._afresh(type_name, scope, page_size, started_at)

    def _afresh(self, type_name: str, scope: str, page_size: int, started_at: str) -> None:
        """(type, scope) from its first page: the pages committed forgotten, in one
        transaction."""
        with write_transaction(self.conn):
            self.conn.execute(
                "DELETE FROM _sync_backfill_pages WHERE type = ? AND scope = ?",
                (type_name, scope),
            )
            self.conn.execute(
                "INSERT OR REPLACE INTO _sync_backfill (type, scope, page_size, last, "
                "started_at, finished_at) VALUES (?, ?, ?, NULL, ?, NULL)",
                (type_name, scope, page_size, started_at),
            )

    def begin(
        self, type_name: str, scope: str, *, page_size: int, started_at: str
    ) -> BackfillState | None:
        """A backfill's walk of (type, scope) begins: None when it finished already (nothing to
        walk), else `start` and the state it leaves (the pages to skip). One read of the state
        where `state`, `start` and `state` again took three (`begun`)."""
        return begin_walk(
            self.state(type_name, scope),
            page_size,
            started_at,
            lambda: self._afresh(type_name, scope, page_size, started_at),
        )

    def finish(self, type_name: str, scope: str, *, finished_at: str) -> None:
        self.conn.execute(
            "UPDATE _sync_backfill SET finished_at = ? WHERE type = ? AND scope = ?",
            (finished_at, type_name, scope),
        )

    def checkpoint(self, cp: PageCheckpoint) -> None:
        """Inside the page's transaction: the page is done, and how many pages there are."""
        self.conn.execute(
            "INSERT OR IGNORE INTO _sync_backfill_pages (type, scope, page) VALUES (?, ?, ?)",
            (cp.type_name, cp.scope, cp.page),
        )
        self.conn.execute(
            "UPDATE _sync_backfill SET last = max(coalesce(last, 0), ?) WHERE type = ? AND scope = ?",
            (cp.last, cp.type_name, cp.scope),
        )

    def started_types(self) -> list[str]:
        """The types any backfill started, sorted (none on a read-only open of a mirror
        without the table)."""
        try:
            rows = self.conn.execute("SELECT DISTINCT type FROM _sync_backfill").fetchall()
        except sqlite3.OperationalError:
            return []
        return sorted(str(t) for (t,) in rows)

    def completed_types(self) -> dict[str, str]:
        """The types some backfill finished, with when: recorded as each type finishes, and
        for a mirror written before that record, a type whose every checkpoint is finished or
        that has a poll cursor (a backfill sets a type's cursors once all its pages are in)."""
        return completed(
            self.meta.get(COMPLETED_KEY),
            self.conn.execute(
                "SELECT type, min(updated_at) FROM _sync_cursors WHERE type != 'deletions' "
                "GROUP BY type"
            ),
            self.conn.execute(
                "SELECT type, count(*), count(finished_at), max(finished_at) FROM _sync_backfill "
                "GROUP BY type"
            ),
        )

    def type_completed(self, type_name: str, at: str) -> None:
        """A backfill finished every scope of `type_name` (`completed_types`); its run is seen
        alive (`sync.store.runs.heartbeat`)."""
        done = self.completed_types()
        done[type_name] = at
        self.meta.set(COMPLETED_KEY, completed_record(done))
        runs.heartbeat(self.conn)

    def reset(self) -> None:
        """Forget the checkpoints to start a new backfill; which types were ever completed is
        kept (`completed_types`), in the same transaction."""
        with write_transaction(self.conn):
            self.meta.set(COMPLETED_KEY, completed_record(self.completed_types()))
            self.conn.execute("DELETE FROM _sync_backfill")
            self.conn.execute("DELETE FROM _sync_backfill_pages")
            self.meta.set(STARTED_KEY, None)

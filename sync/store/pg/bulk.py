"""Group commit and the end phase of the PostgreSQL mirror: a bulk load's two switches.

The counterparts of `sync.store.groupcommit.GroupCommit` and `sync.store.indexes.EndPhase`
(`PgMirror.group`, `PgMirror.indexes`). **Group commit**: a backfill writes `pages` pages to a
transaction (`start`, `end`), so a page's commit is not a round trip and a flush each; the daemon
keeps one transaction per page (a webhook's 202 follows a real commit). A failure rolls the
open group back whole, its pages' checkpoints with it, as SQLite's group does. The group
commits only while this process holds the mirror's active lock (`fence`, asked last in the
transaction): a writer that lost it commits nothing more.

**The end phase**: a bulk load into empty tables drops the change feed's triggers (`defer(True)`:
one `backfill` entry per type instead of one per row, and no `links` entries), and makes them
again at its end with the views (`defer(False)`). Unlike SQLite, no secondary index is
deferred: the PostgreSQL page write makes only the key and the link tables' reverse index.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg

from sync.core.errors import MirrorError
from sync.model import catalogue
from sync.store.pg import changes
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.schema import Schema

#: Asked before a write transaction commits: whether this process may still write (the active
#: lock's `fence` on the write connection; always True for a mirror opened without a lock).
Fence = Callable[[psycopg.Connection[Any]], bool]

#: What a write refused for want of the lock says.
LOST_LOCK = (
    "[mirror] url: this ccsync no longer holds the mirror's active lock (its lock session "
    "ended: the server restarted, or the network dropped it); nothing more is written. A "
    "standby takes over; restart this one to make it the standby"
)


class PgGroup:
    """Transactions of the page write on one connection in autocommit: one per page, or one per
    `size` pages (`start`) during a bulk load (`sync.store.seamparts.GroupPart`)."""

    def __init__(self, conn: psycopg.Connection[Any], fence: Fence) -> None:
        self.conn = conn
        self.fence = fence
        self.size = 0  # pages a transaction (0: one, not grouped)
        self.seconds = 2.0
        self._open: contextlib.ExitStack | None = None
        self._pages = 0
        self._began = 0.0

    def start(self, pages: int, seconds: float = 2.0) -> None:
        """Group `pages` pages (or `seconds` of them) to a transaction from now on."""
        self.end()
        self.size, self.seconds = max(0, pages), seconds

    def end(self) -> None:
        """Commit the open group, and write one page a transaction from now on."""
        self.commit()
        self.size = 0

    @contextlib.contextmanager
    def page(self) -> Iterator[None]:
        """One page's writes: its own transaction, or a part of the open group (opened first);
        a failure rolls back the page, or the whole open group, and is raised."""
        if not self.size:
            with self.conn.transaction():
                yield
                self._fenced()
            return
        if self._open is None:
            stack = contextlib.ExitStack()
            stack.enter_context(self.conn.transaction())
            self._open, self._pages, self._began = stack, 0, time.monotonic()
        try:
            yield
        except BaseException as exc:
            self._rollback(exc)
            raise
        self._pages += 1
        if self._pages >= self.size or time.monotonic() - self._began >= self.seconds:
            self.commit()

    def commit(self) -> None:
        """Commit the open group, if any (fenced first)."""
        stack, self._open = self._open, None
        if stack is None:
            return
        try:
            self._fenced()
        except BaseException as exc:
            stack.__exit__(type(exc), exc, exc.__traceback__)
            raise
        stack.close()

    def _rollback(self, exc: BaseException) -> None:
        stack, self._open = self._open, None
        if stack is not None:
            with contextlib.suppress(psycopg.Error):
                stack.__exit__(type(exc), exc, exc.__traceback__)

    def _fenced(self) -> None:
        if not self.fence(self.conn):
            raise MirrorError(LOST_LOCK)

    @property
    def open(self) -> bool:
        """Whether a group's transaction is open (a schema change commits it first)."""
        return self._open is not None


class PgEndPhase:
    """The end phase (`sync.store.seamparts.IndexesPart`): the change feed's triggers and the
    views, deferred during a bulk load into empty tables."""

    def __init__(self, conn: psycopg.Connection[Any], schema: Schema, writer: PageWriter) -> None:
        self.conn = conn
        self.schema = schema
        self.writer = writer
        self.deferred = False

    def defer(self, deferred: bool) -> None:
        """Drop the feed's triggers (a bulk load begins), or make them and the views again and
        note one `backfill` entry per type filled (it ends)."""
        was, self.deferred = self.deferred, deferred
        self.writer.bulk = deferred
        name = self.schema.name
        if deferred:
            changes.drop_triggers(self.conn, name)
            return
        tables = [t for t in catalogue.TYPES if self.schema.has_table(t)]
        if was:
            with self.conn.transaction():
                changes.note_backfill(self.conn, name, tables)
        self.create()

    def create(self) -> None:
        """The feed's triggers of every content table and the views (cheap when all exist)."""
        for table in catalogue.TYPES:
            self.triggers(table)
        self.schema.ensure_views()

    def triggers(self, table: str) -> None:
        """The feed's triggers of one content table, as its columns are now (none during a
        bulk load)."""
        if self.deferred:
            return
        self.schema.forget(table)
        cols = self.schema.columns(table)
        if cols:
            changes.create_triggers(self.conn, self.schema.name, table, cols)

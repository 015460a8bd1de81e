"""Group commit and the end phase of the PostgreSQL mirror: a bulk load's two switches.

The counterparts of `sync.store.groupcommit.GroupCommit` and `sync.store.indexes.EndPhase`
(`PgMirror.group`, `PgMirror.indexes`). **Group commit** (`PgGroup`, the one group mechanism of
the PostgreSQL store): a backfill writes `pages` pages (or `seconds` of them) to a transaction
(`start`, `end`), so a page's commit is not a round trip and a flush each; the daemon keeps one
transaction per page (a webhook's 202 follows a real commit), pipelined as well: a page's
writes go without waiting for their answers, its reads and the fence wait. The open group is a transaction
in *pipeline mode*: a page's statements are sent without waiting for their answers, so the
server merges one page while the client downloads and encodes the next (the writes are
synchronous on the event loop: a round trip waited for is a download stalled); the client
waits only where it reads (the links' guard and held lists of owners not known new, the
fence) and when the group commits. A failure, in a page's statements or in the caller's block,
rolls the open group back whole, its pages' checkpoints with it, as SQLite's group does, and
is raised (a statement's error at the latest when the group syncs, perhaps a page later):
`rolled_back` (given by the owner) is told, so what it remembers of the lost pages goes too.
The group commits only while this process holds the mirror's active lock (`fence`, asked last
in the transaction): a writer that lost it commits nothing more. No savepoint per page (a
transaction with more than 64 subtransactions slows every reader's snapshots).

The keys of each page are taken in id order, those of a group page after page: a second writer
of the same rows could deadlock with a group, which the active lock (`sync.store.pg.lock`)
rules out. A schema change commits the open group first (`commit`) and is made in a transaction
of its own, as a page written alone makes it.

**The end phase**: a bulk load into empty tables drops the change feed's triggers (`defer(True)`:
one `backfill` entry per type instead of one per row, and no `links` entries), and makes them
again at its end with the views (`defer(False)`). The link and membership tables it makes get
their reverse index then too (`sync.store.pg.links.reverse_indexes`: one sort, where an index
entry per insert cost a link insert ~30 % more); a writer's open makes any a killed load left
out. The page write makes no other secondary index.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import pq

from sync.core.errors import MirrorError
from sync.model import catalogue
from sync.store.pg import changes, links
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


def _nothing() -> None:
    """No memo to forget (a group whose owner remembers nothing of its pages)."""


class PgGroup:
    """Transactions of the page write on one connection in autocommit: one per page, or one per
    `size` pages (`start`) during a bulk load, pipelined (`sync.store.seamparts.GroupPart`;
    see the module docstring). `rolled_back` is called when an open group is rolled back."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        fence: Fence,
        rolled_back: Callable[[], None] = _nothing,
    ) -> None:
        self.conn = conn
        self.fence = fence
        self.rolled_back = rolled_back
        self.size = 0  # pages a transaction (0: one, not grouped)
        self.seconds = 2.0
        #: Groups committed so far.
        self.commits = 0
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
            # Pipelined too: its statements go without waiting, the reads and the fence wait.
            with self.conn.pipeline(), self.conn.transaction():
                yield
                self._fenced()
            return
        if self._open is None:
            self._begin()
        try:
            yield
        except BaseException as exc:
            self._rollback(exc)
            raise
        self._pages += 1
        if self._pages >= self.size or time.monotonic() - self._began >= self.seconds:
            self.commit()

    def _begin(self) -> None:
        """Open a group: a transaction in pipeline mode, on an idle connection in autocommit."""
        conn = self.conn
        if not conn.autocommit or conn.info.transaction_status != pq.TransactionStatus.IDLE:
            raise RuntimeError(
                "a PostgreSQL page group needs a connection in autocommit, outside a transaction"
            )
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(conn.pipeline())
            stack.enter_context(conn.transaction())
        except BaseException:
            stack.close()
            raise
        self._open, self._pages, self._began = stack, 0, time.monotonic()

    def commit(self) -> None:
        """Commit the open group, if any (fenced first; waiting for the server): a statement's
        error raised here rolls the whole group back."""
        stack, self._open = self._open, None
        if stack is None:
            return
        try:
            self._fenced()  # its read syncs the pipeline: an earlier statement's error is here
        except BaseException as exc:
            self._close(stack, exc)
            raise
        try:
            stack.close()  # COMMIT; the pipeline synced and left
        except BaseException:
            self.rolled_back()
            raise
        self.commits += 1

    def _rollback(self, exc: BaseException) -> None:
        stack, self._open = self._open, None
        if stack is not None:
            self._close(stack, exc)

    def _close(self, stack: contextlib.ExitStack, exc: BaseException) -> None:
        """Leave the group's transaction and pipeline with `exc` (a rollback), and tell."""
        try:
            with contextlib.suppress(psycopg.Error):
                stack.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            self.rolled_back()

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
        """The feed's triggers of every content table, the link and membership tables' reverse
        indexes and the views (cheap when all exist)."""
        for table in catalogue.TYPES:
            self.triggers(table)
        links.reverse_indexes(self.conn, self.schema.name)
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

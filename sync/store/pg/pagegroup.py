"""Several pages of the PostgreSQL page write to one transaction, when a bulk load says so.

The PostgreSQL side of the SQLite mirror's group commit (`sync.store.groupcommit`); one
transaction per page (`sync.store.pg.pagewrite.PageWriter`) stays the default.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import psycopg
from psycopg import pq

from sync.pipeline.batches import Staged
from sync.store.pg.pagewrite import PageWriter


class PageGroup:
    """Several pages to a transaction, when the caller says so (a backfill): the PostgreSQL side
    of the SQLite mirror's group commit (`sync.store.groupcommit`); one transaction per page
    (`PageWriter.write`, `PageWriter.write_page`) stays the default.

    Used as a context manager over one `PageWriter`, on an idle connection in autocommit. The
    open group is a transaction in pipeline mode, committed once `pages` pages are in it or it
    is `seconds` old (so readers see a bulk load progress), and at the end of the block:
    `write` sends a batch's guarded upsert (`PageWriter.send`, the statement a batch written
    alone runs) without waiting for it, so the client encodes the next page while the server
    merges this one; `write_page` writes a whole page as `PageWriter.write_page` does (rows,
    links, memberships: `page_writes`), waiting only where it reads (the links' guard and held
    lists), with no savepoint per page (a transaction with more than 64 subtransactions slows
    every reader's snapshots). A schema change (`changes_schema`, `page_changes_schema`)
    commits the open group first and is made in a transaction of its own, as a page written
    alone makes it. A failure, in a page's statements or in the block, rolls the open group
    back as a whole and is raised (at the latest when the group syncs): as SQLite's group, a
    group commits or rolls back with every page in it, so pages and their checkpoints go
    together, and a crash or an error loses at most the open group, which a backfill fetches
    again. Statements the caller runs on the connection between writes are a part of the open
    group.

    The guard is the page's own, statement by statement. The keys of each page are taken in id
    order, those of a group page after page: a second writer of the same rows could deadlock
    with a group (PostgreSQL would roll one back), which the active lock (`sync.store.pg.lock`)
    rules out. `written` counts the rows inserted or updated by the committed groups.
    """

    def __init__(self, writer: PageWriter, pages: int, seconds: float = 2.0) -> None:
        if pages < 1:
            raise ValueError(f"a group holds at least one page, not {pages}")
        self.writer = writer
        self.conn = writer.conn
        self.size = pages
        self.seconds = seconds
        #: Rows inserted or updated by the groups committed so far, and their number.
        self.written = 0
        self.commits = 0
        self._open: contextlib.ExitStack | None = None
        self._sent: list[psycopg.Cursor[Any]] = []  # upserts sent, their counts not read yet
        self._counted = 0  # rows the open group's whole pages wrote
        self._pages = 0
        self._began = 0.0

    def __enter__(self) -> PageGroup:
        if (
            not self.conn.autocommit
            or self.conn.info.transaction_status != pq.TransactionStatus.IDLE
        ):
            raise RuntimeError(
                "a PostgreSQL page group needs a connection in autocommit, outside a transaction"
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.commit()
        else:
            self._rollback(exc_type, exc, tb)

    def write(self, b: Staged) -> None:
        """A batch's rows into the open group (opening one) as a page of their own: its schema
        ensured first, then its upsert sent; the group committed when full or old enough."""
        if self.writer.changes_schema(b):
            self.commit()
            self.writer.ensure(b)

        def send() -> None:
            cur = self.writer.send(b)
            if cur is not None:
                self._sent.append(cur)

        self._page(send)

    def write_page(self, batches: Sequence[Staged]) -> None:
        """A whole page (`PageWriter.write_page`'s writes) into the open group (opening one):
        its schema ensured first; the group committed when full or old enough."""
        if self.writer.page_changes_schema(batches):
            self.commit()
            self.writer.ensure_page(batches)

        def writes() -> None:
            self._counted += self.writer.page_writes(batches)

        self._page(writes)

    def _page(self, writes: Callable[[], None]) -> None:
        """A page's `writes` in the open group, opened first when none is."""
        if self._open is None:
            group = contextlib.ExitStack()
            try:
                group.enter_context(self.conn.pipeline())
                group.enter_context(self.conn.transaction())
            except BaseException:
                group.close()
                raise
            self._open = group
            self._began = time.monotonic()
        try:
            writes()
        except BaseException as exc:
            self._rollback(type(exc), exc, exc.__traceback__)
            raise
        self._pages += 1
        if self._pages >= self.size or time.monotonic() - self._began >= self.seconds:
            self.commit()

    def commit(self) -> None:
        """Commit the open group, if any (waiting for the server), and count its rows."""
        group, self._open = self._open, None
        if group is None:
            return
        try:
            group.close()  # COMMIT; the pipeline synced and left
        finally:
            sent, counted = self._sent, self._counted
            self._sent, self._counted, self._pages = [], 0, 0
        self.written += counted + sum(cur.rowcount for cur in sent)
        self.commits += 1

    def _rollback(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Roll the open group back (its transaction left with the error)."""
        group, self._open = self._open, None
        self._sent, self._counted, self._pages = [], 0, 0
        if group is not None:
            group.__exit__(exc_type, exc, tb)

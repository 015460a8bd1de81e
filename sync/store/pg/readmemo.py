"""Keyed bookkeeping reads answered from memory while a bulk load's pipelined group is open.

In a bulk load's group (`sync.store.pg.bulk.PgGroup`) the writes of a page are sent without
waiting; a read makes the client wait until the server has run every statement sent before
it, and the writes are synchronous on the event loop, so each read stalls the downloads too. A
backfill asked two such reads per scope walked (its checkpoint, `Backfills.state`, when the
walk begins; its poll cursor, `Cursors.get`, when the type ends): 2,000 waits at 200k rows.

`ReadMemo` answers them from one read of the whole table, made at the first ask inside a
group. It is exact, not a cache that may go stale, for three reasons: the mirror's one writer
is this process (the active lock, `sync.store.pg.lock`); every write of the table by this
process marks its key (`touch`), which is then read again at its next ask; and a group rolled
back (`forget`, called by the mirror with the other memos) drops everything, since the memo may
hold what the rollback undid. Outside a pipeline every ask reads the server, as before, and
the memo is dropped (a read there costs a round trip, not a stall of everything queued).

The tables are small: one row per (type, scope) walked, with its pages' numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import pq

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ReadMemo(Generic[K, V]):
    """The answers of a keyed read (`one`: a key's value, None when absent) taken from one read
    of them all (`every`) while the connection is in a pipeline; see the module docstring."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        every: Callable[[], dict[K, V]],
        one: Callable[[K], V | None],
    ) -> None:
        self.conn = conn
        self.every = every
        self.one = one
        self._held: dict[K, V] | None = None
        self._touched: set[K] = set()
        #: Reads sent to the server (`every` counts one): what the memo saved is visible.
        self.reads = 0

    def get(self, key: K) -> V | None:
        """`key`'s value: from memory inside a pipeline once the table was read, else read."""
        if self.conn.pgconn.pipeline_status == pq.PipelineStatus.OFF:
            self.forget()
            return self._read(key)
        if self._held is None:
            self.reads += 1
            self._held, self._touched = self.every(), set()
        if key in self._touched:
            self._touched.discard(key)
            found = self._read(key)
            if found is None:
                self._held.pop(key, None)
            else:
                self._held[key] = found
            return found
        return self._held.get(key)

    def _read(self, key: K) -> V | None:
        self.reads += 1
        return self.one(key)

    def touch(self, key: K) -> None:
        """`key` was written: its next ask reads it again."""
        if self._held is not None:
            self._touched.add(key)

    def forget(self) -> None:
        """Drop everything held (a group rolled back, the table cleared, a read outside a
        pipeline): the next ask in a pipeline reads the table again."""
        self._held = None
        self._touched = set()

"""The mirror: one SQLite file holding one table per JSON:API type, as one object and its parts.

`Mirror` is what the jobs, the daemon and the readers hold, in the shape of sqlite-utils'
`Database`: it owns the connection and the state shared across concepts (the schema's cache,
the memo of included rows last written, the group commit), writes pages, and hands out the
rest. One type's rows are a table handle (`Mirror.table(name_or_rtype)`, `sync.store.table`:
counts, ids, stamps, rows, listings, deletions, memberships, links). Bookkeeping and the
file-wide concepts are parts it holds as attributes, each owning its SQL in its own module:

- `meta`, `cursors` (`sync.store.meta`): `_sync_meta` and the polls' cursors;
- `backfills` (`sync.store.backfills`): backfill checkpoints and the types ever completed;
- `runs` (`sync.store.runs`), `jobs` (`sync.store.jobrecords`): run records, the daemon's jobs;
- `types` (`sync.store.status`): per-type sync status, the lines of `ccsync status`;
- `values` (`sync.store.values`): misfit values, refused and coerced;
- `changes` (`sync.store.changes`): the change feed; `indexes` (`sync.store.indexes`): the end
  phase; `group` (`sync.store.groupcommit`): group commit during a bulk load;
- `hours` (`sync.store.hours`), `malls` (`sync.store.malls`): hours, and mall-level operations.

The file and its pragmas are `sync.store.file`, migrations on open `sync.store.migrations`.
Rows arrive staged by the page pipeline (`sync.pipeline.staging`); the store binds them and
never stages them itself.

A page's rows, links, included resources, scripts and backfill checkpoint commit in one
transaction (`write_staged`), so a crash at any moment leaves either the whole page or none.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sync.model.catalogue import ResourceType
from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen
from sync.store import file, migrations, runs, sideloads
from sync.store import links as link_store
from sync.store.backfills import Backfills, PageCheckpoint
from sync.store.changes import ChangeFeed
from sync.store.deletions import Deletions, SqliteTombstones
from sync.store.faults import StorageCheck
from sync.store.groupcommit import GroupCommit
from sync.store.hours import Hours
from sync.store.indexes import END_PHASE as END_PHASE
from sync.store.indexes import EndPhase
from sync.store.jobrecords import JobRecords
from sync.store.lock import WriterLock
from sync.store.malls import Malls
from sync.store.meta import Cursors, Meta
from sync.store.pagewrite import PageWriter, WriteResult
from sync.store.press import PressTables
from sync.store.proof import ProofRecords
from sync.store.queue import QueueTable
from sync.store.repair import Repair, differences
from sync.store.schema import BOOKKEEPING, SCHEMA_VERSION, Schema
from sync.store.scripts import Scripts, SqliteScripts
from sync.store.status import TypeStatuses
from sync.store.table import TypeTable
from sync.store.values import SqliteValues, ValueNotes

if TYPE_CHECKING:
    from sync.core.config import CheckpointMode


#: Included rows whose last written copy the writer remembers (`Mirror.write_staged`): the page
#: worker's own memo (`staging.Sent`) leaves out most copies before they get here; this one
#: catches the rest, and those of pages staged in this process. ~5 MB when full.
INCLUDED_SEEN = 50_000


class Mirror:
    """One open mirror database; see the module docstring. Create with `Mirror.open`."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        lock: WriterLock | None,
        checkpoints: CheckpointMode = "sqlite",
    ) -> None:
        self.conn = conn
        self.path = path
        self._lock = lock
        self.schema = Schema(conn)
        self.meta = Meta(conn)
        self.cursors = Cursors(conn)
        self.backfills = Backfills(conn, self.meta)
        self.runs = runs.Runs(conn)
        self.jobs = JobRecords(conn)
        self.types = TypeStatuses(conn, self.schema)
        self.values = ValueNotes(SqliteValues(conn))
        self.changes = ChangeFeed(conn)
        self.group = GroupCommit(conn, file.AUTOCHECKPOINT[checkpoints])
        self.indexes = EndPhase(self)
        self.hours = Hours(self.schema)
        self.malls = Malls(self.schema, self.table)
        self._writer = PageWriter(conn, self.schema)
        self._deletions = Deletions(SqliteTombstones(conn, self.schema))
        self._scripts = Scripts(SqliteScripts(conn))
        #: Tables made on first use, held as parts whose reads make nothing (readers use them
        #: on a read-only open): the proof's records and listing (`sync.store.proof`), the
        #: webhook queue (`sync.store.queue`), the press releases (`sync.store.press`); and
        #: the storage watch's write check (`sync.store.faults`).
        self.proof = ProofRecords(conn)
        self.queue = QueueTable(conn)
        self.press = PressTables(conn)
        self.storage = StorageCheck(conn, path)
        # Included resources (images, tags...) repeat on page after page: remember what was
        # last committed for each, and skip identical rows (bounded, `sync.pipeline.seen.Seen`).
        self._included_seen = Seen(INCLUDED_SEEN)

    # -- the file ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path | str, *, readonly: bool = False, checkpoints: CheckpointMode = "sqlite"
    ) -> Mirror:
        """Open (creating if needed) the mirror at `path`; MirrorError names problem and fix.

        `checkpoints` is `[mirror] checkpoints`: "litestream" turns sync's own WAL checkpoints
        off (see `file.AUTOCHECKPOINT`). A writer opening an existing file migrates it."""
        p = Path(path)
        conn, lock = file.connect(p, readonly=readonly)
        try:
            mirror = cls(conn, p, lock, checkpoints)
            mirror._prepare(readonly)
        except sqlite3.DatabaseError as exc:
            file.close(conn, lock)
            raise file.refusal(exc, p) from None
        except BaseException:
            file.close(conn, lock)
            raise
        return mirror

    def _prepare(self, readonly: bool) -> None:
        """Check the file and set its pragmas; a writer then makes the bookkeeping tables and
        migrates a file an older sync wrote (`sync.store.migrations`)."""
        fresh = file.prepare(
            self.conn, self.path, readonly=readonly, autocheckpoint=self.group.autocheckpoint
        )
        if not readonly:
            self.conn.executescript(BOOKKEEPING)
            self.meta.set("schema_version", str(SCHEMA_VERSION))
            if not fresh:
                migrations.apply(self)
            # This writer holds the lock: a run still `running` has no process behind it.
            runs.close_orphans(self.conn)

    def close(self) -> None:
        """Commit an open group, close the connection and release the writer lock."""
        if self.group.size:
            self.group.end()
        file.close(self.conn, self._lock)
        self._lock = None

    def table(self, rtype: ResourceType | str) -> TypeTable:
        """The table of one type (a `ResourceType` or its name; a membership or link table's
        name reads too): its reads, deletions, memberships and links (`sync.store.table`)."""
        return TypeTable(
            rtype, self.schema, self._deletions, self._forget_included, self._writer.fresh
        )

    def _forget_included(self, type_name: str, ids: list[int]) -> None:
        """Rows deleted or compared: the memo of included rows no longer describes them."""
        self._included_seen.forget(type_name, ids)

    @contextlib.contextmanager
    def _page_transaction(self) -> Iterator[None]:
        """One page's writes (`GroupCommit.transaction`); on failure, forget what the rolled
        back writes had the memos remember."""
        grouped = bool(self.group.size)
        try:
            with self.group.transaction():
                yield
        except BaseException:
            self._scripts.forget()  # the scripts it wrote are not stored
            if grouped:
                self._included_seen.clear()  # it described rows of the rolled-back group too
            raise

    # -- the page write ------------------------------------------------------------------------

    def write_staged(
        self,
        batches: list[Staged],
        *,
        scripts: Any = None,
        checkpoint: PageCheckpoint | None = None,
    ) -> WriteResult:
        """Write a staged page (`sync.pipeline.staging`): the listed type's batch, then the
        included ones, its scripts (the response's `meta.scripts` as served, None: no such
        key; `sync.store.scripts`) and its backfill checkpoint, in one transaction.

        Included rows identical (by version) to the copy this mirror last committed are skipped:
        images and tags repeat on page after page.
        """
        seen = self._included_seen
        seen.leave_out(batches[1:])
        self._writer.ensure_schema(batches)
        main = batches[0]
        with self._page_transaction():
            self._write_batches(batches)
            self._writer.write_memberships(main)
            self._scripts.write(main.rtype, scripts)  # the listed type's, as served
            if checkpoint is not None:
                self.backfills.checkpoint(checkpoint)
        self.group.after_page()
        seen.remember(batches[1:])
        return WriteResult(len(main.ids), sum(len(b.ids) for b in batches[1:]), main.dropped)

    def _write_batches(self, batches: Sequence[Staged]) -> None:
        """Inside the page's transaction: misfit values noted, tombstoned rows left out, rows
        and links written under the guard."""
        self.values.note(batches)
        for b in batches:
            self._deletions.drop_tombstoned(b)
            self._writer.write(b)

    def write_scripts(self, rtype: ResourceType, scripts: Any) -> None:
        """`rtype`'s scripts from a response that brought no rows to write (a poll finding no
        change): the scripts may have changed all the same (`sync.store.scripts`)."""
        if not self._scripts.due(rtype, scripts):
            return  # no transaction for the same list as a moment ago
        with self._page_transaction():
            self._scripts.write(rtype, scripts)
        self.group.after_page()

    @contextlib.contextmanager
    def included_memo(self, limit: int) -> Iterator[Seen]:
        """Remember at most `limit` included rows while the block runs (see `INCLUDED_SEEN`),
        then start afresh; yields the memo (pages staged in this process leave out the rows
        it holds, `PagePool.memo`). A backfill whose page worker keeps the memo that counts
        (`staging.Sent`) needs less here: the memory is better spent there."""
        self._included_seen = Seen(limit)
        try:
            yield self._included_seen
        finally:
            self._included_seen = Seen(INCLUDED_SEEN)

    def write_sideloads(
        self,
        rtype: ResourceType,
        included: Sequence[Staged],
        links: dict[str, list[tuple[int, list[int]]]],
        stamps: dict[int, Any],
    ) -> int:
        """A reconcile page's sideloads (`sync.jobs.malls.sideloads`): the included rows, and the
        links of the listed owners whose mirrored `updated_at` equals the listed one (`stamps`),
        in one transaction. Owners not mirrored, or mirrored at another stamp, are left alone.
        Returns how many owners' links were replaced."""
        self._writer.ensure_schema(included)
        owners = list({rid for pairs in links.values() for rid, _ in pairs})
        if owners and self.schema.has_table(rtype.table):
            link_store.ensure(self.schema, rtype, links)
        with self._page_transaction():
            self._write_batches(included)
            same = sideloads.same_stamp(self.conn, self.schema, rtype, owners, stamps)
            if same:
                kept = {n: [(o, r) for o, r in pairs if o in same] for n, pairs in links.items()}
                link_store.write(self.conn, rtype, kept)
        self.group.after_page()
        for b in included:
            self._included_seen.forget(b.type, b.ids)
        return len(same)

    def prune_unreferenced(self, types: Sequence[str]) -> dict[str, int]:
        """Delete rows of `types` that nothing references, then the links they owned."""
        removed = sideloads.prune_unreferenced(self.conn, self.schema, types)
        if removed:
            self._included_seen.clear()
        return removed

    def repair(self, batches: list[Staged], *, scripts: Any = None) -> list[Repair]:
        """The verify's write (`sync.store.repair`): compare a staged page of whole copies
        with the mirror, write it (with its `scripts`, as `write_staged`), and return the
        repairs (rows whose content differed under an equal stamp, or were missing)."""
        self._writer.ensure_schema(batches)
        repairs: list[Repair] = []
        for b in batches:
            repairs += differences(self.schema, self._deletions, b)
            self._included_seen.forget(b.type, b.ids)  # compared: write it whatever
        self.write_staged(batches, scripts=scripts)
        return repairs

"""The PostgreSQL mirror: the tables of one schema, as one object and its parts (issue #49).

`PgMirror` is the counterpart of `sync.store.mirror.Mirror` (read that module first): what the
jobs, the daemon and the readers hold (a `sync.store.seam.MirrorStore`), over the PostgreSQL
parts of this package, each holding its SQL: `meta`, `cursors`, `runs`, `jobs`
(`bookkeeping`), `backfills`, `types` (`status`), `values`, `changes`, `hours`, `malls`,
`proof`, `queue`, `press`, `schema` (with the views), `group` and `indexes` (`bulk`), and one
type's table (`table`, `sync.store.pg.table`). Every rule is the core's, written once: the
deletions' (`sync.store.deletions.Deletions` over `PgTombstones`), the value notes', the
scripts'.

**One writer.** A writer holds the mirror's active lock (`sync.store.pg.lock.ActiveLock`): given
(the daemon waits for it as a standby), or taken at open, else the open fails naming the
holder. Every page's transaction asks the lock's `fence` last, so no page commits once the lock
is gone. Readers (`readonly`) take no lock and set their session read-only.

**Durability** is SQLite's with `synchronous=NORMAL`: a writer's session commits without
waiting for the WAL flush (`_prepare`).

**A page** (`write_staged`): the tables and columns it needs are made first, in transactions
of their own (with the feed's triggers of a table made or widened); then its misfit values
noted, tombstoned rows left out, rows and links written under the guard, the listing mall's
memberships, its scripts and its backfill checkpoint, in one transaction (`PgGroup.page`), so
a crash or a lost server leaves the whole page or none. In a bulk load's group the page's
statements are pipelined (`sync.store.pg.bulk`): none waits for its answer but the reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from sync.core.errors import MirrorError
from sync.core.logs import get_logger
from sync.core.target import MirrorTarget
from sync.model.catalogue import ResourceType
from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen
from sync.store.backfills import PageCheckpoint
from sync.store.deletions import Deletions
from sync.store.mirror import INCLUDED_SEEN
from sync.store.pagewrite import WriteResult
from sync.store.pg import changes, connect, linkwrite, sideloads
from sync.store.pg import links as link_store
from sync.store.pg.backfills import Backfills, ensure_backfills
from sync.store.pg.bookkeeping import Cursors, JobRecords, Meta, Runs
from sync.store.pg.bulk import PgEndPhase, PgGroup
from sync.store.pg.deletions import PgTombstones
from sync.store.pg.deletions import ensure as ensure_deletions
from sync.store.pg.faults import PgStorageCheck
from sync.store.pg.hours import HOURS, Hours, ensure_hours
from sync.store.pg.lock import ActiveLock
from sync.store.pg.malls import Malls
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.press import PressTables
from sync.store.pg.proof import ProofRecords
from sync.store.pg.queue import QueueTable
from sync.store.pg.repair import differences
from sync.store.pg.schema import Schema
from sync.store.pg.scripts import PgScripts, ensure_scripts
from sync.store.pg.status import TypeStatuses, ensure_status
from sync.store.pg.table import PgTypeTable
from sync.store.pg.values import PgValues, ensure_values
from sync.store.repair import Repair
from sync.store.schema import SCHEMA_VERSION
from sync.store.scripts import Scripts
from sync.store.values import ValueNotes

_log = get_logger("sync.store.pg")


class PgMirror:
    """One open PostgreSQL mirror; see the module docstring. Create with `PgMirror.open`."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        target: MirrorTarget,
        lock: ActiveLock | None,
    ) -> None:
        name = target.schema
        self.conn = conn
        self.target = target
        self.lock = lock
        self.path = None  # no file: what asks for one asks `target`
        self.schema = Schema(conn, name)
        self.meta = Meta(conn, name)
        self.cursors = Cursors(conn, name)
        self.backfills = Backfills(conn, self.meta)
        self.runs = Runs(conn, name)
        self.jobs = JobRecords(conn, name)
        self.types = TypeStatuses(conn, self.schema)
        self.values = ValueNotes(PgValues(conn, name))
        self.changes = changes.ChangeFeed(conn, name)
        self._writer = PageWriter(conn, name)
        self.group = PgGroup(conn, self._fence, self._forget_memos)
        self.indexes = PgEndPhase(conn, self.schema, self._writer)
        self.hours = Hours(self.schema)
        self.malls = Malls(self.schema, self.table)
        self._tombstones = PgTombstones(conn, name)
        self._deletions = Deletions(self._tombstones)
        self._scripts = Scripts(PgScripts(conn, name))
        self.proof = ProofRecords(conn, name)
        self.queue = QueueTable(conn, name)
        self.press = PressTables(conn, name)
        self.storage = PgStorageCheck(lambda: self.conn, name)
        self._included_seen = Seen(INCLUDED_SEEN)

    def __repr__(self) -> str:  # never the password
        return f"<PgMirror {self.target.describe()}>"

    # -- opening and closing ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        schema: str,
        *,
        readonly: bool = False,
        lock: ActiveLock | None = None,
    ) -> PgMirror:
        """Open the mirror in `schema` of the database `url` names; MirrorError names the
        problem and the fix. A writer creates the schema and the bookkeeping tables, and holds
        the active lock (`lock`, else one it takes now or fails naming its holder)."""
        target = MirrorTarget(url=url, schema=schema)
        taken = None
        if not readonly and lock is None:
            taken = lock = ActiveLock(url, schema)
            if not lock.try_acquire():
                holder = lock.holder()
                lock.release()
                raise MirrorError(
                    f"{target.describe()}: another ccsync writes this mirror "
                    f"({holder.describe() if holder else 'it has just let go'}); stop it, or "
                    "run this one as its standby (ccsync run waits for the lock)"
                )
        try:
            conn = connect.connect(url, schema, readonly=readonly)
        except BaseException:
            if taken is not None:
                taken.release()
            raise
        mirror = cls(conn, target, lock)
        mirror._owns_lock = taken is not None
        try:
            if not readonly:
                mirror._prepare()
        except BaseException:
            mirror.close()
            raise
        return mirror

    _owns_lock = False

    def _prepare(self) -> None:
        """A writer's open: the bookkeeping tables, the feed, the tombstones, the schema
        version, the feed's triggers and views of tables an older run made, and the runs a
        killed writer left `running` closed (this writer holds the lock: none is alive)."""
        name = self.schema.name
        # SQLite's durability (`synchronous=NORMAL` in WAL mode): a commit does not wait for
        # the server's WAL flush, so a page costs no fsync. A server crash may lose the last
        # ~0.6 s of commits (never a torn one): rows and checkpoints the polls' lookback, the
        # proof and a resumed backfill fetch again, and webhook notices the receiver had
        # answered, whose changes the polls and the proof find as they find any notice lost
        # (the mirror never rests on notices). Not waiting matters most there: the receiver
        # commits on the event loop, and a flush behind a busy server's checkpoint stalled
        # every job of the daemon (webhook p50 1.1 s at 100 a second).
        self.conn.execute("SET synchronous_commit TO off")
        changes.ensure(self.conn, name)
        for ensure in (
            ensure_deletions,
            ensure_backfills,
            ensure_status,
            ensure_values,
            ensure_hours,
        ):
            ensure(self.conn, name)
        ensure_scripts(self.conn, name)
        self.meta.set("schema_version", str(SCHEMA_VERSION))
        self.indexes.create()
        self.runs.close_orphans()

    def close(self) -> None:
        """Commit an open group, close the connection and release a lock taken at open."""
        try:
            if self.group.open and not self.conn.closed:
                self.group.end()
        finally:
            with contextlib.suppress(psycopg.Error):
                self.conn.close()
            if self._owns_lock and self.lock is not None:
                self.lock.release()

    def _fence(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether a write transaction may commit: our lock session still holds the lock."""
        return self.lock is None or self.lock.fence(conn)

    def table(self, rtype: ResourceType | str) -> PgTypeTable:
        """The table of one type (a `ResourceType` or its name): `sync.store.pg.table`."""
        return PgTypeTable(
            rtype,
            self.schema,
            self._deletions,
            self._forget_included,
            self._writer.fresh,
            bulk=lambda: self.indexes.deferred,
        )

    def _forget_included(self, type_name: str, ids: list[int]) -> None:
        self._included_seen.forget(type_name, ids)

    def _forget_memos(self) -> None:
        """A group rolled back (`PgGroup`, wherever its error surfaced): forget what its
        pages had the memos remember (scripts written, included rows seen, checkpoints and
        cursors read: `sync.store.pg.readmemo`), and the columns of `hours`, which an hours
        refresh beside its pages may have made or widened in it
        (`sync.store.pg.hours.ensure_table`), gone with it."""
        self._scripts.forget()
        self._included_seen.clear()
        self.backfills.states.forget()
        self.cursors.memo.forget()
        self.schema.forget(HOURS)

    @contextlib.contextmanager
    def _page_transaction(self) -> Iterator[None]:
        """One page's writes (`PgGroup.page`); on failure, forget what the rolled back writes
        had the memos remember (a group's rollback forgets all: `_forget_memos`)."""
        try:
            with self.group.page():
                yield
        except BaseException:
            self._scripts.forget()
            raise

    # -- the page write ----------------------------------------------------------------------------

    def _ensure(self, batches: Sequence[Staged]) -> None:
        """The tables, columns, link tables and memberships the page needs, each schema change
        in a transaction of its own (an open group is committed first), with the feed's
        triggers of each content table made or widened."""
        if not self._writer.page_changes_schema(batches):
            return
        self.group.commit()
        self._writer.ensure_page(batches)
        for b in batches:
            self.schema.forget(b.type)
            self.indexes.triggers(b.type)

    def write_staged(
        self,
        batches: list[Staged],
        *,
        scripts: Any = None,
        checkpoint: PageCheckpoint | None = None,
    ) -> WriteResult:
        """Write a staged page (as `Mirror.write_staged`): the listed type's batch, then the
        included ones, its scripts and its backfill checkpoint, in one transaction."""
        seen = self._included_seen
        seen.leave_out(batches[1:])
        self._ensure(batches)
        main = batches[0]
        with self._page_transaction():
            self._write_batches(batches)
            self._writer.write_memberships(main)
            self._scripts.write(main.rtype, scripts)
            if checkpoint is not None:
                self.backfills.checkpoint(checkpoint)
        seen.remember(batches[1:])
        return WriteResult(len(main.ids), sum(len(b.ids) for b in batches[1:]), main.dropped)

    def _write_batches(self, batches: Sequence[Staged]) -> None:
        """Inside the page's transaction: misfit values noted, tombstoned rows left out, rows
        and links written under the guard (the listed type first)."""
        self.values.note(batches)
        for b in batches:
            self._deletions.drop_tombstoned(b)
            self._writer.write_rows(b, count=False)

    def write_scripts(self, rtype: ResourceType, scripts: Any) -> None:
        """`rtype`'s scripts from a response that brought no rows to write."""
        if not self._scripts.due(rtype, scripts):
            return
        with self._page_transaction():
            self._scripts.write(rtype, scripts)

    @contextlib.contextmanager
    def included_memo(self, limit: int) -> Iterator[Seen]:
        """Remember at most `limit` included rows while the block runs (`Mirror.included_memo`)."""
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
        """A reconcile page's sideloads (as `Mirror.write_sideloads`): the included rows, and
        the links of the listed owners mirrored at the listed stamp, in one transaction.
        Returns how many owners' links were replaced."""
        if included:
            self._ensure(included)
        owners = list({rid for pairs in links.values() for rid, _ in pairs})
        if owners and self.schema.has_table(rtype.table):
            link_store.ensure(self.conn, self.schema.name, rtype, list(links))
        with self._page_transaction():
            self._write_batches(included)
            same = sideloads.same_stamp(self.conn, self.schema, rtype, owners, stamps)
            if same:
                kept = {n: [(o, r) for o, r in pairs if o in same] for n, pairs in links.items()}
                linkwrite.write(self.conn, self.schema.name, rtype, kept)
        for b in included:
            self._included_seen.forget(b.type, b.ids)
        return len(same)

    def prune_unreferenced(self, types: Sequence[str]) -> dict[str, int]:
        """Delete rows of `types` that nothing references, then the links they owned."""
        with self.conn.transaction():
            removed = sideloads.prune_unreferenced(self.conn, self.schema, types)
        if removed:
            self._included_seen.clear()
        return removed

    def repair(self, batches: list[Staged], *, scripts: Any = None) -> list[Repair]:
        """The verify's write (`sync.store.pg.repair`): compare a staged page of whole copies
        with the mirror, write it, and return the repairs."""
        self._ensure(batches)
        repairs: list[Repair] = []
        for b in batches:
            repairs += differences(self._writer, self._deletions, b)
            self._included_seen.forget(b.type, b.ids)
        self.write_staged(batches, scripts=scripts)
        return repairs

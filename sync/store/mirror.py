"""The mirror: one SQLite file holding one table per JSON:API type, behind one object.

`Mirror` is the facade the jobs, the daemon and the readers hold: it owns the connection and
the state shared across concepts (the schema's cache, the memo of included rows last written,
the group commit), and delegates each concept to its module: the file and its pragmas
(`file`), migrations on open (`migrations`), the end phase's indexes (`indexes`), the change
feed (`changes`), group commit (`groupcommit`), the guarded page write (`pagewrite`), misfit
values (`values`), deletions and tombstones (`deletions`), links (`links`), memberships
(`memberships`), sideloads (`sideloads`), hours (`hours`), reads (`reads`) and bookkeeping
(`bookkeeping`, a mixin). Rows arrive staged by the page pipeline (`sync.pipeline.staging`);
the store binds them and never stages them itself.

A page's rows, links, included resources, scripts and backfill checkpoint commit in one
transaction (`write_staged`), so a crash at any moment leaves either the whole page or none.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen
from sync.store import (
    changes,
    deletions,
    file,
    hours,
    indexes,
    memberships,
    migrations,
    reads,
    runs,
    sideloads,
)
from sync.store import links as link_store
from sync.store.bookkeeping import BookkeepingMixin, PageCheckpoint, TypeStatus
from sync.store.changes import Change
from sync.store.deletions import FeedApplied
from sync.store.groupcommit import GroupCommit
from sync.store.indexes import END_PHASE as END_PHASE
from sync.store.listing import Listing
from sync.store.lock import WriterLock
from sync.store.pagewrite import PageWriter, WriteResult
from sync.store.schema import BOOKKEEPING, SCHEMA_VERSION, Schema
from sync.store.scripts import Scripts
from sync.store.transaction import write_transaction
from sync.store.values import OnValues, ValueNotes

if TYPE_CHECKING:
    from sync.core.config import CheckpointMode


#: Included rows whose last written copy the writer remembers (`Mirror.write_staged`): the page
#: worker's own memo (`staging.Sent`) leaves out most copies before they get here; this one
#: catches the rest, and those of pages staged in this process. ~5 MB when full.
INCLUDED_SEEN = 50_000


class Mirror(BookkeepingMixin):
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
        self._group = GroupCommit(conn, file.AUTOCHECKPOINT[checkpoints])
        self._writer = PageWriter(conn, self.schema)
        self._deletions = deletions.Deletions(conn, self.schema)
        self._values = ValueNotes(self)
        self._scripts = Scripts(conn)
        self._listings = 0
        # Included resources (images, tags...) repeat on page after page: remember what was
        # last committed for each, and skip identical rows (bounded, `sync.pipeline.seen.Seen`).
        self._included_seen = Seen(INCLUDED_SEEN)

    @property
    def autocheckpoint(self) -> int:
        """The writer's `PRAGMA wal_autocheckpoint` outside a bulk load (`file.AUTOCHECKPOINT`)."""
        return self._group.autocheckpoint

    @property
    def on_values(self) -> OnValues | None:
        """Told (type, "refused" or "coerced", how many) of each page's misfit values: the
        daemon counts them in its metrics."""
        return self._values.on_values

    @on_values.setter
    def on_values(self, hook: OnValues | None) -> None:
        self._values.on_values = hook

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
            self.conn, self.path, readonly=readonly, autocheckpoint=self.autocheckpoint
        )
        if not readonly:
            self.conn.executescript(BOOKKEEPING)
            self.set_meta("schema_version", str(SCHEMA_VERSION))
            if not fresh:
                migrations.apply(self)
            # This writer holds the lock: a run still `running` has no process behind it.
            runs.close_orphans(self.conn)

    def close(self) -> None:
        """Close the connection and release the writer lock."""
        if self._group.size:
            self.end_group_commit()
        file.close(self.conn, self._lock)
        self._lock = None

    def create_indexes(self) -> None:
        """Build whatever index, full-text index, feed trigger or view is missing (`indexes`)."""
        indexes.create(self)

    def defer_indexes(self, defer: bool) -> None:
        """During a bulk load into empty tables, build secondary indexes, full-text indexes and
        the change feed's triggers at the end (`indexes.defer`)."""
        indexes.defer(self, defer)

    # -- the change feed -----------------------------------------------------------------------

    def changes(
        self,
        since: int = 0,
        limit: int = 1000,
        *,
        types: Sequence[str] = (),
        upto: int | None = None,
    ) -> list[Change]:
        """Entries of the change feed after sequence number `since` (at most `upto`), of
        `types` or all: (seq, type, id, op, updated_at, at); op is `upsert`, `delete`,
        `repair`, `links` or `backfill` (`sync.store.changes`)."""
        if not self.has_table("_sync_changes"):  # a mirror written before the feed existed
            return []
        return changes.read(self.conn, since, limit, types, upto)

    def last_change(self) -> int:
        """The newest entry's sequence number, or the last one pruned when the feed is empty."""
        if not self.has_table("_sync_changes"):
            return 0
        return max(changes.last_seq(self.conn), self.pruned_through())

    def pruned_through(self) -> int:
        """The last sequence number retention dropped (0: none): a reader asking from before
        it has missed entries and is told so (`sync.readers.changes`)."""
        return changes.pruned_through(self.conn)

    def prune_changes(self, keep_days: float) -> int:
        """Drop change feed entries older than `keep_days`; the sequence numbers go on, and
        the last one dropped is remembered (`pruned_through`)."""
        with write_transaction(self.conn):
            return changes.prune(self.conn, keep_days)

    # -- group commit --------------------------------------------------------------------------

    def start_group_commit(self, pages: int, *, seconds: float = 2.0) -> None:
        """Commit every `pages` pages (or `seconds`) instead of every page (bulk loads only,
        `sync.store.groupcommit`)."""
        self._group.start(pages, seconds)

    def end_group_commit(self) -> None:
        """Commit what the group holds and go back to one commit per page."""
        self._group.end()

    @contextlib.contextmanager
    def _page_transaction(self) -> Iterator[None]:
        """One page's writes (`GroupCommit.transaction`); on failure, forget what the rolled
        back writes had the memos remember."""
        grouped = bool(self._group.size)
        try:
            with self._group.transaction():
                yield
        except BaseException:
            self._scripts.forget()  # the scripts it wrote are not stored
            if grouped:
                self._included_seen.clear()  # it described rows of the rolled-back group too
            raise

    # -- reads ---------------------------------------------------------------------------------

    def has_table(self, table: str) -> bool:
        return bool(self.schema.columns(table))

    def has_view(self, name: str) -> bool:
        return reads.has_view(self.conn, name)

    def count(self, type_name: str, *, mall_id: int | None = None) -> int:
        return reads.count(self.schema, type_name, mall_id)

    def ids(
        self, type_name: str, *, mall_id: int | None = None, after: int | None = None
    ) -> Iterator[int]:
        """Ids of a table in order (those greater than `after`, when given), streamed in
        chunks (never the whole table in memory)."""
        return reads.ids(self.schema, type_name, mall_id, after)

    def stamps(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """`updated_at` of those of `ids` the table holds (normalised as written, so it
        compares as text with `sync.model.stamps.normalize`d stamps; None without one)."""
        return reads.stamps(self.schema, type_name, ids)

    def get(self, type_name: str, id: int) -> dict[str, Any] | None:
        return reads.get(self.schema, type_name, id)

    def mall_deals(self, mall_id: int) -> list[int]:
        """The deals `malls_deals` gives a mall, ascending (`sync.jobs.mallroutes`)."""
        return link_store.mall_deals(self.conn, mall_id)

    def status(self) -> list[TypeStatus]:
        """One line of `ccsync status` per listable type mirrored or tracked."""
        return reads.status(self.schema, self._status_rows())

    def listing(self, type_name: str, mall_id: int | None = None) -> Listing:
        """A temporary id listing of one (type, mall) to diff against the table."""
        if mall_id is not None and self.has_table(type_name):
            memberships.ensure(self.schema, type_name)
        self._listings += 1
        return Listing(
            self.conn, type_name, mall_id, f"_sync_listing_{os.getpid()}_{self._listings}"
        )

    def tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` that have one: id -> deleted_at."""
        return self._deletions.held(type_name, ids)

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
                self._record_checkpoint(checkpoint)
        self._group.after_page()
        seen.remember(batches[1:])
        return WriteResult(len(main.ids), sum(len(b.ids) for b in batches[1:]), main.dropped)

    def ensure_schema(self, batches: Sequence[Staged]) -> None:
        """The tables, columns and link tables staged batches need, made before the write's
        transaction (`PageWriter.ensure_schema`)."""
        self._writer.ensure_schema(batches)

    def _write_batches(self, batches: Sequence[Staged]) -> None:
        """Inside the page's transaction: misfit values noted, tombstoned rows left out, rows
        and links written under the guard."""
        self._values.note(batches)
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
        self._group.after_page()

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

    # -- memberships ---------------------------------------------------------------------------

    def remove_memberships(self, type_name: str, mall_id: int, ids: Sequence[int]) -> int:
        """`mall_id` no longer lists `ids`: a change of membership, never a deletion."""
        with write_transaction(self.conn):
            return memberships.remove(self.conn, type_name, mall_id, ids)

    def drop_mall(self, mall_id: int) -> dict[str, list[int]]:
        """A mall gone upstream: its memberships, hours and current hours go (the rows that lose
        their last mall are left for `orphans`, confirmed by `filter[id]` before any deletion)."""
        with write_transaction(self.conn):
            return memberships.drop_mall(self.conn, mall_id)

    def mall_gone(self, mall_id: int) -> None:
        """A mall route answered 404: the mall is gone upstream. Its row (if mirrored) is
        deleted, with no tombstone (an inference: it comes back once listed again), and with
        it its memberships, hours and current hours; its members that no other mall lists are
        left for `orphans`."""
        if self.has_table("malls") and self.get("malls", mall_id) is not None:
            self.delete("malls", [mall_id])
        else:
            self.drop_mall(mall_id)

    def malls_of(self, type_name: str, rid: int) -> list[int]:
        """The malls whose routes list a mall-scoped row (its memberships), ascending."""
        return memberships.malls_of(self.conn, type_name, rid)

    def orphans(self, type_name: str) -> Iterator[list[int]]:
        """Batches of a mall-scoped type's rows that no mall lists."""
        return memberships.orphans(self.conn, type_name)

    def malls_referenced(self) -> set[int]:
        """Malls the mirror holds or some membership still names."""
        return set(self.ids("malls")) | memberships.malls_referenced(self.conn)

    # -- links and sideloads -------------------------------------------------------------------

    def replace_mall_links(self, type_name: str, mall_id: int, ids: Sequence[int]) -> int:
        """`malls_<type_name>` of one mall becomes `ids` (as its route lists them, in order):
        contacts and deals known from the mall routes (`sync.jobs.mallroutes`)."""
        return link_store.replace_mall_links(self.conn, self.schema, type_name, mall_id, ids)

    def replace_links(
        self, rtype: ResourceType, rel: catalogue.Relationship, owner: int, targets: Sequence[int]
    ) -> None:
        """One owner's links of one to-many relationship become `targets`, in order (its own
        route's answer, `sync.jobs.relroutes`)."""
        link_store.replace(self.conn, self.schema, rtype, rel, owner, targets)

    def set_to_one(self, rtype: ResourceType, column: str, rid: int, target: int | None) -> None:
        """One owner's to-one column (its relationship's own route, `sync.jobs.relroutes`)."""
        link_store.set_to_one(self.conn, self.schema, rtype, column, rid, target)

    def write_sideloads(
        self,
        rtype: ResourceType,
        included: Sequence[Staged],
        links: dict[str, list[tuple[int, list[int]]]],
        stamps: dict[int, Any],
    ) -> int:
        """A reconcile page's sideloads (`sync.jobs.sideloads`): the included rows, and the
        links of the listed owners whose mirrored `updated_at` equals the listed one (`stamps`),
        in one transaction. Owners not mirrored, or mirrored at another stamp, are left alone.
        Returns how many owners' links were replaced."""
        self._writer.ensure_schema(included)
        owners = list({rid for pairs in links.values() for rid, _ in pairs})
        if owners and self.has_table(rtype.table):
            link_store.ensure(self.schema, rtype, links)
        with self._page_transaction():
            self._write_batches(included)
            same = sideloads.same_stamp(self.conn, self.schema, rtype, owners, stamps)
            if same:
                kept = {n: [(o, r) for o, r in pairs if o in same] for n, pairs in links.items()}
                link_store.write(self.conn, rtype, kept)
        self._group.after_page()
        for b in included:
            self._included_seen.forget(b.type, b.ids)
        return len(same)

    def write_to_one(
        self,
        rtype: ResourceType,
        column: str,
        values: Sequence[tuple[int, Any]],
        stamps: dict[int, Any],
    ) -> int:
        """A reconcile page's to-one linkage (`sync.jobs.sideloads`): `column` of the listed
        owners whose mirrored `updated_at` equals the listed one; others are left to the
        reconcile's refetch. Returns the rows changed."""
        return sideloads.write_to_one(self.conn, self.schema, rtype, column, values, stamps)

    def prune_unreferenced(self, types: Sequence[str]) -> dict[str, int]:
        """Delete rows of `types` that nothing references, then the links they owned."""
        removed = sideloads.prune_unreferenced(self.conn, self.schema, types)
        if removed:
            self._included_seen.clear()
        return removed

    # -- deletions and hours -------------------------------------------------------------------

    def delete(self, type_name: str, ids: Iterable[int]) -> int:
        """Delete rows inferred gone (confirmed by `filter[id]`, listed by no mall, a gone
        mall's) and their links; nothing keeps them out once the upstream lists them again
        (`sync.store.deletions`)."""
        id_list = list(dict.fromkeys(int(i) for i in ids))
        self._included_seen.forget(type_name, id_list)
        return self._deletions.delete(type_name, id_list)

    def apply_feed(self, type_name: str, entries: Mapping[int, str | None]) -> FeedApplied:
        """Apply deletions feed entries (id -> normalised `created_at`, or None): each row not
        newer than its entry is deleted and tombstoned at the entry's moment, in one
        transaction (`sync.store.deletions`)."""
        self._included_seen.forget(type_name, list(entries))
        return self._deletions.apply_feed(type_name, entries)

    def write_hours(
        self, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date
    ) -> int:
        """Replace one mall's hours between `start` and `end` (inclusive) by `rows`, staged
        (`sync.pipeline.hours.stage_hours`)."""
        return hours.write(self.schema, mall_id, rows, start, end)

    def write_current_hours(self, mall_id: int, body: Any) -> None:
        hours.write_current(self.conn, mall_id, body)

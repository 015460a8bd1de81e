"""The mirror: one SQLite file holding one table per JSON:API type, and every SQL statement on it.

Writing a page is the hot path. sqlite-utils owns the schema (tables, new columns, indexes), but
the rows go through one prepared `INSERT ... ON CONFLICT(id) DO UPDATE ... WHERE
excluded.updated_at >= t.updated_at` per column set, run with `executemany`: measured at about
twice the speed of `upsert_all`, and sqlite-utils cannot express that guard, which the mirror
needs so an older copy of a row never overwrites a newer one (pages, polls and webhook fetches
race each other). A page's rows, links, included resources, scripts and backfill checkpoint
commit in one transaction, so a crash at any moment leaves either the whole page or none of it.

Deleted ids are remembered in `_sync_tombstones` with the moment of the deletion (the feed
entry's `created_at`, else the upstream's time when `filter[id]` confirmed it): a copy stamped
at or before it (a page fetched before the deletion and written after it) cannot bring the row
back, and a copy created or updated after it wins and lifts the tombstone, since the spec never
says ids are not reused (`tombstone_holds`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from sync.core.errors import MirrorError
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.stamps import iso_ms, now_iso
from sync.pipeline.batches import Staged
from sync.pipeline.encoding import encode
from sync.pipeline.seen import Seen
from sync.pipeline.staging import stage_resources
from sync.store import memberships
from sync.store.bookkeeping import BookkeepingMixin, PageCheckpoint, TypeStatus
from sync.store.faults import storage_fault
from sync.store.fresh import FreshIds
from sync.store.ftsbuild import SideBuild, remove_scratch
from sync.store.listing import Listing
from sync.store.lock import WriterLock, open_database, take
from sync.store.schema import BOOKKEEPING, SCHEMA_VERSION, Schema
from sync.store.scripts import Scripts, migrate_scripts
from sync.store.tombstones import tombstone_holds
from sync.store.transaction import write_transaction

if TYPE_CHECKING:
    from sync.core.config import CheckpointMode

_SQLITE_HEADER = b"SQLite format 3\x00"
_log = get_logger("sync.store")


@dataclass(frozen=True)
class WriteResult:
    """What one `write_page` wrote."""

    rows: int
    included: int
    skipped_deleted: int = 0


#: The writer's page cache in KiB: 8 MiB, and 16 MiB during a bulk load (group commit).
CACHE_KIB = 8192
BULK_CACHE_KIB = 16384

#: Included rows whose last written copy the writer remembers (`Mirror.write_staged`): the page
#: worker's own memo (`staging.Sent`) leaves out most copies before they get here; this one
#: catches the rest, and those of pages staged in this process. ~5 MB when full.
INCLUDED_SEEN = 50_000

#: `_sync_meta` key set while `create_indexes` runs (the end phase of a bulk load, or an open
#: completing one): a process killed in between leaves it, and the next open then checks every
#: full-text index against its table (`_prepare`), which is too slow to do on every open.
END_PHASE = "end_phase_started_at"

#: `PRAGMA wal_autocheckpoint` (WAL frames after which a commit runs a PASSIVE checkpoint) per
#: `[mirror] checkpoints` mode: (normally, during a bulk load). SQLite's default, and ~64 MiB
#: during a bulk load, which rewrites the same B-tree pages over and over (each checkpoint
#: copies and syncs them). With Litestream replicating the file, 0: sync never checkpoints, so
#: no checkpoint of ours races Litestream's copy of the WAL (litestream.io/tips, "Disable
#: autocheckpoints"); Litestream checkpoints once it has copied the frames. No mode ever runs
#: a RESTART or TRUNCATE checkpoint.
AUTOCHECKPOINT: dict[str, tuple[int, int]] = {"sqlite": (1000, 16384), "litestream": (0, 0)}


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
        self._autocheckpoint, self._bulk_autocheckpoint = AUTOCHECKPOINT[checkpoints]
        self.schema = Schema(conn)
        self._sql: dict[tuple[str, tuple[str, ...], bool], str] = {}
        self._scripts = Scripts(conn)
        self._listings = 0
        self._group_size = 0  # pages per transaction in group-commit mode (0: off)
        self._group_pending = 0
        self._group_seconds = 2.0
        self._group_began = 0.0
        self._tombstones: bool | None = None  # whether any exist; None until first looked up
        # Included resources (images, tags...) repeat on page after page: remember what was
        # last committed for each, and skip identical rows (bounded, `sync.pipeline.seen.Seen`).
        self._included_seen = Seen(INCLUDED_SEEN)
        # Ids written to the tables this mirror created: an owner never written has no row and
        # no links yet, so its page write needs neither the guard's SELECT nor link DELETEs.
        self._fresh = FreshIds()
        #: Ids per type that `_sync_refusals` holds or held (None until looked up; never
        #: shrunk, so a rolled-back page cannot make it forget one), and the (type, attribute)
        #: pairs whose coercions this process has logged at info level.
        self._refused_ids: dict[str, set[int]] | None = None
        self._coercions_logged: set[tuple[str, str]] = set()
        #: Told (type, "refused" or "coerced", how many) of each page's misfit values: the
        #: daemon counts them in its metrics.
        self.on_values: Callable[[str, str, int], None] | None = None

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path | str, *, readonly: bool = False, checkpoints: CheckpointMode = "sqlite"
    ) -> Mirror:
        """Open (creating if needed) the mirror at `path`; MirrorError names problem and fix.

        `checkpoints` is `[mirror] checkpoints`: "litestream" turns sync's own WAL checkpoints
        off (see `AUTOCHECKPOINT`)."""
        p = Path(path)
        if p.is_dir():
            raise MirrorError(
                f"mirror {p} is a directory",
                hint=f"[mirror] path names the database file, e.g. {p / 'mirror.db'}",
            )
        if readonly and p.exists():
            _check_header(p)
        elif readonly:
            raise MirrorError(
                f"mirror {p} does not exist yet",
                hint="run `ccsync backfill` first, or check [mirror] path",
            )
        else:
            parent = p.parent if str(p.parent) else Path(".")
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise MirrorError(
                    f"cannot create the directory of mirror {p}: {exc.strerror}",
                    hint="create it, or point [mirror] path somewhere writable",
                ) from None
        lock = None if readonly else _take_lock(p)
        mode = "ro" if readonly else "rwc"
        try:
            conn = sqlite3.connect(
                f"file:{p}?mode={mode}", uri=True, isolation_level=None, timeout=10.0
            )
        except sqlite3.Error as exc:
            _release(lock)
            raise MirrorError(
                f"cannot open mirror {p}: {exc}", hint="check the path and its permissions"
            ) from None
        try:
            mirror = cls(conn, p, lock, checkpoints)
            mirror._prepare(readonly)
        except sqlite3.DatabaseError as exc:
            conn.close()
            _release(lock)
            text = str(exc)
            # Locked past the wait, read-only, full: named with the fix (exit 4), not damage.
            fault = storage_fault(exc, p, then="then retry; nothing was changed")
            if fault is not None:
                raise fault from None
            raise MirrorError(
                f"mirror {p} is damaged ({text}); nothing was changed",
                hint="restore it from a backup, or move it away and run `ccsync backfill`",
            ) from None
        except MirrorError:
            conn.close()
            _release(lock)
            raise
        return mirror

    def _prepare(self, readonly: bool) -> None:
        fresh = self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        if not fresh:
            check = self.conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                check = " ".join(str(check).split())[:200]  # one line, however long the report
                raise MirrorError(
                    f"mirror {self.path} failed its integrity check ({check}); nothing was changed",
                    hint="restore it from a backup, or move it away and run `ccsync backfill`",
                )
        if readonly:
            return
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=10000")
        self.conn.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
        self.conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        if not fresh:
            has_meta = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = '_sync_meta'"
            ).fetchone()
            if has_meta:
                row = self.conn.execute(
                    "SELECT value FROM _sync_meta WHERE key = 'schema_version'"
                ).fetchone()
                if row is not None and int(row[0]) > SCHEMA_VERSION:
                    raise MirrorError(
                        f"mirror {self.path} was written by a newer sync (schema {row[0]})",
                        hint="upgrade sync, or point [mirror] path at another file",
                    )
        self.conn.executescript(BOOKKEEPING)
        self.set_meta("schema_version", str(SCHEMA_VERSION))
        if not fresh:
            tables = [t for t in catalogue.TYPES if self.has_table(t)]
            self.schema.repair_types(tables)
            self.schema.repair_foreign_keys(self._link_tables())
            memberships.migrate(self.conn, self._ensure_memberships)
            migrate_scripts(self.conn)
            # An end phase killed part way: whatever it left half made is made whole here.
            unfinished = self.get_meta(END_PHASE) is not None
            if unfinished:
                remove_scratch(self.path)
            self.schema.repair_fts(tables, check=unfinished)
            self.create_indexes()  # a bulk load interrupted before its indexes were built

    def _ensure_memberships(self, type_name: str) -> None:
        """The membership table of a mall-scoped type (`sync.store.memberships`)."""
        self.schema.ensure_link(
            memberships.table(type_name), *memberships.columns(type_name), "malls", type_name
        )

    def _link_tables(self) -> list[tuple[str, str, str, str, str]]:
        """(table, owner column, related column, owner, target) of every link table."""
        return [
            (rel.link_table(name), *rel.link_columns(name), name, rel.target)
            for name, rtype in catalogue.TYPES.items()
            for rel in rtype.relationships
            if not rel.to_one
        ]

    def create_indexes(self) -> None:
        """Build any missing index of the content and link tables, the full-text indexes and
        the views (cheap when they all exist). Missing full-text indexes are built beside the
        mirror while the B-tree indexes are built in it (`sync.store.ftsbuild`). Marked
        unfinished in `_sync_meta` until it returns (`END_PHASE`)."""
        self.set_meta(END_PHASE, now_iso())
        tables = [t for t in catalogue.TYPES if self.has_table(t)]
        plan = self.schema.fts_missing(tables)
        side = None
        if plan and not self.conn.in_transaction and self.path.is_file():
            # Largest first (max(rowid) as the measure: a lookup, where count(*) is a scan).
            size = {
                t: self.conn.execute(f"SELECT max(rowid) FROM [{t}]").fetchone()[0] or 0
                for t in plan
            }
            plan = dict(sorted(plan.items(), key=lambda item: -size[item[0]]))
            side = SideBuild(self.path, plan, autocheckpoint=self._autocheckpoint).start()
        try:
            self.schema.create_indexes(tables)
            for name, rtype in catalogue.TYPES.items():
                for rel in rtype.relationships:
                    table = rel.link_table(name)
                    if not rel.to_one and self.has_table(table):
                        self.schema.create_link_index(table, rel.link_columns(name)[1])
            for name in memberships.MEMBER_TYPES:
                if self.has_table(memberships.table(name)):
                    self.schema.create_link_index(
                        memberships.table(name), memberships.columns(name)[1]
                    )
            if side is not None:
                self.schema.ensure_fts(side.steal())  # what the thread has not started yet
        except BaseException:
            if side is not None:
                side.finish(copy=False)
            raise
        if side is not None:
            side.finish()
        self.schema.ensure_fts(tables)  # what the side build did not make (or all, without it)
        self.schema.ensure_change_triggers(tables)
        self.schema.ensure_views()
        self.set_meta(END_PHASE, None)

    def defer_indexes(self, defer: bool) -> None:
        """During a bulk load into empty tables, build secondary indexes, full-text indexes and
        the change feed's triggers at the end; the feed gets one `backfill` entry per type
        loaded, not one per row."""
        was = self.schema.defer_indexes
        self.schema.defer_indexes = defer
        if defer:
            self.schema.drop_change_triggers()
            return
        if was:
            loaded = [t for t in catalogue.TYPES if self.has_table(t)]
            self.conn.executemany(
                "INSERT INTO _sync_changes (type, id, op, updated_at, at) "
                "VALUES (?, NULL, 'backfill', NULL, ?)",
                [(t, now_iso()) for t in loaded],
            )
        self.create_indexes()

    # -- the change feed -----------------------------------------------------------------------

    def changes(
        self, since: int = 0, limit: int = 1000
    ) -> list[tuple[int, str, int | None, str, str | None, str]]:
        """Entries of the change feed after sequence number `since`: (seq, type, id, op,
        updated_at, at); op is `upsert`, `delete` or `backfill` (every row of the type)."""
        if not self.has_table("_sync_changes"):  # a mirror written before the feed existed
            return []
        return [
            tuple(r)
            for r in self.conn.execute(
                "SELECT seq, type, id, op, updated_at, at FROM _sync_changes WHERE seq > ? "
                "ORDER BY seq LIMIT ?",
                (since, limit),
            )
        ]

    def prune_changes(self, keep_days: float) -> int:
        """Drop change feed entries older than `keep_days`; the sequence numbers go on."""
        cutoff = iso_ms(time.time() - keep_days * 86400)
        return self.conn.execute("DELETE FROM _sync_changes WHERE at < ?", (cutoff,)).rowcount

    # -- group commit ------------------------------------------------------------------------

    def start_group_commit(self, pages: int, *, seconds: float = 2.0) -> None:
        """Commit every `pages` pages (or `seconds`) instead of every page (bulk loads only).

        Each page stays atomic with its checkpoint (the group commits or rolls back as a
        whole); a crash loses at most the uncommitted group, whose pages the next run fetches
        again. Not for the daemon: the webhook receiver's 202 must follow a real commit.
        """
        self._group_size = pages
        self._group_seconds = seconds
        self._group_pending = 0
        # Checkpoint the WAL less often (see AUTOCHECKPOINT). A larger page cache keeps the
        # B-tree pages a bulk load rewrites dirty across a group instead of spilling them to the
        # WAL mid-transaction (a third fewer bytes written; bounded, so memory stays flat).
        self.conn.execute(f"PRAGMA wal_autocheckpoint={self._bulk_autocheckpoint}")
        self.conn.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")

    def end_group_commit(self) -> None:
        """Commit what the group holds and go back to one commit per page."""
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")
        self._group_size = 0
        self._group_pending = 0
        self.conn.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
        self.conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")

    def _grouped(self) -> None:
        """After a page: commit the group when it is full or old enough for readers to see."""
        if not self._group_size:
            return
        self._group_pending += 1
        now = time.monotonic()
        if self._group_pending == 1:
            self._group_began = now
        if (
            self._group_pending >= self._group_size
            or now - self._group_began >= self._group_seconds
        ):
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")
            self._group_pending = 0

    @contextlib.contextmanager
    def _page_transaction(self) -> Iterator[None]:
        """One page's writes: its own transaction, or a part of the open group.

        In a group, a failure rolls back the whole group rather than a savepoint: a savepoint
        makes SQLite copy every page it touches into a sub-journal first, which doubled the
        bytes a bulk load writes. Nothing is lost by it: the group's pages go with their
        checkpoints, the next run fetches them again, and the run stops on the error anyway.
        """
        if not self._group_size:
            try:
                with write_transaction(self.conn):
                    yield
            except BaseException:
                self._scripts.forget()  # the scripts it wrote are not stored
                raise
            return
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")  # see sync.store.transaction
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            self._group_pending = 0
            self._included_seen.clear()  # it described rows of the rolled-back group too
            self._scripts.forget()
            raise

    def close(self) -> None:
        """Close the connection and release the writer lock."""
        if self._group_size:
            self.end_group_commit()
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()
        _release(self._lock)
        self._lock = None

    # -- reads ---------------------------------------------------------------------------------

    def has_table(self, table: str) -> bool:
        return bool(self.schema.columns(table))

    def count(self, type_name: str, *, mall_id: int | None = None) -> int:
        if not self.has_table(type_name):
            return 0
        if mall_id is None:
            return int(self.conn.execute(f"SELECT count(*) FROM [{type_name}]").fetchone()[0])
        return memberships.count_in_mall(self.conn, type_name, mall_id)

    def ids(
        self, type_name: str, *, mall_id: int | None = None, after: int | None = None
    ) -> Iterator[int]:
        """Ids of a table in order (those greater than `after`, when given), streamed in
        chunks (never the whole table in memory)."""
        if not self.has_table(type_name):
            return
        if mall_id is not None:
            yield from memberships.ids_in_mall(self.conn, type_name, mall_id, after)
            return
        last = -(1 << 63) if after is None else after
        while True:
            chunk = [
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM [{type_name}] WHERE id > ? ORDER BY id LIMIT 1000", (last,)
                )
            ]
            yield from chunk
            if len(chunk) < 1000:
                return
            last = chunk[-1]

    def stamps(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """`updated_at` of those of `ids` the table holds (normalised as written, so it
        compares as text with `sync.model.stamps.normalize`d stamps; None without one)."""
        cols = self.schema.columns(type_name)
        if not cols or not ids:
            return {}
        stamp = "updated_at" if "updated_at" in cols else "NULL"
        out: dict[int, str | None] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for rid, updated in self.conn.execute(
                f"SELECT id, {stamp} FROM [{type_name}] WHERE id IN ({marks})", chunk
            ):
                out[int(rid)] = updated
        return out

    def get(self, type_name: str, id: int) -> dict[str, Any] | None:
        if not self.has_table(type_name):
            return None
        cur = self.conn.execute(f"SELECT * FROM [{type_name}] WHERE id = ?", (id,))
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cur.description], row, strict=True))

    def status(self) -> list[TypeStatus]:
        extra = self._status_rows()
        names = [n for n in catalogue.LISTABLE if self.has_table(n) or n in extra]
        out = []
        for name in names:
            info = extra.get(name, {})
            out.append(
                TypeStatus(
                    name,
                    self.count(name),
                    info.get("last_sync_at"),
                    info.get("cursor"),
                    info.get("last_error"),
                )
            )
        return out

    def listing(self, type_name: str, mall_id: int | None = None) -> Listing:
        """A temporary id listing of one (type, mall) to diff against the table."""
        if mall_id is not None and self.has_table(type_name):
            self._ensure_memberships(type_name)
        self._listings += 1
        return Listing(
            self.conn, type_name, mall_id, f"_sync_listing_{os.getpid()}_{self._listings}"
        )

    # -- the page write --------------------------------------------------------------------------

    def write_page(
        self,
        rtype: ResourceType,
        resources: Sequence[dict[str, Any]],
        included: Sequence[dict[str, Any]] = (),
        *,
        mall_id: int | None = None,
        scripts: Any = None,
        checkpoint: PageCheckpoint | None = None,
    ) -> WriteResult:
        """Upsert one page (rows, links, included, scripts, checkpoint) in one transaction.

        `scripts` is the response's `meta.scripts` as served (None: no such key): `rtype`'s
        scripts become that list (`sync.store.scripts`)."""
        return self.write_staged(
            stage_resources(rtype, resources, included, mall_id),
            scripts=scripts,
            checkpoint=checkpoint,
        )

    def write_staged(
        self,
        batches: list[Staged],
        *,
        scripts: Any = None,
        checkpoint: PageCheckpoint | None = None,
    ) -> WriteResult:
        """Write a staged page (`sync.pipeline.staging`): the listed type's batch, then the included ones.

        Included rows identical (by version) to the copy this mirror last committed are skipped:
        images and tags repeat on page after page.
        """
        seen = self._included_seen
        if len(seen):
            for b in batches[1:]:
                if b.versions is not None:
                    b.keep(seen.unwritten(b.type, b.ids, b.versions))
        self._ensure_schema(batches)
        main = batches[0]
        with self._page_transaction():
            self._note_values(batches)
            for b in batches:
                self._drop_tombstoned(b)
                links, new = self._link_guard(b)
                self._upsert(b)
                self._write_links(b.rtype, links, new)
            self._write_memberships(main)
            self._scripts.write(main.rtype, scripts)  # the listed type's, as served
            if checkpoint is not None:
                self._record_checkpoint(checkpoint)
        self._grouped()
        for b in batches[1:]:
            if b.versions is not None:
                seen.add(b.type, b.ids, b.versions)
        return WriteResult(len(main.ids), sum(len(b.ids) for b in batches[1:]), main.dropped)

    def write_scripts(self, rtype: ResourceType, scripts: Any) -> None:
        """`rtype`'s scripts from a response that brought no rows to write (a poll finding no
        change): the scripts may have changed all the same (`sync.store.scripts`)."""
        if not self._scripts.due(rtype, scripts):
            return  # no transaction for the same list as a moment ago
        with self._page_transaction():
            self._scripts.write(rtype, scripts)
        self._grouped()

    def _write_memberships(self, b: Staged) -> None:
        """The mall that listed a page's rows lists them: one (mall, row) pair each."""
        if b.rtype.level != "mall" or not b.ids or "mall_id" not in b.columns:
            return
        pos = b.columns.index("mall_id") + 1
        memberships.add(
            self.conn, b.type, [(row[pos], row[0]) for row in b.rows if row[pos] is not None]
        )

    def add_memberships(self, type_name: str, mall_id: int, ids: Sequence[int]) -> None:
        """`mall_id` lists `ids` (rows the mirror holds): record the pairs, re-point `mall_id`."""
        if not ids or not self.has_table(type_name):
            return
        self._ensure_memberships(type_name)
        with write_transaction(self.conn):
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                held = [
                    int(r[0])
                    for r in self.conn.execute(
                        f"SELECT id FROM [{type_name}] WHERE id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                ]
                memberships.add(self.conn, type_name, [(mall_id, i) for i in held])
                memberships.refresh_mall_id(self.conn, type_name, held)

    def remove_memberships(self, type_name: str, mall_id: int, ids: Sequence[int]) -> int:
        """`mall_id` no longer lists `ids`: a change of membership, never a deletion."""
        with write_transaction(self.conn):
            return memberships.remove(self.conn, type_name, mall_id, ids)

    def drop_mall(self, mall_id: int) -> dict[str, list[int]]:
        """A mall gone upstream: its memberships, hours and current hours go (the rows that lose
        their last mall are left for `orphans`, confirmed by `filter[id]` before any deletion)."""
        with write_transaction(self.conn):
            return memberships.drop_mall(self.conn, mall_id)

    def mall_gone(self, mall_id: int, deleted_at: str) -> None:
        """A mall route answered 404: the mall is gone upstream. Its row (if mirrored) is
        deleted and tombstoned at `deleted_at`, and with it its memberships, hours and current
        hours; its members that no other mall lists are left for `orphans`."""
        if self.has_table("malls") and self.get("malls", mall_id) is not None:
            self.delete("malls", [mall_id], deleted_at=deleted_at)
        else:
            self.drop_mall(mall_id)

    def has_view(self, name: str) -> bool:
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)
            ).fetchone()
        )

    def replace_mall_links(self, type_name: str, mall_id: int, ids: Sequence[int]) -> int:
        """`malls_<type_name>` of one mall becomes `ids` (as its route lists them, in order):
        contacts and deals known from the mall routes (`sync.jobs.mallroutes`)."""
        table = f"malls_{type_name}"
        self.schema.ensure_link(table, "malls_id", f"{type_name}_id", "malls", type_name)
        with write_transaction(self.conn):
            self.conn.execute(f"DELETE FROM [{table}] WHERE malls_id = ?", (mall_id,))
            self.conn.executemany(
                f"INSERT OR IGNORE INTO [{table}] (malls_id, [{type_name}_id], position) "
                "VALUES (?, ?, ?)",
                [(mall_id, rid, pos) for pos, rid in enumerate(ids)],
            )
        return len(ids)

    def malls_of(self, type_name: str, rid: int) -> list[int]:
        """The malls whose routes list a mall-scoped row (its memberships), ascending."""
        return memberships.malls_of(self.conn, type_name, rid)

    def orphans(self, type_name: str) -> Iterator[list[int]]:
        """Batches of a mall-scoped type's rows that no mall lists."""
        return memberships.orphans(self.conn, type_name)

    def malls_referenced(self) -> set[int]:
        """Malls the mirror holds or some membership still names."""
        return set(self.ids("malls")) | memberships.malls_referenced(self.conn)

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

    def _note_values(self, batches: Sequence[Staged]) -> None:
        """Inside the page's transaction: log, record and count the values `stage` refused
        (their rows are not written: the mirror keeps its last good copy) or converted, and
        forget the refusals of rows written now."""
        for b in batches:
            for rid, attribute, value, problem in b.refused:
                _log.error(
                    "mirror.value_refused",
                    type=b.type,
                    id=rid,
                    attribute=attribute,
                    value=value,
                    problem=problem,
                    fix="the row keeps its last good copy; report the value to the upstream",
                )
            per: dict[str, list[tuple[int, str, str]]] = {}
            for item in b.coerced:
                per.setdefault(item[1], []).append(item)
            for attribute, items in sorted(per.items()):
                first = (b.type, attribute) not in self._coercions_logged
                self._coercions_logged.add((b.type, attribute))
                (_log.info if first else _log.debug)(  # each page of a systematic misfit
                    "mirror.values_coerced",
                    type=b.type,
                    attribute=attribute,
                    count=len(items),
                    id=items[0][0],
                    value=items[0][2],
                    hint="converted losslessly to the declared type; counted in ccsync status",
                )
            if self._refused_ids is None:
                self._refused_ids = self.refused_ids()
            if b.refused or b.coerced:
                self.record_values(b.type, b.refused, b.coerced)
                self._refused_ids.setdefault(b.type, set()).update(r[0] for r in b.refused)
                if self.on_values is not None:
                    for outcome, n in (("refused", len(b.refused)), ("coerced", len(b.coerced))):
                        if n:
                            self.on_values(b.type, outcome, n)
            held = self._refused_ids.get(b.type)
            if held and b.ids:  # a set intersection a page: nothing to do on a clean mirror
                again = held.intersection(b.ids)
                if again:
                    self.forget_refusals(b.type, sorted(again))

    def tombstones(self, type_name: str, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` that have one: id -> deleted_at."""
        if self._tombstones is None:
            self._tombstones = bool(
                self.conn.execute("SELECT 1 FROM _sync_tombstones LIMIT 1").fetchone()
            )
        if not self._tombstones or not ids:
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

    def _drop_tombstoned(self, b: Staged) -> None:
        """Leave out of `b` the rows a tombstone refuses; lift those a newer copy outlives."""
        if not b.ids:
            return
        dead = self.tombstones(b.rtype.name, b.ids)
        if not dead:
            return
        pos = b.columns.index("updated_at") + 1 if "updated_at" in b.columns else None
        now = now_iso()
        keep: list[bool] = []
        lifted: list[int] = []
        for row in b.rows:
            rid = row[0]
            if rid not in dead:
                keep.append(True)
            elif tombstone_holds(dead[rid], row[pos] if pos is not None else None, now):
                keep.append(False)
            else:
                keep.append(True)
                lifted.append(rid)
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

    def _ensure_schema(self, batches: Sequence[Staged]) -> None:
        """Tables, columns and link tables the batches need.

        Schema changes first: sqlite-utils commits on its own, so never inside our transaction.
        """
        main = batches[0] if batches else None
        if main is not None and main.rtype.level == "mall" and "mall_id" in main.columns:
            self._ensure_memberships(main.type)
        for b in batches:
            rtype = b.rtype
            if b.ids:
                known = self.schema.columns(rtype.table)
                if not known or not known.issuperset(b.columns):
                    self.schema.ensure_content(rtype.table, {"id": b.ids[0], **b.samples})
                if not known and self._links_empty(rtype):
                    # Created here, empty, and no link rows: every row and link it gets from
                    # now on is written by this mirror, which records the ids (`FreshIds`).
                    self._fresh.track(rtype.table)
                self.schema.widen(rtype.table, b.columns, b.rows)
            for rel in rtype.relationships:
                if not rel.to_one and rel.name in b.links:
                    self.schema.ensure_link(
                        rel.link_table(rtype.name),
                        *rel.link_columns(rtype.name),
                        rtype.name,
                        rel.target,
                    )

    def _links_empty(self, rtype: ResourceType) -> bool:
        """Whether no link table of `rtype` holds a row (each is absent or empty): a link
        table left over from a content table dropped by hand must not be taken for empty."""
        for rel in rtype.relationships:
            table = rel.link_table(rtype.name)
            if (
                not rel.to_one
                and self.has_table(table)
                and self.conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone()
            ):
                return False
        return True

    def write_sideloads(
        self,
        rtype: ResourceType,
        included: Sequence[Staged],
        links: dict[str, list[tuple[int, list[int]]]],
        stamps: dict[int, Any],
    ) -> int:
        """A reconcile page's sideloads (`sync.jobs.sideloads`): the included rows, and the links of
        the listed owners whose mirrored `updated_at` equals the listed one (`stamps`), in one
        transaction. Owners not mirrored, or mirrored at another stamp, are left alone.
        Returns how many owners' links were replaced."""
        self._ensure_schema(included)
        owners = list({rid for pairs in links.values() for rid, _ in pairs})
        if owners and self.has_table(rtype.table):
            for rel in rtype.relationships:
                if not rel.to_one and rel.name in links:
                    self.schema.ensure_link(
                        rel.link_table(rtype.name),
                        *rel.link_columns(rtype.name),
                        rtype.name,
                        rel.target,
                    )
        with self._page_transaction():
            self._note_values(included)
            for b in included:
                self._drop_tombstoned(b)
                own, new = self._link_guard(b)
                self._upsert(b)
                self._write_links(b.rtype, own, new)
            same: set[int] = set()
            if owners and self.has_table(rtype.table):
                guard = "updated_at" in self.schema.columns(rtype.table)
                for start in range(0, len(owners), 500):
                    chunk = owners[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    col = "updated_at" if guard else "NULL"
                    for rid, stored in self.conn.execute(
                        f"SELECT id, {col} FROM [{rtype.table}] WHERE id IN ({marks})", chunk
                    ):
                        if stored == stamps.get(rid):
                            same.add(rid)
                self._write_links(
                    rtype,
                    {n: [(o, r) for o, r in pairs if o in same] for n, pairs in links.items()},
                )
        self._grouped()
        for b in included:
            self._included_seen.forget(b.type, b.ids)
        return len(same)

    def replace_links(
        self, rtype: ResourceType, rel: catalogue.Relationship, owner: int, targets: Sequence[int]
    ) -> None:
        """One owner's links of one to-many relationship become `targets`, in order (its own
        route's answer, `sync.jobs.relroutes`)."""
        table = rel.link_table(rtype.name)
        self.schema.ensure_link(table, *rel.link_columns(rtype.name), rtype.name, rel.target)
        with write_transaction(self.conn):
            self._write_links(rtype, {rel.name: [(owner, list(targets))]})

    def set_to_one(self, rtype: ResourceType, column: str, rid: int, target: int | None) -> None:
        """One owner's to-one column (its relationship's own route, `sync.jobs.relroutes`)."""
        if column not in self.schema.columns(rtype.table):
            self.schema.ensure_content(rtype.table, {"id": rid, column: target or 0})
        with write_transaction(self.conn):
            self.conn.execute(
                f"UPDATE [{rtype.table}] SET [{column}] = ? WHERE id = ?", (target, rid)
            )

    def write_to_one(
        self,
        rtype: ResourceType,
        column: str,
        values: Sequence[tuple[int, Any]],
        stamps: dict[int, Any],
    ) -> int:
        """A reconcile page's to-one linkage (`sync.jobs.sideloads`): `column` of the listed owners
        whose mirrored `updated_at` equals the listed one (the linkage changed under an unchanged
        stamp); others are left to the reconcile's refetch. Returns the rows changed."""
        table = rtype.table
        cols = self.schema.columns(table)
        if column not in cols or "updated_at" not in cols:
            return 0
        with write_transaction(self.conn):
            return sum(
                self.conn.execute(
                    f"UPDATE [{table}] SET [{column}] = ? WHERE id = ? AND updated_at IS ? "
                    f"AND [{column}] IS NOT ?",
                    (value, rid, stamps.get(rid), value),
                ).rowcount
                for rid, value in values
            )

    def prune_unreferenced(self, types: Sequence[str]) -> dict[str, int]:
        """Delete rows of `types` that no link table or to-one column references, then the
        links those rows owned. In `types` order: an image pruned first frees its tags."""
        removed: dict[str, int] = {}
        for target in types:
            if not self.has_table(target):
                continue
            refs = self._references(target, types)
            where = f"id NOT IN ({' UNION '.join(refs)})" if refs else "1"
            with write_transaction(self.conn):
                n = self.conn.execute(f"DELETE FROM [{target}] WHERE {where}").rowcount
                for rel in catalogue.TYPES[target].relationships:
                    table = rel.link_table(target)
                    if not rel.to_one and self.has_table(table):
                        owner = rel.link_columns(target)[0]
                        self.conn.execute(
                            f"DELETE FROM [{table}] WHERE [{owner}] NOT IN "
                            f"(SELECT id FROM [{target}])"
                        )
            if n:
                removed[target] = n
                self._included_seen.clear()
        return removed

    def _direct_references(self, target: str, sideloaded: Sequence[str]) -> list[str]:
        """SELECTs of the `target` ids that rows of listed (not sideloaded) types link to."""
        refs: list[str] = []
        for name, rtype in catalogue.TYPES.items():
            if name in sideloaded:
                continue
            for rel in rtype.relationships:
                if rel.target != target:
                    continue
                if rel.to_one:
                    if rel.column in self.schema.columns(name):
                        refs.append(f"SELECT [{rel.column}] FROM [{name}]")
                elif self.has_table(table := rel.link_table(name)):
                    refs.append(f"SELECT [{rel.link_columns(name)[1]}] FROM [{table}]")
        return refs

    def _references(self, target: str, sideloaded: Sequence[str]) -> list[str]:
        """SELECTs of every `target` id the mirror should hold: those listed rows link to, and
        one level further, those linked from sideloaded rows listed rows link to (`images.tags`,
        `tags.tags`: what the include paths of `catalogue.include_paths` deliver)."""
        refs = self._direct_references(target, sideloaded)
        for name in sideloaded:
            for rel in catalogue.TYPES[name].relationships:
                table = rel.link_table(name)
                if rel.target != target or rel.to_one or not self.has_table(table):
                    continue
                owners = self._direct_references(name, sideloaded)
                if owners:
                    owner, other = rel.link_columns(name)
                    refs.append(
                        f"SELECT [{other}] FROM [{table}] WHERE [{owner}] IN "
                        f"({' UNION '.join(owners)})"
                    )
        return refs

    def _link_guard(self, b: Staged) -> tuple[dict[str, list[tuple[int, list[int]]]], set[int]]:
        """The batch's links, less those of rows the upsert's guard will refuse; and the owners
        known to have no row before this upsert, hence no links (`_write_links` deletes none).

        A row's relationships are part of the row: an older copy (a page fetched before a
        webhook fetch and written after it, a lagging replica upstream) must change neither
        its columns nor its links. Read before the upsert, in the same transaction, with the
        guard's own rule: a stored stamp wins over a missing or smaller one. Owners known
        absent (`FreshIds`: in a table this mirror created, never written) have nothing to
        compare and are not queried: in a first backfill, nearly all of them.
        """
        if not b.links or not b.ids:
            return b.links, set()
        table = b.rtype.table
        owners = {rid for pairs in b.links.values() for rid, _ in pairs}
        new = self._fresh.absent(table, owners)
        ask = [rid for rid in owners if rid not in new]
        if (
            not ask
            or "updated_at" not in b.columns
            or "updated_at" not in self.schema.columns(table)
        ):
            return b.links, new
        pos = b.columns.index("updated_at") + 1
        incoming = {row[0]: row[pos] for row in b.rows}
        older: set[int] = set()
        for start in range(0, len(ask), 500):
            chunk = ask[start : start + 500]
            for rid, stored in self.conn.execute(
                f"SELECT id, updated_at FROM [{table}] WHERE id IN "
                f"({','.join('?' * len(chunk))}) AND updated_at IS NOT NULL",
                chunk,
            ):
                stamp = incoming.get(rid)
                if stamp is None or stamp < stored:
                    older.add(rid)
        if not older:
            return b.links, new
        kept = {n: [(o, r) for o, r in pairs if o not in older] for n, pairs in b.links.items()}
        return kept, new

    def _upsert(self, b: Staged) -> None:
        if b.ids:
            self._fresh.add(b.rtype.table, b.ids)
            self.conn.executemany(self._upsert_sql(b.rtype.table, b.columns), b.rows)

    def _upsert_sql(self, table: str, cols: tuple[str, ...]) -> str:
        """INSERT ... VALUES ... ON CONFLICT(id) DO UPDATE ... WHERE the copy is not older."""
        guard = "updated_at" in cols
        key = (table, cols, guard)
        sql = self._sql.get(key)
        if sql is None:
            names = ", ".join(f"[{c}]" for c in ("id", *cols))
            marks = ", ".join("?" * (len(cols) + 1))
            # A mall-scoped row's `mall_id` is the lowest mall that lists it
            # (`sync.store.memberships`); elsewhere (events) it is a to-one relationship.
            scoped = table in memberships.MEMBER_TYPES
            sets = ", ".join(
                f"[{c}] = excluded.[{c}]"
                if c != "mall_id" or not scoped
                else f"[mall_id] = CASE WHEN [{table}].mall_id IS NULL OR excluded.mall_id < "
                f"[{table}].mall_id THEN excluded.mall_id ELSE [{table}].mall_id END"
                for c in cols
            )
            sql = f"INSERT INTO [{table}] ({names}) VALUES ({marks})"
            sql += (
                f" ON CONFLICT(id) DO UPDATE SET {sets}" if sets else " ON CONFLICT(id) DO NOTHING"
            )
            if guard and sets:
                sql += (
                    f" WHERE [{table}].updated_at IS NULL"
                    f" OR excluded.updated_at >= [{table}].updated_at"
                )
            self._sql[key] = sql
        return sql

    def _write_links(
        self,
        rtype: ResourceType,
        links: dict[str, list[tuple[int, list[int]]]],
        new: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        """Replace the link rows of the owners in `links`; owners in `new` had no row before
        this write, hence no links, and their DELETE is skipped (`_link_guard`)."""
        for rel in rtype.relationships:
            pairs = links.get(rel.name)
            if not pairs:
                continue
            table = rel.link_table(rtype.name)
            owner, other = rel.link_columns(rtype.name)
            owners = [rid for rid, _ in pairs if rid not in new] if new else [r for r, _ in pairs]
            if owners:
                self.conn.execute(
                    f"DELETE FROM [{table}] WHERE [{owner}] IN ({','.join('?' * len(owners))})",
                    owners,
                )
            self.conn.executemany(
                f"INSERT OR IGNORE INTO [{table}] ([{owner}], [{other}], position) VALUES (?, ?, ?)",
                [
                    (rid, rel_id, pos)
                    for rid, related in pairs
                    for pos, rel_id in enumerate(related)
                ],
            )

    # -- deletions and hours -------------------------------------------------------------------

    def delete(
        self,
        type_name: str,
        ids: Iterable[int],
        *,
        remember: bool = True,
        deleted_at: str | Mapping[int, str | None] | None = None,
    ) -> int:
        """Delete rows and their links, and remember the ids with the moment of the deletion
        (`deleted_at`: one stamp, or one per id; default now) so that a copy fetched before it
        cannot bring them back (`remember=False`: a row that left a mall's "current" list, not
        deleted upstream)."""
        id_list = list(dict.fromkeys(int(i) for i in ids))
        if not id_list:
            return 0
        rtype = catalogue.TYPES.get(type_name)
        removed = 0
        if remember:
            self._tombstones = True
        self._included_seen.forget(type_name, id_list)
        stamp = now_iso()
        with write_transaction(self.conn):
            if remember:
                per = deleted_at if isinstance(deleted_at, Mapping) else {}
                one = deleted_at if isinstance(deleted_at, str) else stamp
                self.conn.executemany(
                    "INSERT INTO _sync_tombstones (type, id, deleted_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (type, id) DO UPDATE SET deleted_at = max("
                    "coalesce(_sync_tombstones.deleted_at, ''), excluded.deleted_at)",
                    [(type_name, i, per.get(i) or one) for i in id_list],
                )
            if self.has_table(type_name):
                for start in range(0, len(id_list), 500):
                    chunk = id_list[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    removed += self.conn.execute(
                        f"DELETE FROM [{type_name}] WHERE id IN ({marks})", chunk
                    ).rowcount
                    for rel in rtype.relationships if rtype else ():
                        table = rel.link_table(type_name)
                        if not rel.to_one and self.has_table(table):
                            owner = rel.link_columns(type_name)[0]
                            self.conn.execute(
                                f"DELETE FROM [{table}] WHERE [{owner}] IN ({marks})", chunk
                            )
                    # Other rows' links to the deleted rows go with them (a join row upstream).
                    for table, other in self._links_to(type_name):
                        self.conn.execute(
                            f"DELETE FROM [{table}] WHERE [{other}] IN ({marks})", chunk
                        )
                    memberships.drop_rows(self.conn, type_name, chunk)
            if type_name == "malls":
                # A mall's members lose it (their rows stay until no mall lists them), and its
                # hours and current hours go with it.
                for mall in id_list:
                    memberships.drop_mall(self.conn, mall)
        return removed

    def _links_to(self, target: str) -> list[tuple[str, str]]:
        """(link table, related column) of every existing link table whose rows name `target`."""
        out = []
        for name, rtype in catalogue.TYPES.items():
            for rel in rtype.relationships:
                if rel.target == target and not rel.to_one:
                    table = rel.link_table(name)
                    if self.has_table(table):
                        out.append((table, rel.link_columns(name)[1]))
        return out

    def write_hours(
        self, mall_id: int, items: Sequence[dict[str, Any]], start: date, end: date
    ) -> int:
        """Replace one mall's hours between `start` and `end` (inclusive)."""
        rows = []
        stamp = now_iso()
        for item in items:
            attrs = dict(item.get("attributes") or {})
            day = str(attrs.get("date") or item.get("id") or "")
            if not day:
                continue
            row = {k: encode(v) for k, v in attrs.items() if k not in ("mall_id", "fetched_at")}
            row.update({"mall_id": mall_id, "date": day, "fetched_at": stamp})
            rows.append(row)
        if rows or not self.has_table("hours"):
            self.schema.ensure_hours(
                rows[0] if rows else {"day": "", "hours_text": "", "description": ""}
            )
        with write_transaction(self.conn):
            self.conn.execute(
                "DELETE FROM hours WHERE mall_id = ? AND date BETWEEN ? AND ?",
                (mall_id, start.isoformat(), end.isoformat()),
            )
            groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for r in rows:
                groups.setdefault(tuple(r), []).append(r)
            for cols, group in groups.items():
                names = ", ".join(f"[{c}]" for c in cols)
                self.conn.executemany(
                    f"INSERT OR REPLACE INTO hours ({names}) VALUES ({', '.join('?' * len(cols))})",
                    [tuple(r[c] for c in cols) for r in group],
                )
        return len(rows)

    def write_current_hours(self, mall_id: int, body: Any) -> None:
        self.conn.execute(
            "INSERT INTO current_hours (mall_id, body, fetched_at) VALUES (?, ?, ?) "
            "ON CONFLICT(mall_id) DO UPDATE SET body = excluded.body, fetched_at = excluded.fetched_at",
            (mall_id, orjson.dumps(body).decode(), now_iso()),
        )


def _check_header(p: Path) -> None:
    try:
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise MirrorError(
            f"mirror {p} cannot be read: {exc.strerror}", hint="check its owner and permissions"
        ) from None
    if head and head != _SQLITE_HEADER:
        raise MirrorError(
            f"{p} is not a SQLite database; nothing was changed",
            hint="point [mirror] path at another file, or move this one away",
        )


def _take_lock(p: Path) -> WriterLock:
    """One writer per mirror file, whatever path names it (`sync.store.lock`): the header is
    checked through the locked descriptor, so the file is opened once."""
    fd = open_database(p)
    try:
        head = os.pread(fd, 16, 0)
        if head and head != _SQLITE_HEADER:
            raise MirrorError(
                f"{p} is not a SQLite database; nothing was changed",
                hint="point [mirror] path at another file, or move this one away",
            )
        lock = take(p, fd)
    except BaseException:
        os.close(fd)
        raise
    links = os.fstat(fd).st_nlink
    if links > 1:
        # The lock keeps out a second writer by any name, but SQLite names the WAL after the
        # path: a reader through another name would not see this writer's pages.
        _log.warning(
            "mirror.hard_links",
            path=str(p),
            links=links,
            hint="open the mirror by one name only (SQLite keys its WAL on the path)",
        )
    return lock


def _release(lock: WriterLock | None) -> None:
    if lock is not None:
        lock.release()

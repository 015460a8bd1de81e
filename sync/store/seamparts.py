"""The seam's parts: what the core asks of each part a mirror holds, as protocols.

`sync.store.seam.MirrorStore` is the mirror as the core (jobs, daemon, readers, commands) sees
it; its attributes are the parts below, each the surface the code outside `sync/store/` uses of
one concept, with the signatures of the SQLite implementation. The SQLite classes in
`sync/store/*` implement them (`Mirror.meta` is a `sync.store.meta.Meta`, ...), and the
PostgreSQL ones in `sync/store/pg/*` implement them over the same tables (`sync.store.pg.
bookkeeping.Meta`, ...), so one core runs over either store (#49). A member the core does not
use is not here: what a store needs of its own parts (a page's checkpoint, the group's
transaction) stays in the store. A few are used only where the core still holds the `Mirror` it
opened (`ccsync status`'s read-only open: `BackfillsPart.started_types`, `QueuePart.waiting`
and `lanes`, `ValuesPart.faults`; Datasette's `SchemaPart.names`): the PostgreSQL store needs
them all the same.

The protocols are `runtime_checkable`, so a test can hold a store's parts to them
(`tests/unit/store/test_seamparts.py`); such a check sees the members' names only, so the tests
compare each method's parameters too, and mypy holds their types, at every place the core is
handed a store.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import date
from typing import Any, Protocol, runtime_checkable

from sync.model.notices import WebhookNotice
from sync.store.backfills import BackfillState
from sync.store.changes import Change
from sync.store.queue import QueueItem
from sync.store.status import TypeStatus
from sync.store.values import OnValues

# -- small records kept by key ------------------------------------------------------------------


@runtime_checkable
class MetaPart(Protocol):
    """`_sync_meta` (`Mirror.meta`): the schema version, markers of unfinished phases, small
    JSON records, and the channel's `MetaStore` (`ChannelClient(store=mirror.meta)`). SQLite:
    `sync.store.meta.Meta`; PostgreSQL: `sync.store.pg.bookkeeping.Meta`."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str | None) -> None: ...

    def numbers(self, key: str) -> dict[str, int]: ...

    def set_number(self, key: str, name: str, value: int) -> None: ...


@runtime_checkable
class CursorsPart(Protocol):
    """`_sync_cursors` (`Mirror.cursors`): each (type, scope)'s poll cursor. SQLite:
    `sync.store.meta.Cursors`; PostgreSQL: `sync.store.pg.bookkeeping.Cursors`."""

    def get(self, type_name: str, scope: str) -> str | None: ...

    def set(self, type_name: str, scope: str, value: str) -> None: ...


@runtime_checkable
class BackfillsPart(Protocol):
    """The backfill checkpoints and the types a backfill ever completed (`Mirror.backfills`).
    SQLite: `sync.store.backfills.Backfills`; PostgreSQL: `sync.store.pg.backfills.Backfills`."""

    def state(self, type_name: str, scope: str) -> BackfillState | None: ...

    def start(self, type_name: str, scope: str, *, page_size: int, started_at: str) -> None: ...

    def begin(
        self, type_name: str, scope: str, *, page_size: int, started_at: str
    ) -> BackfillState | None: ...

    def finish(self, type_name: str, scope: str, *, finished_at: str) -> None: ...

    def started_types(self) -> list[str]: ...

    def completed_types(self) -> dict[str, str]: ...

    def type_completed(self, type_name: str, at: str) -> None: ...

    def reset(self) -> None: ...


@runtime_checkable
class RunsPart(Protocol):
    """The run records (`Mirror.runs`): each run's start, end, status and heartbeat. SQLite:
    `sync.store.runs.Runs`; PostgreSQL: `sync.store.pg.bookkeeping.Runs`."""

    def start(self, kind: str) -> int: ...

    def finish(self, run_id: int, *, status: str, rows: int | None, error: str | None) -> None: ...

    def heartbeat(self) -> None: ...

    def last(self, kind: str) -> dict[str, Any] | None: ...


@runtime_checkable
class JobsPart(Protocol):
    """The daemon's scheduled jobs (`Mirror.jobs`): last start, end, outcome and next run, by
    name. SQLite: `sync.store.jobrecords.JobRecords`; PostgreSQL:
    `sync.store.pg.bookkeeping.JobRecords`."""

    def started(self, name: str, at: str) -> None: ...

    def finished(
        self, name: str, *, at: str, outcome: str, error: str | None, seconds: float
    ) -> None: ...

    def scheduled(self, name: str, next_run_at: str) -> None: ...

    def retired(self, name: str) -> None: ...

    def all(self) -> dict[str, dict[str, Any]]: ...


@runtime_checkable
class TypesPart(Protocol):
    """Per-type sync status (`Mirror.types`), the lines of `ccsync status`. SQLite:
    `sync.store.status.TypeStatuses`; PostgreSQL: `sync.store.pg.status.TypeStatuses`."""

    def record(self, type_name: str, *, ok: bool, error: str | None = None, at: str) -> None: ...

    def took_change(self, type_name: str, *, at: str) -> None: ...

    def lines(self) -> list[TypeStatus]: ...


@runtime_checkable
class ValuesPart(Protocol):
    """Misfit values, refused and coerced (`Mirror.values`): noted by the page write, read by
    `ccsync status`, told to the daemon's metrics (`on_values`): `sync.store.values.ValueNotes`
    in either store, over SQLite's statements (`SqliteValues`) or PostgreSQL's
    (`sync.store.pg.values.PgValues`)."""

    on_values: OnValues | None

    def faults(self) -> dict[str, dict[str, Any]]: ...


# -- the change feed, the queue, the proof --------------------------------------------------------


@runtime_checkable
class ChangeFeedPart(Protocol):
    """The change feed (`Mirror.changes`): one entry per change of a row, by sequence number,
    for readers (`ccsync changes`) and the jobs that follow it. SQLite:
    `sync.store.changes.ChangeFeed`; PostgreSQL: `sync.store.pg.changes.ChangeFeed`."""

    def since(
        self,
        since: int = 0,
        limit: int = 1000,
        *,
        types: Sequence[str] = (),
        upto: int | None = None,
    ) -> list[Change]: ...

    def new_versions(self, type_name: str, since: int, upto: int) -> list[int]: ...

    def last(self) -> int: ...

    def pruned_through(self) -> int: ...

    def prune(self, keep_days: float) -> int: ...


@runtime_checkable
class ChangeQueuePart(Protocol):
    """The durable webhook queue, open for the daemon (`QueuePart.open`): the receiver enqueues,
    the queue worker takes, acks and fails. SQLite: `sync.store.queue.ChangeQueue`;
    PostgreSQL: its counterpart in `sync.store.pg`."""

    def open_delivery(self) -> int: ...

    def enqueue(self, notices: Sequence[WebhookNotice], delivery: int | None = None) -> int: ...

    def depth(self) -> int: ...

    def types_pending(self, kind: str) -> list[str]: ...

    def take(self, type_name: str, limit: int = 100) -> list[QueueItem]: ...

    def release(self, type_name: str) -> None: ...

    def ack(self, items: Sequence[QueueItem]) -> None: ...

    def answered(self, type_name: str, ids: Sequence[int], asked_at: str) -> int: ...

    def fail(self, items: Sequence[QueueItem], error: str) -> None: ...


@runtime_checkable
class QueuePart(Protocol):
    """The webhook queue as the mirror holds it (`Mirror.queue`): counted without making
    anything (readers, on a read-only open), and opened (`open`) by the daemon. SQLite:
    `sync.store.queue.QueueTable`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def open(self) -> ChangeQueuePart: ...

    def waiting(self) -> int: ...

    def lanes(self) -> list[int]: ...


@runtime_checkable
class ProofBookPart(Protocol):
    """The rolling proof's listing pages, kept per unit across ticks (`ProofPart.book`).
    SQLite: `sync.store.proof.ProofBook`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def scope_proven(self, type_name: str, scope: str, at: str) -> None: ...

    def add(self, unit: str, items: Iterable[tuple[int, str | None]]) -> None: ...

    def listed(self, unit: str) -> Iterator[tuple[int, str | None]]: ...

    def canaries(self, unit: str, n: int, skip: int = 0) -> list[int]: ...

    def clear(self, unit: str) -> None: ...

    def clear_prefix(self, prefix: str) -> None: ...


@runtime_checkable
class ProofPart(Protocol):
    """The proof's records (`Mirror.proof`): its place, what it proved, the repairs and the
    change lags, read by `ccsync status` on a read-only open; and its listing (`book`).
    SQLite: `sync.store.proof.ProofRecords`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def book(self) -> ProofBookPart: ...

    def position(self) -> dict[str, Any] | None: ...

    def set_position(self, value: dict[str, Any] | None) -> None: ...

    def proven(self) -> dict[str, dict[str, Any]]: ...

    def record_proven(
        self, type_name: str, *, at: str | None, unresolved: int = 0, why: str | None = None
    ) -> None: ...

    def scopes(self) -> dict[str, dict[str, Any]]: ...

    def repairs(self) -> dict[str, dict[str, int]]: ...

    def count_repairs(self, type_name: str, kind: str, n: int) -> None: ...

    def lags(self) -> dict[str, dict[str, dict[str, Any]]]: ...

    def record_lags(self, type_name: str, path: str, seconds: list[float]) -> None: ...


# -- the file-wide concepts ---------------------------------------------------------------------


@runtime_checkable
class SchemaPart(Protocol):
    """The mirror's tables, columns and views as the core asks of them (`Mirror.schema`).
    SQLite: `sync.store.schema.Schema`; PostgreSQL: `sync.store.pg.schema.Schema`."""

    def columns(self, table: str) -> set[str]: ...

    def names(self) -> set[str]: ...

    def has_table(self, table: str) -> bool: ...

    def has_view(self, name: str) -> bool: ...

    def ensure_views(self) -> None: ...

    def mall_deals_is_table(self) -> bool: ...

    def materialize_mall_deals(self) -> None: ...


@runtime_checkable
class GroupPart(Protocol):
    """Group commit during a bulk load (`Mirror.group`): one transaction per `pages` pages.
    SQLite: `sync.store.groupcommit.GroupCommit`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def start(self, pages: int, seconds: float = 2.0) -> None: ...

    def end(self) -> None: ...


@runtime_checkable
class IndexesPart(Protocol):
    """The end phase (`Mirror.indexes`): a bulk load into empty tables defers the secondary
    indexes, the full-text indexes and the feed's triggers, and builds them at its end.
    SQLite: `sync.store.indexes.EndPhase`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def defer(self, deferred: bool) -> None: ...


@runtime_checkable
class HoursPart(Protocol):
    """Malls' hours and current hours (`Mirror.hours`). SQLite: `sync.store.hours.Hours`;
    PostgreSQL: its counterpart in `sync.store.pg`."""

    def write(
        self, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date
    ) -> int: ...

    def write_current(self, mall_id: int, body: Any) -> None: ...


@runtime_checkable
class MallsPart(Protocol):
    """Mall-level operations across types (`Mirror.malls`): a mall gone, its deals, the malls
    referenced. SQLite: `sync.store.malls.Malls`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def gone(self, mall_id: int) -> None: ...

    def deals(self, mall_id: int) -> list[int]: ...

    def referenced(self) -> set[int]: ...


@runtime_checkable
class PressReleasesPart(Protocol):
    """The management API's press releases, written per listing run and locale
    (`PressPart.open`). SQLite: `sync.store.press.PressReleases`; PostgreSQL: its counterpart
    in `sync.store.pg`."""

    def write(self, locale: str, run: str, items: Sequence[dict[str, Any]]) -> int: ...

    def unseen(self, locale: str, run: str) -> list[int]: ...

    def prune(self, locale: str, run: str, listed: int, proven: Collection[int]) -> int: ...


@runtime_checkable
class PressPart(Protocol):
    """The press releases' tables as the mirror holds them (`Mirror.press`), made on first use.
    SQLite: `sync.store.press.PressTables`; PostgreSQL: its counterpart in `sync.store.pg`."""

    def open(self) -> PressReleasesPart: ...


@runtime_checkable
class StoragePart(Protocol):
    """The storage watch's write check on the mirror (`Mirror.storage`): a small write
    committed, or the storage fault that stops it; and whether the store's connection is gone
    for good (`lost`: a PostgreSQL session the server ended; the daemon reopens the mirror). SQLite: `sync.store.faults.StorageCheck`;
    PostgreSQL: its counterpart in `sync.store.pg`."""

    def check_writes(self, *, busy_ms: int | None = None, room: bool = False) -> None: ...

    def lost(self) -> bool: ...

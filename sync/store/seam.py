"""The seam between the core and a store: the mirror and one type's table, as protocols.

One core (every evidence rule, cursor and proof) runs over two thin stores (#49): the SQLite
mirror (`sync.store.Mirror`, this package) and the PostgreSQL one (`sync.store.pg`). The jobs,
the daemon, the readers and the commands hold a `MirrorStore`, never a store's own class: it
names exactly what they use of a mirror, with the signatures of the SQLite implementation, and
nothing more. Its parts (`meta`, `cursors`, `changes`, `queue`, `proof`, ...) are the protocols of
`sync.store.seamparts`; one type's table (`MirrorStore.table`) is a `TablePart`, and its listing
diff (`TablePart.listing`) a `ListingPart`.

Implementations: `sync.store.mirror.Mirror` with `sync.store.table.TypeTable` and
`sync.store.listing.Listing` in SQLite; the classes of `sync/store/pg/*` in PostgreSQL
(`sync.store.pg.reads.TypeReads`, `sync.store.pg.listing.Listing`, ...). Opening a mirror is not
part of the seam: a caller that opens one names the store it opens (`Mirror.open`). What the core
still reaches that only SQLite has (the connection, the file beside the mirror, its writer lock)
stays typed as `Mirror` where it is used, so the PostgreSQL wiring sees each place.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen
from sync.store.backfills import PageCheckpoint
from sync.store.deletions import FeedApplied
from sync.store.pagewrite import WriteResult
from sync.store.repair import Repair
from sync.store.seamparts import (
    BackfillsPart,
    ChangeFeedPart,
    CursorsPart,
    GroupPart,
    HoursPart,
    IndexesPart,
    JobsPart,
    MallsPart,
    MetaPart,
    PressPart,
    ProofPart,
    QueuePart,
    RunsPart,
    SchemaPart,
    StoragePart,
    TypesPart,
    ValuesPart,
)


@runtime_checkable
class ListingPart(Protocol):
    """An upstream id listing of one type (in one mall), diffed against its table, held while
    the block runs (`with table.listing(mall) as listing:`): the backfill's missed-row pass and
    the reconcile. SQLite: `sync.store.listing.Listing`; PostgreSQL: `sync.store.pg.listing.
    Listing`."""

    def __enter__(self) -> ListingPart: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def add(self, items: Iterable[tuple[int, str | None]]) -> None: ...

    def counts(self) -> tuple[int, int]: ...

    def missing_or_stale(self, unsettled_since: str | None = None) -> Iterator[list[int]]: ...

    def claim_mall(self) -> int: ...

    def absent(self) -> Iterator[list[int]]: ...


@runtime_checkable
class TablePart(Protocol):
    """One type's table on a mirror (`MirrorStore.table`): its reads, deletions, memberships
    and links. SQLite: `sync.store.table.TypeTable`; PostgreSQL: its counterpart in
    `sync.store.pg` (the reads: `sync.store.pg.reads.TypeReads`)."""

    @property
    def exists(self) -> bool: ...

    def count(self, *, mall_id: int | None = None) -> int: ...

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]: ...

    def stamps(self, ids: Sequence[int]) -> dict[int, str | None]: ...

    def get(self, id: int) -> dict[str, Any] | None: ...

    def listing(self, mall_id: int | None = None) -> ListingPart: ...

    def tombstones(self, ids: Sequence[int]) -> dict[int, str | None]: ...

    def tombstone_ties(self) -> dict[int, set[int | None]]: ...

    def note_ties(self, ties: Mapping[int, set[int | None]]) -> None: ...

    def widen_window(self, gap_s: float) -> bool: ...

    def vouched(self, ids: Iterable[int]) -> AbstractContextManager[None]: ...

    def delete(self, ids: Iterable[int]) -> int: ...

    def apply_feed(self, entries: Mapping[int, str | None]) -> FeedApplied: ...

    def linked_from(self, ids: Sequence[int]) -> dict[str, list[int]]: ...

    def unlink_from(self, owner_type: str, ids: Sequence[int]) -> int: ...

    def malls_of(self, rid: int) -> list[int]: ...

    def busiest_malls(self, n: int) -> list[int]: ...

    def by_mall(self, ids: Iterable[int]) -> dict[int, list[int]]: ...

    def orphans(self) -> Iterator[list[int]]: ...

    def remove_memberships(self, mall_id: int, ids: Sequence[int]) -> int: ...

    def replace_mall_links(self, mall_id: int, ids: Sequence[int]) -> int: ...

    def count_in_mall_links(self, mall_id: int) -> int: ...

    def settle_mall_links(
        self, mall_id: int, asked: Sequence[int], listed: Sequence[int]
    ) -> int: ...

    def replace_links(
        self, rel: catalogue.Relationship, owner: int, targets: Sequence[int]
    ) -> None: ...

    def set_to_one(self, column: str, rid: int, target: int | None) -> None: ...

    def write_to_one(
        self, column: str, values: Sequence[tuple[int, Any]], stamps: dict[int, Any]
    ) -> int: ...


@runtime_checkable
class MirrorStore(Protocol):
    """An open mirror as the core uses it: its parts (each a protocol of
    `sync.store.seamparts`), one type's table (`table`), and the writes that span types (a
    staged page, a reconcile's sideloads, the verify's compare), each one transaction.
    SQLite: `sync.store.mirror.Mirror`; PostgreSQL: its counterpart in `sync.store.pg`."""

    @property
    def meta(self) -> MetaPart: ...

    @property
    def cursors(self) -> CursorsPart: ...

    @property
    def backfills(self) -> BackfillsPart: ...

    @property
    def runs(self) -> RunsPart: ...

    @property
    def jobs(self) -> JobsPart: ...

    @property
    def types(self) -> TypesPart: ...

    @property
    def values(self) -> ValuesPart: ...

    @property
    def changes(self) -> ChangeFeedPart: ...

    @property
    def group(self) -> GroupPart: ...

    @property
    def indexes(self) -> IndexesPart: ...

    @property
    def hours(self) -> HoursPart: ...

    @property
    def malls(self) -> MallsPart: ...

    @property
    def proof(self) -> ProofPart: ...

    @property
    def queue(self) -> QueuePart: ...

    @property
    def press(self) -> PressPart: ...

    @property
    def storage(self) -> StoragePart: ...

    @property
    def schema(self) -> SchemaPart: ...

    def close(self) -> None: ...

    def table(self, rtype: ResourceType | str) -> TablePart: ...

    def write_staged(
        self,
        batches: list[Staged],
        *,
        scripts: Any = None,
        checkpoint: PageCheckpoint | None = None,
    ) -> WriteResult: ...

    def write_scripts(self, rtype: ResourceType, scripts: Any) -> None: ...

    def included_memo(self, limit: int) -> AbstractContextManager[Seen]: ...

    def write_sideloads(
        self,
        rtype: ResourceType,
        included: Sequence[Staged],
        links: dict[str, list[tuple[int, list[int]]]],
        stamps: dict[int, Any],
    ) -> int: ...

    def prune_unreferenced(self, types: Sequence[str]) -> dict[str, int]: ...

    def repair(self, batches: list[Staged], *, scripts: Any = None) -> list[Repair]: ...

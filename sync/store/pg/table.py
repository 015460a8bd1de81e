"""One type's table of the PostgreSQL mirror, as a handle: the counterpart of
`sync.store.table.TypeTable` (read that module first), over the PostgreSQL parts.

`PgMirror.table(name_or_rtype)` hands one out: its reads are `sync.store.pg.reads.TypeReads`',
its deletions the rules of `sync.store.deletions.Deletions` over `PgTombstones`, its memberships
and links `sync.store.pg.memberships`' and `sync.store.pg.links`'. A small value built per call,
holding nothing but what the mirror gave it. Writes that are more than one statement run in a
transaction of their own (a savepoint inside the caller's), as SQLite's `write_transaction`.
Links written without their owner's row (a route's) record the owner in the page writer's
`FreshIds` first, as SQLite's handle does (`sync.store.fresh`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store.deletions import Deletions, FeedApplied
from sync.store.fresh import FreshIds
from sync.store.pg import links, memberships, sideloads
from sync.store.pg.listing import Listing
from sync.store.pg.reads import TypeReads
from sync.store.pg.schema import Schema

#: Told (type, ids) of rows deleted, so the writer's memo of included rows forgets them.
Forget = Callable[[str, list[int]], None]


class PgTypeTable:
    """The table of one JSON:API type (or a mall-scoped type's memberships), on one PostgreSQL
    mirror (`sync.store.seam.TablePart`)."""

    __slots__ = ("conn", "deletions", "forget", "fresh", "name", "reads", "rtype", "schema")

    def __init__(
        self,
        rtype: ResourceType | str,
        schema: Schema,
        deletions: Deletions,
        forget: Forget,
        fresh: FreshIds,
        *,
        bulk: Callable[[], bool] = lambda: False,
    ) -> None:
        if isinstance(rtype, ResourceType):
            self.name: str = rtype.name
            self.rtype: ResourceType | None = rtype
        else:
            self.name = rtype
            self.rtype = catalogue.TYPES.get(rtype)
        self.schema = schema
        self.conn: psycopg.Connection[Any] = schema.conn
        self.deletions = deletions
        self.forget = forget
        #: The page writer's: owners whose links are written here without their row.
        self.fresh = fresh

        def ensure_memberships(type_name: str) -> None:
            memberships.ensure(self.conn, schema.name, type_name, bulk=bulk())

        self.reads = TypeReads(schema, self.name, ensure_memberships)

    def __repr__(self) -> str:
        return f"<PgTypeTable {self.schema.name}.{self.name}>"

    def _resource(self) -> ResourceType:
        if self.rtype is None:
            raise KeyError(f"{self.name!r} is no resource type of the spec (sync.model.catalogue)")
        return self.rtype

    # -- reads (`sync.store.pg.reads`) ----------------------------------------------------------

    @property
    def exists(self) -> bool:
        return self.reads.exists

    def count(self, *, mall_id: int | None = None) -> int:
        return self.reads.count(mall_id=mall_id)

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]:
        return self.reads.ids(mall_id=mall_id, after=after)

    def stamps(self, ids: Sequence[int]) -> dict[int, str | None]:
        return self.reads.stamps(ids)

    def get(self, id: int) -> dict[str, Any] | None:
        return self.reads.get(id)

    def listing(self, mall_id: int | None = None) -> Listing:
        return self.reads.listing(mall_id)

    # -- deletions (`sync.store.deletions`) -----------------------------------------------------

    def tombstones(self, ids: Sequence[int]) -> dict[int, str | None]:
        return self.deletions.held(self.name, ids)

    def tombstone_ties(self) -> dict[int, set[int | None]]:
        return self.deletions.take_ties(self.name)

    def note_ties(self, ties: Mapping[int, set[int | None]]) -> None:
        self.deletions.note_ties(self.name, ties)

    def widen_window(self, gap_s: float) -> bool:
        return self.deletions.widen(gap_s)

    def vouched(self, ids: Iterable[int]) -> contextlib.AbstractContextManager[None]:
        return self.deletions.vouched(self.name, ids)

    def delete(self, ids: Iterable[int]) -> int:
        id_list = list(dict.fromkeys(int(i) for i in ids))
        self.forget(self.name, id_list)
        return self.deletions.delete(self.name, id_list)

    def apply_feed(self, entries: Mapping[int, str | None]) -> FeedApplied:
        self.forget(self.name, list(entries))
        return self.deletions.apply_feed(self.name, entries)

    def linked_from(self, ids: Sequence[int]) -> dict[str, list[int]]:
        owners = links.owners_of(self.conn, self.schema.name, self.name, list(ids))
        return {name: sorted(found) for name, found in sorted(owners.items())}

    def unlink_from(self, owner_type: str, ids: Sequence[int]) -> int:
        with self.conn.transaction():
            return links.unlink(self.conn, self.schema.name, owner_type, self.name, list(ids))

    # -- memberships ------------------------------------------------------------------------------

    def malls_of(self, rid: int) -> list[int]:
        return self.reads.malls_of(rid)

    def busiest_malls(self, n: int) -> list[int]:
        return self.reads.busiest_malls(n)

    def by_mall(self, ids: Iterable[int]) -> dict[int, list[int]]:
        return self.reads.by_mall(ids)

    def orphans(self) -> Iterator[list[int]]:
        return self.reads.orphans()

    def remove_memberships(self, mall_id: int, ids: Sequence[int]) -> int:
        with self.conn.transaction():
            return memberships.remove(self.conn, self.schema.name, self.name, mall_id, ids)

    def replace_mall_links(self, mall_id: int, ids: Sequence[int]) -> int:
        self.fresh.add("malls", [mall_id])  # `malls_contacts` is the mall's own linkage
        return links.replace_mall_links(self.conn, self.schema.name, self.name, mall_id, ids)

    def count_in_mall_links(self, mall_id: int) -> int:
        return links.mall_link_count(self.conn, self.schema.name, self.name, mall_id)

    def settle_mall_links(self, mall_id: int, asked: Sequence[int], listed: Sequence[int]) -> int:
        self.fresh.add("malls", [mall_id])
        with self.conn.transaction():
            return links.settle_mall_links(
                self.conn, self.schema.name, self.name, mall_id, asked, listed
            )

    # -- links and to-one columns -----------------------------------------------------------------

    def replace_links(
        self, rel: catalogue.Relationship, owner: int, targets: Sequence[int]
    ) -> None:
        rtype = self._resource()
        self.fresh.add(rtype.table, [owner])
        links.replace(self.conn, self.schema.name, rtype, rel, owner, targets)

    def set_to_one(self, column: str, rid: int, target: int | None) -> None:
        links.set_to_one(self.conn, self.schema.name, self._resource(), column, rid, target)

    def write_to_one(
        self, column: str, values: Sequence[tuple[int, Any]], stamps: dict[int, Any]
    ) -> int:
        return sideloads.write_to_one(
            self.conn, self.schema, self._resource(), column, values, stamps
        )

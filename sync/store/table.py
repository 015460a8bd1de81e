"""One type's table of the mirror, as a handle: its reads, deletions, memberships and links.

`Mirror.table(name_or_rtype)` hands one out, as sqlite-utils' `Database.table()` hands out a
`Table`: the operations on one type's rows live here, each with the SQL (or the store module
that holds it) it runs, instead of a facade method per operation taking the type's name first.
A handle is a small value built per call (no state of its own beyond what the mirror gave it),
so holding one across a page write is as safe as asking the mirror again. Links it writes
without their owner's row (a route's) record the owner in the page writer's `FreshIds` first:
that page write takes an owner it never recorded for one with no links (`sync.store.fresh`).

The page write is not here: a page writes several types at once, in one transaction with its
checkpoint (`Mirror.write_staged`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store import links, memberships, reads, sideloads
from sync.store.deletions import Deletions, FeedApplied
from sync.store.fresh import FreshIds
from sync.store.listing import Listing
from sync.store.schema import Schema
from sync.store.transaction import write_transaction

#: Told (type, ids) of rows deleted, so the writer's memo of included rows forgets them.
Forget = Callable[[str, list[int]], None]

#: Numbers the temporary tables of listings (`TypeTable.listing`): unique within the process.
_LISTINGS = itertools.count(1)


class TypeTable:
    """The table of one JSON:API type (or a mall-scoped type's memberships), on one mirror."""

    __slots__ = ("conn", "deletions", "forget", "fresh", "name", "rtype", "schema")

    def __init__(
        self,
        rtype: ResourceType | str,
        schema: Schema,
        deletions: Deletions,
        forget: Forget,
        fresh: FreshIds,
    ) -> None:
        if isinstance(rtype, ResourceType):
            self.name: str = rtype.name
            self.rtype: ResourceType | None = rtype
        else:
            self.name = rtype
            self.rtype = catalogue.TYPES.get(rtype)
        self.schema = schema
        self.conn: sqlite3.Connection = schema.conn
        self.deletions = deletions
        self.forget = forget
        #: The page writer's: owners whose links are written here without their row.
        self.fresh = fresh

    def __repr__(self) -> str:
        return f"<TypeTable {self.name}>"

    def _resource(self) -> ResourceType:
        if self.rtype is None:
            raise KeyError(f"{self.name!r} is no resource type of the spec (sync.model.catalogue)")
        return self.rtype

    # -- reads (`sync.store.reads`) -------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return self.schema.has_table(self.name)

    def count(self, *, mall_id: int | None = None) -> int:
        """Rows of the table, or of one mall (its memberships); 0 before the table exists."""
        return reads.count(self.schema, self.name, mall_id)

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]:
        """Ids of the table in order (those greater than `after`, when given), streamed in
        chunks (never the whole table in memory)."""
        return reads.ids(self.schema, self.name, mall_id, after)

    def stamps(self, ids: Sequence[int]) -> dict[int, str | None]:
        """`updated_at` of those of `ids` the table holds (normalised as written, so it
        compares as text with `sync.model.stamps.normalize`d stamps; None without one)."""
        return reads.stamps(self.schema, self.name, ids)

    def get(self, id: int) -> dict[str, Any] | None:
        """One row as a dict of its columns (None: no such row or table)."""
        return reads.get(self.schema, self.name, id)

    def listing(self, mall_id: int | None = None) -> Listing:
        """A temporary id listing of this type (in one mall) to diff against the table."""
        if mall_id is not None and self.exists:
            memberships.ensure(self.schema, self.name)
        name = f"_sync_listing_{os.getpid()}_{next(_LISTINGS)}"
        return Listing(self.conn, self.name, mall_id, name)

    # -- deletions (`sync.store.deletions`) -----------------------------------------------------

    def tombstones(self, ids: Sequence[int]) -> dict[int, str | None]:
        """The tombstones of those of `ids` that have one: id -> deleted_at."""
        return self.deletions.held(self.name, ids)

    def tombstone_ties(self) -> dict[int, set[int | None]]:
        """Rows a copy stamped their tombstone's very moment reached since the last call, with
        the malls that listed them (None: top-level): `filter[id]` decides
        (`sync.jobs.incremental.tombstoneties`). Taken: asked once."""
        return self.deletions.take_ties(self.name)

    def note_ties(self, ties: Mapping[int, set[int | None]]) -> None:
        """Note `ties` (taken by `tombstone_ties`, not settled) again, for the next run."""
        self.deletions.note_ties(self.name, ties)

    def widen_window(self, gap_s: float) -> bool:
        """`filter[id]` found a row live `gap_s` seconds before its tombstone's moment: the
        window around feed entries covers it from now on (`Deletions.widen`)."""
        return self.deletions.widen(gap_s)

    def vouched(self, ids: Iterable[int]) -> contextlib.AbstractContextManager[None]:
        """While the block runs, copies of `ids` stamped their tombstone's very moment are
        written and lift it (`filter[id]` served them after the tombstone was written)."""
        return self.deletions.vouched(self.name, ids)

    def delete(self, ids: Iterable[int]) -> int:
        """Delete rows inferred gone (confirmed by `filter[id]`, listed by no mall, a gone
        mall's) and their links; nothing keeps them out once the upstream lists them again."""
        id_list = list(dict.fromkeys(int(i) for i in ids))
        self.forget(self.name, id_list)
        return self.deletions.delete(self.name, id_list)

    def apply_feed(self, entries: Mapping[int, str | None]) -> FeedApplied:
        """Apply deletions feed entries (id -> normalised `created_at`, or None): each row not
        newer than its entry is deleted and tombstoned at the entry's moment, in one
        transaction."""
        self.forget(self.name, list(entries))
        return self.deletions.apply_feed(self.name, entries)

    def linked_from(self, ids: Sequence[int]) -> dict[str, list[int]]:
        """The rows of other types whose linkage names one of `ids` (link tables and to-one
        columns), per owner type, ascending."""
        owners = links.owners_of(self.conn, self.schema, self.name, list(ids))
        return {name: sorted(found) for name, found in sorted(owners.items())}

    def unlink_from(self, owner_type: str, ids: Sequence[int]) -> int:
        """`owner_type`'s links naming `ids` of this type go, as a deletion of those rows would
        take them (one transaction); the rows stay. Returns the link rows removed."""
        with write_transaction(self.conn):
            return links.unlink(self.conn, self.schema, owner_type, self.name, list(ids))

    # -- memberships (`sync.store.memberships`) -------------------------------------------------

    def malls_of(self, rid: int) -> list[int]:
        """The malls whose routes list a mall-scoped row (its memberships), ascending."""
        return memberships.malls_of(self.conn, self.name, rid)

    def busiest_malls(self, n: int) -> list[int]:
        """The `n` malls whose rows of this type changed last (`memberships.busiest`)."""
        if "updated_at" not in self.schema.columns(self.name):
            return []
        return memberships.busiest(self.conn, self.name, n)

    def by_mall(self, ids: Iterable[int]) -> dict[int, list[int]]:
        """`ids` grouped by each mall that lists them (a row in several malls is in each),
        malls ascending."""
        out: dict[int, list[int]] = {}
        for rid in ids:
            for mall in self.malls_of(rid):
                out.setdefault(mall, []).append(rid)
        return dict(sorted(out.items()))

    def orphans(self) -> Iterator[list[int]]:
        """Batches of a mall-scoped type's rows that no mall lists."""
        return memberships.orphans(self.conn, self.name)

    def remove_memberships(self, mall_id: int, ids: Sequence[int]) -> int:
        """`mall_id` no longer lists `ids`: a change of membership, never a deletion."""
        with write_transaction(self.conn):
            return memberships.remove(self.conn, self.name, mall_id, ids)

    def replace_mall_links(self, mall_id: int, ids: Sequence[int]) -> int:
        """`malls_<type>` of one mall becomes `ids` (as its route lists them, in order):
        contacts and deals known from the mall routes (`sync.jobs.malls.mallroutes`). The
        mall is recorded in `fresh`: `malls_contacts` is its own linkage too."""
        self.fresh.add("malls", [mall_id])
        return links.replace_mall_links(self.conn, self.schema, self.name, mall_id, ids)

    def count_in_mall_links(self, mall_id: int) -> int:
        """How many rows `malls_<type>` (contacts, deals: from the mall routes) gives a mall."""
        return links.mall_link_count(self.conn, self.schema, self.name, mall_id)

    def settle_mall_links(self, mall_id: int, asked: Sequence[int], listed: Sequence[int]) -> int:
        """Of `asked`, those the mall's route `listed` (by `filter[id]`) are in `malls_<type>`
        of `mall_id`, the others not; the mall's other rows stay (`sync.jobs.malls.touchedmalls`).
        Returns the memberships changed (the mall recorded in `fresh`, as by the above)."""
        self.fresh.add("malls", [mall_id])
        return links.settle_mall_links(self.conn, self.schema, self.name, mall_id, asked, listed)

    # -- links and to-one columns (`sync.store.links`, `sync.store.sideloads`) ------------------

    def replace_links(
        self, rel: catalogue.Relationship, owner: int, targets: Sequence[int]
    ) -> None:
        """One owner's links of one to-many relationship become `targets`, in order (its own
        route's answer, `sync.jobs.malls.relroutes`), the owner recorded in `fresh` first: it
        may have no row yet."""
        rtype = self._resource()
        self.fresh.add(rtype.table, [owner])
        links.replace(self.conn, self.schema, rtype, rel, owner, targets)

    def set_to_one(self, column: str, rid: int, target: int | None) -> None:
        """One owner's to-one column (its relationship's own route, `sync.jobs.malls.relroutes`)."""
        links.set_to_one(self.conn, self.schema, self._resource(), column, rid, target)

    def write_to_one(
        self, column: str, values: Sequence[tuple[int, Any]], stamps: dict[int, Any]
    ) -> int:
        """A reconcile page's to-one linkage (`sync.jobs.malls.sideloads`): `column` of the listed
        owners whose mirrored `updated_at` equals the listed one; others are left to the
        reconcile's refetch. Returns the rows changed."""
        return sideloads.write_to_one(
            self.conn, self.schema, self._resource(), column, values, stamps
        )

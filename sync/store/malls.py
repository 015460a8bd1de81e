"""Mall-level operations: a mall gone upstream, the memberships it leaves, its deals.

A mall is both a row (`malls`) and the scope of the mall-scoped types' memberships
(`sync.store.memberships`): these operations touch every type at once, so they live on the
mirror's `Malls` (`Mirror.malls`), not on one type's table. Rows that lose their last mall are
never deleted here: they are left for `TypeTable.orphans`, confirmed by `filter[id]`.
"""

from __future__ import annotations

from collections.abc import Callable

from sync.store import links, memberships
from sync.store.schema import Schema
from sync.store.table import TypeTable
from sync.store.transaction import write_transaction


class Malls:
    """The malls of one mirror, across types."""

    def __init__(self, schema: Schema, table: Callable[[str], TypeTable]) -> None:
        self.schema = schema
        self.conn = schema.conn
        self._table = table

    def gone(self, mall_id: int) -> None:
        """A mall route answered 404: the mall is gone upstream. Its row (if mirrored) is
        deleted, with no tombstone (an inference: it comes back once listed again), and with
        it its memberships, hours and current hours; its members that no other mall lists are
        left for `orphans`."""
        malls = self._table("malls")
        if malls.exists and malls.get(mall_id) is not None:
            malls.delete([mall_id])
        else:
            with write_transaction(self.conn):
                memberships.drop_mall(self.conn, mall_id)

    def deals(self, mall_id: int) -> list[int]:
        """The deals `malls_deals` gives a mall, ascending (`sync.jobs.malls.mallroutes`)."""
        return links.mall_deals(self.conn, mall_id)

    def referenced(self) -> set[int]:
        """Malls the mirror holds or some membership still names."""
        return set(self._table("malls").ids()) | memberships.malls_referenced(self.conn)

"""Mall-level operations in PostgreSQL: a mall gone upstream, the malls referenced, its deals.

Issue #49, the counterpart of `sync.store.malls.Malls` (read it first): `gone`, `referenced`
and `deals`, with the same arguments, answers and effects, held to them by the contract tests
of `tests/unit/store/pg/test_malls.py`. Not wired into `Mirror` yet.

**The same parts under it.** As SQLite's `Malls` takes the mirror's `table(name)`, this one
takes a function giving one type's handle (`MallTable`: `exists`, `get`, `ids`, `delete`, as
`sync.store.table.TypeTable` has them): a mirrored mall's row is deleted through it, so the
deletion is the deletions part's (`sync.store.deletions.Deletions.delete` over
`sync.store.pg.deletions.PgTombstones`), with all it takes with a mall's row: its links, its
memberships, its hours and current hours. A mall the mirror does not hold loses its
memberships, its rows of the mall-route tables, its hours and current hours by the memberships
part (`sync.store.pg.memberships.drop_mall`), in one `conn.transaction()` (its own transaction
on an idle autocommit connection, a savepoint inside a caller's). The deals come from
`malls_deals` (`sync.store.pg.links.mall_deals`), the memberships named from
`sync.store.pg.memberships.malls_referenced`. No tombstone is written for a mall gone: an
inference, it comes back once listed again. Its members are never deleted here: they are left
for `orphans`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from sync.store.pg import links, memberships
from sync.store.pg.schema import Schema


class MallTable(Protocol):
    """What `Malls` asks of the `malls` table's handle (`sync.store.table.TypeTable`'s)."""

    @property
    def exists(self) -> bool: ...

    def get(self, id: int) -> dict[str, Any] | None: ...

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]: ...

    def delete(self, ids: Iterable[int]) -> int: ...


class Malls:
    """The malls of one PostgreSQL mirror, across types (`sync.store.malls.Malls`)."""

    def __init__(self, schema: Schema, table: Callable[[str], MallTable]) -> None:
        self.schema = schema
        self.conn = schema.conn
        self._table = table

    def gone(self, mall_id: int) -> None:
        """A mall route answered 404: the mall is gone upstream. Its row (if mirrored) is
        deleted, with no tombstone, and with it its memberships, hours and current hours; its
        members that no other mall lists are left for `orphans`."""
        malls = self._table("malls")
        if malls.exists and malls.get(mall_id) is not None:
            malls.delete([mall_id])
        else:
            with self.conn.transaction():
                memberships.drop_mall(self.conn, self.schema.name, mall_id)

    def deals(self, mall_id: int) -> list[int]:
        """The deals `malls_deals` gives a mall, ascending (`sync.jobs.malls.mallroutes`)."""
        return links.mall_deals(self.conn, self.schema.name, mall_id)

    def referenced(self) -> set[int]:
        """Malls the mirror holds or some membership still names."""
        held = set(self._table("malls").ids())
        return held | memberships.malls_referenced(self.conn, self.schema.name)

"""`sync.store.pg.malls`: the PostgreSQL mall-level operations held to SQLite's contract.

The contract tests take `side` and run twice (`tests.support.store_sides`): on a SQLite mirror
(`mirror.malls`, `mirror.hours`) and on a fresh PostgreSQL database through this module's
`Malls`, the page write (`PageWriter.write_page`: rows and their memberships) and the hours part
(`sync.store.pg.hours`), with one expectation for both: a mall gone takes its row, its
memberships (its members' `mall_id` re-pointed), its mall-route links, its hours and current
hours, and never its members; the malls referenced; a mall's deals.

`Malls` deletes a mirrored mall's row through the `malls` handle it is given, whose `delete` is
the deletions part's, as `sync.store.table.TypeTable.delete` is for SQLite: `PgMallTable` is that
handle for PostgreSQL, `sync.store.pg.reads.TypeReads` for its reads and
`sync.store.deletions.Deletions` over `sync.store.pg.deletions.PgTombstones` for its deletion.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sync.store.deletions import Deletions
from sync.store.pg import deletions
from sync.store.pg.deletions import PgTombstones
from sync.store.pg.hours import Hours, ensure_hours
from sync.store.pg.malls import Malls, MallTable
from sync.store.pg.reads import TypeReads
from sync.store.pg.schema import Schema
from tests.support.store_sides import SCHEMA, PostgresSide, Side, SQLiteSide, open_side
from tests.support.store_units import staged

T0 = "2026-01-01T00:00:00.000Z"
MARCH = (date(2026, 3, 1), date(2026, 3, 9))


class PgMallTable:
    """The handle of one type a PostgreSQL mirror gives `Malls`, as `TypeTable` is SQLite's:
    `TypeReads`' reads, and the deletions part's `delete`."""

    def __init__(self, side: PostgresSide, name: str) -> None:
        self.name = name
        self.reads = TypeReads(Schema(side.conn, SCHEMA), name)
        self.deletions = Deletions(PgTombstones(side.conn, SCHEMA))

    @property
    def exists(self) -> bool:
        return self.reads.exists

    def get(self, id: int) -> dict[str, Any] | None:
        return self.reads.get(id)

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]:
        return self.reads.ids(mall_id=mall_id, after=after)

    def delete(self, ids: Iterable[int]) -> int:
        """As `TypeTable.delete`: each id once, in the order given."""
        return self.deletions.delete(self.name, list(dict.fromkeys(int(i) for i in ids)))


class Parts:
    """One side's `Malls` and `Hours`, and the side itself."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.malls: Any
        self.hours: Any
        if isinstance(side, SQLiteSide):
            self.malls, self.hours = side.mirror.malls, side.mirror.hours
        else:
            ensure_hours(side.conn, SCHEMA)  # as SQLite makes `current_hours` when it opens
            deletions.ensure(side.conn, SCHEMA)  # and `_sync_tombstones`
            schema = Schema(side.conn, SCHEMA)
            table: Any = lambda name: PgMallTable(side, name)  # noqa: E731
            self.malls = Malls(schema, table)
            self.hours = Hours(schema)

    @contextlib.contextmanager
    def rolled_back(self) -> Iterator[None]:
        """A transaction the block's writes are made in, rolled back at its end."""
        if isinstance(self.side, SQLiteSide):
            self.side.conn.execute("BEGIN")
            try:
                yield
            finally:
                self.side.conn.execute("ROLLBACK")
        else:
            with self.side.conn.transaction(force_rollback=True):
                yield


@pytest.fixture(params=["sqlite", "postgres"])
def parts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Parts]:
    """Either store, empty (the PostgreSQL server starts only for the `postgres` runs)."""
    s = open_side(request.param, tmp_path, lambda: str(request.getfixturevalue("pg_db")))
    yield Parts(s)
    s.close()


def _malls(parts: Parts, *ids: int) -> None:
    page = [
        {"id": str(i), "type": "malls", "attributes": {"name": "m", "updated_at": T0}} for i in ids
    ]
    parts.side.page(*staged("malls", page))


def _stores(parts: Parts, mall: int, *ids: int) -> None:
    page = [
        {"id": str(i), "type": "stores", "attributes": {"name": "s", "updated_at": T0}} for i in ids
    ]
    parts.side.page(*staged("stores", page, mall_id=mall))


def _deals(parts: Parts, *ids: int) -> None:
    page = [
        {"id": str(i), "type": "deals", "attributes": {"title": "d", "updated_at": T0}} for i in ids
    ]
    parts.side.page(*staged("deals", page))


def _hours(parts: Parts, mall: int) -> None:
    day = {"mall_id": mall, "date": "2026-03-01", "fetched_at": T0, "hours_text": "9-5"}
    parts.hours.write(mall, [day], *MARCH)
    parts.hours.write_current(mall, {"open": True})


def _ids(parts: Parts, statement: str) -> list[tuple[Any, ...]]:
    return parts.side.rows(statement)


# -- the contract: both stores ---------------------------------------------------------------


def test_a_mirrored_mall_gone_takes_its_row_and_memberships_not_its_members(
    parts: Parts,
) -> None:
    _malls(parts, 3, 4)
    _stores(parts, 3, 1)
    _stores(parts, 4, 2)
    _stores(parts, 3, 2)  # store 2 is in both malls
    _hours(parts, 3)
    _hours(parts, 4)
    parts.malls.gone(3)
    assert _ids(parts, "SELECT id FROM malls ORDER BY id") == [(4,)]
    # the members stay, re-pointed at the malls that still list them (none: NULL)
    assert _ids(parts, "SELECT id, mall_id FROM stores ORDER BY id") == [(1, None), (2, 4)]
    assert _ids(parts, "SELECT malls_id, stores_id FROM malls_stores ORDER BY 1, 2") == [(4, 2)]
    assert list(parts.side.memberships.orphans("stores")) == [[1]]  # left for `orphans`
    assert _ids(parts, "SELECT mall_id FROM hours") == [(4,)]
    assert _ids(parts, "SELECT mall_id FROM current_hours") == [(4,)]
    assert _ids(parts, "SELECT count(*) FROM _sync_tombstones") == [(0,)]  # an inference


def test_a_mall_gone_that_was_never_mirrored_drops_its_memberships_and_hours(
    parts: Parts,
) -> None:
    _stores(parts, 3, 1)
    _stores(parts, 5, 1)
    _hours(parts, 3)
    _deals(parts, 7, 8)
    parts.side.links.replace_mall_links("deals", 3, [7, 8])
    parts.side.links.replace_mall_links("deals", 5, [7])
    assert parts.malls.referenced() == {3, 5}
    parts.malls.gone(3)
    assert parts.malls.referenced() == {5}
    assert _ids(parts, "SELECT id, mall_id FROM stores") == [(1, 5)]
    assert _ids(parts, "SELECT count(*) FROM hours") == [(0,)]
    assert _ids(parts, "SELECT count(*) FROM current_hours") == [(0,)]
    assert parts.malls.deals(3) == [] and parts.malls.deals(5) == [7]
    parts.malls.gone(3)  # again: nothing left to take
    parts.malls.gone(99)  # a mall nothing names
    assert parts.malls.referenced() == {5}


def test_a_mall_gone_before_anything_was_mirrored_is_no_error(parts: Parts) -> None:
    parts.malls.gone(3)
    assert parts.malls.referenced() == set()


def test_referenced_is_the_malls_held_and_named(parts: Parts) -> None:
    _malls(parts, 5)
    _stores(parts, 7, 1)
    assert parts.malls.referenced() == {5, 7}


def test_deals_of_a_mall_from_the_routed_table(parts: Parts) -> None:
    _malls(parts, 3)
    _deals(parts, 2, 9)
    parts.side.links.replace_mall_links("deals", 3, [9, 2, 9])
    assert parts.malls.deals(3) == [2, 9]
    assert parts.malls.deals(4) == []


def test_a_mall_gone_inside_a_transaction_goes_with_it(parts: Parts) -> None:
    _stores(parts, 3, 1)
    _hours(parts, 3)
    with parts.rolled_back():
        parts.malls.gone(3)
        assert parts.malls.referenced() == set()
    assert parts.malls.referenced() == {3}
    assert _ids(parts, "SELECT mall_id FROM current_hours") == [(3,)]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_handle_the_tests_give_is_what_malls_asks_for(pg_db: str) -> None:
    side = PostgresSide(pg_db)
    try:
        handle: MallTable = PgMallTable(side, "malls")
        assert not handle.exists and handle.get(1) is None and list(handle.ids()) == []
    finally:
        side.close()

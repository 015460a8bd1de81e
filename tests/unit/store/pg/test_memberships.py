"""`sync.store.pg.memberships`: the PostgreSQL memberships held to SQLite's contract.

The contract tests take `side` and run twice (`tests.support.store_sides`): on a SQLite mirror
through `sync.store.memberships` and its page write, and on a fresh PostgreSQL database
(`pg_db`) through `sync.store.pg.memberships` and `PageWriter.write_page` (read back by
`sync.store.pg.reads`), with one expectation for both: the pairs a mall's listing adds,
`mall_id` the lowest mall, a mall's end, orphans, the reads by mall, the busiest malls, and the
feed's entries for a row joining or leaving a mall. The tests after them are PostgreSQL's own: the table's shape, a page listed again leaving
no dead tuple, and a bulk load's table made without the feed's triggers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sync.store.pg import memberships
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_sides import SCHEMA, PostgresSide, Side, open_side
from tests.support.store_units import staged

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    """Either store, empty (the PostgreSQL server starts only for the `postgres` runs)."""
    s = open_side(request.param, tmp_path, lambda: str(request.getfixturevalue("pg_db")))
    yield s
    s.close()


@pytest.fixture
def pg(pg_db: str) -> Iterator[PostgresSide]:
    s = PostgresSide(pg_db)
    yield s
    s.close()


def _stores(side: Side, mall: int, *ids: int, at: str | None = T0) -> None:
    """A page of stores `mall` lists (stamped `at`; None: no stamp)."""
    stamp = {} if at is None else {"updated_at": at}
    page = [{"id": str(i), "type": "stores", "attributes": {"name": "s", **stamp}} for i in ids]
    side.page(*staged("stores", page, mall_id=mall))


def _mall_ids(side: Side) -> list[tuple[Any, ...]]:
    return side.rows("SELECT id, mall_id FROM stores ORDER BY id")


def _pairs(side: Side) -> list[tuple[Any, ...]]:
    return side.rows("SELECT malls_id, stores_id, position FROM malls_stores ORDER BY 1, 2")


def _last(side: Side) -> int:
    return int(side.rows("SELECT coalesce(max(seq), 0) FROM _sync_changes")[0][0])


def _feed(side: Side, after: int) -> list[tuple[Any, ...]]:
    return side.rows("SELECT type, id, op FROM _sync_changes WHERE seq > ? ORDER BY seq", after)


# -- the contract: both stores ---------------------------------------------------------------


def test_a_mall_s_listing_adds_its_pairs_and_mall_id_is_the_lowest_mall(side: Side) -> None:
    _stores(side, 5, 1, 2)
    assert _pairs(side) == [(5, 1, 0), (5, 2, 0)]
    assert _mall_ids(side) == [(1, 5), (2, 5)]
    mark = _last(side)
    _stores(side, 2, 1)  # a lower mall lists it too
    _stores(side, 7, 1)  # a higher one
    assert _mall_ids(side) == [(1, 2), (2, 5)]
    assert side.memberships.malls_of("stores", 1) == [2, 5, 7]
    assert side.memberships.malls_of("stores", 9) == []
    assert side.memberships.malls_of("programs", 1) == []  # no such table
    # Joining a second mall changed the row's links: one entry, however many malls it joins.
    assert _feed(side, mark) == [("stores", 1, "links")]
    mark = _last(side)
    _stores(side, 5, 1, 2)  # listed again: nothing
    assert _feed(side, mark) == []
    assert _pairs(side) == [(2, 1, 0), (5, 1, 0), (5, 2, 0), (7, 1, 0)]


def test_a_page_s_included_rows_and_links_join_no_mall(side: Side) -> None:
    store = {
        "id": "1",
        "type": "stores",
        "attributes": {"name": "s", "updated_at": T0},
        "relationships": {"images": {"data": [{"type": "images", "id": "5"}]}},
    }
    image = {"id": "5", "type": "images", "attributes": {"url": "u"}}
    side.page(*staged("stores", [store], [image], mall_id=3))
    assert _pairs(side) == [(3, 1, 0)]
    assert side.rows("SELECT stores_id, images_id FROM stores_images") == [(1, 5)]
    assert side.rows("SELECT id FROM images") == [(5,)]


def test_leaving_a_mall_repoints_mall_id_and_the_last_leaves_an_orphan(side: Side) -> None:
    _stores(side, 2, 1, 2)
    _stores(side, 5, 1)
    mark = _last(side)
    assert side.memberships.remove("stores", 2, [1, 2, 3]) == 2
    assert _mall_ids(side) == [(1, 5), (2, None)]
    assert side.memberships.malls_of("stores", 1) == [5]
    assert list(side.memberships.orphans("stores")) == [[2]]
    assert side.memberships.remove("programs", 2, [1]) == 0  # no such table: nothing to do
    assert side.memberships.remove("stores", 2, []) == 0
    assert ("stores", 1, "links") in _feed(side, mark)


def test_a_mall_s_end_reports_the_rows_that_lost_it(side: Side) -> None:
    _stores(side, 2, 3, 1)
    _stores(side, 5, 1)
    side.run("CREATE TABLE hours (mall_id INTEGER, date TEXT)")
    side.run("INSERT INTO hours VALUES (2, '2026-01-01'), (5, '2026-01-01')")
    assert side.memberships.drop_mall(2) == {"stores": [1, 3]}
    assert _mall_ids(side) == [(1, 5), (3, None)]
    assert side.rows("SELECT mall_id FROM hours") == [(5,)]
    assert side.memberships.malls_referenced() == {5}
    assert side.memberships.drop_mall(2) == {}


def test_reads_by_mall_stream_in_id_order_after_a_given_id(side: Side) -> None:
    _stores(side, 3, *range(1, 1206))
    _stores(side, 4, 7)
    assert side.memberships.count_in_mall("stores", 3) == 1205
    assert side.memberships.count_in_mall("programs", 3) == 0
    assert list(side.memberships.ids_in_mall("stores", 3, after=1200)) == [
        1201,
        1202,
        1203,
        1204,
        1205,
    ]
    assert len(list(side.memberships.ids_in_mall("stores", 3))) == 1205
    assert list(side.memberships.ids_in_mall("stores", 4)) == [7]
    assert list(side.memberships.ids_in_mall("programs", 4)) == []
    side.memberships.remove("stores", 3, [1, 2, 3])
    assert list(side.memberships.orphans("stores", batch=2)) == [[1, 2], [3]]
    assert list(side.memberships.orphans("programs")) == []


def test_rows_grouped_by_mall_and_the_malls_that_changed_last(side: Side) -> None:
    _stores(side, 4, 1, 2, at=T0)
    _stores(side, 6, 3, at=T2)
    _stores(side, 3, 4, at=T1)
    _stores(side, 3, 2, at=T0)
    _stores(side, 8, 5, at=None)  # no stamp: last
    assert side.by_mall("stores", [3, 2, 4, 9, 2]) == {3: [2, 4, 2], 4: [2, 2], 6: [3]}
    assert side.by_mall("stores", []) == {}
    assert side.busiest("stores", 2) == [6, 3]
    assert side.busiest("stores", 9) == [6, 3, 4, 8]
    assert side.busiest("stores", 0) == []
    assert side.busiest("programs", 3) == []


def test_deleted_rows_take_their_pairs_and_an_ensured_table_starts_empty(side: Side) -> None:
    side.memberships.ensure("products")
    assert side.memberships.count_in_mall("products", 1) == 0
    _stores(side, 2, 1, 2)
    _stores(side, 3, 1)
    mark = _last(side)
    side.run("DELETE FROM stores WHERE id = 1")
    side.memberships.drop_rows("stores", [1])
    assert _pairs(side) == [(2, 2, 0)]
    assert ("stores", 1, "links") not in _feed(side, mark)  # gone: its pairs go silently
    side.memberships.add("stores", [(9, 2), (2, 2)])
    assert side.memberships.malls_of("stores", 2) == [2, 9]


# -- PostgreSQL alone ------------------------------------------------------------------------


def test_the_table_is_shaped_as_the_malls_link_table(pg: PostgresSide) -> None:
    memberships.ensure(pg.conn, SCHEMA, "stores")
    columns = pg.rows(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ?"
        " AND table_name = 'malls_stores' ORDER BY ordinal_position",
        SCHEMA,
    )
    assert columns == [("malls_id", "bigint"), ("stores_id", "bigint"), ("position", "bigint")]
    assert memberships.columns("stores") == ("malls_id", "stores_id")
    triggers = pg.rows(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'malls_stores'::regclass"
        " AND NOT tgisinternal ORDER BY 1"
    )
    assert triggers == [
        ("_sync_changes_malls_stores_delete",),
        ("_sync_changes_malls_stores_insert",),
    ]


def test_a_mall_s_page_listed_again_leaves_no_dead_tuple(pg: PostgresSide) -> None:
    _stores(pg, 3, *range(1, 50))
    _stores(pg, 2, 7)
    pg.conn.execute("SELECT pg_stat_force_next_flush()")
    query = (
        "SELECT relname, n_tup_upd, n_tup_del, n_dead_tup FROM pg_stat_user_tables"
        " WHERE schemaname = ? AND relname IN ('stores', 'malls_stores') ORDER BY 1"
    )
    before = pg.rows(query, SCHEMA)
    versions = pg.rows("SELECT malls_id, stores_id, xmin::text FROM malls_stores ORDER BY 1, 2")
    _stores(pg, 3, *range(1, 50))
    _stores(pg, 2, 7)
    memberships.refresh_mall_id(pg.conn, SCHEMA, "stores", list(range(1, 50)))  # all right
    pg.conn.execute("SELECT pg_stat_force_next_flush()")
    assert pg.rows(query, SCHEMA) == before
    assert pg.rows("SELECT malls_id, stores_id, xmin::text FROM malls_stores ORDER BY 1, 2") == (
        versions
    )


def test_a_bulk_load_makes_the_table_without_the_feed_s_triggers(pg: PostgresSide) -> None:
    writer = PageWriter(pg.conn, SCHEMA, bulk=True)
    page = staged(
        "stores",
        [{"id": "1", "type": "stores", "attributes": {"name": "s", "updated_at": T0}}],
        mall_id=4,
    )
    writer.ensure_page(page)
    writer.write_page(page)
    assert pg.rows("SELECT malls_id, stores_id FROM malls_stores") == [(4, 1)]
    assert (
        pg.rows(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'malls_stores'::regclass"
            " AND NOT tgisinternal"
        )
        == []
    )

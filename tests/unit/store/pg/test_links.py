"""`sync.store.pg.links`: the PostgreSQL link tables held to SQLite's contract.

The contract tests take `side` and run twice (`tests.support.store_sides`): on a SQLite mirror
through `sync.store.links` and its page write, and on a fresh PostgreSQL database (`pg_db`)
through `sync.store.pg.links` and `PageWriter.write_page`, with one expectation for both: the
link rows and their positions, the change feed's entries, what each function returns. The
tests after them are PostgreSQL's own: an unchanged page leaves every row's version and no dead
tuple, a changed list rewrites only the pairs that differ, a page that fails writes nothing,
the tables' shape, and a bulk load's silence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sync.model import catalogue
from sync.pipeline.batches import Staged
from sync.store.pg import changes, columns, linkwrite
from sync.store.pg import links as pg_links
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_sides import SCHEMA, PostgresSide, Side, SQLiteSide, open_side
from tests.support.store_units import staged

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
DEALS = catalogue.TYPES["deals"]
JOBS = catalogue.TYPES["job_listings"]
IMAGES = next(r for r in DEALS.relationships if r.name == "images")


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


def _deal(rid: int, at: str | None = T0, title: str = "t", **rels: list[int]) -> dict[str, Any]:
    """A deal resource; `rels`: its to-many linkage by relationship name (`images=[5, 6]`)."""
    targets = {r.name: r.target for r in DEALS.relationships}
    attributes: dict[str, Any] = {"title": title}
    if at is not None:
        attributes["updated_at"] = at
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": attributes,
        "relationships": {
            name: {"data": [{"type": targets[name], "id": str(i)} for i in ids]}
            for name, ids in rels.items()
        },
    }


def _deals(*resources: dict[str, Any]) -> list[Staged]:
    return staged("deals", resources)


def _job(rid: int, at: str, store: int | None = None) -> list[Staged]:
    resource: dict[str, Any] = {
        "id": str(rid),
        "type": "job_listings",
        "attributes": {"title": "j", "updated_at": at},
    }
    if store is not None:
        resource["relationships"] = {"store": {"data": {"type": "stores", "id": str(store)}}}
    return staged("job_listings", [resource])


def _images(side: Side) -> list[tuple[Any, ...]]:
    return side.rows("SELECT deals_id, images_id, position FROM deals_images ORDER BY 1, 3")


def _last(side: Side) -> int:
    return int(side.rows("SELECT coalesce(max(seq), 0) FROM _sync_changes")[0][0])


def _feed(side: Side, after: int) -> list[tuple[Any, ...]]:
    return side.rows("SELECT type, id, op FROM _sync_changes WHERE seq > ? ORDER BY seq", after)


# -- the contract: both stores ---------------------------------------------------------------


def test_a_page_writes_each_owner_s_links_in_order_and_its_to_one_columns(side: Side) -> None:
    included = [{"id": str(i), "type": "images", "attributes": {"url": f"u{i}"}} for i in (5, 6)]
    deals = [_deal(1, images=[5, 6, 7], tags=[3]), _deal(2, images=[6], stores=[])]
    side.page(*staged("deals", deals, included))
    assert side.rows("SELECT id, url FROM images ORDER BY id") == [(5, "u5"), (6, "u6")]
    assert _images(side) == [(1, 5, 0), (1, 6, 1), (1, 7, 2), (2, 6, 0)]
    assert side.rows("SELECT deals_id, tags_id, position FROM deals_tags") == [(1, 3, 0)]
    assert side.rows("SELECT count(*) FROM deals_stores") == [(0,)]  # made for an empty list
    side.page(*_job(4, T0, store=12))
    assert side.rows("SELECT id, store_id FROM job_listings") == [(4, 12)]


def test_a_list_with_fewer_more_or_reordered_ids_is_written_where_it_differs(side: Side) -> None:
    side.page(*_deals(_deal(1, images=[5, 6, 7]), _deal(2, images=[8])))
    mark = _last(side)
    side.page(*_deals(_deal(1, images=[5, 6, 7]), _deal(2, images=[8])))
    assert _feed(side, mark) == []  # the same page: nothing written, nothing noted
    side.page(*_deals(_deal(1, images=[7, 5]), _deal(2, images=[8, 9, 10])))
    assert _images(side) == [(1, 7, 0), (1, 5, 1), (2, 8, 0), (2, 9, 1), (2, 10, 2)]
    assert _feed(side, mark) == [("deals", 1, "links"), ("deals", 2, "links")]
    mark = _last(side)
    side.page(*_deals(_deal(1, T1, images=[5, 5, 6])))  # a repeat leaves a gap
    assert _images(side)[:2] == [(1, 5, 0), (1, 6, 2)]
    assert _feed(side, mark) == [("deals", 1, "upsert")]  # the new version says enough
    mark = _last(side)
    side.page(*_deals(_deal(1, T1, images=[5, 6])))  # members and order as held: kept
    assert _images(side)[:2] == [(1, 5, 0), (1, 6, 2)]
    side.page(*_deals(_deal(1, T1, images=[])))
    assert _images(side) == [(2, 8, 0), (2, 9, 1), (2, 10, 2)]
    assert _feed(side, mark) == [("deals", 1, "links")]


def test_an_older_copy_or_one_without_a_stamp_changes_no_links(side: Side) -> None:
    side.page(*_deals(_deal(1, T1, images=[5]), _deal(2, T1, images=[5])))
    side.page(*_deals(_deal(1, T0, "old", images=[6]), _deal(2, None, "none", images=[6])))
    assert _images(side) == [(1, 5, 0), (2, 5, 0)]
    assert side.rows("SELECT title FROM deals ORDER BY id") == [("t",), ("t",)]
    side.page(*_deals(_deal(1, T1, images=[6]), _deal(3, T1, images=[6])))  # equal: written
    assert _images(side) == [(1, 6, 0), (2, 5, 0), (3, 6, 0)]


def test_an_owner_s_links_are_replaced_only_when_members_or_order_differ(side: Side) -> None:
    side.page(*_deals(_deal(1), _deal(2)))
    side.links.replace(DEALS, IMAGES, 1, [5, 6, 5])  # a repeat is kept where it first stands
    assert side.rows("SELECT images_id, position FROM deals_images ORDER BY 2") == [(5, 0), (6, 1)]
    mark = _last(side)
    side.links.replace(DEALS, IMAGES, 1, [5, 6])
    assert _feed(side, mark) == []  # the same list: no write, no entry
    side.links.replace(DEALS, IMAGES, 1, [6, 5])
    side.links.replace(DEALS, IMAGES, 99, [5])  # no such row: links kept, no entry
    assert _feed(side, mark) == [("deals", 1, "links")]
    assert _images(side) == [(1, 6, 0), (1, 5, 1), (99, 5, 0)]


def test_a_mall_s_route_list_notes_the_rows_that_joined_or_left(side: Side) -> None:
    side.page(*_deals(_deal(1), _deal(2), _deal(3)))
    assert side.links.replace_mall_links("deals", 9, [1, 2]) == 2
    mark = _last(side)
    assert side.links.replace_mall_links("deals", 9, [3, 3, 2]) == 3
    assert sorted(_feed(side, mark)) == [("deals", 1, "links"), ("deals", 3, "links")]
    # Positions as listed without the repeat (not the gap a page's list leaves).
    assert side.rows("SELECT deals_id, position FROM malls_deals ORDER BY 2") == [(3, 0), (2, 1)]
    assert side.links.mall_deals(9) == [2, 3]
    assert side.links.mall_deals(8) == []
    mall = {"id": "9", "type": "malls", "attributes": {"name": "m", "updated_at": T0}}
    contacts = [{"id": str(i), "type": "contacts", "attributes": {"name": "c"}} for i in (1, 2)]
    side.page(*staged("malls", [mall]))
    side.page(*staged("contacts", contacts))
    mark = _last(side)
    assert side.links.replace_mall_links("contacts", 9, [2, 1]) == 2  # a relationship of malls
    noted = [("contacts", 1, "links"), ("contacts", 2, "links"), ("malls", 9, "links")]
    assert _feed(side, mark) == noted


def test_rows_asked_by_filter_id_join_or_leave_a_mall_and_the_rest_stays(side: Side) -> None:
    side.page(*_deals(*(_deal(i) for i in range(1, 6))))
    side.links.replace_mall_links("deals", 9, [1, 2, 3])
    assert side.links.mall_link_count("deals", 9) == 3
    assert side.links.settle_mall_links("deals", 9, [2, 5], [5]) == 2
    assert side.links.mall_deals(9) == [1, 3, 5]
    assert side.links.settle_mall_links("deals", 9, [1, 5], [1, 5]) == 0  # as held
    assert side.links.mall_link_count("contacts", 9) == 0  # no such table


def test_a_to_one_column_is_made_when_missing_and_set(side: Side) -> None:
    side.page(*_job(4, T0))
    mark = _last(side)
    side.links.set_to_one(JOBS, "store_id", 4, 12)  # the feed watches the new column
    assert side.rows("SELECT id, store_id FROM job_listings") == [(4, 12)]
    assert _feed(side, mark) == [("job_listings", 4, "links")]
    side.links.set_to_one(JOBS, "store_id", 4, None)  # the newest entry says so already
    side.links.set_to_one(JOBS, "store_id", 4, None)
    assert side.rows("SELECT store_id FROM job_listings") == [(None,)]
    assert _feed(side, mark) == [("job_listings", 4, "links")]


def test_a_to_one_column_changes_only_under_the_listed_stamp(side: Side) -> None:
    side.page(*_job(5, T0, store=3))
    side.page(*_job(6, T1, store=3))
    listed = [(5, 8), (6, 8), (7, 8)]
    assert side.write_to_one(JOBS, "store_id", listed, {5: T0, 6: T0, 7: T0}) == 1
    assert side.rows("SELECT id, store_id FROM job_listings ORDER BY id") == [(5, 8), (6, 3)]
    assert side.write_to_one(JOBS, "store_id", listed, {5: T0, 6: T0}) == 0  # as held
    assert side.write_to_one(JOBS, "mall_id", listed, {5: T0}) == 0  # no such column


def test_which_link_tables_an_owner_holds_and_which_name_a_target(side: Side) -> None:
    assert side.links.none_held(DEALS)
    side.links.ensure(DEALS, ["images", "tags"])
    assert side.links.none_held(DEALS)  # made, but empty
    assert side.links.owned(DEALS) == [("deals_images", "deals_id"), ("deals_tags", "deals_id")]
    assert side.links.pointing_at("images") == [("deals_images", "deals", "deals_id", "images_id")]
    side.run("INSERT INTO deals_tags VALUES (1, 2, 0)")
    assert not side.links.none_held(DEALS)


def test_the_owners_of_a_row_come_from_link_tables_and_to_one_columns(side: Side) -> None:
    side.page(*_deals(_deal(2, stores=[7]), _deal(3, stores=[8]), _deal(4, stores=[6, 7])))
    side.page(*_job(1, T0, store=7))
    side.page(*_job(5, T0, store=9))
    assert side.links.owners_of("stores", [7]) == {"deals": {2, 4}, "job_listings": {1}}
    assert side.links.owners_of("stores", [5]) == {}
    after = _last(side)
    assert side.links.unlink("deals", "stores", [7]) == 2
    assert side.rows("SELECT deals_id, stores_id FROM deals_stores ORDER BY 1, 2") == [
        (3, 8),
        (4, 6),
    ]
    assert side.links.owners_of("stores", [7]) == {"job_listings": {1}}  # to-one: not unlinked
    assert _feed(side, after) == [("deals", 2, "links"), ("deals", 4, "links")]
    assert side.links.unlink("job_listings", "stores", [9]) == 0  # no link table of its own


def test_link_notes_made_before_a_write_leave_out_what_it_entered(side: Side) -> None:
    side.page(*_deals(_deal(1, images=[5]), _deal(2, images=[5])))
    notes = side.notes()
    side.page(*_deals(_deal(1, T1, images=[6])))
    notes.note("deals", [1, 2, 99])  # 1 has its upsert, 99 is no row
    assert _feed(side, notes.mark) == [("deals", 1, "upsert"), ("deals", 2, "links")]


# -- PostgreSQL alone ------------------------------------------------------------------------


def _versions(conn: psycopg.Connection[Any], table: str) -> dict[tuple[int, ...], str]:
    """Each row's `xmin` (the transaction that wrote its current version), by its key."""
    query = sql.SQL("SELECT *, xmin::text FROM {}").format(sql.Identifier(SCHEMA, table))
    out: dict[tuple[int, ...], str] = {}
    for row in conn.execute(query):
        out[tuple(row[:2])] = row[-1]
    return out


def _dead(conn: psycopg.Connection[Any], table: str) -> tuple[int, int, int]:
    """(updates, deletes, dead tuples) of `table` counted by the server."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_del, n_dead_tup FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = %s",
        (SCHEMA, table),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_an_unchanged_page_of_links_leaves_every_version_and_no_dead_tuple(
    pg: PostgresSide,
) -> None:
    page = _deals(*(_deal(i, images=[5, 6, i], tags=[1], stores=[]) for i in range(1, 30)))
    pg.page(*page)
    tables = ("deals", "deals_images", "deals_tags", "deals_stores")
    before = {t: (_versions(pg.conn, t), _dead(pg.conn, t)) for t in tables}
    mark = _last(pg)
    pg.page(*_deals(*(_deal(i, images=[5, 6, i], tags=[1], stores=[]) for i in range(1, 30))))
    pg.page(*_deals(*(_deal(i, T0, images=[5, 6, i, i]) for i in range(1, 30))))  # a repeat
    assert {t: (_versions(pg.conn, t), _dead(pg.conn, t)) for t in tables} == before
    assert _feed(pg, mark) == []


def test_a_changed_list_rewrites_only_the_pairs_that_differ(pg: PostgresSide) -> None:
    pg.page(*_deals(_deal(1, images=[5, 6, 7, 8]), _deal(2, images=[5])))
    held = _versions(pg.conn, "deals_images")
    upd, deleted, _ = _dead(pg.conn, "deals_images")
    pg.page(*_deals(_deal(1, images=[5, 7, 6, 9]), _deal(2, images=[5])))
    now = _versions(pg.conn, "deals_images")
    assert now[(1, 5)] == held[(1, 5)] and now[(2, 5)] == held[(2, 5)]  # where they stood
    assert now[(1, 6)] != held[(1, 6)] and now[(1, 7)] != held[(1, 7)]  # moved
    assert (1, 8) not in now and (1, 9) in now
    assert _dead(pg.conn, "deals_images")[:2] == (upd + 2, deleted + 1)
    assert _images(pg)[:4] == [(1, 5, 0), (1, 7, 1), (1, 6, 2), (1, 9, 3)]


def test_a_page_that_fails_writes_neither_its_rows_nor_its_links(pg: PostgresSide) -> None:
    pg.page(*_deals(_deal(1, images=[5])))
    page = _deals(_deal(1, T1, "new", images=[6]), _deal(2, T1, tags=[3]))
    pg.writer.ensure_page(page)
    pg.run("DROP TABLE deals_tags")  # the second owner's links cannot be written
    with pytest.raises(psycopg.errors.UndefinedTable):
        pg.writer.write_page(page)
    assert pg.rows("SELECT id, title FROM deals") == [(1, "t")]
    assert _images(pg) == [(1, 5, 0)]


def test_link_tables_are_sqlite_s_without_foreign_keys(pg: PostgresSide, tmp_path: Path) -> None:
    lite = SQLiteSide(tmp_path / "m.db")
    try:
        lite.links.ensure(DEALS, ["tags"])
        want = [r[1] for r in lite.rows("PRAGMA table_info(deals_tags)")]
        indexes = {r[1] for r in lite.rows("PRAGMA index_list(deals_tags)")}
    finally:
        lite.close()
    assert pg_links.ensure_link(pg.conn, SCHEMA, "deals_tags", "deals_id", "tags_id")
    assert not pg_links.ensure_link(pg.conn, SCHEMA, "deals_tags", "deals_id", "tags_id")
    columns = pg.rows(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = ? AND table_name = 'deals_tags' ORDER BY ordinal_position",
        SCHEMA,
    )
    assert [c[0] for c in columns] == want == ["deals_id", "tags_id", "position"]
    assert [c[1:] for c in columns] == [("bigint", "NO"), ("bigint", "NO"), ("bigint", "YES")]
    constraints = pg.rows(
        "SELECT contype, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = 'deals_tags'::regclass"
    )
    assert constraints == [("p", "PRIMARY KEY (deals_id, tags_id)")]
    assert "idx_deals_tags_tags_id" in indexes
    assert ("idx_deals_tags_tags_id",) in pg.rows(
        "SELECT indexname FROM pg_indexes WHERE schemaname = ? AND tablename = 'deals_tags'",
        SCHEMA,
    )


def test_a_to_one_column_is_the_page_write_s_type(pg: PostgresSide) -> None:
    pg.page(*_job(4, T0))
    pg_links.set_to_one(pg.conn, SCHEMA, JOBS, "store_id", 4, 12)
    typ = pg.rows(
        "SELECT data_type FROM information_schema.columns WHERE table_schema = ?"
        " AND table_name = 'job_listings' AND column_name = 'store_id'",
        SCHEMA,
    )
    assert typ == [(columns.declared("job_listings", "store_id"),)] == [("bigint",)]


def test_a_bulk_load_notes_no_links_and_the_feed_s_constants_are_the_page_write_s(
    pg: PostgresSide,
) -> None:
    pg.page(*_deals(_deal(1, images=[5])))
    bulk = PageWriter(pg.conn, SCHEMA, bulk=True)
    mark = _last(pg)
    page = _deals(_deal(1, images=[6]))
    bulk.ensure_page(page)
    bulk.write_page(page)
    assert _images(pg) == [(1, 6, 0)]
    assert _feed(pg, mark) == []
    assert pg_links.feed_notes(pg.conn, SCHEMA, bulk=True) is None
    assert (changes.MAX_NAME, changes.STAMP) == (columns.MAX_NAME, columns.STAMP)


def test_new_owners_links_are_plain_inserts_that_fail_on_a_held_pair(pg: PostgresSide) -> None:
    """Owners the writer knows rowless (`new`) get their pairs by a plain INSERT, no arbiter:
    the rows are those of the compared path, and a pair held after all fails the write (the
    page) instead of being overwritten."""
    deals = catalogue.TYPES["deals"]
    pg.page(*_deals(_deal(1, images=[7, 8])))
    linkwrite.write(pg.conn, SCHEMA, deals, {"images": [(2, [9, 8, 9])]}, new={2})
    assert _images(pg) == [(1, 7, 0), (1, 8, 1), (2, 9, 0), (2, 8, 1)]
    with pytest.raises(psycopg.errors.UniqueViolation):
        linkwrite.write(pg.conn, SCHEMA, deals, {"images": [(1, [7])]}, new={1})
    assert _images(pg) == [(1, 7, 0), (1, 8, 1), (2, 9, 0), (2, 8, 1)]

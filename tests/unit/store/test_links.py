"""`sync.store.links`: link lists replaced only where they differ, in order, noted in the feed."""

from __future__ import annotations

import sqlite3
from typing import Any

from sync.model import catalogue
from sync.store import Mirror, links
from tests.support.store_units import rows, staged, write

T0 = "2026-01-01T00:00:00.000Z"
DEALS = catalogue.TYPES["deals"]
IMAGES = next(r for r in DEALS.relationships if r.name == "images")


def _deal(rid: int) -> dict[str, Any]:
    return {"id": str(rid), "type": "deals", "attributes": {"title": "t", "updated_at": T0}}


def _feed(conn: sqlite3.Connection, after: int) -> list[tuple[Any, ...]]:
    return rows(conn, "SELECT type, id, op FROM _sync_changes WHERE seq > ? ORDER BY seq", after)


def _last(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM _sync_changes").fetchone()[0])


def test_an_owner_s_links_are_rewritten_only_when_members_or_order_differ(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("deals", [_deal(1), _deal(2)]))
    links.replace(
        conn, schema, DEALS, IMAGES, 1, [5, 6, 5]
    )  # a repeat is kept where it first stands
    assert rows(conn, "SELECT images_id, position FROM deals_images ORDER BY position") == [
        (5, 0),
        (6, 1),
    ]
    mark = _last(conn)
    links.replace(conn, schema, DEALS, IMAGES, 1, [5, 6])
    assert _feed(conn, mark) == []  # the same list: no write, no entry
    links.replace(conn, schema, DEALS, IMAGES, 1, [6, 5])
    links.replace(conn, schema, DEALS, IMAGES, 99, [5])  # no such row: links kept, no entry
    assert _feed(conn, mark) == [("deals", 1, "links")]
    assert rows(
        conn, "SELECT images_id FROM deals_images WHERE deals_id = 1 ORDER BY position"
    ) == [
        (6,),
        (5,),
    ]


def test_a_mall_s_route_list_notes_the_rows_that_joined_or_left(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("deals", [_deal(1), _deal(2), _deal(3)]))
    assert links.replace_mall_links(conn, schema, "deals", 9, [1, 2]) == 2
    mark = _last(conn)
    assert links.replace_mall_links(conn, schema, "deals", 9, [2, 3, 3]) == 3
    assert sorted(_feed(conn, mark)) == [("deals", 1, "links"), ("deals", 3, "links")]
    assert rows(conn, "SELECT deals_id, position FROM malls_deals ORDER BY position") == [
        (2, 0),
        (3, 1),
    ]
    assert links.mall_deals(conn, 9) == [2, 3]


def test_rows_asked_by_filter_id_join_or_leave_a_mall_and_the_rest_stays(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("deals", [_deal(i) for i in range(1, 6)]))
    links.replace_mall_links(conn, schema, "deals", 9, [1, 2, 3])
    assert links.mall_link_count(conn, schema, "deals", 9) == 3
    assert links.settle_mall_links(conn, schema, "deals", 9, [2, 5], [5]) == 2
    assert links.mall_deals(conn, 9) == [1, 3, 5]
    assert links.settle_mall_links(conn, schema, "deals", 9, [1, 5], [1, 5]) == 0  # as held
    assert links.mall_link_count(conn, schema, "contacts", 9) == 0  # no such table


def test_a_to_one_column_is_made_when_missing_and_set(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    jobs = catalogue.TYPES["job_listings"]
    job = {"id": "4", "type": "job_listings", "attributes": {"title": "j", "updated_at": T0}}
    write(conn, schema, staged("job_listings", [job]))
    assert "store_id" not in schema.columns("job_listings")
    links.set_to_one(conn, schema, jobs, "store_id", 4, 12)
    assert rows(conn, "SELECT id, store_id FROM job_listings") == [(4, 12)]
    links.set_to_one(conn, schema, jobs, "store_id", 4, None)
    assert rows(conn, "SELECT store_id FROM job_listings") == [(None,)]


def test_which_link_tables_an_owner_holds_and_which_name_a_target(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    assert links.none_held(conn, schema, DEALS)
    links.ensure(schema, DEALS, ["images", "tags"])
    assert links.none_held(conn, schema, DEALS)  # made, but empty
    assert links.owned(schema, DEALS) == [("deals_images", "deals_id"), ("deals_tags", "deals_id")]
    assert links.pointing_at(schema, "images") == [
        ("deals_images", "deals", "deals_id", "images_id")
    ]
    conn.execute("INSERT INTO deals_tags VALUES (1, 2, 0)")
    assert not links.none_held(conn, schema, DEALS)


def test_the_owners_of_a_row_come_from_link_tables_and_to_one_columns(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    schema.ensure_link("deals_stores", "deals_id", "stores_id", "deals", "stores")
    schema.ensure_link("malls_stores", "malls_id", "stores_id", "malls", "stores")
    schema.ensure_content("job_listings", {"id": 1, "store_id": 7})
    schema.ensure_content("deals", {"id": 1, "updated_at": T0})
    conn.execute("INSERT INTO deals (id, updated_at) VALUES (2, ?), (3, ?), (4, ?)", (T0,) * 3)
    conn.execute("INSERT INTO deals_stores VALUES (2, 7, 0), (3, 8, 0), (4, 7, 1)")
    conn.execute("INSERT INTO job_listings (id, store_id) VALUES (1, 7), (5, 9)")
    assert mirror.table("stores").linked_from([7]) == {"deals": [2, 4], "job_listings": [1]}
    assert mirror.table("stores").linked_from([6]) == {}
    after = _last(conn)
    assert mirror.table("stores").unlink_from("deals", [7]) == 2
    assert rows(conn, "SELECT deals_id, stores_id FROM deals_stores") == [(3, 8)]
    assert mirror.table("stores").linked_from([7]) == {"job_listings": [1]}  # to-one: not unlinked
    assert _feed(conn, after) == [("deals", 2, "links"), ("deals", 4, "links")]

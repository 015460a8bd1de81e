"""`sync.store.pagewrite`: the guarded upsert and link guard, `mall_id` as the lowest mall, fresh owners."""

from __future__ import annotations

from typing import Any

from sync.store import Mirror
from sync.store.pagewrite import PageWriter
from sync.store.transaction import write_transaction
from tests.support.store_units import rows, staged, write

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _deal(rid: int, updated: str, title: str, images: list[int]) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": title, "updated_at": updated},
        "relationships": {"images": {"data": [{"type": "images", "id": str(i)} for i in images]}},
    }


def test_the_link_guard_drops_the_links_of_older_copies_and_knows_fresh_owners(
    mirror: Mirror,
) -> None:
    conn, schema = mirror.conn, mirror.schema
    writer = PageWriter(conn, schema)
    first = staged("deals", [_deal(1, T1, "a", [5]), _deal(2, T1, "b", [6])])
    writer.ensure_schema(first)
    links, new = writer.link_guard(first[0])
    assert new == {1, 2}  # a table this writer created: no owner was ever written
    with write_transaction(conn):
        writer.write(first[0])
    page = staged(
        "deals", [_deal(1, T0, "old", [7]), _deal(2, T2, "new", [8]), _deal(3, T0, "c", [9])]
    )
    links, new = writer.link_guard(page[0])
    assert new == {3}
    assert links == {"images": [(2, [8]), (3, [9])]}
    with write_transaction(conn):
        writer.write(page[0])
    assert rows(conn, "SELECT id, title, updated_at FROM deals ORDER BY id") == [
        (1, "a", T1),
        (2, "new", T2),
        (3, "c", T0),
    ]
    assert rows(conn, "SELECT deals_id, images_id FROM deals_images ORDER BY 1") == [
        (1, 5),
        (2, 8),
        (3, 9),
    ]


def test_an_equal_stamp_overwrites_and_a_row_without_one_takes_any_copy(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("deals", [_deal(1, T1, "a", [])]))
    write(conn, schema, staged("deals", [_deal(1, T1, "same stamp", [])]))
    assert rows(conn, "SELECT title FROM deals") == [("same stamp",)]
    conn.execute("UPDATE deals SET updated_at = NULL WHERE id = 1")
    write(conn, schema, staged("deals", [_deal(1, T0, "over a null", [])]))
    assert rows(conn, "SELECT title, updated_at FROM deals") == [("over a null", T0)]


def test_a_mall_scoped_row_keeps_its_lowest_mall_and_every_membership(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    store = {"id": "3", "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
    for mall in (9, 4, 7):
        write(conn, schema, staged("stores", [store], mall_id=mall))
    assert rows(conn, "SELECT id, mall_id FROM stores") == [(3, 4)]
    assert rows(conn, "SELECT malls_id FROM malls_stores ORDER BY 1") == [(4,), (7,), (9,)]


def test_the_upsert_statement_is_prepared_once_per_column_set(mirror: Mirror) -> None:
    writer = PageWriter(mirror.conn, mirror.schema)
    sql = writer.upsert_sql("tags", ("name",))
    assert sql is writer.upsert_sql("tags", ("name",))
    assert "WHERE" not in sql  # no stamp, no guard
    assert writer.upsert_sql("tags", ()).endswith("ON CONFLICT(id) DO NOTHING")
    guarded = writer.upsert_sql("deals", ("title", "updated_at"))
    assert guarded.endswith(
        "WHERE [deals].updated_at IS NULL OR excluded.updated_at >= [deals].updated_at"
    )

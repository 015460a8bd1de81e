"""`sync.store.memberships`: a row's malls as pairs, `mall_id` the lowest, a mall's end, orphans, migration."""

from __future__ import annotations

import sqlite3
from typing import Any

from sync.store import Mirror, memberships
from tests.support.store_units import rows, staged, write

T0 = "2026-01-01T00:00:00.000Z"


def _stores(mirror: Mirror, mall: int, *ids: int) -> None:
    page = [
        {"id": str(i), "type": "stores", "attributes": {"name": "s", "updated_at": T0}} for i in ids
    ]
    write(mirror.conn, mirror.schema, staged("stores", page, mall_id=mall))


def _mall_ids(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return rows(conn, "SELECT id, mall_id FROM stores ORDER BY id")


def test_leaving_a_mall_repoints_mall_id_and_the_last_leaves_an_orphan(mirror: Mirror) -> None:
    conn = mirror.conn
    _stores(mirror, 2, 1, 2)
    _stores(mirror, 5, 1)
    assert memberships.remove(conn, "stores", 2, [1, 2, 3]) == 2
    assert _mall_ids(conn) == [(1, 5), (2, None)]
    assert memberships.malls_of(conn, "stores", 1) == [5]
    assert list(memberships.orphans(conn, "stores")) == [[2]]
    assert memberships.remove(conn, "programs", 2, [1]) == 0  # no such table: nothing to do


def test_a_mall_s_end_reports_the_rows_that_lost_it(mirror: Mirror) -> None:
    conn = mirror.conn
    _stores(mirror, 2, 1, 2)
    _stores(mirror, 5, 2)
    conn.execute("CREATE TABLE hours (mall_id INTEGER, date TEXT)")
    conn.execute("INSERT INTO hours VALUES (2, '2026-01-01'), (5, '2026-01-01')")
    assert memberships.drop_mall(conn, 2) == {"stores": [1, 2]}
    assert _mall_ids(conn) == [(1, None), (2, 5)]
    assert rows(conn, "SELECT mall_id FROM hours") == [(5,)]
    assert memberships.malls_referenced(conn) == {5}


def test_reads_by_mall_stream_in_id_order_after_a_given_id(mirror: Mirror) -> None:
    conn = mirror.conn
    _stores(mirror, 3, *range(1, 1206))
    _stores(mirror, 4, 7)
    assert memberships.count_in_mall(conn, "stores", 3) == 1205
    assert list(memberships.ids_in_mall(conn, "stores", 3, after=1200)) == [
        1201,
        1202,
        1203,
        1204,
        1205,
    ]
    assert len(list(memberships.ids_in_mall(conn, "stores", 3))) == 1205
    assert list(memberships.ids_in_mall(conn, "stores", 4)) == [7]
    memberships.remove(conn, "stores", 3, [1, 2, 3])
    assert list(memberships.orphans(conn, "stores", batch=2)) == [[1, 2], [3]]


def test_an_older_mirror_s_mall_id_becomes_the_first_membership(mirror: Mirror) -> None:
    conn = mirror.conn
    conn.execute("CREATE TABLE stores (id INTEGER PRIMARY KEY, name TEXT, mall_id INTEGER)")
    conn.execute("INSERT INTO stores VALUES (1, 'a', 4), (2, 'b', NULL)")
    conn.execute("CREATE TABLE programs (id INTEGER PRIMARY KEY, name TEXT)")  # no mall_id
    made: list[str] = []

    def create(name: str) -> None:
        made.append(name)
        memberships.ensure(mirror.schema, name)

    memberships.migrate(conn, create)
    assert made == ["stores"]
    assert rows(conn, "SELECT malls_id, stores_id, position FROM malls_stores") == [(4, 1, 0)]
    memberships.migrate(conn, create)  # the table exists now: nothing again
    assert made == ["stores"]

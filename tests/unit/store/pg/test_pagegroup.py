"""`sync.store.pg.pagegroup`: several pages of the PostgreSQL page write in one transaction when
a bulk load says so, against a real PostgreSQL: committed together, a schema change commits the
open group first, a failure rolls the whole group back, whole pages keep their links and
memberships."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from sync.pipeline.batches import Staged
from sync.store.pg.pagegroup import PageGroup
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_units import staged
from tests.unit.store.pg.test_pagewrite import SCHEMA, T0, T1, T2, _deal, _deals, _rows, _types


def test_a_group_writes_several_pages_in_one_transaction(
    conn: psycopg.Connection[Any], pg_db: str
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    with psycopg.connect(pg_db, autocommit=True) as other:

        def seen() -> int:
            row = other.execute("SELECT count(*) FROM ccsync.deals").fetchone()
            return int(row[0]) if row else 0

        with PageGroup(writer, pages=3) as group:
            group.write(_deals(_deal(2, T1, "b"), _deal(1, T0, "older")))
            group.write(_deals(_deal(3, T1, "c"), _deal(1, T1, "a")))  # unchanged: not written
            assert seen() == 1 and group.written == 0  # nothing committed yet
            group.write(_deals(_deal(4, T1, "d")))  # the third page: the group commits
            assert seen() == 4 and group.written == 3 and group.commits == 1
            group.write(_deals(_deal(5, T1, "e"), _deal(2, T2, "newer")))
            assert seen() == 4
        assert seen() == 5 and group.written == 5 and group.commits == 2
    assert _rows(conn, "deals", "title") == [(1, "a"), (2, "newer"), (3, "c"), (4, "d"), (5, "e")]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_group_commits_before_a_schema_change_and_rolls_back_whole(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    with pytest.raises(RuntimeError, match="page failed"), PageGroup(writer, pages=10) as group:
        group.write(_deals(_deal(1, T1, "a")))  # a new table: made before the group opens
        group.write(_deals(_deal(2, T1, "b")))
        group.write(_deals(_deal(3, T1, "c", rank=1)))  # a new column: the group commits first
        assert group.commits == 1 and group.written == 2
        group.write(_deals(_deal(4, T1, "d", rank=2)))
        raise RuntimeError("page failed")
    assert _rows(conn, "deals", "title, rank") == [(1, "a", None), (2, "b", None)]
    assert _types(conn, "deals")["rank"] == ("bigint", None)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with PageGroup(writer, pages=10) as group:
        group.write(_deals(_deal(3, T1, "c", rank=1), _deal(4, T1, "d", rank=2)))
    assert group.written == 2
    with conn.transaction(), pytest.raises(RuntimeError, match="outside a transaction"):
        PageGroup(writer, pages=10).__enter__()


def test_a_group_rolls_back_on_a_failed_statement(conn: psycopg.Connection[Any]) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    conn.execute("ALTER TABLE ccsync.deals ADD CHECK (title <> 'refused')")
    with pytest.raises(psycopg.errors.CheckViolation), PageGroup(writer, pages=10) as group:
        group.write(_deals(_deal(2, T1, "b")))
        group.write(_deals(_deal(3, T1, "refused")))
        group.write(_deals(_deal(4, T1, "d")))
    assert _rows(conn, "deals", "title") == [(1, "a")]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert writer.write(_deals(_deal(2, T1, "b"))) == 1


def test_a_group_writes_whole_pages_with_their_links_and_memberships(
    conn: psycopg.Connection[Any], pg_db: str
) -> None:
    def deal(rid: int, updated: str, *images: int) -> dict[str, Any]:
        resource = _deal(rid, updated, f"deal {rid}")
        resource["relationships"] = {
            "images": {"data": [{"type": "images", "id": str(i)} for i in images]}
        }
        return resource

    def store(rid: int, mall: int) -> list[Staged]:
        resource = {"id": str(rid), "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
        return staged("stores", [resource], mall_id=mall)

    writer = PageWriter(conn, SCHEMA)
    writer.ensure_page(staged("deals", [deal(1, T1, 7)]))
    writer.write_page(staged("deals", [deal(1, T1, 7)]))
    with psycopg.connect(pg_db, autocommit=True) as other:

        def held() -> list[tuple[Any, ...]]:
            return [
                tuple(r)
                for r in other.execute(
                    "SELECT deals_id, images_id, position FROM ccsync.deals_images"
                    " ORDER BY deals_id, position"
                ).fetchall()
            ]

        with PageGroup(writer, pages=4) as group:
            group.write_page(staged("deals", [deal(2, T1, 8, 9), deal(1, T0, 6)]))  # 1: older
            group.write_page(store(5, mall=4))  # a new table and membership table: commits
            assert group.commits == 1 and group.written == 1
            group.write_page(staged("deals", [deal(3, T1, 9)]))
            group.write(_deals(_deal(4, T1, "rows alone")))
            assert held() == [(1, 7, 0), (2, 8, 0), (2, 9, 1)]  # the open group: not yet
            group.write_page(staged("deals", [deal(1, T2, 5)]))  # the fourth page: commits
            assert group.commits == 2 and group.written == 5
        assert held() == [(1, 5, 0), (2, 8, 0), (2, 9, 1), (3, 9, 0)]
    assert _rows(conn, "stores", "mall_id") == [(5, 4)]
    assert conn.execute("SELECT malls_id, stores_id FROM ccsync.malls_stores").fetchall() == [
        (4, 5)
    ]
    with pytest.raises(RuntimeError, match="page failed"), PageGroup(writer, pages=3) as group:
        group.write_page(staged("deals", [deal(6, T1, 1)]))
        raise RuntimeError("page failed")
    assert [r[0] for r in _rows(conn, "deals", "title")] == [1, 2, 3, 4]
    assert conn.execute("SELECT count(*) FROM ccsync.deals_images").fetchone() == (4,)

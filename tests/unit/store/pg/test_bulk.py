"""`sync.store.pg.bulk.PgGroup`: several pages of the PostgreSQL page write in one pipelined
transaction when a bulk load says so, against a real PostgreSQL: committed together, a schema
change commits the open group first, a failure (in the caller's block or in a statement, raised
when the pipeline syncs) rolls the whole group back and tells its owner, whole pages keep their
links and memberships, nothing commits once the fence says no."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from sync.core.errors import MirrorError
from sync.pipeline.batches import Staged
from sync.store.pg.bulk import LOST_LOCK, PgGroup
from sync.store.pg.lock import ActiveLock
from sync.store.pg.mirror import PgMirror
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_units import staged
from tests.unit.store.pg.test_pagewrite import SCHEMA, T0, T1, T2, _deal, _deals, _rows, _types


class Pages:
    """A writer's pages through a group, as `PgMirror.write_staged` sends them: the schema
    first (committing the open group), then the page's statements in the group, uncounted."""

    def __init__(self, writer: PageWriter, pages: int, fence: bool = True) -> None:
        self.writer = writer
        self.rollbacks = 0
        self.allowed = fence
        self.group = PgGroup(writer.conn, lambda conn: self.allowed, self._rolled_back)
        self.group.start(pages)

    def _rolled_back(self) -> None:
        self.rollbacks += 1

    def write(self, batches: list[Staged]) -> None:
        if self.writer.page_changes_schema(batches):
            self.group.commit()
            self.writer.ensure_page(batches)
        with self.group.page():
            for b in batches:
                self.writer.write_rows(b, count=False)
            self.writer.write_memberships(batches[0])


def _seen(pg_db: str, table: str = "deals") -> int:
    with psycopg.connect(pg_db) as other:
        row = other.execute(f"SELECT count(*) FROM ccsync.{table}").fetchone()
        return int(row[0]) if row else 0


def test_a_group_writes_several_pages_in_one_transaction(
    conn: psycopg.Connection[Any], pg_db: str
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    pages = Pages(writer, 3)
    pages.write([_deals(_deal(2, T1, "b"), _deal(1, T0, "older"))])
    pages.write([_deals(_deal(3, T1, "c"), _deal(1, T1, "a"))])  # unchanged: not written
    assert _seen(pg_db) == 1 and pages.group.open  # nothing committed yet
    pages.write([_deals(_deal(4, T1, "d"))])  # the third page: the group commits
    assert _seen(pg_db) == 4 and pages.group.commits == 1 and not pages.group.open
    pages.write([_deals(_deal(5, T1, "e"), _deal(2, T2, "newer"))])
    assert _seen(pg_db) == 4
    pages.group.end()
    assert _seen(pg_db) == 5 and pages.group.commits == 2 and pages.rollbacks == 0
    assert _rows(conn, "deals", "title") == [(1, "a"), (2, "newer"), (3, "c"), (4, "d"), (5, "e")]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_group_commits_before_a_schema_change_and_rolls_back_whole(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    pages = Pages(writer, 10)
    pages.write([_deals(_deal(1, T1, "a"))])  # a new table: made before the group opens
    pages.write([_deals(_deal(2, T1, "b"))])
    pages.write([_deals(_deal(3, T1, "c", rank=1))])  # a new column: the group commits first
    assert pages.group.commits == 1
    pages.write([_deals(_deal(4, T1, "d", rank=2))])
    with pytest.raises(RuntimeError, match="page failed"), pages.group.page():
        raise RuntimeError("page failed")
    assert pages.rollbacks == 1 and not pages.group.open
    assert _rows(conn, "deals", "title, rank") == [(1, "a", None), (2, "b", None)]
    assert _types(conn, "deals")["rank"] == ("bigint", None)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    pages.write([_deals(_deal(3, T1, "c", rank=1), _deal(4, T1, "d", rank=2))])
    pages.group.end()
    assert [r[0] for r in _rows(conn, "deals", "rank")] == [1, 2, 3, 4]
    with conn.transaction(), pytest.raises(RuntimeError, match="outside a transaction"):
        Pages(writer, 10).write([_deals(_deal(5, T1, "e"))])


def test_a_failed_statement_rolls_the_group_back_when_the_pipeline_syncs(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    conn.execute("ALTER TABLE ccsync.deals ADD CHECK (title <> 'refused')")
    pages = Pages(writer, 10)
    pages.write([_deals(_deal(2, T1, "b"))])
    pages.write([_deals(_deal(3, T1, "refused"))])  # sent, not answered yet
    with pytest.raises(psycopg.errors.CheckViolation):
        pages.write([_deals(_deal(4, T1, "d"))])
        pages.group.end()
    assert pages.rollbacks == 1 and not pages.group.open
    assert _rows(conn, "deals", "title") == [(1, "a")]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert writer.write(_deals(_deal(2, T1, "b"))) == 1


def test_a_group_commits_nothing_once_the_fence_says_no(conn: psycopg.Connection[Any]) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    pages = Pages(writer, 10)
    pages.write([_deals(_deal(2, T1, "b"))])
    pages.allowed = False
    with pytest.raises(MirrorError, match="active lock"):
        pages.group.end()
    assert pages.rollbacks == 1
    assert _rows(conn, "deals", "title") == [(1, "a")]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


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

        pages = Pages(writer, 4)
        pages.write(staged("deals", [deal(2, T1, 8, 9), deal(1, T0, 6)]))  # 1: older
        pages.write(store(5, mall=4))  # a new table and membership table: commits
        assert pages.group.commits == 1
        pages.write(staged("deals", [deal(3, T1, 9)]))
        pages.write([_deals(_deal(4, T1, "rows alone"))])
        assert held() == [(1, 7, 0), (2, 8, 0), (2, 9, 1)]  # the open group: not yet
        pages.write(staged("deals", [deal(1, T2, 5)]))  # the fourth page: commits
        assert pages.group.commits == 2
        assert held() == [(1, 5, 0), (2, 8, 0), (2, 9, 1), (3, 9, 0)]
    assert _rows(conn, "stores", "mall_id") == [(5, 4)]
    assert conn.execute("SELECT malls_id, stores_id FROM ccsync.malls_stores").fetchall() == [
        (4, 5)
    ]
    with pytest.raises(RuntimeError, match="page failed"), pages.group.page():
        for b in staged("deals", [deal(6, T1, 1)]):
            writer.write_rows(b, count=False)
        raise RuntimeError("page failed")
    assert [r[0] for r in _rows(conn, "deals", "title")] == [1, 2, 3, 4]
    assert conn.execute("SELECT count(*) FROM ccsync.deals_images").fetchone() == (4,)


def _ops(mirror: PgMirror) -> list[tuple[str, int | None, str]]:
    return [(c.type, c.id, c.op) for c in mirror.changes.since(0)]


def test_a_bulk_load_notes_one_backfill_entry_per_type_then_the_feed_follows_rows(
    pg_db: str,
) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.indexes.defer(True)
        mirror.write_staged([_deals(_deal(1, T1, "a"), _deal(2, T1, "b"))])
        assert _ops(mirror) == []  # no entry per row while it loads
        mirror.indexes.defer(False)
        assert _ops(mirror) == [("deals", None, "backfill")]
        mirror.write_staged([_deals(_deal(1, T2, "a2"))])
        assert _ops(mirror)[-1] == ("deals", 1, "upsert")  # the triggers are back
    finally:
        mirror.close()


def _reverse(pg_db: str) -> list[str]:
    """The reverse indexes of the schema's link and membership tables."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        return [
            r[0]
            for r in c.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
                " AND indexname LIKE 'idx\\_%%' ORDER BY 1",
                (SCHEMA,),
            )
        ]


def test_a_bulk_load_makes_the_reverse_indexes_at_its_end_or_the_next_open(pg_db: str) -> None:
    """Link and membership tables made by a bulk load get their reverse index when it ends
    (one sort, not an entry per insert); those of a load killed before its end, at the next
    writer's open. Outside a bulk load a link table comes with it."""
    page = staged(
        "stores",
        [
            {
                "id": "1",
                "type": "stores",
                "attributes": {"name": "s", "updated_at": T1, "mall_id": 7},
                "relationships": {"tags": {"data": [{"type": "tags", "id": "5"}]}},
            }
        ],
    )
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.indexes.defer(True)
        mirror.write_staged(page)
        assert _reverse(pg_db) == []  # the tables made, their rows in, no reverse index yet
        mirror.indexes.defer(False)
        made = _reverse(pg_db)
        assert made == ["idx_malls_stores_stores_id", "idx_stores_tags_tags_id"]
        with psycopg.connect(pg_db, autocommit=True) as c:
            for name in made:
                c.execute(f'DROP INDEX "{SCHEMA}"."{name}"')  # as a killed load leaves them
    finally:
        mirror.close()
    assert _reverse(pg_db) == []
    PgMirror.open(pg_db, SCHEMA).close()  # a writer's open
    assert _reverse(pg_db) == made
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        deals = staged(
            "deals",
            [
                {
                    "id": "2",
                    "type": "deals",
                    "attributes": {"title": "d", "updated_at": T1},
                    "relationships": {"images": {"data": [{"type": "images", "id": "6"}]}},
                }
            ],
        )
        mirror.write_staged(deals)
        assert "idx_deals_images_images_id" in _reverse(pg_db)
    finally:
        mirror.close()


def test_a_group_commits_nothing_once_the_lock_is_gone(pg_db: str) -> None:
    lock = ActiveLock(pg_db, SCHEMA)
    assert lock.try_acquire()
    mirror = PgMirror.open(pg_db, SCHEMA, lock=lock)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"))])
        mirror.group.start(3)
        mirror.write_staged([_deals(_deal(2, T1, "b"))])
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [lock.backend_pid])  # gone first
        mirror.write_staged([_deals(_deal(3, T1, "c"))])
        with pytest.raises(MirrorError) as caught:
            mirror.write_staged([_deals(_deal(4, T1, "d"))])  # the group's commit is refused
        assert str(caught.value) == LOST_LOCK
        assert [r[0] for r in mirror.conn.execute(f"SELECT id FROM {SCHEMA}.deals")] == [1]
    finally:
        mirror.close()
        lock.release()

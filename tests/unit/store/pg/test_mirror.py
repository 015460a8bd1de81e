"""`sync.store.pg.mirror`: the PostgreSQL mirror as the core holds it, against a real server.

A page commits whole or not at all, its checkpoint with it; no page commits once the active
lock is gone (the fence); a bulk load's group rolls back whole; one writer at a time, the
second told who holds the mirror; a reader writes nothing; the verify's compare names what
differs under an equal stamp and nothing else.
"""

from __future__ import annotations

import psycopg
import pytest

from sync.core.errors import MirrorError
from sync.store.backfills import PageCheckpoint
from sync.store.pg.lock import ActiveLock
from sync.store.pg.mirror import PgMirror
from tests.unit.store.pg.test_pagewrite import SCHEMA, T1, T2, _deal, _deals, _rows


def _count(dsn: str, table: str = "deals") -> int:
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute(f"SELECT count(*) FROM {SCHEMA}.{table}").fetchone()
        return int(row[0]) if row else 0


def test_a_page_and_its_checkpoint_commit_together(pg_db: str) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.backfills.start("deals", "Public", page_size=2, started_at=T1)
        cp = PageCheckpoint("deals", "Public", 1, 3)
        result = mirror.write_staged([_deals(_deal(1, T1, "a"), _deal(2, T1, "b"))], checkpoint=cp)
        assert result.rows == 2
        state = mirror.backfills.state("deals", "Public")
        assert state is not None and 1 in state.pages_done
        assert _rows(mirror.conn, "deals", "title") == [(1, "a"), (2, "b")]
    finally:
        mirror.close()


def test_no_page_commits_once_the_active_lock_is_gone(pg_db: str) -> None:
    """The lock's session ended (a server restart, a network cut): the fence refuses the page,
    which rolls back whole with its checkpoint; the mirror keeps what it had."""
    lock = ActiveLock(pg_db, SCHEMA)
    assert lock.try_acquire()
    mirror = PgMirror.open(pg_db, SCHEMA, lock=lock)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"))])
        pid = lock.backend_pid
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])  # gone first
        mirror.backfills.start("deals", "Public", page_size=2, started_at=T1)
        cp = PageCheckpoint("deals", "Public", 1, 3)
        with pytest.raises(MirrorError, match="no longer holds the mirror's active lock"):
            mirror.write_staged([_deals(_deal(2, T1, "b"), _deal(1, T2, "newer"))], checkpoint=cp)
        assert _rows(mirror.conn, "deals", "title") == [(1, "a")]
        state = mirror.backfills.state("deals", "Public")
        assert state is not None and not state.pages_done
    finally:
        mirror.close()
        lock.release()


def test_a_bulk_load_s_group_rolls_back_whole(pg_db: str) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"))])  # the table exists: no schema change
        mirror.group.start(10)
        mirror.write_staged([_deals(_deal(2, T1, "b"))])
        assert _count(pg_db) == 1  # in the open group, not committed
        with pytest.raises(RuntimeError, match="boom"), mirror._page_transaction():
            mirror.write_staged([_deals(_deal(3, T1, "c"))])
            raise RuntimeError("boom")
        mirror.group.end()
        assert _count(pg_db) == 1  # the whole group went: its pages are fetched again
        mirror.group.start(10)
        mirror.write_staged([_deals(_deal(4, T1, "d"))])
        mirror.group.end()
        assert _count(pg_db) == 2
    finally:
        mirror.close()


def test_a_second_writer_is_told_who_holds_the_mirror(pg_db: str) -> None:
    first = PgMirror.open(pg_db, SCHEMA)
    try:
        with pytest.raises(MirrorError, match="another ccsync writes this mirror") as caught:
            PgMirror.open(pg_db, SCHEMA)
        assert "ccsync@" in str(caught.value)  # the holder's application_name
        assert "password" not in str(caught.value)
        reader = PgMirror.open(pg_db, SCHEMA, readonly=True)  # readers take no lock
        reader.close()
    finally:
        first.close()
    PgMirror.open(pg_db, SCHEMA).close()  # released on close


def test_a_reader_writes_nothing(pg_db: str) -> None:
    PgMirror.open(pg_db, SCHEMA).close()
    reader = PgMirror.open(pg_db, SCHEMA, readonly=True)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.meta.set("x", "y")
    finally:
        reader.close()


def test_the_verify_s_compare_names_what_differs_under_an_equal_stamp(pg_db: str) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"), _deal(2, T1, "b"), _deal(3, T1, "c"))])
        repairs = mirror.repair(
            [
                _deals(
                    _deal(1, T1, "a"),
                    _deal(2, T1, "changed"),
                    _deal(3, T2, "newer"),
                    _deal(4, T1, "d"),
                )
            ]
        )
        found = {r.id: r.what for r in repairs}
        assert found == {2: ("title",), 4: ("missing",)}  # 3 is lag, 1 is the same
        assert _rows(mirror.conn, "deals", "title") == [
            (1, "a"),
            (2, "changed"),
            (3, "newer"),
            (4, "d"),
        ]
        assert mirror.repair([_deals(_deal(2, T1, "changed"))]) == []
    finally:
        mirror.close()


def test_the_change_feed_sees_a_page_and_the_views_exist(pg_db: str) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"))])
        mirror.write_staged([_deals(_deal(1, T2, "b"))])
        ops = [(c.type, c.id, c.op) for c in mirror.changes.since(0)]
        assert ops == [("deals", 1, "upsert"), ("deals", 1, "upsert")]
        assert mirror.schema.has_view("stores_deals") is mirror.schema.has_table("deals_stores")
    finally:
        mirror.close()


def test_a_writer_commits_as_sqlite_does_without_waiting_for_the_flush(pg_db: str) -> None:
    """Pages and notices do not wait for the WAL flush (SQLite's `synchronous=NORMAL`): the
    writer's session says so whatever the server's setting."""
    with psycopg.connect(pg_db, autocommit=True) as admin:
        admin.execute("ALTER DATABASE " + pg_db.rsplit("/", 1)[1] + " SET synchronous_commit = on")
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        row = mirror.conn.execute("SHOW synchronous_commit").fetchone()
        assert row is not None and row[0] == "off"
    finally:
        mirror.close()

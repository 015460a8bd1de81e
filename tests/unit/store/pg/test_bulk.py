"""`sync.store.pg.bulk`: a bulk load's two switches on the PostgreSQL mirror, against a real
server: the end phase (the feed's triggers dropped while it loads, one `backfill` entry per type
at its end, the triggers and views made again) and group commit (pages committed `size` at a
time, and not at all once the active lock is gone)."""

from __future__ import annotations

import psycopg
import pytest

from sync.core.errors import MirrorError
from sync.store.pg.bulk import LOST_LOCK
from sync.store.pg.lock import ActiveLock
from sync.store.pg.mirror import PgMirror
from tests.unit.store.pg.test_pagewrite import SCHEMA, T1, T2, _deal, _deals


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


def test_a_group_commits_its_pages_together(pg_db: str) -> None:
    mirror = PgMirror.open(pg_db, SCHEMA)
    try:
        mirror.write_staged([_deals(_deal(1, T1, "a"))])
        with psycopg.connect(pg_db, autocommit=True) as other:

            def seen() -> int:
                row = other.execute(f"SELECT count(*) FROM {SCHEMA}.deals").fetchone()
                return int(row[0]) if row else 0

            mirror.group.start(2)
            mirror.write_staged([_deals(_deal(2, T1, "b"))])
            assert seen() == 1
            mirror.write_staged([_deals(_deal(3, T1, "c"))])  # the second page: committed
            assert seen() == 3
            mirror.write_staged([_deals(_deal(4, T1, "d"))])
            mirror.group.end()
            assert seen() == 4
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
            admin.execute("SELECT pg_terminate_backend(%s)", [lock.backend_pid])
        mirror.write_staged([_deals(_deal(3, T1, "c"))])
        with pytest.raises(MirrorError) as caught:
            mirror.write_staged([_deals(_deal(4, T1, "d"))])  # the group's commit is refused
        assert str(caught.value) == LOST_LOCK
        assert [r[0] for r in mirror.conn.execute(f"SELECT id FROM {SCHEMA}.deals")] == [1]
    finally:
        mirror.close()
        lock.release()

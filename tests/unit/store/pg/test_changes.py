"""`sync.store.pg.changes`: the change feed in PostgreSQL, against a real server.

Pages are written with the PostgreSQL page write (`sync.store.pg.pagewrite.PageWriter`) into a
fresh database (`pg_db`), and the feed they leave is compared with what SQLite's feed says for
the same writes: most tests run once per store (`side`), with one expectation for both, so
"the same entries as SQLite" is checked, not assumed. PostgreSQL alone: one `NOTIFY` per
committed batch and none for a page the guard refused, appenders queued in commit order, and
the feed's triggers dropped and made again.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sync.pipeline.batches import Staged
from sync.store import Mirror, memberships
from sync.store import changes as lite
from sync.store.pg import changes
from sync.store.pg.changes import ChangeFeed
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_units import staged, write

SCHEMA = "ccsync"
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"
OLD = "2020-01-01T00:00:00.000Z"


class SQLiteSide:
    """The SQLite mirror, written by its own page write (`tests.support.store_units.write`)."""

    def __init__(self, path: Path) -> None:
        self.mirror = Mirror.open(path)
        self.conn: sqlite3.Connection = self.mirror.conn
        self.feed: Any = self.mirror.changes

    def page(self, *batches: Staged) -> None:
        write(self.conn, self.mirror.schema, list(batches))

    def sql(self, statement: str) -> None:
        self.conn.execute(statement)

    def ops(self) -> list[tuple[Any, ...]]:
        query = "SELECT type, id, op, updated_at FROM _sync_changes ORDER BY seq"
        return [tuple(r) for r in self.conn.execute(query)]

    def note_backfill(self, types: list[str]) -> None:
        lite.note_backfill(self.conn, types)

    def link_notes(self) -> Any:
        return lite.LinkNotes(self.conn)

    def close(self) -> None:
        self.mirror.close()


class PostgresSide:
    """The PostgreSQL mirror as far as it goes: the feed (`ensure`), each page's tables made by
    `PageWriter.ensure` and given their triggers, the rows upserted in one transaction, and the
    listing mall's memberships (SQLite's page write adds them; the PostgreSQL store does not
    yet, so this side does, in the same way). `search_path` is the schema, so one statement
    reads the same on both sides."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        changes.ensure(self.conn, SCHEMA)
        self.conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(SCHEMA)))
        self.writer = PageWriter(self.conn, SCHEMA)
        self.feed: Any = ChangeFeed(self.conn, SCHEMA)

    def page(self, *batches: Staged) -> None:
        for b in batches:
            self.writer.ensure(b)
            if b.type in memberships.MEMBER_TYPES:
                mall, row = memberships.columns(b.type)
                self.conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} ({} bigint, {} bigint, position bigint,"
                        " PRIMARY KEY ({}, {}))"
                    ).format(
                        sql.Identifier(SCHEMA, memberships.table(b.type)),
                        *(sql.Identifier(c) for c in (mall, row, mall, row)),
                    )
                )
            changes.create_triggers(self.conn, SCHEMA, b.type, set(self.writer.columns(b.type)))
        with self.conn.transaction():
            for b in batches:
                self.writer.upsert(b)
            main = batches[0]
            if main.type in memberships.MEMBER_TYPES and "mall_id" in main.columns:
                at = main.columns.index("mall_id") + 1
                mall, row = memberships.columns(main.type)
                with self.conn.cursor() as cur:
                    cur.executemany(
                        sql.SQL(
                            "INSERT INTO {} ({}, {}, position) VALUES (%s, %s, 0)"
                            " ON CONFLICT DO NOTHING"
                        ).format(
                            sql.Identifier(SCHEMA, memberships.table(main.type)),
                            sql.Identifier(mall),
                            sql.Identifier(row),
                        ),
                        [(r[at], r[0]) for r in main.rows],
                    )

    def sql(self, statement: str) -> None:
        self.conn.execute(statement.replace("INSERT OR IGNORE", "INSERT"))

    def ops(self) -> list[tuple[Any, ...]]:
        query = "SELECT type, id, op, updated_at FROM _sync_changes ORDER BY seq"
        return [tuple(r) for r in self.conn.execute(query)]

    def note_backfill(self, types: list[str]) -> None:
        changes.note_backfill(self.conn, SCHEMA, types)

    def link_notes(self) -> Any:
        return changes.LinkNotes(self.conn, SCHEMA)

    def close(self) -> None:
        self.conn.close()


Side = SQLiteSide | PostgresSide


@pytest.fixture(params=["sqlite", "postgres"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    """The same writes on either store (the PostgreSQL server starts only when asked for)."""
    s: Side = (
        SQLiteSide(tmp_path / "m.db")
        if request.param == "sqlite"
        else PostgresSide(request.getfixturevalue("pg_db"))
    )
    yield s
    s.close()


@pytest.fixture
def pg(pg_db: str) -> Iterator[PostgresSide]:
    s = PostgresSide(pg_db)
    yield s
    s.close()


def _deals(*rows: tuple[int, str, str]) -> Staged:
    """A page of deals: (id, updated_at, title) each."""
    resources = [
        {"id": str(rid), "type": "deals", "attributes": {"title": title, "updated_at": at}}
        for rid, at, title in rows
    ]
    return staged("deals", resources)[0]


def _job(rid: int, at: str, title: str, store: int) -> Staged:
    store_link = {"data": {"type": "stores", "id": str(store)}}
    resource = {
        "id": str(rid),
        "type": "job_listings",
        "attributes": {"title": title, "updated_at": at},
        "relationships": {"store": store_link},
    }
    return staged("job_listings", [resource])[0]


def _store(rid: int, mall: int) -> Staged:
    resource = {"id": str(rid), "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
    return staged("stores", [resource], mall_id=mall)[0]


def _new(s: Side, before: int) -> list[tuple[Any, ...]]:
    """The entries after the first `before`."""
    return s.ops()[before:]


def test_each_page_write_gets_its_entry_and_a_refused_or_unchanged_one_none(s: Side) -> None:
    s.page(_deals((1, T1, "a"), (2, T1, "b")))
    assert s.ops() == [("deals", 1, "upsert", T1), ("deals", 2, "upsert", T1)]
    s.page(_deals((1, T1, "a"), (2, T1, "b")))  # the same copies
    s.page(_deals((1, T0, "older")))  # refused by the guard
    assert len(s.ops()) == 2
    s.page(_deals((1, T1, "a2")))  # an equal stamp, other content
    s.page(_deals((1, T2, "a3"), (3, T0, "c")))  # an update and an insert, in id order
    s.sql("DELETE FROM deals WHERE id = 2")
    assert _new(s, 2) == [
        ("deals", 1, "repair", T1),
        ("deals", 1, "upsert", T2),
        ("deals", 3, "upsert", T0),
        ("deals", 2, "delete", T1),
    ]


@pytest.fixture
def s(side: Side) -> Side:
    return side


def test_a_to_one_link_alone_is_one_links_entry(s: Side) -> None:
    s.page(_job(1, T0, "a", store=5))
    s.page(_job(1, T0, "a", store=6))  # linkage only, under the same stamp
    s.sql("UPDATE job_listings SET store_id = 7 WHERE id = 1")  # noted already: the newest
    s.page(_job(1, T0, "b", store=7))
    assert s.ops() == [
        ("job_listings", 1, "upsert", T0),
        ("job_listings", 1, "links", T0),
        ("job_listings", 1, "repair", T0),
    ]


def test_a_table_without_stamps_logs_updates_that_differ(s: Side) -> None:
    def tag(name: str) -> Staged:
        return staged("tags", [{"id": "1", "type": "tags", "attributes": {"name": name}}])[0]

    s.page(tag("x"))
    s.page(tag("x"))
    s.page(tag("y"))
    assert s.ops() == [("tags", 1, "upsert", None), ("tags", 1, "upsert", None)]


def test_a_column_added_later_is_watched_by_the_remade_trigger(s: Side) -> None:
    s.page(_deals((1, T0, "a")))
    motto = {"title": "a", "updated_at": T0, "motto": "new"}  # not in the spec: a new column
    s.page(staged("deals", [{"id": "1", "type": "deals", "attributes": motto}])[0])
    assert [r[2] for r in s.ops()] == ["upsert", "repair"]


def test_memberships_log_a_mall_joined_or_left_and_the_newest_entry_is_not_repeated(
    s: Side,
) -> None:
    s.page(_store(1, mall=7))
    s.page(_store(2, mall=7))
    s.sql("INSERT OR IGNORE INTO malls_stores (malls_id, stores_id, position) VALUES (8, 1, 0)")
    s.sql("DELETE FROM malls_stores WHERE malls_id = 8")  # noted already: the newest entry
    s.sql("DELETE FROM malls_stores WHERE malls_id = 7 AND stores_id = 2")  # the row stays
    s.page(_store(1, mall=5))  # a lower mall: `mall_id` moves, then the pair (noted already)
    s.sql("INSERT OR IGNORE INTO malls_stores (malls_id, stores_id, position) VALUES (9, 2, 0)")
    s.sql("DELETE FROM malls_stores WHERE malls_id = 7 AND stores_id = 1")  # noted already
    assert s.ops() == [
        ("stores", 1, "upsert", T0),
        ("stores", 2, "upsert", T0),
        ("stores", 1, "links", None),
        ("stores", 2, "links", None),
        ("stores", 1, "links", T0),
    ]


def test_a_statement_giving_rows_several_malls_notes_each_row_once(s: Side) -> None:
    """Where the stores differ, on purpose: PostgreSQL's membership triggers run once per
    statement and note each row it changed once, unless the newest entry before it says so
    already; SQLite's run pair by pair and note a row again whenever another row's entry came
    between (more entries, none of them news)."""
    s.page(_store(1, mall=7))
    s.page(_store(2, mall=7))
    s.sql(
        "INSERT INTO malls_stores (malls_id, stores_id, position) VALUES"
        " (20, 1, 0), (20, 2, 0), (21, 1, 0), (21, 2, 0)"
    )
    s.sql("DELETE FROM malls_stores WHERE malls_id IN (20, 21)")
    one, two = ("stores", 1, "links", None), ("stores", 2, "links", None)
    assert _new(s, 2) == ([one, two, one] if isinstance(s, PostgresSide) else [one, two] * 4)


def test_reads_filter_by_type_and_bounds_and_backfill_notes_one_entry_a_type(s: Side) -> None:
    s.note_backfill(["deals", "stores", "deals"])
    found = s.feed.since(0, 10)
    seqs = [c.seq for c in found]
    assert [(c.type, c.id, c.op, c.updated_at) for c in found] == [
        ("deals", None, "backfill", None),
        ("stores", None, "backfill", None),
        ("deals", None, "backfill", None),
    ]
    assert seqs == sorted(seqs) and s.feed.last() == seqs[-1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", found[0].at)
    assert abs(time.time() - _epoch(found[0].at)) < 60  # the clock in SQLite's format, UTC
    picked = s.feed.since(seqs[0], 10, types=["deals"])
    assert [(c.seq, c.type, c.op) for c in picked] == [(seqs[2], "deals", "backfill")]
    assert [c.seq for c in s.feed.since(0, 10, upto=seqs[1])] == seqs[:2]
    assert [c.seq for c in s.feed.since(0, 1)] == seqs[:1]


def _epoch(stamp: str) -> float:
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone


def test_pruning_drops_old_entries_remembers_the_last_and_numbers_go_on(s: Side) -> None:
    s.note_backfill(["deals", "stores", "malls"])
    s.sql(f"UPDATE _sync_changes SET at = '{OLD}' WHERE type != 'malls'")
    first, second, third = (c.seq for c in s.feed.since(0, 10))
    assert s.feed.pruned_through() == 0
    assert s.feed.prune(1) == 2
    assert s.feed.pruned_through() == second
    assert [c.seq for c in s.feed.since(0, 10)] == [third]
    assert s.feed.prune(1) == 0
    s.sql("DELETE FROM _sync_changes")
    assert s.feed.last() == second  # an empty feed: the last one pruned
    s.note_backfill(["deals"])
    assert s.feed.last() == third + 1  # never a number again


def test_new_versions_are_upserts_and_repairs_never_links(s: Side) -> None:
    s.page(_deals((1, T0, "a"), (2, T0, "b")))
    mark = s.feed.last()
    s.page(_deals((2, T0, "b2")))
    s.page(_job(9, T0, "j", store=1))
    s.page(_job(9, T0, "j", store=2))
    top = s.feed.last()
    assert s.feed.new_versions("deals", 0, top) == [1, 2]
    assert s.feed.new_versions("deals", mark, top) == [2]
    assert s.feed.new_versions("job_listings", top - 1, top) == []


def test_link_notes_leave_out_rows_entered_and_rows_absent(s: Side) -> None:
    s.page(_deals((1, T0, "a"), (2, T0, "b")))
    notes = s.link_notes()
    s.page(_deals((1, T1, "a")))
    notes.note("deals", [2, 1, 99, 2])
    assert _new(s, 2) == [("deals", 1, "upsert", T1), ("deals", 2, "links", None)]


def test_a_database_without_the_feed_reads_as_an_empty_one(pg_db: str) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        feed = ChangeFeed(conn, SCHEMA)
        assert feed.since(0) == [] and feed.new_versions("deals", 0, 9) == []
        assert feed.last() == 0 and feed.pruned_through() == 0


def _notes(listener: psycopg.Connection[Any], first: float) -> list[tuple[str, str]]:
    """The notifications `listener` is handed: the first within `first` seconds, then any
    other within half a second of it (several commits' notifications arrive together)."""
    got = list(listener.notifies(timeout=first, stop_after=1))
    if got:
        got += listener.notifies(timeout=0.5)
    return [(n.channel, n.payload) for n in got]


@pytest.fixture
def listener(pg: PostgresSide, pg_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        changes.listen(conn, SCHEMA)
        yield conn


def test_a_committed_page_of_a_hundred_rows_wakes_listeners_once(
    pg: PostgresSide, listener: psycopg.Connection[Any]
) -> None:
    page = _deals(*((rid, T0, f"d{rid}") for rid in range(1, 101)))
    pg.writer.ensure(page)
    changes.create_triggers(pg.conn, SCHEMA, "deals", set(pg.writer.columns("deals")))
    with pg.conn.transaction():
        assert pg.writer.upsert(page) == 100
        assert _notes(listener, 0.3) == []  # nothing before the commit
    assert _notes(listener, 2.0) == [("ccsync_changes", "")]
    assert len(pg.ops()) == 100


def test_a_page_the_guard_refused_wakes_no_one(
    pg: PostgresSide, listener: psycopg.Connection[Any]
) -> None:
    """Notifications arrive in commit order: a refused page committed before a changing one
    would have been the first of two. A page of stores also writes its memberships again
    (none new: the statement trigger appends no entry, and that wakes no one either)."""
    pg.page(_deals((1, T1, "a"), (2, T1, "b")))
    pg.page(_store(1, mall=7))
    assert _notes(listener, 2.0) == [("ccsync_changes", "")] * 2
    pg.page(_deals((1, T1, "a"), (2, T0, "older")))  # unchanged, and older: all refused
    pg.page(_store(1, mall=7))
    pg.page(_deals((3, T1, "c")))
    assert _notes(listener, 2.0) == [("ccsync_changes", "")]


def test_batches_in_savepoints_wake_once_and_a_rollback_not_at_all(
    pg: PostgresSide, listener: psycopg.Connection[Any]
) -> None:
    pg.page(_deals((1, T0, "a")), _job(1, T0, "j", store=1))  # two tables, two savepoints
    assert _notes(listener, 2.0) == [("ccsync_changes", "")]
    with pytest.raises(ZeroDivisionError), pg.conn.transaction():
        pg.writer.upsert(_deals((2, T0, "b")))
        changes.note_backfill(pg.conn, SCHEMA, ["deals"])
        raise ZeroDivisionError
    pg.page(_deals((1, T1, "a")))
    assert _notes(listener, 2.0) == [("ccsync_changes", "")]
    assert [r[1:3] for r in pg.ops()] == [(1, "upsert"), (1, "upsert"), (1, "upsert")]


def test_appenders_queue_so_numbers_become_visible_in_order(pg: PostgresSide, pg_db: str) -> None:
    pg.page(_deals((1, T0, "a")))
    with psycopg.connect(pg_db, autocommit=True) as other:
        other.execute("SET lock_timeout = '200ms'")
        second = PageWriter(other, SCHEMA)
        with pg.conn.transaction():
            pg.writer.upsert(_deals((1, T1, "a")))
            with pytest.raises(psycopg.errors.LockNotAvailable):
                # another row, so the wait is for the feed: until the first commits
                second.upsert(_deals((2, T0, "b")))
            first = pg.feed.last()
        second.upsert(_deals((2, T0, "b")))
    assert [(c.id, c.seq > first) for c in pg.feed.since(first - 1)] == [(1, False), (2, True)]


def test_dropped_triggers_log_nothing_until_made_again(pg: PostgresSide) -> None:
    pg.page(_deals((1, T0, "a")))
    changes.drop_triggers(pg.conn, SCHEMA)
    pg.writer.upsert(_deals((2, T0, "b")))
    changes.note_backfill(pg.conn, SCHEMA, ["deals"])
    pg.page(_deals((3, T0, "c")))  # its tables' triggers made again, as the store would
    assert _new(pg, 1) == [("deals", None, "backfill", None), ("deals", 3, "upsert", T0)]
    names = pg.conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'ccsync._sync_changes'::regclass"
    ).fetchall()
    assert sorted(n for (n,) in names) == [changes.LOCK, changes.NOTIFY]


def test_making_the_triggers_again_leaves_an_unchanged_function_alone(pg: PostgresSide) -> None:
    pg.page(_deals((1, T0, "a")))
    query = "SELECT xmin::text FROM pg_proc WHERE proname = '_sync_changes_deals'"
    before = pg.conn.execute(query).fetchone()
    changes.create_triggers(pg.conn, SCHEMA, "deals", set(pg.writer.columns("deals")))
    changes.ensure(pg.conn, SCHEMA)
    assert pg.conn.execute(query).fetchone() == before


def test_the_channel_is_the_schema_s_and_fits_an_identifier() -> None:
    assert changes.channel("ccsync") == "ccsync_changes"
    with pytest.raises(ValueError, match="too long"):
        changes.channel("s" * 60)


def test_a_column_widened_under_the_triggers_is_still_compared(pg: PostgresSide) -> None:
    def deal(floors: object) -> Staged:
        attributes = {"title": "a", "updated_at": T0, "floors": floors}  # inferred: bigint
        return staged("deals", [{"id": "1", "type": "deals", "attributes": attributes}])[0]

    pg.page(deal(3))
    pg.page(deal(2.5))  # widened to double precision, the triggers in place
    pg.page(deal(2.5))
    assert pg.ops() == [("deals", 1, "upsert", T0), ("deals", 1, "repair", T0)]

"""`sync.store.pg.deletions`: deletions and tombstones in PostgreSQL, held to SQLite's contract.

The contract tests take `s` and run twice: `sqlite` is a `Mirror` opened on a file in the test's
directory, its `Deletions` and its own page write (`Mirror.write_staged`'s order); `postgres` a
fresh database (`pg_db`) with the change feed (`sync.store.pg.changes`), `ensure`, a `Deletions`
of this module, and each page written as the PostgreSQL store will write it: the tables and the
feed's triggers first, then in one transaction `drop_tombstoned` on every batch and
`PageWriter.write_page` (rows, links, memberships). Each test asserts the same values of both,
read with one statement written once for both (`Side.rows`).

As in `tests.support.store_sides`, the PostgreSQL schema has a name that must be quoted, the
code under test runs on a connection whose `search_path` does not reach it (`rows` reads on a
second one whose path does), and `public` holds tables named as the mirror's with other rows
(`DECOYS`): a statement that forgot to name its schema fails or reads the wrong rows. The tests
after the contract are PostgreSQL's own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from structlog.testing import capture_logs

from sync.model.stamps import now_iso, shift
from sync.pipeline.batches import Staged
from sync.store import Mirror
from sync.store.deletions import (
    CONTRADICTED_AFTER_SECONDS,
    STAMPLESS_TOMBSTONE_SECONDS,
    TIE_WINDOW_MAX_SECONDS,
    WINDOW_KEY,
    Deletions,
    SqliteTombstones,
)
from sync.store.pagewrite import PageWriter as LiteWriter
from sync.store.pg import changes
from sync.store.pg.deletions import PgTombstones, ensure
from sync.store.pg.pagewrite import PageWriter
from sync.store.transaction import write_transaction
from tests.support.store_units import staged

#: The schema in these tests: a name that must be quoted, out of the code's `search_path`.
SCHEMA = 'Deletions "side"'
#: Tables of `public` named as the mirror's, each with a row (1, 1) the mirror does not hold: a
#: statement that forgot its schema reads or deletes the wrong rows.
DECOYS = {
    "_sync_tombstones": "type bigint, id bigint",
    "_sync_meta": "key bigint, value bigint",
    "deals": "id bigint, updated_at bigint",
    "images": "id bigint, updated_at bigint",
    "deals_images": "deals_id bigint, images_id bigint",
    "stores_images": "stores_id bigint, images_id bigint",
    "malls_stores": "malls_id bigint, stores_id bigint",
    "current_hours": "mall_id bigint, body bigint",
}
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"
FEED = "SELECT type, id, op FROM _sync_changes WHERE seq > ? ORDER BY seq"


def _res(
    rid: int, type_: str, updated: str | None = T0, **rels: list[tuple[str, int]]
) -> dict[str, Any]:
    attrs: dict[str, Any] = {"name": f"n{rid}", "title": f"t{rid}"}
    if updated is not None:
        attrs["updated_at"] = updated
    out: dict[str, Any] = {"id": str(rid), "type": type_, "attributes": attrs}
    if rels:
        out["relationships"] = {
            name: {"data": [{"type": t, "id": str(i)} for t, i in targets]}
            for name, targets in rels.items()
        }
    return out


class SQLiteSide:
    """The SQLite mirror: its `Deletions` and its page write (`Mirror.write_staged`'s order)."""

    def __init__(self, path: Path) -> None:
        self.mirror = Mirror.open(path)
        self.conn: sqlite3.Connection = self.mirror.conn
        self.deletions: Deletions = self.restart()

    def restart(self) -> Deletions:
        """A `Deletions` as a new process makes it."""
        return Deletions(SqliteTombstones(self.conn, self.mirror.schema))

    def page(self, *batches: Staged) -> list[Staged]:
        writer = LiteWriter(self.conn, self.mirror.schema)
        writer.ensure_schema(batches)
        with write_transaction(self.conn):
            for b in batches:
                self.deletions.drop_tombstoned(b)
                writer.write(b)
            writer.write_memberships(batches[0])
        return list(batches)

    def rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(statement, params).fetchall()]

    def close(self) -> None:
        self.mirror.close()


class PostgresSide:
    """The PostgreSQL mirror as far as it goes (see the module's docstring)."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.bare = psycopg.connect(dsn, autocommit=True)
        for name, columns in DECOYS.items():
            table = sql.Identifier("public", name)
            self.conn.execute(sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(columns)))
            self.conn.execute(sql.SQL("INSERT INTO {} VALUES (1, 1)").format(table))
        changes.ensure(self.conn, SCHEMA)
        ensure(self.conn, SCHEMA)
        self.bare.execute("SELECT set_config('search_path', quote_ident(%s), false)", (SCHEMA,))
        self.bare.execute(
            "CREATE TABLE current_hours (mall_id bigint PRIMARY KEY, body text, fetched_at text)"
        )
        self.writer = PageWriter(self.conn, SCHEMA)
        self.deletions: Deletions = self.restart()

    def restart(self) -> Deletions:
        return Deletions(PgTombstones(self.conn, SCHEMA))

    def page(self, *batches: Staged) -> list[Staged]:
        """As the PostgreSQL store will write a page: its tables and the feed's triggers first,
        then in one transaction each batch less what a tombstone refuses, and the page."""
        self.writer.ensure_page(batches)
        for b in batches:
            if b.ids:
                changes.create_triggers(self.conn, SCHEMA, b.type, set(self.writer.columns(b.type)))
        with self.conn.transaction():
            for b in batches:
                self.deletions.drop_tombstoned(b)
            self.writer.write_page(batches)
        return list(batches)

    def rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = self.bare.execute(statement.replace("?", "%s"), params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def close(self) -> None:
        self.bare.close()
        self.conn.close()


Side = SQLiteSide | PostgresSide


@pytest.fixture(params=["sqlite", "postgres"])
def s(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    """Either mirror, empty (the PostgreSQL server starts only for the `postgres` runs)."""
    s: Side = (
        SQLiteSide(tmp_path / "m.db")
        if request.param == "sqlite"
        else PostgresSide(request.getfixturevalue("pg_db"))
    )
    try:
        yield s
    finally:
        s.close()


def _mark(s: Side) -> int:
    return int(s.rows("SELECT coalesce(max(seq), 0) FROM _sync_changes")[0][0])


# -- the contract: both stores ----------------------------------------------------------------


def test_a_feed_entry_deletes_an_older_row_and_tombstones_it_at_its_moment(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals"), _res(2, "deals")]))
    applied = s.deletions.apply_feed("deals", {1: T1})
    assert (applied.removed, applied.kept, applied.tied, applied.unstamped) == (1, [], [], 0)
    assert s.rows("SELECT id FROM deals ORDER BY id") == [(2,)]
    assert s.rows("SELECT type, id, deleted_at, source FROM _sync_tombstones") == [
        ("deals", 1, T1, "feed")
    ]
    assert s.deletions.held("deals", [1, 2, 3]) == {1: T1}
    assert s.restart().held("deals", [1]) == {1: T1}  # kept in the mirror, not the process


def test_a_row_newer_than_the_window_stays_as_created_again(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals", shift(T1, 2)), _res(2, "deals", T2)]))
    applied = s.deletions.apply_feed("deals", {1: T1, 2: T1})
    assert (applied.removed, applied.kept, applied.tied) == (0, [1, 2], [])
    assert s.rows("SELECT id FROM deals ORDER BY id") == [(1,), (2,)]
    # the entry's tombstone is written all the same: a copy from before it stays out
    assert s.deletions.held("deals", [1, 2]) == {1: T1, 2: T1}


def test_within_the_window_either_side_it_is_a_tie_left_for_filter_id(s: Side) -> None:
    page = [_res(1, "deals", shift(T1, -1)), _res(2, "deals", T1), _res(3, "deals", shift(T1, 1))]
    s.page(*staged("deals", page))
    applied = s.deletions.apply_feed("deals", {1: T1, 2: T1, 3: T1})
    assert (applied.removed, applied.kept, applied.tied) == (0, [], [1, 2, 3])
    assert s.rows("SELECT count(*) FROM deals") == [(3,)]  # untouched and
    assert s.deletions.held("deals", [1, 2, 3]) == {}  # untombstoned


def test_a_copy_within_the_window_of_a_tombstone_is_noted_with_its_malls(s: Side) -> None:
    s.page(*staged("stores", [_res(3, "stores", T0), _res(4, "stores", T0)], mall_id=9))
    s.deletions.apply_feed("stores", {3: T1, 4: T1})
    (b,) = s.page(*staged("stores", [_res(3, "stores", T1), _res(4, "stores", T0)], mall_id=7))
    assert (b.dropped, b.ids) == (2, [])
    assert s.rows("SELECT count(*) FROM stores") == [(0,)]
    assert s.deletions.take_ties("stores") == {3: {7}}  # 4 is older: refused, not tied
    assert s.deletions.take_ties("stores") == {}
    s.deletions.note_ties("stores", {3: {7}, 5: {None}})  # put back after a failure
    s.deletions.note_ties("stores", {3: {9}})
    assert s.deletions.take_ties("stores") == {3: {7, 9}, 5: {None}}


def test_vouched_copies_are_written_and_lift_their_tombstone(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals"), _res(2, "deals")]))
    s.deletions.apply_feed("deals", {1: T1, 2: T1})
    with capture_logs() as logs, s.deletions.vouched("deals", [1]):
        (b,) = s.page(*staged("deals", [_res(1, "deals", T1), _res(2, "deals", T1)]))
    assert (b.dropped, b.ids) == (1, [1])
    assert s.rows("SELECT id, updated_at FROM deals") == [(1, T1)]
    assert s.deletions.held("deals", [1, 2]) == {2: T1}
    assert [(e["event"], e["ids"]) for e in logs if e["event"] == "tombstone.lifted"] == [
        ("tombstone.lifted", [1])
    ]
    (b,) = s.page(*staged("deals", [_res(2, "deals", T1)]))  # the block ended: refused again
    assert b.dropped == 1


def test_tombstones_refuse_older_copies_and_not_newer_ones(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals", T0)]))
    s.deletions.apply_feed("deals", {1: T1})
    (older,) = s.page(*staged("deals", [_res(1, "deals", T0)]))
    assert older.dropped == 1 and s.rows("SELECT id FROM deals") == []
    assert s.deletions.take_ties("deals") == {}
    (newer,) = s.page(*staged("deals", [_res(1, "deals", T2)]))
    assert newer.dropped == 0
    assert s.rows("SELECT id, updated_at FROM deals") == [(1, T2)]
    assert s.deletions.held("deals", [1]) == {}  # lifted by the newer copy
    s.deletions.apply_feed("deals", {1: T1})  # the old entry read again: the row is newer
    assert s.rows("SELECT id FROM deals") == [(1,)]


def test_a_tombstone_keeps_the_latest_moment_whatever_order_entries_come_in(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals")]))
    s.deletions.apply_feed("deals", {1: T2})
    s.deletions.apply_feed("deals", {1: T1})  # an older entry read again by the feed's overlap
    assert s.deletions.held("deals", [1, 2]) == {1: T2}
    (again,) = s.page(*staged("deals", [_res(1, "deals", T1)]))
    assert again.dropped == 1 and s.rows("SELECT id FROM deals") == []


def test_an_entry_without_a_moment_spares_stamped_rows_and_takes_stampless_ones(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals"), _res(2, "deals")]))
    s.page(*staged("tags", [_res(7, "tags", None)]))
    deals = s.deletions.apply_feed("deals", {1: None, 2: T1})
    assert (deals.removed, deals.kept, deals.unstamped) == (1, [], 1)
    tags = s.deletions.apply_feed("tags", {7: None})
    assert (tags.removed, tags.kept, tags.unstamped) == (1, [], 1)
    assert s.rows("SELECT id FROM deals") == [(1,)]
    assert s.rows("SELECT type, id, source FROM _sync_tombstones ORDER BY type") == [
        ("deals", 2, "feed"),
        ("tags", 7, "feed"),
    ]


def test_a_stampless_tombstone_refuses_copies_for_its_time_then_yields(s: Side) -> None:
    s.page(*staged("tags", [_res(7, "tags", None)]))
    s.deletions.apply_feed("tags", {7: T1})
    (b,) = s.page(*staged("tags", [_res(7, "tags", None)]))  # dated long ago: yields
    assert b.dropped == 0 and s.rows("SELECT id FROM tags") == [(7,)]
    s.deletions.apply_feed("tags", {7: None})  # now
    (b,) = s.page(*staged("tags", [_res(7, "tags", None)]))
    assert b.dropped == 1 and s.rows("SELECT id FROM tags") == []
    long_ago = shift(now_iso(), -STAMPLESS_TOMBSTONE_SECONDS - 5)
    s.rows("UPDATE _sync_tombstones SET deleted_at = ?", long_ago)
    (b,) = s.page(*staged("tags", [_res(7, "tags", None)]))
    assert b.dropped == 0 and s.rows("SELECT id FROM tags") == [(7,)]


def test_a_tombstone_contradicted_an_hour_later_is_doubted(s: Side) -> None:
    now = [1000.0]
    s.deletions.clock = lambda: now[0]
    s.page(*staged("deals", [_res(1, "deals", T0)]))
    s.deletions.apply_feed("deals", {1: T1})
    s.page(*staged("deals", [_res(1, "deals", T0)]))  # refused, remembered
    now[0] += CONTRADICTED_AFTER_SECONDS - 1
    s.page(*staged("deals", [_res(1, "deals", T0)]))
    assert s.deletions.take_ties("deals") == {}
    now[0] += 1
    (b,) = s.page(*staged("deals", [_res(1, "deals", T0)]))
    assert b.dropped == 1 and s.deletions.take_ties("deals") == {1: {None}}


def test_widen_persists_the_window_and_a_restart_reads_it_back(s: Side) -> None:
    d = s.deletions
    assert d.window == 1.0
    assert d.widen(0.5) is False  # 0.75 s: inside the least window
    with capture_logs() as logs:
        assert d.widen(4.0) is True
    assert [(e["event"], e["seconds"]) for e in logs] == [("tombstone.window_widened", 6.0)]
    assert d.widen(3.0) is False and d.window == 6.0
    assert s.rows("SELECT value FROM _sync_meta WHERE key = ?", WINDOW_KEY) == [("6.0",)]
    assert s.restart().window == 6.0
    assert d.widen(1000) is True and d.window == TIE_WINDOW_MAX_SECONDS
    assert s.restart().window == TIE_WINDOW_MAX_SECONDS
    for kept, read in (("0.2", 1.0), ("1e9", TIE_WINDOW_MAX_SECONDS), ("x", 1.0), ("2.5", 2.5)):
        s.rows("UPDATE _sync_meta SET value = ? WHERE key = ?", kept, WINDOW_KEY)
        assert s.restart().window == read, kept


def test_the_window_learned_moves_the_line_between_created_again_and_a_tie(s: Side) -> None:
    s.page(*staged("deals", [_res(1, "deals", shift(T1, 5)), _res(2, "deals", shift(T1, 5))]))
    assert s.deletions.apply_feed("deals", {1: T1}).kept == [1]
    s.deletions.widen(4.0)  # 6 s
    assert s.deletions.apply_feed("deals", {2: T1}).tied == [2]
    (b,) = s.page(*staged("deals", [_res(1, "deals", shift(T1, -5))]))
    assert b.dropped == 1 and s.deletions.take_ties("deals") == {1: {None}}


def test_an_inferred_deletion_takes_the_links_both_ways_and_notes_their_owners(s: Side) -> None:
    deal = _res(1, "deals", images=[("images", 5), ("images", 6)])
    s.page(*staged("deals", [deal], [_res(5, "images"), _res(6, "images")]))
    s.page(*staged("stores", [_res(3, "stores", images=[("images", 5)])], mall_id=9))
    mark = _mark(s)
    assert s.deletions.delete("images", [5]) == 1
    assert s.rows("SELECT deals_id, images_id FROM deals_images") == [(1, 6)]
    assert s.rows("SELECT * FROM stores_images") == []
    assert s.rows(FEED, mark) == [
        ("images", 5, "delete"),
        ("deals", 1, "links"),
        ("stores", 3, "links"),
    ]
    assert s.deletions.delete("stores", [3]) == 1
    assert s.rows("SELECT * FROM malls_stores") == []
    assert s.deletions.held("stores", [3]) == {}  # an inference leaves no tombstone
    assert s.deletions.delete("stores", []) == 0 and s.deletions.delete("stores", [3]) == 0
    s.page(*staged("stores", [_res(3, "stores", T0)], mall_id=9))
    assert s.rows("SELECT id, mall_id FROM stores") == [(3, 9)]


def test_a_feed_entry_takes_the_rows_links_and_memberships_too(s: Side) -> None:
    store = _res(3, "stores", images=[("images", 5)])
    s.page(*staged("stores", [store, _res(4, "stores")], [_res(5, "images")], mall_id=9))
    assert s.deletions.apply_feed("stores", {3: T1}).removed == 1
    assert s.rows("SELECT * FROM stores_images") == []
    assert s.rows("SELECT malls_id, stores_id FROM malls_stores") == [(9, 4)]
    assert s.rows("SELECT id FROM images") == [(5,)]  # the image is its own row


def test_a_deleted_mall_takes_its_memberships_and_hours(s: Side) -> None:
    s.page(*staged("malls", [_res(9, "malls")]))
    s.page(*staged("stores", [_res(3, "stores"), _res(4, "stores")], mall_id=9))
    s.page(*staged("stores", [_res(4, "stores")], mall_id=12))
    s.rows("INSERT INTO current_hours (mall_id, body, fetched_at) VALUES (9, '{}', ?)", T0)
    s.rows("INSERT INTO current_hours (mall_id, body, fetched_at) VALUES (12, '{}', ?)", T0)
    mark = _mark(s)
    assert s.deletions.delete("malls", [9]) == 1
    assert s.rows("SELECT malls_id, stores_id FROM malls_stores") == [(12, 4)]
    # 3 is left for `orphans`; 4 keeps the mall that still lists it
    assert s.rows("SELECT id, mall_id FROM stores ORDER BY id") == [(3, None), (4, 12)]
    assert s.rows("SELECT mall_id FROM current_hours") == [(12,)]
    # each member lost a mall (the membership triggers), then its `mall_id` moved (the row's)
    links = [("stores", 3, "links"), ("stores", 4, "links")]
    assert s.rows(FEED, mark) == [("malls", 9, "delete"), *links, *links]


def test_a_thousand_deletions_go_in_chunks_with_the_same_feed(s: Side) -> None:
    n = 1200
    deal = _res(1, "deals", images=[("images", i) for i in range(1, n + 1)])
    s.page(*staged("deals", [deal], [_res(i, "images") for i in range(1, n + 1)]))
    mark = _mark(s)
    applied = s.deletions.apply_feed("images", dict.fromkeys(range(1, n + 1), T1))
    assert applied.removed == n and s.rows("SELECT count(*) FROM deals_images") == [(0,)]
    assert s.rows("SELECT count(*) FROM _sync_tombstones") == [(n,)]
    feed = s.rows(FEED, mark)
    links = [i for i, (t, _, op) in enumerate(feed) if op == "links"]
    assert links == [500, 1001, 1202]  # one `links` entry of the deal after each chunk
    assert [r for r in feed if r[2] == "delete"] == [
        ("images", i, "delete") for i in range(1, 1201)
    ]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_table_has_sqlites_columns_and_ensure_is_idempotent(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    ensure(conn, SCHEMA)
    ensure(conn, SCHEMA)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        lite = [r[1] for r in mirror.conn.execute("PRAGMA table_info(_sync_tombstones)")]
    finally:
        mirror.close()
    pg = conn.execute(
        "SELECT column_name, data_type, collation_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = '_sync_tombstones' ORDER BY ordinal_position",
        (SCHEMA,),
    ).fetchall()
    assert [c for c, _, _ in pg] == lite
    assert pg == [
        ("type", "text", "C"),
        ("id", "bigint", None),
        ("deleted_at", "text", "C"),
        ("source", "text", None),
    ]
    key = conn.execute(
        "SELECT array_agg(a.attname ORDER BY k.n) FROM pg_index i"
        " CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(att, n)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att"
        " WHERE i.indisprimary AND i.indrelid = (SELECT c.oid FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = '_sync_tombstones')",
        (SCHEMA,),
    ).fetchone()
    assert key == (["type", "id"],)


def test_a_schema_without_the_meta_table_keeps_the_least_window(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.transaction():  # no failed statement aborts the caller's transaction
        assert Deletions(PgTombstones(conn, "nowhere")).window == 1.0
        ensure(conn, "nowhere")
        assert Deletions(PgTombstones(conn, "nowhere")).held("deals", [1]) == {}


def test_a_page_rolled_back_keeps_the_tombstone_its_copy_lifted(pg_db: str) -> None:
    """`drop_tombstoned` writes in the page's transaction: a page that fails takes the lift
    back with it, and an `apply_feed` inside a caller's transaction is a savepoint of it."""
    s = PostgresSide(pg_db)
    try:
        s.page(*staged("deals", [_res(1, "deals", T0)]))
        s.deletions.apply_feed("deals", {1: T1})
        page = staged("deals", [_res(1, "deals", T2)])
        s.writer.ensure_page(page)
        with pytest.raises(RuntimeError), s.conn.transaction():
            s.deletions.drop_tombstoned(page[0])
            assert s.writer.write_page(page) == 1
            raise RuntimeError("the page failed")
        assert s.deletions.held("deals", [1]) == {1: T1}
        assert s.rows("SELECT count(*) FROM deals") == [(0,)]
        s.page(*staged("deals", [_res(2, "deals", T0)]))
        with s.conn.transaction(force_rollback=True):
            assert s.deletions.apply_feed("deals", {2: T1}).removed == 1
        assert s.rows("SELECT id FROM deals") == [(2,)]
        assert s.deletions.held("deals", [2]) == {}
    finally:
        s.close()


def test_a_bulk_load_notes_no_links_entries(pg_db: str) -> None:
    s = PostgresSide(pg_db)
    try:
        deal = _res(1, "deals", images=[("images", 5), ("images", 6)])
        s.page(*staged("deals", [deal], [_res(5, "images"), _res(6, "images")]))
        mark = _mark(s)
        assert isinstance(s.deletions.book, PgTombstones)
        s.deletions.book.bulk = True
        s.deletions.delete("images", [5])
        assert s.rows(FEED, mark) == [("images", 5, "delete")]
        assert s.rows("SELECT images_id FROM deals_images") == [(6,)]
    finally:
        s.close()


def test_missing_link_and_membership_tables_are_passed_over(
    conn: psycopg.Connection[Any],
) -> None:
    ensure(conn, SCHEMA)
    writer = PageWriter(conn, SCHEMA)
    for b in staged("stores", [_res(3, "stores")]) + staged("malls", [_res(9, "malls")]):
        writer.write(b)
    gone = Deletions(PgTombstones(conn, SCHEMA))
    assert gone.delete("stores", [3]) == 1  # no feed, no link or membership table
    assert gone.delete("malls", [9]) == 1
    assert gone.delete("deals", [1]) == 0  # no table at all
    assert gone.apply_feed("deals", {1: T1}).removed == 0
    assert gone.held("deals", [1]) == {1: T1}


def test_a_connection_with_another_row_factory_reads_the_same(pg_db: str) -> None:
    """This module's own statements read plain tuples whatever the connection's row factory
    (the page write and the link and membership functions it calls on a deletion expect the
    default one)."""
    with psycopg.connect(pg_db, autocommit=True) as plain:
        ensure(plain, SCHEMA)
        (b,) = staged("deals", [_res(1, "deals", T0), _res(2, "deals", T2)])
        PageWriter(plain, SCHEMA).write(b)
    with psycopg.connect(pg_db, autocommit=True, row_factory=dict_row) as c:
        gone = Deletions(PgTombstones(c, SCHEMA))
        gone.widen(2.0)
        assert Deletions(PgTombstones(c, SCHEMA)).window == 3.0
        applied = gone.apply_feed("deals", {1: T1, 2: T1})
        assert (applied.removed, applied.kept) == (1, [2])
        assert gone.held("deals", [1, 2]) == {1: T1, 2: T1}

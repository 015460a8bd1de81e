"""`sync.store.pg.listing`: the listing diff in PostgreSQL held to the SQLite mirror's contract.

The contract tests take `store` and run twice (`tests.support.twin_stores`): `sqlite` diffs with
`sync.store.listing.Listing`, `postgres` with this module's, over tables filled by the same
staged pages. Each asserts the same batches of both: missing, stale and absent ids in batches of
100 over hundreds of rows, stamps compared normalised, the settling horizon (`unsettled_since`),
a table without stamps, a table that does not exist, a mall's listing claiming its rows, and
writes made between batches. The tests after them are PostgreSQL's own: the temporary table
is the session's and outlives a commit, it goes on exit, and a failed transaction's error is
not hidden by it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.store.pg.listing import BATCH, Listing
from sync.store.pg.reads import TypeReads
from tests.support.twin_stores import SCHEMA, Store, postgres_store, sqlite_store

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The read parts of either mirror, empty (the PostgreSQL server is started only for the
    `postgres` runs)."""
    if request.param == "sqlite":
        yield from sqlite_store(tmp_path)
    else:
        yield from postgres_store(request.getfixturevalue("pg_db"))


def _page(
    store: Store, type_: str, ids: range | list[int], mall: int | None = None, at: str = T0
) -> None:
    attrs = {"name": "n"} if type_ == "tags" else {"name": "n", "updated_at": at}
    store.write(type_, [{"id": str(i), "type": type_, "attributes": attrs} for i in ids], mall)


def _flat(batches: Iterator[list[int]]) -> list[int]:
    return [i for batch in batches for i in batch]


# -- the contract: both implementations ------------------------------------------------------


def test_stamps_compare_normalised_and_batches_cover_every_id(store: Store) -> None:
    _page(store, "deals", range(1, 251))
    with store.listing("deals", None, "_unit_listing") as listing:
        assert store.temp_tables() == {"_unit_listing"}
        listing.add((i, "2026-01-01T00:00:00Z") for i in range(1, 301))  # the same moment
        listing.add([(5, "2026-01-02T01:00:00+01:00"), (6, "not a time")])
        batches = list(listing.missing_or_stale())
        assert [len(b) for b in batches] == [51]
        assert batches[0] == [5, *range(251, 301)]
        assert listing.counts() == (300, 250)
        assert list(listing.absent()) == []
    assert store.temp_tables() == set()


def test_missing_stale_and_absent_come_in_batches_of_a_hundred(store: Store) -> None:
    """400 rows held, 310 listed: 55 listed newer, 160 not held, 250 held but not listed."""
    assert BATCH == 100
    _page(store, "deals", range(1, 401))
    stale = set(range(300, 355))
    with store.listing("deals", None, "_unit_batches") as listing:
        for start in range(251, 561, 50):  # listing pages of 50
            page = range(start, min(start + 50, 561))
            listing.add((i, T1 if i in stale else T0) for i in page)
        assert listing.counts() == (310, 400)
        batches = list(listing.missing_or_stale())
        assert [len(b) for b in batches] == [100, 100, 15]
        assert _flat(iter(batches)) == sorted(stale) + list(range(401, 561))
        absent = list(listing.absent())
        assert [len(b) for b in absent] == [100, 100, 50]
        assert _flat(iter(absent)) == list(range(1, 251))


def test_an_equal_stamp_at_or_after_the_settling_horizon_is_listed_again(store: Store) -> None:
    """`unsettled_since`: rows held under the very stamp listed, that stamp not before it, are
    asked again (a second version may share the stamp); older equal stamps, newer held stamps
    and a table without stamps are not."""
    _page(store, "deals", [1, 2])  # held at T0
    _page(store, "deals", [4], at=T1)
    with store.listing("deals", None, "_unit_settle") as listing:
        listing.add([(1, T0), (2, T1), (3, T0), (4, T0), (5, None)])
        assert list(listing.missing_or_stale()) == [[2, 3, 5]]
        assert list(listing.missing_or_stale(T0)) == [[1, 2, 3, 5]]
        assert list(listing.missing_or_stale("2025-12-31T23:59:59.999Z")) == [[1, 2, 3, 5]]
        assert list(listing.missing_or_stale(T1)) == [[2, 3, 5]]
    _page(store, "tags", [1])
    with store.listing("tags", None, "_unit_settle_tags") as listing:
        listing.add([(1, None)])
        assert list(listing.missing_or_stale(T0)) == []


def test_a_held_row_without_a_stamp_is_stale_to_a_listed_stamp(store: Store) -> None:
    store.write("deals", [{"id": "1", "type": "deals", "attributes": {"title": "x"}}])
    _page(store, "deals", [2])
    with store.listing("deals", None, "_unit_unstamped") as listing:
        listing.add([(1, T0), (2, None)])
        assert list(listing.missing_or_stale()) == [[1]]


def test_an_id_listed_twice_keeps_its_later_stamp(store: Store) -> None:
    _page(store, "deals", [1, 2])
    with store.listing("deals", None, "_unit_twice") as listing:
        listing.add([(1, T0)])
        listing.add([(1, T1)])
        listing.add([(2, T1), (2, T0)])
        listing.add([])
        assert listing.counts() == (2, 2)
        assert list(listing.missing_or_stale()) == [[1]]


def test_a_table_without_stamps_is_diffed_by_ids_alone(store: Store) -> None:
    _page(store, "tags", [1, 2, 3])
    with store.listing("tags", None, "_unit_tags") as listing:
        listing.add([(2, T1), (4, T1)])
        assert list(listing.missing_or_stale()) == [[4]]
        assert list(listing.absent()) == [[1, 3]]


def test_a_listing_of_a_table_not_made_yet(store: Store) -> None:
    """Every listed id is missing, nothing is absent, no row is claimed; nothing raises."""
    for mall in (None, 4):
        with store.listing("stores", mall, "_unit_nothing") as listing:
            listing.add((i, T0) for i in range(150, 0, -1))
            assert listing.counts() == (150, 0)
            assert [len(b) for b in listing.missing_or_stale()] == [100, 50]
            assert _flat(listing.missing_or_stale(T0)) == list(range(1, 151))
            assert list(listing.absent()) == [] and listing.claim_mall() == 0
    assert store.temp_tables() == set() and not store.table("stores").exists


def test_a_mall_s_listing_claims_its_rows_and_lowers_their_mall_id(store: Store) -> None:
    _page(store, "stores", [1, 2], mall=8)
    _page(store, "stores", [3], mall=9)
    with store.listing("stores", 5, "_unit_mall") as listing:
        listing.add([(1, T0), (3, T0), (4, T0)])
        assert listing.counts() == (3, 0)  # nothing in mall 5 yet
        assert list(listing.absent()) == []
        assert listing.claim_mall() == 2
        assert listing.claim_mall() == 0
        assert listing.counts() == (3, 2)
        assert list(listing.missing_or_stale()) == [[4]]
        assert list(listing.absent()) == []
    assert store.raw("SELECT id, mall_id FROM stores ORDER BY id") == [(1, 5), (2, 8), (3, 5)]
    assert store.raw("SELECT malls_id, stores_id, position FROM malls_stores ORDER BY 2, 1") == [
        (5, 1, 0),
        (8, 1, 0),
        (8, 2, 0),
        (5, 3, 0),
        (9, 3, 0),
    ]
    with store.listing("stores", 9, "_unit_higher") as listing:
        listing.add([(1, T0), (3, T0)])
        assert listing.claim_mall() == 1  # a higher mall claims; mall_id stays the lowest
        assert list(listing.absent()) == []
    assert store.raw("SELECT id, mall_id FROM stores ORDER BY id") == [(1, 5), (2, 8), (3, 5)]
    assert store.table("stores").malls_of(1) == [5, 8, 9]


def test_a_mall_s_listing_diffs_against_its_members_only(store: Store) -> None:
    _page(store, "stores", range(1, 261), mall=4)
    _page(store, "stores", range(261, 300), mall=6)
    stores = store.table("stores")
    with stores.listing(4) as listing:
        listing.add((i, T0) for i in range(100, 300))
        assert listing.counts() == (200, 260)
        assert [len(b) for b in listing.absent()] == [99]  # 1..99: mall 6's rows are not its
        assert list(listing.missing_or_stale()) == []  # 261..299 are held (by another mall)
    with stores.listing(4) as listing:
        listing.add([(1, T0)])
        assert [len(b) for b in listing.absent()] == [100, 100, 59]
    assert store.temp_tables() == set()


def test_the_caller_writes_between_batches(store: Store) -> None:
    """Each batch is read whole before it is handed out: the caller fetches and writes its
    rows on the same connection, and the diff goes on from the last id it gave."""
    _page(store, "deals", range(1, 101))
    deals = store.table("deals")
    with deals.listing() as listing:
        listing.add((i, T1 if i % 2 else T0) for i in range(1, 321))
        seen = []
        for batch in listing.missing_or_stale():
            seen.append(len(batch))
            _page(store, "deals", batch, at=T1)
            _page(store, "deals", [10_000 + len(seen)])  # rows past the listing: absent
        assert seen == [100, 100, 70]
        assert list(listing.missing_or_stale()) == []
        assert list(listing.absent()) == [[10_001, 10_002, 10_003]]
    assert deals.count() == 323 and deals.stamps([1, 2, 320]) == {1: T1, 2: T0, 320: T1}


def test_two_listings_of_one_type_are_two_tables(store: Store) -> None:
    _page(store, "deals", [1, 2])
    a, b = store.table("deals").listing(), store.table("deals").listing()
    assert a.name != b.name
    with a, b:
        a.add([(1, T0)])
        b.add([(2, T0)])
        assert (list(a.absent()), list(b.absent())) == ([[2]], [[1]])
        assert store.temp_tables() == {a.name, b.name}
    assert store.temp_tables() == set()


# -- PostgreSQL's own ------------------------------------------------------------------------


@pytest.fixture
def pg(pg_db: str) -> Iterator[Store]:
    yield from postgres_store(pg_db)


def test_the_temporary_table_is_the_sessions_and_outlives_a_commit(pg: Store, pg_db: str) -> None:
    """`ON COMMIT PRESERVE ROWS`: a listing added to in one transaction is read in the next;
    another connection does not see it; a table of the same name in the mirror's schema is
    never taken for it."""
    _page(pg, "deals", [1, 2, 3])
    pg.raw("CREATE TABLE _unit_kept (id bigint PRIMARY KEY, updated_at text)")
    pg.raw("INSERT INTO _unit_kept VALUES (1, NULL), (2, NULL), (3, NULL)")
    with psycopg.connect(pg_db) as conn, psycopg.connect(pg_db, autocommit=True) as other:
        with Listing(conn, "deals", None, "_unit_kept", SCHEMA) as listing:
            listing.add([(2, T0), (4, T0)])
            conn.commit()
            assert listing.counts() == (2, 3)
            assert list(listing.absent()) == [[1, 3]] and list(listing.missing_or_stale()) == [[4]]
            conn.commit()
            assert other.execute(
                "SELECT count(*) FROM pg_class WHERE relname = '_unit_kept'"
                " AND relpersistence = 't'"
            ).fetchone() == (1,)  # it exists, as a temporary table: but not on `other`'s schema
            alone = Listing(other, "deals", None, "_unit_kept", SCHEMA)
            with pytest.raises(psycopg.errors.UndefinedTable):
                alone.counts()
        conn.commit()
    assert pg.raw("SELECT count(*) FROM _unit_kept") == [(3,)]


def test_a_failed_transaction_keeps_its_error(pg: Store, pg_db: str) -> None:
    """On exit from a block whose transaction failed, the table is left to the rollback:
    the error that failed it is what the caller sees."""
    _page(pg, "deals", [1])
    with psycopg.connect(pg_db) as conn:
        with (
            pytest.raises(psycopg.errors.UndefinedTable),
            Listing(conn, "deals", None, "_unit_failed", SCHEMA) as listing,
        ):
            listing.add([(1, T0)])
            conn.execute("SELECT * FROM no_such_table")
        conn.rollback()
        assert conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname = '_unit_failed'"
        ).fetchone() == (0,)


def test_a_listing_inside_a_callers_transaction(pg: Store) -> None:
    """Nothing is committed or aborted by the diff: a missing table is asked of the catalogue."""
    conn: psycopg.Connection[Any] = pg.conn
    with conn.transaction(), Listing(conn, "stores", 3, "_unit_inside", SCHEMA) as listing:
        listing.add([(1, T0)])
        assert listing.counts() == (1, 0) and listing.claim_mall() == 0
        assert list(listing.absent()) == [] and list(listing.missing_or_stale()) == [[1]]
    assert pg.temp_tables() == set()


def test_a_mall_listing_without_a_membership_table_claims_nothing(pg: Store) -> None:
    """The membership table is the memberships part's: a listing alone never makes it (the
    handle asks `ensure_memberships` first, as `TypeTable.listing` does in SQLite)."""
    store = [{"id": "1", "type": "stores", "attributes": {"name": "n", "updated_at": T0}}]
    pg.write("stores", store)  # an included copy: no mall, no membership table
    assert not pg.schema.has_table("malls_stores")
    with Listing(pg.conn, "stores", 3, "_unit_nomembers", SCHEMA) as listing:
        listing.add([(1, T0)])
        assert listing.counts() == (1, 0) and list(listing.absent()) == []
        assert listing.claim_mall() == 0
    made: list[str] = []
    handle = TypeReads(pg.schema, "stores", made.append)
    with handle.listing(3):
        pass
    with handle.listing():
        pass
    assert made == ["stores"]  # for a mall's listing only
    with pg.table("stores").listing(3) as listing:
        listing.add([(1, T0)])
        assert listing.claim_mall() == 1
    assert pg.raw("SELECT malls_id, stores_id FROM malls_stores") == [(3, 1)]


def test_stamps_compare_by_bytes_whatever_the_columns_collation(pg: Store) -> None:
    """A stamp column of the database's default collation (not the page write's `C`) is
    compared as SQLite compares it all the same."""
    pg.raw('CREATE TABLE deals (id bigint PRIMARY KEY, updated_at text COLLATE "POSIX")')
    pg.raw("INSERT INTO deals VALUES (1, ?), (2, ?)", T0, T1)
    with Listing(pg.conn, "deals", None, "_unit_collation", SCHEMA) as listing:
        listing.add([(1, T1), (2, T1)])
        assert list(listing.missing_or_stale()) == [[1]]
        assert list(listing.missing_or_stale(T1)) == [[1, 2]]

"""`sync.store.pg.reads`: one type's reads in PostgreSQL held to the SQLite mirror's contract.

The contract tests take `store` and run twice (`tests.support.twin_stores`): `sqlite` reads an
SQLite mirror through `sync.store.reads` and `Mirror.table`, `postgres` a PostgreSQL schema
through this module's functions and `TypeReads`, both filled by the same staged pages. Each
asserts the same answers of both: counts (of a mall too), ids in order past a chunk and after a
given id, stamps normalised, a row's values and their types, the mall-scoped reads, and a table
that does not exist reading as empty. The tests after them are PostgreSQL's own: a caller's
transaction survives every read, another row factory reads the same, and what stays different
(a jsonb object's key order).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from sync.store.pg import reads
from sync.store.pg.reads import TypeReads
from sync.store.pg.schema import Schema
from tests.support.twin_stores import SCHEMA, Store, postgres_store, sqlite_store

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The read parts of either mirror, empty (the PostgreSQL server is started only for the
    `postgres` runs)."""
    if request.param == "sqlite":
        yield from sqlite_store(tmp_path)
    else:
        yield from postgres_store(request.getfixturevalue("pg_db"))


def _deals(store: Store, ids: range | list[int], updated: str = T0) -> None:
    page = [
        {"id": str(i), "type": "deals", "attributes": {"title": "t", "updated_at": updated}}
        for i in ids
    ]
    store.write("deals", page)


def _stores(store: Store, ids: list[int], mall: int, updated: str | None = T0) -> None:
    stamp = {} if updated is None else {"updated_at": updated}
    page = [{"id": str(i), "type": "stores", "attributes": {"name": f"s{i}", **stamp}} for i in ids]
    store.write("stores", page, mall)


# -- the contract: both implementations ------------------------------------------------------


def test_a_table_not_made_yet_reads_as_empty(store: Store) -> None:
    r, schema = store.reads, store.schema
    assert r.count(schema, "deals", None) == 0 and r.count(schema, "stores", 3) == 0
    assert list(r.ids(schema, "deals", None, None)) == []
    assert list(r.ids(schema, "stores", 3, None)) == []
    assert r.stamps(schema, "deals", [1]) == {} and r.get(schema, "deals", 1) is None
    for name in ("deals", "stores", "nowhere"):
        table = store.table(name)
        assert not table.exists
        assert table.count() == 0 and table.count(mall_id=3) == 0
        assert list(table.ids()) == [] and list(table.ids(mall_id=3, after=0)) == []
        assert table.stamps([1, 2]) == {} and table.get(1) is None
        assert table.malls_of(1) == [] and table.by_mall([1, 2]) == {}
        assert table.busiest_malls(5) == [] and list(table.orphans()) == []


def test_a_top_level_table_has_no_malls(store: Store) -> None:
    """A table without a membership table: its mall-scoped reads answer empty."""
    _deals(store, [1, 2])
    deals = store.table("deals")
    assert deals.exists and deals.count() == 2 and deals.count(mall_id=1) == 0
    assert list(deals.ids(mall_id=1)) == [] and deals.malls_of(1) == []
    assert deals.by_mall([1, 2]) == {} and deals.busiest_malls(3) == []
    assert list(deals.orphans()) == []


def test_ids_walk_past_a_thousand_and_after_a_given_id(store: Store) -> None:
    _deals(store, range(1, 2502))
    r, schema = store.reads, store.schema
    assert r.count(schema, "deals", None) == 2501
    assert list(r.ids(schema, "deals", None, None)) == list(range(1, 2502))
    assert list(r.ids(schema, "deals", None, 2498)) == [2499, 2500, 2501]
    assert list(r.ids(schema, "deals", None, 2501)) == []
    assert list(store.table("deals").ids(after=1000)) == list(range(1001, 2502))
    stamps = r.stamps(schema, "deals", list(range(0, 1202)))
    assert len(stamps) == 1201 and stamps[1201] == T0 and 0 not in stamps
    assert store.table("deals").stamps([2501, 2501, 9999]) == {2501: T0}


def test_stamps_come_back_normalised_and_missing_ids_absent(store: Store) -> None:
    page = [
        {
            "id": "1",
            "type": "deals",
            "attributes": {"title": "a", "updated_at": "2026-01-02T01:00:00+01:00"},
        },
        {
            "id": "3",
            "type": "deals",
            "attributes": {"title": "b", "updated_at": "2026-01-03T00:00:00Z"},
        },
        {"id": "2", "type": "deals", "attributes": {"title": "c"}},
    ]
    store.write("deals", page)
    deals = store.table("deals")
    assert deals.stamps([1, 2, 3, 4]) == {1: T1, 2: None, 3: T2}
    assert list(deals.ids()) == [1, 2, 3] and list(deals.ids(after=1)) == [2, 3]
    assert deals.get(4) is None and deals.get(2)["updated_at"] is None


def test_stamps_of_a_type_without_them_are_none_and_rows_come_as_dicts(store: Store) -> None:
    store.write("tags", [{"id": "4", "type": "tags", "attributes": {"name": "x"}}])
    assert store.reads.stamps(store.schema, "tags", [4, 5]) == {4: None}
    assert store.reads.get(store.schema, "tags", 4) == {"id": 4, "name": "x"}


def test_a_row_reads_back_with_the_values_and_types_sqlite_gives(store: Store) -> None:
    """Booleans as 0/1 ints, integers, numbers as floats (a whole one too), text, NULL, the
    spec's object attribute as JSON text, undeclared attributes typed from their values."""
    attrs = {
        "name": "Café ✓",
        "is_featured": True,
        "is_verified": False,
        "retailer_id": 2**40,
        "latitude": 40,
        "longitude": -73.25,
        "phone": None,
        "structured_hours": {"fri": ["9-5"], "mon": {"open": "9"}},
        "updated_at": "2026-01-02T00:00:00Z",
        "floors": 3,
        "rating": 4.5,
        "labels": ["a", "b"],
    }
    store.write("stores", [{"id": "7", "type": "stores", "attributes": attrs}], 5)
    row = store.table("stores").get(7)
    assert row == {
        "id": 7,
        "mall_id": 5,
        "name": "Café ✓",
        "is_featured": 1,
        "is_verified": 0,
        "retailer_id": 2**40,
        "latitude": 40.0,
        "longitude": -73.25,
        "phone": None,
        "structured_hours": '{"fri":["9-5"],"mon":{"open":"9"}}',
        "updated_at": T1,
        "floors": 3,
        "rating": 4.5,
        "labels": '["a","b"]',
    }
    assert {k: type(v) for k, v in row.items()} == {
        "id": int,
        "mall_id": int,
        "name": str,
        "is_featured": int,
        "is_verified": int,
        "retailer_id": int,
        "latitude": float,
        "longitude": float,
        "phone": type(None),
        "structured_hours": str,
        "updated_at": str,
        "floors": int,
        "rating": float,
        "labels": str,
    }
    assert store.reads.get(store.schema, "stores", 7) == row


def test_reads_in_a_mall_go_through_its_memberships(store: Store) -> None:
    _stores(store, [1, 2, 3], 8, T1)
    _stores(store, [4], 9, T2)
    _stores(store, [3], 9, T1)  # 3 is in two malls
    _stores(store, [5], 7, None)  # a mall whose rows have no stamp: last of the busiest
    _stores(store, [6], 7, T0)
    store.raw("DELETE FROM malls_stores WHERE stores_id = 6")  # listed by no mall any more
    stores, r, schema = store.table("stores"), store.reads, store.schema
    assert stores.count() == 6 and stores.count(mall_id=8) == 3 and stores.count(mall_id=1) == 0
    assert r.count(schema, "stores", 9) == 2
    assert list(stores.ids(mall_id=8)) == [1, 2, 3]
    assert list(stores.ids(mall_id=8, after=1)) == [2, 3]
    assert list(r.ids(schema, "stores", 9, None)) == [3, 4]
    assert stores.malls_of(3) == [8, 9] and stores.malls_of(6) == [] and stores.malls_of(99) == []
    assert stores.by_mall([4, 3, 99, 3, 1]) == {8: [3, 3, 1], 9: [4, 3, 3]}
    assert stores.by_mall([]) == {}
    assert list(stores.orphans()) == [[6]]
    assert stores.busiest_malls(5) == [9, 8, 7] and stores.busiest_malls(1) == [9]
    assert stores.busiest_malls(0) == []
    assert [r[0] for r in store.raw("SELECT id FROM stores WHERE mall_id = 8 ORDER BY id")] == [
        1,
        2,
        3,
    ]


def test_orphans_come_in_batches_of_a_hundred(store: Store) -> None:
    _stores(store, list(range(1, 261)), 4)
    _stores(store, [500], 4)
    store.raw("DELETE FROM malls_stores WHERE stores_id < 300")
    batches = list(store.table("stores").orphans())
    assert [len(b) for b in batches] == [100, 100, 60]
    assert [i for b in batches for i in b] == list(range(1, 261))
    assert list(store.table("stores").ids(mall_id=4)) == [500]


def test_a_mall_s_ids_walk_past_a_thousand(store: Store) -> None:
    _stores(store, list(range(1, 1203)), 2)
    assert list(store.table("stores").ids(mall_id=2, after=1000)) == list(range(1001, 1203))
    assert store.table("stores").count(mall_id=2) == 1202


def test_any_table_reads_even_one_that_is_no_resource_type(store: Store) -> None:
    _stores(store, [1, 2], 3)
    members = store.table("malls_stores")
    assert members.exists and members.count() == 2 and members.count(mall_id=3) == 0


# -- PostgreSQL's own ------------------------------------------------------------------------


@pytest.fixture
def pg(pg_db: str) -> Iterator[Store]:
    yield from postgres_store(pg_db)


def test_reads_inside_a_callers_transaction_leave_it_usable(pg: Store) -> None:
    """A missing table is asked of the catalogue, never found by a failed statement (which
    would abort the transaction around it)."""
    conn: psycopg.Connection[Any] = pg.conn
    with conn.transaction():
        deals = pg.table("deals")
        assert deals.count() == 0 and deals.get(1) is None and list(deals.orphans()) == []
        assert reads.count(pg.schema, "stores", 1) == 0 and pg.table("stores").malls_of(1) == []
        assert conn.execute("SELECT 1").fetchone() == (1,)
    _deals(pg, [1])
    assert pg.table("deals").count() == 1


def test_another_row_factory_reads_the_same(pg: Store, pg_db: str) -> None:
    _stores(pg, [1, 2], 3, T1)
    with psycopg.connect(pg_db, autocommit=True, row_factory=dict_row) as c:
        other = TypeReads(Schema(c, SCHEMA), "stores")
        assert other.count() == 2 and list(other.ids(mall_id=3)) == [1, 2]
        assert other.stamps([1]) == {1: T1} and other.get(1) == pg.table("stores").get(1)
        assert other.malls_of(1) == [3] and other.by_mall([2]) == {3: [2]}
        assert other.busiest_malls(1) == [3]


def test_reads_name_the_mirrors_schema_never_the_search_path(pg: Store, pg_db: str) -> None:
    """`public` holds tables of the same names (`DECOYS`, 700 rows each): never read."""
    assert pg.table("deals").count() == 0 and pg.table("stores").count(mall_id=1) == 0
    with psycopg.connect(pg_db, autocommit=True) as c:
        public = TypeReads(Schema(c, "public"), "deals")
        assert public.count() == 700 and public.stamps([1]) == {1: None}


def test_a_jsonb_object_keeps_its_json_but_not_its_key_order(pg: Store, tmp_path: Path) -> None:
    """The one difference of `get`: jsonb keeps an object's keys shorter first, then in byte
    order, so the text differs from SQLite's where the upstream's order was another; the JSON
    is equal. A string stored as a JSON scalar reads back as the string SQLite holds."""
    hours = {"sunday": [1], "mon": {"b": 1, "a": 2}}
    page = [{"id": "1", "type": "stores", "attributes": {"structured_hours": hours}}]
    scalar = [{"id": "2", "type": "stores", "attributes": {"structured_hours": "closed"}}]
    opened = sqlite_store(tmp_path)
    lite = next(opened)
    try:
        for s in (lite, pg):
            s.write("stores", page, 1)
            s.write("stores", scalar, 1)
        mine, theirs = pg.table("stores").get(1), lite.table("stores").get(1)
        assert lite.table("stores").get(2)["structured_hours"] == "closed"
    finally:
        opened.close()
    assert theirs["structured_hours"] == '{"sunday":[1],"mon":{"b":1,"a":2}}'
    assert mine["structured_hours"] == '{"mon":{"a":2,"b":1},"sunday":[1]}'
    assert json.loads(mine["structured_hours"]) == json.loads(theirs["structured_hours"])
    assert pg.table("stores").get(2)["structured_hours"] == "closed"


def test_a_boolean_column_is_boolean_in_postgresql_and_reads_as_an_int(pg: Store) -> None:
    page = [{"id": "1", "type": "stores", "attributes": {"is_featured": False}}]
    pg.write("stores", page, 2)
    assert pg.raw("SELECT pg_typeof(is_featured)::text FROM stores") == [("boolean",)]
    value = pg.table("stores").get(1)["is_featured"]  # type: ignore[index]
    assert value == 0 and type(value) is int
    pg.raw("UPDATE stores SET is_featured = true")
    value = pg.table("stores").get(1)["is_featured"]  # type: ignore[index]
    assert value == 1 and type(value) is int


def test_busiest_breaks_a_tie_by_the_lower_mall(pg: Store) -> None:
    _stores(pg, [1], 9, T1)
    _stores(pg, [2], 4, T1)
    _stores(pg, [3], 6, T0)
    assert pg.table("stores").busiest_malls(3) == [4, 9, 6]

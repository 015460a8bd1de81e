"""`sync.store.pg.schema`: the PostgreSQL mirror's introspection held to the SQLite `Schema`'s.

The contract tests take `store` and run twice (`tests.support.twin_stores`): `sqlite` asks
`sync.store.schema.Schema`, `postgres` this module's `Schema`, over tables filled by the same
staged pages: `columns`, `has_table` (a view counts), `names` (the session's temporary tables do
not), and the cache `forget` drops. The tests after them are PostgreSQL's own: only the
mirror's schema is named, case is kept, and a caller's transaction survives every question.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.store.pg.bookkeeping import READABLE
from sync.store.pg.schema import Schema, table_columns, table_types
from tests.support.twin_stores import SCHEMA, Store, postgres_store, sqlite_store

T0 = "2026-01-01T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The read parts of either mirror, empty (the PostgreSQL server is started only for the
    `postgres` runs)."""
    if request.param == "sqlite":
        yield from sqlite_store(tmp_path)
    else:
        yield from postgres_store(request.getfixturevalue("pg_db"))


def _deal(rid: int) -> dict[str, Any]:
    attrs = {"title": "t", "is_local": True, "updated_at": T0, "views": 3}
    return {"id": str(rid), "type": "deals", "attributes": attrs}


# -- the contract: both implementations ------------------------------------------------------


def test_a_table_not_made_yet_has_no_columns(store: Store) -> None:
    schema = store.schema
    assert schema.columns("deals") == set() and not schema.has_table("deals")
    assert "deals" not in schema.names()


def test_a_written_table_has_its_columns_and_a_name(store: Store) -> None:
    store.write("deals", [_deal(1)])
    store.write("stores", [{"id": "1", "type": "stores", "attributes": {"name": "s"}}], 4)
    schema = store.schema
    assert schema.columns("deals") == {"id", "title", "is_local", "updated_at", "views"}
    assert schema.columns("stores") == {"id", "name", "mall_id"}
    assert schema.has_table("deals") and schema.has_table("malls_stores")
    assert {"deals", "stores", "malls_stores"} <= schema.names()
    assert not schema.has_table("Deals") or store.kind == "sqlite"  # SQLite folds the case


def test_a_view_counts_as_a_table(store: Store) -> None:
    store.write("deals", [_deal(1)])
    store.raw("CREATE VIEW local_deals AS SELECT id, title FROM deals WHERE is_local")
    schema = store.schema
    assert schema.has_table("local_deals") and schema.columns("local_deals") == {"id", "title"}
    assert "local_deals" in schema.names()
    assert store.table("local_deals").count() == 1


def test_a_listings_temporary_table_is_none_of_the_mirrors(store: Store) -> None:
    store.write("deals", [_deal(1)])
    with store.table("deals").listing() as listing:
        assert listing.name in store.temp_tables()
        assert listing.name not in store.schema.names()
        # SQLite's `PRAGMA table_info` of a bare name finds a temporary table too (its name
        # resolution, not the mirror's tables); PostgreSQL's schema is the mirror's alone.
        assert store.schema.has_table(listing.name) == (store.kind == "sqlite")


def test_columns_are_kept_until_forgotten(store: Store) -> None:
    """A column added behind the schema's back is seen once the table is forgotten; a table
    that did not exist is never remembered as missing."""
    store.write("deals", [_deal(1)])
    schema = store.schema
    before = schema.columns("deals")
    store.raw("ALTER TABLE deals ADD COLUMN extra TEXT")
    assert schema.columns("deals") == before
    schema.forget("deals")
    assert schema.columns("deals") == before | {"extra"}
    assert not schema.has_table("tags")
    store.write("tags", [{"id": "1", "type": "tags", "attributes": {"name": "x"}}])
    assert schema.columns("tags") == {"id", "name"}


# -- PostgreSQL's own ------------------------------------------------------------------------


@pytest.fixture
def pg(pg_db: str) -> Iterator[Store]:
    yield from postgres_store(pg_db)


def test_only_the_mirrors_schema_is_named(pg: Store) -> None:
    """`public` holds tables of the same names (`tests.support.twin_stores.DECOYS`)."""
    conn: psycopg.Connection[Any] = pg.conn
    assert pg.schema.names() == set() and not pg.schema.has_table("deals")
    public = Schema(conn, "public")
    assert public.has_table("deals") and {"deals", "malls_stores"} <= public.names()
    assert table_columns(conn, "public", "deals") == ["id", "updated_at", "mall_id"]
    assert table_columns(conn, SCHEMA, "deals") == []
    assert repr(pg.schema) == f"<pg Schema {SCHEMA!r}>"


def test_names_are_exact(pg: Store) -> None:
    """Quoted identifiers keep their case: `Deals` is another table (SQLite folds it)."""
    pg.write("deals", [_deal(1)])
    assert not pg.schema.has_table("Deals") and pg.schema.columns("Deals") == set()
    pg.raw('CREATE TABLE "Deals" ("Id" bigint)')
    assert pg.schema.columns("Deals") == {"Id"} and {"deals", "Deals"} <= pg.schema.names()


def test_every_question_leaves_a_callers_transaction_usable(pg: Store) -> None:
    conn: psycopg.Connection[Any] = pg.conn
    with conn.transaction():
        assert not pg.schema.has_table("nowhere") and pg.schema.columns("nowhere") == set()
        assert pg.schema.names() == set()
        conn.execute("SELECT 1")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_materialised_view_and_a_dropped_column(pg: Store) -> None:
    """Every relation a reader can select from has columns (`READABLE`); a dropped column is
    gone."""
    assert set(READABLE) == {"r", "p", "v", "m"}
    pg.write("deals", [_deal(1)])
    pg.raw("CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM deals")
    pg.raw("ALTER TABLE deals DROP COLUMN views")
    pg.schema.forget("deals")
    assert pg.schema.columns("counted") == {"n"} and "views" not in pg.schema.columns("deals")
    assert table_columns(pg.conn, SCHEMA, "deals")[0] == "id"


def test_types_are_read_with_the_columns_and_forgotten_with_them(pg: Store) -> None:
    """`types` (the hours' question) and `columns` share one read and one `forget`."""
    pg.write("deals", [_deal(1)])
    types = pg.schema.types("deals")
    assert types == {
        "id": "bigint",
        "title": "text",
        "is_local": "boolean",
        "updated_at": "text",
        "views": "bigint",
    }
    assert list(types) == table_columns(pg.conn, SCHEMA, "deals")
    assert pg.schema.columns("deals") == set(types)
    assert table_types(pg.conn, SCHEMA, "deals") == types
    pg.raw("ALTER TABLE deals ALTER COLUMN views TYPE double precision")
    assert pg.schema.types("deals")["views"] == "bigint"  # kept until forgotten
    pg.schema.forget("deals")
    assert pg.schema.types("deals")["views"] == "double precision"
    assert pg.schema.types("nowhere") == {} and pg.schema.columns("nowhere") == set()

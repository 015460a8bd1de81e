"""`sync.store.schema`: tables made and widened additively, declared types kept, inferred ones widened, views."""

from __future__ import annotations

import pytest

from sync.store import Mirror
from sync.store.schema import affinity, declared_type
from tests.support.store_units import rows


def _types(mirror: Mirror, table: str) -> dict[str, str]:
    return {r[1]: r[2] for r in mirror.conn.execute(f"PRAGMA table_info([{table}])")}


@pytest.mark.parametrize(
    ("declared", "affinity_"),
    [
        ("INTEGER", "INTEGER"),
        ("bigint", "INTEGER"),
        ("VARCHAR(9)", "TEXT"),
        ("clob", "TEXT"),
        ("BLOB", ""),
        ("", ""),
        ("double precision", "REAL"),
        ("FLOAT", "REAL"),
        ("decimal", "NUMERIC"),
    ],
)
def test_a_declared_type_has_sqlite_s_affinity(declared: str, affinity_: str) -> None:
    assert affinity(declared) == affinity_


def test_a_column_s_declared_type_comes_from_the_spec_its_keys_from_any_table() -> None:
    assert declared_type("deals", "id") == "INTEGER"
    assert declared_type("job_listings", "store_id") == "INTEGER"  # a to-one column
    assert declared_type("deals", "meta_whatever") is None  # not listed: inferred
    assert declared_type("hours", "mall_id") == "INTEGER"  # not catalogued: its keys only
    assert declared_type("hours", "name") is None


def test_declared_columns_take_the_spec_s_type_whatever_the_first_value(mirror: Mirror) -> None:
    schema = mirror.schema
    schema.ensure_content("articles", {"id": 1, "is_active": None, "title": None, "extra": None})
    types = _types(mirror, "articles")
    assert (types["id"], types["is_active"], types["title"], types["extra"]) == (
        "INTEGER",
        "INTEGER",
        "TEXT",
        "",
    )
    schema.ensure_content("articles", {"id": 1, "EXTRA": 3, "score": 1.5})  # case-insensitive
    assert set(_types(mirror, "articles")) == {"id", "is_active", "title", "extra", "score"}
    assert _types(mirror, "articles")["score"] == "REAL"


def test_an_inferred_column_widens_and_keeps_rows_index_and_triggers(mirror: Mirror) -> None:
    schema, conn = mirror.schema, mirror.conn
    schema.ensure_content("deals", {"id": 1, "title": "t", "views": 3, "updated_at": "x"})
    conn.execute("INSERT INTO deals (id, title, views, updated_at) VALUES (1, 'shoe sale', 3, 'x')")
    schema.widen("deals", ("title", "views"), [(2, 5, 2.5)])  # title is declared: never changed
    assert _types(mirror, "deals")["views"] == "REAL"
    assert _types(mirror, "deals")["title"] == "TEXT"
    schema.widen("deals", ("views",), [(2, "many")])
    assert _types(mirror, "deals")["views"] == "TEXT"
    schema.widen("deals", ("views",), [(2, 7)])  # narrower values never narrow it back
    assert _types(mirror, "deals")["views"] == "TEXT"
    assert rows(conn, "SELECT id, CAST(views AS REAL) FROM deals") == [(1, 3.0)]
    assert rows(conn, "SELECT rowid FROM deals_fts WHERE deals_fts MATCH 'shoe'") == [(1,)]
    conn.execute("UPDATE deals SET updated_at = 'y' WHERE id = 1")
    assert rows(conn, "SELECT op FROM _sync_changes ORDER BY seq DESC LIMIT 1") == [("upsert",)]


def _names(mirror: Mirror, kind: str) -> set[str]:
    return {
        r[0] for r in mirror.conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
    }


def test_a_view_appears_once_its_sources_exist_and_routes_can_replace_it(mirror: Mirror) -> None:
    schema = mirror.schema
    schema.ensure_link("deals_stores", "deals_id", "stores_id", "deals", "stores")
    assert "stores_deals" in _names(mirror, "view") and "malls_deals" not in _names(mirror, "view")
    schema.ensure_link("malls_stores", "malls_id", "stores_id", "malls", "stores")
    schema.ensure_content("deals", {"id": 1, "is_local": 1, "visibility": "Public"})
    schema.ensure_content("malls", {"id": 1, "exclude_national_deals": 0})
    assert "malls_deals" in _names(mirror, "view")
    assert not schema.mall_deals_is_table()
    schema.materialize_mall_deals()
    assert schema.mall_deals_is_table()
    assert "malls_deals" in _names(mirror, "table") and "malls_deals" not in _names(mirror, "view")
    schema.forget("deals")
    schema.ensure_views()  # the table stands: no view made over it
    assert "malls_deals" not in _names(mirror, "view")


def test_a_column_widened_after_the_routes_list_mall_deals_keeps_the_table(mirror: Mirror) -> None:
    # The strict chaos run's daemon died at start: a widened column dropped "our views", and
    # `DROP VIEW malls_deals` on the table the mall routes fill failed ("mirror is damaged").
    schema, conn = mirror.schema, mirror.conn
    schema.ensure_link("malls_stores", "malls_id", "stores_id", "malls", "stores")
    schema.ensure_link("deals_stores", "deals_id", "stores_id", "deals", "stores")
    schema.ensure_content("deals", {"id": 1, "is_local": 1, "visibility": "Public", "views": 3})
    schema.ensure_content("malls", {"id": 1, "exclude_national_deals": 0})
    schema.materialize_mall_deals()
    conn.execute("INSERT INTO malls (id) VALUES (1)")
    conn.execute("INSERT INTO deals (id, views) VALUES (1, 3)")
    conn.execute("INSERT INTO malls_deals (malls_id, deals_id) VALUES (1, 1)")
    schema.widen("deals", ("views",), [(1, "many")])
    assert _types(mirror, "deals")["views"] == "TEXT"
    assert schema.mall_deals_is_table()
    assert rows(conn, "SELECT malls_id, deals_id FROM malls_deals") == [(1, 1)]
    assert "stores_deals" in _names(mirror, "view")  # the other views are made again

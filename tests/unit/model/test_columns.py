"""sync.model.columns: declared affinities, nullable attributes and value kinds agree with the catalogue."""

from __future__ import annotations

from sync.model import catalogue, columns
from sync.model.columns import BOOLEANS, COLUMN_TYPES, DECLARED, NULLABLE, VALUE_KINDS


def test_ids_and_to_one_columns_are_integer_unknown_attributes_inferred() -> None:
    assert set(COLUMN_TYPES) == set(catalogue.TYPES)
    assert all(t["id"] == t["mall_id"] == "INTEGER" for t in COLUMN_TYPES.values())
    assert COLUMN_TYPES["job_listings"]["store_id"] == "INTEGER"
    assert "store_id" not in COLUMN_TYPES["deals"]  # deals' stores are to-many: a link table
    assert "meta_whatever" not in COLUMN_TYPES["deals"]
    assert COLUMN_TYPES["stores"]["distance"] == "REAL"  # the spec's own, beside the keys


def test_every_date_field_of_the_catalogue_is_declared_text() -> None:
    assert set(DECLARED) <= set(catalogue.TYPES)
    for name, cols in DECLARED.items():
        dates = catalogue.TYPES[name].date_fields
        assert [cols[f] for f in dates] == ["TEXT"] * len(dates), name
    # tags and groups carry no stamps, so their tables declare none
    assert "updated_at" not in DECLARED["tags"] and "created_at" not in DECLARED["groups"]


def test_nullable_attributes_are_declared() -> None:
    for name, attrs in NULLABLE.items():
        assert all(a in DECLARED[name] for a in attrs), name


def test_value_kinds_split_booleans_integers_and_numbers() -> None:
    assert VALUE_KINDS["social_feeds"]["is_active"] == "boolean"
    assert VALUE_KINDS["social_feeds"]["social_network_id"] == "integer"
    assert VALUE_KINDS["malls"]["distance"] == "number"
    assert "name" not in VALUE_KINDS["malls"]  # text: not checked
    declared_booleans = {
        c for cols in VALUE_KINDS.values() for c, k in cols.items() if k == "boolean"
    }
    assert declared_booleans <= BOOLEANS
    assert all(
        DECLARED[t][c] == "INTEGER" for t, cols in DECLARED.items() for c in cols if c in BOOLEANS
    )
    assert columns._kinds({"a": "TEXT", "is_active": "INTEGER", "n": "REAL"}) == {
        "is_active": "boolean",
        "n": "number",
    }

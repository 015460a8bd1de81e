"""`sync.store.pg.columns`: the type each attribute takes in the PostgreSQL mirror, and each
staged value as its column takes it (no server needed)."""

from __future__ import annotations

from sync.store.pg.columns import (
    BIGINT,
    DOUBLE,
    TEXT,
    declared,
    inferred,
    latest_copies,
    to_jsonb,
    to_text,
)

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


def test_latest_copies_follows_the_row_by_row_guard() -> None:
    rows = [(2, "x", T1), (1, "a", T1), (1, "b", T1), (1, "c", T0), (3, "n", None), (3, "m", T0)]
    assert latest_copies(rows, 2) == [(1, "b", T1), (2, "x", T1), (3, "m", T0)]
    assert latest_copies([(1, "a"), (1, "b")], None) == [(1, "b")]
    assert latest_copies([(2, "b"), (1, "a")], None) == [(1, "a"), (2, "b")]


def test_declared_and_inferred_types() -> None:
    assert declared("deals", "is_local") == "boolean"
    assert declared("deals", "display_order") is None  # an articles attribute, not a deal's
    assert declared("articles", "display_order") == BIGINT
    assert declared("malls", "latitude") == DOUBLE
    assert declared("stores", "opening_date") == 'text COLLATE "C"'
    assert declared("events", "start_at") == 'text COLLATE "C"'
    assert declared("programs", "properties") == "jsonb"
    assert declared("events", "mall_id") == BIGINT
    assert declared("hours", "mall_id") == BIGINT  # not a catalogued type: its keys still are
    assert [inferred(v) for v in ([None, 1], [1, 2.5], [1, "a", 2.0], [None], [])] == [
        BIGINT,
        DOUBLE,
        TEXT,
        None,
        None,
    ]


def test_values_are_bound_as_their_column_takes_them() -> None:
    assert to_text(7) == "7" and to_text(2.5) == "2.5" and to_text("a\x00b") == "a\ufffdb"
    assert to_jsonb('{"a":1}').obj == '{"a":1}'  # JSON text as staged: passed on as it is
    assert to_jsonb("[draft] sale").obj == '"[draft] sale"'  # a plain string: a JSON string
    assert to_jsonb("open late").obj == '"open late"'
    assert to_jsonb(3).obj == "3"
    assert to_jsonb('{"n": 123456789012345678901234567890}').obj.startswith('{"n"')
    assert to_jsonb('["a\\u0000b"]').obj == '["a\ufffdb"]'

"""sync.pipeline.checks: stamps normalised or refused, declared values coerced or refused."""

from __future__ import annotations

from typing import Any

from sync.pipeline.batches import Staged
from sync.pipeline.checks import VALUE_CHARS, check_stamps, check_values, clip, describe


def test_check_stamps_normalises_other_iso_forms_and_refuses_unreadable_ones() -> None:
    extra: dict[str, Any] = {}
    attrs = {
        "updated_at": "2026-01-01T01:00:00+01:00",
        "created_at": "2026-01-01T00:00:00.000Z",  # canonical: left alone
        "opening_date": None,
        "display_at": "whenever",  # not an absolute stamp: not checked here
    }
    assert check_stamps(4, attrs, extra) is None
    assert extra == {"updated_at": "2026-01-01T00:00:00.000Z"}
    refusal = check_stamps(4, {"created_at": 1700000000}, {})
    assert refusal == (4, "created_at", "1700000000", "'1700000000' is not a timestamp string")
    rid, attr, value, problem = check_stamps(5, {"updated_at": "yesterday"}, {}) or ()
    assert (rid, attr, value) == (5, "updated_at", '"yesterday"')
    assert problem == "'yesterday' is not an ISO 8601 timestamp"


def test_check_values_converts_lossless_values_and_leaves_out_misfits() -> None:
    docs = [
        {"is_local": "true", "is_active": 1},
        {"is_local": "yes", "is_active": True},
        {"is_local": False, "is_active": None},
    ]
    b = Staged("deals", ids=[1, 2, 3], columns=("is_active", "is_local"))
    b.rows = [(1, 1, "true"), (2, 1, "yes"), (3, None, 0)]
    keys = dict.fromkeys(["is_active", "is_local"])
    kept = check_values(b, docs, {"is_local": "boolean", "is_active": "boolean"}, keys)
    assert kept == [docs[0], docs[2]]
    assert b.ids == [1, 3] and b.rows == [(1, 1, 1), (3, None, 0)]
    assert b.coerced == [(1, "is_local", '"true"'), (1, "is_active", "1")]  # 1 for a boolean
    assert b.refused == [(2, "is_local", '"yes"', "text where the spec declares a boolean")]


def test_a_well_typed_page_is_returned_untouched() -> None:
    b = Staged("deals", ids=[1], columns=("is_local",), rows=[(1, 1)])
    docs = [{"is_local": True}]
    assert (
        check_values(b, docs, {"is_local": "boolean", "absent": "integer"}, {"is_local": None})
        is docs
    )
    assert b.refused == [] and b.coerced == []


def test_describe_names_the_json_kind_and_clip_bounds_the_value() -> None:
    assert [describe(v) for v in (True, 3, 2**64, 1.5, float("inf"), "s", {}, [])] == [
        "a boolean",
        "an integer",
        "an integer beyond 64 bits",
        "a number with a fraction",
        "a non-finite number",
        "text",
        "an object",
        "an array",
    ]
    assert describe(None) == "NoneType"
    assert clip({"a": 1}) == '{"a":1}'
    long = clip("x" * 200)
    assert len(long) == VALUE_CHARS and long == '"' + "x" * (VALUE_CHARS - 4) + "..."
    assert clip(2**70) == "1180591620717411303424"

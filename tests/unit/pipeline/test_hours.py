"""sync.pipeline.hours: a mall's hours items staged as rows of the `hours` table."""

from __future__ import annotations

from sync.model.stamps import CANONICAL
from sync.pipeline.hours import stage_hours


def test_each_day_becomes_one_row_keyed_by_its_date_else_its_id() -> None:
    items = [
        {"id": "d1", "attributes": {"date": "2026-01-02", "open": "09:00", "closed": False}},
        {"id": "2026-01-03", "attributes": {"open": None, "slots": [1, 2]}},
        {"id": "", "attributes": {"open": "10:00"}},  # no date, no id: left out
        {"attributes": None},
    ]
    rows = stage_hours(7, items)
    assert [r["date"] for r in rows] == ["2026-01-02", "2026-01-03"]
    assert rows[0]["open"] == "09:00" and rows[0]["closed"] == 0
    assert rows[1]["slots"] == "[1,2]" and rows[1]["open"] is None
    assert all(r["mall_id"] == 7 for r in rows)
    stamp = rows[0]["fetched_at"]
    assert CANONICAL.fullmatch(stamp) and rows[1]["fetched_at"] == stamp


def test_the_upstream_cannot_overwrite_the_mall_or_the_fetch_stamp() -> None:
    item = {"attributes": {"date": 20260102, "mall_id": 99, "fetched_at": "1999"}}
    (row,) = stage_hours(3, [item])
    assert row["mall_id"] == 3 and row["fetched_at"] != "1999"
    assert row["date"] == "20260102"  # the key is always text
    assert stage_hours(3, []) == []

"""`sync.store.hours`: a mall's days replaced within a range, new attributes widen, current hours kept whole."""

from __future__ import annotations

from datetime import date

from sync.store import Mirror, hours
from tests.support.store_units import rows


def _day(d: str, text: str, mall: int = 1, **more: object) -> dict[str, object]:
    return {"mall_id": mall, "date": d, "fetched_at": "x", "day": "Mon", "hours_text": text, **more}


def test_a_refresh_replaces_the_range_of_one_mall_only(mirror: Mirror) -> None:
    hours.write(
        mirror.schema,
        1,
        [_day("2026-03-01", "9-5", 1), _day("2026-03-02", "9-5", 1), _day("2026-03-09", "9-9", 1)],
        date(2026, 3, 1),
        date(2026, 3, 9),
    )
    hours.write(
        mirror.schema, 2, [_day("2026-03-02", "10-4", 2)], date(2026, 3, 1), date(2026, 3, 9)
    )
    n = hours.write(
        mirror.schema, 1, [_day("2026-03-02", "closed", 1)], date(2026, 3, 1), date(2026, 3, 5)
    )
    assert n == 1
    assert rows(
        mirror.conn, "SELECT mall_id, date, hours_text FROM hours ORDER BY mall_id, date"
    ) == [
        (1, "2026-03-02", "closed"),  # 03-01 no longer listed: gone
        (1, "2026-03-09", "9-9"),  # outside the range: kept
        (2, "2026-03-02", "10-4"),  # another mall: kept
    ]


def test_a_new_attribute_adds_a_column_and_an_empty_refresh_makes_the_table(mirror: Mirror) -> None:
    hours.write(mirror.schema, 1, [], date(2026, 3, 1), date(2026, 3, 2))
    assert {"mall_id", "date", "day", "hours_text", "description"} <= mirror.schema.columns("hours")
    hours.write(
        mirror.schema,
        1,
        [_day("2026-03-01", "9-5", is_closed=1)],
        date(2026, 3, 1),
        date(2026, 3, 1),
    )
    assert "is_closed" in mirror.schema.columns("hours")
    assert rows(mirror.conn, "SELECT date, is_closed FROM hours") == [("2026-03-01", 1)]


def test_current_hours_keep_the_latest_answer_whole(mirror: Mirror) -> None:
    hours.write_current(mirror.conn, 4, {"open": True, "until": "21:00"})
    hours.write_current(mirror.conn, 4, {"open": False})
    assert rows(mirror.conn, "SELECT mall_id, body FROM current_hours") == [(4, '{"open":false}')]

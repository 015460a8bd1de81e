"""sync.model.stamps: the API's fixed-width UTC stamp, normalising other ISO forms, RFC 3339 checks."""

from __future__ import annotations

import pytest

from sync.model.stamps import (
    StampError,
    is_date_time,
    iso_ms,
    normalize,
    normalize_or_none,
    shift,
)


def test_iso_ms_truncates_to_milliseconds() -> None:
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_ms(1_700_000_000.1239) == "2023-11-14T22:13:20.123Z"


def test_shift_moves_a_stamp_or_a_date() -> None:
    assert shift("2026-01-01T00:00:00.500Z", -1) == "2025-12-31T23:59:59.500Z"
    assert shift("2026-03-01", 3600) == "2026-03-01T01:00:00.000Z"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00.000Z"),
        ("2026-01-01T00:00:00z", "2026-01-01T00:00:00.000Z"),
        ("2026-01-01T00:00:00.123456Z", "2026-01-01T00:00:00.123Z"),
        ("2026-01-01 12:00:00", "2026-01-01T12:00:00.000Z"),
        ("2026-01-02", "2026-01-02T00:00:00.000Z"),
    ],
)
def test_normalize_gives_one_text_order(raw: str, canonical: str) -> None:
    assert normalize(raw) == canonical


def test_normalize_names_the_bad_value_and_normalize_or_none_swallows_it() -> None:
    with pytest.raises(StampError, match=r"^'yesterday' is not an ISO 8601 timestamp$"):
        normalize("yesterday")
    assert normalize_or_none("yesterday") is None
    assert normalize_or_none(1700000000) is None
    assert normalize_or_none("2026-01-01T00:00:00Z") == "2026-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("2026-05-01T09:00:00.000Z", True),
        ("2026-05-01t09:00:00+02:00", True),
        ("2026-05-01T09:00:00", False),  # RFC 3339 requires the zone
        ("2026-02-30T09:00:00Z", False),  # no such day
        ("2026-05-01", False),
        (None, False),
    ],
)
def test_is_date_time(value: object, ok: bool) -> None:
    assert is_date_time(value) is ok


@pytest.mark.parametrize("raw", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_stamp_beyond_the_calendar_is_a_stamp_error(raw: str) -> None:
    with pytest.raises(StampError, match="is out of range"):
        normalize(raw)
    assert normalize_or_none(raw) is None

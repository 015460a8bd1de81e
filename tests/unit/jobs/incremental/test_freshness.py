"""`sync.jobs.incremental.freshness`: lags from stamps to the upstream's now, never negative, only for
stamps a write changed."""

from __future__ import annotations

from datetime import UTC, datetime

from sync.jobs.incremental.freshness import PATHS, changed_lags, lags

#: 2026-01-01T00:01:00Z on the upstream's clock.
NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC).timestamp()


def test_lags_skip_unreadable_stamps_and_clamp_the_future_to_zero() -> None:
    stamps = [
        "2026-01-01T00:00:00.000Z",  # a minute behind
        "2026-01-01T00:00:59.500Z",  # half a second
        None,
        "not a stamp",
        "2026-01-01T00:05:00.000Z",  # ahead of the estimate: no negative lag
    ]
    assert lags(stamps, NOW) == [60.0, 0.5, 0.0]


def test_lags_read_an_offset_stamp_on_the_utc_clock() -> None:
    assert lags(["2026-01-01T01:00:30.000+01:00"], NOW) == [30.0]


def test_only_a_changed_stamp_has_a_lag() -> None:
    before = {1: "2026-01-01T00:00:00.000Z", 2: "2026-01-01T00:00:30.000Z", 3: None}
    after = {
        1: "2026-01-01T00:00:00.000Z",  # the same copy: no change
        2: "2026-01-01T00:00:50.000Z",  # changed
        3: "2026-01-01T00:00:40.000Z",  # new to the mirror
        4: None,  # no stamp at all
    }
    assert sorted(changed_lags(before, after, NOW)) == [10.0, 20.0]
    assert changed_lags(after, after, NOW) == []
    assert PATHS == ("notice", "poll", "proof")

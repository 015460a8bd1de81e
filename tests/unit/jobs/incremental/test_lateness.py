"""`sync.jobs.incremental.lateness`: the lookback's floor, its deep re-read per scope, a damaged record,
and the lateness as `ccsync status` shows it."""

from __future__ import annotations

import orjson

from sync.jobs.incremental.lateness import (
    DEEP_EVERY,
    HALF_LIFE,
    META_KEY,
    Lateness,
    Lookbacks,
    shown,
)

T0 = 1_800_000_000.0


def _lookbacks(meta: dict[str, str], now: list[float], overlap: float = 5.0) -> Lookbacks:
    return Lookbacks(
        meta.get, meta.__setitem__, overlap=overlap, ceiling=100.0, clock=lambda: now[0]
    )


def test_the_deep_re_read_counts_each_scope_apart() -> None:
    lb = _lookbacks({}, [T0])
    assert DEEP_EVERY == 3
    reads = [lb.behind("deals", s) for s in ("a", "b", "a", "b", "a", "b")]
    assert reads == [5.0, 5.0, 5.0, 5.0, 100.0, 100.0]


def test_no_late_arrival_changes_nothing_and_a_first_key_is_saved_at_once() -> None:
    meta: dict[str, str] = {}
    lb = _lookbacks(meta, [T0])
    lb.saw("deals", [])
    assert meta == {}
    assert lb.lookback("deals") == 5.0
    saved = orjson.loads(meta[META_KEY])
    assert saved == {
        "deals": {
            "lookback": 5.0,
            "late": 0,
            "largest": 0.0,
            "last_late_at": None,
            "at": T0,
            "floor": 5.0,
        }
    }


def test_the_lookback_decays_toward_the_overlap_configured_now() -> None:
    """A restart with a larger `poll_overlap`: the kept lookback decays toward the new floor,
    and never reads below it."""
    meta: dict[str, str] = {}
    now = [T0]
    lb = _lookbacks(meta, now)
    lb.saw("deals", [40.0])  # 1.5 x 40
    assert lb.lookback("deals") == 60.0
    now[0] += 2 * HALF_LIFE
    again = _lookbacks(meta, now, overlap=20.0)
    assert again.lookback("deals") == 20.0 + 40.0 / 4
    assert _lookbacks(meta, now, overlap=80.0).lookback("deals") == 80.0


def test_a_damaged_record_is_read_as_none_and_a_bad_entry_is_skipped() -> None:
    assert _lookbacks({META_KEY: "{not json"}, [T0]).state == {}
    meta = {
        META_KEY: orjson.dumps({"deals": {"nonsense": 1}, "events": {"lookback": 9.0}}).decode()
    }
    lb = _lookbacks(meta, [T0])
    assert list(lb.state) == ["events"]
    assert lb.state["events"] == Lateness(9.0)


def test_shown_rounds_and_decays_each_record() -> None:
    rec = {
        "lookback": 65.0,
        "late": 2,
        "largest": 40.04,
        "last_late_at": "x",
        "at": T0,
        "floor": 5.0,
    }
    text = orjson.dumps({"deals": rec, "broken": {"what": 1}}).decode()
    assert shown(text, T0 + HALF_LIFE) == {
        "deals": {"lookback_s": 35.0, "late": 2, "largest_s": 40.0, "last_late_at": "x"}
    }
    assert shown(None, T0) == {}
    assert shown("[1, 2]", T0) == {}
    assert shown("{oops", T0) == {}

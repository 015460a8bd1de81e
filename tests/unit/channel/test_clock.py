"""sync.channel.clock: `UpstreamClock` learning from page resources, its kept state and its fallback."""

from __future__ import annotations

from sync.channel.clock import (
    FALLBACK_LAG,
    META_KEY,
    UpstreamClock,
    stamp_seconds,
)
from sync.model.stamps import iso_ms

T0 = 1_800_000_000.0


def _clock(local: list[float], date_offset: float = 0.0) -> UpstreamClock:
    return UpstreamClock(local=lambda: local[0], date_offset=lambda: date_offset)


def test_stamp_seconds_reads_the_canonical_form() -> None:
    assert stamp_seconds("1970-01-01T00:01:40.250Z") == 100.25
    assert stamp_seconds(iso_ms(T0)) == T0


def test_a_page_teaches_its_largest_stamp_whatever_its_iso_form() -> None:
    clock = _clock([T0])
    resources: list[dict[str, object]] = [
        {"attributes": {"updated_at": iso_ms(T0 - 50)}},
        {"attributes": {"updated_at": iso_ms(T0 - 40).replace("Z", "+00:00")}},  # the largest
        {"attributes": {"updated_at": "garbage"}},
        {"attributes": None},
        {"id": "no attributes"},
    ]
    clock.observe_resources(resources, "updated_at", received=T0)
    assert clock.offset == -40
    clock.observe("not a stamp", received=T0)
    clock.observe(None)
    assert clock.offset == -40


def test_before_any_stamp_now_is_the_date_clock_a_day_back() -> None:
    clock = _clock([T0], date_offset=30.0)
    assert clock.now_ts() == T0 + 30.0 - FALLBACK_LAG
    assert clock.date_ts(T0) == T0 + 30.0
    assert clock.ceiling() == iso_ms(T0 + 30.0)
    # a stamp ahead of local time but within the Date clock's lead and the slack is learned
    clock.observe(iso_ms(T0 + 100), received=T0)
    assert clock.offset == 100
    assert clock.ceiling() == iso_ms(T0 + 100)


def test_the_state_is_kept_only_when_it_moved_half_a_second() -> None:
    local = [T0]
    meta: dict[str, str] = {}
    writes: list[str] = []

    def put(key: str, value: str) -> None:
        writes.append(key)
        meta[key] = value

    clock = _clock(local)
    clock.keep(meta.get, put)
    clock.observe(iso_ms(T0 - 10), received=T0)
    clock.observe(iso_ms(T0 - 9.8), received=T0)  # 0.2 s more: not written
    assert writes == [META_KEY] and meta[META_KEY] == f"{T0:.3f}:-10.000:"
    clock.flush()
    assert meta[META_KEY] == f"{T0:.3f}:-9.800:" and len(writes) == 2


def test_load_ignores_damage_and_keeps_a_larger_offset_learned_here() -> None:
    local = [T0]
    clock = _clock(local)
    for damaged in ("", "1:2", "x:y:z", "a:b:c:d"):
        clock.load(damaged)
        assert clock.offset is None
    clock.observe(iso_ms(T0 - 5), received=T0)
    clock.load(f"{T0:.3f}:-60.000:-70.000")
    assert clock.offset == -5
    other = _clock(local)
    other.load(f"{T0:.3f}:-60.000:-70.000")
    assert other.offset == -60
    stale = _clock([T0 + 3 * 86400])
    stale.load(f"{T0:.3f}:-60.000:-70.000")  # two windows ago: forgotten
    assert stale.offset is None


def test_a_stamp_beyond_the_calendar_teaches_nothing_and_fails_nothing() -> None:
    clock = _clock([T0])
    resources: list[dict[str, object]] = [
        {"attributes": {"updated_at": iso_ms(T0 - 40)}},
        {"attributes": {"updated_at": "0001-01-01T00:00:00+01:00"}},
    ]
    clock.observe_resources(resources, "updated_at", received=T0)
    assert clock.offset == -40

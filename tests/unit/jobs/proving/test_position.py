"""`sync.jobs.proving.position`: the proof's position read back from its stored form as it was
kept, the optional keys only once set."""

from __future__ import annotations

from sync.jobs.proving.position import Position


def test_a_fresh_position_keeps_only_the_keys_set() -> None:
    fresh = Position(started_at="2026-01-01T00:00:00.000Z")
    assert fresh.to_json() == {
        "unit": None,
        "index": 0,
        "scope": 0,
        "page": 1,
        "started_at": "2026-01-01T00:00:00.000Z",
    }
    assert Position.from_json(fresh.to_json()) == fresh
    assert Position.from_json(None) is None


def test_a_stored_position_reads_back_whole_and_the_next_unit_keeps_the_rest() -> None:
    stored = {
        "unit": "contacts@5",
        "index": 3,
        "scope": 1,
        "page": 4,
        "started_at": "2026-01-01T00:00:00.000Z",
        "types": {"contacts": {"started": "2026-01-01T00:00:00.000Z", "unresolved": 0}},
        "walked": [],
        "promised": False,
    }
    pos = Position.from_json(stored)
    assert pos is not None and pos.to_json() == stored
    after = pos.next_unit("contacts@6", 4)
    assert after.to_json() == {**stored, "unit": "contacts@6", "index": 4, "scope": 0, "page": 1}
    assert after.types is pos.types  # the types' entries go on with the cycle

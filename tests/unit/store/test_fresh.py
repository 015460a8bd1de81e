"""`sync.store.fresh`: the bitmap of ids written to tables this process created."""

from __future__ import annotations

from sync.store.fresh import LIMIT, FreshIds


def test_an_untracked_table_knows_nothing_absent() -> None:
    fresh = FreshIds()
    fresh.add("deals", [1, 2])
    assert not fresh.tracked("deals")
    assert fresh.absent("deals", [1, 2, 3]) == set()


def test_a_tracked_table_knows_the_ids_never_written() -> None:
    fresh = FreshIds()
    fresh.track("deals")
    fresh.add("deals", [0, 7, 8, 100_000])
    assert fresh.tracked("deals")
    assert fresh.absent("deals", [0, 1, 7, 8, 9, 100_000, 100_001, 5_000_000]) == {
        1,
        9,
        100_001,
        5_000_000,
    }


def test_ids_out_of_range_are_never_known_absent() -> None:
    """A negative id or one at LIMIT has no bit: "may exist", so the caller queries."""
    fresh = FreshIds()
    fresh.track("stores")
    fresh.add("stores", [-1, LIMIT, LIMIT + 5])
    assert fresh.absent("stores", [-1, LIMIT, LIMIT - 1]) == {LIMIT - 1}

"""`sync.store.fresh`: the per-table bitmap of ids written to tables this process created."""

from __future__ import annotations

from sync.store.fresh import FreshIds


def test_each_table_has_its_own_bits() -> None:
    fresh = FreshIds()
    fresh.track("deals")
    fresh.track("images")
    fresh.add("deals", [3])
    fresh.add("stores", [4])  # not tracked: nothing recorded, nothing answered
    assert fresh.absent("images", [3]) == {3}
    assert fresh.absent("deals", [3, 4]) == {4}
    assert not fresh.tracked("stores") and fresh.absent("stores", [4]) == set()


def test_neighbouring_bits_and_growth_keep_every_answer_exact() -> None:
    """Ids on either side of a byte boundary, then one far away: the bitmap grows zero-filled."""
    fresh = FreshIds()
    fresh.track("tags")
    fresh.add("tags", [7, 8])
    assert fresh.absent("tags", range(6, 10)) == {6, 9}
    fresh.add("tags", [3_000_001])
    assert fresh.absent("tags", [7, 8, 2_999_999, 3_000_000, 3_000_001, 3_000_002]) == {
        2_999_999,
        3_000_000,
        3_000_002,
    }


def test_tracking_again_starts_the_table_empty() -> None:
    fresh = FreshIds()
    fresh.track("deals")
    fresh.add("deals", [1, 2])
    fresh.track("deals")  # created anew (dropped and made again): nothing written to it yet
    assert fresh.absent("deals", [1, 2]) == {1, 2}

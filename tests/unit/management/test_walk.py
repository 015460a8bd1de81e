"""sync.management.walk: what a walk of the press release list proves, sorted or not, and why not."""

from __future__ import annotations

from sync.management.walk import Walk


def test_an_unsorted_walk_proves_only_a_list_served_whole_on_one_page() -> None:
    several = Walk()
    several.add([1, 2], offset=0, first=True, last=True)  # sorted pages, forgotten below
    several.unsorted()
    several.add([5, 1], offset=0, first=True, last=False)
    several.add([9, 3], offset=2, first=False, last=True)
    assert not several.by_id and several.ordered
    assert not any(several.proves_absent(i) for i in (0, 2, 4, 7, 10))
    assert several.why_unproven().startswith("the upstream refused sort_by[]")
    whole = Walk()
    whole.unsorted()
    whole.add([5, 1], offset=0, first=True, last=True)
    assert whole.proves_absent(2) and whole.proves_absent(100)


def test_add_page_places_each_page_at_its_offset() -> None:
    walk = Walk()
    walk.add_page([{"id": 1}, {"id": 2}], 1, 2, last=False)
    walk.add_page([{"id": 7}, {"id": 8}], 2, 2, last=False)
    walk.add_page([{"id": 20}], 3, 2, last=True)
    assert walk.boundaries == [(2, 7, 2), (8, 20, 4)]
    assert (walk.boundary_of(5), walk.boundary_of(12), walk.boundary_of(7)) == (2, 4, None)
    assert walk.proves_absent(21) and not walk.proves_absent(3)
    assert (
        walk.why_unproven() == "the listing shifted between pages: no page proves these rows gone"
    )


def test_a_page_outside_the_walk_proves_its_gaps_but_never_unorders_it() -> None:
    walk = Walk()
    walk.add([1, 2], offset=0, first=True, last=False)
    walk.add([10, 11], offset=2, first=False, last=True)
    walk.add([3, 1], offset=1, first=False, last=False, part_of_walk=False)  # out of order
    assert walk.ordered
    walk.add([2, 4, 10], offset=1, first=False, last=False, part_of_walk=False)
    assert walk.ordered and walk.proves_absent(3) and walk.proves_absent(5)
    assert walk.boundaries == [(2, 10, 2)]  # a confirming page adds no boundary


def test_an_empty_list_proves_everything_gone_and_a_disorder_says_so() -> None:
    empty = Walk()
    empty.add([], offset=0, first=True, last=True)
    assert empty.gaps == [(None, None)] and empty.proves_absent(1)
    mixed = Walk()
    mixed.add([3, 3], offset=0, first=True, last=True)
    assert not mixed.ordered and not mixed.proves_absent(1)
    assert mixed.why_unproven() == "listing not in the requested order"

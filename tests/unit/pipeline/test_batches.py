"""sync.pipeline.batches: trimming a staged batch (`Staged.keep`) and a page's newest stamp."""

from __future__ import annotations

from sync.model import catalogue
from sync.pipeline.batches import Staged, StagedPage


def _batch() -> Staged:
    return Staged(
        "images",
        ids=[1, 2, 3],
        columns=("updated_at",),
        rows=[(1, "a"), (2, "b"), (3, "c")],
        links={"tags": [(1, [7]), (2, [8]), (3, [])]},
        versions=["a", "b", "c"],
    )


def test_keep_trims_ids_rows_versions_and_links_alike() -> None:
    b = _batch()
    b.keep([True, False, True])
    assert b.ids == [1, 3] and b.rows == [(1, "a"), (3, "c")] and b.versions == ["a", "c"]
    assert b.links == {"tags": [(1, [7]), (3, [])]}
    assert b.rtype is catalogue.TYPES["images"]


def test_keep_everything_changes_nothing_and_a_listed_batch_has_no_versions() -> None:
    b = _batch()
    rows = b.rows
    b.keep([True, True, True])
    assert b.rows is rows and b.ids == [1, 2, 3]
    listed = Staged("deals", ids=[4, 5], rows=[(4,), (5,)])
    listed.keep([False, True])
    assert listed.ids == [5] and listed.rows == [(5,)] and listed.versions is None


def test_newest_is_the_largest_stamp_of_the_listed_rows_only() -> None:
    listed = Staged(
        "deals",
        ids=[1, 2, 3],
        columns=("title", "updated_at"),
        rows=[
            (1, "x", "2026-01-02T00:00:00.000Z"),
            (2, "y", None),
            (3, "z", "2026-01-03T00:00:00.000Z"),
        ],
    )
    included = Staged("images", ids=[9], columns=("updated_at",), rows=[(9, "2030-01-01")])
    page = StagedPage(batches=[listed, included], resources=3, number=1, last=1)
    assert page.newest() == "2026-01-03T00:00:00.000Z"
    assert page.rows == 3 and page.not_modified is False
    assert StagedPage(batches=[], resources=0, number=1, last=1).newest() is None
    unstamped = Staged("tags", ids=[1], columns=("name",), rows=[(1, "a")])
    assert StagedPage(batches=[unstamped], resources=1, number=1, last=1).newest() is None
    nulls = Staged("deals", ids=[1], columns=("updated_at",), rows=[(1, None)])
    assert StagedPage(batches=[nulls], resources=1, number=1, last=1).newest() is None

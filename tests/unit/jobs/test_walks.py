"""`sync.jobs.walks`: the walk by key asks from the newest stamp seen, refuses pages out of
order; the unsorted walk leaves out older rows and keeps its cursor when the listing moved."""

from __future__ import annotations

from typing import Any

import pytest

from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.jobs.walks import OutOfOrder, walk_by_stamp, walk_unsorted


def _s(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000Z"


def _page(rows: list[tuple[int, str | None]], number: int = 1, last: int = 1) -> Page:
    docs: list[dict[str, Any]] = [{"id": str(i), "attributes": {"updated_at": s}} for i, s in rows]
    return Page(docs, [], {}, number, last, None)


class Keyed:
    """A listing sorted by `updated_at`, page 1 of each `filter[updated_at][op]=anchor` asked
    of pages of `size` rows; records each anchor asked."""

    def __init__(self, rows: list[tuple[int, str]], size: int) -> None:
        self.rows = sorted(rows, key=lambda r: (r[1], r[0]))
        self.size = size
        self.asked: list[tuple[str, str, int]] = []

    async def __call__(
        self,
        anchor: str,
        number: int,
        sort: str = "updated_at",
        *,
        op: str = "gte",
        until: Any = None,
    ) -> Page:
        self.asked.append((anchor, op, number))
        kept = [r for r in self.rows if (r[1] >= anchor if op == "gte" else r[1] > anchor)]
        return _page(
            kept[: number * self.size][-self.size :], number, max(1, -(-len(kept) // self.size))
        )


async def test_each_request_asks_from_the_newest_stamp_read_so_far() -> None:
    listing = Keyed([(1, _s(1)), (2, _s(2)), (3, _s(3)), (4, _s(4)), (5, _s(5))], size=2)
    pages: list[list[str]] = []
    result = await walk_by_stamp(
        listing,
        _s(0),
        "updated_at",
        Paging(2),
        2,
        lambda p: pages.append([r["id"] for r in p.resources]),
    )
    # The boundary row is read twice (each page starts at the newest stamp of the one before).
    assert [a for a, _, _ in listing.asked] == [_s(0), _s(2), _s(3), _s(4), _s(5)]
    assert pages == [["1", "2"], ["2", "3"], ["3", "4"], ["4", "5"], ["5"]]
    assert (result.requests, result.rows, result.cursor, result.ties) == (5, 9, _s(5), 0)


async def test_a_page_out_of_stamp_order_is_written_then_refused() -> None:
    written: list[Page] = []

    async def fetch(anchor: str, number: int, sort: str = "updated_at", **_: Any) -> Page:
        return _page([(1, _s(5)), (2, _s(3))])

    with pytest.raises(OutOfOrder, match="rows out of updated_at order on page 1"):
        await walk_by_stamp(fetch, _s(0), "updated_at", Paging(100), 100, written.append)
    assert len(written) == 1  # the rows are real: written before the walk stops


async def test_a_full_page_without_a_readable_stamp_cannot_move_the_key() -> None:
    async def fetch(anchor: str, number: int, sort: str = "updated_at", **_: Any) -> Page:
        return _page([(1, None), (2, "yesterday")])

    with pytest.raises(OutOfOrder, match="no readable updated_at on page 1"):
        await walk_by_stamp(fetch, _s(0), "updated_at", Paging(2), 2, lambda p: None)


async def test_the_unsorted_walk_leaves_out_older_rows_and_takes_the_newest_stamp() -> None:
    pages = {
        1: _page([(1, _s(1)), (2, _s(9))], 1, 2),
        2: _page([(3, _s(4)), (4, None)], 2, 2),
        3: _page([], 3, 2),
    }
    kept: list[str] = []

    async def fetch(number: int) -> Page:
        return pages[number]

    result = await walk_unsorted(
        fetch,
        _s(4),
        "updated_at",
        Paging(2),
        2,
        lambda p: kept.extend(r["id"] for r in p.resources),
    )
    # Row 1 is older than `since`; a row without a stamp is kept (it moves no cursor).
    assert kept == ["2", "3", "4"]
    assert (result.requests, result.rows, result.cursor) == (3, 3, _s(9))


async def test_the_unsorted_walk_keeps_its_cursor_when_links_last_moved() -> None:
    """The listing grew while walked: the next poll reads it again from `since`."""
    pages = {
        1: _page([(1, _s(7)), (2, _s(8))], 1, 2),
        2: _page([(3, _s(9))], 2, 3),
        3: _page([], 3, 3),
    }

    async def fetch(number: int) -> Page:
        return pages[number]

    result = await walk_unsorted(fetch, _s(5), "updated_at", Paging(2), 2, lambda p: None)
    assert result.rows == 3
    assert result.cursor == _s(5)

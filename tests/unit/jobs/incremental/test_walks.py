"""`sync.jobs.incremental.walks`: the walk by key asks from the newest stamp seen, refuses pages out of
order; the unsorted walk leaves out older rows and keeps its cursor when the listing moved."""

from __future__ import annotations

from typing import Any

import pytest

from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.jobs.incremental.walks import Compares, OutOfOrder, TieOrder, walk_by_stamp, walk_unsorted


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


# -- what a date filter compares, and progress (#45) -------------------------------------------


class Precise:
    """A listing whose stamps are kept in microseconds (`YYYY-MM-DDTHH:MM:SS.ffffff`), served
    at milliseconds (cut, or `rounded`), and filtered at full precision, as PostgreSQL behind
    Rails does; sorted by stamp (ties by id) or by id, by page number. After `limit` requests
    it fails the test: a walk that loops is caught, not waited for."""

    def __init__(
        self, rows: list[tuple[int, str]], size: int, *, rounded: bool = False, limit: int = 60
    ) -> None:
        self.rows = rows
        self.size = size
        self.rounded = rounded
        self.limit = limit
        self.asked: list[dict[str, Any]] = []

    def served(self, precise: str) -> str:
        if not self.rounded:
            return precise[:23] + "Z"
        micro = int(precise[20:26])
        ms = (micro + 500) // 1000
        from sync.model.stamps import shift_ms

        return shift_ms(precise[:20] + "000Z", ms)

    async def __call__(
        self,
        anchor: str,
        number: int,
        sort: str = "updated_at",
        *,
        op: str = "gte",
        until: str | None = None,
        until_op: str = "lte",
    ) -> Page:
        self.asked.append({"anchor": anchor, "op": op, "until": until, "until_op": until_op})
        assert len(self.asked) <= self.limit, "the walk kept asking: a loop"

        def passes(stamp: str, value: str, how: str) -> bool:
            v = value.rstrip("Z") + "000"
            return {
                "gte": stamp >= v,
                "gt": stamp > v,
                "lte": stamp <= v,
                "lt": stamp < v,
            }[how]

        kept = [r for r in self.rows if passes(r[1], anchor, op)]
        if until is not None:
            kept = [r for r in kept if passes(r[1], until, until_op)]
        kept.sort(key=(lambda r: r[0]) if sort == "id" else (lambda r: (r[1], r[0])))
        window = kept[(number - 1) * self.size : number * self.size]
        docs = [{"id": str(i), "attributes": {"updated_at": self.served(s)}} for i, s in window]
        return Page(docs, [], {}, number, max(1, -(-len(kept) // self.size)), None)


def _bulk(n: int, precise: str, first: int = 1) -> list[tuple[int, str]]:
    return [(i, precise) for i in range(first, first + n)]


async def test_a_bulk_update_under_one_microsecond_stamp_is_read_whole_and_learned() -> None:
    """150 rows at T.000123 (served T.000): `gte=T&lte=T` holds none of them. The walk
    learns that the filter compares finer, reads the run to the next millisecond, goes on
    from there, and reads every row within a few requests (today: a loop at the budget)."""
    later = [(500 + i, f"2026-01-01T00:00:05.{i:03d}456") for i in range(1, 11)]
    listing = Precise([*_bulk(150, "2026-01-01T00:00:01.000123"), *later], size=100)
    learned: list[tuple[str, str]] = []
    seen: set[str] = set()
    result = await walk_by_stamp(
        listing,
        _s(0),
        "updated_at",
        Paging(100),
        100,
        lambda p: seen.update(r["id"] for r in p.resources),
        Compares(learned=lambda level, why: learned.append((level, why))),
    )
    assert len(seen) == 160 and result.stalled is None
    assert result.cursor == "2026-01-01T00:00:05.010Z"
    assert [level for level, _ in learned] == ["finer"]
    assert result.requests <= 6, listing.asked
    # What was learned is used: read again knowing it, no request is spent on the empty run.
    again = Precise(listing.rows, size=100)
    known = await walk_by_stamp(
        again, _s(0), "updated_at", Paging(100), 100, lambda p: None, Compares("finer")
    )
    assert known.requests == result.requests - 1
    assert any(a["until_op"] == "lt" for a in again.asked)


async def test_stamps_rounded_to_the_millisecond_are_learned_a_step_further() -> None:
    """Served stamps rounded (T.000700 served T.001): the run is read from a millisecond
    before to a millisecond after, every row once more, none skipped."""
    rows = [*_bulk(120, "2026-01-01T00:00:01.000700"), *_bulk(5, "2026-01-01T00:00:02.000100", 900)]
    listing = Precise(rows, size=100, rounded=True)
    seen: set[str] = set()
    compares = Compares()
    result = await walk_by_stamp(
        listing,
        _s(0),
        "updated_at",
        Paging(100),
        100,
        lambda p: seen.update(r["id"] for r in p.resources),
        compares,
    )
    assert len(seen) == 125 and result.stalled is None
    assert compares.level == "rounded"
    assert result.requests <= 8, listing.asked


async def test_a_listing_that_ignores_every_filter_ends_each_walk_within_a_few_requests() -> None:
    """A full page served whatever is asked: the walk by key cannot read the run by id
    (`TieOrder`), and the unsorted walk the poll then takes ends on the progress rule
    (`PollResult.stalled`); the rows are written, and a few requests are spent in all instead
    of the whole budget."""
    page = _page([(i, _s(1)) for i in range(1, 101)], 1, 3)
    calls = 0

    async def fetch(anchor: str, number: int, sort: str = "updated_at", **_: Any) -> Page:
        nonlocal calls
        calls += 1
        assert calls <= 60, "a loop"
        return page

    written: list[Page] = []
    with pytest.raises(TieOrder) as caught:
        await walk_by_stamp(fetch, _s(0), "updated_at", Paging(100), 100, written.append)
    rest = await walk_unsorted(
        lambda n: fetch(caught.value.at, n, "id"),
        caught.value.at,
        "updated_at",
        Paging(100),
        100,
        written.append,
    )
    assert rest.stalled is not None and "served again 100 rows" in rest.stalled
    assert rest.cursor is None  # read by id: no cursor moves past rows not reached
    assert calls <= 8 and written


async def test_a_run_that_comes_back_past_every_bound_ends_the_walk_saying_why() -> None:
    """An upstream whose filters past a run keep serving the run (whatever the bound): the
    walk widens as far as there is a reading, then ends with `stalled`, its cursor at the
    run, instead of reading the run again and again."""
    run = [(i, _s(1)) for i in range(1, 101)]
    calls = 0

    async def fetch(
        anchor: str, number: int, sort: str = "updated_at", *, until: Any = None, **_: Any
    ) -> Page:
        nonlocal calls
        calls += 1
        assert calls <= 60, "a loop"
        if until is not None:  # the run by id: served as asked
            return _page(run if number == 1 else [], number, 1)
        # Past the run: the run again, in another order each time (never quite the same page).
        k = calls % 100
        return _page([*run[k:], *run[:k]], 1, 2)

    result = await walk_by_stamp(fetch, _s(0), "updated_at", Paging(100), 100, lambda p: None)
    assert result.stalled is not None and result.cursor == _s(1)
    assert calls <= 12

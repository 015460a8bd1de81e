"""sync.channel.paging: `Paging`'s bounds, learning and keeping, `walk` with a keyed step, and `reask`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from sync.channel.paging import META_KEY, REASKS, SPEC_MAX, Paging, reask
from sync.core.errors import NotFoundError, UpstreamError


@dataclass(frozen=True)
class _Page:
    number: int
    last: int
    rows: int
    not_modified: bool = False
    content: int | None = None  # what the page holds (None: its own, by number)

    def digest(self) -> int:
        return hash(self.number if self.content is None else ("content", self.content))


def test_the_size_asked_is_held_to_the_spec_s_range() -> None:
    assert Paging(500).asked == SPEC_MAX
    assert Paging(0).asked == 1
    assert Paging(30).size == 30


def test_a_not_modified_page_ends_a_walk_even_when_full() -> None:
    assert not Paging(2).more(_Page(1, 5, 2, not_modified=True))
    assert Paging(2).more(_Page(1, 5, 2))


def test_the_served_bound_only_ever_goes_down_and_each_change_is_told() -> None:
    changes: list[str] = []
    paging = Paging(100, on_change=lambda p: changes.append(p.dump()))
    paging.learn(40)
    paging.learn(60)  # larger than the bound seen: nothing learned
    paging.learn(0)
    paging.learn(30)
    assert (paging.served, paging.size) == (30, 30)
    assert changes == ["100:40", "100:30"]
    # a page asked smaller than the bound: full at what was asked
    assert paging.more_after(1, 10, 1, asked=10)


def test_refused_halves_down_to_one_then_gives_up() -> None:
    paging = Paging(20)
    sizes = []
    while paging.refused():
        sizes.append(paging.asked)
    assert sizes == [10, 5, 2, 1]
    assert paging.asked == 1


def test_keep_restores_only_what_is_smaller_and_well_formed() -> None:
    meta = {META_KEY: "30:20"}
    paging = Paging(100)
    paging.keep(meta.get, meta.__setitem__)
    assert (paging.asked, paging.served) == (30, 20)
    paging.refused()
    assert meta[META_KEY] == "25:20"
    for damaged, asked, served in (
        ("", 50, None),
        ("x:y", 50, None),
        ("80:", 50, None),
        ("0:0", 50, None),
    ):
        fresh = Paging(50)
        fresh.load(damaged)
        assert (fresh.asked, fresh.served) == (asked, served), damaged


async def test_a_keyed_walk_steps_by_what_each_page_says() -> None:
    """The polls walk by stamp: the next position comes from the page, not a number."""
    pages = {"a": _Page(1, 9, 2), "b": _Page(2, 9, 2), "c": _Page(3, 3, 1)}
    asked: list[str] = []

    async def fetch(position: str) -> _Page:
        asked.append(position)
        return pages[position]

    def step(position: str, page: _Page) -> str:
        return chr(ord(position) + 1)

    got = [p.number async for p in Paging(2).walk(fetch, "a", step)]
    assert got == [1, 2, 3] and asked == ["a", "b", "c"]


async def test_a_first_page_not_promised_may_be_past_the_end_other_errors_are_raised() -> None:
    async def gone(position: int) -> _Page:
        raise NotFoundError("Invalid page.", url="u", status=404)

    assert [p async for p in Paging(2).walk(gone, 4, lambda n, p: n + 1, promised=False)] == []

    async def broken(position: int) -> _Page:
        raise UpstreamError("boom", url="u", status=500)

    with pytest.raises(UpstreamError, match="boom"):
        [p async for p in Paging(2).walk(broken, 4, lambda n, p: n + 1, promised=False)]


def _answers(*outcomes: object) -> Callable[[], Awaitable[_Page]]:
    queue = list(outcomes)

    async def fetch() -> _Page:
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, _Page)
        return outcome

    return fetch


def _promises(*answers: bool) -> Callable[[], Awaitable[bool]]:
    queue = list(answers)

    async def still() -> bool:
        return queue.pop(0)

    return still


async def test_reask_ends_when_the_promise_is_withdrawn_and_raises_what_is_no_refusal() -> None:
    first = NotFoundError("gone", url="u", status=404)
    assert await reask(_answers(), _promises(False), first) is None
    page = _Page(3, 3, 1)
    again = UpstreamError("refused", url="u", status=400)
    assert await reask(_answers(again, page), _promises(True, True), first) == page
    with pytest.raises(UpstreamError, match="server") as info:
        await reask(_answers(UpstreamError("server", url="u", status=503)), _promises(True), first)
    assert info.value.status == 503
    last = NotFoundError("still gone", url="u", status=404)
    with pytest.raises(NotFoundError, match="still gone"):
        await reask(_answers(*[last] * REASKS), _promises(*[True] * REASKS), first)


async def test_a_page_served_again_ends_the_walk_instead_of_looping() -> None:
    """An upstream that ignores `page[number]` serves page 1 for every number: the second
    request brings nothing new and the walk ends there (`NoProgressError`), not at the
    whole request budget."""
    from sync.core.errors import NoProgressError

    asked: list[int] = []

    async def fetch(n: int) -> _Page:
        asked.append(n)
        assert len(asked) <= 50, "a loop"
        return _Page(n, 3, 100, content=1)

    with pytest.raises(NoProgressError, match="page 2 served again 100 rows"):
        async for _ in Paging(100).walk(fetch, 1, lambda n, p: n + 1):
            pass
    assert asked == [1, 2]

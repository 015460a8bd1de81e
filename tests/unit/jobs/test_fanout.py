"""`sync.jobs.fanout`: `bounded` keeps at most `limit` in flight, and a failure cancels the rest."""

from __future__ import annotations

import asyncio

import pytest

from sync.jobs.fanout import bounded


async def test_at_most_limit_run_at_once_and_every_item_runs() -> None:
    in_flight = 0
    most = 0
    done: list[int] = []

    async def work(i: int) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        in_flight -= 1
        done.append(i)

    await bounded(range(7), 3, work)
    assert most == 3
    assert sorted(done) == list(range(7))


async def test_items_are_drawn_lazily_and_a_failure_cancels_its_siblings() -> None:
    """After the first failure no further item is drawn from the iterator, and the tasks in
    flight are cancelled (never left running against a mirror about to close)."""
    drawn: list[int] = []
    cancelled: list[int] = []
    gate = asyncio.Event()

    def items() -> object:
        for i in range(100):
            drawn.append(i)
            yield i

    async def work(i: int) -> None:
        if i == 0:
            raise RuntimeError("page 0 failed")
        try:
            await gate.wait()
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    with pytest.raises(RuntimeError, match="page 0 failed"):
        await bounded(items(), 2, work)  # type: ignore[arg-type]
    # Item 2 was drawn while two were in flight, and never started: 0 failed first.
    assert drawn == [0, 1, 2]
    assert cancelled == [1]


async def test_no_items_is_no_work() -> None:
    calls: list[int] = []

    async def work(i: int) -> None:
        calls.append(i)

    await bounded([], 4, work)
    assert calls == []

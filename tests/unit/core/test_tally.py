"""sync.core.tally: a run's requests and figures, counted per task through a context variable."""

from __future__ import annotations

import asyncio

from sync.core import tally


def test_outside_a_run_nothing_is_counted_and_nothing_fails() -> None:
    tally.request()
    tally.note(rows=3)
    with tally.counting() as t:
        pass
    assert t.requests == 0 and not t.did


def test_notes_add_up_and_zero_figures_are_left_out() -> None:
    with tally.counting() as t:
        tally.request()
        tally.request()
        tally.note(rows=3, deletions=0)
        tally.note(rows=2, verified=1)
    assert t.requests == 2
    assert dict(t.did) == {"rows": 5, "verified": 1}


def test_a_nested_run_counts_into_itself_and_the_run_it_is_part_of() -> None:
    """The daemon's first backfill runs inside a job, a worker batch inside the worker: the
    inner line shows its own requests, the outer line all of them (`Tally.parent`)."""
    with tally.counting() as outer:
        tally.request()
        with tally.counting() as inner:
            tally.request()
            tally.note(rows=1)
        tally.request()
    assert (outer.requests, dict(outer.did)) == (3, {"rows": 1})
    assert (inner.requests, dict(inner.did)) == (1, {"rows": 1})
    assert tally._current.get() is None  # closed: nothing counts after the runs


def test_child_tasks_count_into_their_parents_run_other_tasks_do_not() -> None:
    async def main() -> tuple[int, int]:
        async def child() -> None:
            tally.request()

        with tally.counting() as mine:
            await asyncio.gather(asyncio.create_task(child()), asyncio.create_task(child()))
        other = asyncio.create_task(child())  # started after the run: not counted
        await other
        return mine.requests, tally._current.get() is None

    assert asyncio.run(main()) == (2, True)


def test_a_summary_sums_per_key_and_is_taken_once_per_interval() -> None:
    now = [0.0]
    summary = tally.Summary(10.0, clock=lambda: now[0])
    assert summary.take() is None  # nothing yet
    summary.add("deals", notices=1, requests=1)
    assert summary.take() == {"deals": {"notices": 1, "requests": 1}}  # the first at once
    summary.add("deals", notices=2, requests=1)
    summary.add("articles", notices=1)
    now[0] = 9.9
    assert summary.take() is None
    now[0] = 10.0
    assert summary.take() == {
        "articles": {"notices": 1},
        "deals": {"notices": 2, "requests": 1},
    }
    summary.add("deals", notices=1)
    assert summary.take(force=True) == {"deals": {"notices": 1}}

"""sync.readers.backlog: the queue's `filter[id]` requests and time to drain at the budget."""

from __future__ import annotations

from sync.readers.backlog import queue_drain, queue_line


def test_each_lane_is_asked_apart_at_the_served_page_size_and_timed_at_the_budget() -> None:
    """A 100,000-id lane and a 9,999-id one: 1,000 + 100 requests, 55 s at 20 a second; an
    upstream serving pages of 50 doubles them; no budget, no time."""
    assert queue_drain([100_000, 9_999], {"asked": 100, "served": None}, 20.0) == {
        "queue_requests": 1_100,
        "queue_ids_per_request": 100,
        "queue_drain_s": 55.0,
    }
    assert (
        queue_drain([100_000, 9_999], {"asked": 100, "served": 50}, 20.0)["queue_requests"] == 2_200
    )
    assert queue_drain([1], None, None)["queue_drain_s"] is None
    assert queue_drain([], {"asked": 100, "served": None}, 20.0)["queue_requests"] == 0


def test_the_line_gives_the_depth_and_the_drain_time_when_there_is_a_backlog() -> None:
    data = {"queue_depth": 109_999, **queue_drain([100_000, 9_999], None, 20.0)}
    assert queue_line(data) == (
        "queue: 109,999 notices waiting (1,100 filter[id] requests of up to 100 ids: "
        "about 55 s at the request budget)"
    )
    assert queue_line({"queue_depth": 0, **queue_drain([], None, 20.0)}) == (
        "queue: 0 notices waiting"
    )
    hours = {"queue_depth": 1_000_000, **queue_drain([1_000_000], None, 0.5)}
    assert queue_line(hours).endswith("about 5.6 h at the request budget)")
    unbudgeted = {"queue_depth": 1, **queue_drain([1], None, None)}
    assert queue_line(unbudgeted).endswith("no request budget to time them by)")

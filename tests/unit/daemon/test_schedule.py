"""sync.daemon.schedule: an overdue job's jitter window, stamps, job priorities, first runs across
restarts, the verify's and the proof's ticks, the poll cycle and the bound the budget keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sync.channel.budget import Priority
from sync.daemon import schedule
from sync.daemon.schedule import (
    CATCH_UP,
    JOB_PRIORITY,
    OVERDUE_JITTER,
    VERIFY_TICK,
    first_run,
    parse_stamp,
    poll_cycle,
    verify_share,
    verify_tick,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PAST = "2025-12-31T23:00:00.000Z"
DAY = 86400.0


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """The bounds `first_run` draws an overdue job's delay between (it takes the low one)."""
    asked: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        asked.append((low, high))
        return low

    monkeypatch.setattr(schedule.random, "uniform", uniform)
    return asked


def test_an_overdue_job_starts_within_a_tenth_of_its_interval_bounded(
    window: list[tuple[float, float]],
) -> None:
    assert first_run("hours", 200.0, 200.0, PAST, NOW) == NOW + timedelta(seconds=5)
    first_run("reconcile", 86400.0, 86400.0, PAST, NOW)
    first_run("subscriptions", 30.0, 30.0, PAST, NOW)
    first_run("changes", 3.0, 3.0, PAST, NOW)
    # every / 10, at least 5 s and at most 60 s; never past one interval.
    assert window == [(5.0, 20.0), (5.0, 60.0), (5.0, 5.0), (3.0, 3.0)]


def test_a_next_run_stored_as_now_is_overdue(window: list[tuple[float, float]]) -> None:
    assert first_run("verify", 600.0, 600.0, "2026-01-01T00:00:00.000Z", NOW) == NOW + timedelta(
        seconds=5
    )
    assert window == [(5.0, 60.0)]


def test_only_the_bookkeeping_stamp_form_parses() -> None:
    assert parse_stamp("2026-01-01T00:00:00.250Z") == NOW + timedelta(milliseconds=250)
    assert parse_stamp("2026-01-01T00:00:00Z") is None
    assert parse_stamp("2026-01-01T00:00:00.000+00:00") is None
    assert parse_stamp("") is None


def test_jobs_spend_the_budget_at_their_priority_and_cycles_round_to_a_tenth() -> None:
    assert JOB_PRIORITY["poll"] == JOB_PRIORITY["deletions"] == Priority.POLL
    assert JOB_PRIORITY["verify"] == JOB_PRIORITY["reconcile"] == Priority.RECONCILE
    assert JOB_PRIORITY["proof"] == Priority.PROOF
    assert JOB_PRIORITY["hours"] == JOB_PRIORITY["changes"] == Priority.HOURS
    assert poll_cycle(10, 3.0, 30.0) == {
        "requests": 10,
        "seconds_at_budget": 3.3,
        "staleness_bound_s": 33.3,
    }
    assert poll_cycle(0, 0.0, 30.0)["seconds_at_budget"] == 0.0


def test_first_run_keeps_the_schedule_across_restarts() -> None:
    # Polls and the deletions feed catch up at once, whatever was stored.
    assert first_run("poll", 60.0, CATCH_UP, "2026-01-01T00:00:50.000Z", NOW) == NOW + timedelta(
        seconds=CATCH_UP
    )
    # Never run: one interval from now.
    assert first_run("reconcile", DAY, DAY, None, NOW) == NOW + timedelta(days=1)
    # Still ahead: kept.
    ahead = first_run("reconcile", DAY, DAY, "2026-01-01T05:00:00.000Z", NOW)
    assert ahead == NOW + timedelta(hours=5)
    # Overdue (a restart more often than the interval): soon, with jitter, never a full day.
    for _ in range(50):
        due = first_run("reconcile", DAY, DAY, "2025-12-31T00:00:00.000Z", NOW)
        assert NOW + timedelta(seconds=OVERDUE_JITTER[0]) <= due
        assert due <= NOW + timedelta(seconds=OVERDUE_JITTER[1])


def test_a_stored_run_is_capped_at_one_interval_and_junk_is_ignored() -> None:
    """A next run stored by a process with a longer interval is not waited for; a stamp the
    bookkeeping never writes counts as none."""
    far = first_run("hours", 3600.0, 3600.0, "2026-02-01T00:00:00.000Z", NOW)
    assert far == NOW + timedelta(hours=1)
    assert first_run("hours", 3600.0, 3600.0, "yesterday", NOW) == NOW + timedelta(hours=1)
    assert parse_stamp("yesterday") is None
    assert parse_stamp("2026-01-01T00:00:00.000Z") == NOW


def test_an_overdue_job_with_a_short_interval_runs_within_it() -> None:
    for _ in range(50):
        due = first_run("subscriptions", 10.0, 10.0, "2025-12-31T00:00:00.000Z", NOW)
        assert NOW < due <= NOW + timedelta(seconds=10.0)


def test_the_verify_ticks_at_most_every_minute_and_a_cycle_takes_its_interval() -> None:
    assert verify_tick(7 * DAY) == VERIFY_TICK
    assert verify_tick(300.0) == 3.0  # a short interval: still about 100 steps
    assert verify_tick(10.0) == 1.0  # never below a second
    # The shares of the ticks in one interval add up to the cycle's cost.
    cost, interval = 12_345, DAY
    steps = interval / verify_tick(interval)
    assert abs(verify_share(cost, interval) * steps - cost) < 1e-6


def test_the_poll_cycle_and_its_staleness_bound() -> None:
    assert poll_cycle(41, 20.0, 60.0) == {
        "requests": 41,
        "seconds_at_budget": 2.0,
        "staleness_bound_s": 62.0,
    }
    # No request budget: the cycle is as fast as the upstream answers.
    assert poll_cycle(41, 0.0, 60.0)["staleness_bound_s"] == 60.0


def test_the_proof_ticks_at_most_every_minute_and_a_cycle_takes_the_bound() -> None:
    from sync.jobs.proving.pacing import PROOF_TICK, cycle_cost, proof_share, proof_tick

    assert proof_tick(3600.0) == PROOF_TICK
    assert proof_tick(300.0) == 15.0  # a short bound: still about 20 ticks a cycle
    assert proof_tick(4.0) == 1.0  # never below a second
    # One page per 100 rows of each scope, one at least (an empty scope is still asked).
    assert cycle_cost([0, 1, 100, 101, 250]) == 1 + 1 + 1 + 2 + 3
    # The shares of the ticks in one bound add up to the cycle's cost.
    cost, bound = 10_000, 3600.0
    assert abs(proof_share(cost, bound) * (bound / proof_tick(bound)) - cost) < 1e-6


def test_the_bound_the_request_budget_can_keep() -> None:
    from sync.jobs.proving.pacing import keepable_bound

    # 1M rows: 10,000 requests an hour is 2.8 / s, 14 % of 20 / s: it fits.
    fits = keepable_bound(10_000, 20.0, 3600.0)
    assert fits["fits"] is True and fits["short_by_s"] == 0.0 and fits["share"] == 0.1389
    # A small budget: half of 1 / s keeps a bound of 20,000 s, 16,400 s short of an hour.
    short = keepable_bound(10_000, 1.0, 3600.0)
    assert short == {"fits": False, "keepable_s": 20000.0, "short_by_s": 16400.0, "share": 2.7778}
    # No budget configured: any bound fits.
    assert keepable_bound(10_000, 0.0, 3600.0)["fits"] is True

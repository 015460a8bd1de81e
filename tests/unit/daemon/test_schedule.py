"""sync.daemon.schedule: an overdue job's jitter window, stamps, job priorities."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sync.channel.budget import Priority
from sync.daemon import schedule
from sync.daemon.schedule import JOB_PRIORITY, first_run, parse_stamp, poll_cycle

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PAST = "2025-12-31T23:00:00.000Z"


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

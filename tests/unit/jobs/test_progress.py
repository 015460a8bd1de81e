"""`sync.jobs.progress`: the rate's 7 characters, the log lines of `LogProgress`, a bar never
full before its type is done, and which progress a terminal gets."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console
from structlog.testing import capture_logs

from sync.jobs.progress import LogProgress, NullProgress, RichProgress, _rate, for_terminal


def test_a_rate_fits_in_seven_characters() -> None:
    assert _rate(0.4) == "0"
    assert _rate(12_345.6) == "12,346"
    assert _rate(99_999.0) == "99,999"
    assert _rate(100_000.0) == "100k"
    assert _rate(999_499.0) == "999k"
    assert _rate(1_250_000.0) == "1.2M"
    assert len(_rate(123_456_789_012.0)) <= 7


def test_log_progress_adds_up_pages_and_rows_per_type() -> None:
    progress = LogProgress(every=0.0)  # a line at every advance
    with capture_logs() as logs:
        with progress:
            progress.add_pages("deals", 3)
            progress.add_pages("deals", 2)
            progress.advance("deals", 100)
            progress.advance("deals", 50, pages=2)
            progress.done("deals")
            progress.done("events")  # never advanced: no line
    lines = [(e["event"], e["type"], e["pages"], e["pages_total"], e["rows"]) for e in logs]
    assert lines == [
        ("backfill.progress", "deals", 1, 5, 100),
        ("backfill.progress", "deals", 3, 5, 150),
        ("backfill.type_done", "deals", 3, 5, 150),
    ]


def test_log_progress_is_quiet_between_its_intervals() -> None:
    progress = LogProgress(every=3600.0)
    with capture_logs() as logs:
        progress.advance("deals", 10)
        progress.advance("deals", 10)
        progress.done("deals")
    assert [(e["event"], e["rows"]) for e in logs] == [("backfill.type_done", 20)]


def test_quiet_is_no_progress_and_a_pipe_gets_log_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe, not a terminal
    assert isinstance(for_terminal(quiet=True), NullProgress)
    assert isinstance(for_terminal(), LogProgress)
    with NullProgress() as null:
        null.add_pages("deals", 1)
        null.advance("deals", 1)
        null.done("deals")


def _rendered(bar: RichProgress) -> str:
    out = io.StringIO()
    console = Console(file=out, width=RichProgress.WIDTH, force_terminal=True, color_system=None)
    console.print(bar.table())
    return out.getvalue()


def test_a_bar_caught_up_with_a_growing_total_is_not_full_until_its_type_is_done() -> None:
    """A mall-scoped type's total grows scope by scope: pages done equal to pages known so far
    is not 100 % (#48): the bar stops at 99 % and the total reads `N+` until `done`."""
    bar = RichProgress()
    bar.add_pages("stores", 3)  # the first mall's listing: 3 pages
    bar.advance("stores", 300, pages=3)
    (task,) = bar._bar.tasks
    assert task.percentage < 100 and "3/3+ pages" in _rendered(bar)
    bar.add_pages("stores", 2)  # the next mall's
    bar.advance("stores", 150, pages=1)
    assert "4/5 pages" in _rendered(bar)
    bar.advance("stores", 50, pages=1)
    assert task.percentage < 100 and "5/5+ pages" in _rendered(bar)
    bar.done("stores")
    assert task.percentage == 100 and "5/5 pages" in _rendered(bar)

"""`sync.jobs.progress`: the rate's 7 characters, the log lines of `LogProgress`, and which
progress a terminal gets."""

from __future__ import annotations

import io
import sys

import pytest
from structlog.testing import capture_logs

from sync.jobs.progress import LogProgress, NullProgress, _rate, for_terminal


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

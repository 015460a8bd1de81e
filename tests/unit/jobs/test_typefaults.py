"""`sync.jobs.typefaults`: a failing type's backoff doubles to its cap and ends on a success;
its outcome is recorded in the mirror (403 in `skipped_line`'s words)."""

from __future__ import annotations

from sync.core.errors import ForbiddenError
from sync.jobs.typefaults import TypeFaults, record_type, skipped_line
from sync.store import Mirror


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_backoff_doubles_per_failure_in_a_row_up_to_its_cap() -> None:
    faults = TypeFaults(base=2.0, cap=10.0, clock=Clock())
    assert [faults.failed("deals", "boom") for _ in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert faults.failing["deals"].failures == 5
    assert faults.succeeded("deals") is True
    assert faults.succeeded("deals") is False  # not failing any more
    assert faults.failed("deals", "again") == 2.0  # a new run of failures starts over


def test_due_next_due_and_problems_follow_the_clock() -> None:
    clock = Clock()
    faults = TypeFaults(base=4.0, cap=60.0, clock=clock)
    assert faults.next_due() is None and faults.problems() == []
    faults.failed("stores", "HTML instead of JSON")
    clock.t += 1.0
    faults.failed("deals", "body cut short")
    faults.failed("deals", "body cut short")  # 8 s from t=101
    assert not faults.due("stores") and not faults.due("deals") and faults.due("events")
    assert faults.next_due() == 3.0  # stores: retry at 104
    assert faults.problems() == [
        "deals failing (2 in a row, next try in 8 s): body cut short",
        "stores failing (1 in a row, next try in 3 s): HTML instead of JSON",
    ]
    clock.t = 104.0
    assert faults.due("stores") and not faults.due("deals")
    clock.t = 200.0
    assert faults.next_due() == 0.0  # overdue: never negative


def test_record_type_writes_success_error_and_403(mirror: Mirror) -> None:
    forbidden = ForbiddenError("account may not read /stores", status=403)
    assert skipped_line(forbidden) == (
        "not readable by this account (403); skipped: account may not read /stores"
    )
    assert record_type(mirror, "stores", forbidden, at=0.0) == skipped_line(forbidden)
    assert record_type(mirror, "deals", "retries spent", at=1.5) == "retries spent"
    assert record_type(mirror, "events", None, at=2.0) is None
    rows = mirror.conn.execute(
        "select type, last_sync_at, last_error, error_at from _sync_types order by type"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        ("deals", None, "retries spent", "1970-01-01T00:00:01.500Z"),
        ("events", "1970-01-01T00:00:02.000Z", None, None),
        ("stores", None, skipped_line(forbidden), "1970-01-01T00:00:00.000Z"),
    ]
    # A success ends the type's error.
    record_type(mirror, "deals", None, at=3.0)
    row = mirror.conn.execute("select last_error from _sync_types where type = 'deals'").fetchone()
    assert row[0] is None

"""sync.readers.verdict: the first line of `ccsync status` and the problems under it."""

from __future__ import annotations

from sync.readers.verdict import record, recorded, verdict, verdict_lines
from sync.store import Mirror

UP = {"running": True, "ready": True}


def test_the_verdict_says_healthy_degraded_starting_stopped_or_never_ran() -> None:
    assert verdict(UP, []) == "healthy"
    assert verdict(UP, ["upstream unreachable"]) == "degraded: upstream unreachable"
    assert verdict(UP, ["a", "b", "c"]) == "degraded: a (and 2 more below)"
    assert verdict({"running": True, "ready": False}, []) == "starting (first backfill)"
    stopped = {"running": False, "stopped_at": "2026-01-01T00:00:00.000Z"}
    assert verdict(stopped, ["poll error"]) == "stopped since 2026-01-01T00:00:00.000Z"
    killed = {**stopped, "last_status": "interrupted"}
    assert verdict(killed, []).endswith("(it ended without recording it: killed?)")
    assert verdict({"running": False, "stopped_at": None}, []) == "not running (never ran)"


def test_the_problems_follow_the_verdict_named_for_whether_a_daemon_runs() -> None:
    assert verdict_lines({"daemon": UP, "problems": ["x"]}) == ["degraded: x", "problem: x"]
    stopped = {"running": False, "stopped_at": "then"}
    assert verdict_lines({"daemon": stopped, "problems": ["x"]}) == [
        "stopped since then",
        "left by the last run: x",
    ]


def test_the_daemon_s_own_problems_are_kept_in_the_mirror(mirror: Mirror) -> None:
    assert recorded(mirror.meta) == {"ready": True, "problems": []}
    record(mirror.meta, ready=False, problems=["upstream unreachable: refused"])
    assert recorded(mirror.meta) == {"ready": False, "problems": ["upstream unreachable: refused"]}

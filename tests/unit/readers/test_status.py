"""sync.readers.status: job problems by a given clock, and the lines status prints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sync.readers.status import counted, job_problems, overdue_jobs, proof_lines, status_lines

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_failed_refused_and_overdue_jobs_are_problems_a_running_one_is_not_late() -> None:
    jobs: dict[str, dict[str, Any]] = {
        "verify": {"outcome": "refused", "error": None, "next_run_at": None},
        "poll": {
            "outcome": "error",
            "error": "HTTP 500",
            "started_at": "2026-01-01T11:00:00.000Z",
            "finished_at": "2026-01-01T11:00:01.000Z",
            "next_run_at": "2026-01-01T11:57:59.000Z",  # 121 s late: past the grace
        },
        "feed": {"next_run_at": "2026-01-01T11:58:00.000Z"},  # 120 s: within it
        "reconcile": {  # late, but running now
            "started_at": "2026-01-01T11:00:00.000Z",
            "finished_at": None,
            "next_run_at": "2026-01-01T10:00:00.000Z",
        },
    }
    assert job_problems(jobs, NOW) == [
        "poll error: HTTP 500",
        "poll overdue by 121 s",
        "verify refused: no detail",
    ]
    assert job_problems(jobs, NOW, overdue=False) == [
        "poll error: HTTP 500",
        "verify refused: no detail",
    ]
    assert overdue_jobs(jobs, NOW) == ["poll", "reconcile"]
    assert overdue_jobs({"x": {"next_run_at": "not a stamp"}}, NOW) == []


def test_counted_agrees_the_noun_with_the_number() -> None:
    assert counted(1, "notice") == "1 notice"
    assert counted(0, "notice") == "0 notices"
    assert counted(12345, "entry", "entries") == "12,345 entries"


def test_proof_lines_total_the_repairs_and_name_the_oldest_scope_and_lags() -> None:
    lines = proof_lines(
        {
            "staleness_bound_s": 600.0,
            "types": {
                "stores": {
                    "age_s": 30.0,
                    "scopes": 3,
                    "oldest_scope": "mall=7",
                    "oldest_scope_age_s": 500.4,
                    "unresolved": 2,
                    "why": "2 rows absent, deletion unconfirmed",
                }
            },
            "repairs": {"deals": {"missing": 2, "stale": 1}, "stores": {"missing": 1}},
            "change_lag": {
                "deals": {
                    "poll": {"count": 1, "p50_s": 1.25, "p99_s": 9.0},
                    "webhook": {"count": 0, "p50_s": None, "p99_s": None},
                },
                "stores": {"poll": {"count": 0, "p50_s": None}},
            },
        }
    )
    assert lines == [
        "proof: staleness bound 600 s",
        "  stores          proven complete 30 s ago (bound 600 s); 3 scopes, the oldest "
        "(mall mall=7) proven 500 s ago; unresolved: 2 rows absent, deletion unconfirmed",
        "repairs (what notices and polls missed): missing 3, stale 1",
        "  deals           missing 2, stale 1",
        "  stores          missing 1",
        "change lag deals: poll p50 1.2 s, p99 9.0 s (1 change)",
    ]
    assert proof_lines({}) == []


def _data(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "mirror": "/m.db",
        "queue_depth": 1,
        "subscriptions": [],
        "subscriptions_checked_at": None,
        "request_budget": {"configured": False},
        "mall_members": None,
        "problems": ["poll overdue by 300 s"],
        "values": {},
        "jobs": [],
        "verify_position": None,
        "verify_cycle_finished_at": None,
        "types": [
            {
                "type": "deals",
                "rows": 1234,
                "last_sync_at": None,
                "lag_s": None,
                "cursor": None,
                "last_error": None,
            }
        ],
    }
    return {**data, **over}


def test_status_lines_render_the_budget_each_way_and_the_problems() -> None:
    lines = status_lines(_data())
    assert lines[:4] == [
        "degraded: poll overdue by 300 s",
        "problem: poll overdue by 300 s",
        f"{'type':<15} {'rows':>9}  {'last sync':<24} {'lag s':>8}  {'cursor':<24}  error",
        f"{'deals':<15} {'1,234':>9}  {'-':<24} {'-':>8}  {'-':<24}  ",
    ]
    assert lines[4:8] == [
        "mirror: /m.db",
        "queue: 1 notice waiting",
        "webhook subscriptions: none recorded (checked never)",
        "request budget: not recorded (no configuration read, no daemon has run)",
    ]
    stopped = _data(
        daemon={"running": False, "stopped_at": "2026-01-01T00:00:00.000Z"},
        problems=["poll error: login refused"],
    )
    stopped_lines = status_lines(stopped)
    assert "left by the last run: poll error: login refused" in stopped_lines
    assert stopped_lines[0] == "stopped since 2026-01-01T00:00:00.000Z"
    assert not [line for line in stopped_lines if line.startswith("degraded")]
    budget = {"max_per_second": 5.0, "rate": 2.5, "throttled": 2}
    assert status_lines(_data(request_budget=budget))[7] == (
        "request budget: 5/s, now 2.5/s, 2 answers 429"
    )
    configured_off = status_lines(_data(request_budget={"configured": True}))[7]
    assert configured_off == "request budget: none ([upstream] max_requests_per_second = 0)"

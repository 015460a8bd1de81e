"""sync.daemon.runs: a wrapped job's recorded outcome, pauses, cancellation, the budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sync.core.errors import StorageFault, SyncError
from sync.core.metrics import Metrics
from sync.daemon.runs import JobRuns, record_budget
from sync.daemon.schedule import parse_stamp
from sync.jobs.proving.reconcile import MassDeleteRefused
from sync.store import Mirror
from sync.store.watch import StorageWatch


class FakeBudget:
    def __init__(self, rate: float) -> None:
        self.rate = rate

    def snapshot(self) -> dict[str, float | int]:
        return {"max_rate": self.rate, "throttled": 0}


def _runs(mirror: Mirror, tmp_path: Path, *budgets: FakeBudget) -> JobRuns:
    accounts = SimpleNamespace(budgets=lambda: list(budgets))
    client: Any = SimpleNamespace(accounts=accounts)
    metrics = Metrics()
    storage = StorageWatch(tmp_path / "m.db", metrics=metrics)
    return JobRuns(mirror, client, metrics=metrics, storage=storage, stop=asyncio.Event())


def _job(mirror: Mirror, name: str) -> dict[str, Any]:
    cur = mirror.conn.execute("SELECT * FROM _sync_jobs WHERE name = ?", (name,))
    return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))


def _count(runs: JobRuns, job: str, outcome: str) -> float | None:
    return runs.metrics.registry.get_sample_value(
        "sync_job_runs_total", {"job": job, "outcome": outcome}
    )


async def test_a_run_records_its_outcome_its_next_run_and_the_budget(
    mirror: Mirror, tmp_path: Path
) -> None:
    runs = _runs(mirror, tmp_path, FakeBudget(5.0), FakeBudget(2.0))
    called: list[bool] = []

    async def body() -> None:
        called.append(True)

    await runs.wrap("hours", body, every=3600.0)()
    job = _job(mirror, "hours")
    assert called == [True] and job["outcome"] == "ok" and job["error"] is None
    started, due = parse_stamp(job["started_at"]), parse_stamp(job["next_run_at"])
    assert started is not None and due is not None
    assert abs((due - started).total_seconds() - 3600.0) <= 0.001  # the stamps keep milliseconds
    assert _count(runs, "hours", "ok") == 1.0 and not runs.running
    budget = json.loads(
        mirror.conn.execute("SELECT value FROM _sync_meta WHERE key = 'request_budget'").fetchone()[
            0
        ]
    )
    assert budget == {
        "max_rate": 5.0,
        "throttled": 0,
        "per_account": [{"max_rate": 5.0, "throttled": 0}, {"max_rate": 2.0, "throttled": 0}],
    }


async def test_a_known_failure_is_recorded_and_kept_in_a_bug_escapes(
    mirror: Mirror, tmp_path: Path
) -> None:
    runs = _runs(mirror, tmp_path)

    async def upstream_down() -> None:
        raise SyncError("upstream unreachable", hint="check [upstream] base_url")

    async def guarded() -> None:
        raise MassDeleteRefused("would delete 90% of deals")

    async def bug() -> None:
        raise ZeroDivisionError("bug")

    await runs.wrap("poll", upstream_down)()
    await runs.wrap("reconcile", guarded)()
    assert (_job(mirror, "poll")["outcome"], _job(mirror, "poll")["error"]) == (
        "error",
        "upstream unreachable (check [upstream] base_url)",
    )
    assert _job(mirror, "reconcile")["outcome"] == "refused"
    assert _job(mirror, "poll")["next_run_at"] is None  # `every` 0: nothing scheduled
    assert _count(runs, "poll", "error") == 1.0 and _count(runs, "reconcile", "error") == 1.0
    errors = runs.metrics.registry.get_sample_value("sync_errors_total", {"kind": "SyncError"})
    assert errors == 1.0
    with pytest.raises(ZeroDivisionError):
        await runs.wrap("verify", bug)()
    assert _job(mirror, "verify")["outcome"] == "interrupted"


async def test_no_run_while_the_mirror_takes_no_writes(mirror: Mirror, tmp_path: Path) -> None:
    runs = _runs(mirror, tmp_path)
    runs.storage.fault = StorageFault(
        "disk_full", str(tmp_path / "m.db"), "disk full", "free space"
    )
    called: list[bool] = []

    async def body() -> None:
        called.append(True)

    await runs.wrap("poll", body)()
    assert called == [] and _count(runs, "poll", "paused") == 1.0
    assert mirror.conn.execute("SELECT count(*) FROM _sync_jobs").fetchone()[0] == 0


async def test_a_run_cancelled_on_stop_ends_interrupted_and_quietly(
    mirror: Mirror, tmp_path: Path
) -> None:
    runs = _runs(mirror, tmp_path)
    entered = asyncio.Event()

    async def forever() -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(runs.wrap("proof", forever)())
    await entered.wait()
    assert len(runs.running) == 1
    runs.stop.set()
    await runs.cancel()
    assert task.done() and not task.cancelled() and task.exception() is None
    assert _job(mirror, "proof")["outcome"] == "interrupted" and not runs.running


def test_no_budget_is_recorded_without_an_account(mirror: Mirror) -> None:
    record_budget(mirror, [])
    assert (
        mirror.conn.execute(
            "SELECT count(*) FROM _sync_meta WHERE key = 'request_budget'"
        ).fetchone()[0]
        == 0
    )
    record_budget(mirror, [FakeBudget(1.0)])  # type: ignore[list-item]
    value = mirror.conn.execute(
        "SELECT value FROM _sync_meta WHERE key = 'request_budget'"
    ).fetchone()[0]
    assert json.loads(value) == {"max_rate": 1.0, "throttled": 0}

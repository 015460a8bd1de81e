"""`sync.store.jobrecords`: the daemon's jobs in `_sync_jobs` (`Mirror.jobs`)."""

from __future__ import annotations

import sqlite3

from sync.store import Mirror
from sync.store.jobrecords import JobRecords


def test_a_job_started_finished_and_scheduled(mirror: Mirror) -> None:
    jobs = mirror.jobs
    assert jobs.all() == {}
    jobs.started("poll", "t1")
    jobs.finished("poll", at="t2", outcome="error", error="boom", seconds=1.5)
    jobs.scheduled("poll", "t3")
    jobs.started("poll", "t4")  # the outcome stays the previous run's until it ends
    row = jobs.all()["poll"]
    assert (row["started_at"], row["finished_at"], row["outcome"]) == ("t4", "t2", "error")
    assert (row["error"], row["seconds"], row["next_run_at"]) == ("boom", 1.5, "t3")


def test_a_job_error_is_stored_redacted(mirror: Mirror) -> None:
    mirror.jobs.finished(
        "poll", at="t", outcome="error", error="GET /deals?token=s3cret failed", seconds=0
    )
    assert "s3cret" not in mirror.jobs.all()["poll"]["error"]


def test_a_retired_job_goes(mirror: Mirror) -> None:
    mirror.jobs.scheduled("reconcile", "t1")
    mirror.jobs.scheduled("poll", "t1")
    mirror.jobs.retired("reconcile")
    assert list(mirror.jobs.all()) == ["poll"]


def test_a_mirror_without_the_table_has_no_jobs() -> None:
    assert JobRecords(sqlite3.connect(":memory:")).all() == {}

"""`sync.store.runs`: run records begun, ended, kept alive, and orphans marked interrupted."""

from __future__ import annotations

import os

from sync.store import Mirror, runs
from tests.support.store_units import rows


def test_a_run_ends_with_its_status_and_an_error_without_secrets(mirror: Mirror) -> None:
    conn = mirror.conn
    run = runs.start(conn, "backfill")
    assert rows(
        conn, "SELECT kind, status, pid, seen_at = started_at FROM _sync_runs WHERE id = ?", run
    ) == [("backfill", "running", os.getpid(), 1)]
    runs.finish(
        conn, run, status="failed", rows=12, error="GET /deals?auth_token=abc123&page=2: 500"
    )
    (record,) = runs.recent(conn)
    assert (record["status"], record["rows"], record["error"]) == (
        "failed",
        12,
        "GET /deals?auth_token=***&page=2: 500",
    )
    assert record["finished_at"] == record["seen_at"]


def test_orphans_are_interrupted_keeping_when_they_were_last_seen(mirror: Mirror) -> None:
    conn = mirror.conn
    done = runs.start(conn, "backfill")
    runs.finish(conn, done, status="ok", rows=1, error=None)
    lost = runs.start(conn, "daemon")
    conn.execute(
        "UPDATE _sync_runs SET seen_at = '2026-01-01T00:00:00.000Z', pid = 1 WHERE id = ?", (lost,)
    )
    runs.heartbeat(conn)  # this process's running runs only: pid 1's is not
    assert runs.close_orphans(conn) == 1
    assert runs.close_orphans(conn) == 0
    assert [(r["id"], r["status"], r["seen_at"]) for r in runs.recent(conn)] == [
        (done, "ok", runs.recent(conn)[0]["finished_at"]),
        (lost, "interrupted", "2026-01-01T00:00:00.000Z"),
    ]
    daemon = runs.last_run(conn, "daemon")
    assert daemon is not None and (daemon["id"], daemon["status"]) == (lost, "interrupted")


def test_recent_gives_the_last_runs_oldest_first_and_no_daemon_reads_as_none(
    mirror: Mirror,
) -> None:
    conn = mirror.conn
    ids = [runs.start(conn, "backfill") for _ in range(5)]
    assert [r["id"] for r in runs.recent(conn, limit=3)] == ids[2:]
    assert runs.last_run(conn, "daemon") is None
    conn.execute("DROP TABLE _sync_runs")
    assert runs.last_run(conn, "daemon") is None  # a mirror without the table, read-only

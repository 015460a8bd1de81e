"""sync.readers.running: who runs on the mirror and the last backfill, as data and lines."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sync.core.target import MirrorTarget
from sync.model.stamps import iso_ms, now_iso
from sync.readers.running import (
    STALE_S,
    Writer,
    backfill_lines,
    backfill_state,
    daemon_lines,
    daemon_state,
    writer_of,
)
from sync.store import Mirror
from tests.support.ports import free_port


def _daemon_run(mirror: Mirror, pid: int, status: str, finished: str | None = None) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, finished_at, status, pid, seen_at) "
        "VALUES ('daemon', '2026-01-01T00:00:00.000Z', ?, ?, ?, '2026-01-01T00:05:00.000Z')",
        (finished, status, pid),
    )


def test_the_daemon_runs_only_when_its_run_is_held_by_the_lock_holder(
    mirror: Mirror, tmp_path: Path
) -> None:
    path = tmp_path / "m.db"  # the `mirror` fixture's file: this process holds its lock
    state = daemon_state(mirror, path)
    assert state["running"] is False and state["stopped_at"] is None
    assert state["writer"]["pid"] == os.getpid()
    _daemon_run(mirror, os.getpid(), "running")
    assert daemon_state(mirror, path) == {
        "running": True,
        "pid": os.getpid(),
        "since": "2026-01-01T00:00:00.000Z",
        "last_heartbeat": "2026-01-01T00:05:00.000Z",
    }
    _daemon_run(mirror, os.getpid() + 1_000_000, "running")  # killed: a run no process holds
    state = daemon_state(mirror, path)
    assert state["running"] is False and state["last_status"] == "interrupted"
    assert state["stopped_at"] == "2026-01-01T00:05:00.000Z"


def test_daemon_lines_say_since_when_and_what_waits() -> None:
    running = {"running": True, "pid": 7, "since": "S", "last_heartbeat": None}
    assert daemon_lines(running, ["poll"]) == [
        "daemon: running, pid 7 since S, last heartbeat none yet"
    ]
    killed = {
        "running": False,
        "stopped_at": "T",
        "last_status": "interrupted",
        "writer": {"pid": 9, "command": "ccsync backfill"},
    }
    assert daemon_lines(killed, ["poll", "verify"]) == [
        "daemon: not running since T (last seen then; it ended without recording it: killed?); "
        "jobs waiting for it: poll, verify",
        "mirror held by pid 9 (`ccsync backfill`)",
    ]
    assert daemon_lines({"running": False, "stopped_at": None}, []) == [
        "daemon: not running (never ran)"
    ]


def test_backfill_state_names_the_types_no_backfill_completed(mirror: Mirror) -> None:
    assert backfill_state(mirror, mirror.path) == {
        "last_run": None,
        "unfinished_since": None,
        "never_completed": [],
    }
    assert backfill_lines(backfill_state(mirror, mirror.path)) == []
    mirror.conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, status, error) "
        "VALUES ('backfill', '2026-01-02T00:00:00.000Z', 'failed', 'HTTP 500 from /deals')"
    )
    mirror.conn.executemany(
        "INSERT INTO _sync_backfill (type, scope) VALUES (?, '')", [("deals",), ("stores",)]
    )
    mirror.conn.executemany(
        "INSERT INTO _sync_meta (key, value) VALUES (?, ?)",
        [
            ("backfill_started_at", "2026-01-02T00:00:00.000Z"),
            ("backfill_completed", json.dumps({"deals": "2026-01-01T00:00:00.000Z"})),
        ],
    )
    state = backfill_state(mirror, mirror.path)
    assert state["never_completed"] == ["stores"]
    assert backfill_lines(state) == [
        "backfill: last run failed (2026-01-02T00:00:00.000Z): HTTP 500 from /deals",
        "  unfinished, started 2026-01-02T00:00:00.000Z: `ccsync backfill` resumes it; "
        "never completed: stores",
    ]


def test_an_unfinished_backfill_is_shown_however_many_runs_came_after(mirror: Mirror) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, status) "
        "VALUES ('backfill', '2026-01-02T00:00:00.000Z', 'failed')"
    )
    mirror.conn.executemany(
        "INSERT INTO _sync_runs (kind, started_at, status) VALUES ('daemon', ?, 'stopped')",
        [(f"2026-01-03T00:00:{i:02d}.000Z",) for i in range(50)],
    )
    mirror.conn.execute(
        "INSERT INTO _sync_meta (key, value) VALUES ('backfill_started_at', "
        "'2026-01-02T00:00:00.000Z')"
    )
    lines = backfill_lines(backfill_state(mirror, mirror.path))
    assert lines[0] == "backfill: last run failed (2026-01-02T00:00:00.000Z)"


def test_a_backfill_nobody_holds_the_mirror_for_is_interrupted_and_its_start_is_local(
    mirror: Mirror,
) -> None:
    """`kill -9` of a backfill leaves its run `running` with no process behind it (#48); its
    start shown is the local moment, not the stamps' lower bound (a day early) kept for the
    cursors."""
    mirror.conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, status, pid) "
        "VALUES ('backfill', '2026-01-02T00:00:00.000Z', 'running', ?)",
        (os.getpid(),),  # this process holds the `mirror` fixture's lock
    )
    assert backfill_state(mirror, mirror.path)["last_run"]["status"] == "running"
    mirror.conn.execute("UPDATE _sync_runs SET pid = ? WHERE kind = 'backfill'", (2**22 + 1,))
    assert backfill_state(mirror, mirror.path)["last_run"]["status"] == "interrupted"
    mirror.meta.set("backfill_started_at", "2026-01-01T00:00:00.000Z")
    mirror.meta.set("backfill_started_local", "1767312000.000")  # 2026-01-02T00:00:00Z
    state = backfill_state(mirror, mirror.path)
    assert state["unfinished_since"] == "2026-01-02T00:00:00.000Z"
    assert backfill_lines(state)[0] == "backfill: last run interrupted (2026-01-02T00:00:00.000Z)"


def _run_seen(mirror: Mirror, pid: int, seen: str) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_runs (kind, started_at, status, pid, seen_at) "
        "VALUES ('daemon', '2026-01-01T00:00:00.000Z', 'running', ?, ?)",
        (pid, seen),
    )


def test_a_postgresql_mirrors_writer_is_the_holder_of_its_active_lock(
    mirror: Mirror, pg_db: str
) -> None:
    from sync.store.pg.lock import ActiveLock

    target = MirrorTarget(url=pg_db, schema="ccsync")
    assert writer_of(target) == Writer(True)
    _daemon_run(mirror, os.getpid(), "running")
    assert daemon_state(mirror, target)["running"] is False  # its run, but nobody holds it
    with ActiveLock(pg_db, "ccsync") as lock:
        assert lock.try_acquire()
        writer = writer_of(target)
        assert writer.known and writer.pid == os.getpid()
        assert writer.command.startswith(f"{lock.name} (backend pid {lock.backend_pid}")
        assert writer_of(MirrorTarget(url=pg_db, schema="another")) == Writer(True)
        state = daemon_state(mirror, target)
        assert state["running"] is True and state["pid"] == os.getpid()
        assert backfill_state(mirror, target)["last_run"] is None


def test_a_daemon_whose_writer_cannot_be_asked_is_judged_by_its_heartbeat(
    mirror: Mirror,
) -> None:
    target = MirrorTarget(url=f"postgresql://u:pw-Hidden@127.0.0.1:{free_port()}/m")
    assert writer_of(target) == Writer(False)
    _run_seen(mirror, 4242, iso_ms(time.time() - STALE_S - 5))  # stopped beating: killed
    state = daemon_state(mirror, target)
    assert state["running"] is False and state["last_status"] == "interrupted"
    _run_seen(mirror, 4243, now_iso())
    state = daemon_state(mirror, target)
    assert state["running"] is True and state["pid"] == 4243

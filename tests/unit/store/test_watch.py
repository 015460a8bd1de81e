"""`sync.store.watch`: degraded on a storage fault, recovered by the write check, told through the health file."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sync.core.target import MirrorTarget
from sync.store import watch
from sync.store.watch import StorageWatch

FULL = sqlite3.OperationalError("database or disk is full")
READONLY = sqlite3.OperationalError("attempt to write a readonly database")


def test_only_storage_faults_degrade_and_each_reason_is_told_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = StorageWatch(tmp_path / "m.db")
    assert w.report(RuntimeError("a bug")) is None
    assert (w.degraded, w.writable.is_set()) == (False, True)
    fault = w.report(FULL)
    assert (fault is w.fault, w.degraded, w.writable.is_set()) == (True, True, False)
    since = w.since
    w.report(FULL)
    w.report(READONLY)
    assert capsys.readouterr().out.count("storage.degraded") == 2  # begun, then another reason
    assert w.since == since  # degraded since the first fault, whatever its reason now
    snap = w.snapshot()
    assert snap is not None and (snap["reason"], snap["file"]) == (
        "read_only",
        str(tmp_path / "m.db"),
    )
    assert snap["fix"].endswith(watch.RESUMES)
    assert w.problem() == f"storage read_only since {since}: {w.fault}"


async def test_the_check_ends_a_degradation_and_the_health_file_tells_status(
    tmp_path: Path,
) -> None:
    mirror = tmp_path / "m.db"
    resumed: list[bool] = []
    seen: list[dict[str, Any] | None] = []

    async def on_resumed() -> None:
        resumed.append(True)

    w = StorageWatch(mirror, on_resumed=on_resumed)
    w.interval = w.healthy_interval = 0
    stop = asyncio.Event()
    answers: list[BaseException | None] = [FULL, FULL, None, None]

    def check(degraded: bool) -> None:
        seen.append(watch.read_health(mirror))
        answer = answers.pop(0)
        if not answers:
            stop.set()
        if answer is not None:
            raise answer

    await asyncio.wait_for(w.run(check, stop), timeout=10)
    assert [s["status"] if s else None for s in seen] == ["ok", "degraded", "degraded", "ok"]
    assert (
        seen[1] is not None and seen[1]["reason"] == "disk_full" and seen[1]["pid"] == os.getpid()
    )
    assert resumed == [True] and not w.degraded and w.writable.is_set()
    assert not watch.health_path(mirror).exists()  # a clean stop removes it


def test_a_health_file_left_by_a_dead_process_or_unreadable_says_nothing_runs(
    tmp_path: Path,
) -> None:
    mirror = tmp_path / "m.db"
    health = watch.health_path(mirror)
    assert health.name == "m.db.health"
    assert watch.read_health(mirror) is None
    health.write_text(json.dumps({"pid": os.getpid(), "status": "ok"}).ljust(watch.HEALTH_BYTES))
    assert watch.read_health(mirror) == {"pid": os.getpid(), "status": "ok"}
    health.write_text(json.dumps({"pid": 2**22 + 12345, "status": "degraded"}))
    assert watch.read_health(mirror) is None
    health.write_text("{half")
    assert watch.read_health(mirror) is None


async def test_a_postgresql_mirror_gone_degrades_as_unreachable_and_a_check_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server gone (an administrator's shutdown, SQLSTATE 57P01) is `unreachable`, named by
    the target without its password; the write check that commits ends it; no health file."""
    psycopg = pytest.importorskip("psycopg")  # the test extra has it: never skipped in CI
    monkeypatch.chdir(tmp_path)
    target = MirrorTarget(url="postgresql://writer:Pa55-secret@db.example:5432/app", schema="s")
    w = StorageWatch(target)
    w.interval = w.healthy_interval = 0
    gone = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    answers: list[BaseException | None] = [gone, None]
    stop = asyncio.Event()

    def check(degraded: bool) -> None:
        answer = answers.pop(0)
        if not answers:
            stop.set()
        if answer is not None:
            raise answer

    await asyncio.wait_for(w.run(check, stop), timeout=10)
    assert not w.degraded  # the second check committed
    fault = w.report(gone)
    assert fault is not None and fault.reason == "unreachable"
    assert "db.example" in str(fault) and "Pa55-secret" not in str(fault)
    assert "Pa55-secret" not in (w.problem() or "")
    assert list(tmp_path.iterdir()) == []  # a server's mirror keeps no health file

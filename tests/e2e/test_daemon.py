"""The daemon end to end against the emulator: webhooks, polls, deletions, forged notices,
resubscription, kill -9 with a full queue, SIGTERM, and the demo."""

from __future__ import annotations

import asyncio
import shlex
import signal
import socket
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import structlog
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.core.errors import LoginRefusedError
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.daemon import running
from tests.support.mirror_rows import query, row
from tests.support.ports import free_port
from tests.support.processes import DEVNULL, run, spawn, wait_healthy
from tests.support.settings import DAEMON_TYPES as TYPES
from tests.support.settings import SECRET, upstream_keys, write_config
from tests.support.settings import daemon_settings as settings_for
from tests.support.waiting import eventually


async def test_change_reaches_the_mirror_through_a_webhook(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    async with running(settings_for(emulator, db, webhooks=True)) as daemon:
        topics = {w["attributes"]["topic"] for w in emulator.webhooks()}
        assert set(TYPES) <= topics
        deal = emulator.ids("deals")[0]
        emulator.update("deals", deal, {"title": "Changed by webhook test"})
        await eventually(
            lambda: (row(db, "deals", deal) or {}).get("title") == "Changed by webhook test"
        )
        new = emulator.create("articles", {"title": "Brand new article"})
        await eventually(lambda: row(db, "articles", new) is not None)
        assert daemon.running.worker.processed >= 2


async def test_without_webhooks_changes_arrive_through_the_poll_and_deletions_feed(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False, poll_interval=0.3, deletions_interval=0.3)
    async with running(settings):
        assert emulator.webhooks() == []
        deal = emulator.ids("deals")[1]
        emulator.update("deals", deal, {"title": "Changed for the poll"})
        store = emulator.ids("stores")[0]
        emulator.update("stores", store, {"name": "Renamed store"})
        await eventually(
            lambda: (row(db, "deals", deal) or {}).get("title") == "Changed for the poll"
        )
        await eventually(lambda: (row(db, "stores", store) or {}).get("name") == "Renamed store")
        gone = emulator.ids("articles")[0]
        emulator.delete("articles", gone)
        await eventually(lambda: row(db, "articles", gone) is None)
    assert compare(db, emulator, TYPES).differences == 0


async def test_a_forged_deletion_deletes_nothing(emulator: Emulator, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with running(settings_for(emulator, db, webhooks=True)) as daemon:
        victim = emulator.ids("deals")[0]
        body = {
            "data": [
                {
                    "type": "deletions",
                    "id": "999999",
                    "attributes": {"resource_type": "deals", "resource_id": int(victim)},
                }
            ]
            + [
                {
                    "type": "deletions",
                    "id": str(i),
                    "attributes": {"resource_type": "deals", "resource_id": 10_000_000 + i},
                }
                for i in range(2000)
            ]
        }
        url = f"http://127.0.0.1:{daemon.bound_port}/webhooks/{SECRET}"
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
            ) as resp,
        ):
            assert resp.status in (200, 202, 204)
        await eventually(lambda: daemon.running.worker.processed >= 2001)
        assert row(db, "deals", victim) is not None
        assert daemon.running.queue.depth() == 0


async def test_a_vanished_subscription_is_renewed_and_caught_up(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True, subscriptions_interval=0.3)
    async with running(settings):
        assert emulator.webhooks()
        emulator.unsubscribe_all()  # what the upstream does after 5 failed deliveries
        deal = emulator.ids("deals")[2]
        emulator.update("deals", deal, {"title": "Changed while unsubscribed"})
        await eventually(lambda: len(emulator.webhooks()) >= len(TYPES))
        await eventually(
            lambda: (row(db, "deals", deal) or {}).get("title") == "Changed while unsubscribed"
        )


def _config_file(tmp_path: Path, emu: Emulator, db: Path, port: int) -> Path:
    return write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(emu, "T_PW", types=TYPES, max_backoff=0.05),
        mirror={"path": db},
        webhooks={"listen": f"127.0.0.1:{port}", "secret_env": "T_SECRET"},
        schedule={
            "poll_interval": 3600.0,
            "deletions_interval": 3600.0,
            "queue_batch_delay": 0.01,
        },
        logging={"format": "json"},
    )


async def _start(cfg: Path, emu: Emulator) -> asyncio.subprocess.Process:
    env = {"T_PW": emu.password, "T_SECRET": SECRET}
    proc = await spawn("run", "--config", str(cfg), env=env, stdout=DEVNULL)
    _started.append(proc)
    return proc


def _queue_depth(db: Path) -> int:
    return int(query(db, "select count(*) from _sync_queue")[0][0])


async def test_kill_9_with_a_full_queue_loses_nothing_and_sigterm_exits_cleanly(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    port = free_port()
    cfg = _config_file(tmp_path, emulator, db, port)
    proc = await _start(cfg, emulator)
    try:
        await _kill_9_then_restart(proc, cfg, emulator, db, port)
    finally:
        if proc.returncode is None:
            proc.kill()
        for leftover in _started:
            if leftover.returncode is None:
                leftover.kill()
                await leftover.wait()


_started: list[asyncio.subprocess.Process] = []


async def _kill_9_then_restart(
    proc: asyncio.subprocess.Process, cfg: Path, emulator: Emulator, db: Path, port: int
) -> None:
    await wait_healthy(port, proc)
    # Slow the upstream so the worker cannot keep up, then change many rows.
    emulator.faults.latency = 0.5
    changed = emulator.ids("deals")[:40]
    for i, deal in enumerate(changed):
        emulator.update("deals", deal, {"title": f"queued change {i}"})
    await eventually(lambda: _queue_depth(db) >= 10, timeout=20)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    assert _queue_depth(db) >= 1
    emulator.faults.latency = 0
    proc = await _start(cfg, emulator)
    await wait_healthy(port, proc)
    await eventually(
        lambda: all(
            (row(db, "deals", d) or {}).get("title") == f"queued change {i}"
            for i, d in enumerate(changed)
        ),
        timeout=30,
    )
    await eventually(lambda: _queue_depth(db) == 0)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), timeout=15) == 0


async def test_demo_runs_as_the_readme_says(tmp_path: Path) -> None:
    demo = str(tmp_path / "demo")
    rc, text, err = await run("demo", "--dir", demo, "--resources", "400", "--duration", "6")
    assert rc == 0, err[-3000:]
    assert "mirror left at" in text and "rows" in text
    conn = sqlite3.connect(tmp_path / "demo" / "mirror.db")
    assert conn.execute("select count(*) from deals").fetchone()[0] > 0
    conn.close()
    # The exit hint runs as printed (#40): here `python -m sync`, as this test ran it.
    hint = text.strip().splitlines()[-1].strip()
    assert hint.endswith(f"status --config {demo}/sync.toml"), hint
    status = await asyncio.create_subprocess_exec(
        *shlex.split(hint), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await status.communicate()
    assert status.returncode == 0, err.decode()
    assert b"deals" in out


async def test_backfill_then_status_through_the_library(emulator: Emulator, tmp_path: Path) -> None:
    """The daemon's helpers reuse the backfill; a backfilled mirror has cursors for every scope."""
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False)
    mirror = Mirror.open(db)
    async with ChannelClient(settings.upstream) as client:
        await Backfill(client, mirror, settings).run()
    assert mirror.cursors.get("deletions", "") is not None
    assert mirror.cursors.get("deals", "filter[visibility]=Unlisted") is not None
    mirror.close()


async def test_status_shows_queue_subscriptions_and_lag(emulator: Emulator, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with running(settings_for(emulator, db, webhooks=True)):
        pass
    from sync.readers.status import status_data

    data = status_data(db)
    assert data["queue_depth"] == 0
    assert set(TYPES) <= set(data["subscriptions"]) and data["subscriptions_checked_at"]
    by_type = {t["type"]: t for t in data["types"]}
    assert by_type["deals"]["rows"] > 0 and by_type["deals"]["lag_s"] is not None


async def test_job_logs_carry_the_job_name(emulator: Emulator, tmp_path: Path) -> None:
    """A line logged inside a job (here `poll.changed`, which names only the type) has job=poll."""
    from structlog.testing import capture_logs

    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False, poll_interval=0.2)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        async with running(settings):
            emulator.update("deals", emulator.ids("deals")[0], {"title": "logged"})
            await eventually(
                lambda: any(e["event"] == "poll.changed" and e["type"] == "deals" for e in logs)
            )
    # (The first polls after a backfill may re-read other types' newest rows too: the cursors
    # are a lower bound of the stamps' now, `sync.channel.clock`.)
    changed = [e for e in logs if e["event"] == "poll.changed"]
    assert changed and all(e["job"] == "poll" for e in changed)


async def test_schedules_survive_a_restart_and_status_shows_them(
    emulator: Emulator, tmp_path: Path, monkeypatch: Any
) -> None:
    import sync.daemon.schedule

    monkeypatch.setattr(sync.daemon.schedule, "OVERDUE_JITTER", (0.1, 0.2))
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False, hours_interval=3600.0)
    async with running(settings):
        # The first start: the polls catch up at once; the hours job is a full interval away.
        await eventually(lambda: "deletions" in _jobs(db) and _jobs(db)["deletions"]["outcome"])
        assert _jobs(db)["hours"]["started_at"] is None
        assert _jobs(db)["hours"]["next_run_at"] is not None
    # While it was down, its hours job fell due: the next start runs it within seconds.
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE _sync_jobs SET next_run_at = '2000-01-01T00:00:00.000Z' WHERE name = 'hours'"
    )
    conn.commit()
    conn.close()
    async with running(settings):
        await eventually(lambda: _jobs(db)["hours"]["outcome"] == "ok", timeout=30)
        assert _jobs(db)["hours"]["next_run_at"] > "2026"
    from sync.readers.status import status_data

    jobs = {j["name"]: j for j in status_data(settings.mirror.path)["jobs"]}
    assert {"poll", "deletions", "proof", "hours"} <= set(jobs)
    assert jobs["hours"]["outcome"] == "ok" and jobs["hours"]["started_at"]


def _jobs(db: Path) -> dict[str, dict[str, Any]]:
    try:
        return {r["name"]: dict(r) for r in query(db, "select * from _sync_jobs")}
    except sqlite3.OperationalError:
        return {}


async def test_sigterm_during_the_first_backfill_exits_promptly_and_loses_nothing(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    cfg = _config_file(tmp_path, emulator, db, free_port())
    emulator.faults.latency = 0.2  # a backfill that takes far longer than the test waits
    proc = await _start(cfg, emulator)
    try:
        await eventually(lambda: db.exists() and _has_table(db, "_sync_backfill"), timeout=30)
        await asyncio.sleep(1.0)  # inside the backfill, pages in flight
        proc.send_signal(signal.SIGTERM)
        # Before the fix the process stayed idle until SIGKILL (it waited on the watchdog).
        code = await asyncio.wait_for(proc.wait(), timeout=10)
        assert code == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    emulator.faults.latency = 0
    # The interrupted backfill resumes and the mirror ends up exact.
    mirror = Mirror.open(db)
    settings = settings_for(emulator, db, webhooks=False)
    async with ChannelClient(settings.upstream) as client:
        await Backfill(client, mirror, settings).run()
    mirror.close()
    assert compare(db, emulator, TYPES).differences == 0


def _has_table(db: Path, name: str) -> bool:
    try:
        return bool(query(db, "select 1 from sqlite_master where name = ?", name))
    except sqlite3.Error:
        return False


async def test_the_daemon_drops_change_feed_entries_past_their_retention(
    emulator: Emulator, tmp_path: Path
) -> None:
    from sync.store import Mirror

    db = tmp_path / "m.db"
    m = Mirror.open(db)
    m.conn.execute(
        "INSERT INTO _sync_changes (type, id, op, updated_at, at) "
        "VALUES ('deals', 1, 'upsert', NULL, '2000-01-01T00:00:00.000Z')"
    )
    m.close()
    async with running(settings_for(emulator, db, webhooks=False)) as daemon:
        await eventually(lambda: all(e[5] > "2001" for e in daemon.running.mirror.changes.since()))
        assert daemon.running.mirror.changes.since()  # the backfill's entries stay


async def test_a_first_backfill_the_upstream_fails_is_asked_again_and_the_daemon_keeps_running(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Every data route answers 5xx past the retry budget: the first backfill fails, the
    daemon stays up, degraded with the cause in `/healthz`, and asks again (2 s, then 4 s, ...);
    once the upstream answers, it finishes from its checkpoints and the mirror is exact."""
    db = tmp_path / "m.db"
    emulator.faults.error_rate = 1.0
    daemon = Daemon(settings_for(emulator, db, webhooks=False, upstream={"retry_budget": 0.3}))
    with capture_logs() as events:
        task = asyncio.create_task(daemon.run())
        try:
            await eventually(lambda: daemon.state.backfill_failed is not None or task.done())
            assert not task.done(), "the daemon exited on an upstream outage"
            health = daemon.health()
            assert health["status"] == "degraded" and not health["ready"], health
            assert health["problems"][0].startswith("the first backfill failed (1 in a row)")
            emulator.faults.error_rate = 0.0
            await eventually(lambda: daemon.is_ready or task.done(), timeout=60)
            assert daemon.is_ready and daemon.state.backfill_failed is None
            assert daemon.health()["status"] != "degraded"
            assert compare(db, emulator, TYPES).differences == 0
        finally:
            daemon.request_stop()
            await asyncio.wait_for(task, timeout=15)
    failed = [e for e in events if e["event"] == "daemon.backfill_failed"]
    assert failed and failed[0]["retry_in"] == 2.0 and failed[0]["failures"] == 1
    assert "gave up after" in failed[0]["error"]


async def test_credentials_the_login_refuses_stop_the_daemon_with_the_setting_to_fix(
    emulator: Emulator, tmp_path: Path
) -> None:
    """No retry cures a refused login: the daemon exits on it at once, naming the setting."""
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=False, upstream={"password": "wrong-PW-42"})
    daemon = Daemon(settings)
    with pytest.raises(LoginRefusedError, match="login refused") as info:
        await asyncio.wait_for(daemon.run(), timeout=30)
    assert "[upstream] email" in str(info.value.hint)
    assert daemon.state.backfill_failed is None


async def test_a_taken_listen_port_is_one_line_naming_the_setting(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Another program on `[webhooks] listen`: one line naming the key and the port, exit 2
    (a configuration error, docs/commands.md), no traceback, no `daemon.stopped`."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream=upstream_keys(emulator, "CLI_PW", types=["malls"]),
            mirror={"path": tmp_path / "m.db"},
            webhooks={"enabled": True, "listen": f"127.0.0.1:{port}", "secret": SECRET},
            logging={"level": "info"},
        )
        code, _, err = await run("run", "--config", str(cfg), env={"CLI_PW": emulator.password})
    finally:
        taken.close()
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "[webhooks] listen" in err and f"127.0.0.1:{port}" in err
    assert "Traceback" not in err

"""sync.daemon.standby: waiting for a PostgreSQL mirror's active lock, against a real server.

Two `ActiveLock`s on one fresh database (`pg_db`): while the first holds the lock the standby
waits, names the holder (in `/healthz`, 200 `standby`, and in the holder's `standbys`), refuses
webhooks with 503, and takes the lock once the first releases it; SIGTERM ends the wait at once;
a session the server ends is noticed by `keep`; a server that cannot be reached is `degraded`
(503, reason `unreachable`) without the password. The last test runs a whole `Daemon` as a
standby (it opens no mirror while waiting, so it needs no PostgreSQL store).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from sync.core.config import Settings, parse_config
from sync.core.errors import MirrorRefused
from sync.core.target import MirrorTarget
from sync.daemon.http import STANDBY_REFUSAL, make_standby_app
from sync.daemon.service import Daemon
from sync.daemon.standby import Standby, retry_delay
from sync.store.pg.lock import ActiveLock
from sync.store.pg.mirror import PgMirror
from tests.support.ports import free_port
from tests.support.waiting import eventually

SCHEMA = "mirror_s"
PASSWORD = "Pa55-w0rd-never-shown"


@pytest.fixture
def target(pg_db: str) -> MirrorTarget:
    return MirrorTarget(url=pg_db, schema=SCHEMA)


@pytest.fixture
async def holder(pg_db: str) -> AsyncIterator[ActiveLock]:
    """The other daemon's lock, held."""
    lock = ActiveLock(pg_db, SCHEMA, name="ccsync@other-host:1")
    assert lock.try_acquire()
    yield lock
    lock.release()


def _standby(target: MirrorTarget) -> Standby:
    return Standby(target, poll=0.05, check=0.05)


async def test_a_standby_names_the_holder_and_takes_over_once_it_releases(
    target: MirrorTarget, holder: ActiveLock
) -> None:
    """While another holds the lock: `standby`, the holder named, listed among the standbys;
    released: the lock is ours, and the report stops saying standby."""
    standby, stop = _standby(target), asyncio.Event()
    task = asyncio.create_task(standby.acquire(stop))
    await eventually(lambda: standby.active is not None)
    report = standby.report()
    assert report["status"] == "standby" and report["ready"] is False
    assert "ccsync@other-host:1" in report["active"] and report["problems"] == []
    assert len(holder.standbys()) == 1
    assert not task.done()

    holder.release()
    lock = await asyncio.wait_for(task, timeout=15)
    assert lock is not None
    try:
        assert lock.held() and not standby.waiting
        assert lock.holder() is not None and lock.holder().pid == lock.backend_pid  # type: ignore[union-attr]
        assert lock.standbys() == []  # no longer standing by
    finally:
        lock.release()


async def test_a_standby_asked_to_stop_returns_nothing_and_leaves_no_session(
    target: MirrorTarget, holder: ActiveLock
) -> None:
    standby, stop = _standby(target), asyncio.Event()
    task = asyncio.create_task(standby.acquire(stop))
    await eventually(lambda: standby.active is not None)
    stop.set()
    assert await asyncio.wait_for(task, timeout=15) is None
    await eventually(lambda: holder.standbys() == [])
    assert holder.held()


async def test_healthz_of_a_standby_is_200_and_webhooks_are_refused_with_503(
    target: MirrorTarget, holder: ActiveLock
) -> None:
    standby, stop = _standby(target), asyncio.Event()
    task = asyncio.create_task(standby.acquire(stop))
    await eventually(lambda: standby.active is not None)
    app = make_standby_app(standby.report)
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            health = await client.get("/healthz")
            body = await health.json()
            assert health.status == 200 and body["status"] == "standby"
            assert "ccsync@other-host:1" in body["active"]
            hook = await client.post("/webhooks/" + "s" * 32, data=b"{}")
            assert hook.status == 503 and hook.headers["Retry-After"]
            assert (await hook.json())["error"] == STANDBY_REFUSAL
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


async def test_keep_tells_when_the_server_ends_the_lock_session(
    target: MirrorTarget, pg_db: str
) -> None:
    """`keep` calls back once `held()` says no: here the server terminated our session."""
    standby, stop = _standby(target), asyncio.Event()
    lock = await asyncio.wait_for(standby.acquire(stop), timeout=15)
    assert lock is not None
    lost = asyncio.Event()
    keeper = asyncio.create_task(standby.keep(lock, lost.set))
    try:
        await asyncio.sleep(0.2)
        assert not lost.is_set()  # held: nothing said
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [lock.backend_pid])
        await asyncio.wait_for(lost.wait(), timeout=15)
        await asyncio.wait_for(keeper, timeout=5)
    finally:
        keeper.cancel()
        lock.release()


async def test_keep_tells_when_the_server_ends_the_mirror_s_own_connection(
    target: MirrorTarget, pg_db: str
) -> None:
    """The lock's session stays, the mirror's data connection is ended: no write can succeed
    on it, so `keep` calls back too (the daemon reopens the mirror in its next term)."""
    standby, stop = _standby(target), asyncio.Event()
    lock = await asyncio.wait_for(standby.acquire(stop), timeout=15)
    assert lock is not None
    mirror = PgMirror.open(pg_db, SCHEMA, lock=lock)
    lost = asyncio.Event()
    keeper = asyncio.create_task(standby.keep(lock, lost.set, mirror.storage.lost))
    try:
        await asyncio.sleep(0.2)
        assert not lost.is_set()
        pid = mirror.conn.info.backend_pid
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])  # gone first
        with pytest.raises(psycopg.OperationalError):  # what a write meets: the broken link
            mirror.meta.set("x", "y")
        await asyncio.wait_for(lost.wait(), timeout=15)
        assert lock.held()  # the lock itself was never lost
    finally:
        keeper.cancel()
        mirror.close()
        lock.release()


async def test_a_setting_the_server_refuses_ends_the_wait_with_its_one_line(pg_db: str) -> None:
    """A database that does not exist is a setting to fix, not a server to wait for: the wait
    raises `MirrorRefused` (the daemon exits on it) naming `[mirror] url`; an unreachable
    server is asked again (below)."""
    missing = pg_db.rsplit("/", 1)[0] + "/no_such_database"
    standby, stop = _standby(MirrorTarget(url=missing, schema=SCHEMA)), asyncio.Event()
    with pytest.raises(MirrorRefused) as caught:
        await asyncio.wait_for(standby.acquire(stop), timeout=15)
    assert "[mirror] url" in str(caught.value) and "no_such_database" in str(caught.value)


async def test_a_server_that_cannot_be_reached_is_degraded_and_asked_again(
    pg_db: str,
) -> None:
    """Nothing listens on the port: `degraded` (503), reason `unreachable`, the password
    nowhere, and the wait goes on until stopped."""
    url = f"postgresql://writer:{PASSWORD}@127.0.0.1:{free_port()}/db"
    standby, stop = _standby(MirrorTarget(url=url, schema=SCHEMA)), asyncio.Event()
    task = asyncio.create_task(standby.acquire(stop))
    await eventually(lambda: standby.problem is not None)
    report = standby.report()
    assert report["status"] == "degraded" and report["reason"] == "unreachable"
    assert PASSWORD not in repr(report) and PASSWORD not in standby.status_line()
    assert "[mirror] url" in report["problems"][0]
    assert not task.done()
    stop.set()
    assert await asyncio.wait_for(task, timeout=15) is None


def test_a_lost_server_is_asked_again_sooner_than_30_s() -> None:
    waits = [retry_delay(n) for n in range(1, 10)]
    assert waits[:3] == [2.0, 4.0, 8.0] and max(waits) == 30.0


def _settings(pg_db: str, port: int) -> Settings:
    return parse_config(
        {
            "upstream": {
                "base_url": "http://127.0.0.1:9",
                "email": "a@b.c",
                "password": "pw",
                "types": ["deals", "stores"],
            },
            "mirror": {"url": pg_db, "schema": SCHEMA},
            "webhooks": {"enabled": True, "listen": f"127.0.0.1:{port}", "secret": "s" * 32},
        }
    )


async def test_a_daemon_on_a_held_mirror_serves_standby_and_stops_at_once(
    pg_db: str, holder: ActiveLock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ccsync run` while another daemon is active: `/healthz` 200 standby, a webhook 503,
    nothing opened; SIGTERM (`request_stop`) ends it cleanly."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    port = free_port()
    daemon = Daemon(_settings(pg_db, port))
    assert daemon.standby is not None
    daemon.standby.poll = 0.05
    task = asyncio.create_task(daemon.run())
    try:
        body: dict[str, Any] = {}

        async def standby_answers() -> bool:
            nonlocal body
            try:
                async with ClientSession() as http:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        body = await resp.json()
                        return resp.status == 200 and body.get("active") is not None
            except OSError:
                return False

        for _ in range(300):
            if task.done() or await standby_answers():
                break
            await asyncio.sleep(0.05)
        assert not task.done(), task.result()
        assert body["status"] == "standby" and body["role"] == "standby"
        async with ClientSession() as http:
            async with http.post(f"http://127.0.0.1:{port}/webhooks/{'s' * 32}", data=b"{}") as r:
                assert r.status == 503
        assert daemon.running is None and daemon.lock is None
    finally:
        daemon.request_stop()
        await asyncio.wait_for(task, timeout=15)
    assert holder.held() and holder.standbys() == []
